#include "agent/console_client.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/gzip.h"
#include "support/fake_http.h"
#include "support/process.h"

namespace uplink::agent {
namespace {

using testing::FakeHttp;

class ConsoleClientTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::WriteFileOrDie(token_file_, "agt_first\n"); }

  std::unique_ptr<ConsoleClient> ClientFor(const FakeHttp& console,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    ConsoleClientOptions options;
    options.base_url = console.url();
    options.token_file = token_file_;
    options.request_timeout = timeout;
    auto client = ConsoleClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  testing::TempDir dir_;
  std::string token_file_ = dir_.File("token");
  FakeClock clock_;
};

net::Response Accepted() {
  return net::Response::Json(200, R"({"accepted":true,"connection_id":"c1","report_interval_seconds":60})");
}

TEST(ConsoleUrl, HttpsIsRequiredExceptForALoopbackConsole) {
  EXPECT_TRUE(ValidateConsoleUrl("https://console.example").ok());
  EXPECT_TRUE(ValidateConsoleUrl("http://127.0.0.1:8080").ok());
  EXPECT_TRUE(ValidateConsoleUrl("http://localhost:8080").ok());
  Status remote = ValidateConsoleUrl("http://console.example");
  ASSERT_FALSE(remote.ok());
  EXPECT_NE(remote.message().find("use https"), std::string::npos);
  EXPECT_FALSE(ValidateConsoleUrl("console.example").ok());
  EXPECT_FALSE(ValidateConsoleUrl("https://user:pw@console.example").ok());
  ConsoleClientOptions remote_options;
  remote_options.base_url = "http://10.1.2.3";
  remote_options.token_file = "t";
  EXPECT_FALSE(ConsoleClient::Create(remote_options).ok());
}

TEST(ConsoleUrl, ARejectedUrlIsNeverQuotedBackOnlyItsOrigin) {
  for (const char* url : {"https://agent:hunter2@console.example:8443/",
                          "https://console.example/?token=agt_secretsecret",
                          "https://console.example/#agt_secretsecret",
                          "http://console.example:8080/agt_secretsecret",
                          "not a url agt_secretsecret"}) {
    Status status = ValidateConsoleUrl(url);
    ASSERT_FALSE(status.ok()) << url;
    for (const char* secret : {"hunter2", "agent:", "agt_secretsecret", "token="}) {
      EXPECT_EQ(status.message().find(secret), std::string::npos) << status.message();
    }
  }
  Status userinfo = ValidateConsoleUrl("https://agent:hunter2@console.example:8443/");
  EXPECT_NE(userinfo.message().find("https://console.example:8443"), std::string::npos)
      << userinfo.message();
  EXPECT_NE(userinfo.message().find("user info"), std::string::npos) << userinfo.message();
  Status plain = ValidateConsoleUrl("http://console.example:8080/agt_secretsecret");
  EXPECT_NE(plain.message().find("http://console.example:8080 uses plain http"),
            std::string::npos) << plain.message();
}

TEST(ConsoleToken, TheTokenIsReadIntoASecretThatPrintsRedacted) {
  testing::TempDir dir;
  std::string path = dir.File("token");
  testing::WriteFileOrDie(path, "  agt_secret_value\n");
  Result<Secret> token = ReadConsoleToken(path);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->Reveal(), "agt_secret_value");
  std::ostringstream printed;
  printed << *token;
  EXPECT_EQ(printed.str(), "[redacted]");
}

TEST_F(ConsoleClientTest, PostsJsonWithTheTokenAndTheAgentUserAgent) {
  FakeHttp console([](const net::Request&) { return Accepted(); });
  ConsoleReply reply = ClientFor(console)->PostJson("/api/v1/agent/inventory", json::object{{"a", 1}});
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();
  EXPECT_EQ(reply.http_status, 200);
  EXPECT_EQ(reply.body.at("connection_id"), "c1");
  auto requests = console.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].Path(), "/api/v1/agent/inventory");
  EXPECT_EQ(requests[0].headers.Get("Authorization").value_or(""), "Bearer agt_first");
  EXPECT_EQ(requests[0].headers.Get("User-Agent").value_or(""),
            "uplink-agent/" UPLINK_VERSION " (inventory)");
  EXPECT_EQ(requests[0].headers.Get("Content-Type").value_or(""), "application/json");
  EXPECT_FALSE(requests[0].headers.Get("Content-Encoding").has_value());
  EXPECT_EQ(requests[0].body, R"({"a":1})");
}

