#include "kubesim/store.h"

#include <algorithm>

#include "common/crypto.h"
#include "common/kubernetes_names.h"
#include "common/labels.h"
#include "kubesim/rbac.h"
#include "kubesim/secrets.h"

namespace uplink::kubesim {
namespace {

const std::vector<std::string> kAllVerbs = {"create", "delete", "get", "list", "patch", "watch"};

json::object& MetadataOf(json::object& object) {
  json::value& metadata = object["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  return metadata.get_object();
}

const json::object* MetadataOf(const json::object& object) {
  const json::value* metadata = object.if_contains("metadata");
  return metadata && metadata->is_object() ? &metadata->get_object() : nullptr;
}

std::string NameOf(const json::object& object) {
  const json::object* metadata = MetadataOf(object);
  return metadata ? StringAt(*metadata, "name") : std::string();
}

std::string NamespaceOf(const json::object& object) {
  const json::object* metadata = MetadataOf(object);
  return metadata ? StringAt(*metadata, "namespace") : std::string();
}

// Only the labels the selector asks about: GPU nodes carry ~150 labels, and copying them all
// for every node of every page dominated list time.
labels::LabelMap LabelsFor(const json::object& object, const labels::Selector& selector) {
  labels::LabelMap result;
  const json::object* metadata = MetadataOf(object);
  const json::value* labels = metadata ? metadata->if_contains("labels") : nullptr;
  if (!labels || !labels->is_object()) return result;
  for (const labels::Requirement& requirement : selector.requirements()) {
    const json::value* value = labels->get_object().if_contains(requirement.key);
    if (value && value->is_string()) {
      result.emplace(requirement.key, std::string(value->get_string()));
    }
  }
  return result;
}

}  // namespace

std::optional<std::string> PathSegmentNameProblem(std::string_view name) {
  if (name == ".") return "may not be '.'";
  if (name == "..") return "may not be '..'";
  if (name.find('/') != std::string_view::npos) return "may not contain '/'";
  if (name.find('%') != std::string_view::npos) return "may not contain '%'";
  if (name.empty()) return "must not be empty";
  return std::nullopt;
}

std::string DnsNameProblem(bool label, std::string_view name) {
  size_t max_chars = label ? 63 : 253;
  if (name.size() > max_chars) {
    return "must be no more than " + std::to_string(max_chars) + " characters";
  }
  if (label) {
    return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
           "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
           "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
  }
  return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
         "'-' or '.', and must start and end with an alphanumeric character (e.g. "
         "'example.com', regex used for validation is "
         "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
}

namespace {

bool IsSecret(const ResourceType& type) { return type.group.empty() && type.kind == "Secret"; }

// transformDecodeError: a body the API server cannot decode into the type is a BadRequest
// naming the kind and version.
Status DecodeError(const ResourceType& type, const Status& decoded) {
  if (decoded.ok()) return decoded;
  return InvalidArgumentError(type.kind + " in version \"" + type.version +
                              "\" cannot be handled as a " + type.kind + ": " + decoded.message());
}

// Namespaces must be DNS labels; RBAC objects path segments ("system:discovery"); most other
// objects DNS subdomains. A generateName is checked with its trailing dash masked, as the
// real server does.
std::optional<FieldError> NameError(const ResourceType& type, const std::string& field,
                                    const std::string& value) {
  if (type.group == "rbac.authorization.k8s.io") {
    std::optional<std::string> problem = PathSegmentNameProblem(value);
    if (!problem) return std::nullopt;
    return FieldError{field, "FieldValueInvalid",
                      "Invalid value: " + GoQuoted(value) + ": " + *problem};
  }
  const bool label = type.plural == "namespaces";
  std::string_view checked = value;
  std::string masked;
  if (field == "metadata.generateName" && checked.ends_with('-')) {
    masked = std::string(checked.substr(0, checked.size() - 1)) + "a";
    checked = masked;
  }
  if (label ? IsDnsLabel(checked) : IsDnsSubdomain(checked)) return std::nullopt;
  return FieldError{field, "FieldValueInvalid",
                    "Invalid value: " + GoQuoted(value) + ": " + DnsNameProblem(label, checked)};
}

InvalidObject Invalid(const ResourceType& type, const std::string& name, FieldError cause) {
  return InvalidObject{type.group, type.kind, name, {std::move(cause)}};
}

Status ValidateName(const ResourceType& type, const std::string& name) {
  std::optional<FieldError> error = NameError(type, "metadata.name", name);
  if (!error) return Status::Ok();
  return InvalidArgumentError(Invalid(type, name, *error).Message());
}

// The storage layer parses resourceVersion as an unsigned integer and refuses any non-zero
// value on create; anything it cannot parse is ignored.
bool HasResourceVersion(const json::object& metadata) {
  std::string version = StringAt(metadata, "resourceVersion");
  if (version.empty() || version.size() > 20 ||
      version.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  return version.find_first_not_of('0') != std::string::npos;
}

// fields.splitTerms: commas separate terms unless escaped with a backslash.
std::vector<std::string_view> SplitFieldTerms(std::string_view text) {
  std::vector<std::string_view> terms;
  size_t start = 0;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (escaped) {
      escaped = false;
    } else if (text[i] == '\\') {
      escaped = true;
    } else if (text[i] == ',') {
      terms.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  terms.push_back(text.substr(start));
  return terms;
}

// fields.UnescapeValue: only `\\`, `\,` and `\=` are escapes, and ',' or '=' must be escaped.
Result<std::string> UnescapeFieldValue(std::string_view text) {
  std::string value;
  bool escaped = false;
  for (char c : text) {
    if (escaped) {
      if (c != '\\' && c != ',' && c != '=') {
        bool printable = c > 0x20 && c < 0x7f;
        std::string shown = printable ? std::string(1, c) : GoQuoted(std::string_view(&c, 1));
        return InvalidArgumentError("invalid field selector: invalid escape sequence: \\" + shown);
      }
      value += c;
      escaped = false;
    } else if (c == '\\') {
      escaped = true;
    } else if (c == ',' || c == '=') {
      return InvalidArgumentError(
          std::string("invalid field selector: unescaped character in value: ") + c);
    } else {
      value += c;
    }
  }
  if (escaped) return InvalidArgumentError("invalid field selector: invalid escape sequence: \\");
  return value;
}

Result<std::vector<FieldRequirement>> ParseFieldSelector(const ResourceType& type,
                                                         std::string_view text) {
  std::vector<FieldRequirement> requirements;
  if (text.size() > labels::kMaxSelectorBytes) {
    return InvalidArgumentError("field selector is longer than " +
                                std::to_string(labels::kMaxSelectorBytes) + " bytes");
  }
  for (std::string_view term : SplitFieldTerms(text)) {
    if (term.empty()) continue;  // "a=b," is "a=b", as on the real server
    // fields.splitTerm: the first position where "!=", "==" or "=" starts splits the term.
    size_t op = term.find_first_of("!=");
    while (op != std::string_view::npos && term.substr(op, 2) != "!=" && term[op] != '=') {
      op = term.find_first_of("!=", op + 1);
    }
    if (op == std::string_view::npos) {
      return InvalidArgumentError("invalid selector: '" + std::string(text.substr(0, 200)) +
                                  "'; can't understand '" + std::string(term.substr(0, 100)) + "'");
    }
    FieldRequirement requirement;
    requirement.path = std::string(term.substr(0, op));
    size_t value_start = op + 1;
    if (term.substr(op, 2) == "!=") {
      requirement.negated = true;
      value_start = op + 2;
    } else if (term.substr(op, 2) == "==") {
      value_start = op + 2;
    }
    UPLINK_ASSIGN_OR_RETURN(requirement.value, UnescapeFieldValue(term.substr(value_start)));
    bool supported = requirement.path == "metadata.name" ||
                     (requirement.path == "metadata.namespace" && type.namespaced) ||
                     std::find(type.field_paths.begin(), type.field_paths.end(),
                               requirement.path) != type.field_paths.end();
    if (!supported) {
      return InvalidArgumentError("field label not supported: " + requirement.path.substr(0, 100));
    }
    requirements.push_back(std::move(requirement));
  }
  return requirements;
}

// Path traversal in a start key would let a client range outside its prefix on a real
// server; reject the same shapes kube-apiserver's path.Clean check does.
bool IsCleanStartKey(std::string_view key) {
  if (key.empty() || key.front() == '/') return false;
  size_t start = 0;
  while (start <= key.size()) {
    size_t slash = key.find('/', start);
    if (slash == std::string_view::npos) slash = key.size();
    std::string_view part = key.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

}  // namespace

std::string FieldValue(const json::object& object, const std::string& path) {
  // Events select on "source" meaning source.component.
  if (path == "source" && StringAt(object, "kind") == "Event") {
    return FieldValue(object, "source.component");
  }
  const json::value* current = nullptr;
  const json::object* scope = &object;
  size_t start = 0;
  while (scope) {
    size_t dot = path.find('.', start);
    current = scope->if_contains(path.substr(start, dot == std::string::npos ? dot : dot - start));
    if (!current) return "";
    if (dot == std::string::npos) break;
    scope = current->is_object() ? &current->get_object() : nullptr;
    start = dot + 1;
    if (!scope) return "";
  }
  if (current->is_string()) return std::string(current->get_string());
  if (current->is_bool()) return current->get_bool() ? "true" : "false";
  if (current->is_null()) return "";
  return ToJson(*current);
}

Result<ObjectFilter> ObjectFilter::Parse(const ResourceType& type, std::string_view label_selector,
                                         std::string_view field_selector) {
  ObjectFilter filter;
  UPLINK_ASSIGN_OR_RETURN(filter.labels_, labels::Selector::Parse(label_selector));
  UPLINK_ASSIGN_OR_RETURN(filter.fields_, ParseFieldSelector(type, field_selector));
  return filter;
}

bool ObjectFilter::Matches(const json::object& object) const {
  if (!labels_.Matches(LabelsFor(object, labels_))) return false;
  return std::all_of(fields_.begin(), fields_.end(), [&](const FieldRequirement& requirement) {
    return (FieldValue(object, requirement.path) == requirement.value) != requirement.negated;
  });
}

const std::vector<ResourceType>& ResourceTypes() {
  static const std::vector<std::string> kReadVerbs = {"get", "list"};
  static const std::vector<std::string> kAll = {"all"};
  static const std::vector<ResourceType> kTypes = {
      {.group = "", .version = "v1", .plural = "nodes", .singular = "node", .kind = "Node",
       .namespaced = false, .short_names = {"no"}, .verbs = kAllVerbs,
       .field_paths = {"spec.unschedulable"}},
      {.group = "", .version = "v1", .plural = "namespaces", .singular = "namespace",
       .kind = "Namespace", .namespaced = false, .short_names = {"ns"}, .verbs = kAllVerbs,
       .field_paths = {"status.phase"}},
      {.group = "", .version = "v1", .plural = "configmaps", .singular = "configmap",
       .kind = "ConfigMap", .namespaced = true, .short_names = {"cm"}, .verbs = kAllVerbs},
      {.group = "", .version = "v1", .plural = "secrets", .singular = "secret", .kind = "Secret",
       .namespaced = true, .verbs = kAllVerbs, .field_paths = {"type"}},
      {.group = "", .version = "v1", .plural = "pods", .singular = "pod", .kind = "Pod",
       .namespaced = true, .short_names = {"po"}, .verbs = kAllVerbs,
       .field_paths = {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                       "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                       "status.podIP", "status.nominatedNodeName"},
       .categories = kAll, .subresources = {"log", "exec"}},
      {.group = "", .version = "v1", .plural = "events", .singular = "event", .kind = "Event",
       .namespaced = true, .short_names = {"ev"}, .verbs = kAllVerbs,
       .field_paths = {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                       "involvedObject.uid", "involvedObject.apiVersion",
                       "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
                       "reportingComponent", "source", "type"}},
      {.group = "", .version = "v1", .plural = "services", .singular = "service",
       .kind = "Service", .namespaced = true, .short_names = {"svc"}, .verbs = kAllVerbs,
       .categories = kAll},
      {.group = "", .version = "v1", .plural = "serviceaccounts", .singular = "serviceaccount",
       .kind = "ServiceAccount", .namespaced = true, .short_names = {"sa"}, .verbs = kAllVerbs},
      {.group = "", .version = "v1", .plural = "resourcequotas", .singular = "resourcequota",
       .kind = "ResourceQuota", .namespaced = true, .short_names = {"quota"},
       .verbs = kAllVerbs},
      {.group = "", .version = "v1", .plural = "limitranges", .singular = "limitrange",
       .kind = "LimitRange", .namespaced = true, .short_names = {"limits"}, .verbs = kAllVerbs},
      {.group = "apps", .version = "v1", .plural = "deployments", .singular = "deployment",
       .kind = "Deployment", .namespaced = true, .short_names = {"deploy"}, .verbs = kAllVerbs,
       .categories = kAll},
      {.group = "apps", .version = "v1", .plural = "replicasets", .singular = "replicaset",
       .kind = "ReplicaSet", .namespaced = true, .short_names = {"rs"}, .verbs = kAllVerbs,
       .categories = kAll},
      {.group = "apps", .version = "v1", .plural = "statefulsets", .singular = "statefulset",
       .kind = "StatefulSet", .namespaced = true, .short_names = {"sts"}, .verbs = kAllVerbs,
       .categories = kAll},
      {.group = "coordination.k8s.io", .version = "v1", .plural = "leases", .singular = "lease",
       .kind = "Lease", .namespaced = true, .verbs = kAllVerbs},
      {.group = "networking.k8s.io", .version = "v1", .plural = "networkpolicies",
       .singular = "networkpolicy", .kind = "NetworkPolicy", .namespaced = true,
       .short_names = {"netpol"}, .verbs = kAllVerbs},
      {.group = "scheduling.k8s.io", .version = "v1", .plural = "priorityclasses",
       .singular = "priorityclass", .kind = "PriorityClass", .namespaced = false,
       .short_names = {"pc"}, .verbs = kAllVerbs},
      {.group = "admissionregistration.k8s.io", .version = "v1",
       .plural = "validatingadmissionpolicies", .singular = "validatingadmissionpolicy",
       .kind = "ValidatingAdmissionPolicy", .namespaced = false, .verbs = kAllVerbs},
      {.group = "admissionregistration.k8s.io", .version = "v1",
       .plural = "validatingadmissionpolicybindings",
       .singular = "validatingadmissionpolicybinding", .kind = "ValidatingAdmissionPolicyBinding",
       .namespaced = false, .verbs = kAllVerbs},
      {.group = "rbac.authorization.k8s.io", .version = "v1", .plural = "clusterroles",
       .singular = "clusterrole", .kind = "ClusterRole", .namespaced = false, .verbs = kAllVerbs},
      {.group = "rbac.authorization.k8s.io", .version = "v1", .plural = "clusterrolebindings",
       .singular = "clusterrolebinding", .kind = "ClusterRoleBinding", .namespaced = false,
       .verbs = kAllVerbs},
      {.group = "rbac.authorization.k8s.io", .version = "v1", .plural = "roles",
       .singular = "role", .kind = "Role", .namespaced = true, .verbs = kAllVerbs},
      {.group = "rbac.authorization.k8s.io", .version = "v1", .plural = "rolebindings",
       .singular = "rolebinding", .kind = "RoleBinding", .namespaced = true, .verbs = kAllVerbs},
      // What `kubectl auth can-i` asks: answered from the requester's own permissions.
      {.group = "authorization.k8s.io", .version = "v1", .plural = "selfsubjectaccessreviews",
       .singular = "selfsubjectaccessreview", .kind = "SelfSubjectAccessReview",
       .namespaced = false, .verbs = {"create"}, .stored = false},
      {.group = "authorization.k8s.io", .version = "v1", .plural = "selfsubjectrulesreviews",
       .singular = "selfsubjectrulesreview", .kind = "SelfSubjectRulesReview",
       .namespaced = false, .verbs = {"create"}, .stored = false},
      // metrics-server's aggregated API, computed from pods and nodes on each request.
      {.group = "metrics.k8s.io", .version = "v1beta1", .plural = "nodes", .singular = "",
       .kind = "NodeMetrics", .namespaced = false, .verbs = kReadVerbs, .stored = false},
      {.group = "metrics.k8s.io", .version = "v1beta1", .plural = "pods", .singular = "",
       .kind = "PodMetrics", .namespaced = true, .verbs = kReadVerbs, .stored = false},
  };
  return kTypes;
}

const ResourceType* FindResource(std::string_view group, std::string_view version,
                                 std::string_view plural) {
  for (const ResourceType& type : ResourceTypes()) {
    if (type.group == group && type.version == version && type.plural == plural) return &type;
  }
  return nullptr;
}

const ResourceType* FindResourceByKind(std::string_view api_version, std::string_view kind) {
  for (const ResourceType& type : ResourceTypes()) {
    if (type.ApiVersion() == api_version && type.kind == kind) return &type;
  }
  return nullptr;
}

std::string EncodeContinueToken(std::int64_t resource_version, const std::string& last_key) {
  json::object token;
  token["v"] = "meta.k8s.io/v1";
  token["rv"] = resource_version;
  token["start"] = last_key + std::string(1, '\0');
  return Base64UrlEncode(ToJson(token));
}

Result<ContinuePosition> DecodeContinueToken(std::string_view token) {
  constexpr std::string_view kInvalid = "continue key is not valid: ";
  if (token.size() > 4096) return InvalidArgumentError(std::string(kInvalid) + "too long");
  // kube-apiserver decodes with RawURLEncoding: padding is an error there too.
  if (token.find('=') != std::string_view::npos) {
    return InvalidArgumentError(std::string(kInvalid) + "illegal base64 data (padding)");
  }
  Result<std::string> decoded = Base64UrlDecode(token);
  if (!decoded.ok()) {
    return InvalidArgumentError(std::string(kInvalid) + "illegal base64 data");
  }
  Result<json::value> parsed = ParseJson(*decoded, JsonLimits{4096, 4});
  if (!parsed.ok() || !parsed->is_object()) {
    return InvalidArgumentError(std::string(kInvalid) + "not a JSON object");
  }
  const json::object& object = parsed->get_object();
  std::string version = StringAt(object, "v");
  if (version != "meta.k8s.io/v1") {
    return InvalidArgumentError(std::string(kInvalid) +
                                "server does not recognize this encoded version \"" +
                                version.substr(0, 64) + "\"");
  }
  const json::value* rv = object.if_contains("rv");
  if (!rv || !rv->is_int64() || rv->get_int64() <= 0) {
    return InvalidArgumentError(std::string(kInvalid) +
                                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  std::string start = StringAt(object, "start");
  if (start.empty()) {
    return InvalidArgumentError(std::string(kInvalid) +
                                "encoded start key empty (version meta.k8s.io/v1)");
  }
  if (!IsCleanStartKey(start)) return InvalidArgumentError(std::string(kInvalid) + "bad start key");
  return ContinuePosition{rv->get_int64(), start};
}

std::string GoQuoted(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text.substr(0, 300)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) joined += separator;
    joined += parts[i];
  }
  return joined;
}

std::string GeneratedName(std::string_view prefix) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string name(prefix);
  for (unsigned char c : RandomBytes(5)) name += kAlphabet[c % (sizeof(kAlphabet) - 1)];
  return name;
}

std::string NewUuid() {
  std::string bytes = RandomBytes(16);
  bytes[6] = static_cast<char>((bytes[6] & 0x0f) | 0x40);
  bytes[8] = static_cast<char>((bytes[8] & 0x3f) | 0x80);
  std::string hex = HexEncode(bytes);
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

json::value ApplyMergePatch(const json::value& target, const json::value& patch) {
  if (!patch.is_object()) return patch;
  json::object result = target.is_object() ? target.get_object() : json::object();
  for (const auto& [key, value] : patch.get_object()) {
    if (value.is_null()) {
      result.erase(key);
    } else {
      const json::value* existing = result.if_contains(key);
      result[key] = ApplyMergePatch(existing ? *existing : json::value(), value);
    }
  }
  return result;
}

std::string ObjectStore::Key(const ResourceType& type, const std::string& namespace_name,
                             const std::string& name) {
  return type.namespaced ? namespace_name + "/" + name : name;
}

Status ObjectStore::CheckNamespaceExists(const std::string& namespace_name) const {
  auto namespaces = objects_.find("namespaces");
  if (namespaces != objects_.end() && namespaces->second.count(namespace_name)) {
    return Status::Ok();
  }
  return NotFoundError("namespaces \"" + namespace_name + "\" not found");
}

void ObjectStore::Stamp(json::object& object, bool keep_identity) {
  json::object& metadata = MetadataOf(object);
  if (!keep_identity || StringAt(metadata, "uid").empty()) metadata["uid"] = NewUuid();
  if (!keep_identity || StringAt(metadata, "creationTimestamp").empty()) {
    metadata["creationTimestamp"] = FormatRfc3339(clock_.Now());
  }
  metadata["resourceVersion"] = std::to_string(++resource_version_);
  changed_.notify_all();
  if (StringAt(object, "kind") == "Namespace") {
    // The API server labels every namespace with its own name (since 1.21).
    json::value& labels = metadata["labels"];
    if (!labels.is_object()) labels = json::object();
    labels.get_object()["kubernetes.io/metadata.name"] = StringAt(metadata, "name");
    json::value& status = object["status"];
    if (!status.is_object()) status = json::object();
    if (!status.get_object().contains("phase")) status.get_object()["phase"] = "Active";
  }
}

std::string InvalidObject::Message() const {
  std::string qualified_kind = group.empty() ? kind : kind + "." + group;
  std::string text = qualified_kind + " " + GoQuoted(name) + " is invalid: ";
  if (causes.size() != 1) text += "[";
  for (size_t i = 0; i < causes.size(); ++i) {
    if (i > 0) text += ", ";
    text += causes[i].field + ": " + causes[i].message;
  }
  if (causes.size() != 1) text += "]";
  return text;
}

Result<json::object> ObjectStore::Create(const ResourceType& type,
                                         const std::string& namespace_name, json::object object,
                                         InvalidObject* invalid) {
  std::string kind = StringAt(object, "kind");
  std::string api_version = StringAt(object, "apiVersion");
  if ((!kind.empty() && kind != type.kind) ||
      (!api_version.empty() && api_version != type.ApiVersion())) {
    return InvalidArgumentError("the API version in the data (" + api_version.substr(0, 64) +
                                ") or kind (" + kind.substr(0, 64) + ") does not match " +
                                type.ApiVersion() + " " + type.kind);
  }
  object["kind"] = type.kind;
  object["apiVersion"] = type.ApiVersion();
  if (IsSecret(type)) UPLINK_RETURN_IF_ERROR(DecodeError(type, ConvertSecret(object)));
  json::object& metadata = MetadataOf(object);
  std::string name = StringAt(metadata, "name");
  std::optional<FieldError> name_error;
  if (name.empty()) {
    std::string generate_name = StringAt(metadata, "generateName");
    if (generate_name.empty()) {
      name_error = FieldError{"metadata.name", "FieldValueRequired",
                              "Required value: name or generateName is required"};
    } else {
      name_error = NameError(type, "metadata.generateName", generate_name);
    }
    if (!name_error) {
      name = GeneratedName(generate_name);
      metadata["name"] = name;
    }
  } else {
    name_error = NameError(type, "metadata.name", name);
  }
  InvalidObject refused{type.group, type.kind, name, {}};
  if (name_error) refused.causes.push_back(std::move(*name_error));
  if (IsSecret(type)) {
    for (FieldError& cause : ValidateSecretData(object)) refused.causes.push_back(std::move(cause));
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<FieldError> rbac_causes,
                          DefaultAndValidateRbacObject(type, object, nullptr));
  for (FieldError& cause : rbac_causes) refused.causes.push_back(std::move(cause));
  if (!refused.causes.empty()) {
    Status status = InvalidArgumentError(refused.Message());
    if (invalid) *invalid = std::move(refused);
    return status;
  }
  // Validation runs before storage, so an invalid name is reported first.
  if (HasResourceVersion(metadata)) {
    return Status(StatusCode::kInternal, std::string(kResourceVersionSetOnCreate));
  }
  if (type.namespaced) {
    std::string body_namespace = StringAt(metadata, "namespace");
    if (!body_namespace.empty() && body_namespace != namespace_name) {
      return InvalidArgumentError(
          "the namespace of the provided object does not match the namespace sent on the request");
    }
    metadata["namespace"] = namespace_name;
  } else {
    metadata.erase("namespace");
  }
  std::lock_guard lock(mutex_);
  if (type.namespaced) UPLINK_RETURN_IF_ERROR(CheckNamespaceExists(namespace_name));
  auto& objects = objects_[type.GroupResource()];
  std::string key = Key(type, namespace_name, name);
  if (objects.count(key)) {
    return AlreadyExistsError(type.GroupResource() + " \"" + name + "\" already exists");
  }
  Stamp(object, false);
  objects[key] = object;
  Record("ADDED", type.GroupResource(), object);
  return object;
}

Result<json::object> ObjectStore::Put(json::object object) {
  std::string kind = StringAt(object, "kind");
  if (kind == kContainerLogKind && StringAt(object, "apiVersion") == kContainerLogApiVersion) {
    UPLINK_RETURN_IF_ERROR(logs_.Add(object));
    return object;
  }
  const ResourceType* type = FindResourceByKind(StringAt(object, "apiVersion"), kind);
  if (!type) {
    return InvalidArgumentError("objects of apiVersion \"" + StringAt(object, "apiVersion") +
                                "\" kind \"" + kind + "\" are not served by the simulator");
  }
  std::string name = NameOf(object);
  if (name.empty()) return InvalidArgumentError(kind + " without metadata.name");
  UPLINK_RETURN_IF_ERROR(ValidateName(*type, name));
  if (IsSecret(*type)) {
    UPLINK_RETURN_IF_ERROR(DecodeError(*type, ConvertSecret(object)));
    std::vector<FieldError> causes = ValidateSecretData(object);
    if (!causes.empty()) {
      InvalidObject refused{type->group, kind, name, std::move(causes)};
      return InvalidArgumentError(refused.Message());
    }
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<FieldError> rbac_causes,
                          DefaultAndValidateRbacObject(*type, object, nullptr));
  if (!rbac_causes.empty()) {
    InvalidObject refused{type->group, kind, name, std::move(rbac_causes)};
    return InvalidArgumentError(refused.Message());
  }
  std::string namespace_name = NamespaceOf(object);
  if (type->namespaced && namespace_name.empty()) {
    namespace_name = "default";
    MetadataOf(object)["namespace"] = namespace_name;
  }
  std::lock_guard lock(mutex_);
  if (type->namespaced) UPLINK_RETURN_IF_ERROR(CheckNamespaceExists(namespace_name));
  Stamp(object, true);
  json::object& stored = objects_[type->GroupResource()][Key(*type, namespace_name, name)];
  Record(stored.empty() ? "ADDED" : "MODIFIED", type->GroupResource(), object);
  stored = object;
  return object;
}

Result<json::object> ObjectStore::Get(const ResourceType& type, const std::string& namespace_name,
                                      const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto objects = objects_.find(type.GroupResource());
  if (objects != objects_.end()) {
    auto it = objects->second.find(Key(type, namespace_name, name));
    if (it != objects->second.end()) return it->second;
  }
  return NotFoundError(type.GroupResource() + " \"" + name + "\" not found");
}

Result<ListPage> ObjectStore::List(const ResourceType& type, const ListOptions& options) const {
  UPLINK_ASSIGN_OR_RETURN(ObjectFilter filter,
                          ObjectFilter::Parse(type, options.label_selector, options.field_selector));
  std::optional<ContinuePosition> position;
  if (!options.continue_token.empty()) {
    UPLINK_ASSIGN_OR_RETURN(position, DecodeContinueToken(options.continue_token));
  }
  // Keys are relative to the listed prefix, as in the etcd keys kube-apiserver pages over.
  std::string prefix = type.namespaced && options.namespace_name ? *options.namespace_name + "/" : "";
  std::lock_guard lock(mutex_);
  ListPage page;
  page.resource_version = position ? position->resource_version : resource_version_;
  auto objects = objects_.find(type.GroupResource());
  if (objects == objects_.end()) return page;
  auto it = objects->second.lower_bound(prefix + (position ? position->start_key : ""));
  std::int64_t remaining = 0;
  std::string last_key;
  for (; it != objects->second.end(); ++it) {
    if (!it->first.starts_with(prefix)) break;
    if (!filter.Matches(it->second)) continue;
    if (options.limit > 0 && static_cast<std::int64_t>(page.items.size()) >= options.limit) {
      ++remaining;
      // remainingItemCount is only reported for unfiltered lists; otherwise one more match
      // is all it takes to know a continue token is needed.
      if (!filter.empty()) break;
      continue;
    }
    page.items.push_back(it->second);
    last_key = it->first.substr(prefix.size());
  }
  if (remaining > 0) {
    page.continue_token = EncodeContinueToken(page.resource_version, last_key);
    // Like kube-apiserver: the count is only given when no selector filtered the list.
    if (filter.empty()) page.remaining_item_count = remaining;
  }
  return page;
}

Result<json::object> ObjectStore::MergePatch(const ResourceType& type,
                                             const std::string& namespace_name,
                                             const std::string& name, const json::value& patch,
                                             InvalidObject* invalid) {
  if (!patch.is_object()) return InvalidArgumentError("a merge patch must be a JSON object");
  std::lock_guard lock(mutex_);
  auto& objects = objects_[type.GroupResource()];
  auto it = objects.find(Key(type, namespace_name, name));
  if (it == objects.end()) {
    return NotFoundError(type.GroupResource() + " \"" + name + "\" not found");
  }
  const json::object* patch_metadata = MetadataOf(patch.get_object());
  if (patch_metadata) {
    // A resourceVersion in the patch is an optimistic-concurrency precondition.
    std::string wanted = StringAt(*patch_metadata, "resourceVersion");
    if (!wanted.empty() && wanted != StringAt(MetadataOf(it->second), "resourceVersion")) {
      return ConflictError("Operation cannot be fulfilled on " + type.GroupResource() + " \"" +
                           name +
                           "\": the object has been modified; please apply your changes to the "
                           "latest version and try again");
    }
  }
  json::value patched = ApplyMergePatch(it->second, patch);
  if (!patched.is_object()) return InvalidArgumentError("the patch did not produce an object");
  json::object& result = patched.get_object();
  if (NameOf(result) != name || (type.namespaced && NamespaceOf(result) != namespace_name)) {
    return InvalidArgumentError("the name or namespace of the object cannot be changed by a patch");
  }
  auto refuse = [&](InvalidObject refused) -> Status {
    Status status = InvalidArgumentError(refused.Message());
    if (invalid) *invalid = std::move(refused);
    return status;
  };
  if (IsSecret(type)) {
    // The real server quotes the whole patched object here; a Secret's data must not be
    // quoted, so the value is left out.
    if (Status converted = ConvertSecret(result); !converted.ok()) {
      return refuse(InvalidObject{"", "", "", {FieldError{"patch", "FieldValueInvalid",
                                                          "Invalid value: \"<value omitted>\": " +
                                                              converted.message()}}});
    }
    std::vector<FieldError> causes = ValidateSecretData(result);
    for (FieldError& cause : ValidateSecretUpdate(result, it->second)) {
      causes.push_back(std::move(cause));
    }
    if (!causes.empty()) {
      return refuse(InvalidObject{type.group, type.kind, name, std::move(causes)});
    }
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<FieldError> rbac_causes,
                          DefaultAndValidateRbacObject(type, result, &it->second));
  if (!rbac_causes.empty()) {
    return refuse(InvalidObject{type.group, type.kind, name, std::move(rbac_causes)});
  }
  // Identity stays what the server assigned, whatever the patch said.
  json::object& metadata = MetadataOf(result);
  const json::object& original = MetadataOf(it->second);
  metadata["uid"] = original.at("uid");
  metadata["creationTimestamp"] = original.at("creationTimestamp");
  result["kind"] = type.kind;
  result["apiVersion"] = type.ApiVersion();
  Stamp(result, true);
  it->second = result;
  Record("MODIFIED", type.GroupResource(), result);
  return result;
}

Result<json::object> ObjectStore::Delete(const ResourceType& type,
                                         const std::string& namespace_name,
                                         const std::string& name) {
  const bool is_namespace = type.plural == "namespaces";
  if (is_namespace && (name == "default" || name == "kube-system" || name == "kube-public")) {
    return PermissionDeniedError("namespaces \"" + name +
                                 "\" is forbidden: this namespace may not be deleted");
  }
  std::lock_guard lock(mutex_);
  auto& objects = objects_[type.GroupResource()];
  auto it = objects.find(Key(type, namespace_name, name));
  if (it == objects.end()) {
    return NotFoundError(type.GroupResource() + " \"" + name + "\" not found");
  }
  json::object removed = std::move(it->second);
  objects.erase(it);
  ++resource_version_;
  MetadataOf(removed)["resourceVersion"] = std::to_string(resource_version_);
  Record("DELETED", type.GroupResource(), removed);
  changed_.notify_all();
  if (is_namespace) {
    for (const ResourceType& contained : ResourceTypes()) {
      if (!contained.namespaced) continue;
      auto stored = objects_.find(contained.GroupResource());
      if (stored == objects_.end()) continue;
      std::string prefix = name + "/";
      auto first = stored->second.lower_bound(prefix);
      auto last = first;
      while (last != stored->second.end() && last->first.starts_with(prefix)) {
        json::object& gone = last->second;
        MetadataOf(gone)["resourceVersion"] = std::to_string(++resource_version_);
        Record("DELETED", contained.GroupResource(), gone);
        ++last;
      }
      stored->second.erase(first, last);
    }
    MetadataOf(removed)["deletionTimestamp"] = FormatRfc3339(clock_.Now());
    MetadataOf(removed)["resourceVersion"] = std::to_string(resource_version_);
    removed["status"] = json::object{{"phase", "Terminating"}};
  }
  return removed;
}

Result<json::object> ObjectStore::ReplaceStatus(const ResourceType& type,
                                                const std::string& namespace_name,
                                                const std::string& name, json::value status,
                                                const std::string& uid) {
  std::lock_guard lock(mutex_);
  auto& objects = objects_[type.GroupResource()];
  auto it = objects.find(Key(type, namespace_name, name));
  if (it == objects.end() || (!uid.empty() && StringAt(MetadataOf(it->second), "uid") != uid)) {
    return NotFoundError(type.GroupResource() + " \"" + name + "\" not found");
  }
  it->second["status"] = std::move(status);
  Stamp(it->second, true);
  Record("MODIFIED", type.GroupResource(), it->second);
  return it->second;
}

Result<json::object> ObjectStore::MarkDeleting(const ResourceType& type,
                                               const std::string& namespace_name,
                                               const std::string& name,
                                               std::int64_t grace_seconds) {
  std::lock_guard lock(mutex_);
  auto& objects = objects_[type.GroupResource()];
  auto it = objects.find(Key(type, namespace_name, name));
  if (it == objects.end()) {
    return NotFoundError(type.GroupResource() + " \"" + name + "\" not found");
  }
  json::object& metadata = MetadataOf(it->second);
  // A second delete may only shorten the grace period, as on a real server.
  const json::value* earlier = metadata.if_contains("deletionGracePeriodSeconds");
  if (!metadata.contains("deletionTimestamp") ||
      (earlier && earlier->is_int64() && grace_seconds < earlier->get_int64())) {
    metadata["deletionTimestamp"] = FormatRfc3339(clock_.Now());
    metadata["deletionGracePeriodSeconds"] = grace_seconds;
    Stamp(it->second, true);
    Record("MODIFIED", type.GroupResource(), it->second);
  }
  return it->second;
}

bool ObjectStore::RemoveIfUid(const ResourceType& type, const std::string& namespace_name,
                              const std::string& name, const std::string& uid) {
  std::lock_guard lock(mutex_);
  auto& objects = objects_[type.GroupResource()];
  auto it = objects.find(Key(type, namespace_name, name));
  if (it == objects.end() || StringAt(MetadataOf(it->second), "uid") != uid) return false;
  json::object removed = std::move(it->second);
  objects.erase(it);
  MetadataOf(removed)["resourceVersion"] = std::to_string(++resource_version_);
  Record("DELETED", type.GroupResource(), removed);
  changed_.notify_all();
  return true;
}

void ObjectStore::Record(std::string_view event, const std::string& group_resource,
                         const json::object& object) {
  // Enough for watches to catch up after a pause; older ones list again (410 Gone).
  constexpr size_t kMaxEvents = 4096;
  if (events_.size() >= kMaxEvents) {
    events_dropped_up_to_ = events_.front().resource_version;
    events_.pop_front();
  }
  events_.push_back(WatchEvent{std::string(event), group_resource, NamespaceOf(object), object,
                               resource_version_});
}

Result<std::vector<WatchEvent>> ObjectStore::EventsSince(
    const ResourceType& type, const std::optional<std::string>& namespace_name,
    std::int64_t since) const {
  std::lock_guard lock(mutex_);
  if (since < events_dropped_up_to_) {
    return FailedPreconditionError("too old resource version: " + std::to_string(since) + " (" +
                                   std::to_string(events_dropped_up_to_ + 1) + ")");
  }
  std::vector<WatchEvent> found;
  const std::string group_resource = type.GroupResource();
  auto first = std::upper_bound(events_.begin(), events_.end(), since,
                                [](std::int64_t rv, const WatchEvent& event) {
                                  return rv < event.resource_version;
                                });
  for (auto it = first; it != events_.end(); ++it) {
    if (it->group_resource != group_resource) continue;
    if (namespace_name && it->namespace_name != *namespace_name) continue;
    found.push_back(*it);
  }
  return found;
}

std::int64_t ObjectStore::WaitForChange(std::int64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return resource_version_ != seen; });
  return resource_version_;
}

std::int64_t ObjectStore::resource_version() const {
  std::lock_guard lock(mutex_);
  return resource_version_;
}

}  // namespace uplink::kubesim
