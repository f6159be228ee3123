#include "kubesim/admission.h"

#include <algorithm>
#include <set>

#include "common/kubernetes_names.h"
#include "kubesim/pod_security.h"
#include "kubesim/resource_admission.h"
#include "kubesim/resources.h"

namespace uplink::kubesim {
namespace {

constexpr std::string_view kTokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr std::int64_t kHighestUserDefinablePriority = 1'000'000'000;

void SetDefault(json::object& object, std::string_view key, json::value value) {
  if (!object.contains(key) || object.at(key).is_null()) object[key] = std::move(value);
}

// "docker.io/x:latest" and "x" pull Always; a pinned tag or digest IfNotPresent.
std::string DefaultPullPolicy(std::string_view image) {
  if (image.find('@') != std::string_view::npos) return "IfNotPresent";
  size_t slash = image.rfind('/');
  size_t colon = image.rfind(':');
  bool tagged = colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash);
  if (!tagged || image.substr(colon + 1) == "latest") return "Always";
  return "IfNotPresent";
}

void DefaultContainer(json::object& container) {
  SetDefault(container, "terminationMessagePath", "/dev/termination-log");
  SetDefault(container, "terminationMessagePolicy", "File");
  SetDefault(container, "imagePullPolicy",
             json::string(DefaultPullPolicy(StringAt(container, "image"))));
  json::object& resources = EnsureObjectAt(container, "resources");
  // A limit without a request requests the limit.
  if (const json::value* limits = resources.if_contains("limits"); limits && limits->is_object()) {
    json::object limits_copy = limits->get_object();
    json::object& requests = EnsureObjectAt(resources, "requests");
    for (const auto& [name, value] : limits_copy) {
      if (!requests.contains(name)) requests[name] = value;
    }
  }
  if (json::value* ports = container.if_contains("ports"); ports && ports->is_array()) {
    for (json::value& port : ports->get_array()) {
      if (port.is_object()) SetDefault(port.get_object(), "protocol", "TCP");
    }
  }
}

void DefaultPod(json::object& pod) {
  json::object& spec = EnsureObjectAt(pod, "spec");
  SetDefault(spec, "restartPolicy", "Always");
  SetDefault(spec, "terminationGracePeriodSeconds", 30);
  SetDefault(spec, "dnsPolicy", "ClusterFirst");
  SetDefault(spec, "schedulerName", "default-scheduler");
  SetDefault(spec, "securityContext", json::object());
  SetDefault(spec, "enableServiceLinks", true);
  for (const char* key : {"initContainers", "containers"}) {
    if (json::value* containers = spec.if_contains(key); containers && containers->is_array()) {
      for (json::value& container : containers->get_array()) {
        if (container.is_object()) DefaultContainer(container.get_object());
      }
    }
  }
}

void DefaultMatchResources(json::object& match) {
  SetDefault(match, "matchPolicy", "Equivalent");
  SetDefault(match, "namespaceSelector", json::object());
  SetDefault(match, "objectSelector", json::object());
  for (const char* key : {"resourceRules", "excludeResourceRules"}) {
    if (json::value* rules = match.if_contains(key); rules && rules->is_array()) {
      for (json::value& rule : rules->get_array()) {
        if (rule.is_object()) SetDefault(rule.get_object(), "scope", "*");
      }
    }
  }
}

FieldError Required(std::string field, std::string detail = "") {
  return {std::move(field), "FieldValueRequired",
          detail.empty() ? "Required value" : "Required value: " + detail};
}

FieldError Invalid(std::string field, const std::string& shown_value, std::string detail) {
  return {std::move(field), "FieldValueInvalid", "Invalid value: " + shown_value + ": " + detail};
}

FieldError NotSupported(std::string field, std::string_view value,
                        const std::vector<std::string>& supported) {
  std::string list;
  for (const std::string& option : supported) {
    list += (list.empty() ? "" : ", ") + GoQuoted(option);
  }
  return {std::move(field), "FieldValueNotSupported",
          "Unsupported value: " + GoQuoted(value) + ": supported values: " + list};
}

void ValidateResources(const json::object& container, const std::string& path,
                       std::vector<FieldError>& errors) {
  const json::object& resources = ObjectAt(container, "resources");
  Result<ResourceList> requests = ParseResourceList(resources.if_contains("requests"));
  Result<ResourceList> limits = ParseResourceList(resources.if_contains("limits"));
  if (!requests.ok() || !limits.ok()) return;  // a decode error, reported before validation
  for (const auto& [name, request] : *requests) {
    auto limit = limits->find(name);
    if (request.milli < 0) {
      errors.push_back(Invalid(path + ".resources.requests[" + name + "]",
                               GoQuoted(request.ToString()), "must be greater than or equal to 0"));
    }
    if (limit == limits->end()) continue;
    bool extended = name.find('/') != std::string::npos && !name.starts_with("hugepages-");
    if (extended && request.milli != limit->second.milli) {
      errors.push_back(Invalid(path + ".resources.requests", GoQuoted(request.ToString()),
                               "must be equal to " + name + " limit of " +
                                   limit->second.ToString()));
    } else if (request.milli > limit->second.milli) {
      errors.push_back(Invalid(path + ".resources.requests", GoQuoted(request.ToString()),
                               "must be less than or equal to " + name + " limit of " +
                                   limit->second.ToString()));
    }
  }
}

std::vector<FieldError> ValidatePod(const json::object& pod) {
  std::vector<FieldError> errors;
  const json::object& spec = ObjectAt(pod, "spec");
  if (ArrayAt(spec, "containers").empty()) errors.push_back(Required("spec.containers"));
  std::set<std::string> volumes;
  for (size_t i = 0; i < ArrayAt(spec, "volumes").size(); ++i) {
    const json::value& volume = ArrayAt(spec, "volumes")[i];
    std::string name = volume.is_object() ? StringAt(volume.get_object(), "name") : "";
    std::string path = "spec.volumes[" + std::to_string(i) + "].name";
    if (name.empty()) {
      errors.push_back(Required(path));
    } else if (!volumes.insert(name).second) {
      errors.push_back({path, "FieldValueDuplicate", "Duplicate value: " + GoQuoted(name)});
    }
  }
  std::set<std::string> names;
  for (const char* key : {"initContainers", "containers"}) {
    const json::array& containers = ArrayAt(spec, key);
    for (size_t i = 0; i < containers.size(); ++i) {
      std::string path = "spec." + std::string(key) + "[" + std::to_string(i) + "]";
      if (!containers[i].is_object()) {
        errors.push_back(Invalid(path, "null", "must be an object"));
        continue;
      }
      const json::object& container = containers[i].get_object();
      std::string name = StringAt(container, "name");
      if (name.empty()) {
        errors.push_back(Required(path + ".name"));
      } else if (!IsDnsLabel(name)) {
        errors.push_back(Invalid(path + ".name", GoQuoted(name), DnsNameProblem(true, name)));
      } else if (!names.insert(name).second) {
        errors.push_back({path + ".name", "FieldValueDuplicate", "Duplicate value: " + GoQuoted(name)});
      }
      if (StringAt(container, "image").empty()) errors.push_back(Required(path + ".image"));
      ValidateResources(container, path, errors);
      const json::array& mounts = ArrayAt(container, "volumeMounts");
      for (size_t m = 0; m < mounts.size(); ++m) {
        if (!mounts[m].is_object()) continue;
        std::string volume = StringAt(mounts[m].get_object(), "name");
        if (!volumes.count(volume)) {
          errors.push_back({path + ".volumeMounts[" + std::to_string(m) + "].name",
                            "FieldValueNotFound", "Not found: " + GoQuoted(volume)});
        }
      }
    }
  }
  std::string restart = StringAt(spec, "restartPolicy");
  if (restart != "Always" && restart != "OnFailure" && restart != "Never") {
    errors.push_back(NotSupported("spec.restartPolicy", restart, {"Always", "OnFailure", "Never"}));
  }
  if (const json::value* deadline = spec.if_contains("activeDeadlineSeconds");
      deadline && !deadline->is_null()) {
    if (!deadline->is_int64() || deadline->get_int64() < 1 ||
        deadline->get_int64() > 2147483647) {
      errors.push_back(Invalid("spec.activeDeadlineSeconds", ToJson(*deadline),
                               "must be between 1 and 2147483647, inclusive"));
    }
  }
  return errors;
}

std::vector<FieldError> ValidateQuota(const json::object& quota) {
  std::vector<FieldError> errors;
  Result<ResourceList> hard = ParseResourceList(ObjectAt(quota, "spec").if_contains("hard"));
  if (!hard.ok()) return errors;
  for (const auto& [name, amount] : *hard) {
    if (amount.milli < 0) {
      errors.push_back(Invalid("spec.hard[" + name + "]", GoQuoted(amount.ToString()),
                               "must be greater than or equal to 0"));
    }
  }
  return errors;
}

std::vector<FieldError> ValidateLimitRange(const json::object& limit_range) {
  std::vector<FieldError> errors;
  const json::array& items = ArrayAt(ObjectAt(limit_range, "spec"), "limits");
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_object()) continue;
    const json::object& item = items[i].get_object();
    std::string path = "spec.limits[" + std::to_string(i) + "]";
    std::string type = StringAt(item, "type");
    if (type != "Container" && type != "Pod" && type != "PersistentVolumeClaim") {
      errors.push_back(NotSupported(path + ".type", type, {"Container", "PersistentVolumeClaim", "Pod"}));
    }
    auto list = [&](std::string_view key) {
      Result<ResourceList> parsed = ParseResourceList(item.if_contains(key));
      return parsed.ok() ? *parsed : ResourceList{};
    };
    ResourceList min = list("min"), max = list("max"), defaults = list("default"),
                 default_request = list("defaultRequest");
    auto compare = [&](const ResourceList& low, const ResourceList& high, std::string_view key,
                       std::string_view low_name, std::string_view high_name) {
      for (const auto& [name, amount] : low) {
        auto other = high.find(name);
        if (other != high.end() && amount.milli > other->second.milli) {
          errors.push_back(Invalid(path + "." + std::string(key) + "[" + name + "]",
                                   GoQuoted(amount.ToString()),
                                   std::string(low_name) + " value " + amount.ToString() +
                                       " is greater than " + std::string(high_name) + " value " +
                                       other->second.ToString()));
        }
      }
    };
    compare(min, max, "min", "min", "max");
    compare(defaults, max, "default", "default", "max");
    compare(default_request, defaults, "defaultRequest", "default request", "default limit");
    compare(min, default_request, "min", "min", "default request");
  }
  return errors;
}

