// What the controller checks before it runs anything (docs/security.md, "Workspace
// execution"): a Kubernetes version it was built for, and the namespace guards the chart
// makes. Each check is a pure function of the objects read, so every missing guard has a unit
// test; ReadGuards fetches them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/workspace/config.h"
#include "common/json.h"
#include "common/status.h"
#include "kube/client.h"

namespace uplink::agent::workspace {

inline constexpr int kMinKubernetesMinor = 34;
inline constexpr int kMaxKubernetesMinor = 36;

// Ok for Kubernetes 1.34 to 1.36 (the /version reply); otherwise FailedPrecondition saying
// which version the API server is and which the controller supports.
Status CheckKubernetesVersion(const json::value& version);

// The objects the guards are made of, as read from the API server (absent: nullopt or empty).
struct GuardObjects {
  std::optional<json::object> ns;
  std::vector<json::object> resource_quotas;
  std::vector<json::object> limit_ranges;
  std::vector<json::object> network_policies;
  std::optional<json::object> priority_class;
  std::optional<json::object> admission_policy;
  std::vector<json::object> admission_policy_bindings;
};

// One line per missing or insufficient guard, each naming the object and what it lacks; empty
// when every guard is in place.
std::vector<std::string> MissingGuards(const ExecutionConfig& config, const GuardObjects& guards);

// Reads the guard objects of `config` (a missing object is simply absent; any other error,
// such as a refusal, fails).
Result<GuardObjects> ReadGuards(kube::KubeClient& kube, const ExecutionConfig& config);

// Reads and checks both: FailedPrecondition listing what is missing.
Status VerifyCluster(kube::KubeClient& kube, const ExecutionConfig& config);

}  // namespace uplink::agent::workspace
