// Two-factor sign-in through the router: enrolment, sign-in with a code or a recovery code,
// replays, rate limiting, turning it off, an admin's reset, hostile input, and the setting that
// requires it, which confines users without it to enrolment and refuses their agents.
#include <gtest/gtest.h>

#include <cctype>

#include "api_fixture.h"
#include "console/auth/totp.h"

namespace uplink::console {
namespace {

using std::chrono::seconds;
using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::kPassword;
using testing::Object;
using testing::Text;

class TwoFactorApiTest : public testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    alice_ = AddUser("alice@example.com");
  }

  // The code an authenticator app holding `secret` shows `steps` steps from now.
  std::string CodeFor(const std::string& secret, int steps = 0) {
    auto key = Base32Decode(secret);
    EXPECT_TRUE(key.ok()) << secret;
    return HotpCode(*key, static_cast<std::uint64_t>(TotpStep(clock_.Now()) + steps));
  }

  // Begins enrolment for the holder of `credential`; the reply's body.
  json::object Begin(const std::string& credential) {
    net::Response begun = Send("POST", "/api/v1/two-factor/enrollment", credential);
    EXPECT_EQ(begun.status, 201) << begun.body;
    return Body(begun);
  }

  net::Response Post(const std::string& path, const std::string& credential,
                     const json::object& body) {
    return Send("POST", path, credential, ToJson(body));
  }

  // Enrols the holder of `credential`; returns the secret and fills `recovery_codes`.
  std::string Enroll(const std::string& credential,
                     std::vector<std::string>* recovery_codes = nullptr) {
    std::string secret = Text(Begin(credential), "secret");
    net::Response confirmed = Post("/api/v1/two-factor/enrollment/confirm", credential,
                                   {{"code", CodeFor(secret)}});
    EXPECT_EQ(confirmed.status, 200) << confirmed.body;
    json::object body = Body(confirmed);
    if (recovery_codes) {
      for (const json::value& code : body.at("recovery_codes").as_array()) {
        recovery_codes->emplace_back(code.as_string());
      }
    }
    // The code just used stays used: later steps are for what comes next.
    clock_.Advance(seconds(30));
    return secret;
  }

  net::Response SignInWith(const std::string& email, json::object extra = {}) {
    json::object body{{"email", email}, {"password", kPassword}};
    for (auto& [key, value] : extra) body[key] = value;
    return Send("POST", "/api/v1/sessions", "", ToJson(body));
  }

  net::Response RequireTwoFactor(bool on) {
    return AsAdmin("PUT", "/api/v1/settings", ToJson(json::object{{"require_two_factor", on}}));
  }

  testing::TestUser alice_;
};

TEST_F(TwoFactorApiTest, EnrolmentShowsTheSecretOnceAsTextUriAndQrCodeAndStoresItSealed) {
  json::object begun = Begin(alice_.api_key);
  std::string secret = Text(begun, "secret");
  ASSERT_EQ(secret.size(), 32u);  // 160 bits in base32
  EXPECT_EQ(Base32Decode(secret)->size(), kTotpSecretBytes);
  EXPECT_EQ(Text(begun, "otpauth_uri"),
            "otpauth://totp/uplink:alice%40example.com?secret=" + secret +
                "&issuer=uplink&algorithm=SHA1&digits=6&period=30");
  const json::array& qr = begun.at("qr_code").as_array();
  ASSERT_GE(qr.size(), 21u);
  EXPECT_EQ(qr.front().as_string().size(), qr.size());
  EXPECT_EQ(begun.at("digits"), 6);
  EXPECT_EQ(begun.at("period"), 30);

  json::object status = Body(Send("GET", "/api/v1/two-factor", alice_.api_key));
  EXPECT_EQ(status.at("pending"), true);
  EXPECT_EQ(status.at("enabled"), false);

  // Never in the store in the clear, never in a log line or an audit event.
  std::string raw_key = *Base32Decode(secret);
  EXPECT_EQ(testing::RawCount(dir_.File("console.db"),
                              "SELECT COUNT(*) FROM two_factor WHERE sealed_secret LIKE '%" +
                                  secret + "%'"),
            0);
  for (const std::string& line : logs_) EXPECT_EQ(line.find(secret), std::string::npos) << line;
  for (const AuditEvent& event : AllAudit()) {
    EXPECT_EQ(event.detail.find(secret), std::string::npos) << event.action;
  }
  EXPECT_EQ(LastAudit("two_factor.enroll").detail, R"({"restarted":false})");
}

