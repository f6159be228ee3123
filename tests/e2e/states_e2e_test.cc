// End to end, with real agents against uplink-kubesim: liveness follows every role's calls
// (the cluster role alone connects a connection and binds it), a token copied to another
// cluster is refused on every role there (the node role naming its cluster through the
// identity the inventory role writes into its status ConfigMap), and a token near its expiry
// and an empty inventory say so in the agent's log, its ConfigMap, the API and the CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/time.h"
#include "e2e/cluster.h"
#include "net/client.h"
#include "support/process.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;

constexpr char kHomeUid[] = "4e1f0c2a-0000-4000-8000-0000000057a7";
constexpr char kElsewhereUid[] = "4e1f0c2a-0000-4000-8000-00000000e15e";

struct Probe {
  int status = -1;
  std::string body;
};

Probe Readyz(int port) {
  auto client = net::HttpClient::Create({.base_url = "http://127.0.0.1:" + std::to_string(port),
                                         .connect_timeout = 2s,
                                         .request_timeout = 5s});
  if (!client.ok()) return {};
  net::Request request;
  request.target = "/readyz";
  auto response = (*client)->Send(request);
  return response.ok() ? Probe{response->status, response->body} : Probe{};
}

class StatesEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = &d_.StartCluster(kHomeUid, 2, 8);
    // Short thresholds, so that going stale and offline takes seconds, not minutes.
    d_.StartConsole({"--stale-after", "3s", "--offline-after", "6s"});
    connection_ = d_.CreateConnection("states-e2e");
    token_file_ = d_.WriteToken(connection_.token);
  }

  json::object Shown() {
    json::value shown = d_.ApiJson("GET", "/api/v1/connections/" + connection_.id);
    return shown.is_object() ? shown.as_object() : json::object();
  }

  std::string Liveness() {
    json::object shown = Shown();
    return shown.contains("liveness") ? std::string(shown.at("liveness").as_string()) : "";
  }

  std::unique_ptr<testing::ChildProcess> StartClusterRole(const SimulatedCluster& cluster,
                                                          const std::string& name, int port) {
    return std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{d_.bin("uplink-agent"), "cluster", "--console",
                                 d_.console_url(), "--token-file", token_file_, "--state-dir",
                                 d_.dir() + "/" + name + "-spool", "--instance", name,
                                 "--listen", "127.0.0.1:" + std::to_string(port), "--kubectl",
                                 "/usr/bin/kubectl", "--kubeconfig", cluster.kubeconfig,
                                 "--cache-dir", d_.dir() + "/" + name + "-cache", "--poll-wait",
                                 "1s"},
        d_.dir());
  }

  std::unique_ptr<testing::ChildProcess> StartNodeRole(const std::string& uid_file, int port) {
    return std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{d_.bin("uplink-agent"), "node", "--console", d_.console_url(),
                                 "--token-file", token_file_, "--state-dir",
                                 d_.dir() + "/node-spool", "--node-name", "copied-node",
                                 "--listen", "127.0.0.1:" + std::to_string(port),
                                 "--cluster-uid-file", uid_file, "--nvml-library",
                                 "/nonexistent/libnvidia-ml.so.1", "--nvidia-smi", ""},
        d_.dir());
  }

  // One inventory cycle in `cluster` with its status ConfigMap uplink-status (made here).
  testing::CommandResult InventoryOnce(const SimulatedCluster& cluster,
                                       const std::string& selector = "") {
    d_.Kubectl(cluster, {"-n", "uplink-system", "create", "configmap", "uplink-status"});
    auto argv = d_.AgentArgs(cluster, token_file_, 0);
    argv.insert(argv.end(), {"--once", "--namespace", "uplink-system", "--status-configmap",
                             "uplink-status"});
    if (!selector.empty()) argv.insert(argv.end(), {"--selector", selector});
    return testing::RunCommand(argv, 60s);
  }

  json::object StatusData(const SimulatedCluster& cluster) {
    auto got = d_.Kubectl(cluster, {"-n", "uplink-system", "get", "configmap", "uplink-status",
                                    "-o", "json"});
    EXPECT_EQ(got.exit_code, 0) << got.err;
    auto configmap = ParseJson(got.out);
    if (!configmap.ok() || !configmap->at("data").is_object()) return {};
    return configmap->at("data").as_object();
  }

  std::vector<std::string> SecurityCalls() {
    std::vector<std::string> calls;
    json::object shown = Shown();
    for (const json::value& event : shown.at("security_events").as_array()) {
      const json::object& detail = event.at("detail").as_object();
      calls.push_back(detail.contains("call") ? std::string(detail.at("call").as_string())
                                              : "report");
    }
    return calls;
  }

  Deployment d_;
  SimulatedCluster* home_ = nullptr;
  Connection connection_;
  std::string token_file_;
};

