// Kubernetes RBAC as kube-apiserver applies it: what a request asks to do (RequestInfo), whether
// the Roles and ClusterRoles bound to a user allow it, the 403 message the real server writes
// when they do not, and the validation rbac.authorization.k8s.io/v1 objects get on create and
// patch.
//
// Not simulated: aggregated ClusterRoles (aggregationRule), and the escalation check that
// stops a user from granting permissions it does not hold (only system:masters writes RBAC
// objects in the simulator's scenarios).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "kubesim/store.h"

namespace uplink::kubesim {

inline constexpr std::string_view kRbacGroup = "rbac.authorization.k8s.io";
// Members of system:masters are allowed everything without consulting RBAC, as kube-apiserver's
// privileged-group authorizer does.
inline constexpr std::string_view kMastersGroup = "system:masters";
inline constexpr std::string_view kAuthenticatedGroup = "system:authenticated";
inline constexpr std::string_view kServiceAccountPrefix = "system:serviceaccount:";

struct UserInfo {
  std::string name;
  std::vector<std::string> groups;

  bool InGroup(std::string_view group) const;
};

// A service account's user name: "system:serviceaccount:<namespace>:<name>".
std::string ServiceAccountUser(std::string_view namespace_name, std::string_view name);

// authorizer.Attributes of one request.
struct RequestAttributes {
  bool resource_request = false;
  // Resource requests: get, list, watch, create, update, patch, delete, deletecollection (and
  // "impersonate" for impersonation checks). Non-resource requests: the lower-case method.
  std::string verb;
  std::string api_group;
  std::string api_version;
  std::string namespace_name;
  std::string resource;
  std::string subresource;
  std::string name;
  std::string path;  // the request path, for non-resource requests
};

// kube-apiserver's RequestInfoFactory for `method` and the decoded `path` (empty segments are
// skipped, as the simulator's router skips them). `watch` and `field_selector` are the query
// parameters: a collection GET with watch=true is "watch", and a field selector fixing
// metadata.name names the object (so a resourceNames rule can allow that list).
RequestAttributes RequestAttributesFor(std::string_view method, std::string_view path,
                                       bool watch, std::string_view field_selector);

// The RBAC authorizer over the Roles, ClusterRoles and bindings in `store`: a request is
// allowed when any rule of a role bound to the user (a ClusterRoleBinding anywhere, or a
// RoleBinding in the request's namespace) matches its verb, API group, resource and
// subresource, and resource name; or, for non-resource requests, its verb and path.
bool RbacAllows(const ObjectStore& store, const UserInfo& user,
                const RequestAttributes& attributes);

// SelfSubjectRulesReview: the rules of every role bound to `user` cluster-wide or in
// `namespace_name`, resource rules and non-resource rules apart, as `kubectl auth can-i --list`
// shows them.
struct UserRules {
  json::array resource_rules;      // {verbs, apiGroups, resources, resourceNames}
  json::array non_resource_rules;  // {verbs, nonResourceURLs}
};
UserRules RulesFor(const ObjectStore& store, const UserInfo& user,
                   const std::string& namespace_name);

// The real server's 403 message, e.g. `pods "x" is forbidden: User "system:serviceaccount:a:b"
// cannot delete resource "pods" in API group "" in the namespace "default"`, and the Status
// details (kind = resource, group, name).
struct Forbidden {
  std::string message;
  json::object details;
};
Forbidden ForbiddenFor(const UserInfo& user, const RequestAttributes& attributes);

// Defaulting and validation of a Role, ClusterRole, RoleBinding or ClusterRoleBinding being
// created (`current` null) or patched: rule shapes, roleRef kind and name, subject kinds, and
// an unchanged roleRef on update, as the causes of a 422. Subjects of kind User and Group get
// their apiGroup defaulted, as the v1 API does. A field of the wrong JSON type is
// InvalidArgument with encoding/json's message, as the real server's decoder refuses it. Other
// types pass unchanged with no causes.
Result<std::vector<FieldError>> DefaultAndValidateRbacObject(const ResourceType& type,
                                                             json::object& object,
                                                             const json::object* current);

}  // namespace uplink::kubesim