TEST_F(TwoFactorApiTest, BeginningIsSensitiveForSessions) {
  std::string session = SignIn("alice@example.com");
  net::Response refused = Send("POST", "/api/v1/two-factor/enrollment", session);
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(ErrorCode(refused), "confirmation_required");
  Confirm(session);
  EXPECT_EQ(Send("POST", "/api/v1/two-factor/enrollment", session).status, 201);
}

TEST_F(TwoFactorApiTest, EnrolmentCompletesOnlyWithAProvedCodeAndGivesTenRecoveryCodesOnce) {
  std::string secret = Text(Begin(alice_.api_key), "secret");
  net::Response wrong = Post("/api/v1/two-factor/enrollment/confirm", alice_.api_key,
                             {{"code", CodeFor(secret, 5)}});
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(ErrorCode(wrong), "invalid_two_factor_code");
  AuditEvent refusal = LastAudit("two_factor.refused");
  EXPECT_EQ(refusal.outcome, "refused");
  EXPECT_EQ(refusal.detail, R"({"during":"enrollment","reason":"wrong_code"})");
  EXPECT_EQ(Body(Send("GET", "/api/v1/two-factor", alice_.api_key)).at("enabled"), false);
  // Until then a sign-in needs no code.
  EXPECT_EQ(SignInWith("alice@example.com").status, 201);

  net::Response confirmed = Post("/api/v1/two-factor/enrollment/confirm", alice_.api_key,
                                 {{"code", CodeFor(secret, -1)}});
  ASSERT_EQ(confirmed.status, 200) << confirmed.body;
  EXPECT_EQ(confirmed.headers.Get("Cache-Control"), "no-store");
  json::object body = Body(confirmed);
  ASSERT_EQ(body.at("recovery_codes").as_array().size(), 10u);
  EXPECT_EQ(Object(body, "two_factor").at("enabled"), true);
  EXPECT_EQ(Object(body, "two_factor").at("recovery_codes_left"), 10);
  EXPECT_EQ(LastAudit("two_factor.enable").detail, R"({"recovery_codes":10})");
  json::object status = Body(Send("GET", "/api/v1/two-factor", alice_.api_key));
  EXPECT_EQ(status.at("enabled"), true);
  EXPECT_FALSE(status.contains("secret"));
  EXPECT_EQ(Body(Send("GET", "/api/v1/users/" + alice_.id, alice_.api_key)).at("two_factor_enabled"),
            true);
  // Once enabled, the secret is never handed out again, and a second enrolment is refused.
  net::Response again = Send("POST", "/api/v1/two-factor/enrollment", alice_.api_key);
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(again.body.find(secret), std::string::npos);
  for (const json::value& code : body.at("recovery_codes").as_array()) {
    for (const AuditEvent& event : AllAudit()) {
      EXPECT_EQ(event.detail.find(code.as_string()), std::string::npos);
    }
  }
}

