// Connections and the agent API end to end through the router: create, show, rotate,
// revoke, expiry, statuses and liveness, reports (including hostile ones), whoami, metrics.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

#include "api_fixture.h"
#include "common/gzip.h"
#include "protocol/inventory.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::Body;
using testing::Call;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::Object;
using testing::ReportJson;
using testing::ScratchDir;
using testing::Text;

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

net::Request PlainGet(const std::string& target) {
  net::Request request;
  request.target = target;
  return request;
}

class ConsoleApiTest : public testing::ApiTest {
 protected:
  net::Response UserCall(const std::string& method, const std::string& target,
                         const std::string& body = "", const std::string& key = "") {
    return Send(method, target, key.empty() ? admin_key_ : key, body);
  }

  json::object Create(const std::string& cluster_name, const std::string& extra = "") {
    return CreateConnection(admin_key_, cluster_name, extra);
  }

  net::Response Report(const std::string& token, const std::string& body,
                       const std::string& encoding = "") {
    net::Request request;
    request.method = "POST";
    request.target = "/api/v1/agent/inventory";
    if (!token.empty()) request.headers.Set("Authorization", "Bearer " + token);
    request.headers.Set("Content-Type", "application/json");
    if (!encoding.empty()) request.headers.Set("Content-Encoding", encoding);
    request.body = body;
    request.remote_address = "127.0.0.1";
    return Call(api_->router(), std::move(request));
  }

  json::object Get(const std::string& id) { return ShowConnection(admin_key_, id); }

  // The admin made by `init` has no password; gives it one and signs in.
  std::string SignInAdminWithPassword() {
    net::Response set = UserCall("POST", "/api/v1/users/" + AdminId() + "/password",
                                 ToJson(json::object{{"password", testing::kPassword}}));
    EXPECT_EQ(set.status, 200) << set.body;
    return SignIn("admin@example.com");
  }
};

// ---- user API -----------------------------------------------------------------------------

TEST_F(ConsoleApiTest, CreatingAConnectionReturnsItsTokenOnceWithDefaultExpiry) {
  json::object created = Create("prod-eu");
  std::string token = Text(created, "token");
  EXPECT_TRUE(token.starts_with("agt_"));
  EXPECT_EQ(Text(created, "status"), "never");
  EXPECT_EQ(Text(created, "cluster_name"), "prod-eu");
  EXPECT_EQ(Text(created, "agent_name"), "inventory");
  EXPECT_EQ(Text(created, "token_prefix"), token.substr(0, 12));
  EXPECT_EQ(Text(created, "id").size(), 16u);
  EXPECT_EQ(Text(created, "expires_at"), FormatRfc3339(clock_.Now() + hours(90 * 24)));
  EXPECT_TRUE(created.at("revoked_at").is_null());
  EXPECT_TRUE(created.at("last_report_at").is_null());
  EXPECT_TRUE(created.at("cluster_uid").is_null());
  EXPECT_TRUE(created.at("nodes").as_array().empty());

  json::object fetched = Get(Text(created, "id"));
  EXPECT_FALSE(fetched.contains("token"));
  net::Response list = UserCall("GET", "/api/v1/connections");
  EXPECT_EQ(list.body.find(token), std::string::npos);
}

TEST_F(ConsoleApiTest, TheRawTokenAndApiKeyAppearNowhereInTheDatabaseFiles) {
  std::string token = Text(Create("prod"), "token");
  ASSERT_EQ(Report(token, ToJson(ReportJson("uid-a", 1))).status, 200);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::string content = ReadWholeFile(DatabasePath(dir_.path()) + suffix);
    EXPECT_EQ(content.find(token), std::string::npos) << suffix;
    EXPECT_EQ(content.find(token.substr(12)), std::string::npos) << suffix;
    EXPECT_EQ(content.find(admin_key_), std::string::npos) << suffix;
  }
}

TEST_F(ConsoleApiTest, NamesAreTrimmedAndAnExplicitFutureExpiryIsKept) {
  std::string expiry = FormatRfc3339(clock_.Now() + hours(24 * 7));
  net::Response response = UserCall(
      "POST", "/api/v1/connections",
      R"({"agent_name":"  inv  ","cluster_name":"\tprod ","expires_at":")" + expiry + "\"}");
  ASSERT_EQ(response.status, 201) << response.body;
  json::object body = Body(response);
  EXPECT_EQ(Text(body, "agent_name"), "inv");
  EXPECT_EQ(Text(body, "cluster_name"), "prod");
  EXPECT_EQ(Text(body, "expires_at"), expiry);
}

