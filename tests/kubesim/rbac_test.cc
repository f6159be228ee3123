// The RBAC authorizer, request attributes, 403 messages and RBAC object validation, checked
// against the semantics of kube-apiserver's RBAC authorizer.
#include "kubesim/rbac.h"

#include <gtest/gtest.h>

#include "common/yaml.h"
#include "kubesim/cluster.h"

namespace uplink::kubesim {
namespace {

// The cluster agent's read-only ClusterRole from the observability guide, an inventory agent
// limited by resourceNames, and a few users that exercise the rest of the rule grammar.
constexpr std::string_view kPolicy = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: uplink-cluster-read}
rules:
- apiGroups: [""]
  resources: [nodes, namespaces, pods, events]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [apps]
  resources: [deployments, statefulsets]
  verbs: [get, list]
- apiGroups: [metrics.k8s.io]
  resources: [nodes, pods]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: uplink-cluster-read}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: uplink-cluster-read}
subjects:
- {kind: ServiceAccount, name: cluster-agent, namespace: uplink-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: uplink-inventory}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [list]
- apiGroups: [""]
  resources: [namespaces]
  resourceNames: [kube-system]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: uplink-inventory}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: uplink-inventory}
subjects:
- {kind: ServiceAccount, name: inventory-agent, namespace: uplink-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: inventory-status, namespace: uplink-system}
rules:
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [uplink-inventory-status]
  verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: inventory-status, namespace: uplink-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: inventory-status}
