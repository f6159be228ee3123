// End to end: the chart's inventory and cluster RBAC, rendered by chartrender and applied
// with real kubectl to uplink-kubesim in RBAC mode, lets the agent do its work under those
// service-account identities, and nothing more: writes and Secret reads are Forbidden.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "common/json.h"
#include "e2e/cluster.h"
#include "support/process.h"

namespace uplink {
namespace {

using testing::CommandResult;

constexpr char kNamespace[] = "uplink";
constexpr char kKubeSystemUid[] = "4b1d6c2e-7f3a-4e55-9a0c-2f9c1d8e6b70";
// Service-account bearer tokens kubesim accepts for the chart's identities.
constexpr char kInventoryToken[] = "chart-e2e-inventory-token-3f9a1c";
constexpr char kClusterToken[] = "chart-e2e-cluster-token-8d2e7b";
constexpr char kNodeToken[] = "chart-e2e-node-token-51c0aa";

class ChartRbacE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    // The two RBAC templates, as `helm template --show-only` would print them.
    CommandResult rendered = testing::RunCommand(
        {UPLINK_CHARTRENDER, "--release", "uplink-agent", "--namespace", kNamespace,
         "--set", "config.baseUrl=https://console.example.com",
         "--set", "token.existingSecret=uplink-agent-token", "--set", "kubernetes.enabled=true",
         "--show-only", "templates/inventory-rbac.yaml", "--show-only", "templates/cluster-rbac.yaml",
         std::string(UPLINK_SOURCE_DIR) + "/charts/uplink-agent"});
    ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
    rbac_file_ = dir() + "/rbac.yaml";
    testing::WriteFileOrDie(rbac_file_, rendered.out);

    // The cluster: kube-system with a known UID, the release namespace holding a Secret
    // and a ConfigMap that are not the agent's, GPU nodes and workloads.
    const std::string objects = dir() + "/objects.yaml";
    testing::WriteFileOrDie(objects, std::string(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-system\n  uid: ") + kKubeSystemUid + "\n"
        "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: uplink\n"
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: uplink-agent-token\n  namespace: uplink\n"
        "data:\n  UPLINK_AGENT_TOKEN: c2VjcmV0\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: someone-elses\n  namespace: uplink\n"
        "data:\n  a: b\n");
    const std::string tokens = dir() + "/tokens.csv";
    testing::WriteFileOrDie(tokens,
        std::string(kInventoryToken) + ",system:serviceaccount:uplink:uplink-agent-inventory,uid-inventory\n" +
        kClusterToken + ",system:serviceaccount:uplink:uplink-agent-cluster,uid-cluster\n" +
        kNodeToken + ",system:serviceaccount:uplink:uplink-agent-node,uid-node\n");
    admin_.kubeconfig = dir() + "/admin.kubeconfig";
    admin_.kube_system_uid = kKubeSystemUid;
    admin_.process = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{deployment_.bin("uplink-kubesim"), "--listen", "127.0.0.1:0",
                                 "--nodes", "2", "--cpu-nodes", "1", "--workloads",
                                 "--authorization-mode", "RBAC", "--token-auth-file", tokens,
                                 "--objects", objects, "--kubeconfig-out", admin_.kubeconfig},
        dir());
    ASSERT_TRUE(testing::WaitFor([&] { return !testing::ReadFileOrEmpty(admin_.kubeconfig).empty(); },
                                 std::chrono::seconds(30)))
        << admin_.process->Stderr();

    // Apply the chart's RBAC as cluster admin, with real kubectl.
    CommandResult applied = deployment_.Kubectl(admin_, {"apply", "-f", rbac_file_});
    ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;

    inventory_ = Identity("inventory", kInventoryToken);
    cluster_ = Identity("cluster", kClusterToken);
    node_ = Identity("node", kNodeToken);
  }

  const std::string& dir() const { return deployment_.dir(); }

