// Where the default scheduler would bind a pod, and whether a node's kubelet would admit it:
// node selectors, required node affinity, taints and tolerations, cordons and resources, with
// the scheduler's and kubelet's own messages.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/json_fwd.h"

namespace uplink::kubesim {

struct SchedulingResult {
  std::string node;     // empty when no node fits
  std::string message;  // the FailedScheduling message when none does
};

// Binds `pod` to the least allocated node that fits, given the pods already bound (terminal
// ones no longer count). When none fits: "0/4 nodes are available: 1 node(s) had untolerated
// taint {node-role.kubernetes.io/control-plane: }, 3 Insufficient nvidia.com/gpu. preemption:
// ...".
SchedulingResult Schedule(const json::object& pod, const std::vector<json::object>& nodes,
                          const std::vector<json::object>& bound_pods);

struct Rejection {
  std::string reason;   // "OutOfnvidia.com/gpu", "OutOfpods"
  std::string message;  // "Pod was rejected: Node didn't have enough resource: ..."
};

// The kubelet's admission of a pod bound to `node` (by nodeName, past the scheduler): why it
// is rejected, or nothing when it fits. `others` are the other pods bound to that node.
std::optional<Rejection> AdmitOnNode(const json::object& pod, const json::object& node,
                                     const std::vector<json::object>& others);

// Whether the pod has finished (Succeeded or Failed) and so no longer holds resources.
bool IsTerminal(const json::object& pod);

}  // namespace uplink::kubesim