subjects:
- {kind: ServiceAccount, name: inventory-agent}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: secret-getter}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [get]}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: jane-secrets, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: secret-getter}
subjects:
- {kind: User, name: jane}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: everything, namespace: team-b}
rules:
- {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dev-everything, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: everything}
subjects:
- {kind: Group, name: dev}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: log-reader}
rules:
- {apiGroups: [""], resources: ["*/log"], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ops-logs}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: log-reader}
subjects:
- {kind: Group, name: ops}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: scraper}
rules:
- {nonResourceURLs: [/metrics, /debug/*], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: scraper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: scraper}
subjects:
- {kind: User, name: prom}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dangling}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: does-not-exist}
subjects:
- {kind: User, name: ghost}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: role-from-elsewhere, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: everything}
subjects:
- {kind: User, name: mallory}
)";

UserInfo ServiceAccount(std::string_view namespace_name, std::string_view name) {
  return UserInfo{ServiceAccountUser(namespace_name, name),
                  {"system:serviceaccounts", "system:serviceaccounts:" + std::string(namespace_name),
                   "system:authenticated"}};
}

class RbacTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (json::object& ns : DefaultNamespaces()) ASSERT_TRUE(store_.Put(ns).ok());
    Result<std::vector<json::object>> bootstrap = BootstrapRbacObjects();
    ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
    Result<std::vector<json::object>> policy = ParseObjects(kPolicy);
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    for (std::vector<json::object>* objects : {&*bootstrap, &*policy}) {
      for (json::object& object : *objects) {
        Result<json::object> stored = store_.Put(object);
        ASSERT_TRUE(stored.ok()) << stored.status().ToString();
      }
    }
  }

  bool Allows(const UserInfo& user, std::string_view method, std::string_view path,
              bool watch = false, std::string_view field_selector = "") {
    return RbacAllows(store_, user, RequestAttributesFor(method, path, watch, field_selector));
  }

  FakeClock clock_;
  ObjectStore store_{clock_};
};

struct Case {
  const char* who;
  const char* method;
  const char* path;
  bool allowed;
  bool watch = false;
  const char* field_selector = "";
};

TEST_F(RbacTest, RequestsAreDecidedByTheRolesBoundToTheUser) {
  const std::map<std::string, UserInfo> users = {
      {"cluster-agent", ServiceAccount("uplink-system", "cluster-agent")},
      {"same-name-elsewhere", ServiceAccount("default", "cluster-agent")},
      {"inventory", ServiceAccount("uplink-system", "inventory-agent")},
      {"jane", UserInfo{"jane", {"system:authenticated"}}},
      {"bob-in-dev", UserInfo{"bob", {"dev", "system:authenticated"}}},
      {"olga-in-ops", UserInfo{"olga", {"ops", "system:authenticated"}}},
      {"prom", UserInfo{"prom", {"system:authenticated"}}},
      {"ghost", UserInfo{"ghost", {"system:authenticated"}}},
      {"mallory", UserInfo{"mallory", {"system:authenticated"}}},
      {"anonymous", UserInfo{"system:anonymous", {"system:unauthenticated"}}},
  };
  const Case cases[] = {
      // The read-only cluster role: reads of its resources everywhere, nothing else.
      {"cluster-agent", "GET", "/api/v1/pods", true},
      {"cluster-agent", "GET", "/api/v1/pods", true, true},
      {"cluster-agent", "GET", "/api/v1/namespaces/inference/pods/vllm-0", true},
      {"cluster-agent", "GET", "/api/v1/namespaces/inference/pods/vllm-0/log", true},
      {"cluster-agent", "GET", "/api/v1/namespaces/inference/events", true},
      {"cluster-agent", "GET", "/api/v1/nodes/gpu-node-0001", true},
      {"cluster-agent", "GET", "/api/v1/namespaces", true},
      {"cluster-agent", "GET", "/api/v1/namespaces/kube-system", true},
      {"cluster-agent", "GET", "/apis/apps/v1/deployments", true},
      {"cluster-agent", "GET", "/apis/apps/v1/namespaces/ml/statefulsets/train", true},
      {"cluster-agent", "GET", "/apis/apps/v1/namespaces/ml/deployments", false, true},
      {"cluster-agent", "GET", "/apis/apps/v1/daemonsets", false},
      {"cluster-agent", "GET", "/apis/apps/v1/namespaces/ml/replicasets", false},
      {"cluster-agent", "GET", "/apis/metrics.k8s.io/v1beta1/nodes", true},
      {"cluster-agent", "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/ml/pods", true},
      {"cluster-agent", "GET", "/api/v1/secrets", false},
      {"cluster-agent", "GET", "/api/v1/namespaces/default/secrets/agent-token", false},
      {"cluster-agent", "GET", "/api/v1/namespaces/kube-system/services", false},
      {"cluster-agent", "GET", "/api/v1/namespaces/ml/configmaps", false},
      {"cluster-agent", "DELETE", "/api/v1/namespaces/ml/pods/train-0", false},
      {"cluster-agent", "DELETE", "/api/v1/namespaces/ml/pods", false},
      {"cluster-agent", "POST", "/api/v1/namespaces/ml/pods", false},
      {"cluster-agent", "PATCH", "/api/v1/nodes/gpu-node-0001", false},
      {"cluster-agent", "PUT", "/api/v1/namespaces/ml/pods/train-0", false},
      {"cluster-agent", "GET", "/api/v1/namespaces/ml/pods/train-0/exec", false},
      {"cluster-agent", "POST", "/api/v1/namespaces/ml/pods/train-0/exec", false},
      {"cluster-agent", "POST", "/api/v1/namespaces/ml/pods/train-0/attach", false},
      {"cluster-agent", "POST", "/api/v1/namespaces/ml/pods/train-0/portforward", false},
      {"cluster-agent", "GET", "/api/v1/namespaces/ml/pods/train-0/proxy", false},
      {"cluster-agent", "GET", "/api/v1/nodes/gpu-node-0001/proxy/metrics", false},
      {"cluster-agent", "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles", false},
      // Discovery and public information come from the bootstrap bindings.
      {"cluster-agent", "GET", "/api", true},
      {"cluster-agent", "GET", "/api/v1", true},
      {"cluster-agent", "GET", "/apis/apps/v1", true},
      {"cluster-agent", "GET", "/openapi/v3/apis/apps/v1", true},
      {"cluster-agent", "GET", "/version", true},
      {"cluster-agent", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", true},
      {"cluster-agent", "GET", "/metrics", false},
      {"cluster-agent", "GET", "/logs/kube-apiserver.log", false},
      // The subject names a service account of one namespace only.
      {"same-name-elsewhere", "GET", "/api/v1/pods", false},
      // resourceNames: only the named object, and never list or create.
      {"inventory", "GET", "/api/v1/nodes", true},
      {"inventory", "GET", "/api/v1/nodes/gpu-node-0001", false},
      {"inventory", "GET", "/api/v1/namespaces/kube-system", true},
      {"inventory", "GET", "/api/v1/namespaces/default", false},
      {"inventory", "GET", "/api/v1/namespaces", false},
      {"inventory", "GET", "/api/v1/namespaces", true, false, "metadata.name=kube-system"},
      {"inventory", "GET", "/api/v1/namespaces", false, false, "metadata.name=default"},
      {"inventory", "PATCH", "/api/v1/namespaces/uplink-system/configmaps/uplink-inventory-status",
       true},
      {"inventory", "GET", "/api/v1/namespaces/uplink-system/configmaps/uplink-inventory-status",
       true},
      {"inventory", "PATCH", "/api/v1/namespaces/uplink-system/configmaps/other", false},
      {"inventory", "PATCH", "/api/v1/namespaces/default/configmaps/uplink-inventory-status",
       false},
      {"inventory", "POST", "/api/v1/namespaces/uplink-system/configmaps", false},
      {"inventory", "GET", "/api/v1/namespaces/uplink-system/configmaps", false},
      {"inventory", "DELETE",
       "/api/v1/namespaces/uplink-system/configmaps/uplink-inventory-status", false},
      // A ClusterRole bound by a RoleBinding applies in that namespace only.
      {"jane", "GET", "/api/v1/namespaces/team-a/secrets/db", true},
      {"jane", "GET", "/api/v1/namespaces/team-b/secrets/db", false},
      {"jane", "GET", "/api/v1/namespaces/team-a/secrets", false},
      {"jane", "GET", "/api/v1/secrets", false},
      // Wildcards in a Role, for a group.
      {"bob-in-dev", "DELETE", "/apis/apps/v1/namespaces/team-b/deployments/web", true},
      {"bob-in-dev", "GET", "/api/v1/namespaces/team-b/pods/web-0/log", true},
      {"bob-in-dev", "POST", "/apis/batch/v1/namespaces/team-b/jobs", true},
      {"bob-in-dev", "GET", "/api/v1/namespaces/team-a/pods", false},
      {"bob-in-dev", "GET", "/api/v1/nodes", false},
      {"bob-in-dev", "GET", "/api/v1/pods", false},
      // "*/log" matches the log subresource of any resource, and nothing else.
      {"olga-in-ops", "GET", "/api/v1/namespaces/ml/pods/train-0/log", true},
      {"olga-in-ops", "GET", "/api/v1/namespaces/ml/pods/train-0", false},
      {"olga-in-ops", "GET", "/api/v1/namespaces/ml/pods/train-0/exec", false},
      // Non-resource URLs: exact, or a prefix ending in *.
      {"prom", "GET", "/metrics", true},
      {"prom", "GET", "/debug/pprof/heap", true},
      {"prom", "GET", "/debug", false},
      {"prom", "POST", "/metrics", false},
      {"prom", "GET", "/api/v1/pods", false},
      // A binding to a missing role grants nothing; a RoleBinding's Role is its namespace's.
      {"ghost", "GET", "/api/v1/pods", false},
      {"mallory", "GET", "/api/v1/namespaces/team-a/pods", false},
      // The unauthenticated group sees public information only.
      {"anonymous", "GET", "/version", true},
      {"anonymous", "GET", "/healthz", true},
      {"anonymous", "GET", "/api", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Allows(users.at(c.who), c.method, c.path, c.watch, c.field_selector), c.allowed)
        << c.who << " " << c.method << " " << c.path << (c.watch ? " watch" : "") << " "
        << c.field_selector;
  }
}