TEST_F(ConsoleClientTest, TheClusterIsNamedOnceKnownFromTheRoleOrFromAFile) {
  FakeHttp console([](const net::Request&) { return Accepted(); });
  const std::string uid_file = dir_.File("clusterUID");
  ConsoleClientOptions options;
  options.base_url = console.url();
  options.token_file = token_file_;
  options.cluster_uid_file = uid_file;
  auto client = std::move(ConsoleClient::Create(options).value());
  auto sent = [&]() -> std::optional<std::string> {
    auto requests = console.requests();
    auto header = requests.back().headers.Get("Uplink-Cluster-UID");
    return header ? std::optional<std::string>(*header) : std::nullopt;
  };
  // No file yet (the kubelet has not projected the key): no identity, the call still goes.
  ASSERT_TRUE(client->PostJson("/p", json::object{}).status.ok());
  EXPECT_FALSE(sent().has_value());
  testing::WriteFileOrDie(uid_file, "5f0c7a8e-8f3c-4a43-9d8f-0b4b5a6c7d8e\n");
  ASSERT_TRUE(client->PostJson("/p", json::object{}).status.ok());
  EXPECT_EQ(sent().value_or(""), "5f0c7a8e-8f3c-4a43-9d8f-0b4b5a6c7d8e");
  // What a file cannot be a UID of is not sent: a header must not carry it.
  for (const std::string& bad : {std::string("two words"), std::string(129, 'u'),
                                 std::string("uid\r\nX-Injected: 1"), std::string("")}) {
    testing::WriteFileOrDie(uid_file, bad);
    ASSERT_TRUE(client->PostJson("/p", json::object{}).status.ok());
    EXPECT_FALSE(sent().has_value()) << bad;
  }
  // What the role read itself wins over the file.
  client->SetClusterUid("uid-from-kubernetes");
  ASSERT_TRUE(client->PostJson("/p", json::object{}).status.ok());
  EXPECT_EQ(sent().value_or(""), "uid-from-kubernetes");
}

TEST_F(ConsoleClientTest, TheTokensExpiryComesFromTheRepliesAndIsSharedBetweenClients) {
  FakeHttp console([](const net::Request&) {
    return net::Response::Json(200, R"({"stream":"s","acked_through":1,)"
                                    R"("expires_at":"2027-04-15T08:00:00Z"})");
  });
  auto expiry = std::make_shared<TokenExpiry>();
  ConsoleClientOptions options;
  options.base_url = console.url();
  options.token_file = token_file_;
  options.token_expiry = expiry;
  auto first = std::move(ConsoleClient::Create(options, clock_).value());
  auto second = std::move(ConsoleClient::Create(options, clock_).value());
  EXPECT_FALSE(second->token_expires_at().has_value());
  ASSERT_TRUE(first->PostJson("/p", json::object{}).status.ok());
  EXPECT_EQ(second->token_expires_at(), ParseRfc3339("2027-04-15T08:00:00Z").value());
  EXPECT_EQ(expiry->expires_at(), second->token_expires_at());
}

