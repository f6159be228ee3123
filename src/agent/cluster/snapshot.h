// The cluster role's collection: the plan the console sends in its upload replies
// (docs/protocol.md, "The cluster plan in the upload reply") and the snapshot one cycle of it
// produces, shipped through the spool as a `cluster_snapshot` record.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cluster/kubectl_runner.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/time.h"
#include "protocol/cluster_snapshot.h"
#include "protocol/commands.h"
#include "protocol/plans.h"

namespace uplink::agent::cluster {

// A snapshot is a view, not a command's answer: each result's stdout is cut here, at a line
// (the protocol's bound, protocol::kMaxSnapshotOutputBytes), its stderr shorter.
inline constexpr size_t kMaxSnapshotStdoutBytes = protocol::kMaxSnapshotOutputBytes;
inline constexpr size_t kMaxSnapshotStderrBytes = 16 << 10;

// The plan (protocol/plans.h).
using protocol::ClusterPlan;
using protocol::FailingPodLogs;
using protocol::PlanCommand;

// What the role collects before the console's first reply: the cluster-scoped reads, which
// need no namespace scope.
ClusterPlan DefaultClusterPlan();

// A pod whose logs the snapshot includes: phase Failed, or a container waiting for a reason
// that means it failed (CrashLoopBackOff, Error, ...), or restarted and not ready.
struct FailingPod {
  std::string namespace_name;
  std::string name;
  std::string container;  // the failing container
  bool restarted = false;  // its previous instance's log says why
  bool operator==(const FailingPod&) const = default;
};

// The argv that lists pods for FindFailingPods: one line per pod, tab-separated fields.
std::vector<std::string> FailingPodQuery(const std::optional<std::string>& namespace_name);
// Parses FailingPodQuery's output. Lines that do not parse are skipped; at most `max_pods`.
std::vector<FailingPod> ParseFailingPods(std::string_view output, size_t max_pods);

// Runs the plan through the runner (every argv passes the guard there) and builds the
// snapshot. Thread-safe; one cycle at a time.
class SnapshotCollector {
 public:
  SnapshotCollector(KubectlRunner& runner, const Clock& clock, metrics::Registry& registry);

  // One cycle, within one spool record (protocol::kMaxPayloadBytes) once encoded: longer
  // outputs are cut at a line, and their results say so. Stops early (what ran so far is
  // kept) when `*cancel` becomes true.
  protocol::ClusterSnapshot Collect(const ClusterPlan& plan,
                                    const std::atomic<bool>* cancel = nullptr);

 private:
  protocol::SnapshotResult RunOne(std::string_view name, const std::vector<std::string>& argv,
                                  const std::atomic<bool>* cancel);
  void AddFailingPodLogs(const ClusterPlan& plan, std::vector<protocol::SnapshotResult>& results,
                         const std::atomic<bool>* cancel);

  KubectlRunner& runner_;
  const Clock& clock_;
  metrics::Registry& metrics_;
  log::Logger log_{"cluster"};
};

// One kubectl run or its failure, as snapshot results and command results carry it: an exit
// code with the output, or an error (refused, timeout, output_too_large or failed); stdout
// over protocol::kMaxCommandStdoutBytes as text is an output_too_large failure.
protocol::CommandResult RunResult(const Result<KubectlRun>& run, std::int64_t failed_after_ms);
// The error code for a runner failure.
std::string_view RunErrorCode(const Status& status);

void DeclareClusterMetrics(metrics::Registry& registry);

}  // namespace uplink::agent::cluster