TEST_F(RbacTest, RulesForListsTheBoundRulesOfTheNamespace) {
  UserRules cluster = RulesFor(store_, ServiceAccount("uplink-system", "cluster-agent"), "ml");
  // The read-only role's four rules and system:basic-user's two, plus discovery's URLs.
  std::vector<std::string> rules;
  for (const json::value& rule : cluster.resource_rules) rules.push_back(ToJson(rule));
  EXPECT_EQ(rules.size(), 6u);
  EXPECT_NE(std::find(rules.begin(), rules.end(),
                      R"({"verbs":["get","list","watch"],"apiGroups":[""],"resources":["nodes","namespaces","pods","events"]})"),
            rules.end());
  EXPECT_FALSE(cluster.non_resource_rules.empty());
  UserRules jane_a = RulesFor(store_, UserInfo{"jane", {"system:authenticated"}}, "team-a");
  UserRules jane_b = RulesFor(store_, UserInfo{"jane", {"system:authenticated"}}, "team-b");
  EXPECT_EQ(jane_a.resource_rules.size(), jane_b.resource_rules.size() + 1);
}

TEST(RequestAttributes, AreReadFromThePathLikeKubeApiserversRequestInfo) {
  RequestAttributes named = RequestAttributesFor("GET", "/api/v1/namespaces/ml/pods/train-0", false, "");
  EXPECT_TRUE(named.resource_request);
  EXPECT_EQ(named.verb, "get");
  EXPECT_EQ(named.api_group, "");
  EXPECT_EQ(named.api_version, "v1");
  EXPECT_EQ(named.namespace_name, "ml");
  EXPECT_EQ(named.resource, "pods");
  EXPECT_EQ(named.name, "train-0");

  RequestAttributes scale =
      RequestAttributesFor("PUT", "/apis/apps/v1/namespaces/ml/deployments/web/scale", false, "");
  EXPECT_EQ(scale.verb, "update");
  EXPECT_EQ(scale.api_group, "apps");
  EXPECT_EQ(scale.subresource, "scale");
  EXPECT_EQ(scale.name, "web");

  // A namespace is its own namespace; its status is a subresource, not a resource.
  RequestAttributes ns = RequestAttributesFor("GET", "/api/v1/namespaces/kube-system", false, "");
  EXPECT_EQ(ns.resource, "namespaces");
  EXPECT_EQ(ns.name, "kube-system");
  EXPECT_EQ(ns.namespace_name, "kube-system");
  RequestAttributes ns_status =
      RequestAttributesFor("PATCH", "/api/v1/namespaces/team-a/status", false, "");
  EXPECT_EQ(ns_status.resource, "namespaces");
  EXPECT_EQ(ns_status.subresource, "status");

  EXPECT_EQ(RequestAttributesFor("GET", "/api/v1/pods", true, "").verb, "watch");
  EXPECT_EQ(RequestAttributesFor("GET", "/api/v1/watch/namespaces/ml/pods", false, "").verb,
            "watch");
  EXPECT_EQ(RequestAttributesFor("GET", "/api/v1/watch/namespaces/ml/pods", false, "").namespace_name,
            "ml");
  EXPECT_EQ(RequestAttributesFor("DELETE", "/api/v1/namespaces/ml/pods", false, "").verb,
            "deletecollection");
  EXPECT_EQ(RequestAttributesFor("HEAD", "/api/v1/nodes/n", false, "").verb, "get");
  EXPECT_EQ(RequestAttributesFor("OPTIONS", "/api/v1/nodes/n", false, "").verb, "");
  // Empty segments are skipped, as the router skips them.
  RequestAttributes doubled = RequestAttributesFor("GET", "//api//v1///secrets", false, "");
  EXPECT_TRUE(doubled.resource_request);
  EXPECT_EQ(doubled.resource, "secrets");

  // A field selector fixing metadata.name names the listed object, unless it is anything more.
  EXPECT_EQ(RequestAttributesFor("GET", "/api/v1/namespaces", false, "metadata.name=kube-system").name,
            "kube-system");
  EXPECT_EQ(RequestAttributesFor("GET", "/api/v1/namespaces", false, "metadata.name==a").name, "a");
  for (const char* selector : {"metadata.name=a,metadata.name=b", "metadata.name!=a",
                               "metadata.name=a/b", "metadata.name=a\\,b", "spec.x=1"}) {
    EXPECT_EQ(RequestAttributesFor("GET", "/api/v1/namespaces", false, selector).name, "")
        << selector;
  }

  for (const char* path : {"/", "/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1",
                           "/version", "/openapi/v3/api/v1", "/metrics", "/healthz/etcd"}) {
    RequestAttributes attributes = RequestAttributesFor("GET", path, false, "");
    EXPECT_FALSE(attributes.resource_request) << path;
    EXPECT_EQ(attributes.verb, "get") << path;
    EXPECT_EQ(attributes.path, path);
  }
  EXPECT_EQ(RequestAttributesFor("POST", "/metrics", false, "").verb, "post");
}

