#include "agent/workspace/config.h"

#include <algorithm>
#include <set>

#include "common/files.h"
#include "common/kubernetes_names.h"
#include "common/quantity.h"
#include "protocol/field_reader.h"

namespace uplink::agent::workspace {
namespace {

using protocol::FieldReader;

constexpr size_t kMaxNameBytes = 253;

// Keys of the execution object the console's values or the controller read.
const std::set<std::string_view>& KnownKeys() {
  static const std::set<std::string_view> keys = {
      // protocol::ExecutionValues
      "enabled", "cluster", "workspaceImage", "sshEnabled", "capacityGpus",
      "maxLifetimeSeconds", "nodes", "namespace", "resourcesPerGpu", "kubernetesApi", "console",
      // the controller's own
      "runtimeClassName", "hostUsers", "priorityClassName", "admissionPolicyName", "tmpSize"};
  return keys;
}

Result<std::string> KubernetesName(const FieldReader& fields, std::string_view key,
                                   std::string fallback) {
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> value, fields.String(key, kMaxNameBytes));
  if (!value || value->empty()) return fallback;
  if (!IsDnsSubdomain(*value)) {
    return InvalidArgumentError(fields.FieldPath(key) +
                                " is not a valid Kubernetes name (an RFC 1123 subdomain)");
  }
  return std::move(*value);
}

}  // namespace

bool ExecutionConfig::IsApprovedNode(std::string_view node) const {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

Result<ExecutionConfig> ParseExecutionConfig(std::string_view text) {
  auto parsed = ParseJson(text, JsonLimits{.max_bytes = kMaxConfigBytes, .max_depth = 8});
  if (!parsed.ok()) return parsed.status();
  UPLINK_ASSIGN_OR_RETURN(protocol::ExecutionValues values, protocol::DecodeExecutionValues(*parsed));
  ExecutionConfig config;
  static_cast<protocol::ExecutionValues&>(config) = std::move(values);
  const json::object& object = parsed->get_object().at("execution").get_object();
  for (const auto& field : object) {
    if (!KnownKeys().contains(field.key())) {
      config.ignored_keys.push_back(std::string(field.key().substr(0, 64)));
    }
  }
  FieldReader fields(object, "execution");
  UPLINK_ASSIGN_OR_RETURN(config.runtime_class_name,
                          KubernetesName(fields, "runtimeClassName", ""));
  UPLINK_ASSIGN_OR_RETURN(std::optional<bool> host_users, fields.Bool("hostUsers"));
  config.host_users = host_users.value_or(true);
  UPLINK_ASSIGN_OR_RETURN(config.priority_class_name,
                          KubernetesName(fields, "priorityClassName", config.priority_class_name));
  UPLINK_ASSIGN_OR_RETURN(config.admission_policy_name,
                          KubernetesName(fields, "admissionPolicyName",
                                         config.admission_policy_name));
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> tmp_size, fields.String("tmpSize", 64));
  if (tmp_size) {
    auto quantity = Quantity::Parse(*tmp_size);
    Result<std::int64_t> milli =
        quantity.ok() ? quantity->MilliValue() : Result<std::int64_t>(quantity.status());
    if (!milli.ok() || *milli < 1000 * (1ll << 20) || *milli % 1000 != 0) {
      return InvalidArgumentError("execution.tmpSize must be a quantity of at least 1Mi (e.g. 1Gi)");
    }
    config.tmp_size_bytes = *milli / 1000;
  }
  return config;
}

Result<ExecutionConfig> LoadExecutionConfig(const std::string& path) {
  auto text = ReadFileBounded(path, kMaxConfigBytes);
  if (!text.ok()) return text.status().WithContext("reading the execution configuration");
  auto config = ParseExecutionConfig(*text);
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

}  // namespace uplink::agent::workspace