TEST_F(ConsoleApiTest, InvalidCreateBodiesAreRefusedWith400NamingTheProblem) {
  struct Case {
    std::string body;
    std::string says;
  };
  std::string past = FormatRfc3339(clock_.Now() - seconds(1));
  std::vector<Case> cases = {
      {R"({"agent_name":"a","cluster_name":"c","color":"red"})", "unknown field \"color\""},
      {R"({"agent_name":1,"cluster_name":"c"})", "agent_name must be a string"},
      {R"({"cluster_name":"c"})", "agent_name is required"},
      {R"({"agent_name":"a","cluster_name":"   "})", "cluster_name must be 1-63"},
      {R"({"agent_name":"a","cluster_name":")" + std::string(64, 'x') + "\"}",
       "cluster_name must be 1-63"},
      {R"({"agent_name":"a\u0007","cluster_name":"c"})", "printable"},
      {R"({"agent_name":"a","cluster_name":"c","expires_at":"tomorrow"})", "RFC 3339"},
      {R"({"agent_name":"a","cluster_name":"c","expires_at":")" + past + "\"}", "future"},
      {R"([1,2])", "must be a JSON object"},
      {R"({"agent_name":)", "invalid JSON"},
  };
  for (const Case& c : cases) {
    net::Response response = UserCall("POST", "/api/v1/connections", c.body);
    EXPECT_EQ(response.status, 400) << c.body;
    EXPECT_EQ(ErrorCode(response), "invalid_request") << c.body;
    EXPECT_NE(ErrorMessage(response).find(c.says), std::string::npos) << response.body;
  }
  EXPECT_TRUE(store_->ListAllConnections()->empty());
}

TEST_F(ConsoleApiTest, ADuplicateClusterNameForTheSameOwnerIs409Conflict) {
  Create("prod");
  net::Response again = UserCall("POST", "/api/v1/connections",
                                 R"({"agent_name":"x","cluster_name":"prod"})");
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(ErrorCode(again), "conflict");
}

TEST_F(ConsoleApiTest, BodiesOver64KiBAre413AndNonJsonBodiesAre415) {
  std::string big = R"({"agent_name":")" + std::string(70 * 1024, 'a') + R"(","cluster_name":"c"})";
  net::Response too_big = UserCall("POST", "/api/v1/connections", big);
  EXPECT_EQ(too_big.status, 413);
  EXPECT_EQ(ErrorCode(too_big), "too_large");

  net::Request form;
  form.method = "POST";
  form.target = "/api/v1/connections";
  form.headers.Set("Authorization", "Bearer " + admin_key_);
  form.headers.Set("Content-Type", "application/x-www-form-urlencoded");
  form.body = "agent_name=a&cluster_name=c";
  net::Response unsupported = Call(api_->router(), form);
  EXPECT_EQ(unsupported.status, 415);
  EXPECT_EQ(ErrorCode(unsupported), "unsupported_media_type");
}

TEST_F(ConsoleApiTest, MissingOrInvalidApiKeysAre401WithoutEchoingTheCredential) {
  net::Request anonymous;
  anonymous.target = "/api/v1/connections";
  net::Response missing = Call(api_->router(), anonymous);
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(ErrorCode(missing), "missing_token");
  EXPECT_EQ(missing.headers.Get("WWW-Authenticate"), "Bearer");

  std::string wrong = "uk_" + std::string(43, 'Z');
  net::Response invalid = UserCall("GET", "/api/v1/connections", "", wrong);
  EXPECT_EQ(invalid.status, 401);
  EXPECT_EQ(ErrorCode(invalid), "invalid_token");
  EXPECT_EQ(invalid.body.find(wrong), std::string::npos);

  // An agent token is not an API key.
  std::string agent_token = Text(Create("prod"), "token");
  EXPECT_EQ(UserCall("GET", "/api/v1/connections", "", agent_token).status, 401);
  EXPECT_EQ(api_->metrics().Get("uplink_console_auth_failures_total",
                                {{"kind", "api_key"}, {"reason", "invalid_token"}}),
            2);
  for (const std::string& line : logs_) EXPECT_EQ(line.find(wrong), std::string::npos);
}

TEST_F(ConsoleApiTest, UsersSeeOnlyTheirOwnConnections) {
  std::string id = Text(Create("prod"), "id");
  std::string other = AddUser("other@example.com").api_key;
  net::Response list = UserCall("GET", "/api/v1/connections", "", other);
  EXPECT_EQ(list.status, 200);
  EXPECT_TRUE(Body(list).at("connections").as_array().empty());
  for (const char* suffix : {"", "/rotate", "/revoke"}) {
    net::Response response = UserCall(*suffix ? "POST" : "GET",
                                      "/api/v1/connections/" + id + suffix, "", other);
    EXPECT_EQ(response.status, 404) << suffix;
    EXPECT_EQ(ErrorCode(response), "not_found");
  }
  EXPECT_TRUE(Get(id).at("revoked_at").is_null());
}

TEST_F(ConsoleApiTest, ListReturnsConnectionsWithTotalsAndNodeLists) {
  std::string token = Text(Create("prod"), "token");
  Create("dev");
  ASSERT_EQ(Report(token, ToJson(ReportJson("uid-a", 3))).status, 200);
  net::Response list = UserCall("GET", "/api/v1/connections");
  ASSERT_EQ(list.status, 200);
  json::object body = Body(list);
  const json::array& connections = body.at("connections").as_array();
  ASSERT_EQ(connections.size(), 2u);
  const json::object& prod = connections[0].as_object();
  EXPECT_EQ(prod.at("status").as_string(), "active");
  EXPECT_EQ(prod.at("totals").as_object().at("gpus_ready").as_int64(), 24);
  EXPECT_EQ(prod.at("nodes").as_array().size(), 3u);
  EXPECT_TRUE(connections[1].as_object().at("nodes").as_array().empty());
}

