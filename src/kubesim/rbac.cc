#include "kubesim/rbac.h"

#include <algorithm>

#include "common/kubernetes_names.h"
#include "common/text.h"

namespace uplink::kubesim {
namespace {

std::vector<std::string_view> PathSegments(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) segments.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return segments;
}

std::string VerbForMethod(std::string_view method) {
  if (method == "GET" || method == "HEAD") return "get";
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return "delete";
  return "";
}

// fields.Selector.RequiresExactMatch("metadata.name"): the value of a single
// "metadata.name=x" (or "==") term; nothing for any other selector.
std::string ExactNameInFieldSelector(std::string_view selector) {
  std::string name;
  bool found = false;
  size_t start = 0;
  while (start <= selector.size()) {
    size_t comma = selector.find(',', start);
    if (comma == std::string_view::npos) comma = selector.size();
    std::string_view term = selector.substr(start, comma - start);
    start = comma + 1;
    for (std::string_view prefix : {"metadata.name==", "metadata.name="}) {
      if (term.starts_with(prefix)) {
        if (found) return "";
        found = true;
        name = std::string(term.substr(prefix.size()));
        break;
      }
    }
  }
  // An escaped value is not a plain name; the real server then leaves the name empty too.
  if (name.find('\\') != std::string::npos || PathSegmentNameProblem(name)) return "";
  return name;
}

bool ContainsString(const json::array& values, std::string_view wanted) {
  return std::any_of(values.begin(), values.end(), [&](const json::value& value) {
    return value.is_string() && value.get_string() == wanted;
  });
}

bool VerbMatches(const json::object& rule, std::string_view verb) {
  const json::array& verbs = ArrayAt(rule, "verbs");
  return ContainsString(verbs, "*") || ContainsString(verbs, verb);
}

bool ResourceMatches(const json::object& rule, const std::string& combined,
                     std::string_view subresource) {
  for (const json::value& value : ArrayAt(rule, "resources")) {
    if (!value.is_string()) continue;
    std::string_view resource = value.get_string();
    if (resource == "*" || resource == combined) return true;
    // "*/log" matches the log subresource of every resource.
    if (!subresource.empty() && resource.size() == subresource.size() + 2 &&
        resource.starts_with("*/") && resource.ends_with(subresource)) {
      return true;
    }
  }
  return false;
}

bool ResourceNameMatches(const json::object& rule, std::string_view name) {
  const json::array& names = ArrayAt(rule, "resourceNames");
  return names.empty() || ContainsString(names, name);
}

bool NonResourceUrlMatches(const json::object& rule, std::string_view path) {
  for (const json::value& value : ArrayAt(rule, "nonResourceURLs")) {
    if (!value.is_string()) continue;
    std::string_view url = value.get_string();
    if (url == "*" || url == path) return true;
    if (url.ends_with('*')) {
      std::string_view prefix = url;
      while (prefix.ends_with('*')) prefix.remove_suffix(1);
      if (path.starts_with(prefix)) return true;
    }
  }
  return false;
}

bool RuleAllows(const json::object& rule, const RequestAttributes& attributes) {
  if (!VerbMatches(rule, attributes.verb)) return false;
  if (!attributes.resource_request) return NonResourceUrlMatches(rule, attributes.path);
  std::string combined = attributes.resource;
  if (!attributes.subresource.empty()) combined += "/" + attributes.subresource;
  const json::array& groups = ArrayAt(rule, "apiGroups");
  return (ContainsString(groups, "*") || ContainsString(groups, attributes.api_group)) &&
         ResourceMatches(rule, combined, attributes.subresource) &&
         ResourceNameMatches(rule, attributes.name);
}

// appliesToUser: a ServiceAccount subject without a namespace means the binding's own.
bool SubjectMatches(const json::object& subject, const UserInfo& user,
                    std::string_view binding_namespace) {
  std::string kind = StringAt(subject, "kind");
  std::string name = StringAt(subject, "name");
  if (kind == "User") return user.name == name;
  if (kind == "Group") return user.InGroup(name);
  if (kind == "ServiceAccount") {
    std::string namespace_name = StringAt(subject, "namespace");
    if (namespace_name.empty()) namespace_name = std::string(binding_namespace);
    return !namespace_name.empty() && user.name == ServiceAccountUser(namespace_name, name);
  }
  return false;
}

bool BindingApplies(const json::object& binding, const UserInfo& user,
                    std::string_view binding_namespace) {
  for (const json::value& subject : ArrayAt(binding, "subjects")) {
    if (subject.is_object() && SubjectMatches(subject.get_object(), user, binding_namespace)) {
      return true;
    }
  }
  return false;
}

// GetRoleReferenceRules: the rules of the Role (in the binding's namespace) or ClusterRole a
// binding refers to; none when it does not exist.
json::array RulesOf(const ObjectStore& store, const json::object& binding,
                    const std::string& binding_namespace) {
  const json::object& role_ref = ObjectAt(binding, "roleRef");
  if (StringAt(role_ref, "apiGroup") != kRbacGroup) return {};
  std::string kind = StringAt(role_ref, "kind");
  const ResourceType* type = nullptr;
  if (kind == "ClusterRole") {
    type = FindResource(kRbacGroup, "v1", "clusterroles");
  } else if (kind == "Role" && !binding_namespace.empty()) {
    type = FindResource(kRbacGroup, "v1", "roles");
  }
  if (!type) return {};
  Result<json::object> role =
      store.Get(*type, kind == "Role" ? binding_namespace : "", StringAt(role_ref, "name"));
  return role.ok() ? ArrayAt(*role, "rules") : json::array();
}

bool AnyRuleAllows(const json::array& rules, const RequestAttributes& attributes) {
  return std::any_of(rules.begin(), rules.end(), [&](const json::value& rule) {
    return rule.is_object() && RuleAllows(rule.get_object(), attributes);
  });
}

std::vector<json::object> ListAll(const ObjectStore& store, std::string_view plural,
                                  const std::optional<std::string>& namespace_name) {
  const ResourceType* type = FindResource(kRbacGroup, "v1", plural);
  ListOptions options;
  options.namespace_name = namespace_name;
  Result<ListPage> page = store.List(*type, options);
  return page.ok() ? std::move(page->items) : std::vector<json::object>();
}

// Go's %#v of a []string: []string{"a", "b"}.
std::string GoStringSlice(const json::array& values) {
  std::string text = "[]string{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += values[i].is_string() ? GoQuoted(values[i].get_string()) : "\"\"";
  }
  return text + "}";
}