TEST_F(TwoFactorApiTest, SignInNeedsTheCodeAndEachCodeWorksOnce) {
  std::string secret = Enroll(alice_.api_key);
  net::Response asked = SignInWith("alice@example.com");
  EXPECT_EQ(asked.status, 401);
  EXPECT_EQ(ErrorCode(asked), "two_factor_required");
  EXPECT_NE(ErrorMessage(asked).find("code"), std::string::npos);

  net::Response wrong = SignInWith("alice@example.com", {{"code", CodeFor(secret, 3)}});
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(ErrorCode(wrong), "invalid_two_factor_code");
  AuditEvent refused = LastAudit("session.refused");
  EXPECT_EQ(refused.detail, R"({"during":"sign_in","reason":"wrong_code"})");
  EXPECT_EQ(refused.actor_label, "alice@example.com");

  // A wrong password with the right code is still a wrong password.
  net::Response bad_password = Send(
      "POST", "/api/v1/sessions", "",
      ToJson(json::object{{"email", "alice@example.com"}, {"password", "not the password!"},
                          {"code", CodeFor(secret)}}));
  EXPECT_EQ(ErrorCode(bad_password), "invalid_credentials");

  std::string code = CodeFor(secret);
  net::Response signed_in = SignInWith("alice@example.com", {{"code", code}});
  ASSERT_EQ(signed_in.status, 201) << signed_in.body;
  EXPECT_EQ(Body(signed_in).at("two_factor_enrollment_required"), false);
  EXPECT_EQ(LastAudit("session.create").detail.find(R"("second_factor":"totp")") != std::string::npos,
            true);
  // The same code again, within its window: a replay.
  net::Response replay = SignInWith("alice@example.com", {{"code", code}});
  EXPECT_EQ(replay.status, 401);
  EXPECT_EQ(ErrorCode(replay), "invalid_two_factor_code");
  EXPECT_NE(ErrorMessage(replay).find("already used"), std::string::npos);
  EXPECT_EQ(LastAudit("session.refused").detail, R"({"during":"sign_in","reason":"code_reused"})");
  // The previous step's code is older than the one used: refused too.
  EXPECT_EQ(SignInWith("alice@example.com", {{"code", CodeFor(secret, -1)}}).status, 401);
  clock_.Advance(seconds(30));
  EXPECT_EQ(SignInWith("alice@example.com", {{"code", CodeFor(secret)}}).status, 201);
}

TEST_F(TwoFactorApiTest, ARecoveryCodeSignsInOnceAndItsUseIsAudited) {
  std::vector<std::string> codes;
  Enroll(alice_.api_key, &codes);
  // Typed in capitals with spaces, as people do.
  std::string typed = codes[3];
  for (char& c : typed) c = c == '-' ? ' ' : static_cast<char>(std::toupper(c));
  net::Response signed_in = SignInWith("alice@example.com", {{"recovery_code", typed}});
  ASSERT_EQ(signed_in.status, 201) << signed_in.body;
  AuditEvent used = LastAudit("two_factor.recovery_code_used");
  EXPECT_EQ(used.detail, R"({"for":"session.create","recovery_codes_left":9})");
  EXPECT_EQ(used.target_id, alice_.id);
  EXPECT_EQ(Body(Send("GET", "/api/v1/two-factor", alice_.api_key)).at("recovery_codes_left"), 9);

  net::Response again = SignInWith("alice@example.com", {{"recovery_code", codes[3]}});
  EXPECT_EQ(again.status, 401);
  EXPECT_EQ(ErrorCode(again), "invalid_two_factor_code");
  EXPECT_EQ(LastAudit("session.refused").detail,
            R"({"during":"sign_in","reason":"wrong_recovery_code"})");
  EXPECT_EQ(SignInWith("alice@example.com", {{"recovery_code", codes[4]}}).status, 201);
}