std::vector<FieldError> ValidatePriorityClass(const json::object& priority_class) {
  std::vector<FieldError> errors;
  std::string name = StringAt(ObjectAt(priority_class, "metadata"), "name");
  const json::value* value = priority_class.if_contains("value");
  std::int64_t priority = value && value->is_int64() ? value->get_int64() : 0;
  if (name.starts_with("system-")) {
    errors.push_back(Invalid("metadata.name", GoQuoted(name),
                             "priority class names with 'system-' prefix are reserved"));
  } else if (priority > kHighestUserDefinablePriority) {
    errors.push_back(Invalid("value", std::to_string(priority),
                             "maximum allowed value of a user defined priority is " +
                                 std::to_string(kHighestUserDefinablePriority)));
  }
  std::string policy = StringAt(priority_class, "preemptionPolicy");
  if (policy != "Never" && policy != "PreemptLowerPriority") {
    errors.push_back(NotSupported("preemptionPolicy", policy, {"Never", "PreemptLowerPriority"}));
  }
  return errors;
}

std::vector<FieldError> ValidateNetworkPolicy(const json::object& policy) {
  std::vector<FieldError> errors;
  const json::array& types = ArrayAt(ObjectAt(policy, "spec"), "policyTypes");
  for (size_t i = 0; i < types.size(); ++i) {
    std::string type = types[i].is_string() ? std::string(types[i].get_string()) : "";
    if (type != "Ingress" && type != "Egress") {
      errors.push_back(NotSupported("spec.policyTypes[" + std::to_string(i) + "]", type,
                                    {"Egress", "Ingress"}));
    }
  }
  return errors;
}

