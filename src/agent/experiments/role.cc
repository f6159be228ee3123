#include "agent/experiments/role.h"

#include <algorithm>

namespace uplink::agent::experiments {
namespace {

// While a backlog is worked off, the cursor is written at most this often.
constexpr std::chrono::seconds kBacklogSaveInterval{10};

constexpr const char* kCycles = "uplink_agent_experiments_cycles_total";
constexpr const char* kCycleSeconds = "uplink_agent_experiments_cycle_seconds";
constexpr const char* kRunsTracked = "uplink_agent_experiments_runs_tracked";
constexpr const char* kRunsSent = "uplink_agent_experiments_runs_sent_total";
constexpr const char* kPointsSent = "uplink_agent_experiments_points_sent_total";
constexpr const char* kRunsDeleted = "uplink_agent_experiments_runs_deleted_total";
constexpr const char* kProblems = "uplink_agent_experiments_problems_total";
constexpr const char* kSourceErrors = "uplink_agent_experiments_source_errors_total";
constexpr const char* kSpoolFailures = "uplink_agent_experiments_spool_failures_total";

}  // namespace

void DeclareExperimentsMetrics(metrics::Registry& registry) {
  registry.DeclareCounter(kCycles, "Scan cycles of the experiments role.");
  registry.DeclareGauge(kCycleSeconds, "How long the last scan cycle took.");
  registry.DeclareGauge(kRunsTracked, "Runs in the cursor (settled ones included).");
  registry.DeclareCounter(kRunsSent, "Run upserts spooled (a run whose metadata changed).");
  registry.DeclareCounter(kPointsSent, "Metric points spooled.");
  registry.DeclareCounter(kRunsDeleted, "Runs reported deleted.");
  registry.DeclareCounter(kProblems, "Runs or files reported as unreadable (once each).");
  registry.DeclareCounter(kSourceErrors, "Cycles in which a source could not be listed.");
  registry.DeclareCounter(kSpoolFailures,
                          "Cycles whose records could not be spooled (retried next cycle).");
}

ExperimentsRole::ExperimentsRole(RoleOptions options,
                                 std::vector<std::unique_ptr<Scanner>> scanners, RecordSink& sink,
                                 spool::Spool* spool, Clock& clock, metrics::Registry& registry)
    : options_(std::move(options)),
      scanners_(std::move(scanners)),
      sink_(sink),
      spool_(spool),
      clock_(clock),
      metrics_(registry) {}

void ExperimentsRole::LoadCursor() {
  if (options_.cursor_path.empty()) return;
  auto loaded = Cursor::Load(options_.cursor_path);
  if (!loaded.ok()) {
    log_.Error("the cursor cannot be read; starting over (every run is sent again, and the "
               "console stores each once)",
               {{"error", loaded.status()}});
    cursor_ = Cursor();
  } else {
    cursor_ = std::move(*loaded);
  }
  if (spool_ != nullptr) {
    std::string spool_id = spool_->Stats().spool_id;
    if (!cursor_.runs().empty() && cursor_.spool_id() != spool_id) {
      log_.Warn("the spool is not the one the cursor was written for (it was recreated); "
                "starting over so that nothing waiting in the old one is lost",
                {{"spool_id", spool_id}});
      cursor_ = Cursor();
    }
    cursor_.set_spool_id(std::move(spool_id));
  }
  metrics_.Set(kRunsTracked, static_cast<double>(cursor_.runs().size()));
}

CycleResult ExperimentsRole::RunCycle() {
  SteadyTime started = clock_.SteadyNow();
  CycleResult result;
  Cursor working = cursor_;
  Emitter emitter(sink_, options_.max_record_bytes);
  ScanPass pass{working, emitter, clock_.Now(), options_.limits};
  std::vector<std::string> source_errors;
  for (const auto& scanner : scanners_) {
    Status scanned = scanner->Scan(pass);
    if (!emitter.status().ok()) break;
    if (!scanned.ok()) {
      source_errors.push_back(std::string(scanner->source()) + ": " + scanned.message());
      result.source_errors.push_back(scanned);
      metrics_.Increment(kSourceErrors, {{"source", std::string(scanner->source())}});
    }
  }
  if (emitter.status().ok()) (void)emitter.Flush();
  if (!emitter.status().ok()) {
    // The cursor stays where it was: the next cycle reads the same changes again.
    result.status = emitter.status();
    metrics_.Increment(kSpoolFailures);
    log_.Warn("could not spool the cycle's records; the next cycle tries again",
              {{"error", result.status}});
    std::lock_guard lock(mutex_);
    not_ready_ = "spooling failed: " + result.status.message();
    return result;
  }
  for (const std::string& key : pass.touched) {
    auto it = working.runs().find(key);
    if (it != working.runs().end()) it->second.last_sequence = emitter.last_sequence();
  }
  working.Settle(spool_ != nullptr ? spool_->Stats().consumed_through : emitter.last_sequence());
  cursor_unsaved_ = cursor_unsaved_ || working.runs() != cursor_.runs();
  cursor_ = std::move(working);
  const bool due = !pass.more || !last_save_ ||
                   clock_.SteadyNow() - *last_save_ >= kBacklogSaveInterval;
  if (!options_.cursor_path.empty() && cursor_unsaved_ && due) {
    if (Status saved = cursor_.Save(options_.cursor_path); !saved.ok()) {
      // The records are spooled; without the saved cursor a restart sends them again.
      log_.Warn("could not save the cursor", {{"error", saved}});
    } else {
      cursor_unsaved_ = false;
      last_save_ = clock_.SteadyNow();
    }
  }

  result.counts = emitter.counts();
  result.runs_read = pass.runs_read;
  result.bytes_read = pass.bytes_read;
  result.problems = pass.problems_reported;
  result.more = pass.more;
  metrics_.Increment(kCycles);
  metrics_.Increment(kRunsSent, {}, static_cast<double>(result.counts.runs));
  metrics_.Increment(kPointsSent, {}, static_cast<double>(result.counts.points));
  metrics_.Increment(kRunsDeleted, {}, static_cast<double>(result.counts.deleted));
  metrics_.Increment(kProblems, {}, static_cast<double>(result.counts.problems));
  metrics_.Set(kRunsTracked, static_cast<double>(cursor_.runs().size()));
  auto took = std::chrono::duration<double>(clock_.SteadyNow() - started);
  metrics_.Set(kCycleSeconds, took.count());
  if (source_errors != last_source_errors_) {
    for (const std::string& error : source_errors) {
      log_.Warn("a source could not be scanned; its runs are kept as they were",
                {{"error", error}});
    }
    last_source_errors_ = source_errors;
  }
  if (result.counts.records > 0) {
    log_.Info("cycle spooled changes", {{"runs", static_cast<std::int64_t>(result.counts.runs)},
                                        {"points", static_cast<std::int64_t>(result.counts.points)},
                                        {"deleted", static_cast<std::int64_t>(result.counts.deleted)},
                                        {"records", static_cast<std::int64_t>(result.counts.records)},
                                        {"more", result.more}});
  }
  std::lock_guard lock(mutex_);
  last_cycle_ = clock_.SteadyNow();
  not_ready_ = source_errors.empty() ? "" : "cannot scan " + source_errors.front();
  return result;
}

void ExperimentsRole::Run(StopSignal& stop) {
  while (!stop.stopped()) {
    const spool::SpoolStats stats = spool_ != nullptr ? spool_->Stats() : spool::SpoolStats{};
    // Files kept for reuse or written ahead hold nothing waiting.
    if (stats.bytes - stats.spare_bytes > options_.max_spool_backlog_bytes) {
      // The shipper is behind; scanning on would only make the spool drop records.
      if (!stop.WaitFor(std::chrono::seconds(1))) break;
      continue;
    }
    CycleResult cycle = RunCycle();
    std::chrono::milliseconds wait = options_.interval;
    if (cycle.status.ok() && cycle.more) wait = std::chrono::milliseconds(0);
    if (wait.count() > 0 && !stop.WaitFor(wait)) break;
  }
}

Readiness ExperimentsRole::CheckReadiness() const {
  std::lock_guard lock(mutex_);
  if (!last_cycle_) return {false, "no scan cycle has completed yet"};
  auto limit = std::max<std::chrono::steady_clock::duration>(3 * options_.interval,
                                                            std::chrono::minutes(5));
  auto age = clock_.SteadyNow() - *last_cycle_;
  if (age > limit) {
    return {false, "the last scan cycle completed " +
                       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(age).count()) +
                       " s ago"};
  }
  if (!not_ready_.empty()) return {false, not_ready_};
  return {true, ""};
}

}  // namespace uplink::agent::experiments
