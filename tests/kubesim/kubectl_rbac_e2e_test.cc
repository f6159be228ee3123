// End to end in RBAC mode: the admin applies RBAC like the chart renders it with real
// `kubectl apply`, and the agents' service accounts (tokens from --token-auth-file, never on a
// command line) can do exactly what their roles allow, the rest failing with the real server's
// Forbidden.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/json.h"
#include "kubesim_process.h"

namespace uplink::kubesim {
namespace {

using testing::CommandResult;
using testing::KubesimProcess;

constexpr const char* kClusterAgent = "system:serviceaccount:uplink-system:uplink-agent-cluster";
constexpr const char* kCrashing = "vllm-llama3-8b-6d9f7c5b8d-q9w4t";

// The cluster Deployment's read-only ClusterRole from the observability guide, and the
// inventory Deployment's narrow grants, as the chart renders them.
constexpr const char* kRenderedRbac = R"(apiVersion: v1
kind: ServiceAccount
metadata:
  name: uplink-agent-cluster
  namespace: uplink-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: uplink-agent-inventory
  namespace: uplink-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: uplink-agent-cluster
rules:
- apiGroups: [""]
  resources: ["nodes", "namespaces", "pods", "events"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets"]
  verbs: ["get", "list"]
- apiGroups: ["metrics.k8s.io"]
  resources: ["nodes", "pods"]
  verbs: ["get", "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: uplink-agent-cluster
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: uplink-agent-cluster
subjects:
- kind: ServiceAccount
  name: uplink-agent-cluster
  namespace: uplink-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: uplink-agent-inventory
rules:
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["namespaces"]
  resourceNames: ["kube-system"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: uplink-agent-inventory
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: uplink-agent-inventory
subjects:
- kind: ServiceAccount
  name: uplink-agent-inventory
  namespace: uplink-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: uplink-agent-inventory-status
  namespace: uplink-system
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: ["uplink-inventory-status"]
  verbs: ["patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: uplink-agent-inventory-status
  namespace: uplink-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: uplink-agent-inventory-status
subjects:
- kind: ServiceAccount
  name: uplink-agent-inventory
)";

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

size_t LineCount(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

class RbacKubectlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    files_ = new testing::TempDir();
    std::ofstream(files_->File("tokens.csv"))
        << "cluster-agent-token-8c1e4b,system:serviceaccount:uplink-system:uplink-agent-cluster,"
           "uid-cluster\n"
        << "inventory-agent-token-2f9d70,system:serviceaccount:uplink-system:uplink-agent-inventory,"
           "uid-inventory\n";
    auto started = KubesimProcess::Start({"--workloads", "--token-auth-file",
                                          files_->File("tokens.csv"), "--authorization-mode",
                                          "RBAC"});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    kubesim_ = started->release();
    applied_ = kubesim_->Kubectl({"apply", "-f", "-"}, kRenderedRbac);
    ASSERT_EQ(applied_.exit_code, 0) << applied_.err;
    CommandResult status = kubesim_->Kubectl(
        {"create", "configmap", "uplink-inventory-status", "-n", "uplink-system"});
    ASSERT_EQ(status.exit_code, 0) << status.err;
    CommandResult other = kubesim_->Kubectl({"create", "configmap", "other", "-n", "uplink-system"});
    ASSERT_EQ(other.exit_code, 0) << other.err;
    Result<std::string> cluster =
        kubesim_->WriteKubeconfigFor("cluster-agent-token-8c1e4b", "cluster-agent.kubeconfig");
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_kubeconfig_ = new std::string(*cluster);
    Result<std::string> inventory =
        kubesim_->WriteKubeconfigFor("inventory-agent-token-2f9d70", "inventory-agent.kubeconfig");
    ASSERT_TRUE(inventory.ok()) << inventory.status().ToString();
    inventory_kubeconfig_ = new std::string(*inventory);
  }
  static void TearDownTestSuite() {
    if (kubesim_) {
      EXPECT_EQ(kubesim_->Stop(), 0) << kubesim_->Logs();
    }
    delete kubesim_;
    kubesim_ = nullptr;
    delete cluster_kubeconfig_;
    delete inventory_kubeconfig_;
    delete files_;
  }
  void SetUp() override {
    ASSERT_NE(kubesim_, nullptr) << "uplink-kubesim did not start";
    ASSERT_NE(inventory_kubeconfig_, nullptr) << "the RBAC was not applied";
  }
  void TearDown() override { EXPECT_TRUE(kubesim_->Running()) << kubesim_->Logs(); }

  static CommandResult AsClusterAgent(const std::vector<std::string>& args) {
    return kubesim_->KubectlWith(*cluster_kubeconfig_, args);
  }
  static CommandResult AsInventoryAgent(const std::vector<std::string>& args,
                                        const std::string& stdin_data = "") {
    return kubesim_->KubectlWith(*inventory_kubeconfig_, args, stdin_data);
  }
  // stderr of a command that must fail with the real server's Forbidden (kubectl prints it
  // as "Error from server (Forbidden): ..." or, for create commands, inside its own error).
  static std::string Forbidden(const CommandResult& result) {
    EXPECT_NE(result.exit_code, 0) << result.out;
    EXPECT_TRUE(Contains(result.err, "Error from server (Forbidden): ") ||
                Contains(result.err, " is forbidden: User "))
        << result.err;
    return result.err;
  }

  static testing::TempDir* files_;
  static KubesimProcess* kubesim_;
  static CommandResult applied_;
  static std::string* cluster_kubeconfig_;
  static std::string* inventory_kubeconfig_;
};

testing::TempDir* RbacKubectlTest::files_ = nullptr;
KubesimProcess* RbacKubectlTest::kubesim_ = nullptr;
CommandResult RbacKubectlTest::applied_;
std::string* RbacKubectlTest::cluster_kubeconfig_ = nullptr;
std::string* RbacKubectlTest::inventory_kubeconfig_ = nullptr;

TEST_F(RbacKubectlTest, TheAdminAppliesTheRenderedRbacAndReapplyingChangesNothing) {
  EXPECT_EQ(applied_.out,
            "serviceaccount/uplink-agent-cluster created\n"
            "serviceaccount/uplink-agent-inventory created\n"
            "clusterrole.rbac.authorization.k8s.io/uplink-agent-cluster created\n"
            "clusterrolebinding.rbac.authorization.k8s.io/uplink-agent-cluster created\n"
            "clusterrole.rbac.authorization.k8s.io/uplink-agent-inventory created\n"
            "clusterrolebinding.rbac.authorization.k8s.io/uplink-agent-inventory created\n"
            "role.rbac.authorization.k8s.io/uplink-agent-inventory-status created\n"
            "rolebinding.rbac.authorization.k8s.io/uplink-agent-inventory-status created\n");
  CommandResult again = kubesim_->Kubectl({"apply", "-f", "-"}, kRenderedRbac);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  std::istringstream lines(again.out);
  size_t unchanged = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.ends_with(" unchanged")) << line;
    ++unchanged;
  }
  EXPECT_EQ(unchanged, 8u) << again.out;
  CommandResult role = kubesim_->Kubectl(
      {"get", "clusterrole", "uplink-agent-cluster", "-o", "jsonpath={.rules[*].resources}"});
  EXPECT_EQ(role.out,
            R"(["nodes","namespaces","pods","events"] ["pods/log"] ["deployments","statefulsets"] ["nodes","pods"])");
  CommandResult bindings = kubesim_->Kubectl({"get", "rolebindings", "-n", "uplink-system", "-o", "wide"});
  EXPECT_TRUE(Contains(bindings.out, "Role/uplink-agent-inventory-status")) << bindings.out;
  // The subject has no namespace of its own: it is the binding's.
  EXPECT_TRUE(Contains(bindings.out, "   uplink-agent-inventory\n")) << bindings.out;
}

TEST_F(RbacKubectlTest, TheClusterAgentReadsWhatItsClusterRoleAllows) {
  CommandResult pods = AsClusterAgent({"get", "pods", "-A"});
  ASSERT_EQ(pods.exit_code, 0) << pods.err;
  EXPECT_EQ(LineCount(pods.out), 13u) << pods.out;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"get", "nodes"},
           {"get", "namespaces"},
           {"get", "events", "-A", "--field-selector", "type=Warning"},
           {"get", "deployments,statefulsets", "-A"},
           {"top", "nodes"},
           {"top", "pods", "-A"},
           {"api-resources"},
           {"api-versions"},
           {"version"},
           {"explain", "deployment.spec"}}) {
    CommandResult result = AsClusterAgent(args);
    EXPECT_EQ(result.exit_code, 0) << args.front() << " " << args.at(1) << ": " << result.err;
    EXPECT_FALSE(result.out.empty()) << args.front();
  }
  CommandResult logs = AsClusterAgent({"logs", "-n", "inference", kCrashing, "--previous", "--tail=1"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_TRUE(Contains(logs.out, "Engine process failed to start")) << logs.out;
  CommandResult describe = AsClusterAgent({"describe", "pod", "-n", "inference", kCrashing});
  ASSERT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_TRUE(Contains(describe.out, "Warning  BackOff")) << describe.out;
}

TEST_F(RbacKubectlTest, TheClusterAgentCannotReadSecretsOrWriteAnything) {
  const std::string user = "User \"" + std::string(kClusterAgent) + "\" ";
  EXPECT_TRUE(Contains(Forbidden(AsClusterAgent({"get", "secrets", "-n", "uplink-system"})),
                       "secrets is forbidden: " + user +
                           "cannot list resource \"secrets\" in API group \"\" in the namespace "
                           "\"uplink-system\""));
  EXPECT_TRUE(Contains(Forbidden(AsClusterAgent({"get", "secrets", "-A"})),
                       "cannot list resource \"secrets\" in API group \"\" at the cluster scope"));
  EXPECT_TRUE(Contains(Forbidden(AsClusterAgent({"delete", "pod", "-n", "inference", kCrashing})),
                       "pods \"" + std::string(kCrashing) + "\" is forbidden: " + user +
                           "cannot delete resource \"pods\" in API group \"\" in the namespace "
                           "\"inference\""));
  EXPECT_TRUE(Contains(Forbidden(AsClusterAgent({"create", "namespace", "intruder"})),
                       "namespaces is forbidden: " + user +
                           "cannot create resource \"namespaces\" in API group \"\" at the "
                           "cluster scope"));
  Forbidden(AsClusterAgent({"create", "configmap", "x", "-n", "default", "--from-literal=a=b"}));
  Forbidden(AsClusterAgent({"label", "namespace", "default", "owned=yes"}));
  Forbidden(AsClusterAgent({"get", "services", "-A"}));
  Forbidden(AsClusterAgent({"get", "clusterroles"}));
  EXPECT_TRUE(Contains(Forbidden(AsClusterAgent({"exec", "-n", "inference", kCrashing, "--", "id"})),
                       "cannot create resource \"pods/exec\""));
  // cluster-info lists kube-system's services, which the read-only role does not cover: the
  // same Forbidden a real cluster gives.
  std::string info = Forbidden(AsClusterAgent({"cluster-info"}));
  EXPECT_TRUE(Contains(info, "services is forbidden: " + user +
                                 "cannot list resource \"services\" in API group \"\" in the "
                                 "namespace \"kube-system\""))
      << info;
  // Nor may it become someone else (refused from the first, discovery, request on).
  Forbidden(AsClusterAgent({"get", "secrets", "--as=kubesim-admin", "--as-group=system:masters"}));
  // Nothing it tried got through.
  CommandResult namespaces = kubesim_->Kubectl({"get", "namespace", "intruder"});
  EXPECT_NE(namespaces.exit_code, 0);
  CommandResult pod = kubesim_->Kubectl({"get", "pod", "-n", "inference", kCrashing, "-o", "name"});
  EXPECT_EQ(pod.out, "pod/" + std::string(kCrashing) + "\n");
}

TEST_F(RbacKubectlTest, TheInventoryAgentReachesOnlyItsNamedObjects) {
  CommandResult nodes = AsInventoryAgent({"get", "nodes", "-o", "name"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_EQ(LineCount(nodes.out), 3u);
  CommandResult kube_system = AsInventoryAgent({"get", "namespace", "kube-system", "-o", "name"});
  ASSERT_EQ(kube_system.exit_code, 0) << kube_system.err;
  EXPECT_EQ(kube_system.out, "namespace/kube-system\n");
  EXPECT_TRUE(Contains(Forbidden(AsInventoryAgent({"get", "namespace", "default"})),
                       "namespaces \"default\" is forbidden"));
  Forbidden(AsInventoryAgent({"get", "namespaces"}));
  Forbidden(AsInventoryAgent({"get", "node", "gpu-node-0001"}));
  // The Role grants patch alone on its ConfigMap. That is all the agent's own PATCH needs;
  // `kubectl patch` also reads the object first, so it is refused, as on a real cluster.
  auto can = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"auth", "can-i"};
    argv.insert(argv.end(), args.begin(), args.end());
    return AsInventoryAgent(argv).out;
  };
  EXPECT_EQ(can({"patch", "configmap/uplink-inventory-status", "-n", "uplink-system"}), "yes\n");
  EXPECT_EQ(can({"patch", "configmap/other", "-n", "uplink-system"}), "no\n");
  EXPECT_EQ(can({"patch", "configmap/uplink-inventory-status", "-n", "default"}), "no\n");
  EXPECT_EQ(can({"get", "configmap/uplink-inventory-status", "-n", "uplink-system"}), "no\n");
  EXPECT_EQ(can({"create", "configmaps", "-n", "uplink-system"}), "no\n");
  EXPECT_TRUE(Contains(Forbidden(AsInventoryAgent({"patch", "configmap", "uplink-inventory-status",
                                                   "-n", "uplink-system", "--type", "merge", "-p",
                                                   R"({"data":{"x":"y"}})"})),
                       "cannot get resource \"configmaps\""));
  Forbidden(AsInventoryAgent({"get", "configmaps", "-n", "uplink-system"}));
  Forbidden(AsInventoryAgent({"get", "pods", "-A"}));
}

TEST_F(RbacKubectlTest, AuthCanIAnswersForTheAgentsAndForTheAdminImpersonatingThem) {
  auto can = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"auth", "can-i"};
    argv.insert(argv.end(), args.begin(), args.end());
    return kubesim_->Kubectl(argv).out;
  };
  const std::string as = std::string("--as=") + kClusterAgent;
  EXPECT_EQ(can({"list", "pods", "-A", as}), "yes\n");
  EXPECT_EQ(can({"get", "pods", "--subresource=log", "-n", "inference", as}), "yes\n");
  EXPECT_EQ(can({"list", "secrets", "-A", as}), "no\n");
  EXPECT_EQ(can({"delete", "pods", "-n", "inference", as}), "no\n");
  EXPECT_EQ(can({"create", "pods/exec", "-n", "inference", as}), "no\n");
  EXPECT_EQ(can({"list", "secrets", "-A"}), "yes\n");
  CommandResult own = AsClusterAgent({"auth", "can-i", "--list", "-n", "inference"});
  ASSERT_EQ(own.exit_code, 0) << own.err;
  EXPECT_TRUE(Contains(own.out, "pods/log")) << own.out;
  EXPECT_FALSE(Contains(own.out, "secrets")) << own.out;
}

}  // namespace
}  // namespace uplink::kubesim