std::vector<FieldError> ValidateAdmissionPolicy(const json::object& policy) {
  std::vector<FieldError> errors;
  const json::object& spec = ObjectAt(policy, "spec");
  const json::array& validations = ArrayAt(spec, "validations");
  if (validations.empty() && ArrayAt(spec, "auditAnnotations").empty()) {
    errors.push_back(Required("spec.validations",
                              "validations or auditAnnotations must contain at least one item"));
  }
  for (size_t i = 0; i < validations.size(); ++i) {
    if (!validations[i].is_object() || StringAt(validations[i].get_object(), "expression").empty()) {
      errors.push_back(Required("spec.validations[" + std::to_string(i) + "].expression",
                                "expression is not specified"));
    }
  }
  std::string failure = StringAt(spec, "failurePolicy");
  if (failure != "Fail" && failure != "Ignore") {
    errors.push_back(NotSupported("spec.failurePolicy", failure, {"Fail", "Ignore"}));
  }
  if (ObjectAt(spec, "matchConstraints").empty()) errors.push_back(Required("spec.matchConstraints"));
  return errors;
}

std::vector<FieldError> ValidateAdmissionPolicyBinding(const json::object& binding) {
  std::vector<FieldError> errors;
  const json::object& spec = ObjectAt(binding, "spec");
  if (StringAt(spec, "policyName").empty()) errors.push_back(Required("spec.policyName"));
  const json::array& actions = ArrayAt(spec, "validationActions");
  if (actions.empty()) {
    errors.push_back(Required("spec.validationActions",
                              "at least one validation action is required"));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < actions.size(); ++i) {
    std::string action = actions[i].is_string() ? std::string(actions[i].get_string()) : "";
    std::string path = "spec.validationActions[" + std::to_string(i) + "]";
    if (action != "Deny" && action != "Warn" && action != "Audit") {
      errors.push_back(NotSupported(path, action, {"Audit", "Deny", "Warn"}));
    } else if (!seen.insert(action).second) {
      errors.push_back({path, "FieldValueDuplicate", "Duplicate value: " + GoQuoted(action)});
    }
  }
  if (seen.count("Deny") && seen.count("Warn")) {
    errors.push_back(Invalid("spec.validationActions", "[\"Deny\", \"Warn\"]",
                             "must not contain both Deny and Warn (repeating the same validation "
                             "failure information in the API response and headers serves no "
                             "purpose)"));
  }
  return errors;
}