TEST(TokenExpiryTest, WarnsFromFourteenDaysBeforeOncePerDayCount) {
  std::vector<std::string> lines;
  log::SetSinkForTesting([&](std::string_view line) { lines.emplace_back(line); });
  const WallTime expires = ParseRfc3339("2027-02-01T00:00:00Z").value();
  TokenExpiry expiry;
  expiry.Update(expires, expires - std::chrono::days(15));
  expiry.Update(expires, expires - std::chrono::days(14) - std::chrono::seconds(1));
  EXPECT_TRUE(lines.empty()) << "warned more than 14 days before";
  expiry.Update(expires, expires - std::chrono::days(14));
  expiry.Update(expires, expires - std::chrono::days(13) - std::chrono::hours(1));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("expires in 14 days"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("2027-02-01T00:00:00Z"), std::string::npos) << lines[0];
  expiry.Update(expires, expires - std::chrono::hours(5));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("expires in 1 day;"), std::string::npos) << lines[1];
  // Renewed: quiet again, and the new expiry is what it says.
  const WallTime renewed = expires + std::chrono::days(90);
  expiry.Update(renewed, expires - std::chrono::hours(4));
  EXPECT_EQ(lines.size(), 2u);
  EXPECT_EQ(expiry.expires_at(), renewed);
  log::SetSinkForTesting(nullptr);
}

TEST_F(ConsoleClientTest, ARotatedTokenFileTakesEffectOnTheNextRequest) {
  FakeHttp console([](const net::Request&) { return Accepted(); });
  auto client = ClientFor(console);
  ASSERT_TRUE(client->PostJson("/p", json::object{}).status.ok());
  testing::WriteFileOrDie(token_file_, "agt_rotated");
  ASSERT_TRUE(client->PostJson("/p", json::object{}).status.ok());
  auto requests = console.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].headers.Get("Authorization").value_or(""), "Bearer agt_rotated");
}

TEST_F(ConsoleClientTest, AnEmptyOrMissingTokenFileIsAClearErrorAndNothingIsSent) {
  FakeHttp console([](const net::Request&) { return Accepted(); });
  auto client = ClientFor(console);
  testing::WriteFileOrDie(token_file_, "  \n");
  ConsoleReply empty = client->PostJson("/p", json::object{});
  ASSERT_FALSE(empty.status.ok());
  EXPECT_NE(empty.status.message().find("is empty"), std::string::npos);
  ::unlink(token_file_.c_str());
  ConsoleReply missing = client->PostJson("/p", json::object{});
  ASSERT_FALSE(missing.status.ok());
  EXPECT_NE(missing.status.message().find("console token file"), std::string::npos);
  EXPECT_EQ(console.request_count(), 0u);
}

TEST_F(ConsoleClientTest, BodiesOver64KiBAreGzipped) {
  FakeHttp console([](const net::Request&) { return Accepted(); });
  json::object big{{"padding", std::string(100 * 1024, 'x')}};
  ASSERT_TRUE(ClientFor(console)->PostJson("/p", big).status.ok());
  auto requests = console.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].headers.Get("Content-Encoding").value_or(""), "gzip");
  auto plain = GzipDecompress(requests[0].body, 1 << 20);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(ParseJson(*plain).value(), json::value(big));
}

TEST_F(ConsoleClientTest, UploadsAreGzippedWhateverTheirSize) {
  FakeHttp console([](const net::Request&) { return Accepted(); });
  json::object small{{"a", 1}};
  ASSERT_TRUE(ClientFor(console)->PostJson("/p", small, Compression::kAlways).status.ok());
  auto requests = console.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].headers.Get("Content-Encoding").value_or(""), "gzip");
  auto plain = GzipDecompress(requests[0].body, 1 << 20);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, R"({"a":1})");
}

TEST_F(ConsoleClientTest, TheErrorObjectOfAnErrorReplyIsKeptForItsExtraFields) {
  FakeHttp console([](const net::Request&) {
    return net::Response::Json(422, R"({"error":{"code":"invalid_record","message":"records[3].payload must be a JSON object","sequence":104}})");
  });
  ConsoleReply reply = ClientFor(console)->PostJson("/p", json::object{});
  EXPECT_EQ(reply.http_status, 422);
  EXPECT_EQ(reply.error_code, "invalid_record");
  ASSERT_TRUE(reply.error.has_value());
  EXPECT_EQ(reply.error->sequence, 104);
  EXPECT_TRUE(reply.body.is_null());

  // A reply without the protocol's error object leaves it null.
  console.SetHandler([](const net::Request&) { return net::Response::Json(422, R"({"error":"x"})"); });
  EXPECT_FALSE(ClientFor(console)->PostJson("/p", json::object{}).error.has_value());
}