TEST_F(TwoFactorApiTest, HostileCodesAreRefusedAsMalformedWithoutCountingAsGuesses) {
  std::string secret = Enroll(alice_.api_key);
  const json::value bad_codes[] = {"12345",       "1234567",     "abcdef",  "12 345",
                                   "１２３４５６", "12345\n",     "",        "-12345",
                                   123456,        nullptr,       true,      json::array{"123456"},
                                   json::object{{"code", "1"}}, json::value(std::string(65, '1'))};
  for (const json::value& bad : bad_codes) {
    net::Response refused = SignInWith("alice@example.com", {{"code", bad}});
    EXPECT_EQ(refused.status, 400) << json::serialize(bad) << " " << refused.body;
    EXPECT_EQ(ErrorCode(refused), "invalid_request");
  }
  for (const std::string& bad :
       std::vector<std::string>{"short", "aaaa-bbbb-cccc-ddd0", std::string(64, 'a')}) {
    EXPECT_EQ(SignInWith("alice@example.com", {{"recovery_code", bad}}).status, 400) << bad;
  }
  EXPECT_EQ(SignInWith("alice@example.com",
                       {{"code", CodeFor(secret)}, {"recovery_code", "aaaa-bbbb-cccc-dddd"}})
                .status,
            400);
  EXPECT_EQ(SignInWith("alice@example.com", {{"codes", CodeFor(secret)}}).status, 400);
  // None of them took from the email's bucket: the right code still works.
  EXPECT_EQ(SignInWith("alice@example.com", {{"code", CodeFor(secret)}}).status, 201);
  // A body over the user API's limit is refused before anything is read.
  net::Response huge = SignInWith("alice@example.com", {{"code", std::string(70 << 10, '1')}});
  EXPECT_EQ(huge.status, 413);
  net::Response huge_confirm =
      Post("/api/v1/two-factor/disable", alice_.api_key,
           {{"password", kPassword}, {"code", std::string(70 << 10, '1')}});
  EXPECT_EQ(huge_confirm.status, 413);
}

TEST_F(TwoFactorApiTest, WrongCodesAreRateLimitedLikeWrongPasswords) {
  std::string secret = Enroll(alice_.api_key);
  std::string wrong = CodeFor(secret, 7);
  int refused = 0;
  net::Response last;
  for (int i = 0; i < 12; ++i) {
    last = SignInWith("alice@example.com", {{"code", wrong}});
    if (last.status == 401) ++refused;
  }
  EXPECT_EQ(refused, 10);  // the email's burst
  EXPECT_EQ(last.status, 429);
  EXPECT_TRUE(last.headers.Get("Retry-After").has_value());
  // Now even the right code waits: the bucket is the email's, whatever is tried.
  EXPECT_EQ(SignInWith("alice@example.com", {{"code", CodeFor(secret)}}).status, 429);
  EXPECT_EQ(Metric("uplink_console_auth_failures_total",
                   {{"kind", "two_factor_code"}, {"reason", "invalid_two_factor_code"}}),
            10);
}

TEST_F(TwoFactorApiTest, TurningItOffNeedsThePasswordAndACode) {
  std::vector<std::string> codes;
  std::string secret = Enroll(alice_.api_key, &codes);
  net::Response no_code = Post("/api/v1/two-factor/disable", alice_.api_key, {{"password", kPassword}});
  EXPECT_EQ(no_code.status, 400);
  net::Response no_password =
      Post("/api/v1/two-factor/disable", alice_.api_key, {{"code", CodeFor(secret)}});
  EXPECT_EQ(no_password.status, 400);
  net::Response wrong_password = Post("/api/v1/two-factor/disable", alice_.api_key,
                                      {{"password", "wrong password here"}, {"code", CodeFor(secret)}});
  EXPECT_EQ(ErrorCode(wrong_password), "invalid_credentials");
  EXPECT_EQ(LastAudit("two_factor.refused").detail,
            R"({"during":"disable","reason":"wrong_password"})");
  net::Response wrong_code = Post("/api/v1/two-factor/disable", alice_.api_key,
                                  {{"password", kPassword}, {"code", CodeFor(secret, 4)}});
  EXPECT_EQ(ErrorCode(wrong_code), "invalid_two_factor_code");
  EXPECT_EQ(Body(Send("GET", "/api/v1/two-factor", alice_.api_key)).at("enabled"), true);

  net::Response off = Post("/api/v1/two-factor/disable", alice_.api_key,
                           {{"password", kPassword}, {"recovery_code", codes[0]}});
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_EQ(Body(off).at("enabled"), false);
  EXPECT_EQ(LastAudit("two_factor.disable").detail,
            R"({"second_factor":"recovery_code","was_enabled":true})");
  EXPECT_EQ(SignInWith("alice@example.com").status, 201);
  EXPECT_EQ(SignInWith("alice@example.com", {{"recovery_code", codes[1]}}).status, 400);
  EXPECT_EQ(Post("/api/v1/two-factor/disable", alice_.api_key, {{"password", kPassword}}).status,
            404);
}

