// What a connection's state says (docs/api.md, "Liveness"): liveness from every accepted agent
// call, noted in memory and written to the store at most once per flush; the token's expiry
// told to users and agents, rotate keeping it and renew resetting it; and the cluster binding
// held on every agent call through the Uplink-Cluster-UID header.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api_fixture.h"
#include "common/gzip.h"
#include "protocol/agent_api.h"

namespace uplink::console {
namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::Body;
using testing::ErrorCode;
using testing::Text;

const std::string kSpool = "9f2c4e0a5b7d41c3a8e6f0b1c2d3e4f5";

class StatesApiTest : public testing::ApiTest {
 protected:
  // The tests flush by hand; a flusher waking in the middle of one would move what it reads.
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    options.presence_flush_interval = hours(24);
    return options;
  }

  void SetUp() override {
    ApiTest::SetUp();
    json::object created = CreateConnection(admin_key_, "prod");
    id_ = Text(created, "id");
    token_ = Text(created, "token");
  }

  // An agent call as the agent makes it, naming `cluster_uid` when it is not empty.
  net::Response AgentCall(const std::string& target, const std::string& body,
                          const std::string& cluster_uid = "", const std::string& token = "") {
    net::Request request;
    request.method = body.empty() ? "GET" : "POST";
    request.target = target;
    request.headers.Set("Authorization", "Bearer " + (token.empty() ? token_ : token));
    request.headers.Set("User-Agent", "uplink-agent/0.2.0 (cluster)");
    if (!cluster_uid.empty()) request.headers.Set(protocol::kClusterUidHeader, cluster_uid);
    if (target == "/api/v1/agent/uploads" || target.ends_with("/result")) {
      request.headers.Set("Content-Encoding", "gzip");
      request.body = GzipCompress(body).value();
    } else {
      request.body = body;
    }
    if (!body.empty()) request.headers.Set("Content-Type", "application/json");
    request.remote_address = "198.51.100.4";
    // A poll waits 0 s here, so every call is answered soon.
    return testing::Call(api_->router(), std::move(request));
  }

  net::Response Upload(const std::string& cluster_uid = "",
                       const std::string& stream = "node/gpu-node-0001") {
    json::object losses{{"records", 0}, {"bytes", 0}};
    json::object body{
        {"agent_version", "0.2.0"},
        {"agent_instance", stream.substr(stream.find('/') + 1)},
        {"stream", stream},
        {"spool_id", kSpool},
        {"first_sequence", next_sequence_},
        {"last_sequence", next_sequence_},
        {"losses", {{"dropped", losses}, {"corrupt", losses}, {"rejected", losses}}},
        {"records", json::array{{{"sequence", next_sequence_},
                                 {"appended_at", "2026-11-30T03:20:00.125Z"},
                                 {"payload", {{"kind", "test_record"}}}}}}};
    net::Response response = AgentCall("/api/v1/agent/uploads", ToJson(body), cluster_uid);
    if (response.status == 200) ++next_sequence_;
    return response;
  }

  net::Response Poll(const std::string& cluster_uid = "") {
    return AgentCall("/api/v1/agent/commands/poll",
                     R"({"agent_instance":"uplink-cluster-0","wait_seconds":0})", cluster_uid);
  }

  net::Response WhoAmI(const std::string& cluster_uid = "") {
    return AgentCall("/api/v1/agent/whoami", "", cluster_uid);
  }

  json::object Shown() { return ShowConnection(admin_key_, id_); }

  std::optional<WallTime> StoredLastSeen() {
    auto connection = store_->GetConnection(id_);
    EXPECT_TRUE(connection.ok()) << connection.status().ToString();
    return connection.ok() ? connection->last_seen_at : std::nullopt;
  }

  net::Response Rotate(const std::string& body) {
    return AsAdmin("POST", "/api/v1/connections/" + id_ + "/rotate", body);
  }

  std::string id_;
  std::string token_;
  std::int64_t next_sequence_ = 1;
};

// ---- liveness ------------------------------------------------------------------------------

