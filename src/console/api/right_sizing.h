// Pod right-sizing (docs/api.md, "Pod right-sizing"): each pod's CPU and memory requests and
// limits, from the pod_resources reads of the latest cluster snapshot, beside its usage over
// the last hour, from the `kubectl top pods` reads of every snapshot in it, with the pods
// that reserve far more than they use, or less, flagged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/time.h"
#include "console/store/store.h"
#include "protocol/cluster_snapshot.h"

namespace uplink::console {

// The cluster plan's read of pod specs: per pod its namespace, name and phase, then per
// container its name and its CPU and memory requests and limits, and nothing else of the
// spec (no environment, no command line, no volumes). kubectl prints one line per pod:
// NAMESPACE \t NAME \t PHASE (\t CONTAINER|CPU_REQUEST|MEMORY_REQUEST|CPU_LIMIT|MEMORY_LIMIT)*
// with an empty field where a value is not set.
inline constexpr std::string_view kPodResourcesJsonPath =
    "jsonpath={range .items[*]}{.metadata.namespace}{\"\\t\"}{.metadata.name}{\"\\t\"}"
    "{.status.phase}{range .spec.containers[*]}{\"\\t\"}{.name}{\"|\"}"
    "{.resources.requests.cpu}{\"|\"}{.resources.requests.memory}{\"|\"}"
    "{.resources.limits.cpu}{\"|\"}{.resources.limits.memory}{end}{\"\\n\"}{end}";

// The snapshot results right-sizing reads: "top_pods" and "pod_resources", each alone (-A)
// or followed by "/<namespace>".
inline constexpr std::string_view kTopPodsResult = "top_pods";
inline constexpr std::string_view kPodResourcesResult = "pod_resources";

// What `kubectl top pods` printed (with or without a NAMESPACE column; without one, the pods
// are in `namespace_name`): one PodUsage per pod line, sequence and time left to the caller.
// A line that does not parse (a header, a message) is skipped.
std::vector<PodUsage> ParseTopPods(std::string_view output, std::string_view namespace_name);

// The usage in a cluster snapshot: the pod lines of its top_pods results that exited 0,
// stamped with `sequence` and the snapshot's time.
std::vector<PodUsage> PodUsageOfSnapshot(const protocol::ClusterSnapshot& snapshot,
                                         std::int64_t sequence);

struct ContainerResources {
  std::string name;
  std::optional<std::int64_t> cpu_request_millicores;
  std::optional<std::int64_t> memory_request_bytes;
  std::optional<std::int64_t> cpu_limit_millicores;
  std::optional<std::int64_t> memory_limit_bytes;
};

struct PodResources {
  std::string namespace_name;
  std::string name;
  std::string phase;
  std::vector<ContainerResources> containers;
};

// The pod_resources output (kPodResourcesJsonPath's lines); lines that do not parse are
// skipped, as are values that are not quantities.
std::vector<PodResources> ParsePodResources(std::string_view output);

// When a pod is flagged (docs/api.md, "Pod right-sizing").
struct RightSizingThresholds {
  // Fewer usage samples in the window than this (5 minutes at the 30 s interval): usage is
  // not judged.
  std::int64_t min_samples = 10;
  // Over-provisioned: the peak stays below this share of the request, and the request is at
  // least this much above the peak (small requests are not worth the noise).
  double over_peak_share = 0.30;
  std::int64_t over_min_idle_millicores = 100;
  std::int64_t over_min_idle_bytes = 128 << 20;
  // Under-provisioned: no request, a peak above the request, or a peak at this share of the
  // limit (CPU is throttled there; memory is killed at the limit).
  double near_limit_share = 0.90;
  // The suggested request: the peak plus this much headroom.
  double headroom = 0.30;
};

// The reply of GET /api/v1/connections/{id}/right-sizing: every pod of `pods` that is not
// finished (Succeeded, Failed) with its figures, its findings and its verdict
// (under_provisioned, over_provisioned, ok, unknown), the under-provisioned first.
json::object RightSizingJson(const std::vector<PodResources>& pods,
                             const std::vector<PodUsageSummary>& usage,
                             const RightSizingThresholds& thresholds);

}  // namespace uplink::console