TEST(Forbidden, MessagesAreTheRealServersWords) {
  UserInfo agent{"system:serviceaccount:uplink-system:cluster-agent", {}};
  auto message = [&](std::string_view method, std::string_view path) {
    return ForbiddenFor(agent, RequestAttributesFor(method, path, false, "")).message;
  };
  EXPECT_EQ(message("GET", "/api/v1/namespaces/x/secrets"),
            "secrets is forbidden: User \"system:serviceaccount:uplink-system:cluster-agent\" "
            "cannot list resource \"secrets\" in API group \"\" in the namespace \"x\"");
  EXPECT_EQ(message("DELETE", "/api/v1/namespaces/ml/pods/train-0"),
            "pods \"train-0\" is forbidden: User \"system:serviceaccount:uplink-system:cluster-agent\" "
            "cannot delete resource \"pods\" in API group \"\" in the namespace \"ml\"");
  EXPECT_EQ(message("POST", "/api/v1/namespaces"),
            "namespaces is forbidden: User \"system:serviceaccount:uplink-system:cluster-agent\" "
            "cannot create resource \"namespaces\" in API group \"\" at the cluster scope");
  EXPECT_EQ(message("GET", "/api/v1/namespaces/ml/pods/train-0/exec"),
            "pods \"train-0\" is forbidden: User \"system:serviceaccount:uplink-system:cluster-agent\" "
            "cannot get resource \"pods/exec\" in API group \"\" in the namespace \"ml\"");
  EXPECT_EQ(message("GET", "/apis/apps/v1/daemonsets"),
            "daemonsets.apps is forbidden: User \"system:serviceaccount:uplink-system:cluster-agent\" "
            "cannot list resource \"daemonsets\" in API group \"apps\" at the cluster scope");
  EXPECT_EQ(message("GET", "/metrics"),
            "forbidden: User \"system:serviceaccount:uplink-system:cluster-agent\" cannot get path "
            "\"/metrics\"");
  Forbidden named = ForbiddenFor(agent, RequestAttributesFor("GET", "/apis/apps/v1/namespaces/ml/daemonsets/d", false, ""));
  EXPECT_EQ(ToJson(named.details), R"({"name":"d","group":"apps","kind":"daemonsets"})");
  EXPECT_EQ(ToJson(ForbiddenFor(agent, RequestAttributesFor("GET", "/metrics", false, "")).details),
            "{}");
  // A hostile user name is quoted, escaped and bounded.
  UserInfo hostile{std::string("a\"b\n") + std::string(1000, 'x'), {}};
  std::string text = ForbiddenFor(hostile, RequestAttributesFor("GET", "/api/v1/pods", false, "")).message;
  EXPECT_NE(text.find("User \"a\\\"b\\x0a"), std::string::npos) << text;
  EXPECT_LT(text.size(), 500u);
}

