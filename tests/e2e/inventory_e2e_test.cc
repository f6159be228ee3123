// The foundation end to end: kubesim + console + agent as real processes.
#include <gtest/gtest.h>

#include "cluster.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;

const json::value* Field(const json::value& v, const char* key) {
  return v.is_object() ? v.as_object().if_contains(key) : nullptr;
}

std::size_t NodeCount(const json::value& connection) {
  const auto* nodes = Field(connection, "nodes");
  return nodes && nodes->is_array() ? nodes->as_array().size() : 0;
}

TEST(InventoryEndToEnd, EveryNodeWithItsGpusAppearsInTheConsoleWithinSeconds) {
  Deployment d;
  SimulatedCluster& cluster = d.StartCluster("11111111-1111-4111-8111-111111111111", 6, 8);
  d.StartConsole();
  Connection connection = d.CreateConnection("e2e-a");
  EXPECT_EQ(d.ApiJson("GET", "/api/v1/connections/" + connection.id).at("status"), "never");

  const int health_port = testing::FreePort();
  auto agent = d.StartAgent(cluster, d.WriteToken(connection.token), health_port);
  json::value shown;
  ASSERT_TRUE(testing::WaitFor([&] {
    shown = d.ApiJson("GET", "/api/v1/connections/" + connection.id);
    return NodeCount(shown) == 6;
  })) << agent->Stderr();

  EXPECT_EQ(shown.at("status"), "active");
  EXPECT_EQ(shown.at("cluster_uid"), "11111111-1111-4111-8111-111111111111");
  EXPECT_EQ(shown.at("agent_version"), UPLINK_VERSION);
  EXPECT_FALSE(Field(shown, "last_report_at")->is_null());
  for (const auto& node : shown.at("nodes").as_array()) {
    EXPECT_EQ(node.at("gpu_resource"), "nvidia.com/gpu") << node;
    EXPECT_EQ(node.at("gpu_capacity"), 8) << node;
    EXPECT_EQ(node.at("gpu_allocatable"), 8) << node;
    EXPECT_EQ(node.at("ready"), true) << node;
    EXPECT_EQ(node.at("unschedulable"), false) << node;
    EXPECT_FALSE(node.at("gpu_product").as_string().empty()) << node;
  }
  const auto& totals = shown.at("totals");
  EXPECT_EQ(totals.at("nodes"), 6);
  EXPECT_EQ(totals.at("gpu_capacity"), 48);

  // The agent's own probes: alive, and ready because its last report was accepted.
  EXPECT_TRUE(testing::WaitFor([&] { return d.AgentProbe(health_port, "/readyz") == 200; }));
  EXPECT_EQ(d.AgentProbe(health_port, "/healthz"), 200);

  // The list shows the same connection.
  const json::value listed = d.ApiJson("GET", "/api/v1/connections");
  const auto& list = listed.at("connections").as_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].at("id"), json::value(connection.id));
}

