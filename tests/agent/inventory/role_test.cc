#include "agent/inventory/role.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "support/fake_http.h"
#include "support/process.h"

namespace uplink::agent::inventory {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeHttp;
using testing::Fixture;

// A fake Kubernetes API server with the real A16 node, plus a fake console; the role is
// driven one cycle at a time on a FakeClock.
class InventoryRoleTest : public ::testing::Test {
 protected:
  InventoryRoleTest()
      : kube_api_([this](const net::Request& request) { return KubeReply(request); }),
        console_([](const net::Request&) {
          return net::Response::Json(200, R"({"accepted":true,"connection_id":"c1","report_interval_seconds":60})");
        }) {
    log::SetSinkForTesting([this](std::string_view line) {
      std::lock_guard lock(log_mutex_);
      log_ += std::string(line) + "\n";
    });
    testing::WriteFileOrDie(token_file_, "agt_console_token\n");
    kube::KubeCredentials creds;
    creds.server = kube_api_.url();
    creds.token = kube::KubeBearerToken(Secret("kube-sa-token"));
    kube_ = std::move(kube::KubeClient::Create(creds).value());
    ConsoleClientOptions options;
    options.base_url = console_.url();
    options.token_file = token_file_;
    options.request_timeout = milliseconds(500);
    console_client_ = std::move(ConsoleClient::Create(options, clock_).value());
    DeclareMetrics(registry_);
  }
  ~InventoryRoleTest() override { log::SetSinkForTesting(nullptr); }

  net::Response KubeReply(const net::Request& request) {
    if (request.Path() == "/api/v1/namespaces/kube-system") {
      return net::Response::Json(200, Fixture("kube-graffiti/namespace-kube-system.json"));
    }
    if (request.Path() == "/api/v1/nodes") {
      return net::Response::Json(200, Fixture("edgexr-gpu-node-a16-vgpu-nodelist.json"));
    }
    if (request.method == "PATCH") {
      if (configmap_missing_) {
        return net::Response::Json(404, R"({"kind":"Status","reason":"NotFound","code":404,"message":"configmaps \"uplink-status\" not found"})");
      }
      return net::Response::Json(200, R"({"kind":"ConfigMap"})");
    }
    return net::Response::Json(404, R"({"kind":"Status","reason":"NotFound","code":404})");
  }

  InventoryRole MakeRole(RoleOptions options = {}, double jitter = 0.5) {
    return InventoryRole(std::move(options), *kube_, *console_client_, clock_, registry_,
                         Backoff(BackoffOptions{}, [jitter] { return jitter; }));
  }

  std::string Log() {
    std::lock_guard lock(log_mutex_);
    return log_;
  }

  static RoleOptions WithConfigMap() {
    return RoleOptions{.status_configmap = "uplink-status", .status_namespace = "uplink-system"};
  }

  std::vector<net::Request> Patches() {
    std::vector<net::Request> patches;
    for (auto& request : kube_api_.requests()) {
      if (request.method == "PATCH") patches.push_back(request);
    }
    return patches;
  }

  testing::TempDir dir_;
  std::string token_file_ = dir_.File("token");
  std::atomic<bool> configmap_missing_{false};
  FakeHttp kube_api_;
  FakeHttp console_;
  FakeClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<kube::KubeClient> kube_;
  std::unique_ptr<ConsoleClient> console_client_;
  std::mutex log_mutex_;
  std::string log_;
};