json::object Object(std::string_view yaml) {
  Result<json::value> parsed = ParseYaml(yaml);
  EXPECT_TRUE(parsed.ok() && parsed->is_object()) << yaml;
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object();
}

std::vector<std::string> Causes(std::string_view plural, std::string_view yaml,
                                const json::object* current = nullptr) {
  const ResourceType* type = FindResource(kRbacGroup, "v1", plural);
  json::object object = Object(yaml);
  Result<std::vector<FieldError>> causes = DefaultAndValidateRbacObject(*type, object, current);
  EXPECT_TRUE(causes.ok()) << causes.status().ToString();
  std::vector<std::string> texts;
  for (const FieldError& cause : causes.value_or(std::vector<FieldError>{})) {
    texts.push_back(cause.field + ": " + cause.message + " [" + cause.reason + "]");
  }
  return texts;
}

TEST(RbacValidation, RolesNeedVerbsAndGroupsAndNamespacedRolesNoUrls) {
  EXPECT_TRUE(Causes("clusterroles", "rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]").empty());
  EXPECT_EQ(Causes("clusterroles", "rules: [{apiGroups: [''], resources: [pods]}]"),
            std::vector<std::string>{"rules[0].verbs: Required value: verbs must contain at least "
                                     "one value [FieldValueRequired]"});
  EXPECT_EQ(Causes("roles", "rules: [{verbs: [get]}]"),
            (std::vector<std::string>{
                "rules[0].apiGroups: Required value: resource rules must supply at least one api "
                "group [FieldValueRequired]",
                "rules[0].resources: Required value: resource rules must supply at least one "
                "resource [FieldValueRequired]"}));
  EXPECT_EQ(Causes("roles", "rules: [{nonResourceURLs: [/metrics], verbs: [get]}]"),
            std::vector<std::string>{"rules[0].nonResourceURLs: Invalid value: []string{\"/metrics\"}: "
                                     "namespaced rules cannot apply to non-resource URLs "
                                     "[FieldValueInvalid]"});
  EXPECT_EQ(Causes("clusterroles",
                   "rules: [{nonResourceURLs: [/a, /b], resources: [pods], verbs: [get]}]"),
            std::vector<std::string>{"rules[0].nonResourceURLs: Invalid value: []string{\"/a\", \"/b\"}: "
                                     "rules cannot apply to both regular resources and "
                                     "non-resource URLs [FieldValueInvalid]"});
}