TEST(InventoryEndToEnd, AgentRecordsItsStateInItsOwnStatusConfigMap) {
  Deployment d;
  SimulatedCluster& cluster = d.StartCluster("77777777-7777-4777-8777-777777777777", 3, 8);
  d.StartConsole();
  auto created = d.Kubectl(cluster, {"-n", "uplink-system", "create", "configmap", "uplink-status"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  Connection connection = d.CreateConnection("e2e-status");
  auto argv = d.AgentArgs(cluster, d.WriteToken(connection.token), 0);
  argv.insert(argv.end(), {"--once", "--namespace", "uplink-system", "--status-configmap",
                           "uplink-status"});
  auto run = testing::RunCommand(argv, 60s);
  ASSERT_EQ(run.exit_code, 0) << run.err;

  auto got = d.Kubectl(cluster, {"-n", "uplink-system", "get", "configmap", "uplink-status", "-o", "json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  auto configmap = ParseJson(got.out);
  ASSERT_TRUE(configmap.ok()) << got.out;
  const auto& data = configmap->at("data").as_object();
  EXPECT_EQ(data.at("mode"), "inventory");
  EXPECT_EQ(data.at("qualification"), "not-performed") << "inventory is never a qualification";
  EXPECT_EQ(data.at("nodes"), "3");
  EXPECT_EQ(data.at("gpus"), "24");
  EXPECT_TRUE(data.contains("lastReportAt"));
  EXPECT_EQ(data.at("lastError"), "");
}

TEST(InventoryEndToEnd, TokenReusedOnAnotherClusterIsRefusedWith409AndNothingIsStored) {
  Deployment d;
  SimulatedCluster& first = d.StartCluster("22222222-2222-4222-8222-222222222222", 3, 4);
  SimulatedCluster& second = d.StartCluster("33333333-3333-4333-8333-333333333333", 5, 8);
  d.StartConsole();
  Connection connection = d.CreateConnection("e2e-bind");
  const std::string token_file = d.WriteToken(connection.token);

  auto accepted = d.RunAgentOnce(first, token_file);
  ASSERT_EQ(accepted.exit_code, 0) << accepted.err;

  auto refused = d.RunAgentOnce(second, token_file);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("cluster_mismatch"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find(connection.token), std::string::npos) << "the token reached a log";

  json::value shown = d.ApiJson("GET", "/api/v1/connections/" + connection.id);
  EXPECT_EQ(shown.at("cluster_uid"), "22222222-2222-4222-8222-222222222222");
  EXPECT_EQ(NodeCount(shown), 3u) << "the refused report replaced the stored nodes";
}

TEST(InventoryEndToEnd, RotatedTokenIsRefusedOnItsNextReportAndTheNewOneWorks) {
  Deployment d;
  SimulatedCluster& cluster = d.StartCluster("44444444-4444-4444-8444-444444444444", 2, 8);
  d.StartConsole();
  Connection connection = d.CreateConnection("e2e-rotate");
  const std::string token_file = d.WriteToken(connection.token);
  ASSERT_EQ(d.RunAgentOnce(cluster, token_file).exit_code, 0);

  json::value rotated = d.ApiJson("POST", "/api/v1/connections/" + connection.id + "/rotate");
  const std::string new_token(rotated.at("token").as_string());
  EXPECT_NE(new_token, connection.token);

  auto refused = d.RunAgentOnce(cluster, token_file);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("invalid_token"), std::string::npos) << refused.err;

  // The agent re-reads its token file, as it does when a rotated Secret is mounted.
  testing::WriteFileOrDie(token_file, new_token);
  auto accepted = d.RunAgentOnce(cluster, token_file);
  EXPECT_EQ(accepted.exit_code, 0) << accepted.err;
}

TEST(InventoryEndToEnd, RevokedConnectionStopsReportingAndTheAgentGoesUnready) {
  Deployment d;
  SimulatedCluster& cluster = d.StartCluster("55555555-5555-4555-8555-555555555555", 2, 8);
  d.StartConsole({"--report-interval", "10s"});
  Connection connection = d.CreateConnection("e2e-revoke");
  const int health_port = testing::FreePort();
  auto agent = d.StartAgent(cluster, d.WriteToken(connection.token), health_port);
  ASSERT_TRUE(testing::WaitFor([&] { return d.AgentProbe(health_port, "/readyz") == 200; }))
      << agent->Stderr();

  json::value revoked = d.ApiJson("POST", "/api/v1/connections/" + connection.id + "/revoke");
  EXPECT_EQ(revoked.at("status"), "revoked");
  // The next report (10 s interval from the console's reply) is refused and readiness drops.
  EXPECT_TRUE(testing::WaitFor([&] { return d.AgentProbe(health_port, "/readyz") == 503; }, 40s))
      << agent->Stderr();
  EXPECT_NE(agent->Stderr().find("revoked"), std::string::npos);
  EXPECT_TRUE(agent->Running()) << "a refused token must not crash the agent";
  EXPECT_EQ(d.ApiJson("GET", "/api/v1/connections/" + connection.id).at("status"), "revoked");
}

TEST(InventoryEndToEnd, AgentKeepsRunningWhileTheConsoleIsDownAndRecoversWhenItReturns) {
  Deployment d;
  SimulatedCluster& cluster = d.StartCluster("66666666-6666-4666-8666-666666666666", 2, 8);
  d.StartConsole({"--report-interval", "10s"});
  Connection connection = d.CreateConnection("e2e-outage");
  const int health_port = testing::FreePort();
  auto agent = d.StartAgent(cluster, d.WriteToken(connection.token), health_port);
  ASSERT_TRUE(testing::WaitFor([&] { return d.AgentProbe(health_port, "/readyz") == 200; }))
      << agent->Stderr();
  const std::string first_report =
      std::string(d.ApiJson("GET", "/api/v1/connections/" + connection.id).at("last_report_at").as_string());

  d.StopConsole();
  // At least one failed cycle while the console is gone.
  EXPECT_TRUE(testing::WaitFor([&] { return agent->Stderr().find("\"level\":\"warn\"") != std::string::npos ||
                                            agent->Stderr().find("\"level\":\"error\"") != std::string::npos; },
                               40s));
  EXPECT_TRUE(agent->Running());

  d.StartConsole({"--report-interval", "10s"});
  EXPECT_TRUE(testing::WaitFor([&] {
    json::value shown = d.ApiJson("GET", "/api/v1/connections/" + connection.id);
    return shown.at("last_report_at").is_string() && shown.at("last_report_at").as_string() != first_report;
  }, 60s)) << agent->Stderr();
  EXPECT_TRUE(agent->Running());
}

}  // namespace
}  // namespace uplink::e2e
