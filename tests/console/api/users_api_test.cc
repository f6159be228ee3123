// Users and API keys end to end through the router: who may manage users, what deactivation
// turns off (and reactivation back on), and the API key lifecycle.
#include <gtest/gtest.h>

#include "api_fixture.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::kPassword;
using testing::Object;
using testing::TestUser;
using testing::Text;

class UsersApiTest : public testing::ApiTest {};

TEST_F(UsersApiTest, AnAdminCreatesListsAndShowsUsers) {
  net::Response created = AsAdmin("POST", "/api/v1/users",
                                  ToJson(json::object{{"email", "  Bob@Example.com "},
                                                      {"role", "member"},
                                                      {"password", kPassword}}));
  ASSERT_EQ(created.status, 201) << created.body;
  json::object bob = Body(created);
  EXPECT_EQ(Text(bob, "email"), "bob@example.com");
  EXPECT_EQ(Text(bob, "role"), "member");
  EXPECT_EQ(Text(bob, "created_at"), FormatRfc3339(clock_.Now()));
  EXPECT_TRUE(bob.at("deactivated_at").is_null());
  EXPECT_EQ(bob.at("has_password").as_bool(), true);
  EXPECT_EQ(bob.at("two_factor_enabled").as_bool(), false);
  EXPECT_EQ(bob.size(), 7u) << "no hash or other field may leak";

  net::Response carol =
      AsAdmin("POST", "/api/v1/users", R"({"email":"carol@example.com","role":"admin"})");
  ASSERT_EQ(carol.status, 201);
  EXPECT_EQ(Body(carol).at("has_password").as_bool(), false);

  net::Response duplicate =
      AsAdmin("POST", "/api/v1/users", R"({"email":"BOB@example.com","role":"admin"})");
  EXPECT_EQ(duplicate.status, 409);
  EXPECT_EQ(ErrorCode(duplicate), "conflict");

  json::array users = Body(AsAdmin("GET", "/api/v1/users")).at("users").as_array();
  ASSERT_EQ(users.size(), 3u);
  EXPECT_EQ(Text(users[0].as_object(), "email"), "admin@example.com");
  EXPECT_EQ(Text(users[1].as_object(), "email"), "bob@example.com");
  EXPECT_EQ(Text(users[2].as_object(), "role"), "admin");

  EXPECT_EQ(Body(AsAdmin("GET", "/api/v1/users/" + Text(bob, "id"))), bob);
  EXPECT_EQ(AsAdmin("GET", "/api/v1/users/0123456789abcdef").status, 404);
  EXPECT_EQ(AsAdmin("GET", "/api/v1/users/..%2F..").status, 404);

  AuditEvent event = LastAudit("user.create");
  EXPECT_EQ(event.actor_id, AdminId());
  EXPECT_EQ(event.credential, "api_key");
  EXPECT_EQ(event.target_id, Text(Body(carol), "id"));
}

TEST_F(UsersApiTest, AnAdminSessionCreatesUsersOnlyAfterAFreshConfirmation) {
  // A user with a password is a lasting credential: a stolen admin session must not mint one.
  TestUser second_admin = AddUser("root2@example.com", "admin");
  std::string session = SignIn(second_admin.email);
  std::string body = ToJson(
      json::object{{"email", "mallory@example.com"}, {"role", "admin"}, {"password", kPassword}});
  net::Response refused = Send("POST", "/api/v1/users", session, body);
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(ErrorCode(refused), "confirmation_required");
  EXPECT_EQ(Send("POST", "/api/v1/sessions", "",
                 ToJson(json::object{{"email", "mallory@example.com"}, {"password", kPassword}}))
                .status,
            401)
      << "the refused user was created";
  Confirm(session);
  EXPECT_EQ(Send("POST", "/api/v1/users", session, body).status, 201);
}

