// What every experiments scanner shares: one pass over its source with a bounded amount of
// work, the cursor it reads and updates, the emitter it reports through, and the files it
// reads (never through a symbolic link: a link in a scanned folder must not make the agent
// read and send a file from outside it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/experiments/cursor.h"
#include "agent/experiments/emitter.h"
#include "common/log.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::agent::experiments {

struct ScanLimits {
  size_t max_runs_per_cycle = 200;  // runs read (changed ones); unchanged runs cost a stat
  // Bytes of metric files and W&B logs read per cycle; the rest waits for the next one.
  std::int64_t max_read_bytes_per_cycle = 32 << 20;
};

// One pass of one scanner.
struct ScanPass {
  Cursor& cursor;
  Emitter& emitter;
  WallTime now;
  ScanLimits limits;
  size_t runs_read = 0;
  std::int64_t bytes_read = 0;
  bool more = false;                   // work was left for the next cycle
  std::set<std::string> touched;       // cursor keys whose records went out in this pass
  std::uint64_t problems_reported = 0;

  bool Exhausted() const {
    return runs_read >= limits.max_runs_per_cycle || bytes_read >= limits.max_read_bytes_per_cycle;
  }
  std::int64_t ReadBudget() const { return limits.max_read_bytes_per_cycle - bytes_read; }
};

class Scanner {
 public:
  virtual ~Scanner() = default;
  virtual std::string_view source() const = 0;  // "mlflow" or "wandb"
  // One pass. An error means the source could not be listed at all (a missing mount, a
  // server that does not answer): then nothing is reported deleted. A broken run is reported
  // once (ScanPass::emitter) and never fails the pass.
  virtual Status Scan(ScanPass& pass) = 0;
};

// Takes one run's read out of the pass's budget; false (and `more` set) when none is left.
bool TakeRun(ScanPass& pass);

// True when the run under `key` was read before with this very signature: nothing to do.
bool Unchanged(const ScanPass& pass, std::string_view key, std::uint64_t signature);

// Spools `run`'s upsert when it differs from the last one sent for `state`, which becomes the
// run's (run_id, sent_fingerprint, no problem). The run's item, as sent or as it stands.
Result<std::string> UpsertIfChanged(ScanPass& pass, const std::string& key, RunState& state,
                                    const RunRecord& run);

// Reports the runs of `prefix` (a scanner's cursor keys) not in `seen` as deleted, and
// forgets them.
Status ForgetMissing(ScanPass& pass, std::string_view prefix, const std::set<std::string>& seen);

// Reports a run's problem once per signature, and records the signature so the run is not
// read again until it changes.
Status ReportProblem(ScanPass& pass, std::string_view key, std::uint64_t signature,
                     std::string_view source, std::string_view location, const Status& error,
                     log::Logger& log);

// Gives a settled run its metric cursors back by the hash of each name `for_each_name`
// passes to its callback (the names the run has now), and marks it unsettled.
template <typename ForEachName>
void RestoreSettledMetrics(RunState& state, ForEachName for_each_name) {
  std::map<std::uint64_t, MetricCursor> cursors;
  for (const RunState::SettledMetric& metric : state.settled_positions) {
    cursors[metric.name_hash] = metric.cursor;
  }
  for_each_name([&](const std::string& name) {
    auto found = cursors.find(MetricNameHash(name));
    if (found != cursors.end()) state.metrics[name] = found->second;
  });
  state.settled_positions.clear();
  state.settled = false;
}

// --- files ---------------------------------------------------------------------------------

struct FileStat {
  bool is_dir = false;
  bool is_regular = false;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
};

// lstat: a symbolic link is neither a directory nor a regular file. nullopt when it is gone.
std::optional<FileStat> StatNoFollow(const std::string& path);

struct DirEntry {
  std::string name;
  FileStat stat;
};

// The entries of `dir` (not "." and ".."), at most `max_entries`, sorted by name.
Result<std::vector<DirEntry>> ListDir(const std::string& dir, size_t max_entries = 1'000'000);

// Regular files under `dir` as paths relative to it ("train/loss"), sorted by that path,
// depth at most `max_depth`, at most `max_files`; links are skipped.
Result<std::vector<DirEntry>> ListFilesRecursive(const std::string& dir, size_t max_files,
                                                 int max_depth = 8);

// Reads a regular file (not through a link) up to `max_bytes`; ResourceExhausted beyond.
Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes);

// Reads at most `max_bytes` of a regular file from `offset`.
Result<std::string> ReadFileRange(const std::string& path, std::int64_t offset, size_t max_bytes);

}  // namespace uplink::agent::experiments