TEST_F(StatesApiTest, LivenessWaitsForTheFirstCallThenFollowsTheLastCallOfAnyRole) {
  json::object shown = Shown();
  EXPECT_EQ(Text(shown, "liveness"), "waiting");
  EXPECT_TRUE(shown.at("last_seen_at").is_null());

  // A node role's upload alone, without any inventory report, connects the connection.
  ASSERT_EQ(Upload().status, 200);
  shown = Shown();
  EXPECT_EQ(Text(shown, "liveness"), "connected");
  EXPECT_EQ(Text(shown, "status"), "active");
  EXPECT_EQ(Text(shown, "last_seen_at"), FormatRfc3339(clock_.Now()));
  EXPECT_TRUE(shown.at("last_report_at").is_null());

  clock_.Advance(seconds(89));
  EXPECT_EQ(Text(Shown(), "liveness"), "connected");
  clock_.Advance(seconds(1));
  EXPECT_EQ(Text(Shown(), "liveness"), "stale");
  // The cluster role's poll brings it back.
  ASSERT_EQ(Poll().status, 200);
  EXPECT_EQ(Text(Shown(), "liveness"), "connected");
  clock_.Advance(seconds(150));
  EXPECT_EQ(Text(Shown(), "liveness"), "offline");
  // So does the authenticated no-op.
  ASSERT_EQ(WhoAmI().status, 200);
  EXPECT_EQ(Text(Shown(), "liveness"), "connected");
  clock_.Advance(seconds(150));
  EXPECT_EQ(Text(Shown(), "liveness"), "offline");
  // And an inventory report, as before.
  ASSERT_EQ(ReportFrom(token_, "uid-a").status, 200);
  EXPECT_EQ(Text(Shown(), "liveness"), "connected");
}

TEST_F(StatesApiTest, RefusedCallsDoNotCountAsLife) {
  // A body the console refuses (400), a token it refuses (401): neither is an accepted call.
  EXPECT_EQ(AgentCall("/api/v1/agent/uploads", "{}").status, 400);
  EXPECT_EQ(AgentCall("/api/v1/agent/commands/poll", R"({"wait_seconds":99})").status, 400);
  EXPECT_EQ(AgentCall("/api/v1/agent/whoami", "", "", "agt_" + std::string(43, 'Q')).status, 401);
  EXPECT_EQ(Text(Shown(), "liveness"), "waiting");
  ASSERT_TRUE(api_->presence().Flush(*store_).ok());
  EXPECT_FALSE(StoredLastSeen().has_value());
}

TEST_F(StatesApiTest, CallsAreWrittenToTheStoreOnlyWhenFlushedAndSurviveARestart) {
  ASSERT_EQ(WhoAmI().status, 200);
  const WallTime first = clock_.Now();
  // Noted in memory: nothing is written on the request path.
  EXPECT_FALSE(StoredLastSeen().has_value());
  ASSERT_TRUE(api_->presence().Flush(*store_).ok());
  EXPECT_EQ(StoredLastSeen(), first);

  for (int i = 0; i < 10; ++i) {
    clock_.Advance(seconds(1));
    ASSERT_EQ(WhoAmI().status, 200);
  }
  // Ten calls, no write: the store still has the first, users see the last.
  EXPECT_EQ(StoredLastSeen(), first);
  EXPECT_EQ(Text(Shown(), "last_seen_at"), FormatRfc3339(clock_.Now()));
  ASSERT_TRUE(api_->presence().Flush(*store_).ok());
  EXPECT_EQ(StoredLastSeen(), clock_.Now());

  // A console restart (a new ConsoleApi on the same store) reads what was written; a clean
  // shutdown writes what was noted since the last flush.
  clock_.Advance(seconds(5));
  ASSERT_EQ(WhoAmI().status, 200);
  const WallTime last = clock_.Now();
  StartApi(Options());
  EXPECT_EQ(StoredLastSeen(), last);
  EXPECT_EQ(Text(Shown(), "liveness"), "connected");
  EXPECT_EQ(Text(Shown(), "last_seen_at"), FormatRfc3339(last));
}

