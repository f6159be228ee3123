// What the console tells the roles that upload, in its upload replies (docs/protocol.md, "The
// collection plan in the upload reply", "The cluster plan in the upload reply"): how often to
// collect and what. A role keeps its last plan while a reply carries none, or a malformed one.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"

namespace uplink::protocol {

// Both plans' interval bounds, and the interval until a role has a plan.
inline constexpr std::chrono::seconds kDefaultPlanInterval{30};
inline constexpr std::chrono::seconds kMinPlanInterval{10};
inline constexpr std::chrono::seconds kMaxPlanInterval{3600};

// ---- the node role's plan -------------------------------------------------------------------
// The collectors of the node role, in the order the console lists them.
inline constexpr std::string_view kNodeCollectors[] = {
    "cpu", "memory", "load", "uptime", "pressure", "network", "disk", "filesystem", "gpu"};

struct NodePlan {
  // Absent when the reply's plan leaves them out: the role keeps its defaults then.
  std::optional<std::chrono::seconds> interval;
  std::optional<std::vector<std::string>> collectors;
};

// {"interval_seconds", "collectors"}: what is set.
json::object EncodeNodePlan(const NodePlan& plan);
// The plan of an upload reply: nullopt when the reply has none; InvalidArgument naming the
// field when it is malformed or out of bounds. Collector names are kept as sent: an agent
// ignores those it does not know, so that an older agent takes a newer console's plan.
Result<std::optional<NodePlan>> DecodeNodePlan(const json::value& reply);

// ---- the cluster role's plan ----------------------------------------------------------------
inline constexpr size_t kMaxPlanCommands = 64;
inline constexpr size_t kMaxPlanNameBytes = 128;
inline constexpr std::int64_t kMaxFailingPodLogLines = 1000;
inline constexpr std::int64_t kMaxFailingPods = 20;

struct PlanCommand {
  std::string name;               // 1-128 characters of [A-Za-z0-9._/-]: "pods/ml"
  std::vector<std::string> argv;  // starts with "kubectl"
  bool operator==(const PlanCommand&) const = default;
};

// The last lines of failing pods' logs, read where the plan lists pods.
struct FailingPodLogs {
  int tail_lines = 50;
  int max_pods = 5;
  bool operator==(const FailingPodLogs&) const = default;
};

struct ClusterPlan {
  std::chrono::seconds interval = kDefaultPlanInterval;
  std::vector<PlanCommand> commands;
  std::optional<FailingPodLogs> failing_pod_logs;
  bool operator==(const ClusterPlan&) const = default;
};

json::object EncodeClusterPlan(const ClusterPlan& plan);
// The plan of an upload reply: nullopt when the reply has none, InvalidArgument naming the
// field when it is malformed. At most 64 commands, names of 1-128 characters [A-Za-z0-9._/-],
// argv of 1-64 strings of at most 4 KiB each starting with "kubectl"; tail_lines 1-1000,
// max_pods 0-20. Unknown fields are ignored, so an older agent takes a newer console's plan.
Result<std::optional<ClusterPlan>> DecodeClusterPlan(const json::value& reply);

}  // namespace uplink::protocol
