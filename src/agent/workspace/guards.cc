#include "agent/workspace/guards.h"

#include <algorithm>

#include "agent/workspace/pod_spec.h"
#include "common/quantity.h"
#include "common/text.h"
#include "net/http.h"

namespace uplink::agent::workspace {
namespace {

std::optional<int> LeadingNumber(std::string_view text) {
  int number = 0;
  size_t digits = 0;
  while (digits < text.size() && digits < 4 && text[digits] >= '0' && text[digits] <= '9') {
    number = number * 10 + (text[digits] - '0');
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  return number;
}

bool Contains(const json::array& values, std::string_view wanted) {
  return std::any_of(values.begin(), values.end(), [&](const json::value& value) {
    return value.is_string() && value.get_string() == wanted;
  });
}

// The quantity a quota's hard limits give `resource`, as a whole number; nullopt when absent
// or not a whole number.
std::optional<std::int64_t> HardCount(const json::object& quota, std::string_view resource) {
  const json::object& hard = ObjectAt(ObjectAt(quota, "spec"), "hard");
  const json::value* value = hard.if_contains(resource);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  auto quantity = Quantity::Parse(value->get_string());
  if (!quantity.ok()) return std::nullopt;
  auto count = quantity->WholeCount();
  if (!count.ok()) return std::nullopt;
  return *count;
}

bool AnyQuotaHas(const std::vector<json::object>& quotas,
                 const std::vector<std::string_view>& resources) {
  for (const json::object& quota : quotas) {
    const json::object& hard = ObjectAt(ObjectAt(quota, "spec"), "hard");
    for (std::string_view resource : resources) {
      if (hard.contains(resource)) return true;
    }
  }
  return false;
}

bool AnyQuotaLimitsTo(const std::vector<json::object>& quotas,
                      const std::vector<std::string_view>& resources, std::int64_t count) {
  for (const json::object& quota : quotas) {
    for (std::string_view resource : resources) {
      if (HardCount(quota, resource) == count) return true;
    }
  }
  return false;
}

void CheckQuotas(const ExecutionConfig& config, const std::vector<json::object>& quotas,
                 std::vector<std::string>& missing) {
  const std::string where = "ResourceQuota in namespace " + config.namespace_name;
  if (quotas.empty()) {
    missing.push_back(where + ": none (it must limit GPUs to the capacity limit, CPU, memory, "
                      "ephemeral storage and pods, and allow zero Services, PVCs and "
                      "LoadBalancers)");
    return;
  }
  if (!AnyQuotaLimitsTo(quotas, {"requests.nvidia.com/gpu", "limits.nvidia.com/gpu"},
                        config.capacity_gpus)) {
    missing.push_back(where + ": none limits requests.nvidia.com/gpu to " +
                      std::to_string(config.capacity_gpus) + " (the capacity limit)");
  }
  // Vectors, not initializer lists: a list's array would not outlive this initialisation.
  const std::pair<std::string_view, std::vector<std::string_view>> kinds[] = {
      {"cpu", {"cpu", "requests.cpu", "limits.cpu"}},
      {"memory", {"memory", "requests.memory", "limits.memory"}},
      {"ephemeral storage",
       {"ephemeral-storage", "requests.ephemeral-storage", "limits.ephemeral-storage"}},
      {"pods", {"pods", "count/pods"}}};
  for (const auto& [name, resources] : kinds) {
    if (!AnyQuotaHas(quotas, resources)) missing.push_back(where + ": none limits " + std::string(name));
  }
  const std::pair<std::string_view, std::vector<std::string_view>> zeros[] = {
      {"services", {"services", "count/services"}},
      {"persistentvolumeclaims", {"persistentvolumeclaims", "count/persistentvolumeclaims"}},
      {"services.loadbalancers", {"services.loadbalancers"}}};
  for (const auto& [name, resources] : zeros) {
    if (!AnyQuotaLimitsTo(quotas, resources, 0)) {
      missing.push_back(where + ": none sets " + std::string(name) + " to 0");
    }
  }
}

// A policy that selects every pod and denies `type` (Ingress or Egress) outright.
bool DeniesAll(const json::object& policy, std::string_view type) {
  const json::object& spec = ObjectAt(policy, "spec");
  const json::object& selector = ObjectAt(spec, "podSelector");
  if (!ObjectAt(selector, "matchLabels").empty() || !ArrayAt(selector, "matchExpressions").empty()) {
    return false;
  }
  if (!Contains(ArrayAt(spec, "policyTypes"), type)) return false;
  return ArrayAt(spec, type == "Ingress" ? "ingress" : "egress").empty();
}

void CheckAdmissionPolicy(const ExecutionConfig& config, const GuardObjects& guards,
                          std::vector<std::string>& missing) {
  const std::string name = config.admission_policy_name;
  if (!guards.admission_policy) {
    missing.push_back("ValidatingAdmissionPolicy " + name + ": not found");
    return;
  }
  const json::object& spec = ObjectAt(*guards.admission_policy, "spec");
  if (StringAt(spec, "failurePolicy") != "Fail") {
    missing.push_back("ValidatingAdmissionPolicy " + name +
                      ": failurePolicy must be Fail (a policy that cannot be evaluated must "
                      "refuse)");
  }
  bool pods_created = false;
  for (const json::value& rule : ArrayAt(ObjectAt(spec, "matchConstraints"), "resourceRules")) {
    if (!rule.is_object()) continue;
    const json::array& operations = ArrayAt(rule.get_object(), "operations");
    const json::array& resources = ArrayAt(rule.get_object(), "resources");
    pods_created = pods_created || ((Contains(operations, "CREATE") || Contains(operations, "*")) &&
                                    (Contains(resources, "pods") || Contains(resources, "*")));
  }
  if (!pods_created) {
    missing.push_back("ValidatingAdmissionPolicy " + name + ": it does not match the creation of pods");
  }
  const std::string digest = config.workspace_image.substr(config.workspace_image.find('@') + 1);
  bool pins_image = false;
  for (const json::value& validation : ArrayAt(spec, "validations")) {
    if (validation.is_object() &&
        StringAt(validation.get_object(), "expression").find(digest) != std::string::npos) {
      pins_image = true;
    }
  }
  if (!pins_image) {
    missing.push_back("ValidatingAdmissionPolicy " + name +
                      ": no validation admits only the pinned workspace image " + digest);
  }
  bool bound = false;
  for (const json::object& binding : guards.admission_policy_bindings) {
    const json::object& binding_spec = ObjectAt(binding, "spec");
    if (StringAt(binding_spec, "policyName") == name &&
        Contains(ArrayAt(binding_spec, "validationActions"), "Deny")) {
      bound = true;
    }
  }
  if (!bound) {
    missing.push_back("ValidatingAdmissionPolicyBinding: none binds " + name +
                      " with validationActions [Deny]");
  }
}

}  // namespace

Status CheckKubernetesVersion(const json::value& version) {
  const json::object empty;
  const json::object& object = version.is_object() ? version.get_object() : empty;
  std::string git_version = OneLineExcerpt(StringAt(object, "gitVersion"), 64);
  std::optional<int> major = LeadingNumber(StringAt(object, "major"));
  // Some distributions write "35+"; the number is what counts.
  std::optional<int> minor = LeadingNumber(StringAt(object, "minor"));
  const std::string supported = "uplink-agent workspace supports Kubernetes 1." +
                                std::to_string(kMinKubernetesMinor) + " to 1." +
                                std::to_string(kMaxKubernetesMinor);
  if (!major || !minor) {
    return FailedPreconditionError("the Kubernetes API server's /version names no version (" +
                                   (git_version.empty() ? "no gitVersion" : git_version) +
                                   "); " + supported);
  }
  if (*major != 1 || *minor < kMinKubernetesMinor || *minor > kMaxKubernetesMinor) {
    std::string found = git_version.empty()
                            ? std::to_string(*major) + "." + std::to_string(*minor)
                            : git_version;
    return FailedPreconditionError(
        "the Kubernetes API server is " + found + "; " + supported +
        ": the workspace guards (ValidatingAdmissionPolicy, Pod Security, user namespaces) are "
        "checked only on those versions. Upgrade the cluster or install a chart release made "
        "for it");
  }
  return Status::Ok();
}

std::vector<std::string> MissingGuards(const ExecutionConfig& config, const GuardObjects& guards) {
  std::vector<std::string> missing;
  if (!guards.ns) {
    missing.push_back("Namespace " + config.namespace_name + ": not found");
    return missing;
  }
  const json::object& labels = ObjectAt(ObjectAt(*guards.ns, "metadata"), "labels");
  if (StringAt(labels, "pod-security.kubernetes.io/enforce") != "restricted") {
    missing.push_back("Namespace " + config.namespace_name +
                      ": label pod-security.kubernetes.io/enforce=restricted (Pod Security)");
  }
  CheckQuotas(config, guards.resource_quotas, missing);
  bool limits_containers = false;
  for (const json::object& range : guards.limit_ranges) {
    limits_containers = limits_containers || !ArrayAt(ObjectAt(range, "spec"), "limits").empty();
  }
  if (!limits_containers) {
    missing.push_back("LimitRange in namespace " + config.namespace_name + ": none with limits");
  }
  for (std::string_view type : {"Ingress", "Egress"}) {
    bool denied = std::any_of(guards.network_policies.begin(), guards.network_policies.end(),
                              [&](const json::object& policy) { return DeniesAll(policy, type); });
    if (!denied) {
      missing.push_back("NetworkPolicy in namespace " + config.namespace_name + ": none denies all " +
                        (type == "Ingress" ? "ingress" : "egress") +
                        " (podSelector {}, policyTypes [" + std::string(type) + "], no rules)");
    }
  }
  const std::string priority = "PriorityClass " + config.priority_class_name;
  if (!guards.priority_class) {
    missing.push_back(priority + ": not found");
  } else {
    if (StringAt(*guards.priority_class, "preemptionPolicy") != "Never") {
      missing.push_back(priority + ": preemptionPolicy must be Never");
    }
    const json::value* value = guards.priority_class->if_contains("value");
    if (value == nullptr || !value->is_int64() || value->get_int64() > 0) {
      missing.push_back(priority + ": value must be 0 or less (below every other workload)");
    }
  }
  CheckAdmissionPolicy(config, guards, missing);
  return missing;
}

namespace {

// The object at `path`, or nullopt when it does not exist.
Result<std::optional<json::object>> GetIfExists(kube::KubeClient& kube, const std::string& path) {
  auto object = kube.GetObject(path);
  if (object.ok()) return std::optional<json::object>(std::move(object->get_object()));
  if (object.status().code() == StatusCode::kNotFound) return std::optional<json::object>();
  return object.status();
}

Result<std::vector<json::object>> ListAll(kube::KubeClient& kube, const std::string& path) {
  UPLINK_ASSIGN_OR_RETURN(std::vector<json::value> items, kube.ListObjects(path, {}, 1000));
  std::vector<json::object> objects;
  for (json::value& item : items) {
    if (item.is_object()) objects.push_back(std::move(item.get_object()));
  }
  return objects;
}

}  // namespace

Result<GuardObjects> ReadGuards(kube::KubeClient& kube, const ExecutionConfig& config) {
  GuardObjects guards;
  const std::string ns = net::PercentEncode(config.namespace_name);
  UPLINK_ASSIGN_OR_RETURN(guards.ns, GetIfExists(kube, "/api/v1/namespaces/" + ns));
  if (!guards.ns) return guards;
  const std::string core = "/api/v1/namespaces/" + ns;
  UPLINK_ASSIGN_OR_RETURN(guards.resource_quotas, ListAll(kube, core + "/resourcequotas"));
  UPLINK_ASSIGN_OR_RETURN(guards.limit_ranges, ListAll(kube, core + "/limitranges"));
  UPLINK_ASSIGN_OR_RETURN(
      guards.network_policies,
      ListAll(kube, "/apis/networking.k8s.io/v1/namespaces/" + ns + "/networkpolicies"));
  UPLINK_ASSIGN_OR_RETURN(
      guards.priority_class,
      GetIfExists(kube, "/apis/scheduling.k8s.io/v1/priorityclasses/" +
                            net::PercentEncode(config.priority_class_name)));
  const std::string admission = "/apis/admissionregistration.k8s.io/v1/";
  UPLINK_ASSIGN_OR_RETURN(
      guards.admission_policy,
      GetIfExists(kube, admission + "validatingadmissionpolicies/" +
                            net::PercentEncode(config.admission_policy_name)));
  // The chart names the binding after the policy; any binding of it counts.
  UPLINK_ASSIGN_OR_RETURN(
      std::optional<json::object> binding,
      GetIfExists(kube, admission + "validatingadmissionpolicybindings/" +
                            net::PercentEncode(config.admission_policy_name)));
  if (binding) guards.admission_policy_bindings.push_back(std::move(*binding));
  return guards;
}

Status VerifyCluster(kube::KubeClient& kube, const ExecutionConfig& config) {
  auto version = kube.GetVersion();
  if (!version.ok()) return version.status().WithContext("reading the Kubernetes version");
  UPLINK_RETURN_IF_ERROR(CheckKubernetesVersion(*version));
  auto guards = ReadGuards(kube, config);
  if (!guards.ok()) return guards.status().WithContext("reading the namespace guards");
  std::vector<std::string> missing = MissingGuards(config, *guards);
  if (missing.empty()) return Status::Ok();
  std::string message = "the workspace namespace " + config.namespace_name + " lacks " +
                        std::to_string(missing.size()) +
                        (missing.size() == 1 ? " guard" : " guards") +
                        " that the uplink-agent chart makes (install it with execution.enabled=true, "
                        "or create them as docs/security.md lists):";
  for (const std::string& line : missing) message += "\n  - " + line;
  return FailedPreconditionError(std::move(message));
}

}  // namespace uplink::agent::workspace
