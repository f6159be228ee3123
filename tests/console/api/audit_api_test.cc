// The audit log end to end: every action is recorded with the right actor, target and owner,
// no event ever holds a secret, members read only their own, and the log pages.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "api_fixture.h"
#include "console/api/api_objects.h"

namespace uplink::console {
namespace {

using testing::Body;
using testing::ErrorCode;
using testing::kPassword;
using testing::Object;
using testing::TestUser;
using testing::Text;

constexpr const char* kNewPassword = "another long passphrase for alice";

class AuditApiTest : public testing::ApiTest {
 protected:
  // Every secret a scenario handled, to look for in the log.
  void Remember(const std::string& secret) {
    ASSERT_FALSE(secret.empty());
    secrets_.push_back(secret);
  }

  // Runs every action the audit log knows; returns the member's connection id.
  std::string RunEveryAction() {
    Remember(admin_key_);
    Remember(kPassword);
    Remember(kNewPassword);
    alice_ = AddUser("alice@example.com");       // user.create, session.create,
    Remember(alice_.api_key);                    // session.confirm,
    std::string session = SignIn(alice_.email);  // api_key.create
    Remember(session);
    Send("POST", "/api/v1/sessions", "",
         ToJson(json::object{{"email", alice_.email}, {"password", "a wrong password"}}));
    Send("POST", "/api/v1/session/confirm", session,
         ToJson(json::object{{"password", "a wrong password"}}));  // session.confirm refused
    Send("POST", "/api/v1/users/" + alice_.id + "/password", session,
         ToJson(json::object{{"password", kNewPassword}, {"current_password", kPassword}}));
    Send("POST", "/api/v1/session/logout", session);

    json::object extra_key =
        Body(Send("POST", "/api/v1/api-keys", alice_.api_key, R"({"name":"laptop"})"));
    Remember(Text(extra_key, "key"));
    Send("POST", "/api/v1/api-keys/" + Text(extra_key, "id") + "/revoke", alice_.api_key);

    json::object connection = CreateConnection(alice_.api_key, "prod");
    std::string id = Text(connection, "id");
    Remember(Text(connection, "token"));
    EXPECT_EQ(ReportFrom(Text(connection, "token"), "uid-a").status, 200);  // connection.bind
    EXPECT_EQ(ReportFrom(Text(connection, "token"), "uid-b").status, 409);  // cluster_mismatch
    json::object rotated = Body(Send("POST", "/api/v1/connections/" + id + "/rotate",
                                     alice_.api_key, R"({"handover":true})"));
    std::string code = Text(rotated, "handover_code");
    Remember(code);
    EXPECT_EQ(ReportFrom(Text(connection, "token"), "uid-a").status, 401);
    net::Response redeemed =
        Send("POST", "/api/v1/handovers/redeem", "", ToJson(json::object{{"code", code}}));
    Remember(Text(Body(redeemed), "token"));
    Send("POST", "/api/v1/handovers/redeem", "", ToJson(json::object{{"code", code}}));
    Send("POST", "/api/v1/connections/" + id + "/revoke", alice_.api_key);
    EXPECT_EQ(ReportFrom(Text(Body(redeemed), "token"), "uid-a").status, 401);  // token_refused

    AsAdmin("POST", "/api/v1/users/" + alice_.id + "/deactivate");
    AsAdmin("POST", "/api/v1/users/" + alice_.id + "/reactivate");
    json::object admin_connection =
        CreateConnection(admin_key_, "admin-cluster", R"(,"handover":true)");
    Remember(Text(admin_connection, "handover_code"));
    admin_connection_id_ = Text(admin_connection, "id");
    return id;
  }

  void ExpectNoSecretIn(const std::string& text) {
    for (const std::string& secret : secrets_) {
      EXPECT_EQ(text.find(secret), std::string::npos) << "a secret in: " << text;
      // The part after the non-secret lookup prefix, too.
      if (secret.size() > 20) {
        EXPECT_EQ(text.find(secret.substr(12)), std::string::npos) << "a secret in: " << text;
      }
    }
  }