FieldError Required(std::string field, std::string_view detail = "") {
  return FieldError{std::move(field), "FieldValueRequired",
                    detail.empty() ? "Required value" : "Required value: " + std::string(detail)};
}

FieldError NotSupported(std::string field, std::string_view value,
                        const std::vector<std::string_view>& supported) {
  std::string message = "Unsupported value: " + GoQuoted(value) + ": supported values: ";
  for (size_t i = 0; i < supported.size(); ++i) {
    message += (i > 0 ? ", " : "") + GoQuoted(supported[i]);
  }
  return FieldError{std::move(field), "FieldValueNotSupported", message};
}

std::string JsonTypeName(const json::value& value) {
  if (value.is_string()) return "string";
  if (value.is_bool()) return "bool";
  if (value.is_array()) return "array";
  if (value.is_object()) return "object";
  return "number";
}

// encoding/json's message for a value of the wrong JSON type.
Status DecodeError(std::string_view kind, std::string_view go_field, const json::value& value,
                   std::string_view go_type) {
  return InvalidArgumentError(std::string(kind) + " in version \"v1\" cannot be handled as a " +
                              std::string(kind) + ": json: cannot unmarshal " +
                              JsonTypeName(value) + " into Go struct field " +
                              std::string(go_field) + " of type " + std::string(go_type));
}

// A field that must be absent, null, or of one JSON type; the decode error otherwise.
Status CheckShape(const json::object& object, std::string_view key, bool want_array,
                  std::string_view kind, std::string_view go_field, std::string_view go_type) {
  const json::value* value = object.if_contains(key);
  if (!value || value->is_null()) return Status::Ok();
  bool ok = want_array ? value->is_array() : value->is_string();
  if (ok && want_array) {
    for (const json::value& item : value->get_array()) {
      if (!item.is_string()) return DecodeError(kind, go_field, item, "string");
    }
  }
  return ok ? Status::Ok() : DecodeError(kind, go_field, *value, go_type);
}

Status CheckRuleShapes(const json::object& object, std::string_view kind) {
  const json::value* rules = object.if_contains("rules");
  if (!rules || rules->is_null()) return Status::Ok();
  if (!rules->is_array()) {
    return DecodeError(kind, std::string(kind) + ".rules", *rules, "[]v1.PolicyRule");
  }
  for (const json::value& rule : rules->get_array()) {
    if (!rule.is_object()) {
      return DecodeError(kind, std::string(kind) + ".rules", rule, "v1.PolicyRule");
    }
    for (std::string_view key : {"verbs", "apiGroups", "resources", "resourceNames",
                                 "nonResourceURLs"}) {
      UPLINK_RETURN_IF_ERROR(CheckShape(rule.get_object(), key, true, kind,
                                        "PolicyRule.rules." + std::string(key), "[]string"));
    }
  }
  return Status::Ok();
}