// The quantities a kind carries: an unreadable one cannot be decoded (400, not 422).
Status DecodeQuantities(const ResourceType& type, const json::object& object) {
  auto check = [&](const json::value* list) -> Status {
    Result<ResourceList> parsed = ParseResourceList(list);
    if (parsed.ok()) return Status::Ok();
    return InvalidArgumentError(type.kind + " in version \"" + type.version +
                                "\" cannot be handled as a " + type.kind + ": " +
                                parsed.status().message());
  };
  const json::object& spec = ObjectAt(object, "spec");
  if (type.kind == "Pod") {
    for (const char* key : {"initContainers", "containers"}) {
      for (const json::value& container : ArrayAt(spec, key)) {
        if (!container.is_object()) continue;
        const json::object& resources = ObjectAt(container.get_object(), "resources");
        UPLINK_RETURN_IF_ERROR(check(resources.if_contains("requests")));
        UPLINK_RETURN_IF_ERROR(check(resources.if_contains("limits")));
      }
    }
  } else if (type.kind == "ResourceQuota") {
    UPLINK_RETURN_IF_ERROR(check(spec.if_contains("hard")));
  } else if (type.kind == "LimitRange") {
    for (const json::value& item : ArrayAt(spec, "limits")) {
      if (!item.is_object()) continue;
      for (const char* key : {"min", "max", "default", "defaultRequest", "maxLimitRequestRatio"}) {
        UPLINK_RETURN_IF_ERROR(check(item.get_object().if_contains(key)));
      }
    }
  }
  return Status::Ok();
}