TEST_F(UsersApiTest, InvalidUserBodiesAreRefusedWithTheRule) {
  struct Case {
    std::string body;
    std::string says;
  };
  std::vector<Case> cases = {
      {R"({"role":"member"})", "email is required"},
      {R"({"email":"d@example.com"})", "role is required"},
      {R"({"email":"d@example.com","role":"owner"})", "role must be"},
      {R"({"email":"d@example.com","role":"member","password":"short"})", "at least 12"},
      {R"({"email":"d@example.com","role":"member","password":"d@example.com"})", "email"},
      {R"({"email":"d@example.com","role":"member","admin":true})", "unknown field \"admin\""},
      {R"({"email":"d example.com","role":"member"})", "spaces"},
      {R"({"email":"d@example.com","role":1})", "role must be a string"},
      {"{\"email\":\"d\\u0000@example.com\",\"role\":\"member\"}", "control"},
  };
  for (const Case& c : cases) {
    net::Response response = AsAdmin("POST", "/api/v1/users", c.body);
    EXPECT_EQ(response.status, 400) << c.body;
    EXPECT_NE(ErrorMessage(response).find(c.says), std::string::npos) << response.body;
  }
  EXPECT_EQ(Body(AsAdmin("GET", "/api/v1/users")).at("users").as_array().size(), 1u);
}

TEST_F(UsersApiTest, MembersAreRefusedAdminCallsAndSeeOnlyThemselves) {
  TestUser member = AddUser("member@example.com");
  std::string admin_id = AdminId();
  for (auto [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/v1/users"},
           {"POST", "/api/v1/users"},
           {"POST", "/api/v1/users/" + admin_id + "/deactivate"},
           {"POST", "/api/v1/users/" + member.id + "/reactivate"}}) {
    net::Response response = Send(method, target, member.api_key);
    EXPECT_EQ(response.status, 403) << target;
    EXPECT_EQ(ErrorCode(response), "forbidden") << target;
    EXPECT_NE(ErrorMessage(response).find("admin"), std::string::npos);
  }
  EXPECT_EQ(Send("GET", "/api/v1/users/" + member.id, member.api_key).status, 200);
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/users/" + admin_id, member.api_key)), "not_found");
  EXPECT_TRUE(Body(AsAdmin("GET", "/api/v1/users/" + admin_id)).at("deactivated_at").is_null());
}

TEST_F(UsersApiTest, DeactivationTurnsOffKeysSessionsAndAgentTokensAndReactivationKeysAndTokens) {
  TestUser member = AddUser("member@example.com");
  std::string session = SignIn(member.email);
  json::object connection = CreateConnection(member.api_key, "prod");
  std::string token = Text(connection, "token");
  ASSERT_EQ(ReportFrom(token, "uid-a").status, 200);

  net::Response deactivated = AsAdmin("POST", "/api/v1/users/" + member.id + "/deactivate");
  ASSERT_EQ(deactivated.status, 200) << deactivated.body;
  EXPECT_EQ(Text(Body(deactivated), "deactivated_at"), FormatRfc3339(clock_.Now()));
  AuditEvent event = LastAudit("user.deactivate");
  EXPECT_EQ(event.actor_id, AdminId());
  EXPECT_EQ(event.target_id, member.id);
  EXPECT_EQ(event.owner_id, member.id);

  for (const std::string& credential : {member.api_key, session}) {
    net::Response refused = Send("GET", "/api/v1/me", credential);
    EXPECT_EQ(refused.status, 401);
    EXPECT_EQ(ErrorCode(refused), "deactivated");
    EXPECT_EQ(refused.headers.Get("WWW-Authenticate"), "Bearer");
  }
  for (const net::Response& refused :
       {ReportFrom(token, "uid-a"), Send("GET", "/api/v1/agent/whoami", token)}) {
    EXPECT_EQ(refused.status, 403);
    EXPECT_EQ(ErrorCode(refused), "owner_deactivated");
    EXPECT_NE(ErrorMessage(refused).find("reactivate"), std::string::npos);
  }
  AuditEvent refusal = LastAudit("connection.token_refused");
  EXPECT_EQ(refusal.detail, R"({"reason":"owner_deactivated"})");
  EXPECT_EQ(refusal.owner_id, member.id);
  // Deactivating again changes nothing.
  clock_.Advance(seconds(5));
  EXPECT_EQ(
      Text(Body(AsAdmin("POST", "/api/v1/users/" + member.id + "/deactivate")), "deactivated_at"),
      Text(Body(deactivated), "deactivated_at"));

  net::Response reactivated = AsAdmin("POST", "/api/v1/users/" + member.id + "/reactivate");
  ASSERT_EQ(reactivated.status, 200) << reactivated.body;
  EXPECT_TRUE(Body(reactivated).at("deactivated_at").is_null());
  EXPECT_EQ(LastAudit("user.reactivate").target_id, member.id);
  EXPECT_EQ(Send("GET", "/api/v1/me", member.api_key).status, 200);
  EXPECT_EQ(ReportFrom(token, "uid-a").status, 200);
  EXPECT_EQ(Send("GET", "/api/v1/agent/whoami", token).status, 200);
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/me", session)), "revoked");
  EXPECT_EQ(Send("GET", "/api/v1/me", SignIn(member.email)).status, 200);
}

