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

// The kubelet's heartbeat Lease in kube-node-lease for a stored node (owned by it, renewed at
// `now`), which `kubectl describe node` reads.
json::object NodeLease(const json::object& node, WallTime now);

// The bootstrap ClusterRoles and ClusterRoleBindings every kube-apiserver creates
// (data/bootstrap-rbac.yaml): cluster-admin, system:discovery, system:public-info-viewer,
// system:monitoring.
Result<std::vector<json::object>> BootstrapRbacObjects();

// The PriorityClasses every cluster has: system-cluster-critical (2000000000) and
// system-node-critical (2000001000).
std::vector<json::object> BuiltInPriorityClasses();

// The instant the workloads' times are written relative to: a time T in data/workloads.yaml
// is loaded as T + (now - kWorkloadsEpoch), so ages read the same whenever the simulator
// starts.
inline constexpr std::string_view kWorkloadsEpoch = "2025-06-01T12:00:00Z";

// The simulated GPU cluster's workloads (data/workloads.yaml): namespaces, pods on
// gpu-node-0001, gpu-node-0002 and cpu-node-0001 (training, inference, a crash-looping and an
// unschedulable pod), a Deployment with its ReplicaSet, a StatefulSet, kube-system's CoreDNS
// and kube-dns Service, events and container logs, their times moved to `now`.
Result<std::vector<json::object>> WorkloadObjects(WallTime now);

// Moves every time in an object by `shift`: the RFC 3339 values of metadata and status time
// fields (creationTimestamp, startedAt, lastTimestamp, eventTime, ...) and the line times of
// a ContainerLog's log.
void ShiftTimes(json::object& object, std::chrono::seconds shift);

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
