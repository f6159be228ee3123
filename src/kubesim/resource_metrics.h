// metrics.k8s.io/v1beta1, as metrics-server serves it for `kubectl top`: NodeMetrics and
// PodMetrics computed on each request from the stored pods and nodes.
//
// Usage is synthetic and reproducible: every container of a Running pod uses a share of what
// it requests (GPU containers most of theirs), chosen from a hash of its pod and container
// names, or set by the pod's kubesim.uplink.dev/usage annotation ("cpu=12,memory=97", percent
// of the request, or of the limit without one); it drifts within +-10% (memory +-2.5%) over
// a 10-minute period, so an hour of `kubectl top` samples has a peak above its average, and
// calls at the same time agree. A node uses what its running pods use plus a system
// overhead. Only running containers are measured: a pod that is not Running, or whose
// containers are all waiting (CrashLoopBackOff), has no metrics, as metrics-server has none.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"
#include "kubesim/store.h"

namespace uplink::kubesim {

inline constexpr std::string_view kUsageAnnotation = "kubesim.uplink.dev/usage";

// Metrics of every pod with a running container (in `namespace_name`, or everywhere) and of
// every node, in the store's order. `now` is the sample timestamp.
std::vector<json::object> PodMetricsItems(const ObjectStore& store,
                                          const std::optional<std::string>& namespace_name,
                                          WallTime now);
std::vector<json::object> NodeMetricsItems(const ObjectStore& store, WallTime now);

}  // namespace uplink::kubesim