TEST_F(InventoryRoleTest, ACycleReportsTheSelectedNodesAndBecomesReady) {
  InventoryRole role = MakeRole();
  EXPECT_FALSE(role.CheckReadiness().ready);
  EXPECT_EQ(role.CheckReadiness().reason, "no report accepted yet");

  CycleResult cycle = role.RunCycle();
  ASSERT_TRUE(cycle.status.ok()) << cycle.status.ToString() << Log();
  EXPECT_EQ(cycle.next_wait, seconds(60));
  EXPECT_TRUE(role.CheckReadiness().ready);

  auto posts = console_.requests();
  ASSERT_EQ(posts.size(), 1u);
  json::value report = ParseJson(posts[0].body).value();
  std::string kube_system_uid(
      ParseJson(Fixture("kube-graffiti/namespace-kube-system.json"))->at("metadata").at("uid").as_string());
  EXPECT_EQ(report.at("cluster_uid"), json::value(kube_system_uid));
  EXPECT_EQ(report.at("selector"), "nvidia.com/gpu.present=true");
  EXPECT_EQ(report.at("nodes").as_array().size(), 1u);
  EXPECT_EQ(report.at("nodes").as_array()[0].at("gpu_product"), "NVIDIA-A16-4Q");

  // The two credentials never cross.
  EXPECT_EQ(posts[0].headers.Get("Authorization").value_or(""), "Bearer agt_console_token");
  EXPECT_EQ(posts[0].body.find("kube-sa-token"), std::string::npos);
  for (const auto& request : kube_api_.requests()) {
    EXPECT_EQ(request.headers.Get("Authorization").value_or(""), "Bearer kube-sa-token");
  }
  EXPECT_EQ(kube_api_.requests()[1].Query("labelSelector").value_or(""),
            "nvidia.com/gpu.present=true");

  EXPECT_EQ(registry_.Get("uplink_agent_reports_total", {{"result", "accepted"}}), 1);
  EXPECT_EQ(registry_.Get("uplink_agent_nodes"), 1);
  EXPECT_EQ(registry_.Get("uplink_agent_gpus"), 1);
  EXPECT_EQ(registry_.Get("uplink_agent_last_report_success_timestamp_seconds"), 1'800'000'000);
  EXPECT_NE(Log().find("inventory report accepted"), std::string::npos);
  // Without a name the agent says nothing about its instance.
  EXPECT_EQ(report.as_object().if_contains("agent_instance"), nullptr);
}

TEST_F(InventoryRoleTest, TheReportNamesTheAgentInstanceSoTheConsoleCanShowEachAgent) {
  InventoryRole role = MakeRole(RoleOptions{.instance = "uplink-agent-inventory-7d9f-x2v"});
  ASSERT_TRUE(role.RunCycle().status.ok()) << Log();
  json::value report = ParseJson(console_.requests().at(0).body).value();
  EXPECT_EQ(report.at("agent_instance"), "uplink-agent-inventory-7d9f-x2v");
}

TEST_F(InventoryRoleTest, ReadinessLapsesWhenTheLastAcceptedReportIsOlderThan150Seconds) {
  InventoryRole role = MakeRole();
  ASSERT_TRUE(role.RunCycle().status.ok());
  clock_.Advance(seconds(149));
  EXPECT_TRUE(role.CheckReadiness().ready);
  clock_.Advance(seconds(1));
  Readiness stale = role.CheckReadiness();
  EXPECT_FALSE(stale.ready);
  EXPECT_NE(stale.reason.find("150 s old"), std::string::npos) << stale.reason;
}

TEST_F(InventoryRoleTest, ReadinessAllowsTwoAndAHalfIntervalsWhenTheConsoleSetsALongOne) {
  InventoryRole role = MakeRole();
  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(200, R"({"accepted":true,"report_interval_seconds":3600})");
  });
  ASSERT_TRUE(role.RunCycle().status.ok());
  EXPECT_EQ(role.ReadinessLimit(), seconds(9000));
  clock_.Advance(seconds(3601));
  EXPECT_TRUE(role.CheckReadiness().ready) << "one hourly report is simply not due yet";
  clock_.Advance(seconds(9000 - 3601 - 1));
  EXPECT_TRUE(role.CheckReadiness().ready);
  clock_.Advance(seconds(1));
  Readiness stale = role.CheckReadiness();
  EXPECT_FALSE(stale.ready);
  EXPECT_NE(stale.reason.find("9000 s old"), std::string::npos) << stale.reason;

  // Short intervals keep the 150 s floor.
  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(200, R"({"accepted":true,"report_interval_seconds":10})");
  });
  ASSERT_TRUE(role.RunCycle().status.ok());
  EXPECT_EQ(role.ReadinessLimit(), seconds(150));
}

