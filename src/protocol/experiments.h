// The experiments role's record payloads (docs/protocol.md, "Experiment runs"): records of
// kind experiment_run, metric_points, run_deleted and scan_problem, each holding many items.
// The role packs them (agent/experiments/emitter.h) within the bounds below; the console reads
// them strictly: a known field of the wrong type or out of its bounds refuses the record (the
// upload answers 422 invalid_record naming its sequence). Unknown fields of a run are ignored,
// so that a newer agent can add some before the console shows them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::protocol {

// The kinds of record, and the array of items each holds.
inline constexpr std::string_view kExperimentRunKind = "experiment_run";  // "runs"
inline constexpr std::string_view kMetricPointsKind = "metric_points";    // "series"
inline constexpr std::string_view kRunDeletedKind = "run_deleted";        // "run_ids"
inline constexpr std::string_view kScanProblemKind = "scan_problem";      // "problems"
inline constexpr std::int64_t kExperimentRecordVersion = 1;

// The statuses of a run. MLflow's map one to one; a W&B run is finished or failed by its exit
// record, running while its log still grows, and crashed once it stopped growing without one.
inline constexpr std::string_view kRunRunning = "running";
inline constexpr std::string_view kRunScheduled = "scheduled";
inline constexpr std::string_view kRunFinished = "finished";
inline constexpr std::string_view kRunFailed = "failed";
inline constexpr std::string_view kRunKilled = "killed";
inline constexpr std::string_view kRunCrashed = "crashed";
// The console's own, for a run known only by its points; never sent.
inline constexpr std::string_view kRunUnknown = "unknown";

inline constexpr size_t kMaxRunItems = 10'000;          // runs, series, ids or problems per record
inline constexpr size_t kMaxPointsPerRecord = 200'000;  // over all series of a record
inline constexpr size_t kMaxRunIdBytes = 256;
inline constexpr size_t kMaxRunMapEntries = 500;
inline constexpr size_t kMaxRunKeyBytes = 250;
inline constexpr size_t kMaxRunValueBytes = 6000;

// One run's upsert. The maps are kept as the JSON objects the agent sent (checked: string
// values, or numbers for the summary).
struct ExperimentRun {
  std::string run_id;
  std::string source;  // "mlflow", "wandb"
  std::string experiment_id;
  std::string experiment;
  std::string name;
  std::string user;
  std::string status;  // running, scheduled, finished, failed, killed, crashed
  bool offline = false;
  std::optional<WallTime> started_at;
  std::optional<WallTime> ended_at;
  std::optional<std::int64_t> exit_code;
  std::string location;
  std::string params_json = "{}";
  std::string tags_json = "{}";
  std::string summary_json = "{}";
  std::string redacted_json = "[]";
  std::int64_t omitted = 0;
};

struct RunPoint {
  std::int64_t step = 0;
  double value = 0;  // NaN and infinities included
  std::int64_t timestamp_ms = 0;
};

struct RunSeries {
  std::string run_id;
  std::string metric;
  std::vector<RunPoint> points;
};

struct RunProblem {
  std::string source;
  std::string location;
  std::string error;
  WallTime reported_at;  // the console's: the last time it was reported
};

// The items of one experiments record: one list is filled, by the record's kind.
struct ExperimentRecord {
  std::vector<ExperimentRun> runs;
  std::vector<RunSeries> series;
  std::vector<std::string> deleted;
  std::vector<RunProblem> problems;
};

// True for a payload whose kind is experiment_run, metric_points, run_deleted or
// scan_problem.
bool IsExperimentPayload(const json::object& payload);

// The record's items; InvalidArgument naming the field by its path (`path` is the payload's,
// "records[3].payload").
Result<ExperimentRecord> DecodeExperimentPayload(const json::object& payload,
                                                 const std::string& path);

// The statuses a run can have (what the agents send, and kRunUnknown).
bool IsRunStatus(std::string_view status);

}  // namespace uplink::protocol