TEST_F(StatesEndToEnd, TheClusterRoleAloneConnectsAndBindsThenItsSilenceGoesStaleThenOffline) {
  EXPECT_EQ(Liveness(), "waiting");
  const int port = testing::FreePort();
  auto agent = StartClusterRole(*home_, "cluster-home", port);
  ASSERT_TRUE(testing::WaitFor([&] { return Liveness() == "connected"; }, 30s))
      << agent->Stderr();
  json::object shown = Shown();
  EXPECT_TRUE(shown.at("last_report_at").is_null()) << "no inventory report was needed";
  EXPECT_EQ(shown.at("cluster_uid"), kHomeUid) << "its first poll named and bound the cluster";
  bool listed = false;
  for (const json::value& agent_seen : shown.at("agents").as_array()) {
    listed = listed || (agent_seen.at("role") == "cluster" &&
                        agent_seen.at("instance") == "cluster-home");
  }
  EXPECT_TRUE(listed) << json::serialize(shown.at("agents"));
  EXPECT_NE(agent->Stderr().find("calls to the console name the cluster"), std::string::npos);

  agent->Stop();
  ASSERT_TRUE(testing::WaitFor([&] { return Liveness() == "stale"; }, 20s));
  ASSERT_TRUE(testing::WaitFor([&] { return Liveness() == "offline"; }, 20s));
  EXPECT_EQ(Shown().at("status"), "active") << "the token itself is fine";
}

TEST_F(StatesEndToEnd, ATokenCopiedToAnotherClusterIsRefusedOnEveryRoleThere) {
  SimulatedCluster& elsewhere = d_.StartCluster(kElsewhereUid, 2, 8);
  auto home_run = InventoryOnce(*home_);
  ASSERT_EQ(home_run.exit_code, 0) << home_run.err;
  EXPECT_EQ(StatusData(*home_).at("clusterUID"), kHomeUid);

  // The same Secret installed in another cluster: its inventory role is refused and still
  // writes its own cluster's identity into its ConfigMap, where the kubelet projects it for
  // the node role.
  auto copied_run = InventoryOnce(elsewhere);
  EXPECT_NE(copied_run.exit_code, 0);
  EXPECT_NE(copied_run.err.find("cluster_mismatch"), std::string::npos) << copied_run.err;
  json::object elsewhere_data = StatusData(elsewhere);
  ASSERT_EQ(elsewhere_data.at("clusterUID"), kElsewhereUid);
  EXPECT_EQ(elsewhere_data.at("lastError"), "cluster_mismatch");
  const std::string projected = d_.dir() + "/elsewhere-clusterUID";
  testing::WriteFileOrDie(projected, std::string(elsewhere_data.at("clusterUID").as_string()));

  const int node_port = testing::FreePort();
  auto node = StartNodeRole(projected, node_port);
  const int cluster_port = testing::FreePort();
  auto cluster_role = StartClusterRole(elsewhere, "cluster-elsewhere", cluster_port);
  Probe node_ready, cluster_ready;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        node_ready = Readyz(node_port);
        return node_ready.body.find("uploads refused: cluster_mismatch") != std::string::npos;
      },
      30s))
      << node_ready.status << " " << node_ready.body << node->Stderr();
  EXPECT_EQ(node_ready.status, 503);
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        cluster_ready = Readyz(cluster_port);
        return cluster_ready.body.find("command polls refused: cluster_mismatch") !=
               std::string::npos;
      },
      30s))
      << cluster_ready.status << " " << cluster_ready.body << cluster_role->Stderr();

  // The owner sees every attempt; nothing from the other cluster was stored.
  std::vector<std::string> calls = SecurityCalls();
  auto saw = [&](const std::string& call) {
    return std::find(calls.begin(), calls.end(), call) != calls.end();
  };
  EXPECT_TRUE(saw("/api/v1/agent/inventory"));  // the header is checked before the body
  EXPECT_TRUE(saw("/api/v1/agent/uploads"));
  EXPECT_TRUE(saw("/api/v1/agent/commands/poll"));
  json::object shown = Shown();
  EXPECT_EQ(shown.at("cluster_uid"), kHomeUid);
  EXPECT_TRUE(shown.at("streams").as_array().empty()) << json::serialize(shown.at("streams"));

  // The node role of the home cluster, naming it, is taken.
  node->Stop();
  testing::WriteFileOrDie(projected, kHomeUid);
  node = StartNodeRole(projected, node_port);
  EXPECT_TRUE(testing::WaitFor([&] { return !Shown().at("streams").as_array().empty(); }, 30s))
      << node->Stderr();
}

