// A connection's namespace scope as the user API reads and writes it, and the cluster plan
// built from it for the cluster role (docs/protocol.md, "The cluster plan in the upload
// reply").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "console/store/store.h"
#include "protocol/cluster_snapshot.h"
#include "protocol/plans.h"

namespace uplink::console {

inline constexpr size_t kMaxScopeNamespaces = 256;
inline constexpr std::string_view kAllNamespaces = "*";
inline constexpr std::chrono::seconds kClusterPlanInterval{30};
inline constexpr int kFailingPodLogLines = 50;
inline constexpr int kFailingPodLogPods = 5;
// A snapshot holds at most protocol::kMaxSnapshotResults results, the failing pods' logs
// among them: the plan's commands stop here.
inline constexpr size_t kMaxPlanCommands = protocol::kMaxSnapshotResults - kFailingPodLogPods;

// The "namespaces" of a PUT body: ["*"], or up to kMaxScopeNamespaces namespace names, each
// once; returned sorted. InvalidArgument saying what is wrong otherwise.
Result<std::vector<std::string>> ParseNamespaceList(const json::value& value);

// null until chosen, else the list.
json::value NamespaceScopeJson(const NamespaceScope& scope);

// The cluster-scoped reads (nodes, namespaces, top nodes) always; the namespaced ones (pods,
// warning events, deployments, statefulsets, top pods, the pods' requests and limits) with -A
// for every namespace, one per chosen namespace, or none before namespaces are chosen; at
// most kMaxPlanCommands; and the last lines of failing pods' logs.
protocol::ClusterPlan ClusterPlanFor(const NamespaceScope& scope);

}  // namespace uplink::console