TEST(RbacValidation, BindingsNeedAValidRoleRefAndSubjects) {
  const char* good =
      "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n"
      "subjects: [{kind: User, name: jane}, {kind: ServiceAccount, name: sa, namespace: ns}]";
  EXPECT_TRUE(Causes("clusterrolebindings", good).empty());
  EXPECT_EQ(Causes("clusterrolebindings",
                   "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: view}"),
            std::vector<std::string>{"roleRef.kind: Unsupported value: \"Role\": supported values: "
                                     "\"ClusterRole\" [FieldValueNotSupported]"});
  EXPECT_EQ(Causes("rolebindings", "roleRef: {kind: Role}\nsubjects: [{kind: Robot, name: r2}]"),
            (std::vector<std::string>{
                "roleRef.apiGroup: Unsupported value: \"\": supported values: "
                "\"rbac.authorization.k8s.io\" [FieldValueNotSupported]",
                "roleRef.name: Required value [FieldValueRequired]",
                "subjects[0].kind: Unsupported value: \"Robot\": supported values: "
                "\"ServiceAccount\", \"User\", \"Group\" [FieldValueNotSupported]"}));
  EXPECT_EQ(Causes("clusterrolebindings",
                   "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: a/b}\n"
                   "subjects: [{kind: ServiceAccount, name: Bad_Name}, {kind: User}]"),
            (std::vector<std::string>{
                "roleRef.name: Invalid value: \"a/b\": may not contain '/' [FieldValueInvalid]",
                "subjects[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must "
                "consist of lower case alphanumeric characters, '-' or '.', and must start and end "
                "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') "
                "[FieldValueInvalid]",
                "subjects[0].namespace: Required value [FieldValueRequired]",
                "subjects[1].name: Required value [FieldValueRequired]"}));
}

