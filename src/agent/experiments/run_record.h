// What the experiments role reports about an ML run, and the items of the spool records that
// carry it (docs/protocol.md, "Experiment runs"): a run's upsert when its metadata changed,
// the series of points not sent before, the id of a run that is gone, and a problem reported
// once for a run that cannot be read. emitter.h packs the items into records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/experiments.h"

namespace uplink::agent::experiments {

// The protocol's bounds (protocol/experiments.h: MLflow's own limits for param and tag keys
// and values, entries per map), which keep one run's upsert well under the spool's record
// limit (1 MiB).
inline constexpr size_t kMaxKeyBytes = protocol::kMaxRunKeyBytes;
inline constexpr size_t kMaxValueBytes = protocol::kMaxRunValueBytes;
inline constexpr size_t kMaxFieldsPerMap = protocol::kMaxRunMapEntries;
inline constexpr size_t kMaxRunPayloadBytes = 512 << 10;
// Records are cut at this size, so a long history goes in several records.
inline constexpr size_t kDefaultMaxPointsRecordBytes = 512 << 10;

// The statuses the console knows (protocol/experiments.h).
using protocol::kRunCrashed;
using protocol::kRunFailed;
using protocol::kRunFinished;
using protocol::kRunKilled;
using protocol::kRunRunning;
using protocol::kRunScheduled;

// True for a status a run never leaves by itself.
bool IsTerminalStatus(std::string_view status);

using StringMap = std::vector<std::pair<std::string, std::string>>;  // sorted by key

struct RunRecord {
  std::string source;  // "mlflow" or "wandb"
  std::string run_id;
  std::string experiment_id;
  std::string experiment;  // MLflow: the experiment's name; W&B: entity/project
  std::string name;
  std::string user;
  std::string status;
  bool offline = false;  // a W&B offline run: nothing of it reached W&B's servers
  std::optional<std::int64_t> started_at_ms;
  std::optional<std::int64_t> ended_at_ms;
  std::optional<std::int64_t> exit_code;
  std::string location;  // where the run was read, relative to the scanned root or server
  StringMap params;      // values redacted where they look like credentials
  StringMap tags;
  std::vector<std::pair<std::string, double>> summary;  // W&B's numeric summary values
  std::vector<std::string> redacted;  // "params.<key>" and "tags.<key>" whose value was removed
  size_t omitted = 0;  // entries left out by the bounds above
};

struct MetricPoint {
  std::int64_t step = 0;
  double value = 0;  // may be NaN or infinite: sent as "NaN", "Infinity", "-Infinity"
  std::int64_t timestamp_ms = 0;
};

// Sorts params, tags and summary by key, drops what is over the bounds (counted in
// `omitted`), and redacts credentials (redaction.h).
void NormalizeRun(RunRecord& run);

// The items, as compact JSON. Numbers that JSON cannot hold are written as strings.
std::string RunItem(const RunRecord& run);
// {"run_id", "metric", "points": [[step, value, timestamp_ms], ...]}, cut into items of at most
// `max_bytes` (a single point always goes).
std::vector<std::string> SeriesItems(std::string_view run_id, std::string_view metric,
                                     const std::vector<MetricPoint>& points, size_t max_bytes);
// A run item back as a record (what the cursor saved of a W&B run); nullopt when it is not one.
std::optional<RunRecord> RunFromItem(std::string_view item);
std::string ProblemItem(std::string_view source, std::string_view location,
                        std::string_view error);

// A 64-bit FNV-1a hash, for fingerprints of what was sent and read (not a security measure).
std::uint64_t Fingerprint(std::string_view data, std::uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace uplink::agent::experiments