TEST_F(StatesApiTest, AFlushOfThousandsOfCallsIsWrittenInSmallTransactions) {
  std::vector<std::string> ids;
  for (int i = 0; i < 600; ++i) {
    ids.push_back(Text(CreateConnection(admin_key_, "fleet-" + std::to_string(i)), "id"));
  }
  const WallTime at = clock_.Now();
  for (const std::string& id : ids) {
    api_->presence().Seen(id, AgentIdentity{"node", "gpu-node-" + id, "0.2.0"}, at);
  }
  const std::string wal = dir_.File("console.db-wal");
  const std::int64_t before = testing::CommittedTransactions(wal);
  ASSERT_TRUE(api_->presence().Flush(*store_).ok());
  // 1,200 rows (a connection and an agent each) in transactions of at most 256 rows, so that
  // an upload never waits behind the whole flush.
  EXPECT_GE(testing::CommittedTransactions(wal) - before, 5);
  auto connections = store_->ListAllConnections();
  ASSERT_TRUE(connections.ok());
  for (const Connection& connection : *connections) {
    if (connection.cluster_name.starts_with("fleet-")) {
      EXPECT_EQ(connection.last_seen_at, at) << connection.cluster_name;
    }
  }
  for (const std::string& id : {ids.front(), ids.back()}) {
    auto agents = store_->ListAgents(id, 10);
    ASSERT_TRUE(agents.ok());
    ASSERT_EQ(agents->size(), 1u);
    EXPECT_EQ((*agents)[0].instance, "gpu-node-" + id);
  }
}