TEST_F(TwoFactorApiTest, ASetUpNotYetConfirmedIsCancelledWithThePasswordAlone) {
  Begin(alice_.api_key);
  net::Response cancelled =
      Post("/api/v1/two-factor/disable", alice_.api_key, {{"password", kPassword}});
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(LastAudit("two_factor.disable").detail,
            R"({"second_factor":"none","was_enabled":false})");
  json::object status = Body(Send("GET", "/api/v1/two-factor", alice_.api_key));
  EXPECT_EQ(status.at("pending"), false);
  EXPECT_EQ(status.at("enabled"), false);
}

TEST_F(TwoFactorApiTest, NewRecoveryCodesReplaceTheOldOnes) {
  std::vector<std::string> old_codes;
  std::string secret = Enroll(alice_.api_key, &old_codes);
  net::Response replaced = Post("/api/v1/two-factor/recovery-codes", alice_.api_key,
                                {{"password", kPassword}, {"code", CodeFor(secret)}});
  ASSERT_EQ(replaced.status, 200) << replaced.body;
  EXPECT_EQ(replaced.headers.Get("Cache-Control"), "no-store");
  json::object body = Body(replaced);
  const json::array& fresh = body.at("recovery_codes").as_array();
  ASSERT_EQ(fresh.size(), 10u);
  EXPECT_EQ(SignInWith("alice@example.com", {{"recovery_code", old_codes[0]}}).status, 401);
  EXPECT_EQ(SignInWith("alice@example.com", {{"recovery_code", fresh[0]}}).status, 201);
  EXPECT_EQ(LastAudit("two_factor.recovery_codes").detail,
            R"({"second_factor":"totp","recovery_codes":10})");
}

TEST_F(TwoFactorApiTest, AnAdminResetsAnotherUsersTwoFactorButNotTheirOwn) {
  std::string secret = Enroll(alice_.api_key);
  testing::TestUser bob = AddUser("bob@example.com");
  EXPECT_EQ(Send("POST", "/api/v1/users/" + alice_.id + "/two-factor/reset", bob.api_key).status,
            403);
  net::Response reset = AsAdmin("POST", "/api/v1/users/" + alice_.id + "/two-factor/reset");
  ASSERT_EQ(reset.status, 200) << reset.body;
  EXPECT_EQ(Body(reset).at("two_factor_enabled"), false);
  EXPECT_EQ(LastAudit("two_factor.reset").detail,
            R"({"email":"alice@example.com","was_enabled":true})");
  EXPECT_EQ(SignInWith("alice@example.com").status, 201);

  Enroll(admin_key_);
  net::Response own = AsAdmin("POST", "/api/v1/users/" + AdminId() + "/two-factor/reset");
  EXPECT_EQ(own.status, 409);
  EXPECT_NE(ErrorMessage(own).find("two-factor/disable"), std::string::npos);
}