TEST_F(ConsoleApiTest, UnknownPathsAre404JsonAndWrongMethodsAre405WithAllow) {
  net::Response unknown = UserCall("GET", "/api/v1/nothing");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(ErrorCode(unknown), "not_found");
  net::Response wrong = UserCall("DELETE", "/api/v1/connections");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(ErrorCode(wrong), "method_not_allowed");
  EXPECT_EQ(wrong.headers.Get("Allow"), "POST, GET");
  EXPECT_EQ(UserCall("GET", "/api/v1/connections/not-an-id").status, 404);
}

TEST_F(ConsoleApiTest, RotateIssuesANewTokenRefusesTheOldOneAndKeepsAFutureExpiry) {
  json::object created = Create("prod");
  std::string id = Text(created, "id");
  std::string old_token = Text(created, "token");
  ASSERT_EQ(Report(old_token, ToJson(ReportJson("uid-a", 1))).status, 200);
  clock_.Advance(hours(24));

  net::Response rotated = UserCall("POST", "/api/v1/connections/" + id + "/rotate");
  ASSERT_EQ(rotated.status, 200) << rotated.body;
  json::object body = Body(rotated);
  std::string new_token = Text(body, "token");
  EXPECT_TRUE(new_token.starts_with("agt_"));
  EXPECT_NE(new_token, old_token);
  EXPECT_EQ(Text(body, "token_prefix"), new_token.substr(0, 12));
  EXPECT_EQ(Text(body, "expires_at"), Text(created, "expires_at"));
  EXPECT_EQ(Text(body, "cluster_uid"), "uid-a");  // the binding survives rotation

  net::Response old_refused = Report(old_token, ToJson(ReportJson("uid-a", 1)));
  EXPECT_EQ(old_refused.status, 401);
  EXPECT_EQ(ErrorCode(old_refused), "invalid_token");
  EXPECT_EQ(Report(new_token, ToJson(ReportJson("uid-a", 2))).status, 200);
}

TEST_F(ConsoleApiTest, RotatingAnExpiredConnectionGivesANewDefaultExpiry) {
  std::string expiry = FormatRfc3339(clock_.Now() + hours(1));
  json::object created = Create("prod", R"(,"expires_at":")" + expiry + "\"");
  std::string id = Text(created, "id");
  clock_.Advance(hours(2));
  EXPECT_EQ(Text(Get(id), "status"), "expired");
  net::Response expired = Report(Text(created, "token"), ToJson(ReportJson("uid-a", 1)));
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(ErrorCode(expired), "expired");

  json::object rotated = Body(UserCall("POST", "/api/v1/connections/" + id + "/rotate"));
  EXPECT_EQ(Text(rotated, "expires_at"), FormatRfc3339(clock_.Now() + hours(90 * 24)));
  EXPECT_EQ(Text(rotated, "status"), "never");
  EXPECT_EQ(Report(Text(rotated, "token"), ToJson(ReportJson("uid-a", 1))).status, 200);
}

TEST_F(ConsoleApiTest, RevokedConnectionsRefuseReportsWith401RevokedAndCannotBeRotated) {
  json::object created = Create("prod");
  std::string id = Text(created, "id");
  std::string token = Text(created, "token");
  net::Response revoked = UserCall("POST", "/api/v1/connections/" + id + "/revoke");
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(Text(Body(revoked), "status"), "revoked");
  EXPECT_EQ(Text(Body(revoked), "revoked_at"), FormatRfc3339(clock_.Now()));

  net::Response report = Report(token, ToJson(ReportJson("uid-a", 1)));
  EXPECT_EQ(report.status, 401);
  EXPECT_EQ(ErrorCode(report), "revoked");
  EXPECT_NE(report.body.find("create a new connection"), std::string::npos);

  net::Response rotate = UserCall("POST", "/api/v1/connections/" + id + "/rotate");
  EXPECT_EQ(rotate.status, 409);
  // Revoking again is harmless; a revoked cluster name can be reused.
  EXPECT_EQ(UserCall("POST", "/api/v1/connections/" + id + "/revoke").status, 200);
  Create("prod");
}

TEST_F(ConsoleApiTest, RotateAndRevokeRefuseBodyFields) {
  std::string id = Text(Create("prod"), "id");
  net::Response response =
      UserCall("POST", "/api/v1/connections/" + id + "/revoke", R"({"force":true})");
  EXPECT_EQ(response.status, 400);
  EXPECT_NE(response.body.find("force"), std::string::npos);
  EXPECT_EQ(Text(Get(id), "status"), "never");
}

// ---- agent API ------------------------------------------------------------------------------