TEST_F(StatesApiTest, UploadsAndPollsRecordTheirAgentsRoles) {
  ASSERT_EQ(Upload("", "node/gpu-node-0001").status, 200);
  ASSERT_EQ(Upload("", "node/gpu-node-0002").status, 200);
  clock_.Advance(seconds(1));
  ASSERT_EQ(Poll().status, 200);
  auto roles = [&] {
    std::vector<std::string> out;
    json::object shown = Shown();
    for (const json::value& agent : shown.at("agents").as_array()) {
      out.push_back(Text(agent.as_object(), "role") + ":" + Text(agent.as_object(), "instance") +
                    ":" + Text(agent.as_object(), "version"));
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  std::vector<std::string> expected{"cluster:uplink-cluster-0:0.2.0", "node:gpu-node-0001:0.2.0",
                                    "node:gpu-node-0002:0.2.0"};
  // Shown before they are written, and the same after.
  EXPECT_EQ(roles(), expected);
  ASSERT_TRUE(api_->presence().Flush(*store_).ok());
  EXPECT_EQ(roles(), expected);
  auto stored = store_->ListAgents(id_, 100);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 3u);
  EXPECT_EQ((*stored)[0].role, "cluster");  // the most recent first
  EXPECT_EQ((*stored)[0].last_seen_at, clock_.Now());
}

TEST_F(StatesApiTest, EachAgentHasItsOwnLiveness) {
  // A node agent that stopped while the cluster role goes on polling: the connection is
  // connected, the node agent is not.
  ASSERT_EQ(Upload("", "node/gpu-node-0001").status, 200);
  clock_.Advance(seconds(100));
  ASSERT_EQ(Poll().status, 200);
  auto liveness_of = [&](std::string_view role) {
    json::object shown = Shown();
    for (const json::value& agent : shown.at("agents").as_array()) {
      if (Text(agent.as_object(), "role") == role) return Text(agent.as_object(), "liveness");
    }
    return std::string("none");
  };
  EXPECT_EQ(Text(Shown(), "liveness"), "connected");
  EXPECT_EQ(liveness_of("cluster"), "connected");
  EXPECT_EQ(liveness_of("node"), "stale");
  clock_.Advance(seconds(50));
  EXPECT_EQ(liveness_of("node"), "offline");
  EXPECT_EQ(liveness_of("cluster"), "connected");
}

TEST_F(StatesApiTest, TheLivenessMetricCountsWaitingConnections) {
  CreateConnection(admin_key_, "other");
  ASSERT_EQ(WhoAmI().status, 200);
  net::Request scrape;
  scrape.target = "/metrics";
  std::string text = testing::Call(api_->router(), std::move(scrape)).body;
  EXPECT_NE(text.find("uplink_console_connections_liveness{liveness=\"waiting\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("uplink_console_connections_liveness{liveness=\"connected\"} 1"),
            std::string::npos);
}

TEST_F(StatesApiTest, TheMetricsCountEachConnectionAsItsPageShowsIt) {
  // The scrape reads four columns of every connection, the page the whole row: both see the
  // calls noted in memory and not written yet, and come to the same status and liveness.
  auto call_as = [&](const std::string& token) {
    ASSERT_EQ(AgentCall("/api/v1/agent/whoami", "", "", token).status, 200);
  };
  std::string expiry = FormatRfc3339(clock_.Now() + hours(1));
  json::object expired =
      CreateConnection(admin_key_, "short", R"(,"expires_at":")" + expiry + "\"");
  json::object paused = CreateConnection(admin_key_, "paused");
  call_as(token_);
  call_as(Text(paused, "token"));
  ASSERT_TRUE(api_->presence().Flush(*store_).ok());
  clock_.Advance(hours(2) - seconds(100));
  call_as(Text(paused, "token"));  // newer than the store's, in memory only
  clock_.Advance(seconds(100));
  json::object live = CreateConnection(admin_key_, "live");
  call_as(Text(live, "token"));
  json::object idle = CreateConnection(admin_key_, "idle");
  json::object revoked = CreateConnection(admin_key_, "gone");
  call_as(Text(revoked, "token"));
  ASSERT_EQ(AsAdmin("POST", "/api/v1/connections/" + Text(revoked, "id") + "/revoke").status, 200);

  std::map<std::string, int> shown_statuses;
  std::map<std::string, int> shown_liveness;
  for (const std::string& id : {id_, Text(expired, "id"), Text(paused, "id"), Text(live, "id"),
                                Text(idle, "id"), Text(revoked, "id")}) {
    json::object page = ShowConnection(admin_key_, id);
    std::string status = Text(page, "status");
    ++shown_statuses[status];
    if (status != "revoked" && status != "expired") ++shown_liveness[Text(page, "liveness")];
  }
  EXPECT_EQ(shown_statuses,
            (std::map<std::string, int>{
                {"active", 2}, {"expired", 1}, {"never", 1}, {"revoked", 1}, {"stale", 1}}));
  EXPECT_EQ(shown_liveness, (std::map<std::string, int>{
                                {"connected", 1}, {"offline", 1}, {"stale", 1}, {"waiting", 1}}));

  net::Request scrape;
  scrape.target = "/metrics";
  std::string text = testing::Call(api_->router(), std::move(scrape)).body;
  auto gauge = [&](const std::string& series) {
    size_t at = text.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stoi(text.substr(at + series.size() + 2));
  };
  for (const char* status : {"never", "active", "stale", "expired", "revoked"}) {
    EXPECT_EQ(gauge("uplink_console_connections{status=\"" + std::string(status) + "\"}"),
              shown_statuses[status])
        << status;
  }
  for (const char* liveness : {"waiting", "connected", "stale", "offline"}) {
    EXPECT_EQ(
        gauge("uplink_console_connections_liveness{liveness=\"" + std::string(liveness) + "\"}"),
        shown_liveness[liveness])
        << liveness;
  }
}

// ---- expiry --------------------------------------------------------------------------------

TEST_F(StatesApiTest, ExpiresInDaysAppearsFourteenDaysBeforeTheExpiry) {
  std::string expiry = FormatRfc3339(clock_.Now() + days(20));
  std::string id = Text(CreateConnection(admin_key_, "short", R"(,"expires_at":")" + expiry + "\""),
                        "id");
  auto days_left = [&] { return ShowConnection(admin_key_, id).at("expires_in_days"); };
  EXPECT_TRUE(days_left().is_null());
  clock_.Advance(days(6) - seconds(1));
  EXPECT_TRUE(days_left().is_null());
  clock_.Advance(seconds(1));
  EXPECT_EQ(days_left().as_int64(), 14);
  clock_.Advance(days(11) + hours(12));  // 2.5 days left: "in 3 days"
  EXPECT_EQ(days_left().as_int64(), 3);
  clock_.Advance(days(2) + hours(11));  // an hour left
  EXPECT_EQ(days_left().as_int64(), 1);
  clock_.Advance(hours(1));
  EXPECT_TRUE(days_left().is_null());
  EXPECT_EQ(Text(ShowConnection(admin_key_, id), "status"), "expired");
}