Status CheckBindingShapes(const json::object& object, std::string_view kind) {
  const json::value* role_ref = object.if_contains("roleRef");
  if (role_ref && !role_ref->is_null()) {
    if (!role_ref->is_object()) {
      return DecodeError(kind, std::string(kind) + ".roleRef", *role_ref, "v1.RoleRef");
    }
    for (std::string_view key : {"apiGroup", "kind", "name"}) {
      UPLINK_RETURN_IF_ERROR(CheckShape(role_ref->get_object(), key, false, kind,
                                        "RoleRef.roleRef." + std::string(key), "string"));
    }
  }
  const json::value* subjects = object.if_contains("subjects");
  if (!subjects || subjects->is_null()) return Status::Ok();
  if (!subjects->is_array()) {
    return DecodeError(kind, std::string(kind) + ".subjects", *subjects, "[]v1.Subject");
  }
  for (const json::value& subject : subjects->get_array()) {
    if (!subject.is_object()) {
      return DecodeError(kind, std::string(kind) + ".subjects", subject, "v1.Subject");
    }
    for (std::string_view key : {"apiGroup", "kind", "name", "namespace"}) {
      UPLINK_RETURN_IF_ERROR(CheckShape(subject.get_object(), key, false, kind,
                                        "Subject.subjects." + std::string(key), "string"));
    }
  }
  return Status::Ok();
}

// ValidatePolicyRule.
void ValidateRules(const json::object& object, bool namespaced, std::vector<FieldError>& causes) {
  const json::array& rules = ArrayAt(object, "rules");
  for (size_t i = 0; i < rules.size(); ++i) {
    const json::object& rule = rules[i].get_object();
    std::string path = "rules[" + std::to_string(i) + "]";
    if (ArrayAt(rule, "verbs").empty()) {
      causes.push_back(Required(path + ".verbs", "verbs must contain at least one value"));
    }
    const json::array& urls = ArrayAt(rule, "nonResourceURLs");
    if (!urls.empty()) {
      if (namespaced) {
        causes.push_back(FieldError{path + ".nonResourceURLs", "FieldValueInvalid",
                                    "Invalid value: " + GoStringSlice(urls) +
                                        ": namespaced rules cannot apply to non-resource URLs"});
      }
      if (!ArrayAt(rule, "apiGroups").empty() || !ArrayAt(rule, "resources").empty() ||
          !ArrayAt(rule, "resourceNames").empty()) {
        causes.push_back(FieldError{
            path + ".nonResourceURLs", "FieldValueInvalid",
            "Invalid value: " + GoStringSlice(urls) +
                ": rules cannot apply to both regular resources and non-resource URLs"});
      }
      continue;
    }
    if (ArrayAt(rule, "apiGroups").empty()) {
      causes.push_back(
          Required(path + ".apiGroups", "resource rules must supply at least one api group"));
    }
    if (ArrayAt(rule, "resources").empty()) {
      causes.push_back(
          Required(path + ".resources", "resource rules must supply at least one resource"));
    }
  }
}

// SetDefaults_Subject: User and Group subjects belong to the RBAC API group.
void DefaultSubjects(json::object& object) {
  json::value* subjects = object.if_contains("subjects");
  if (!subjects || !subjects->is_array()) return;
  for (json::value& subject : subjects->get_array()) {
    json::object& fields = subject.get_object();
    std::string kind = StringAt(fields, "kind");
    if (StringAt(fields, "apiGroup").empty() && (kind == "User" || kind == "Group")) {
      fields["apiGroup"] = kRbacGroup;
    }
  }
}

