// Sessions end to end through the router: sign-in, /me, confirmation of sensitive calls,
// sign-out, expiry, and password changes.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "api_fixture.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::kPassword;
using testing::Object;
using testing::Text;

constexpr const char* kNewPassword = "a much longer and newer passphrase";

class SessionsApiTest : public testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    net::Response created =
        AsAdmin("POST", "/api/v1/users",
                ToJson(json::object{
                    {"email", "alice@example.com"}, {"role", "member"}, {"password", kPassword}}));
    ASSERT_EQ(created.status, 201) << created.body;
    alice_id_ = Text(Body(created), "id");
  }

  net::Response SignInReply(const std::string& email, const std::string& password,
                            const std::string& address = testing::kClientAddress) {
    return Send("POST", "/api/v1/sessions", "",
                ToJson(json::object{{"email", email}, {"password", password}}), address);
  }

  net::Response ConfirmReply(const std::string& session, const std::string& password) {
    return Send("POST", "/api/v1/session/confirm", session,
                ToJson(json::object{{"password", password}}));
  }

  net::Response CreateConnectionReply(const std::string& credential, const std::string& name) {
    return Send("POST", "/api/v1/connections", credential,
                R"({"agent_name":"inventory","cluster_name":")" + name + "\"}");
  }

  std::string alice_id_;
};