  // The admin kubeconfig with the admin's token replaced by a service account's.
  e2e::SimulatedCluster Identity(const std::string& name, const std::string& token) {
    const std::string admin = testing::ReadFileOrEmpty(admin_.kubeconfig);
    const std::string replaced =
        std::regex_replace(admin, std::regex(R"((\n\s*token:\s*).*)"), "$1\"" + token + "\"");
    EXPECT_NE(replaced, admin) << "no token line in kubesim's kubeconfig";
    e2e::SimulatedCluster identity;
    identity.kubeconfig = dir() + "/" + name + ".kubeconfig";
    identity.kube_system_uid = kKubeSystemUid;
    testing::WriteFileOrDie(identity.kubeconfig, replaced);
    return identity;
  }

  void ExpectAllowed(e2e::SimulatedCluster& who, const std::vector<std::string>& args) {
    CommandResult result = deployment_.Kubectl(who, args);
    EXPECT_EQ(result.exit_code, 0) << "kubectl " << ::testing::PrintToString(args) << " as "
                                   << who.kubeconfig << " was refused:\n" << result.err;
  }

  void ExpectForbidden(e2e::SimulatedCluster& who, const std::vector<std::string>& args) {
    CommandResult result = deployment_.Kubectl(who, args);
    EXPECT_NE(result.exit_code, 0) << "kubectl " << ::testing::PrintToString(args) << " as "
                                   << who.kubeconfig << " was allowed:\n" << result.out;
    // "Error from server (Forbidden): ..." or, from kubectl create, "... is forbidden: ...".
    EXPECT_TRUE(result.err.find("Forbidden") != std::string::npos ||
                result.err.find(" is forbidden: User") != std::string::npos)
        << "kubectl " << ::testing::PrintToString(args) << " failed, but not as forbidden:\n" << result.err;
  }

  e2e::Deployment deployment_;
  e2e::SimulatedCluster admin_;
  e2e::SimulatedCluster inventory_;
  e2e::SimulatedCluster cluster_;
  e2e::SimulatedCluster node_;
  std::string rbac_file_;
};