Status Forbidden(const ResourceType& type, const std::string& name, const std::string& message) {
  return PermissionDeniedError(type.GroupResource() + " " + GoQuoted(name) +
                               " is forbidden: " + message);
}

// utilerrors.NewAggregate's text: one error as it is, several in brackets.
std::string Aggregate(const std::vector<std::string>& errors) {
  if (errors.size() == 1) return errors.front();
  std::string text = "[";
  for (size_t i = 0; i < errors.size(); ++i) text += (i ? ", " : "") + errors[i];
  return text + "]";
}

// The ServiceAccount plugin's projected token volume, mounted in every container.
void MountServiceAccountToken(json::object& spec) {
  std::string volume = GeneratedName("kube-api-access-");
  json::array sources{
      json::object{{"serviceAccountToken",
                    json::object{{"expirationSeconds", 3607}, {"path", "token"}}}},
      json::object{{"configMap",
                    json::object{{"name", "kube-root-ca.crt"},
                                 {"items", json::array{json::object{{"key", "ca.crt"},
                                                                    {"path", "ca.crt"}}}}}}},
      json::object{
          {"downwardAPI",
           json::object{{"items",
                         json::array{json::object{
                             {"fieldRef", json::object{{"apiVersion", "v1"},
                                                       {"fieldPath", "metadata.namespace"}}},
                             {"path", "namespace"}}}}}}}};
  EnsureArrayAt(spec, "volumes").push_back(json::object{
      {"name", volume},
      {"projected", json::object{{"defaultMode", 420}, {"sources", std::move(sources)}}}});
  for (const char* key : {"initContainers", "containers"}) {
    json::value* containers = spec.if_contains(key);
    if (!containers || !containers->is_array()) continue;
    for (json::value& entry : containers->get_array()) {
      if (!entry.is_object()) continue;
      json::array& mounts = EnsureArrayAt(entry.get_object(), "volumeMounts");
      bool taken = std::any_of(mounts.begin(), mounts.end(), [](const json::value& mount) {
        return mount.is_object() && StringAt(mount.get_object(), "mountPath") == kTokenMountPath;
      });
      if (!taken) {
        mounts.push_back(json::object{
            {"name", volume}, {"mountPath", kTokenMountPath}, {"readOnly", true}});
      }
    }
  }
}

// DefaultTolerationSeconds: five minutes on a node that is not ready or unreachable.
void AddDefaultTolerations(json::object& spec) {
  json::array& tolerations = EnsureArrayAt(spec, "tolerations");
  for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
    bool present = std::any_of(tolerations.begin(), tolerations.end(), [&](const json::value& t) {
      return t.is_object() && StringAt(t.get_object(), "key") == key &&
             (StringAt(t.get_object(), "effect").empty() ||
              StringAt(t.get_object(), "effect") == "NoExecute");
    });
    if (!present) {
      tolerations.push_back(json::object{{"key", key},
                                         {"operator", "Exists"},
                                         {"effect", "NoExecute"},
                                         {"tolerationSeconds", 300}});
    }
  }
}

}  // namespace

void ApplyDefaults(const ResourceType& type, json::object& object) {
  if (!type.group.empty() && type.group != "scheduling.k8s.io" &&
      type.group != "networking.k8s.io" && type.group != "admissionregistration.k8s.io") {
    return;
  }
  if (type.kind == "Pod") {
    DefaultPod(object);
  } else if (type.kind == "PriorityClass") {
    SetDefault(object, "preemptionPolicy", "PreemptLowerPriority");
  } else if (type.kind == "LimitRange") {
    DefaultLimitRange(object);
  } else if (type.kind == "NetworkPolicy") {
    json::object& spec = EnsureObjectAt(object, "spec");
    SetDefault(spec, "podSelector", json::object());
    if (ArrayAt(spec, "policyTypes").empty()) {
      json::array types{"Ingress"};
      if (!ArrayAt(spec, "egress").empty()) types.push_back("Egress");
      spec["policyTypes"] = std::move(types);
    }
  } else if (type.kind == "ValidatingAdmissionPolicy") {
    json::object& spec = EnsureObjectAt(object, "spec");
    SetDefault(spec, "failurePolicy", "Fail");
    if (json::value* match = spec.if_contains("matchConstraints"); match && match->is_object()) {
      DefaultMatchResources(match->get_object());
    }
  } else if (type.kind == "ValidatingAdmissionPolicyBinding") {
    json::object& spec = EnsureObjectAt(object, "spec");
    if (json::value* match = spec.if_contains("matchResources"); match && match->is_object()) {
      DefaultMatchResources(match->get_object());
    }
  }
}