TEST_F(TwoFactorApiTest, OnlyAnAdminWithTwoFactorMayRequireIt) {
  json::object shown = Body(Send("GET", "/api/v1/settings", alice_.api_key));
  EXPECT_EQ(shown.at("require_two_factor"), false);
  EXPECT_FALSE(shown.contains("without_two_factor"));  // who lacks it is for admins
  EXPECT_EQ(Send("PUT", "/api/v1/settings", alice_.api_key, R"({"require_two_factor":true})").status,
            403);
  net::Response unenrolled = RequireTwoFactor(true);
  EXPECT_EQ(unenrolled.status, 409);
  EXPECT_NE(ErrorMessage(unenrolled).find("for yourself first"), std::string::npos);
  for (std::string bad : {R"({"require_two_factor":"yes"})", R"({"require_two_factor":1})", "{}",
                          R"({"require_two_factor":true,"x":1})", "[]"}) {
    EXPECT_EQ(AsAdmin("PUT", "/api/v1/settings", bad).status, 400) << bad;
  }

  Enroll(admin_key_);
  CreateConnection(alice_.api_key, "alice-cluster");
  net::Response on = RequireTwoFactor(true);
  ASSERT_EQ(on.status, 200) << on.body;
  json::object settings = Body(on);
  EXPECT_EQ(settings.at("require_two_factor"), true);
  json::object without = Object(settings, "without_two_factor");
  EXPECT_EQ(without.at("users"), 1);
  EXPECT_EQ(without.at("emails"), json::value(json::array{"alice@example.com"}));
  EXPECT_EQ(without.at("connections"), 1);
  AuditEvent changed = LastAudit("settings.update");
  EXPECT_EQ(changed.detail, R"({"require_two_factor":true,"previous":false})");
  EXPECT_EQ(changed.actor_id, AdminId());
  // Setting what is already set changes nothing and writes nothing.
  size_t events = AllAudit().size();
  EXPECT_EQ(RequireTwoFactor(true).status, 200);
  EXPECT_EQ(AllAudit().size(), events);
}

TEST_F(TwoFactorApiTest, WhileRequiredAUserWithoutItCanOnlyEnrolThenEverythingWorks) {
  Enroll(admin_key_);
  ASSERT_EQ(RequireTwoFactor(true).status, 200);

  net::Response signed_in = SignInWith("alice@example.com");
  ASSERT_EQ(signed_in.status, 201) << signed_in.body;
  EXPECT_EQ(Body(signed_in).at("two_factor_enrollment_required"), true);
  EXPECT_NE(LastAudit("session.create").detail.find(R"("two_factor_enrollment_required":true)"),
            std::string::npos);
  std::string session = Text(Body(signed_in), "token");
  for (const std::string& credential : {session, alice_.api_key}) {
    net::Response refused = Send("GET", "/api/v1/audit", credential);
    EXPECT_EQ(refused.status, 403);
    EXPECT_EQ(ErrorCode(refused), "two_factor_enrollment_required");
    EXPECT_NE(ErrorMessage(refused).find("uplink two-factor enroll"), std::string::npos);
    EXPECT_EQ(ErrorCode(Send("POST", "/api/v1/connections", credential,
                             R"({"agent_name":"a","cluster_name":"held"})")),
              "two_factor_enrollment_required");
    EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/api-keys", credential)),
              "two_factor_enrollment_required");
    // Reading their own connections stays open: that is where they see their agents refused.
    EXPECT_EQ(Send("GET", "/api/v1/connections", credential).status, 200);
    json::object me = Body(Send("GET", "/api/v1/me", credential));
    EXPECT_EQ(me.at("two_factor_enrollment_required"), true);
    EXPECT_EQ(Body(Send("GET", "/api/v1/two-factor", credential)).at("enrollment_required"), true);
    EXPECT_EQ(Send("GET", "/api/v1/settings", credential).status, 200);
  }
  // The enrolment itself, with the session that may do nothing else.
  Confirm(session);
  std::string secret = Enroll(session);
  EXPECT_EQ(Send("GET", "/api/v1/audit", session).status, 200);
  EXPECT_EQ(Send("GET", "/api/v1/api-keys", alice_.api_key).status, 200);
  EXPECT_EQ(Body(Send("GET", "/api/v1/me", alice_.api_key)).at("two_factor_enrollment_required"),
            false);
  // Turning it off while it is required confines the user again.
  ASSERT_EQ(Post("/api/v1/two-factor/disable", session,
                 {{"password", kPassword}, {"code", CodeFor(secret)}})
                .status,
            200);
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/audit", session)), "two_factor_enrollment_required");
  // Turning the requirement off frees everyone.
  ASSERT_EQ(RequireTwoFactor(false).status, 200);
  EXPECT_EQ(Send("GET", "/api/v1/audit", session).status, 200);
}