TEST(RbacValidation, UserAndGroupSubjectsGetTheRbacApiGroupAndRoleRefsCannotChange) {
  const ResourceType* type = FindResource(kRbacGroup, "v1", "rolebindings");
  json::object binding = Object(
      "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: a}\n"
      "subjects: [{kind: User, name: u}, {kind: Group, name: g}, {kind: ServiceAccount, name: s}]");
  ASSERT_TRUE(DefaultAndValidateRbacObject(*type, binding, nullptr).ok());
  const json::array& subjects = binding.at("subjects").as_array();
  EXPECT_EQ(subjects[0].at("apiGroup"), "rbac.authorization.k8s.io");
  EXPECT_EQ(subjects[1].at("apiGroup"), "rbac.authorization.k8s.io");
  EXPECT_FALSE(subjects[2].as_object().contains("apiGroup"));
  json::object current = binding;
  EXPECT_EQ(Causes("rolebindings",
                   "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: a}",
                   &current),
            std::vector<std::string>{"roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", "
                                     "Kind:\"ClusterRole\", Name:\"a\"}: cannot change roleRef "
                                     "[FieldValueInvalid]"});
}

TEST(RbacValidation, FieldsOfTheWrongTypeAreDecodeErrors) {
  struct Bad {
    const char* plural;
    const char* yaml;
    const char* message;
  };
  const Bad cases[] = {
      {"clusterroles", "rules: {verbs: [get]}",
       "ClusterRole in version \"v1\" cannot be handled as a ClusterRole: json: cannot unmarshal "
       "object into Go struct field ClusterRole.rules of type []v1.PolicyRule"},
      {"roles", "rules: [{verbs: get}]",
       "Role in version \"v1\" cannot be handled as a Role: json: cannot unmarshal string into Go "
       "struct field PolicyRule.rules.verbs of type []string"},
      {"roles", "rules: [{verbs: [1]}]",
       "Role in version \"v1\" cannot be handled as a Role: json: cannot unmarshal number into Go "
       "struct field PolicyRule.rules.verbs of type string"},
      {"roles", "rules: [7]",
       "Role in version \"v1\" cannot be handled as a Role: json: cannot unmarshal number into Go "
       "struct field Role.rules of type v1.PolicyRule"},
      {"rolebindings", "roleRef: x",
       "RoleBinding in version \"v1\" cannot be handled as a RoleBinding: json: cannot unmarshal "
       "string into Go struct field RoleBinding.roleRef of type v1.RoleRef"},
      {"rolebindings", "roleRef: {name: [a]}",
       "RoleBinding in version \"v1\" cannot be handled as a RoleBinding: json: cannot unmarshal "
       "array into Go struct field RoleRef.roleRef.name of type string"},
      {"clusterrolebindings", "subjects: [{kind: true}]",
       "ClusterRoleBinding in version \"v1\" cannot be handled as a ClusterRoleBinding: json: "
       "cannot unmarshal bool into Go struct field Subject.subjects.kind of type string"},
  };
  for (const Bad& bad : cases) {
    json::object object = Object(bad.yaml);
    Result<std::vector<FieldError>> causes =
        DefaultAndValidateRbacObject(*FindResource(kRbacGroup, "v1", bad.plural), object, nullptr);
    ASSERT_FALSE(causes.ok()) << bad.yaml;
    EXPECT_EQ(causes.status().message(), bad.message) << bad.yaml;
  }
}

TEST(RbacValidation, OtherTypesPassUntouched) {
  json::object pod = Object("spec: {containers: [{name: c}]}");
  json::object before = pod;
  Result<std::vector<FieldError>> causes =
      DefaultAndValidateRbacObject(*FindResource("", "v1", "pods"), pod, nullptr);
  ASSERT_TRUE(causes.ok());
  EXPECT_TRUE(causes->empty());
  EXPECT_EQ(pod, before);
}

}  // namespace
}  // namespace uplink::kubesim
