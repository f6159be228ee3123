// A connection's namespace scope as the user API reads and writes it, and the cluster plan
// built from it for the cluster role (docs/protocol.md, "The cluster plan in the upload
// reply").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "console/store/store.h"

namespace uplink::console {

inline constexpr size_t kMaxScopeNamespaces = 256;
inline constexpr std::string_view kAllNamespaces = "*";
inline constexpr std::int64_t kClusterPlanIntervalSeconds = 30;
inline constexpr std::int64_t kFailingPodLogLines = 50;
inline constexpr std::int64_t kFailingPodLogPods = 5;
// A snapshot holds at most kMaxSnapshotResults (64) results, the failing pods' logs among
// them: the plan's commands stop here.
inline constexpr size_t kMaxPlanCommands = 64 - kFailingPodLogPods;

// A DNS-1123 label: 1-63 characters of a-z, 0-9 and '-', starting and ending alphanumeric.
bool IsNamespaceName(std::string_view name);

// The "namespaces" of a PUT body: ["*"], or up to kMaxScopeNamespaces namespace names, each
// once; returned sorted. InvalidArgument saying what is wrong otherwise.
Result<std::vector<std::string>> ParseNamespaceList(const json::value& value);

// null until chosen, else the list.
json::value NamespaceScopeJson(const NamespaceScope& scope);

// {interval_seconds, commands: [{name, argv}], failing_pod_logs: {tail_lines, max_pods}}:
// the cluster-scoped reads (nodes, namespaces, top nodes) always; the namespaced ones (pods,
// warning events, deployments, statefulsets, top pods, the pods' requests and limits) with -A
// for every namespace, one per chosen namespace, or none before namespaces are chosen; at
// most kMaxPlanCommands.
json::object ClusterPlanJson(const NamespaceScope& scope);

}  // namespace uplink::console