TEST_F(TwoFactorApiTest, WhileRequiredTheAgentsOfAUserWithoutItAreRefusedUntilTheyEnrol) {
  json::object connection = CreateConnection(alice_.api_key, "alice-gpu");
  std::string token = Text(connection, "token");
  std::string id = Text(connection, "id");
  ASSERT_EQ(ReportFrom(token, "uid-a").status, 200);
  Enroll(admin_key_);
  ASSERT_EQ(RequireTwoFactor(true).status, 200);

  net::Response report = ReportFrom(token, "uid-a");
  EXPECT_EQ(report.status, 403);
  EXPECT_EQ(ErrorCode(report), "owner_needs_two_factor");
  EXPECT_NE(ErrorMessage(report).find("two-factor"), std::string::npos);
  for (const char* path : {"/api/v1/agent/whoami"}) {
    net::Request request;
    request.method = "GET";
    request.target = path;
    request.headers.Set("Authorization", "Bearer " + token);
    request.remote_address = testing::kClientAddress;
    net::Response refused = testing::Call(api_->router(), std::move(request));
    EXPECT_EQ(refused.status, 403) << path;
    EXPECT_EQ(ErrorCode(refused), "owner_needs_two_factor") << path;
  }
  AuditEvent audited = LastAudit("connection.token_refused");
  EXPECT_EQ(audited.detail, R"({"reason":"owner_needs_two_factor"})");
  EXPECT_EQ(audited.target_id, id);
  EXPECT_EQ(audited.owner_id, alice_.id);
  // Shown on the connection to its owner, whose credentials may still read their connections
  // (and do nothing else with them) to see why.
  EXPECT_EQ(ShowConnection(alice_.api_key, id).at("owner_needs_two_factor"), true);
  json::object listed = Body(Send("GET", "/api/v1/connections", alice_.api_key));
  EXPECT_EQ(listed.at("connections").as_array().at(0).at("owner_needs_two_factor"), true);
  EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/connections/" + id + "/nodes", alice_.api_key)),
            "two_factor_enrollment_required");
  net::Response kubectl = AsAdmin("POST", "/api/v1/connections/" + id + "/kubectl",
                                  R"({"argv":["kubectl","get","nodes"]})");
  EXPECT_EQ(kubectl.status, 409);
  EXPECT_EQ(ErrorCode(kubectl), "owner_needs_two_factor");
  // Not a guess at a credential: a refused agent never locks out its address.
  for (int i = 0; i < 40; ++i) ReportFrom(token, "uid-a");
  EXPECT_EQ(ErrorCode(ReportFrom(token, "uid-a")), "owner_needs_two_factor");

  // The owner enrols (with their API key, which may do only that now): the agent works again.
  Enroll(alice_.api_key);
  EXPECT_EQ(ReportFrom(token, "uid-a").status, 200);
  EXPECT_EQ(ShowConnection(alice_.api_key, id).at("owner_needs_two_factor"), false);
}

TEST_F(TwoFactorApiTest, TheAuditLogFiltersByTheNewActions) {
  Enroll(alice_.api_key);
  for (const char* action : {"two_factor.enroll", "two_factor.enable"}) {
    net::Response listed =
        Send("GET", std::string("/api/v1/audit?action=") + action, alice_.api_key);
    ASSERT_EQ(listed.status, 200) << listed.body;
    EXPECT_EQ(Body(listed).at("events").as_array().size(), 1u) << action;
  }
}

}  // namespace
}  // namespace uplink::console