TEST_F(ConsoleApiTest, AnAcceptedReportBindsTheClusterAndShowsNodesAndTotals) {
  json::object created = Create("prod");
  json::object report = ReportJson("uid-a", 2);
  json::object& broken = report["nodes"].as_array()[1].as_object();
  broken["ready"] = false;
  broken["error"] = "status.capacity[nvidia.com/gpu]: 'eight' is not a Kubernetes quantity";
  net::Response response = Report(Text(created, "token"), ToJson(report));
  ASSERT_EQ(response.status, 200) << response.body;
  json::object reply = Body(response);
  EXPECT_EQ(reply.at("accepted").as_bool(), true);
  EXPECT_EQ(Text(reply, "connection_id"), Text(created, "id"));
  EXPECT_EQ(reply.at("report_interval_seconds").as_int64(), 60);

  json::object shown = Get(Text(created, "id"));
  EXPECT_EQ(Text(shown, "status"), "active");
  EXPECT_EQ(Text(shown, "cluster_uid"), "uid-a");
  EXPECT_EQ(Text(shown, "agent_version"), "0.1.0");
  EXPECT_EQ(Text(shown, "last_report_at"), FormatRfc3339(clock_.Now()));
  const json::array& nodes = shown.at("nodes").as_array();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].as_object().at("gpu_product").as_string(), "NVIDIA-H100-80GB-HBM3");
  EXPECT_FALSE(nodes[0].as_object().contains("error"));
  EXPECT_TRUE(nodes[1].as_object().contains("error"));
  const json::object& totals = shown.at("totals").as_object();
  EXPECT_EQ(totals.at("nodes").as_int64(), 2);
  EXPECT_EQ(totals.at("nodes_ready").as_int64(), 1);
  EXPECT_EQ(totals.at("gpu_capacity").as_int64(), 16);
  EXPECT_EQ(totals.at("gpus_ready").as_int64(), 8);

  EXPECT_EQ(Text(shown, "liveness"), "connected");
}

TEST_F(ConsoleApiTest, ReportFromAnotherClusterIsRefusedWith409AndNotStored) {
  json::object created = Create("prod");
  std::string token = Text(created, "token");
  ASSERT_EQ(Report(token, ToJson(ReportJson("uid-a", 2))).status, 200);
  clock_.Advance(seconds(30));
  logs_.clear();
  net::Response refused = Report(token, ToJson(ReportJson("uid-b", 5)));
  EXPECT_EQ(refused.status, 409);
  EXPECT_EQ(ErrorCode(refused), "cluster_mismatch");

  json::object shown = Get(Text(created, "id"));
  EXPECT_EQ(Text(shown, "cluster_uid"), "uid-a");
  EXPECT_EQ(shown.at("nodes").as_array().size(), 2u);
  EXPECT_EQ(Text(shown, "last_report_at"), FormatRfc3339(clock_.Now() - seconds(30)));

  bool logged = false;
  for (const std::string& line : logs_) {
    EXPECT_EQ(line.find(token), std::string::npos) << "a log line carries the token";
    logged = logged || line.find("\"event\":\"cluster_mismatch\"") != std::string::npos;
  }
  EXPECT_TRUE(logged) << "the mismatch was not logged as a security event";
  EXPECT_EQ(api_->metrics().Get("uplink_console_reports_refused_total",
                                {{"reason", "cluster_mismatch"}}),
            1);
}

TEST_F(ConsoleApiTest, MissingAndUnknownAgentTokensAre401WithTheirCodes) {
  net::Response missing = Report("", ToJson(ReportJson("uid-a", 1)));
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(ErrorCode(missing), "missing_token");
  for (std::string token : {std::string("agt_short"), "agt_" + std::string(43, 'Q'),
                            std::string("uk_whatever")}) {
    net::Response invalid = Report(token, ToJson(ReportJson("uid-a", 1)));
    EXPECT_EQ(invalid.status, 401) << token;
    EXPECT_EQ(ErrorCode(invalid), "invalid_token") << token;
    EXPECT_EQ(invalid.body.find(token), std::string::npos);
  }
}

TEST_F(ConsoleApiTest, GzipReportsAreAcceptedAndTheReportIntervalIsConfigurable) {
  ConsoleOptions options = testing::FastOptions();
  options.report_interval = seconds(30);
  ConsoleApi api(*store_, clock_, options);
  std::string token = Text(Create("prod"), "token");
  net::Request request;
  request.method = "POST";
  request.target = "/api/v1/agent/inventory";
  request.headers.Set("Authorization", "Bearer " + token);
  request.headers.Set("Content-Type", "application/json");
  request.headers.Set("Content-Encoding", "gzip");
  request.body = GzipCompress(ToJson(ReportJson("uid-a", 100))).value();
  net::Response response = Call(api.router(), request);
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(Body(response).at("report_interval_seconds").as_int64(), 30);
  EXPECT_EQ(store_->ListNodes(Body(response).at("connection_id").as_string().c_str())->size(),
            100u);
}

class HostileReportTest : public ConsoleApiTest {
 protected:
  void SetUp() override {
    ConsoleApiTest::SetUp();
    json::object created = Create("prod");
    id_ = Text(created, "id");
    token_ = Text(created, "token");
    ASSERT_EQ(Report(token_, ToJson(ReportJson("uid-a", 3))).status, 200);
  }

  // The refused body changed nothing that was accepted before.
  void ExpectPreviousReportIntact() {
    json::object shown = Get(id_);
    EXPECT_EQ(shown.at("nodes").as_array().size(), 3u);
    EXPECT_EQ(Text(shown, "cluster_uid"), "uid-a");
    EXPECT_EQ(shown.at("totals").as_object().at("nodes").as_int64(), 3);
  }

  void ExpectRefused(const std::string& body, int status, const std::string& says,
                     const std::string& encoding = "") {
    net::Response response = Report(token_, body, encoding);
    EXPECT_EQ(response.status, status) << response.body.substr(0, 300);
    EXPECT_FALSE(ErrorCode(response).empty()) << response.body.substr(0, 300);
    EXPECT_NE(response.body.find(says), std::string::npos) << response.body.substr(0, 300);
    ExpectPreviousReportIntact();
  }