TEST_F(UsersApiTest, AnAdminCannotDeactivateThemselves) {
  TestUser second = AddUser("second@example.com", "admin");
  net::Response self = AsAdmin("POST", "/api/v1/users/" + AdminId() + "/deactivate");
  EXPECT_EQ(self.status, 409);
  EXPECT_EQ(ErrorCode(self), "failed_precondition");
  EXPECT_NE(ErrorMessage(self).find("yourself"), std::string::npos);
  // Another admin may; then the remaining admin is refused the same way.
  ASSERT_EQ(Send("POST", "/api/v1/users/" + AdminId() + "/deactivate", second.api_key).status, 200);
  EXPECT_EQ(ErrorCode(Send("POST", "/api/v1/users/" + second.id + "/deactivate", second.api_key)),
            "failed_precondition");
}

TEST_F(UsersApiTest, DeactivateAndReactivateTakeNoBody) {
  TestUser member = AddUser("member@example.com");
  net::Response response =
      AsAdmin("POST", "/api/v1/users/" + member.id + "/deactivate", R"({"now":true})");
  EXPECT_EQ(response.status, 400);
  EXPECT_TRUE(Body(AsAdmin("GET", "/api/v1/users/" + member.id)).at("deactivated_at").is_null());
}

// ---- API keys -------------------------------------------------------------------------------

TEST_F(UsersApiTest, AnApiKeyIsShownOnceAndListedWithoutItsSecret) {
  net::Response created = AsAdmin("POST", "/api/v1/api-keys", R"({"name":" ci "})");
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.headers.Get("Cache-Control"), "no-store");
  json::object key = Body(created);
  std::string secret = Text(key, "key");
  EXPECT_TRUE(secret.starts_with("uk_"));
  EXPECT_EQ(Text(key, "name"), "ci");
  EXPECT_EQ(Text(key, "prefix"), secret.substr(0, 11));
  EXPECT_EQ(Text(key, "status"), "active");
  EXPECT_TRUE(key.at("expires_at").is_null());
  EXPECT_TRUE(key.at("revoked_at").is_null());
  EXPECT_EQ(Send("GET", "/api/v1/me", secret).status, 200);

  net::Response list = AsAdmin("GET", "/api/v1/api-keys");
  EXPECT_EQ(list.body.find(secret), std::string::npos);
  json::array keys = Body(list).at("api_keys").as_array();
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(Text(keys[0].as_object(), "name"), "init");
  EXPECT_EQ(Text(keys[1].as_object(), "id"), Text(key, "id"));
  EXPECT_FALSE(keys[1].as_object().contains("key"));
  // Another user lists only their own.
  TestUser member = AddUser("member@example.com");
  EXPECT_EQ(Body(Send("GET", "/api/v1/api-keys", member.api_key)).at("api_keys").as_array().size(),
            1u);
}