  TestUser alice_;
  std::string admin_connection_id_;
  std::vector<std::string> secrets_;
};

TEST_F(AuditApiTest, EveryActionIsRecordedWithItsActorTargetAndOwnerAndNoSecret) {
  std::string connection_id = RunEveryAction();
  std::string admin_id = AdminId();
  std::vector<AuditEvent> events = AllAudit();

  std::map<std::string, std::vector<AuditEvent>> by_action;
  for (const AuditEvent& event : events) by_action[event.action].push_back(event);
  for (const char* action :
       {"user.create", "user.deactivate", "user.reactivate", "user.password", "api_key.create",
        "api_key.revoke", "session.create", "session.refused", "session.confirm", "session.logout",
        "connection.create", "connection.rotate", "connection.revoke", "connection.bind",
        "connection.cluster_mismatch", "connection.token_refused", "handover.redeem",
        "handover.refused"}) {
    EXPECT_FALSE(by_action[action].empty()) << "no " << action << " event";
  }
  // Who did what to whose thing.
  struct Expected {
    std::string actor_type, actor_id, target_type, target_id, owner_id, outcome;
  };
  std::map<std::string, Expected> expected = {
      {"user.deactivate", {"user", admin_id, "user", alice_.id, alice_.id, "ok"}},
      {"user.reactivate", {"user", admin_id, "user", alice_.id, alice_.id, "ok"}},
      {"user.password", {"user", alice_.id, "user", alice_.id, alice_.id, "ok"}},
      {"session.refused", {"anonymous", "", "user", alice_.id, alice_.id, "refused"}},
      {"connection.rotate", {"user", alice_.id, "connection", connection_id, alice_.id, "ok"}},
      {"connection.revoke", {"user", alice_.id, "connection", connection_id, alice_.id, "ok"}},
      {"connection.bind", {"agent", connection_id, "connection", connection_id, alice_.id, "ok"}},
      {"connection.cluster_mismatch",
       {"agent", connection_id, "connection", connection_id, alice_.id, "refused"}},
      {"connection.token_refused",
       {"agent", connection_id, "connection", connection_id, alice_.id, "refused"}},
      {"handover.redeem", {"anonymous", "", "connection", connection_id, alice_.id, "ok"}},
      {"handover.refused", {"anonymous", "", "connection", connection_id, alice_.id, "refused"}},
  };
  for (const auto& [action, want] : expected) {
    ASSERT_FALSE(by_action[action].empty()) << action;
    const AuditEvent& event = by_action[action].front();
    EXPECT_EQ(event.actor_type, want.actor_type) << action;
    EXPECT_EQ(event.actor_id, want.actor_id) << action;
    EXPECT_EQ(event.target_type, want.target_type) << action;
    EXPECT_EQ(event.target_id, want.target_id) << action;
    EXPECT_EQ(event.owner_id, want.owner_id) << action;
    EXPECT_EQ(event.outcome, want.outcome) << action;
  }
  EXPECT_EQ(by_action["session.confirm"].size(), 2u);  // the API key's confirmation, and a refusal
  EXPECT_EQ(by_action["api_key.revoke"].front().target_type, "api_key");
  EXPECT_EQ(by_action["session.logout"].front().credential, "session");

  for (const AuditEvent& event : events) {
    if (event.actor_type != "system") {
      EXPECT_EQ(event.source_address, testing::kClientAddress) << event.action;
    }
    EXPECT_TRUE(ParseJson(event.detail).ok()) << event.detail;
    ExpectNoSecretIn(ToJson(AuditEventToJson(event)));
    ExpectNoSecretIn(event.actor_label + event.detail + event.target_id + event.actor_id);
  }
  net::Response listed = AsAdmin("GET", "/api/v1/audit?limit=500");
  ASSERT_EQ(listed.status, 200);
  EXPECT_EQ(Body(listed).at("events").as_array().size(), events.size());
  ExpectNoSecretIn(listed.body);
  for (const std::string& line : logs_) ExpectNoSecretIn(line);
}

TEST_F(AuditApiTest, AMemberReadsOnlyWhatTheyDidAndWhatHappenedToTheirThings) {
  std::string connection_id = RunEveryAction();
  net::Response mine = Send("GET", "/api/v1/audit?limit=500", alice_.api_key);
  ASSERT_EQ(mine.status, 200) << mine.body;
  json::array events = Body(mine).at("events").as_array();
  ASSERT_FALSE(events.empty());
  std::set<std::string> actions;
  for (const json::value& value : events) {
    const json::object& event = value.as_object();
    actions.insert(Text(event, "action"));
    EXPECT_NE(Text(Object(event, "target"), "id"), admin_connection_id_);
  }
  // Including what an admin did to them, and what agents and strangers did to their things.
  EXPECT_TRUE(actions.count("user.deactivate"));
  EXPECT_TRUE(actions.count("connection.cluster_mismatch"));
  EXPECT_TRUE(actions.count("handover.redeem"));

  net::Response others =
      Send("GET", "/api/v1/audit?connection_id=" + admin_connection_id_, alice_.api_key);
  ASSERT_EQ(others.status, 200);
  EXPECT_TRUE(Body(others).at("events").as_array().empty());
  net::Response as_admin = AsAdmin("GET", "/api/v1/audit?connection_id=" + admin_connection_id_);
  EXPECT_EQ(Body(as_admin).at("events").as_array().size(), 1u);

  net::Response filtered =
      Send("GET", "/api/v1/audit?action=connection.rotate&connection_id=" + connection_id,
           alice_.api_key);
  json::array rotates = Body(filtered).at("events").as_array();
  ASSERT_EQ(rotates.size(), 1u);
  const json::object& rotate = rotates[0].as_object();
  EXPECT_EQ(Text(Object(rotate, "actor"), "label"), alice_.email);
  EXPECT_EQ(Text(Object(rotate, "actor"), "credential"), "api_key");
  EXPECT_EQ(Object(rotate, "detail").at("handover").as_bool(), true);
  EXPECT_EQ(Text(rotate, "outcome"), "ok");
}

TEST_F(AuditApiTest, TheLogPagesNewestFirst) {
  for (int i = 0; i < 5; ++i) CreateConnection(admin_key_, "c" + std::to_string(i));
  std::vector<std::int64_t> ids;
  std::string target = "/api/v1/audit?action=connection.create&limit=2";
  for (int page = 0; page < 10; ++page) {
    json::object body = Body(AsAdmin("GET", target));
    for (const json::value& event : body.at("events").as_array()) {
      ids.push_back(event.as_object().at("id").as_int64());
    }
    if (body.at("next_before").is_null()) break;
    target = "/api/v1/audit?action=connection.create&limit=2&before=" +
             std::to_string(body.at("next_before").as_int64());
  }
  ASSERT_EQ(ids.size(), 5u);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_GT(ids[i - 1], ids[i]);
}

TEST_F(AuditApiTest, BadQueriesAre400) {
  for (const char* query : {"limit=0", "limit=501", "limit=abc", "limit=-1", "limit=", "before=x",
                            "before=0", "before=99999999999999999999", "action=user.delete",
                            "connection_id=..%2Fetc", "owner_id=x", "limit=1&sort=asc"}) {
    net::Response response = AsAdmin("GET", std::string("/api/v1/audit?") + query);
    EXPECT_EQ(response.status, 400) << query;
    EXPECT_EQ(ErrorCode(response), "invalid_request") << query;
  }
  EXPECT_EQ(AsAdmin("GET", "/api/v1/audit?limit=500&before=1").status, 200);
}

}  // namespace
}  // namespace uplink::console