  std::string id_;
  std::string token_;
};

TEST_F(HostileReportTest, InvalidJsonIsRefusedWith400) {
  ExpectRefused("{\"cluster_uid\": ", 400, "invalid JSON");
  ExpectRefused("", 400, "invalid JSON");
}

TEST_F(HostileReportTest, DeepNestingIsRefusedWith400) {
  ExpectRefused(std::string(10'000, '[') + std::string(10'000, ']'), 400, "invalid JSON");
}

TEST_F(HostileReportTest, WrongTypesAreRefusedWith400NamingTheField) {
  json::object report = ReportJson("uid-a", 2);
  report["nodes"].as_array()[1].as_object()["gpu_capacity"] = "eight";
  ExpectRefused(ToJson(report), 400, "nodes[1].gpu_capacity must be an integer");

  report = ReportJson("uid-a", 2);
  report["nodes"].as_array()[0].as_object()["ready"] = 1;
  ExpectRefused(ToJson(report), 400, "nodes[0].ready must be true or false");

  report = ReportJson("uid-a", 2);
  report["nodes"].as_array()[0].as_object()["gpu_allocatable"] = -1;
  ExpectRefused(ToJson(report), 400, "nodes[0].gpu_allocatable must be between");

  report = ReportJson("uid-a", 2);
  report["nodes"] = json::object();
  ExpectRefused(ToJson(report), 400, "nodes must be an array");
  ExpectRefused("[]", 400, "must be an object");
}

TEST_F(HostileReportTest, UnknownFieldsAreRefusedWith400) {
  json::object report = ReportJson("uid-a", 1);
  report["kubeconfig"] = "...";
  ExpectRefused(ToJson(report), 400, "unknown field \\\"kubeconfig\\\"");
  report = ReportJson("uid-a", 1);
  report["nodes"].as_array()[0].as_object()["extra"] = 1;
  ExpectRefused(ToJson(report), 400, "nodes[0].extra");
}

TEST_F(HostileReportTest, MissingOrEmptyClusterUidIsRefused) {
  json::object report = ReportJson("", 1);
  ExpectRefused(ToJson(report), 400, "cluster_uid");
  report.erase("cluster_uid");
  ExpectRefused(ToJson(report), 400, "cluster_uid is required");
}

TEST_F(HostileReportTest, HugeStringsAreRefusedWith400) {
  json::object report = ReportJson("uid-a", 1);
  report["nodes"].as_array()[0].as_object()["name"] = std::string(1 << 20, 'n');
  ExpectRefused(ToJson(report), 400, "nodes[0].name is 1048576 bytes long");
}

TEST_F(HostileReportTest, MoreThan20000NodesAreRefused) {
  json::array nodes;
  for (int i = 0; i < 100'000; ++i) nodes.push_back(json::object{{"name", "n"}});
  json::object report = ReportJson("uid-a", 0);
  report["nodes"] = std::move(nodes);
  std::string body = ToJson(report);
  ASSERT_LT(body.size(), size_t{16} << 20);
  ExpectRefused(body, 400, "the limit is 20000");
}

TEST_F(HostileReportTest, BodiesOver16MiBAre413) {
  ExpectRefused(std::string((16 << 20) + 1, ' '), 413, "too_large");
}

TEST_F(HostileReportTest, GzipBombIsRefusedWith413) {
  std::string bomb = GzipCompress(std::string(64 << 20, ' '), 9).value();
  ASSERT_LT(bomb.size(), 1u << 20);
  ExpectRefused(bomb, 413, "too_large", "gzip");
}

TEST_F(HostileReportTest, TruncatedGzipIsRefusedWith400) {
  std::string gz = GzipCompress(ToJson(ReportJson("uid-a", 50))).value();
  ExpectRefused(gz.substr(0, gz.size() / 2), 400, "gzip", "gzip");
  ExpectRefused(ToJson(ReportJson("uid-a", 1)), 400, "gzip", "gzip");
}

TEST_F(HostileReportTest, ContentEncodingIsMatchedCaseInsensitively) {
  net::Response response =
      Report(token_, GzipCompress(ToJson(ReportJson("uid-a", 4))).value(), "GZIP");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(Get(id_).at("nodes").as_array().size(), 4u);
  EXPECT_EQ(Report(token_, ToJson(ReportJson("uid-a", 5)), "Identity").status, 200);
}

TEST_F(HostileReportTest, MoreResourcesAndTaintsThanTheReportCapAreRefusedNamingTheCap) {
  // 2,000 nodes with 64 taints each: every node within its own limits, the report over the
  // total.
  json::array taints;
  for (int t = 0; t < 64; ++t) {
    taints.push_back(json::object{{"key", "k" + std::to_string(t)}, {"effect", "NoSchedule"}});
  }
  json::object report = ReportJson("uid-a", 2'000);
  for (auto& node : report["nodes"].as_array()) node.as_object()["taints"] = taints;
  ASSERT_GT(2'000u * 64u, protocol::kMaxReportRows);
  ExpectRefused(ToJson(report), 400, "more than 100000 resources and taints");
}

TEST(ConsoleBodyLimits, OnlyTheInventoryReportMayBeLargeAndGetTakesNoBody) {
  net::Request head;
  head.method = "POST";
  head.target = "/api/v1/agent/inventory";
  EXPECT_EQ(RequestBodyLimit(head), protocol::kMaxReportBytes);
  head.target = "/api/v1/agent/inventory?x=1";
  EXPECT_EQ(RequestBodyLimit(head), protocol::kMaxReportBytes);
  head.target = "/api/v1/connections";
  EXPECT_EQ(RequestBodyLimit(head), kMaxUserBodyBytes);
  head.target = "/api/v1/agent/inventory/";
  EXPECT_EQ(RequestBodyLimit(head), kMaxUserBodyBytes);
  head.target = "/no/such/route";
  EXPECT_EQ(RequestBodyLimit(head), kMaxUserBodyBytes);
  head.method = "PUT";
  head.target = "/api/v1/agent/inventory";
  EXPECT_EQ(RequestBodyLimit(head), kMaxUserBodyBytes);
  head.method = "GET";
  EXPECT_EQ(RequestBodyLimit(head), 0u);
  head.method = "HEAD";
  head.target = "/api/v1/connections";
  EXPECT_EQ(RequestBodyLimit(head), 0u);
}

TEST_F(HostileReportTest, UnknownContentEncodingOrTypeIs415) {
  ExpectRefused(ToJson(ReportJson("uid-a", 1)), 415, "Content-Encoding", "br");
  net::Request request;
  request.method = "POST";
  request.target = "/api/v1/agent/inventory";
  request.headers.Set("Authorization", "Bearer " + token_);
  request.headers.Set("Content-Type", "text/plain");
  request.body = ToJson(ReportJson("uid-a", 1));
  EXPECT_EQ(Call(api_->router(), request).status, 415);
  ExpectPreviousReportIntact();
}

TEST_F(HostileReportTest, NonUtf8NamesAreRefusedWith400) {
  std::string body = ToJson(ReportJson("uid-a", 1));
  size_t at = body.find("gpu-node-0");
  ASSERT_NE(at, std::string::npos);
  body.replace(at, 3, "\xff\xfe\xfd");
  ExpectRefused(body, 400, "invalid JSON");
}

// ---- status, liveness and what the view shows ----------------------------------------------

TEST_F(ConsoleApiTest, StatusGoesNeverActiveStaleWhileLivenessGoesWaitingConnectedStaleOffline) {
  json::object created = Create("prod");
  std::string id = Text(created, "id");
  EXPECT_EQ(Text(created, "status"), "never");
  EXPECT_EQ(Text(created, "liveness"), "waiting");

  ASSERT_EQ(ReportFrom(Text(created, "token"), "uid-a").status, 200);
  auto expect = [&](const char* status, const char* liveness) {
    json::object shown = Get(id);
    EXPECT_EQ(Text(shown, "status"), status);
    EXPECT_EQ(Text(shown, "liveness"), liveness);
  };
  expect("active", "connected");
  clock_.Advance(seconds(89));
  expect("active", "connected");
  clock_.Advance(seconds(1));
  expect("active", "stale");
  clock_.Advance(seconds(59));
  expect("active", "stale");
  clock_.Advance(seconds(1));
  expect("active", "offline");
  clock_.Advance(minutes(10) - seconds(151));
  expect("active", "offline");
  clock_.Advance(seconds(1));
  expect("stale", "offline");
  // A new report brings both back.
  ASSERT_EQ(ReportFrom(Text(created, "token"), "uid-a").status, 200);
  expect("active", "connected");
}

TEST_F(ConsoleApiTest, TheActiveWindowIsAnOption) {
  ConsoleOptions options = testing::FastOptions();
  options.active_window = minutes(2);
  StartApi(options);
  json::object created = Create("prod");
  ASSERT_EQ(ReportFrom(Text(created, "token"), "uid-a").status, 200);
  clock_.Advance(minutes(2) - seconds(1));
  EXPECT_EQ(Text(Get(Text(created, "id")), "status"), "active");
  clock_.Advance(seconds(1));
  EXPECT_EQ(Text(Get(Text(created, "id")), "status"), "stale");
}

TEST_F(ConsoleApiTest, AnExpiredTokenIsRefusedWithExpiredAndTheRefusalIsAudited) {
  std::string expiry = FormatRfc3339(clock_.Now() + hours(1));
  json::object created = Create("prod", R"(,"expires_at":")" + expiry + "\"");
  std::string token = Text(created, "token");
  clock_.Advance(hours(1) - seconds(1));
  ASSERT_EQ(ReportFrom(token, "uid-a").status, 200);
  clock_.Advance(seconds(1));
  net::Response refused = ReportFrom(token, "uid-a");
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(ErrorCode(refused), "expired");
  EXPECT_EQ(refused.headers.Get("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(Text(Get(Text(created, "id")), "status"), "expired");

  AuditEvent event = LastAudit("connection.token_refused");
  EXPECT_EQ(event.outcome, "refused");
  EXPECT_EQ(event.actor_type, "agent");
  EXPECT_EQ(event.actor_id, Text(created, "id"));
  EXPECT_EQ(event.actor_label, Text(created, "token_prefix"));
  EXPECT_EQ(event.target_id, Text(created, "id"));
  EXPECT_EQ(event.owner_id, AdminId());
  EXPECT_EQ(event.source_address, testing::kClientAddress);
  EXPECT_EQ(event.detail, R"({"reason":"expired"})");
}

TEST_F(ConsoleApiTest, ARevokedTokenIsRefusedOnItsNextRequestAndTheRefusalIsAudited) {
  json::object created = Create("prod");
  std::string token = Text(created, "token");
  ASSERT_EQ(ReportFrom(token, "uid-a").status, 200);
  ASSERT_EQ(UserCall("POST", "/api/v1/connections/" + Text(created, "id") + "/revoke").status,
            200);
  net::Response refused = ReportFrom(token, "uid-a");
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(ErrorCode(refused), "revoked");
  EXPECT_EQ(LastAudit("connection.token_refused").detail, R"({"reason":"revoked"})");
  // A token that matches no connection is no connection's business.
  ASSERT_EQ(ReportFrom("agt_" + std::string(43, 'Q'), "uid-a").status, 401);
  EXPECT_EQ(LastAudit("connection.token_refused").detail, R"({"reason":"revoked"})");
}

TEST_F(ConsoleApiTest, WhoAmIAnswersTheAgentWithItsConnection) {
  std::string expiry = FormatRfc3339(clock_.Now() + hours(24));
  json::object created = Create("prod", R"(,"expires_at":")" + expiry + "\"");
  net::Response whoami = Send("GET", "/api/v1/agent/whoami", Text(created, "token"));
  ASSERT_EQ(whoami.status, 200) << whoami.body;
  json::object body = Body(whoami);
  EXPECT_EQ(Text(body, "connection_id"), Text(created, "id"));
  EXPECT_EQ(Text(body, "agent_name"), "inventory");
  EXPECT_EQ(Text(body, "cluster_name"), "prod");
  EXPECT_EQ(Text(body, "expires_at"), expiry);
  EXPECT_EQ(body.at("report_interval_seconds").as_int64(), 60);
  EXPECT_EQ(body.size(), 5u);

  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/agent/whoami", "")), "missing_token");
  // A user's key is not an agent token, and an agent token is not a user credential.
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/agent/whoami", admin_key_)), "invalid_token");
  EXPECT_EQ(Send("GET", "/api/v1/me", Text(created, "token")).status, 401);
  UserCall("POST", "/api/v1/connections/" + Text(created, "id") + "/revoke");
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/agent/whoami", Text(created, "token"))), "revoked");
}

TEST_F(ConsoleApiTest, TheAgentInstanceIsShownAmongTheConnectionsAgents) {
  json::object created = Create("prod");
  json::object report = ReportJson("uid-a", 1);
  report["agent_instance"] = "uplink-agent-7d9f-x2";
  ASSERT_EQ(Report(Text(created, "token"), ToJson(report)).status, 200);
  json::array agents = Get(Text(created, "id")).at("agents").as_array();
  ASSERT_EQ(agents.size(), 1u);
  const json::object& agent = agents[0].as_object();
  EXPECT_EQ(Text(agent, "role"), "inventory");
  EXPECT_EQ(Text(agent, "instance"), "uplink-agent-7d9f-x2");
  EXPECT_EQ(Text(agent, "version"), "0.1.0");
  EXPECT_EQ(Text(agent, "last_seen_at"), FormatRfc3339(clock_.Now()));

  report["agent_instance"] = std::string(254, 'x');
  net::Response too_long = Report(Text(created, "token"), ToJson(report));
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(ErrorMessage(too_long).find("agent_instance"), std::string::npos);
  report["agent_instance"] = 7;
  EXPECT_EQ(Report(Text(created, "token"), ToJson(report)).status, 400);
}

TEST_F(ConsoleApiTest, AReportFromAnotherClusterIsShownAsASecurityEvent) {
  json::object created = Create("prod");
  std::string token = Text(created, "token");
  EXPECT_TRUE(created.at("security_events").as_array().empty());
  EXPECT_TRUE(created.at("handover").is_null());
  ASSERT_EQ(ReportFrom(token, "uid-a").status, 200);
  clock_.Advance(seconds(5));
  ASSERT_EQ(ReportFrom(token, "uid-b").status, 409);
  json::array events = Get(Text(created, "id")).at("security_events").as_array();
  ASSERT_EQ(events.size(), 1u);
  const json::object& event = events[0].as_object();
  EXPECT_EQ(Text(event, "action"), "connection.cluster_mismatch");
  EXPECT_EQ(Text(event, "at"), FormatRfc3339(clock_.Now()));
  EXPECT_EQ(Text(event, "source_address"), testing::kClientAddress);
  EXPECT_EQ(Text(Object(event, "detail"), "cluster_uid"), "uid-b");
}

TEST_F(ConsoleApiTest, ClusterNamesAreUniquePerOwnerAmongLiveConnections) {
  json::object prod = Create("prod");
  net::Response again = UserCall("POST", "/api/v1/connections",
                                 R"({"agent_name":"x","cluster_name":"prod"})");
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(ErrorCode(again), "conflict");
  EXPECT_NE(ErrorMessage(again).find("prod"), std::string::npos);
  // Another user's namespace is their own.
  testing::TestUser other = AddUser("other@example.com");
  CreateConnection(other.api_key, "prod");
  UserCall("POST", "/api/v1/connections/" + Text(prod, "id") + "/revoke");
  Create("prod");
}

// ---- hostile bodies on the user API ---------------------------------------------------------

TEST_F(ConsoleApiTest, HostileBodiesOnEveryWritingRouteAre400AndTheConsoleKeepsAnswering) {
  std::string id = Text(Create("prod"), "id");
  std::string session = SignInAdminWithPassword();
  std::vector<std::pair<std::string, std::string>> routes = {
      {"/api/v1/connections", admin_key_},
      {"/api/v1/connections/" + id + "/rotate", admin_key_},
      {"/api/v1/connections/" + id + "/revoke", admin_key_},
      {"/api/v1/users", admin_key_},
      {"/api/v1/api-keys", admin_key_},
      {"/api/v1/sessions", ""},
      {"/api/v1/session/confirm", session},
      {"/api/v1/handovers/redeem", ""},
  };
  std::vector<std::string> bodies = {
      "not json",
      "{\"a\":",
      "[]",
      "\"text\"",
      "17",
      std::string(5000, '[') + std::string(5000, ']'),
      "{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":{\"g\":{\"h\":{\"i\":1}}}}}}}}}",
      R"({"unexpected_field":1})",
      R"({"agent_name":1,"cluster_name":[],"email":{},"password":2,"code":null,"name":true})",
      "{\"name\":\"" + std::string(60'000, 'x') + "\"}",
      "{\"code\":\"\xff\xfe\"}",
  };
  for (const auto& [route, credential] : routes) {
    for (const std::string& body : bodies) {
      net::Response response = Send("POST", route, credential, body);
      EXPECT_EQ(response.status, 400) << route << " " << body.substr(0, 40) << " " << response.body;
      EXPECT_EQ(ErrorCode(response), "invalid_request") << route;
      EXPECT_FALSE(ErrorMessage(response).empty());
    }
  }
  EXPECT_EQ(Call(api_->router(), PlainGet("/healthz")).status, 200);
  EXPECT_EQ(Text(Get(id), "status"), "never");
  EXPECT_EQ(store_->ListAllConnections()->size(), 1u);
}

// ---- operational endpoints -----------------------------------------------------------------

TEST_F(ConsoleApiTest, HealthzReadyzAndMetricsAnswer) {
  EXPECT_EQ(Call(api_->router(), PlainGet("/healthz")).status, 200);
  net::Response ready = Call(api_->router(), PlainGet("/readyz"));
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(Text(Body(ready), "status"), "ready");

  std::string token = Text(Create("prod"), "token");
  Create("dev");
  ASSERT_EQ(Report(token, ToJson(ReportJson("uid-a", 1))).status, 200);
  ASSERT_EQ(Report(token, ToJson(ReportJson("uid-b", 1))).status, 409);
  ASSERT_EQ(Report("agt_" + std::string(43, 'x'), "{}").status, 401);
  net::Response metrics = Call(api_->router(), PlainGet("/metrics"));
  ASSERT_EQ(metrics.status, 200);
  const std::string& text = metrics.body;
  EXPECT_NE(text.find("uplink_console_connections{status=\"active\"} 1"), std::string::npos);
  EXPECT_NE(text.find("uplink_console_connections{status=\"never\"} 1"), std::string::npos);
  EXPECT_NE(text.find("uplink_console_connections{status=\"stale\"} 0"), std::string::npos);
  EXPECT_NE(text.find("uplink_console_connections_liveness{liveness=\"connected\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("uplink_console_connections_liveness{liveness=\"waiting\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("uplink_console_connections_liveness{liveness=\"offline\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("uplink_console_reports_accepted_total 1"), std::string::npos);
  EXPECT_NE(text.find("uplink_console_reports_refused_total{reason=\"cluster_mismatch\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("uplink_console_auth_failures_total{kind=\"agent_token\",reason=\"invalid_"
                      "token\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("uplink_console_http_requests_total{route=\"/api/v1/connections\","
                      "method=\"POST\",status=\"201\"} 2"),
            std::string::npos)
      << text;

  // The server's connection events (net::ServerOptions::on_connection), as serve wires them.
  for (std::string_view event : {"accepted", "accepted", "accepted", "closed", "refused"}) {
    api_->CountConnection(event);
  }
  const std::string after = Call(api_->router(), PlainGet("/metrics")).body;
  EXPECT_NE(after.find("\nuplink_console_http_connections_open 2\n"), std::string::npos) << after;
  EXPECT_NE(after.find("uplink_console_http_connections_total{outcome=\"accepted\"} 3"),
            std::string::npos);
  EXPECT_NE(after.find("uplink_console_http_connections_total{outcome=\"refused\"} 1"),
            std::string::npos);
}

// ---- setup -----------------------------------------------------------------------------------

TEST(ConsoleSetup, InitRefusesAnAlreadyInitialisedDirectoryAndServeNeedsInit) {
  ScratchDir dir;
  FakeClock clock;
  std::string data_dir = dir.File("data");
  EXPECT_EQ(OpenConsoleStore(data_dir).status().code(), StatusCode::kFailedPrecondition);
  auto key = InitializeConsole(data_dir, "admin@example.com", clock);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_TRUE(key->Reveal().starts_with("uk_"));
  struct stat info;
  ASSERT_EQ(::stat(data_dir.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  auto again = InitializeConsole(data_dir, "admin@example.com", clock);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("already initialised"), std::string::npos);
  EXPECT_TRUE(OpenConsoleStore(data_dir).ok());
}

}  // namespace
}  // namespace uplink::console