TEST_F(ConsoleClientTest, ARedirectIsRefusedAndTheTargetNeverSeesTheToken) {
  FakeHttp elsewhere([](const net::Request&) { return Accepted(); });
  FakeHttp console([&](const net::Request&) {
    net::Response response = net::Response::Text(307, "");
    response.headers.Set("Location", elsewhere.url() + "/api/v1/agent/inventory");
    return response;
  });
  ConsoleReply reply = ClientFor(console)->PostJson("/api/v1/agent/inventory", json::object{});
  ASSERT_FALSE(reply.status.ok());
  EXPECT_EQ(reply.http_status, 307);
  EXPECT_NE(reply.status.message().find("307"), std::string::npos);
  EXPECT_NE(reply.status.message().find("redirects are refused"), std::string::npos);
  EXPECT_EQ(elsewhere.request_count(), 0u);
}

TEST_F(ConsoleClientTest, ErrorBodiesGiveTheProtocolCodeAndAShortMessage) {
  FakeHttp console([](const net::Request&) {
    return net::Response::Json(
        401, R"({"error":{"code":"revoked","message":"this connection's token was revoked"}})");
  });
  ConsoleReply reply = ClientFor(console)->PostJson("/p", json::object{});
  EXPECT_EQ(reply.status.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(reply.error_code, "revoked");
  EXPECT_NE(reply.status.message().find("401 Unauthorized revoked: this connection's token was revoked"),
            std::string::npos) << reply.status.message();
}

TEST_F(ConsoleClientTest, AnErrorBodyThatIsNotTheProtocolsIsNotEchoed) {
  FakeHttp console([](const net::Request&) {
    return net::Response::Text(502, "<html>Bad gateway BODY-MARKER</html>");
  });
  ConsoleReply reply = ClientFor(console)->PostJson("/p", json::object{});
  EXPECT_EQ(reply.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(reply.status.message().find("BODY-MARKER"), std::string::npos);
  EXPECT_NE(reply.status.message().find("502"), std::string::npos);
}

TEST_F(ConsoleClientTest, RetryAfterIsExposedInSecondsOrAsADate) {
  FakeHttp console([](const net::Request&) {
    net::Response response = net::Response::Json(429, R"({"error":{"code":"rate_limited","message":"slow down"}})");
    response.headers.Set("Retry-After", "42");
    return response;
  });
  ConsoleReply reply = ClientFor(console)->PostJson("/p", json::object{});
  EXPECT_EQ(reply.http_status, 429);
  EXPECT_EQ(reply.error_code, "rate_limited");
  ASSERT_TRUE(reply.retry_after.has_value());
  EXPECT_EQ(*reply.retry_after, std::chrono::seconds(42));
}

TEST_F(ConsoleClientTest, AGarbageSuccessBodyIsAFailure) {
  FakeHttp console([](const net::Request&) { return net::Response::Text(200, "<html>ok</html>"); });
  ConsoleReply reply = ClientFor(console)->PostJson("/p", json::object{});
  ASSERT_FALSE(reply.status.ok());
  EXPECT_NE(reply.status.message().find("not a JSON object"), std::string::npos);
}

TEST_F(ConsoleClientTest, AConsoleThatNeverAnswersTimesOut) {
  FakeHttp console;
  console.SetSilent(true);
  ConsoleReply reply =
      ClientFor(console, std::chrono::milliseconds(300))->PostJson("/p", json::object{});
  ASSERT_FALSE(reply.status.ok());
  EXPECT_EQ(reply.status.code(), StatusCode::kDeadlineExceeded) << reply.status.ToString();
  EXPECT_EQ(reply.http_status, 0);
}

}  // namespace
}  // namespace uplink::agent