TEST_F(StatesApiTest, AgentRepliesTellTheTokensExpiry) {
  const std::string expiry = Text(Shown(), "expires_at");
  json::object report = Body(ReportFrom(token_, "uid-a"));
  EXPECT_EQ(Text(report, "expires_at"), expiry);
  EXPECT_EQ(Text(Body(Upload()), "expires_at"), expiry);
  EXPECT_EQ(Text(Body(Poll()), "expires_at"), expiry);
  EXPECT_EQ(Text(Body(WhoAmI()), "expires_at"), expiry);
}

TEST_F(StatesApiTest, RotateKeepsAFutureExpiryAndRenewGivesNinetyDaysBothRevokingTheOldToken) {
  const std::string expiry = Text(Shown(), "expires_at");
  clock_.Advance(days(80));
  net::Response rotated = Rotate("{}");
  ASSERT_EQ(rotated.status, 200) << rotated.body;
  EXPECT_EQ(Text(Body(rotated), "expires_at"), expiry);
  EXPECT_EQ(ErrorCode(WhoAmI()), "invalid_token");  // the old token, at once
  std::string rotated_token = Text(Body(rotated), "token");
  EXPECT_EQ(AgentCall("/api/v1/agent/whoami", "", "", rotated_token).status, 200);
  AuditEvent rotate = LastAudit("connection.rotate");
  EXPECT_NE(rotate.detail.find(R"("renew":false)"), std::string::npos) << rotate.detail;
  EXPECT_NE(rotate.detail.find(R"("expires_at":")" + expiry), std::string::npos);

  net::Response renewed = Rotate(R"({"renew":true})");
  ASSERT_EQ(renewed.status, 200) << renewed.body;
  EXPECT_EQ(Text(Body(renewed), "expires_at"), FormatRfc3339(clock_.Now() + days(90)));
  EXPECT_TRUE(Body(renewed).at("expires_in_days").is_null());
  EXPECT_EQ(ErrorCode(AgentCall("/api/v1/agent/whoami", "", "", rotated_token)), "invalid_token");
  EXPECT_EQ(AgentCall("/api/v1/agent/whoami", "", "", Text(Body(renewed), "token")).status, 200);
  AuditEvent renew = LastAudit("connection.rotate");
  EXPECT_NE(renew.detail.find(R"("renew":true)"), std::string::npos) << renew.detail;
  EXPECT_NE(renew.detail.find(R"("previous_expires_at":")" + expiry), std::string::npos);
  EXPECT_NE(renew.id, rotate.id);

  EXPECT_EQ(Rotate(R"({"renew":"yes"})").status, 400);
  EXPECT_EQ(Rotate(R"({"renew":true,"extra":1})").status, 400);
}

// ---- the cluster binding on every call -----------------------------------------------------

TEST_F(StatesApiTest, CallsNamingAnotherClusterAreRefusedAndAuditedOnceBound) {
  ASSERT_EQ(ReportFrom(token_, "uid-a").status, 200);  // binds to uid-a
  const size_t events_before = AllAudit().size();

  struct Call {
    const char* what;
    std::function<net::Response()> send;
  };
  std::vector<Call> calls{{"upload", [&] { return Upload("uid-b"); }},
                          {"poll", [&] { return Poll("uid-b"); }},
                          {"whoami", [&] { return WhoAmI("uid-b"); }},
                          {"result", [&] {
                             return AgentCall("/api/v1/agent/commands/cmd_0123456789abcdef/result",
                                              R"({"exit_code":0,"stdout":"","stderr":"",)"
                                              R"("duration_ms":1})",
                                              "uid-b");
                           }}};
  for (const Call& call : calls) {
    net::Response refused = call.send();
    EXPECT_EQ(refused.status, 409) << call.what << ": " << refused.body;
    EXPECT_EQ(ErrorCode(refused), "cluster_mismatch") << call.what;
    EXPECT_EQ(refused.body.find("uid-a"), std::string::npos) << "the bound UID is not told";
  }
  std::vector<AuditEvent> events = AllAudit();
  ASSERT_EQ(events.size(), events_before + calls.size());
  for (size_t i = events_before; i < events.size(); ++i) {
    EXPECT_EQ(events[i].action, "connection.cluster_mismatch");
    EXPECT_EQ(events[i].outcome, "refused");
    EXPECT_EQ(events[i].actor_type, "agent");
    EXPECT_EQ(events[i].source_address, "198.51.100.4");
    EXPECT_NE(events[i].detail.find(R"("cluster_uid":"uid-b")"), std::string::npos);
    EXPECT_NE(events[i].detail.find(R"("bound_cluster_uid":"uid-a")"), std::string::npos);
    EXPECT_NE(events[i].detail.find(R"("call":"/api/v1/agent/)"), std::string::npos)
        << events[i].detail;
  }
  EXPECT_EQ(Metric("uplink_console_uploads_refused_total", {{"reason", "cluster_mismatch"}}), 1);
  // Nothing was stored, nothing counts as life, and the owner sees every attempt.
  json::object shown = Shown();
  EXPECT_TRUE(shown.at("streams").as_array().empty());
  EXPECT_EQ(shown.at("security_events").as_array().size(), calls.size());
  clock_.Advance(seconds(150));
  EXPECT_EQ(Text(Shown(), "liveness"), "offline");

  // The bound cluster's calls go through.
  EXPECT_EQ(Upload("uid-a").status, 200);
  EXPECT_EQ(Poll("uid-a").status, 200);
  EXPECT_EQ(WhoAmI("uid-a").status, 200);
}

TEST_F(StatesApiTest, TheFirstCallThatNamesItsClusterBindsTheConnection) {
  ASSERT_EQ(Poll("uid-a").status, 200);
  EXPECT_EQ(Text(Shown(), "cluster_uid"), "uid-a");
  AuditEvent bind = LastAudit("connection.bind");
  EXPECT_EQ(bind.detail, R"({"cluster_uid":"uid-a"})");
  // Then an inventory report from another cluster is refused, as a call is.
  net::Response report = ReportFrom(token_, "uid-b");
  EXPECT_EQ(report.status, 409);
  EXPECT_EQ(Upload("uid-b").status, 409);
  EXPECT_EQ(ReportFrom(token_, "uid-a").status, 200);
}

TEST_F(StatesApiTest, CallsWithoutTheHeaderAreBoundByTheTokenAlone) {
  // Agents older than the header, and the node role before it knows its cluster.
  ASSERT_EQ(ReportFrom(token_, "uid-a").status, 200);
  EXPECT_EQ(Upload().status, 200);
  EXPECT_EQ(Poll().status, 200);
  EXPECT_EQ(WhoAmI().status, 200);
  EXPECT_TRUE(Shown().at("security_events").as_array().empty());
}

TEST_F(StatesApiTest, AMalformedClusterHeaderIsRefusedWith400) {
  for (const std::string& bad : {std::string(" "), std::string("uid a"), std::string(129, 'u'),
                                 std::string("uid\x01"), std::string("\xc3\xa9")}) {
    net::Response refused = WhoAmI(bad);
    EXPECT_EQ(refused.status, 400) << testing::ErrorMessage(refused);
    EXPECT_EQ(ErrorCode(refused), "invalid_request");
    EXPECT_NE(testing::ErrorMessage(refused).find(std::string(protocol::kClusterUidHeader)),
              std::string::npos);
  }
  EXPECT_TRUE(Shown().at("cluster_uid").is_null());
  EXPECT_EQ(WhoAmI(std::string(128, 'u')).status, 200);
}

}  // namespace
}  // namespace uplink::console
