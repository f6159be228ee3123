// The simulated cluster's contents: generated GPU and CPU nodes shaped like real ones (GPU
// Feature Discovery and gpu-operator labels, capacity, conditions, nodeInfo), the default
// namespaces, and objects loaded from files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::kubesim {

struct ClusterShape {
  int gpu_nodes = 2;
  int gpus_per_node = 8;
  int cpu_nodes = 1;  // the first is the control plane
  std::string server_version = "v1.32.4";
};

Status ValidateClusterShape(const ClusterShape& shape);

// "gpu-node-0001"... (NVIDIA H100 80GB HBM3), then "cpu-node-0001"..., the first CPU node
// being the control plane (role label and NoSchedule taint, no GPU labels).
std::vector<json::object> GenerateNodes(const ClusterShape& shape, WallTime created);

// default, kube-system, kube-public, kube-node-lease and uplink-system.
std::vector<json::object> DefaultNamespaces();

// Objects from a JSON or YAML document stream: single objects, `kind: List` or `*List` with
// items (items of a typed list may omit kind/apiVersion), several YAML documents.
Result<std::vector<json::object>> ParseObjects(std::string_view text);

// "v1.32.4" -> {"1", "32"}; InvalidArgument unless it looks like vMAJOR.MINOR.PATCH.
struct VersionParts {
  std::string major;
  std::string minor;
};
Result<VersionParts> ParseServerVersion(std::string_view version);

}  // namespace uplink::kubesim
