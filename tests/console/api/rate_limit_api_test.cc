// Rate limiting of failed authentication end to end (docs/api.md): the address bucket is
// checked before any credential, the email bucket before the password, the prefix bucket only
// after a failed verification; buckets refill with the clock.
#include <gtest/gtest.h>

#include "api_fixture.h"

namespace uplink::console {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using testing::Body;
using testing::ErrorCode;
using testing::kPassword;
using testing::Text;

constexpr const char* kAttacker = "198.51.100.7";

class RateLimitApiTest : public testing::ApiTest {
 protected:
  // Small buckets: 3 failures per address per minute, 2 per prefix per minute, 2 per email
  // per 15 minutes.
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    options.rate_limits.per_address = RateLimit{3, 3.0 / 60};
    options.rate_limits.per_prefix = RateLimit{2, 2.0 / 60};
    options.rate_limits.per_email = RateLimit{2, 2.0 / 900};
    return options;
  }

  static std::string WrongApiKey(char fill) { return "uk_" + std::string(43, fill); }

  void ExpectRateLimited(const net::Response& response, const std::string& scope) {
    EXPECT_EQ(response.status, 429) << response.body;
    EXPECT_EQ(ErrorCode(response), "rate_limited");
    auto retry_after = response.headers.Get("Retry-After");
    ASSERT_TRUE(retry_after.has_value());
    EXPECT_GE(std::stoi(std::string(*retry_after)), 1);
    EXPECT_NE(testing::ErrorMessage(response).find("wait"), std::string::npos);
    EXPECT_GE(Metric("uplink_console_auth_rate_limited_total", {{"scope", scope}}), 1);
  }

  net::Response SignInFrom(const std::string& address, const std::string& email,
                           const std::string& password) {
    return Send("POST", "/api/v1/sessions", "",
                ToJson(json::object{{"email", email}, {"password", password}}), address);
  }
};

TEST_F(RateLimitApiTest, AnIPv6HostCannotSpreadItsGuessesAcrossItsSlash64) {
  char fill = 'A';  // a new prefix each time, so only the address bucket runs dry
  for (const char* address : {"2001:db8:1:2::a", "2001:db8:1:2::b", "2001:db8:1:2:ffff:ffff:0:1"}) {
    EXPECT_EQ(Send("GET", "/api/v1/me", WrongApiKey(fill++), "", address).status, 401) << address;
  }
  ExpectRateLimited(Send("GET", "/api/v1/me", admin_key_, "", "2001:db8:1:2::c"), "address");
  EXPECT_EQ(Send("GET", "/api/v1/me", admin_key_, "", "2001:db8:1:3::1").status, 200)
      << "the next /64 is someone else";

  // An IPv4-mapped address is the IPv4 address.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Send("GET", "/api/v1/me", WrongApiKey(fill++), "", "::ffff:203.0.113.9").status,
              401);
  }
  EXPECT_EQ(Send("GET", "/api/v1/me", admin_key_, "", "203.0.113.9").status, 429);
}

TEST_F(RateLimitApiTest, RevokedTokensBehindOneAddressDoNotLockOutTheWorkingAgentsThere) {
  // Forgotten agents with revoked tokens and a working one share a NAT address.
  std::string working = Text(CreateConnection(admin_key_, "prod"), "token");
  json::object old = CreateConnection(admin_key_, "old");
  ASSERT_EQ(Send("POST", "/api/v1/connections/" + Text(old, "id") + "/revoke", admin_key_).status,
            200);
  std::string revoked = Text(old, "token");
  std::int64_t audit_before = static_cast<std::int64_t>(AllAudit().size());
  for (int i = 0; i < 10; ++i) {
    int status = Send("GET", "/api/v1/agent/whoami", revoked, "", kAttacker).status;
    EXPECT_EQ(status, i < 2 ? 401 : 429) << i;  // only the prefix bucket (2) runs dry
  }
  EXPECT_EQ(Send("GET", "/api/v1/agent/whoami", working, "", kAttacker).status, 200);
  // Rate-limited refusals are counted, not audited.
  EXPECT_EQ(static_cast<std::int64_t>(AllAudit().size()) - audit_before, 2);
}

TEST_F(RateLimitApiTest, AnAddressThatFailedTooOftenIsRefusedEverythingUntilItsBucketRefills) {
  json::object connection = CreateConnection(admin_key_, "prod");
  std::string token = Text(connection, "token");
  for (char fill : {'A', 'B', 'C'}) {
    EXPECT_EQ(Send("GET", "/api/v1/me", WrongApiKey(fill), "", kAttacker).status, 401);
  }
  // Refused before any credential is looked at: the valid key, an agent token, a sign-in and
  // a handover redeem alike.
  net::Response refused = Send("GET", "/api/v1/me", admin_key_, "", kAttacker);
  ExpectRateLimited(refused, "address");
  EXPECT_EQ(Send("GET", "/api/v1/agent/whoami", token, "", kAttacker).status, 429);
  EXPECT_EQ(SignInFrom(kAttacker, "admin@example.com", kPassword).status, 429);
  EXPECT_EQ(Send("POST", "/api/v1/handovers/redeem", "", R"({"code":"hoc_x"})", kAttacker).status,
            429);
  // Other addresses are not affected.
  EXPECT_EQ(Send("GET", "/api/v1/me", admin_key_).status, 200);
  EXPECT_EQ(ReportFrom(token, "uid-a").status, 200);

  int wait = std::stoi(std::string(*refused.headers.Get("Retry-After")));
  EXPECT_LE(wait, 20);
  clock_.Advance(seconds(wait));
  EXPECT_EQ(Send("GET", "/api/v1/me", admin_key_, "", kAttacker).status, 200);
  // A success does not refill the bucket: one more failure and it is empty again.
  EXPECT_EQ(Send("GET", "/api/v1/me", WrongApiKey('D'), "", kAttacker).status, 401);
  EXPECT_EQ(Send("GET", "/api/v1/me", admin_key_, "", kAttacker).status, 429);
  clock_.Advance(minutes(1));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Send("GET", "/api/v1/me", admin_key_, "", kAttacker).status, 200);
  }
}

