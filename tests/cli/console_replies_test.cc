// What the console answers becomes an exit code and a clear message; hostile or broken
// replies are errors that say what is wrong, never a crash and never garbage on screen.
#include <gtest/gtest.h>

#include "cli/exit_codes.h"
#include "cli_harness.h"

namespace uplink::cli {
namespace {

using testing::Cli;
using testing::ConnectionJson;
using testing::ErrorReply;
using testing::FakeConsole;

constexpr char kKey[] = "uk_KKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKK";

class ConsoleReplies : public ::testing::Test {
 protected:
  void SetUp() override { cli_.env["UPLINK_API_KEY"] = kKey; }
  testing::CliResult List() {
    return cli_.Run({"connections", "list", "--console", console_.url()});
  }

  Cli cli_;
  FakeConsole console_;
};

TEST(ExitCodes, EveryStatusCodeHasItsExitCode) {
  EXPECT_EQ(ExitCodeFor(Status::Ok()), ExitCode::kOk);
  EXPECT_EQ(ExitCodeFor(InvalidArgumentError("x")), ExitCode::kUsage);
  EXPECT_EQ(ExitCodeFor(UnauthenticatedError("x")), ExitCode::kNotAuthenticated);
  EXPECT_EQ(ExitCodeFor(PermissionDeniedError("x")), ExitCode::kForbidden);
  EXPECT_EQ(ExitCodeFor(NotFoundError("x")), ExitCode::kNotFound);
  EXPECT_EQ(ExitCodeFor(ConflictError("x")), ExitCode::kConflict);
  EXPECT_EQ(ExitCodeFor(UnavailableError("x")), ExitCode::kUnreachable);
  EXPECT_EQ(ExitCodeFor(DeadlineExceededError("x")), ExitCode::kUnreachable);
  EXPECT_EQ(ExitCodeFor(ResourceExhaustedError("x")), ExitCode::kRateLimited);
  for (const Status& other : {AlreadyExistsError("x"), FailedPreconditionError("x"),
                              DataLossError("x"), IOError("x"), InternalError("x")}) {
    EXPECT_EQ(ExitCodeFor(other), ExitCode::kFailure) << other.ToString();
  }
}

TEST_F(ConsoleReplies, HttpStatusesMapToTheDocumentedExitCodes) {
  struct Case {
    int http;
    std::string code;
    int exit;
  };
  for (const Case& c : std::vector<Case>{{400, "invalid_request", 1},
                                         {401, "invalid_token", 3},
                                         {403, "forbidden", 4},
                                         {403, "confirmation_required", 4},
                                         {404, "not_found", 5},
                                         {405, "method_not_allowed", 1},
                                         {409, "conflict", 6},
                                         {410, "handover_redeemed", 6},
                                         {415, "unsupported_media_type", 1},
                                         {429, "rate_limited", 8},
                                         {500, "internal", 1},
                                         {503, "unavailable", 1}}) {
    console_.On("GET", "/api/v1/connections", [&](const net::Request&) {
      return ErrorReply(c.http, c.code, "what to do about " + c.code);
    });
    auto r = List();
    EXPECT_EQ(r.code, c.exit) << c.http << " " << c.code << ": " << r.err;
    EXPECT_NE(r.err.find(std::to_string(c.http)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("what to do about " + c.code), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

TEST_F(ConsoleReplies, RateLimitingSaysWhenToRetry) {
  console_.On("GET", "/api/v1/connections", [](const net::Request&) {
    net::Response response = ErrorReply(429, "rate_limited", "too many failed sign-ins");
    response.headers.Set("Retry-After", "17");
    return response;
  });
  auto r = List();
  EXPECT_EQ(r.code, 8);
  EXPECT_NE(r.err.find("retry after 17 seconds"), std::string::npos) << r.err;

  console_.On("GET", "/api/v1/connections", [](const net::Request&) {
    net::Response response = ErrorReply(429, "rate_limited", "slow down");
    response.headers.Set("Retry-After", "Wed, 21 Oct 2037 07:28:00 GMT");
    return response;
  });
  r = List();
  EXPECT_EQ(r.code, 8);
  EXPECT_NE(r.err.find("retry after 'Wed, 21 Oct 2037 07:28:00 GMT'"), std::string::npos) << r.err;
}

TEST_F(ConsoleReplies, ARedirectIsNeverFollowedWithTheCredential) {
  FakeConsole elsewhere;
  console_.On("GET", "/api/v1/connections", [&](const net::Request&) {
    net::Response response = net::Response::Text(302, "");
    response.headers.Set("Location", elsewhere.url() + "/api/v1/connections");
    return response;
  });
  auto r = List();
  EXPECT_EQ(r.code, 7) << r.err;
  EXPECT_NE(r.err.find("redirect"), std::string::npos) << r.err;
  EXPECT_TRUE(elsewhere.requests().empty());
}

TEST_F(ConsoleReplies, AnUnreachableConsoleExits7) {
  auto r = cli_.Run({"connections", "list", "--console",
                     "http://127.0.0.1:" + std::to_string(uplink::testing::FreePort())});
  EXPECT_EQ(r.code, 7);
  EXPECT_NE(r.err.find("cannot reach the console"), std::string::npos) << r.err;
}

TEST_F(ConsoleReplies, BrokenBodiesAreClearErrors) {
  const std::vector<std::pair<int, std::string>> bodies = {
      {200, "<html>proxy login</html>"}, {200, "[]"},
      {200, "\"connections\""},          {200, ""},
      {200, std::string(100, '[')},      {200, R"({"connections": "all of them"})"},
      {200, R"({"connections": null})"},
  };
  for (const auto& [status, body] : bodies) {
    console_.OnJson("GET", "/api/v1/connections", status, body);
    auto r = List();
    EXPECT_EQ(r.code, 1) << body.substr(0, 40) << ": " << r.err;
    EXPECT_NE(r.err.find("not the JSON object uplink expects"), std::string::npos) << r.err;
  }
  // An error status with a body that is not the console's error shape still says the status.
  console_.OnJson("GET", "/api/v1/connections", 502, "<html>Bad Gateway</html>");
  auto r = List();
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("502"), std::string::npos) << r.err;
}

TEST_F(ConsoleReplies, AHugeReplyIsRefusedNotBuffered) {
  console_.OnJson("GET", "/api/v1/connections", 200,
                  R"({"connections":[")" + std::string(5 << 20, 'x') + R"("]})");
  auto r = List();
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("larger than"), std::string::npos) << r.err;
}

TEST_F(ConsoleReplies, WronglyTypedFieldsShowAsDashesNotCrashes) {
  json::array connections{
      json::object{{"id", 7},
                   {"cluster_name", json::array{1, 2}},
                   {"status", json::object{{"a", 1}}},
                   {"totals", "lots"},
                   {"nodes", "none"},
                   {"agents", 3},
                   {"handover", "x"},
                   {"security_events", json::object{}}},
      42,
      nullptr,
      "text",
  };
  console_.OnJson("GET", "/api/v1/connections", 200, json::object{{"connections", connections}});
  auto r = List();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(list)"), std::string::npos) << r.out;

  console_.OnJson("GET", "/api/v1/connections/0123456789abcdef", 200, connections[0].get_object());
  r = cli_.Run({"connections", "show", "0123456789abcdef", "--console", console_.url()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("none reported yet"), std::string::npos) << r.out;
}

TEST_F(ConsoleReplies, ErrorMessagesAreOneBoundedLineWithoutControlCharacters) {
  console_.On("GET", "/api/v1/connections", [](const net::Request&) {
    return ErrorReply(403, "forbidden\x1b[31m",
                      "line one\nline two\x1b]0;title\x07" + std::string(5000, 'm'));
  });
  auto r = List();
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.err.find('\x07'), std::string::npos);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_LT(r.err.size(), 1000u);
}

TEST_F(ConsoleReplies, ATokenThatIsNotAnAgentTokenIsNeverPrinted) {
  for (const std::string& token :
       {std::string("agt_ok\x1b[2J"), std::string("uk_notanagenttoken"), std::string("")}) {
    json::object reply = ConnectionJson("0123456789abcdef", "c");
    reply["token"] = token;
    console_.OnJson("POST", "/api/v1/connections", 201, reply);
    auto r = cli_.Run({"connections", "create", "c", "--console", console_.url()});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("no agent token"), std::string::npos) << r.err;
    if (!token.empty()) {
      EXPECT_EQ(r.out.find(token), std::string::npos);
      EXPECT_EQ(r.err.find(token), std::string::npos);
    }
  }
}

TEST_F(ConsoleReplies, TheCredentialOnlyEverTravelsInTheAuthorizationHeader) {
  console_.OnJson("GET", "/api/v1/connections", 200, json::object{{"connections", json::array{}}});
  ASSERT_EQ(List().code, 0);
  for (const auto& request : console_.requests()) {
    EXPECT_EQ(request.target.find(kKey), std::string::npos);
    EXPECT_EQ(request.body.find(kKey), std::string::npos);
    EXPECT_EQ(request.headers.Get("Authorization").value_or(""), std::string("Bearer ") + kKey);
  }
}

}  // namespace
}  // namespace uplink::cli
