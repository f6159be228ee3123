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

constexpr size_t kMaxImageBytes = 512;
constexpr size_t kMaxNameBytes = 253;
constexpr std::string_view kDigestMarker = "@sha256:";

// Keys the controller reads; any other is kept in ignored_keys.
const std::set<std::string_view>& KnownKeys() {
  static const std::set<std::string_view> keys = {
      "enabled",           "namespace",           "workspaceImage",
      "capacityGpus",      "maxLifetimeSeconds",  "nodes",
      "sshEnabled",        "runtimeClassName",
      "hostUsers",         "priorityClassName",   "admissionPolicyName",
      "tmpSize"};
  return keys;
}

Result<std::string> KubernetesName(const FieldReader& fields, std::string_view key,
                                   std::string fallback, bool label) {
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> value, fields.String(key, kMaxNameBytes));
  if (!value) return fallback;
  if (label ? !IsDnsLabel(*value) : !IsDnsSubdomain(*value)) {
    return InvalidArgumentError(fields.FieldPath(key) + " is not a valid Kubernetes name (" +
                                (label ? "an RFC 1123 label" : "an RFC 1123 subdomain") + ")");
  }
  return std::move(*value);
}

}  // namespace

bool ExecutionConfig::IsApprovedNode(std::string_view node) const {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

bool IsPinnedImage(std::string_view image) {
  size_t at = image.find(kDigestMarker);
  if (at == std::string_view::npos || at == 0) return false;
  std::string_view digest = image.substr(at + kDigestMarker.size());
  if (digest.size() != 64) return false;
  for (char c : digest) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  for (char c : image.substr(0, at)) {
    // A repository: lower-case letters, digits, separators, a registry host and port.
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-' || c == '/' || c == ':';
    if (!ok) return false;
  }
  return true;
}

Result<ExecutionConfig> ParseExecutionConfig(std::string_view text) {
  auto parsed = ParseJson(text, JsonLimits{.max_bytes = kMaxConfigBytes, .max_depth = 8});
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) return InvalidArgumentError("the configuration is not a JSON object");
  const json::object& top = parsed->get_object();
  FieldReader outer(top, "");
  UPLINK_RETURN_IF_ERROR(outer.OnlyFields({"execution"}));
  const json::value* section = top.if_contains("execution");
  if (section == nullptr || !section->is_object()) {
    return InvalidArgumentError("execution is required and must be an object "
                                "({\"execution\": {...}}, as the console's execution.json)");
  }
  const json::object& object = section->get_object();
  FieldReader fields(object, "execution");
  ExecutionConfig config;
  for (const auto& field : object) {
    if (!KnownKeys().contains(field.key())) {
      config.ignored_keys.push_back(std::string(field.key().substr(0, 64)));
    }
  }
  UPLINK_ASSIGN_OR_RETURN(config.enabled, fields.RequiredBool("enabled"));
  UPLINK_ASSIGN_OR_RETURN(config.ns, fields.RequiredString("namespace", kMaxNameBytes));
  if (!IsDnsLabel(config.ns)) {
    return InvalidArgumentError("execution.namespace is not a valid namespace name");
  }
  UPLINK_ASSIGN_OR_RETURN(config.workspace_image,
                          fields.RequiredString("workspaceImage", kMaxImageBytes));
  if (!IsPinnedImage(config.workspace_image)) {
    return InvalidArgumentError(
        "execution.workspaceImage must name the image by digest (REPOSITORY@sha256:<64 hex "
        "digits>): a tag can be moved to other content, a digest cannot");
  }
  UPLINK_ASSIGN_OR_RETURN(config.capacity_gpus,
                          fields.RequiredInt("capacityGpus", 1, kMaxCapacityGpus));
  UPLINK_ASSIGN_OR_RETURN(config.max_lifetime_seconds,
                          fields.RequiredInt("maxLifetimeSeconds", 60, kMaxLifetimeSeconds));
  const json::value* nodes = fields.Find("nodes");
  if (nodes == nullptr || !nodes->is_array() || nodes->get_array().empty()) {
    return InvalidArgumentError("execution.nodes must list the approved nodes (at least one)");
  }
  if (nodes->get_array().size() > kMaxApprovedNodes) {
    return InvalidArgumentError("execution.nodes lists more than " +
                                std::to_string(kMaxApprovedNodes) + " nodes");
  }
  for (size_t i = 0; i < nodes->get_array().size(); ++i) {
    const json::value& node = nodes->get_array()[i];
    if (!node.is_string() || !IsDnsSubdomain(node.get_string())) {
      return InvalidArgumentError("execution.nodes[" + std::to_string(i) +
                                  "] is not a valid node name");
    }
    config.nodes.emplace_back(node.get_string());
  }
  UPLINK_ASSIGN_OR_RETURN(std::optional<bool> ssh, fields.Bool("sshEnabled"));
  config.ssh_enabled = ssh.value_or(false);
  UPLINK_ASSIGN_OR_RETURN(config.runtime_class_name,
                          KubernetesName(fields, "runtimeClassName", "", false));
  UPLINK_ASSIGN_OR_RETURN(std::optional<bool> host_users, fields.Bool("hostUsers"));
  config.host_users = host_users.value_or(true);
  UPLINK_ASSIGN_OR_RETURN(config.priority_class_name,
                          KubernetesName(fields, "priorityClassName", config.priority_class_name,
                                         false));
  UPLINK_ASSIGN_OR_RETURN(config.admission_policy_name,
                          KubernetesName(fields, "admissionPolicyName",
                                         config.admission_policy_name, false));
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