TEST_F(UsersApiTest, ARevokedKeyIsRefusedWithRevoked) {
  json::object key = Body(AsAdmin("POST", "/api/v1/api-keys", R"({"name":"ci"})"));
  std::string secret = Text(key, "key");
  net::Response revoked =
      Send("POST", "/api/v1/api-keys/" + Text(key, "id") + "/revoke", secret);  // itself
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(Text(Body(revoked), "status"), "revoked");
  net::Response refused = Send("GET", "/api/v1/me", secret);
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(ErrorCode(refused), "revoked");
  AuditEvent event = LastAudit("api_key.revoke");
  EXPECT_EQ(event.target_id, Text(key, "id"));
  EXPECT_EQ(event.owner_id, AdminId());
  // Revoking again is harmless.
  EXPECT_EQ(AsAdmin("POST", "/api/v1/api-keys/" + Text(key, "id") + "/revoke").status, 200);
}

TEST_F(UsersApiTest, AKeyWithAnExpiryStopsWorkingThenWithExpired) {
  std::string expiry = FormatRfc3339(clock_.Now() + hours(1));
  json::object key =
      Body(AsAdmin("POST", "/api/v1/api-keys", R"({"name":"ci","expires_at":")" + expiry + "\"}"));
  EXPECT_EQ(Text(key, "expires_at"), expiry);
  clock_.Advance(hours(1) - seconds(1));
  EXPECT_EQ(Send("GET", "/api/v1/me", Text(key, "key")).status, 200);
  clock_.Advance(seconds(1));
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/me", Text(key, "key"))), "expired");
  json::array keys = Body(AsAdmin("GET", "/api/v1/api-keys")).at("api_keys").as_array();
  EXPECT_EQ(Text(keys[1].as_object(), "status"), "expired");
}

TEST_F(UsersApiTest, OnlyTheOwnerOrAnAdminRevokesAKey) {
  TestUser alice = AddUser("alice@example.com");
  TestUser bob = AddUser("bob@example.com");
  std::string alice_key_id =
      Text(Object(Body(Send("GET", "/api/v1/me", alice.api_key)), "credential"), "id");
  std::string admin_key_id = Text(Object(Body(AsAdmin("GET", "/api/v1/me")), "credential"), "id");
  EXPECT_EQ(ErrorCode(Send("POST", "/api/v1/api-keys/" + alice_key_id + "/revoke", bob.api_key)),
            "not_found");
  EXPECT_EQ(ErrorCode(Send("POST", "/api/v1/api-keys/" + admin_key_id + "/revoke", bob.api_key)),
            "not_found");
  EXPECT_EQ(Send("GET", "/api/v1/me", alice.api_key).status, 200);
  ASSERT_EQ(AsAdmin("POST", "/api/v1/api-keys/" + alice_key_id + "/revoke").status, 200);
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/me", alice.api_key)), "revoked");
  AuditEvent event = LastAudit("api_key.revoke");
  EXPECT_EQ(event.actor_id, AdminId());
  EXPECT_EQ(event.owner_id, alice.id);
  EXPECT_EQ(AsAdmin("POST", "/api/v1/api-keys/nope/revoke").status, 404);
}

TEST_F(UsersApiTest, InvalidApiKeyBodiesAreRefused) {
  std::string past = FormatRfc3339(clock_.Now() - seconds(1));
  for (const std::string& body :
       {std::string(R"({})"), std::string(R"({"name":""})"), std::string(R"({"name":7})"),
        "{\"name\":\"" + std::string(64, 'n') + "\"}", std::string(R"({"name":"a\tb"})"),
        std::string(R"({"name":"ci","expires_at":"soon"})"),
        R"({"name":"ci","expires_at":")" + past + "\"}",
        std::string(R"({"name":"ci","scope":"all"})")}) {
    net::Response response = AsAdmin("POST", "/api/v1/api-keys", body);
    EXPECT_EQ(response.status, 400) << body << " " << response.body;
  }
  EXPECT_EQ(Body(AsAdmin("GET", "/api/v1/api-keys")).at("api_keys").as_array().size(), 1u);
}

}  // namespace
}  // namespace uplink::console
