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
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::agent::cluster {

inline constexpr std::chrono::seconds kDefaultInterval{30};
inline constexpr std::chrono::seconds kMinInterval{10};
inline constexpr std::chrono::seconds kMaxInterval{3600};
inline constexpr size_t kMaxPlanCommands = 64;
// A snapshot is a view, not a command's answer: each result's stdout is cut here, at a line.
inline constexpr size_t kMaxSnapshotStdoutBytes = 256 << 10;
inline constexpr size_t kMaxSnapshotStderrBytes = 16 << 10;
// The whole payload fits one spool record as the console takes it (docs/protocol.md).
inline constexpr size_t kMaxSnapshotBytes = 1 << 20;
inline constexpr size_t kMaxResultNameBytes = 253;
inline constexpr size_t kMaxSnapshotResults = 64;
// A command's stdout as the console takes it (docs/protocol.md).
inline constexpr size_t kMaxResultOutputBytes = 4 << 20;

struct PlanCommand {
  std::string name;
  std::vector<std::string> argv;
  bool operator==(const PlanCommand&) const = default;
};

struct FailingPodLogs {
  int tail_lines = 50;
  int max_pods = 5;
  bool operator==(const FailingPodLogs&) const = default;
};

struct ClusterPlan {
  std::chrono::seconds interval = kDefaultInterval;
  std::vector<PlanCommand> commands;
  std::optional<FailingPodLogs> failing_pod_logs;
  bool operator==(const ClusterPlan&) const = default;
};

// What the role collects before the console's first reply: the cluster-scoped reads, which
// need no namespace scope.
ClusterPlan DefaultClusterPlan();

// The plan in an upload reply: nullopt when the reply has none (the agent keeps its plan),
// InvalidArgument naming the field when it is malformed (also kept). At most 64 commands,
// names of 1-128 characters [A-Za-z0-9._/-], argv of 1-64 strings of at most 4 KiB each
// starting with "kubectl"; tail_lines 1-1000, max_pods 0-20. Unknown fields are ignored, so
// an older agent takes a newer console's plan.
Result<std::optional<ClusterPlan>> ClusterPlanFromReply(const json::value& reply);

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
// payload. Thread-safe; one cycle at a time.
class SnapshotCollector {
 public:
  SnapshotCollector(KubectlRunner& runner, const Clock& clock, metrics::Registry& registry);

  // One cycle: the payload `{"kind": "cluster_snapshot", "collected_at", "results"}`.
  // Stops early (what ran so far is kept) when `*cancel` becomes true.
  json::object Collect(const ClusterPlan& plan, const std::atomic<bool>* cancel = nullptr);

 private:
  json::object RunOne(std::string_view name, const std::vector<std::string>& argv,
                      const std::atomic<bool>* cancel);
  void AddFailingPodLogs(const ClusterPlan& plan, json::array& results,
                         const std::atomic<bool>* cancel);

  KubectlRunner& runner_;
  const Clock& clock_;
  metrics::Registry& metrics_;
  log::Logger log_{"cluster"};
};

// The JSON of one kubectl run or its failure, as results and command replies carry it:
// {exit_code, stdout, stderr, duration_ms} or {error: {code, message}, duration_ms}, where
// code is refused, timeout, output_too_large or failed.
json::object RunResultJson(const Result<KubectlRun>& run, std::int64_t failed_after_ms);
// The error code for a runner failure.
std::string_view RunErrorCode(const Status& status);

void DeclareClusterMetrics(metrics::Registry& registry);

}  // namespace uplink::agent::cluster