TEST_F(ChartRbacE2e, InventoryAgentReportsUnderItsServiceAccount) {
  deployment_.StartConsole();
  e2e::Connection connection = deployment_.CreateConnection("rbac-e2e");
  const std::string token_file = deployment_.WriteToken(connection.token);
  auto agent = [&](const e2e::SimulatedCluster& identity) {
    auto argv = deployment_.AgentArgs(identity, token_file, 0);
    for (const char* flag : {"--once", "--namespace", kNamespace, "--status-configmap", "uplink-agent-status"}) {
      argv.push_back(flag);
    }
    return testing::RunCommand(argv, std::chrono::seconds(60));
  };

  // An identity the chart grants nothing (the node role's) cannot take inventory...
  CommandResult refused = agent(node_);
  EXPECT_NE(refused.exit_code, 0) << "the agent reported without any RBAC:\n" << refused.err;

  // ...the inventory role's can: nodes listed, kube-system read, the status ConfigMap patched.
  CommandResult reported = agent(inventory_);
  ASSERT_EQ(reported.exit_code, 0) << reported.err;
  json::value shown = deployment_.ApiJson("GET", "/api/v1/connections/" + connection.id);
  EXPECT_EQ(json::serialize(shown.at("cluster_uid")), std::string("\"") + kKubeSystemUid + "\"")
      << json::serialize(shown);
  CommandResult status = deployment_.Kubectl(
      admin_, {"get", "configmap", "uplink-agent-status", "-n", kNamespace, "-o", "jsonpath={.data}"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  for (const char* field : {R"("mode":"inventory")", R"("nodes":"2")", R"("gpus":"16")", R"("lastError":"")"}) {
    EXPECT_NE(status.out.find(field), std::string::npos)
        << "the agent's status ConfigMap lacks " << field << ": " << status.out;
  }
}

TEST_F(ChartRbacE2e, InventoryIdentityMayDoNothingElse) {
  ExpectAllowed(inventory_, {"get", "nodes"});
  ExpectAllowed(inventory_, {"get", "namespace", "kube-system"});
  // Patching its status ConfigMap is allowed (the agent test above does it); `kubectl patch`
  // reads the object first, which the role does not allow, so it is not tried here.

  ExpectForbidden(inventory_, {"get", "secrets", "-n", kNamespace});
  ExpectForbidden(inventory_, {"get", "secret", "uplink-agent-token", "-n", kNamespace});
  ExpectForbidden(inventory_, {"get", "node", "gpu-node-0001"});  // list only, not get
  ExpectForbidden(inventory_, {"get", "namespace", "default"});
  ExpectForbidden(inventory_, {"get", "pods", "-A"});
  ExpectForbidden(inventory_, {"get", "configmap", "uplink-agent-status", "-n", kNamespace});
  ExpectForbidden(inventory_, {"patch", "configmap", "someone-elses", "-n", kNamespace,
                               "--type", "merge", "-p", R"({"data":{"a":"c"}})"});
  ExpectForbidden(inventory_, {"create", "configmap", "new-one", "-n", kNamespace, "--from-literal=a=b"});
  ExpectForbidden(inventory_, {"delete", "configmap", "uplink-agent-status", "-n", kNamespace});
  ExpectForbidden(inventory_, {"label", "node", "gpu-node-0001", "owned=yes"});
}

TEST_F(ChartRbacE2e, ClusterIdentityReadsWhatTheConsoleAsksAndNothingMore) {
  // The read-only commands the cluster role runs for the console's plan.
  ExpectAllowed(cluster_, {"get", "nodes"});
  ExpectAllowed(cluster_, {"get", "node", "gpu-node-0001", "-o", "json"});
  ExpectAllowed(cluster_, {"get", "namespaces"});
  ExpectAllowed(cluster_, {"get", "pods", "-A", "-o", "json"});
  ExpectAllowed(cluster_, {"get", "events", "-A", "--field-selector", "type=Warning"});
  ExpectAllowed(cluster_, {"get", "deployments,statefulsets", "-A"});
  ExpectAllowed(cluster_, {"top", "nodes"});
  ExpectAllowed(cluster_, {"top", "pods", "-A"});
  ExpectAllowed(cluster_, {"describe", "node", "gpu-node-0001"});
  CommandResult pods = deployment_.Kubectl(admin_, {"get", "pods", "-A", "-o",
      R"(jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end})"});
  ASSERT_EQ(pods.exit_code, 0) << pods.err;
  const std::string first = pods.out.substr(0, pods.out.find('\n'));
  const auto slash = first.find('/');
  ASSERT_NE(slash, std::string::npos) << pods.out;
  ExpectAllowed(cluster_, {"logs", "-n", first.substr(0, slash), first.substr(slash + 1), "--tail", "5"});

  // Secrets, Services, writes and impersonation are not.
  ExpectForbidden(cluster_, {"get", "secrets", "-A"});
  ExpectForbidden(cluster_, {"get", "secret", "uplink-agent-token", "-n", kNamespace});
  ExpectForbidden(cluster_, {"get", "services", "-A"});
  ExpectForbidden(cluster_, {"get", "configmaps", "-A"});
  ExpectForbidden(cluster_, {"create", "namespace", "mine"});
  ExpectForbidden(cluster_, {"delete", "namespace", kNamespace});
  ExpectForbidden(cluster_, {"label", "node", "gpu-node-0001", "owned=yes"});
  ExpectForbidden(cluster_, {"get", "pods", "-A", "--as", "system:admin"});
  ExpectForbidden(cluster_, {"get", "pods", "-A", "--as", "x", "--as-group", "system:masters"});
}

// The node role has no Kubernetes access at all.
TEST_F(ChartRbacE2e, NodeIdentityHasNoAccess) {
  ExpectForbidden(node_, {"get", "nodes"});
  ExpectForbidden(node_, {"get", "pods", "-n", kNamespace});
  ExpectForbidden(node_, {"get", "secrets", "-n", kNamespace});
}

}  // namespace
}  // namespace uplink