TEST(StatesEndToEndExpiry, ATokenNearItsExpiryAndAnEmptyInventorySaySoEverywhere) {
  Deployment d;
  SimulatedCluster& cluster = d.StartCluster(kHomeUid, 2, 8);
  d.StartConsole();
  const std::string expiry = FormatRfc3339(SystemClock().Now() + std::chrono::days(3));
  net::Response created =
      d.Api("POST", "/api/v1/connections",
            R"({"agent_name":"uplink-agent","cluster_name":"expiring","expires_at":")" + expiry +
                "\"}");
  ASSERT_EQ(created.status, 201) << created.body;
  json::object connection = ParseJson(created.body)->as_object();
  const std::string id(connection.at("id").as_string());
  const std::string token_file = d.WriteToken(std::string(connection.at("token").as_string()));

  d.Kubectl(cluster, {"-n", "uplink-system", "create", "configmap", "uplink-status"});
  auto argv = d.AgentArgs(cluster, token_file, 0);
  argv.insert(argv.end(), {"--once", "--namespace", "uplink-system", "--status-configmap",
                           "uplink-status", "--selector", "example.com/no-such-label=true"});
  auto run = testing::RunCommand(argv, 60s);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("the connection token expires in 3 days"), std::string::npos) << run.err;
  auto got = d.Kubectl(cluster, {"-n", "uplink-system", "get", "configmap", "uplink-status",
                                 "-o", "jsonpath={.data.expiresAt}"});
  EXPECT_EQ(got.out, expiry) << got.err;

  json::value shown = d.ApiJson("GET", "/api/v1/connections/" + id);
  EXPECT_TRUE(shown.at("nodes").as_array().empty());
  EXPECT_FALSE(shown.at("last_report_at").is_null());
  EXPECT_EQ(shown.at("expires_in_days").as_int64(), 3);

  auto show = d.Uplink({"connections", "show", "expiring"}, {{"UPLINK_API_KEY", d.admin_key()}});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("nodes: 0 match selector example.com/no-such-label=true"),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("Detection is not qualification"), std::string::npos);
  EXPECT_NE(show.out.find("in 3 days"), std::string::npos);
  EXPECT_NE(show.out.find("--renew"), std::string::npos);

  // A new installation code: 90 days, and the agent's next reply says so.
  auto renewed = d.Uplink({"connections", "rotate", "expiring", "--renew", "--token-out",
                           d.dir() + "/renewed-token"},
                          {{"UPLINK_API_KEY", d.admin_key()}});
  ASSERT_EQ(renewed.exit_code, 0) << renewed.err;
  json::value after = d.ApiJson("GET", "/api/v1/connections/" + id);
  EXPECT_TRUE(after.at("expires_in_days").is_null());
  auto old_token = testing::RunCommand(argv, 60s);
  EXPECT_NE(old_token.exit_code, 0) << "the old token still works";
  argv = d.AgentArgs(cluster, d.dir() + "/renewed-token", 0);
  argv.insert(argv.end(), {"--once", "--namespace", "uplink-system", "--status-configmap",
                           "uplink-status"});
  auto renewed_run = testing::RunCommand(argv, 60s);
  ASSERT_EQ(renewed_run.exit_code, 0) << renewed_run.err;
  EXPECT_EQ(renewed_run.err.find("expires in"), std::string::npos) << renewed_run.err;
  got = d.Kubectl(cluster, {"-n", "uplink-system", "get", "configmap", "uplink-status", "-o",
                            "jsonpath={.data.expiresAt}"});
  EXPECT_EQ(got.out, std::string(after.at("expires_at").as_string()));
}

}  // namespace
}  // namespace uplink::e2e