// ValidateRoleBinding / ValidateClusterRoleBinding.
void ValidateBinding(const json::object& object, bool namespaced,
                     std::vector<FieldError>& causes) {
  const json::object& role_ref = ObjectAt(object, "roleRef");
  std::string api_group = StringAt(role_ref, "apiGroup");
  if (api_group != kRbacGroup) {
    causes.push_back(NotSupported("roleRef.apiGroup", api_group, {kRbacGroup}));
  }
  std::string kind = StringAt(role_ref, "kind");
  if (namespaced && kind != "Role" && kind != "ClusterRole") {
    causes.push_back(NotSupported("roleRef.kind", kind, {"Role", "ClusterRole"}));
  } else if (!namespaced && kind != "ClusterRole") {
    causes.push_back(NotSupported("roleRef.kind", kind, {"ClusterRole"}));
  }
  std::string name = StringAt(role_ref, "name");
  if (name.empty()) {
    causes.push_back(Required("roleRef.name"));
  } else if (std::optional<std::string> problem = PathSegmentNameProblem(name)) {
    causes.push_back(FieldError{"roleRef.name", "FieldValueInvalid",
                                "Invalid value: " + GoQuoted(name) + ": " + *problem});
  }
  const json::array& subjects = ArrayAt(object, "subjects");
  for (size_t i = 0; i < subjects.size(); ++i) {
    const json::object& subject = subjects[i].get_object();
    std::string path = "subjects[" + std::to_string(i) + "]";
    std::string subject_name = StringAt(subject, "name");
    std::string subject_kind = StringAt(subject, "kind");
    std::string subject_group = StringAt(subject, "apiGroup");
    if (subject_name.empty()) causes.push_back(Required(path + ".name"));
    if (subject_kind == "ServiceAccount") {
      if (!subject_name.empty() && !IsDnsSubdomain(subject_name)) {
        causes.push_back(FieldError{path + ".name", "FieldValueInvalid",
                                    "Invalid value: " + GoQuoted(subject_name) + ": " +
                                        DnsNameProblem(false, subject_name)});
      }
      if (!subject_group.empty()) {
        causes.push_back(NotSupported(path + ".apiGroup", subject_group, {""}));
      }
      if (!namespaced && StringAt(subject, "namespace").empty()) {
        causes.push_back(Required(path + ".namespace"));
      }
    } else if (subject_kind == "User" || subject_kind == "Group") {
      if (subject_group != kRbacGroup) {
        causes.push_back(NotSupported(path + ".apiGroup", subject_group, {kRbacGroup}));
      }
    } else {
      causes.push_back(
          NotSupported(path + ".kind", subject_kind, {"ServiceAccount", "User", "Group"}));
    }
  }
}

std::string GoRoleRef(const json::object& role_ref) {
  return "rbac.RoleRef{APIGroup:" + GoQuoted(StringAt(role_ref, "apiGroup")) +
         ", Kind:" + GoQuoted(StringAt(role_ref, "kind")) +
         ", Name:" + GoQuoted(StringAt(role_ref, "name")) + "}";
}

bool SameRoleRef(const json::object& a, const json::object& b) {
  for (std::string_view key : {"apiGroup", "kind", "name"}) {
    if (StringAt(a, key) != StringAt(b, key)) return false;
  }
  return true;
}

}  // namespace