// Sign-ins hash on the hasher's own threads; a burst beyond its queue is told to come back
// rather than holding the console's HTTP threads, and nothing else waits for it.
TEST_F(SessionsApiTest, ABurstOfSignInsBeyondTheHashQueueIsAnsweredBusyAndOthersAreServed) {
  PasswordHasher& hasher = api_->password_hasher();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> holding{0};
  // Every hashing thread held, and the queue behind them full.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(hasher.Submit([&] {
      ++holding;
      released.wait();
    }));
  }
  for (int waited = 0; holding < 2 && waited < 10'000; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(holding, 2);
  std::atomic<size_t> queued_ran{0};
  for (size_t i = 0; i < PasswordHasher::kMaxQueuedJobs; ++i) {
    ASSERT_TRUE(hasher.Submit([&] { ++queued_ran; }));
  }
  net::Response busy = SignInReply("alice@example.com", kPassword);
  EXPECT_EQ(busy.status, 503) << busy.body;
  EXPECT_EQ(ErrorCode(busy), "busy");
  EXPECT_EQ(busy.headers.Get("Retry-After"), "1");
  EXPECT_EQ(ConfirmReply(admin_key_, kPassword).status, 503) << "every route that hashes";
  // The web console's sign-in too: until 2026-12-04 it hashed on the HTTP thread, so a burst
  // of them held every HTTP thread, agents' calls included.
  net::Response web_busy =
      Send("POST", "/api/v1/web/sign-in", "",
           ToJson(json::object{{"email", "alice@example.com"}, {"password", kPassword}}));
  EXPECT_EQ(web_busy.status, 503) << web_busy.body;
  EXPECT_EQ(ErrorCode(web_busy), "busy");
  EXPECT_EQ(web_busy.headers.Get("Retry-After"), "1");
  // What does not hash is answered meanwhile.
  EXPECT_EQ(AsAdmin("GET", "/api/v1/me").status, 200);

  release.set_value();
  for (int waited = 0; queued_ran < PasswordHasher::kMaxQueuedJobs && waited < 10'000; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  net::Response signed_in = SignInReply("alice@example.com", kPassword);
  EXPECT_EQ(signed_in.status, 201) << signed_in.body;
}

TEST_F(SessionsApiTest, SigningInReturnsASessionTokenOnceAndMeDescribesIt) {
  net::Response response = SignInReply("alice@example.com", kPassword);
  ASSERT_EQ(response.status, 201) << response.body;
  EXPECT_EQ(response.headers.Get("Cache-Control"), "no-store");
  json::object body = Body(response);
  std::string token = Text(body, "token");
  EXPECT_TRUE(token.starts_with("skt_"));
  json::object session = Object(body, "session");
  EXPECT_EQ(Text(session, "expires_at"), FormatRfc3339(clock_.Now() + hours(12)));
  EXPECT_TRUE(session.at("confirmed_until").is_null());
  EXPECT_EQ(Text(Object(body, "user"), "id"), alice_id_);
  EXPECT_EQ(Text(Object(body, "user"), "role"), "member");

  json::object me = Body(Send("GET", "/api/v1/me", token));
  EXPECT_EQ(Text(Object(me, "user"), "email"), "alice@example.com");
  json::object credential = Object(me, "credential");
  EXPECT_EQ(Text(credential, "kind"), "session");
  EXPECT_EQ(Text(credential, "id"), Text(session, "id"));
  EXPECT_EQ(Text(credential, "prefix"), token.substr(0, 12));
  EXPECT_EQ(Text(credential, "expires_at"), Text(session, "expires_at"));
  EXPECT_TRUE(credential.at("confirmed_until").is_null());
  EXPECT_EQ(me.find("token"), me.end());

  json::object admin_me = Body(AsAdmin("GET", "/api/v1/me"));
  EXPECT_EQ(Text(Object(admin_me, "credential"), "kind"), "api_key");
  EXPECT_EQ(Text(Object(admin_me, "credential"), "prefix"), admin_key_.substr(0, 11));
  EXPECT_TRUE(Object(admin_me, "credential").at("expires_at").is_null());
  EXPECT_EQ(Text(Object(admin_me, "user"), "role"), "admin");
}

TEST_F(SessionsApiTest, EmailsAreTrimmedAndComparedCaseInsensitively) {
  EXPECT_EQ(SignInReply("  Alice@Example.COM ", kPassword).status, 201);
}

TEST_F(SessionsApiTest, AWrongPasswordAndAnUnknownEmailGetTheSameReply) {
  net::Response wrong = SignInReply("alice@example.com", "not the right password");
  net::Response unknown = SignInReply("nobody@example.com", kPassword);
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(ErrorCode(wrong), "invalid_credentials");
  EXPECT_EQ(wrong.status, unknown.status);
  EXPECT_EQ(wrong.body, unknown.body);
  EXPECT_EQ(wrong.headers.all(), unknown.headers.all());
  EXPECT_EQ(wrong.headers.Get("WWW-Authenticate"), "Bearer");
  // The admin made by `init` has no password: the same reply again.
  net::Response no_password = SignInReply("admin@example.com", kPassword);
  EXPECT_EQ(no_password.body, unknown.body);

  // Every failed sign-in is recorded, for an unknown email too: the same work either way.
  std::vector<AuditEvent> refused;
  for (const AuditEvent& event : AllAudit()) {
    if (event.action == "session.refused") refused.push_back(event);
  }
  ASSERT_EQ(refused.size(), 3u);
  EXPECT_EQ(refused[0].target_id, alice_id_);
  EXPECT_EQ(refused[0].owner_id, alice_id_);
  EXPECT_EQ(refused[0].actor_type, "anonymous");
  EXPECT_EQ(refused[0].actor_label, "alice@example.com");
  EXPECT_EQ(refused[0].credential, "password");
  EXPECT_EQ(refused[0].outcome, "refused");
  EXPECT_EQ(refused[0].source_address, testing::kClientAddress);
  EXPECT_EQ(refused[0].detail, R"({"reason":"wrong_password"})");
  EXPECT_EQ(refused[1].target_id, "");
  EXPECT_EQ(refused[1].owner_id, "");
  EXPECT_EQ(refused[1].actor_label, "nobody@example.com");
  EXPECT_EQ(refused[1].detail, R"({"reason":"unknown_email"})");
  EXPECT_EQ(refused[2].target_id, AdminId());
  EXPECT_EQ(Metric("uplink_console_auth_failures_total",
                   {{"kind", "password"}, {"reason", "invalid_credentials"}}),
            3);
}

TEST_F(SessionsApiTest, SignInBodiesAreCheckedStrictly) {
  struct Case {
    std::string body;
    std::string says;
  };
  std::vector<Case> cases = {
      {R"({"email":"alice@example.com"})", "password is required"},
      {R"({"password":"x"})", "email is required"},
      {R"({"email":5,"password":"x"})", "email must be a string"},
      {R"({"email":"alice@example.com","password":["x"]})", "password must be a string"},
      {R"({"email":"alice@example.com","password":"x","remember":true})", "unknown field"},
      {R"({"email":"no-at-sign","password":"x"})", "exactly one '@'"},
      {R"({"email":"a@b@c","password":"x"})", "exactly one '@'"},
      {R"({"email":"@example.com","password":"x"})", "exactly one '@'"},
      {R"({"email":"al ice@example.com","password":"x"})", "spaces or control"},
      {R"({"email":"abc@","password":"x"})", "exactly one '@'"},
      {R"({"email":"ab","password":"x"})", "3-254"},
      {"{\"email\":\"" + std::string(250, 'a') + "@example.com\",\"password\":\"x\"}", "3-254"},
      {"{\"email\":\"alice@example.com\",\"password\":\"" + std::string(257, 'p') + "\"}",
       "the limit is 256"},
  };
  for (const Case& c : cases) {
    net::Response response = Send("POST", "/api/v1/sessions", "", c.body);
    EXPECT_EQ(response.status, 400) << c.body;
    EXPECT_NE(ErrorMessage(response).find(c.says), std::string::npos) << response.body;
  }
}

TEST_F(SessionsApiTest, ASessionExpiresAfter12Hours) {
  std::string session = SignIn("alice@example.com");
  clock_.Advance(hours(12) - seconds(1));
  EXPECT_EQ(Send("GET", "/api/v1/me", session).status, 200);
  clock_.Advance(seconds(1));
  net::Response expired = Send("GET", "/api/v1/me", session);
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(ErrorCode(expired), "expired");
  EXPECT_NE(ErrorMessage(expired).find("uplink login"), std::string::npos);
}

TEST_F(SessionsApiTest, SensitiveCallsNeedAFreshConfirmationWhichLastsFiveMinutes) {
  std::string session = SignIn("alice@example.com");
  std::string key = NewApiKey(SignIn("alice@example.com"));
  std::string connection_id = Text(CreateConnection(key, "prod"), "id");
  std::string rotate = "/api/v1/connections/" + connection_id + "/rotate";

  auto expect_refused = [&](const net::Response& response) {
    EXPECT_EQ(response.status, 403) << response.body;
    EXPECT_EQ(ErrorCode(response), "confirmation_required");
    EXPECT_NE(ErrorMessage(response).find("uplink login --confirm"), std::string::npos);
    EXPECT_NE(ErrorMessage(response).find("POST /api/v1/session/confirm"), std::string::npos);
    EXPECT_NE(ErrorMessage(response).find("API key"), std::string::npos);
  };
  expect_refused(CreateConnectionReply(session, "dev"));
  expect_refused(Send("POST", rotate, session));
  expect_refused(Send("POST", rotate, session, R"({"handover":true})"));
  expect_refused(Send("POST", "/api/v1/api-keys", session, R"({"name":"ci"})"));
  // Nothing was made, and reading and revoking need no confirmation.
  EXPECT_EQ(Body(Send("GET", "/api/v1/connections", session)).at("connections").as_array().size(),
            1u);
  EXPECT_EQ(Send("GET", "/api/v1/api-keys", session).status, 200);

  net::Response wrong = ConfirmReply(session, "not the right password");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(ErrorCode(wrong), "invalid_credentials");
  AuditEvent refused = LastAudit("session.confirm");
  EXPECT_EQ(refused.outcome, "refused");
  EXPECT_EQ(refused.actor_id, alice_id_);
  expect_refused(CreateConnectionReply(session, "dev"));

  net::Response confirmed = ConfirmReply(session, kPassword);
  ASSERT_EQ(confirmed.status, 200) << confirmed.body;
  EXPECT_EQ(Text(Object(Body(confirmed), "session"), "confirmed_until"),
            FormatRfc3339(clock_.Now() + minutes(5)));
  EXPECT_EQ(Text(Object(Body(Send("GET", "/api/v1/me", session)), "credential"), "confirmed_until"),
            FormatRfc3339(clock_.Now() + minutes(5)));
  EXPECT_EQ(LastAudit("session.confirm").outcome, "ok");
  EXPECT_EQ(CreateConnectionReply(session, "dev").status, 201);
  EXPECT_EQ(Send("POST", rotate, session).status, 200);
  EXPECT_EQ(Send("POST", "/api/v1/api-keys", session, R"({"name":"ci"})").status, 201);

  clock_.Advance(minutes(5) - seconds(1));
  EXPECT_EQ(CreateConnectionReply(session, "staging").status, 201);
  clock_.Advance(seconds(1));
  expect_refused(CreateConnectionReply(session, "qa"));
  // An API key never needs confirming.
  EXPECT_EQ(CreateConnectionReply(key, "qa").status, 201);
}

TEST_F(SessionsApiTest, ConfirmAndLogoutAreForSessionsOnly) {
  std::string key = NewApiKey(SignIn("alice@example.com"));
  net::Response confirm = ConfirmReply(key, kPassword);
  EXPECT_EQ(confirm.status, 400);
  EXPECT_NE(ErrorMessage(confirm).find("API key"), std::string::npos);
  EXPECT_EQ(Send("POST", "/api/v1/session/logout", key).status, 400);
  EXPECT_EQ(Send("GET", "/api/v1/me", key).status, 200);
}

TEST_F(SessionsApiTest, LogoutEndsTheSessionAtOnce) {
  std::string session = SignIn("alice@example.com");
  std::string other = SignIn("alice@example.com");
  net::Response logout = Send("POST", "/api/v1/session/logout", session);
  ASSERT_EQ(logout.status, 200) << logout.body;
  net::Response after = Send("GET", "/api/v1/me", session);
  EXPECT_EQ(after.status, 401);
  EXPECT_EQ(ErrorCode(after), "revoked");
  EXPECT_EQ(Send("GET", "/api/v1/me", other).status, 200);
  AuditEvent event = LastAudit("session.logout");
  EXPECT_EQ(event.actor_id, alice_id_);
  EXPECT_EQ(event.credential, "session");
  EXPECT_EQ(event.target_type, "session");
}

TEST_F(SessionsApiTest, ChangingYourOwnPasswordNeedsTheCurrentOneAndEndsYourOtherSessions) {
  std::string session = SignIn("alice@example.com");
  std::string other = SignIn("alice@example.com");
  std::string path = "/api/v1/users/" + alice_id_ + "/password";

  net::Response missing =
      Send("POST", path, session, ToJson(json::object{{"password", kNewPassword}}));
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(ErrorMessage(missing).find("current_password is required"), std::string::npos);
  net::Response wrong = Send(
      "POST", path, session,
      ToJson(json::object{{"password", kNewPassword}, {"current_password", "wrong password!"}}));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(ErrorCode(wrong), "invalid_credentials");

  net::Response changed =
      Send("POST", path, session,
           ToJson(json::object{{"password", kNewPassword}, {"current_password", kPassword}}));
  ASSERT_EQ(changed.status, 200) << changed.body;
  EXPECT_EQ(Body(changed).at("has_password").as_bool(), true);
  EXPECT_EQ(Send("GET", "/api/v1/me", session).status, 200);
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/me", other)), "revoked");
  EXPECT_EQ(SignInReply("alice@example.com", kPassword).status, 401);
  EXPECT_EQ(SignInReply("alice@example.com", kNewPassword).status, 201);
  AuditEvent event = LastAudit("user.password");
  EXPECT_EQ(event.actor_id, alice_id_);
  EXPECT_EQ(event.target_id, alice_id_);
}

TEST_F(SessionsApiTest, AnAdminSettingAnotherUsersPasswordIsSensitiveAndEndsTheirSessions) {
  std::string alice = SignIn("alice@example.com");
  std::string path = "/api/v1/users/" + alice_id_ + "/password";
  std::string body = ToJson(json::object{{"password", kNewPassword}});

  // The init admin gets a password, signs in, and must confirm before setting Alice's.
  ASSERT_EQ(AsAdmin("POST", "/api/v1/users/" + AdminId() + "/password",
                    ToJson(json::object{{"password", kPassword}}))
                .status,
            200);
  std::string admin_session = SignIn("admin@example.com");
  net::Response unconfirmed = Send("POST", path, admin_session, body);
  EXPECT_EQ(unconfirmed.status, 403);
  EXPECT_EQ(ErrorCode(unconfirmed), "confirmation_required");
  Confirm(admin_session);
  net::Response with_current =
      Send("POST", path, admin_session,
           ToJson(json::object{{"password", kNewPassword}, {"current_password", kPassword}}));
  EXPECT_EQ(with_current.status, 400);
  EXPECT_NE(ErrorMessage(with_current).find("leave it out"), std::string::npos);
  ASSERT_EQ(Send("POST", path, admin_session, body).status, 200);
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/me", alice)), "revoked");
  EXPECT_EQ(SignInReply("alice@example.com", kNewPassword).status, 201);
  // A member cannot set anyone else's.
  std::string alice_again = SignIn("alice@example.com", kNewPassword);
  EXPECT_EQ(Send("POST", "/api/v1/users/" + AdminId() + "/password", alice_again, body).status,
            404);
}

TEST_F(SessionsApiTest, WeakPasswordsAreRefusedWithTheRule) {
  std::string key = NewApiKey(SignIn("alice@example.com"));
  std::string path = "/api/v1/users/" + alice_id_ + "/password";
  for (const std::string& weak :
       {std::string("short"), std::string(20, 'a'), std::string("alice@example.com")}) {
    net::Response response =
        Send("POST", path, key,
             ToJson(json::object{{"password", weak}, {"current_password", kPassword}}));
    EXPECT_EQ(response.status, 400) << weak;
    EXPECT_EQ(response.body.find(weak), std::string::npos) << "the password was echoed";
  }
  EXPECT_EQ(SignInReply("alice@example.com", kPassword).status, 201);
}

TEST_F(SessionsApiTest, ADeactivatedUserCannotSignInEvenWithTheRightPassword) {
  ASSERT_EQ(AsAdmin("POST", "/api/v1/users/" + alice_id_ + "/deactivate").status, 200);
  net::Response refused = SignInReply("alice@example.com", kPassword);
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(ErrorCode(refused), "deactivated");
  EXPECT_EQ(LastAudit("session.refused").detail, R"({"reason":"deactivated"})");
  // Without the right password it is the ordinary reply: deactivation is not revealed.
  EXPECT_EQ(ErrorCode(SignInReply("alice@example.com", "a wrong password")), "invalid_credentials");
}

}  // namespace
}  // namespace uplink::console