TEST_F(InventoryRoleTest, MoreThanTwentyThousandSelectedNodesFailTheCycleWithAClearError) {
  // Full pages of 500 minimal nodes that never end: the 40th page still has a continue token.
  json::array page;
  for (int i = 0; i < 500; ++i) {
    page.push_back(json::object{{"metadata", json::object{{"name", "n" + std::to_string(i)}}}});
  }
  std::string items = ToJson(page);
  std::atomic<int> served{0};
  kube_api_.SetHandler([&](const net::Request& request) {
    if (request.Path() == "/api/v1/nodes") {
      int n = served++;
      return net::Response::Json(200, R"({"metadata":{"resourceVersion":"1","continue":"c)" +
                                           std::to_string(n) + R"("},"items":)" + items + "}");
    }
    return net::Response::Json(200, Fixture("kube-graffiti/namespace-kube-system.json"));
  });
  InventoryRole role = MakeRole();
  CycleResult cycle = role.RunCycle();
  EXPECT_EQ(cycle.status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(cycle.status.message().find("more than 20,000 nodes match the selector; narrow it"),
            std::string::npos) << cycle.status.message();
  EXPECT_EQ(served.load(), 40);
  EXPECT_EQ(console_.request_count(), 0u) << "no partial report is sent";
}

TEST_F(InventoryRoleTest, TheConsolesIntervalIsAdoptedWithinTenSecondsToAnHour) {
  InventoryRole role = MakeRole();
  for (auto [asked, expected] : {std::pair{30, 30}, {1, 10}, {999999, 3600}, {60, 60}}) {
    console_.SetHandler([asked = asked](const net::Request&) {
      return net::Response::Json(200, R"({"accepted":true,"report_interval_seconds":)" +
                                          std::to_string(asked) + "}");
    });
    CycleResult cycle = role.RunCycle();
    ASSERT_TRUE(cycle.status.ok()) << cycle.status.ToString();
    EXPECT_EQ(cycle.next_wait, seconds(expected)) << asked;
    EXPECT_EQ(role.interval(), seconds(expected));
  }
}

TEST_F(InventoryRoleTest, ARevokedTokenMakesTheAgentUnreadyAndItKeepsTrying) {
  InventoryRole role = MakeRole();
  ASSERT_TRUE(role.RunCycle().status.ok());
  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(401, R"({"error":{"code":"revoked","message":"this connection's token was revoked at 2026-11-30T03:20:00Z"}})");
  });
  CycleResult refused = role.RunCycle();
  EXPECT_EQ(refused.status.code(), StatusCode::kUnauthenticated);
  Readiness readiness = role.CheckReadiness();
  EXPECT_FALSE(readiness.ready);
  EXPECT_EQ(readiness.reason, "last report refused: revoked");
  EXPECT_EQ(registry_.Get("uplink_agent_reports_total", {{"result", "refused"}}), 1);
  std::string log = Log();
  EXPECT_NE(log.find("\"level\":\"warn\""), std::string::npos);
  EXPECT_NE(log.find("revoked"), std::string::npos);
  EXPECT_EQ(log.find("agt_console_token"), std::string::npos);
  EXPECT_EQ(log.find("kube-sa-token"), std::string::npos);

  // A rotated token is accepted again: ready once more.
  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(200, R"({"accepted":true,"report_interval_seconds":60})");
  });
  testing::WriteFileOrDie(token_file_, "agt_rotated");
  ASSERT_TRUE(role.RunCycle().status.ok());
  EXPECT_TRUE(role.CheckReadiness().ready);
}