bool UserInfo::InGroup(std::string_view group) const {
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

std::string ServiceAccountUser(std::string_view namespace_name, std::string_view name) {
  return std::string(kServiceAccountPrefix) + std::string(namespace_name) + ":" +
         std::string(name);
}

RequestAttributes RequestAttributesFor(std::string_view method, std::string_view path,
                                       bool watch, std::string_view field_selector) {
  RequestAttributes attributes;
  attributes.path = std::string(path);
  std::vector<std::string_view> parts = PathSegments(path);
  // Fewer than three segments ("/api/v1", "/version") and anything outside /api and /apis
  // is a non-resource request, authorized by its path.
  bool grouped = !parts.empty() && parts[0] == "apis";
  if (parts.size() < 3 || (parts[0] != "api" && !grouped) || (grouped && parts.size() < 4)) {
    attributes.verb = AsciiLower(method);
    return attributes;
  }
  attributes.resource_request = true;
  size_t next = 1;
  if (grouped) attributes.api_group = std::string(parts[next++]);
  attributes.api_version = std::string(parts[next++]);
  attributes.verb = VerbForMethod(method);
  // Old-style watch paths: /api/v1/watch/namespaces/x/pods.
  if (next < parts.size() && parts[next] == "watch") {
    attributes.verb = "watch";
    ++next;
  }
  std::vector<std::string_view> rest(parts.begin() + static_cast<std::ptrdiff_t>(next),
                                     parts.end());
  if (!rest.empty() && rest[0] == "namespaces") {
    if (rest.size() > 1) {
      attributes.namespace_name = std::string(rest[1]);
      // /namespaces/x/pods is about pods; /namespaces/x and its status and finalize
      // subresources are about the namespace itself.
      if (rest.size() > 2 && rest[2] != "status" && rest[2] != "finalize") {
        rest.erase(rest.begin(), rest.begin() + 2);
      }
    }
  }
  if (rest.size() >= 3) attributes.subresource = std::string(rest[2]);
  if (rest.size() >= 2) attributes.name = std::string(rest[1]);
  if (!rest.empty()) attributes.resource = std::string(rest[0]);
  if (attributes.name.empty() && attributes.verb == "get") {
    attributes.verb = watch ? "watch" : "list";
    attributes.name = ExactNameInFieldSelector(field_selector);
  }
  if (attributes.name.empty() && attributes.verb == "delete") attributes.verb = "deletecollection";
  return attributes;
}

bool RbacAllows(const ObjectStore& store, const UserInfo& user,
                const RequestAttributes& attributes) {
  for (const json::object& binding : ListAll(store, "clusterrolebindings", std::nullopt)) {
    if (BindingApplies(binding, user, "") &&
        AnyRuleAllows(RulesOf(store, binding, ""), attributes)) {
      return true;
    }
  }
  if (attributes.namespace_name.empty()) return false;
  for (const json::object& binding :
       ListAll(store, "rolebindings", attributes.namespace_name)) {
    if (BindingApplies(binding, user, attributes.namespace_name) &&
        AnyRuleAllows(RulesOf(store, binding, attributes.namespace_name), attributes)) {
      return true;
    }
  }
  return false;
}

UserRules RulesFor(const ObjectStore& store, const UserInfo& user,
                   const std::string& namespace_name) {
  UserRules rules;
  auto add = [&](const json::array& bound) {
    for (const json::value& rule : bound) {
      if (!rule.is_object()) continue;
      const json::object& fields = rule.get_object();
      json::object copy;
      for (std::string_view key : {"verbs", "apiGroups", "resources", "resourceNames",
                                   "nonResourceURLs"}) {
        if (!ArrayAt(fields, key).empty()) copy[key] = ArrayAt(fields, key);
      }
      if (!copy.contains("verbs")) copy["verbs"] = json::array();
      (copy.contains("nonResourceURLs") ? rules.non_resource_rules : rules.resource_rules)
          .push_back(std::move(copy));
    }
  };
  for (const json::object& binding : ListAll(store, "clusterrolebindings", std::nullopt)) {
    if (BindingApplies(binding, user, "")) add(RulesOf(store, binding, ""));
  }
  if (!namespace_name.empty()) {
    for (const json::object& binding : ListAll(store, "rolebindings", namespace_name)) {
      if (BindingApplies(binding, user, namespace_name)) {
        add(RulesOf(store, binding, namespace_name));
      }
    }
  }
  return rules;
}

Forbidden ForbiddenFor(const UserInfo& user, const RequestAttributes& attributes) {
  std::string reason = "User " + GoQuoted(user.name) + " cannot " + attributes.verb;
  if (!attributes.resource_request) {
    return Forbidden{"forbidden: " + reason + " path " + GoQuoted(attributes.path),
                     json::object()};
  }
  std::string resource = attributes.resource;
  if (!attributes.subresource.empty()) resource += "/" + attributes.subresource;
  reason += " resource " + GoQuoted(resource) + " in API group " + GoQuoted(attributes.api_group);
  reason += attributes.namespace_name.empty()
                ? " at the cluster scope"
                : " in the namespace " + GoQuoted(attributes.namespace_name);
  std::string group_resource = attributes.api_group.empty()
                                   ? attributes.resource
                                   : attributes.resource + "." + attributes.api_group;
  std::string message = group_resource;
  if (!attributes.name.empty()) message += " " + GoQuoted(attributes.name);
  message += " is forbidden: " + reason;
  json::object details;
  if (!attributes.name.empty()) details["name"] = attributes.name;
  if (!attributes.api_group.empty()) details["group"] = attributes.api_group;
  if (!attributes.resource.empty()) details["kind"] = attributes.resource;
  return Forbidden{std::move(message), std::move(details)};
}

Result<std::vector<FieldError>> DefaultAndValidateRbacObject(const ResourceType& type,
                                                             json::object& object,
                                                             const json::object* current) {
  std::vector<FieldError> causes;
  if (type.group != kRbacGroup) return causes;
  bool is_role = type.kind == "Role" || type.kind == "ClusterRole";
  UPLINK_RETURN_IF_ERROR(is_role ? CheckRuleShapes(object, type.kind)
                                 : CheckBindingShapes(object, type.kind));
  if (is_role) {
    ValidateRules(object, type.kind == "Role", causes);
    return causes;
  }
  DefaultSubjects(object);
  ValidateBinding(object, type.kind == "RoleBinding", causes);
  if (current && !SameRoleRef(ObjectAt(object, "roleRef"), ObjectAt(*current, "roleRef"))) {
    causes.push_back(FieldError{"roleRef", "FieldValueInvalid",
                                "Invalid value: " + GoRoleRef(ObjectAt(object, "roleRef")) +
                                    ": cannot change roleRef"});
  }
  return causes;
}

}  // namespace uplink::kubesim