std::vector<FieldError> ValidateWorkspaceKind(const ResourceType& type,
                                              const json::object& object) {
  if (type.kind == "Pod" && type.group.empty()) return ValidatePod(object);
  if (type.kind == "ResourceQuota") return ValidateQuota(object);
  if (type.kind == "LimitRange") return ValidateLimitRange(object);
  if (type.kind == "PriorityClass") return ValidatePriorityClass(object);
  if (type.kind == "NetworkPolicy") return ValidateNetworkPolicy(object);
  if (type.kind == "ValidatingAdmissionPolicy") return ValidateAdmissionPolicy(object);
  if (type.kind == "ValidatingAdmissionPolicyBinding") return ValidateAdmissionPolicyBinding(object);
  return {};
}

std::vector<json::object> Admission::ListIn(std::string_view plural, std::string_view group,
                                            const std::string& namespace_name) const {
  const ResourceType* type = FindResource(group, "v1", plural);  // every kind read here is v1
  if (!type) return {};
  ListOptions options;
  if (type->namespaced) options.namespace_name = namespace_name;
  Result<ListPage> page = store_.List(*type, options);
  return page.ok() ? std::move(page->items) : std::vector<json::object>{};
}

Status Admission::AdmitCreate(const ResourceType& type, const std::string& namespace_name,
                              json::object& object, std::vector<std::string>& warnings,
                              InvalidObject* invalid) {
  json::object& metadata = EnsureObjectAt(object, "metadata");
  // Admission names what it refuses, so a generated name is picked now.
  if (StringAt(metadata, "name").empty() && !StringAt(metadata, "generateName").empty()) {
    metadata["name"] = GeneratedName(StringAt(metadata, "generateName"));
  }
  ApplyDefaults(type, object);
  UPLINK_RETURN_IF_ERROR(DecodeQuantities(type, object));
  const bool pod = type.group.empty() && type.kind == "Pod";
  if (pod) UPLINK_RETURN_IF_ERROR(AdmitPod(namespace_name, object));
  std::vector<FieldError> errors = ValidateWorkspaceKind(type, object);
  if (!errors.empty()) {
    InvalidObject refused{type.group, type.kind, StringAt(metadata, "name"), std::move(errors)};
    Status status = InvalidArgumentError(refused.Message());
    if (invalid) *invalid = std::move(refused);
    return status;
  }
  if (pod) {
    Result<json::object> ns = store_.Get(*FindResource("", "v1", "namespaces"), "", namespace_name);
    if (!ns.ok()) return ns.status();
    NamespacePodSecurity policy =
        PodSecurityFromLabels(ObjectAt(ObjectAt(*ns, "metadata"), "labels"));
    std::string violations = PodSecurityViolations(policy.enforce, object);
    if (!violations.empty()) {
      return Forbidden(type, StringAt(metadata, "name"),
                       "violates PodSecurity " + GoQuoted(policy.enforce.ToString()) + ": " +
                           violations);
    }
    std::string warned = PodSecurityViolations(policy.warn, object);
    if (!warned.empty()) {
      warnings.push_back("would violate PodSecurity " + GoQuoted(policy.warn.ToString()) + ": " +
                         warned);
    }
  }
  if (type.namespaced) return CheckQuotas(type, namespace_name, object);
  return Status::Ok();
}

