// The experiments role: every interval, one pass of each enabled scanner (MLflow, W&B) over
// what changed since the last, its records appended to the spool that the shipper delivers,
// and the cursor saved once they are durable (docs/experiments.md).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/experiments/cursor.h"
#include "agent/experiments/emitter.h"
#include "agent/experiments/scan.h"
#include "agent/health.h"
#include "agent/stop_signal.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "spool/spool.h"

namespace uplink::agent::experiments {

struct RoleOptions {
  std::string cursor_path;  // empty: nothing is remembered (a dry run)
  std::chrono::seconds interval{30};
  ScanLimits limits;
  size_t max_record_bytes = kDefaultMaxPointsRecordBytes;
  // No new cycle starts while the spool holds more than this (the console is behind):
  // scanning faster than the shipper delivers would only make the spool drop records.
  std::uint64_t max_spool_backlog_bytes = 64 << 20;
};

struct CycleResult {
  Status status;  // ok, or why nothing of the cycle counts (the spool failed)
  EmitterCounts counts;
  size_t runs_read = 0;
  std::int64_t bytes_read = 0;
  std::uint64_t problems = 0;
  bool more = false;  // work was left: the next cycle starts at once
  std::vector<Status> source_errors;  // scanners that could not list their source
};

void DeclareExperimentsMetrics(metrics::Registry& registry);

class ExperimentsRole {
 public:
  // `spool` may be null (a dry run into a ListSink): then runs settle at once. Everything
  // passed must outlive the role; DeclareExperimentsMetrics must have been called.
  ExperimentsRole(RoleOptions options, std::vector<std::unique_ptr<Scanner>> scanners,
                  RecordSink& sink, spool::Spool* spool, Clock& clock,
                  metrics::Registry& registry);

  // Loads the cursor. A damaged cursor is logged and replaced by an empty one (everything is
  // sent again, and stored once); a cursor of another spool is dropped the same way.
  void LoadCursor();

  // One pass of every scanner. Records go to the sink; the cursor moves only when all of
  // them are durable. It is saved after a pass that left nothing to do, and at most every
  // 10 s while a backlog is worked off (a crash then sends those records again, and the
  // console stores them once).
  CycleResult RunCycle();

  // Cycles until `stop`: at once while work is left, else every interval.
  void Run(StopSignal& stop);

  // Ready once a cycle completed within max(3 intervals, 5 minutes) and every source could
  // be listed in the last one. Thread-safe.
  Readiness CheckReadiness() const;

  const Cursor& cursor() const { return cursor_; }

 private:
  RoleOptions options_;
  std::vector<std::unique_ptr<Scanner>> scanners_;
  RecordSink& sink_;
  spool::Spool* spool_;
  Clock& clock_;
  metrics::Registry& metrics_;
  log::Logger log_{"agent.experiments"};
  Cursor cursor_;
  bool cursor_unsaved_ = false;  // cursor_ moved since it was last written
  std::optional<SteadyTime> last_save_;
  std::vector<std::string> last_source_errors_;  // logged when they change

  mutable std::mutex mutex_;  // guards the fields below
  std::optional<SteadyTime> last_cycle_;
  std::string not_ready_;
};

}  // namespace uplink::agent::experiments