TEST_F(InventoryRoleTest, ServerErrorsBackOffHonourRetryAfterAndRecover) {
  InventoryRole role = MakeRole({}, 0.5);
  console_.SetHandler([](const net::Request&) {
    net::Response response = net::Response::Json(503, R"({"error":{"code":"unavailable","message":"maintenance"}})");
    response.headers.Set("Retry-After", "120");
    return response;
  });
  CycleResult first = role.RunCycle();
  EXPECT_EQ(first.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(first.next_wait, seconds(120)) << "Retry-After is the floor";

  console_.SetHandler([](const net::Request&) { return net::Response::Text(500, "oops"); });
  // Jitter 0.5 of a doubling ceiling: 1 s (after the first failure), 2 s, 4 s, 8 s.
  EXPECT_EQ(role.RunCycle().next_wait, milliseconds(1'000));
  EXPECT_EQ(role.RunCycle().next_wait, milliseconds(2'000));
  EXPECT_EQ(role.RunCycle().next_wait, milliseconds(4'000));
  EXPECT_NE(Log().find("inventory cycle failed"), std::string::npos);
  EXPECT_EQ(registry_.Get("uplink_agent_reports_total", {{"result", "failed"}}), 4);

  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(200, R"({"accepted":true,"report_interval_seconds":60})");
  });
  CycleResult recovered = role.RunCycle();
  ASSERT_TRUE(recovered.status.ok());
  EXPECT_EQ(recovered.next_wait, seconds(60));
  console_.SetHandler([](const net::Request&) { return net::Response::Text(500, "oops"); });
  EXPECT_EQ(role.RunCycle().next_wait, milliseconds(500)) << "success reset the back-off";
}

TEST_F(InventoryRoleTest, GarbageRedirectsAndSilenceAreFailuresNotCrashes) {
  InventoryRole role = MakeRole();
  console_.SetHandler([](const net::Request&) { return net::Response::Text(200, "\x01\x02garbage"); });
  EXPECT_FALSE(role.RunCycle().status.ok());
  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(200, R"({"accepted":false})");
  });
  EXPECT_FALSE(role.RunCycle().status.ok());
  console_.SetHandler([](const net::Request&) {
    net::Response response = net::Response::Text(301, "");
    response.headers.Set("Location", "https://evil.example/");
    return response;
  });
  CycleResult redirected = role.RunCycle();
  EXPECT_NE(redirected.status.message().find("redirects are refused"), std::string::npos);
  console_.SetSilent(true);
  CycleResult silent = role.RunCycle();
  EXPECT_FALSE(silent.status.ok());
  EXPECT_EQ(registry_.Get("uplink_agent_reports_total", {{"result", "failed"}}), 4);
  EXPECT_FALSE(role.CheckReadiness().ready);
}

TEST_F(InventoryRoleTest, KubernetesFailuresAreCountedAndReportedAsSuch) {
  kube_api_.SetHandler([](const net::Request& request) {
    if (request.Path() == "/api/v1/nodes") {
      return net::Response::Json(403, R"({"kind":"Status","reason":"Forbidden","code":403,"message":"nodes is forbidden"})");
    }
    return net::Response::Json(200, Fixture("kube-graffiti/namespace-kube-system.json"));
  });
  InventoryRole role = MakeRole();
  CycleResult cycle = role.RunCycle();
  EXPECT_EQ(cycle.status.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(cycle.status.message().find("listing the selected nodes"), std::string::npos);
  EXPECT_EQ(console_.request_count(), 0u);
  EXPECT_EQ(registry_.Get("uplink_agent_kube_request_errors_total", {{"call", "list_nodes"}}), 1);
  EXPECT_EQ(registry_.Get("uplink_agent_reports_total", {{"result", "kube_error"}}), 1);
}

TEST_F(InventoryRoleTest, TheStatusConfigMapIsMergePatchedAfterEachCycle) {
  InventoryRole role = MakeRole(WithConfigMap());
  ASSERT_TRUE(role.RunCycle().status.ok());
  auto patches = Patches();
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(patches[0].Path(), "/api/v1/namespaces/uplink-system/configmaps/uplink-status");
  std::string kube_system_uid(
      ParseJson(Fixture("kube-graffiti/namespace-kube-system.json"))->at("metadata").at("uid").as_string());
  // The console's reply named no expiry: expiresAt is empty until one does.
  EXPECT_EQ(ParseJson(patches[0].body).value(), json::parse(R"({"data":{
      "mode":"inventory","qualification":"not-performed","nodes":"1","gpus":"1",
      "lastReportAt":"2027-01-15T08:00:00Z","lastError":"","expiresAt":"",
      "clusterUID":")" + kube_system_uid + R"("}})"));

  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(409, R"({"error":{"code":"cluster_mismatch","message":"bound to another cluster"}})");
  });
  clock_.Advance(seconds(60));
  EXPECT_FALSE(role.RunCycle().status.ok());
  patches = Patches();
  ASSERT_EQ(patches.size(), 2u);
  json::value data = ParseJson(patches[1].body)->at("data");
  EXPECT_EQ(data.at("lastReportAt"), "2027-01-15T08:00:00Z") << "still the last accepted one";
  EXPECT_EQ(data.at("lastError"), "cluster_mismatch");
}

TEST_F(InventoryRoleTest, ATokenNearItsExpiryIsLoggedOncePerDayAndWrittenIntoTheConfigMap) {
  // The console's clock says the token expires in 2 days and 1 hour.
  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(200, R"({"accepted":true,"connection_id":"c1",)"
                                    R"("report_interval_seconds":60,)"
                                    R"("expires_at":"2027-01-17T09:00:00Z"})");
  });
  InventoryRole role = MakeRole(WithConfigMap());
  ASSERT_TRUE(role.RunCycle().status.ok());
  EXPECT_EQ(ParseJson(Patches()[0].body)->at("data").at("expiresAt"), "2027-01-17T09:00:00Z");
  auto warnings = [&] {
    std::string log = Log();
    size_t n = 0;
    for (size_t at = log.find("the connection token expires in"); at != std::string::npos;
         at = log.find("the connection token expires in", at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(warnings(), 1u);
  EXPECT_NE(Log().find("expires in 3 days"), std::string::npos) << Log();
  EXPECT_NE(Log().find("--renew"), std::string::npos);
  // The next report, a minute later: still 3 days, not logged again.
  clock_.Advance(seconds(60));
  ASSERT_TRUE(role.RunCycle().status.ok());
  EXPECT_EQ(warnings(), 1u);
  // A day later: 2 days, logged once more.
  clock_.Advance(std::chrono::hours(24));
  ASSERT_TRUE(role.RunCycle().status.ok());
  EXPECT_EQ(warnings(), 2u);
  EXPECT_NE(Log().find("expires in 2 days"), std::string::npos);
}

TEST_F(InventoryRoleTest, EveryCallNamesTheClusterOnceItsIdentityIsRead) {
  InventoryRole role = MakeRole();
  ASSERT_TRUE(role.RunCycle().status.ok());
  std::string kube_system_uid(
      ParseJson(Fixture("kube-graffiti/namespace-kube-system.json"))->at("metadata").at("uid").as_string());
  auto posts = console_.requests();
  ASSERT_EQ(posts.size(), 1u);
  EXPECT_EQ(posts[0].headers.Get("Uplink-Cluster-UID").value_or(""), kube_system_uid);
  // The same client's other calls name it too.
  ASSERT_TRUE(console_client_->PostJson("/api/v1/agent/uploads", json::object{}).status.ok());
  EXPECT_EQ(console_.requests().back().headers.Get("Uplink-Cluster-UID").value_or(""),
            kube_system_uid);
}

TEST_F(InventoryRoleTest, WhenTheClusterCannotBeReadTheConfigMapKeepsItsCountsAndShowsTheError) {
  kube_api_.SetHandler([](const net::Request& request) {
    if (request.method == "PATCH") return net::Response::Json(200, R"({"kind":"ConfigMap"})");
    return net::Response::Json(500, R"({"kind":"Status","reason":"InternalError","code":500,"message":"etcd unavailable"})");
  });
  InventoryRole role = MakeRole(WithConfigMap());
  EXPECT_FALSE(role.RunCycle().status.ok());
  auto patches = Patches();
  ASSERT_EQ(patches.size(), 1u);
  json::value patch = ParseJson(patches[0].body).value();
  const json::object& data = patch.at("data").as_object();
  EXPECT_FALSE(data.contains("nodes"));
  EXPECT_FALSE(data.contains("gpus"));
  EXPECT_EQ(data.at("mode"), "inventory");
  EXPECT_NE(std::string(data.at("lastError").as_string()).find("etcd unavailable"),
            std::string::npos);
  EXPECT_EQ(registry_.Get("uplink_agent_kube_request_errors_total", {{"call", "get_namespace"}}), 1);
}

TEST_F(InventoryRoleTest, AMissingStatusConfigMapIsLoggedAndNeverStopsReporting) {
  configmap_missing_ = true;
  InventoryRole role = MakeRole(WithConfigMap());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(role.RunCycle().status.ok());
  }
  EXPECT_EQ(console_.request_count(), 2u);
  EXPECT_TRUE(role.CheckReadiness().ready);
  EXPECT_NE(Log().find("could not update the status ConfigMap"), std::string::npos);
  EXPECT_EQ(registry_.Get("uplink_agent_kube_request_errors_total", {{"call", "patch_configmap"}}), 2);
}

TEST_F(InventoryRoleTest, RunStopsPromptlyWhenSignalled) {
  InventoryRole role = MakeRole();
  StopSignal stop;
  std::thread runner([&] { role.Run(stop); });
  ASSERT_TRUE(testing::WaitFor([&] { return console_.request_count() >= 1; }, seconds(10)));
  auto asked = std::chrono::steady_clock::now();
  stop.Stop();
  runner.join();
  // Without the interruption the role would sleep out its 60 s interval.
  EXPECT_LT(std::chrono::steady_clock::now() - asked, seconds(60)) << "the wait was not interrupted";
}

TEST_F(InventoryRoleTest, TheHealthServerServesLivenessReadinessAndMetrics) {
  InventoryRole role = MakeRole();
  auto health = HealthServer::Start("127.0.0.1:0", [&role] { return role.CheckReadiness(); },
                                    registry_);
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  net::ClientOptions options;
  options.base_url = "http://127.0.0.1:" + std::to_string((*health)->port());
  auto client = net::HttpClient::Create(options);
  ASSERT_TRUE(client.ok());
  auto get = [&](const std::string& path) {
    net::Request request;
    request.target = path;
    auto response = (*client)->Send(request);
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    return response.ok() ? *response : net::Response{};
  };
  EXPECT_EQ(get("/healthz").status, 200);
  net::Response unready = get("/readyz");
  EXPECT_EQ(unready.status, 503);
  EXPECT_NE(unready.body.find("no report accepted yet"), std::string::npos);

  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(401, R"({"error":{"code":"revoked","message":"revoked"}})");
  });
  (void)role.RunCycle();
  EXPECT_NE(get("/readyz").body.find("last report refused: revoked"), std::string::npos);

  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(200, R"({"accepted":true})");
  });
  ASSERT_TRUE(role.RunCycle().status.ok());
  EXPECT_EQ(get("/readyz").status, 200);
  std::string metrics = get("/metrics").body;
  EXPECT_NE(metrics.find("uplink_agent_reports_total{result=\"accepted\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("uplink_agent_reports_total{result=\"refused\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("uplink_agent_gpus 1"), std::string::npos);
  EXPECT_NE(metrics.find("uplink_agent_last_report_success_timestamp_seconds"), std::string::npos);
}

}  // namespace
}  // namespace uplink::agent::inventory
