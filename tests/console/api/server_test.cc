// The console's router behind the real HTTPS server, reached with the real client.
#include <gtest/gtest.h>

#include "common/gzip.h"
#include "common/json.h"
#include "console/api/console_api.h"
#include "console/setup.h"
#include "net/certs.h"
#include "net/client.h"
#include "net/server.h"
#include "protocol/inventory.h"
#include "api_fixture.h"
#include "test_util.h"

namespace uplink::console {
namespace {

TEST(ConsoleOverHttps, AnAgentReportTravelsGzippedOverTlsAndIsShownToTheUser) {
  testing::ScratchDir dir;
  auto api_key = InitializeConsole(dir.path(), "admin@example.com", SystemClock());
  ASSERT_TRUE(api_key.ok()) << api_key.status().ToString();
  auto store = OpenConsoleStore(dir.path());
  ASSERT_TRUE(store.ok());
  ConsoleApi api(**store, SystemClock(), testing::FastOptions());

  auto ca = net::CreateCertificateAuthority("console test CA", 1);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  auto cert = net::IssueServerCertificate(*ca, {"127.0.0.1"}, 1);
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  net::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.tls = net::TlsServerConfig{cert->cert_pem, cert->key_pem};
  options.max_body_bytes = protocol::kMaxReportBytes;
  auto server = net::HttpServer::Start(options, api.router().AsHandler());
  ASSERT_TRUE(server.ok()) << server.status().ToString();

  net::ClientOptions client_options;
  client_options.base_url = "https://127.0.0.1:" + std::to_string((*server)->port());
  client_options.ca_pem = ca->cert_pem;
  auto client = net::HttpClient::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  net::Request create;
  create.method = "POST";
  create.target = "/api/v1/connections";
  create.headers.Set("Authorization", "Bearer " + api_key->Reveal());
  create.headers.Set("Content-Type", "application/json");
  create.body = R"({"agent_name":"inventory","cluster_name":"prod"})";
  auto created = (*client)->Send(create);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_EQ(created->status, 201) << created->body;
  json::object connection = ParseJson(created->body)->as_object();
  std::string token(connection.at("token").as_string());

  json::array nodes;
  for (int i = 0; i < 5000; ++i) {
    nodes.push_back(json::object{{"name", "gpu-node-" + std::to_string(i)},
                                 {"ready", true},
                                 {"unschedulable", false},
                                 {"gpu_resource", "nvidia.com/gpu"},
                                 {"gpu_capacity", 8},
                                 {"gpu_allocatable", 8}});
  }
  net::Request report;
  report.method = "POST";
  report.target = "/api/v1/agent/inventory";
  report.headers.Set("Authorization", "Bearer " + token);
  report.headers.Set("Content-Type", "application/json");
  report.headers.Set("Content-Encoding", "gzip");
  report.body = GzipCompress(ToJson(json::object{
      {"agent_version", "0.1.0"}, {"cluster_uid", "uid-a"}, {"nodes", std::move(nodes)}})).value();
  auto accepted = (*client)->Send(report);
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  EXPECT_EQ(accepted->status, 200) << accepted->body;

  net::Request get;
  get.target = "/api/v1/connections/" + std::string(connection.at("id").as_string());
  get.headers.Set("Authorization", "Bearer " + api_key->Reveal());
  auto shown = (*client)->Send(get);
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  json::object body = ParseJson(shown->body, JsonLimits{8 << 20, 64})->as_object();
  EXPECT_EQ(body.at("status").as_string(), "active");
  EXPECT_EQ(body.at("totals").as_object().at("gpus_ready").as_int64(), 40'000);
  (*server)->Stop();
}

TEST(ConsoleOverHttp, BodiesAreLimitedPerRouteBeforeTheyAreReadOrTheKeyIsChecked) {
  testing::ScratchDir dir;
  ASSERT_TRUE(InitializeConsole(dir.path(), "admin@example.com", SystemClock()).ok());
  auto store = OpenConsoleStore(dir.path());
  ASSERT_TRUE(store.ok());
  ConsoleApi api(**store, SystemClock(), testing::FastOptions());
  net::ServerOptions options;  // as uplink-console serve sets them
  options.max_body_bytes = protocol::kMaxReportBytes;
  options.body_limit_for = RequestBodyLimit;
  auto server = net::HttpServer::Start(options, api.router().AsHandler());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  net::ClientOptions client_options;
  client_options.base_url = "http://127.0.0.1:" + std::to_string((*server)->port());
  auto client = net::HttpClient::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  // No key at all: a body over 64 KiB on a user route is refused by size, not read.
  net::Request create;
  create.method = "POST";
  create.target = "/api/v1/connections";
  create.headers.Set("Content-Type", "application/json");
  create.body = std::string(kMaxUserBodyBytes + 1, ' ');
  auto refused = (*client)->Send(create);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->status, 413) << refused->body;

  net::Request get;
  get.target = "/api/v1/connections";
  get.body = "{}";
  auto get_with_body = (*client)->Send(get);
  ASSERT_TRUE(get_with_body.ok()) << get_with_body.status().ToString();
  EXPECT_EQ(get_with_body->status, 413) << get_with_body->body;

  // The same size is read on the report route, where the token decides.
  net::Request report;
  report.method = "POST";
  report.target = "/api/v1/agent/inventory";
  report.headers.Set("Content-Type", "application/json");
  report.body = std::string(kMaxUserBodyBytes + 1, ' ');
  auto unauthenticated = (*client)->Send(report);
  ASSERT_TRUE(unauthenticated.ok()) << unauthenticated.status().ToString();
  EXPECT_EQ(unauthenticated->status, 401) << unauthenticated->body;
  (*server)->Stop();
}

TEST(ConsoleOverHttp, HostileBodiesAndLockedOutAddressesGetJsonRepliesAndTheServerKeepsAnswering) {
  testing::ScratchDir dir;
  auto api_key = InitializeConsole(dir.path(), "admin@example.com", SystemClock());
  ASSERT_TRUE(api_key.ok());
  auto store = OpenConsoleStore(dir.path());
  ASSERT_TRUE(store.ok());
  ConsoleOptions console_options = testing::FastOptions();
  console_options.rate_limits.per_address = RateLimit{2, 1.0 / 3600};
  ConsoleApi api(**store, SystemClock(), console_options);
  net::ServerOptions options;
  options.max_body_bytes = protocol::kMaxReportBytes;
  options.body_limit_for = RequestBodyLimit;
  auto server = net::HttpServer::Start(options, api.router().AsHandler());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  net::ClientOptions client_options;
  client_options.base_url = "http://127.0.0.1:" + std::to_string((*server)->port());
  auto client = net::HttpClient::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  auto post = [&](const std::string& target, const std::string& body, const std::string& key) {
    net::Request request;
    request.method = "POST";
    request.target = target;
    request.headers.Set("Content-Type", "application/json");
    if (!key.empty()) request.headers.Set("Authorization", "Bearer " + key);
    request.body = body;
    auto reply = (*client)->Send(request);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.ok() ? std::move(reply).value() : net::Response{};
  };
  for (const std::string& body :
       {std::string("{"), std::string(20'000, '['), std::string("{\"email\":[1,2,3]}"),
        "{\"email\":\"" + std::string(60'000, 'e') + "\",\"password\":\"x\"}",
        std::string("\x00\x01\x02")}) {
    net::Response response = post("/api/v1/sessions", body, "");
    EXPECT_EQ(response.status, 400) << response.body.substr(0, 200);
    EXPECT_EQ(testing::ErrorCode(response), "invalid_request");
    response = post("/api/v1/connections", body, api_key->Reveal());
    EXPECT_EQ(response.status, 400) << response.body.substr(0, 200);
  }
  // Two wrong keys from this address, then even the right one waits, and says how long.
  EXPECT_EQ(post("/api/v1/api-keys", "", "uk_" + std::string(43, 'A')).status, 401);
  EXPECT_EQ(post("/api/v1/api-keys", "", "uk_" + std::string(43, 'B')).status, 401);
  net::Response limited = post("/api/v1/api-keys", R"({"name":"x"})", api_key->Reveal());
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(testing::ErrorCode(limited), "rate_limited");
  EXPECT_TRUE(limited.headers.Get("Retry-After").has_value());

  net::Request health;
  health.target = "/healthz";
  auto healthy = (*client)->Send(health);
  ASSERT_TRUE(healthy.ok()) << healthy.status().ToString();
  EXPECT_EQ(healthy->status, 200);
  (*server)->Stop();
}

}  // namespace
}  // namespace uplink::console