Status Admission::AdmitPod(const std::string& namespace_name, json::object& pod) {
  const ResourceType& type = *FindResource("", "v1", "pods");
  json::object& spec = EnsureObjectAt(pod, "spec");
  const std::string name = StringAt(ObjectAt(pod, "metadata"), "name");

  // ServiceAccount: the account, and its token unless the pod or the account opts out.
  std::string account = StringAt(spec, "serviceAccountName");
  if (account.empty()) account = StringAt(spec, "serviceAccount");
  if (account.empty()) account = "default";
  spec["serviceAccountName"] = account;
  spec["serviceAccount"] = account;
  bool automount = true;
  if (const json::value* set = spec.if_contains("automountServiceAccountToken");
      set && set->is_bool()) {
    automount = set->get_bool();
  } else if (Result<json::object> sa = store_.Get(*FindResource("", "v1", "serviceaccounts"),
                                                  namespace_name, account);
             sa.ok()) {
    if (const json::value* sa_set = sa->if_contains("automountServiceAccountToken");
        sa_set && sa_set->is_bool()) {
      automount = sa_set->get_bool();
    }
  }
  if (automount) MountServiceAccountToken(spec);

  // Priority: from the named class, or the global default.
  std::string class_name = StringAt(spec, "priorityClassName");
  std::optional<json::object> priority_class;
  for (json::object& candidate : ListIn("priorityclasses", "scheduling.k8s.io", "")) {
    std::string candidate_name = StringAt(ObjectAt(candidate, "metadata"), "name");
    if (class_name.empty() ? candidate.if_contains("globalDefault") &&
                                 candidate.at("globalDefault") == json::value(true)
                           : candidate_name == class_name) {
      priority_class = std::move(candidate);
      break;
    }
  }
  if (!class_name.empty() && !priority_class) {
    return Forbidden(type, name, "no PriorityClass with name " + class_name + " was found");
  }
  std::int64_t priority = 0;
  std::string preemption = "PreemptLowerPriority";
  if (priority_class) {
    const json::value* value = priority_class->if_contains("value");
    priority = value && value->is_int64() ? value->get_int64() : 0;
    std::string policy = StringAt(*priority_class, "preemptionPolicy");
    if (!policy.empty()) preemption = policy;
    spec["priorityClassName"] = StringAt(ObjectAt(*priority_class, "metadata"), "name");
  }
  if (const json::value* given = spec.if_contains("priority");
      given && given->is_int64() && given->get_int64() != priority) {
    return Forbidden(type, name,
                     "the integer value of priority (" + std::to_string(given->get_int64()) +
                         ") must not be provided in pod spec; priority admission controller "
                         "computed " +
                         std::to_string(priority) + " from the given PriorityClass name");
  }
  spec["priority"] = priority;
  SetDefault(spec, "preemptionPolicy", json::string(preemption));

  AddDefaultTolerations(spec);

  std::vector<std::string> limit_errors =
      ApplyLimitRanges(ListIn("limitranges", "", namespace_name), pod);
  if (!limit_errors.empty()) return Forbidden(type, name, Aggregate(limit_errors));

  // PrepareForCreate: whatever status was sent, a new pod is Pending.
  pod["status"] = json::object{{"phase", "Pending"}, {"qosClass", QosClass(pod)}};
  return Status::Ok();
}

Status Admission::CheckQuotas(const ResourceType& type, const std::string& namespace_name,
                              const json::object& object) {
  std::vector<json::object> quotas = ListIn("resourcequotas", "", namespace_name);
  if (quotas.empty()) return Status::Ok();
  const WallTime now = clock_.Now();
  ResourceList used = NamespaceUsage(store_, namespace_name, now);
  ResourceList requested = QuotaUsage(type, object, now);
  for (const json::object& quota : quotas) {
    std::string refusal = CheckQuota(quota, type, object, requested, used);
    if (!refusal.empty()) {
      return Forbidden(type, StringAt(ObjectAt(object, "metadata"), "name"), refusal);
    }
  }
  return Status::Ok();
}

}  // namespace uplink::kubesim