TEST_F(RateLimitApiTest, RequestsWithoutACredentialDoNotFillTheBucket) {
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(ErrorCode(Send("GET", "/api/v1/me", "", "", kAttacker)), "missing_token");
  }
  EXPECT_EQ(Send("GET", "/api/v1/me", admin_key_, "", kAttacker).status, 200);
}

TEST_F(RateLimitApiTest, GuessesAtAKnownPrefixNeverLockOutTheTokensHolder) {
  json::object connection = CreateConnection(admin_key_, "prod");
  std::string token = Text(connection, "token");
  std::string prefix = Text(connection, "token_prefix");
  ASSERT_EQ(prefix, token.substr(0, 12));
  // Guesses from many addresses, all with the real token's non-secret prefix.
  auto guess = [&](int i) {
    return Send("GET", "/api/v1/agent/whoami", prefix + std::string(43 - 8, 'a' + i % 26), "",
                "203.0.113." + std::to_string(i));
  };
  EXPECT_EQ(guess(1).status, 401);
  EXPECT_EQ(guess(2).status, 401);
  ExpectRateLimited(guess(3), "prefix");
  ExpectRateLimited(guess(4), "prefix");
  // The holder verifies, so the prefix's bucket is never consulted for it.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(ReportFrom(token, "uid-a").status, 200);
    EXPECT_EQ(Send("GET", "/api/v1/agent/whoami", token).status, 200);
  }
  clock_.Advance(seconds(30));
  EXPECT_EQ(guess(5).status, 401);
}

TEST_F(RateLimitApiTest, AnEmailThatFailedTooOftenIsRefusedBeforeThePasswordIsChecked) {
  ASSERT_EQ(
      AsAdmin("POST", "/api/v1/users",
              ToJson(json::object{
                  {"email", "alice@example.com"}, {"role", "member"}, {"password", kPassword}}))
          .status,
      201);
  ASSERT_EQ(AsAdmin("POST", "/api/v1/users",
                    ToJson(json::object{
                        {"email", "bob@example.com"}, {"role", "member"}, {"password", kPassword}}))
                .status,
            201);
  EXPECT_EQ(SignInFrom("203.0.113.1", "alice@example.com", "wrong password 1").status, 401);
  EXPECT_EQ(SignInFrom("203.0.113.2", "ALICE@example.com", "wrong password 2").status, 401);
  // Even the right password, from a fresh address, waits.
  ExpectRateLimited(SignInFrom("203.0.113.3", "alice@example.com", kPassword), "email");
  EXPECT_EQ(SignInFrom("203.0.113.3", "bob@example.com", kPassword).status, 201);
  // Unknown emails have buckets too, so they cannot be told apart by when 429 starts.
  EXPECT_EQ(SignInFrom("203.0.113.4", "nobody@example.com", "x").status, 401);
  EXPECT_EQ(SignInFrom("203.0.113.5", "nobody@example.com", "x").status, 401);
  ExpectRateLimited(SignInFrom("203.0.113.6", "nobody@example.com", "x"), "email");

  clock_.Advance(minutes(7) + seconds(30));
  EXPECT_EQ(SignInFrom("203.0.113.3", "alice@example.com", kPassword).status, 201);
}

TEST_F(RateLimitApiTest, RefusalsAreLoggedAndCountedWithoutTheCredential) {
  std::string wrong = WrongApiKey('Z');
  Send("GET", "/api/v1/me", wrong, "", kAttacker);
  std::string session = "skt_" + std::string(43, 'Y');
  Send("GET", "/api/v1/me", session, "", kAttacker);
  bool logged = false;
  for (const std::string& line : logs_) {
    EXPECT_EQ(line.find(wrong), std::string::npos);
    EXPECT_EQ(line.find(session), std::string::npos);
    if (line.find("authentication refused") != std::string::npos &&
        line.find("\"lookup_prefix\":\"" + wrong.substr(0, 11) + "\"") != std::string::npos) {
      logged = true;
      EXPECT_NE(line.find("\"reason\":\"invalid_token\""), std::string::npos) << line;
      EXPECT_NE(line.find("\"kind\":\"api_key\""), std::string::npos) << line;
      EXPECT_NE(line.find(std::string("\"remote_address\":\"") + kAttacker), std::string::npos);
    }
  }
  EXPECT_TRUE(logged);
  EXPECT_EQ(Metric("uplink_console_auth_failures_total",
                   {{"kind", "api_key"}, {"reason", "invalid_token"}}),
            1);
  EXPECT_EQ(Metric("uplink_console_auth_failures_total",
                   {{"kind", "session"}, {"reason", "invalid_token"}}),
            1);
}

}  // namespace
}  // namespace uplink::console
