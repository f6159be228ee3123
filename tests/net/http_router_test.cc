#include <gtest/gtest.h>

#include <optional>

#include "net/http.h"
#include "net/router.h"

namespace uplink::net {
namespace {

// Dispatches synchronously and returns what the router replied.
Response DispatchNow(const Router& router, std::string method, std::string target) {
  Request request;
  request.method = std::move(method);
  request.target = std::move(target);
  std::optional<Response> reply;
  router.Dispatch(std::move(request), [&](Response response) { reply = std::move(response); });
  EXPECT_TRUE(reply.has_value());
  return reply.value_or(Response{});
}

TEST(Router, CapturesNamedPathSegments) {
  Router router;
  router.Add("GET", "/api/v1/connections/{id}/tokens/{token}",
             [](const Request&, const PathParams& params) {
               return Response::Text(200, params.at("id") + "," + params.at("token"));
             });
  Response response = DispatchNow(router, "GET", "/api/v1/connections/7/tokens/abc?x=1");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "7,abc");
}

TEST(Router, UnknownPathGets404) {
  Router router;
  router.Add("GET", "/a",
             [](const Request&, const PathParams&) { return Response::Text(200, ""); });
  EXPECT_EQ(DispatchNow(router, "GET", "/b").status, 404);
  EXPECT_EQ(DispatchNow(router, "GET", "/a/extra").status, 404);
}

TEST(Router, KnownPathWithWrongMethodGets405ListingAllowedMethods) {
  Router router;
  auto ok = [](const Request&, const PathParams&) { return Response::Text(200, ""); };
  router.Add("GET", "/items/{id}", ok);
  router.Add("DELETE", "/items/{id}", ok);
  Response response = DispatchNow(router, "POST", "/items/3");
  EXPECT_EQ(response.status, 405);
  EXPECT_EQ(response.headers.Get("Allow"), "GET, DELETE");
}

TEST(Router, LiteralRouteWinsOverAnEarlierCapture) {
  Router router;
  router.Add("GET", "/items/{id}", [](const Request&, const PathParams& params) {
    return Response::Text(200, "item " + params.at("id"));
  });
  router.Add("GET", "/items/new",
             [](const Request&, const PathParams&) { return Response::Text(200, "form"); });
  EXPECT_EQ(DispatchNow(router, "GET", "/items/new").body, "form");
  EXPECT_EQ(DispatchNow(router, "GET", "/items//new/").body, "form");
  EXPECT_EQ(DispatchNow(router, "GET", "/items/7").body, "item 7");
}

TEST(Router, LiteralPathWithAnotherMethodFallsBackToACapture) {
  Router router;
  router.Add("POST", "/items/redeem",
             [](const Request&, const PathParams&) { return Response::Text(201, "redeemed"); });
  router.Add("GET", "/items/{id}", [](const Request&, const PathParams& params) {
    return Response::Text(200, "item " + params.at("id"));
  });
  EXPECT_EQ(DispatchNow(router, "GET", "/items/redeem").body, "item redeem");
  EXPECT_EQ(DispatchNow(router, "POST", "/items/redeem").status, 201);
  Response refused = DispatchNow(router, "DELETE", "/items/redeem");
  EXPECT_EQ(refused.status, 405);
  EXPECT_EQ(refused.headers.Get("Allow"), "POST, GET");
}

TEST(Router, EmptySegmentsAndEncodedLettersReachTheLiteralRoute) {
  Router router;
  router.Add("GET", "/healthz",
             [](const Request&, const PathParams&) { return Response::Text(200, "ok"); });
  router.Add("GET", "/", [](const Request&, const PathParams&) { return Response::Text(200, "root"); });
  EXPECT_EQ(DispatchNow(router, "GET", "//healthz").body, "ok");
  EXPECT_EQ(DispatchNow(router, "GET", "/health%7a").body, "ok");
  EXPECT_EQ(DispatchNow(router, "GET", "/").body, "root");
  EXPECT_EQ(DispatchNow(router, "GET", "").body, "root");
  EXPECT_EQ(DispatchNow(router, "GET", "/healthz/x").status, 404);
}

TEST(Router, HeadIsServedByTheGetRoute) {
  Router router;
  router.Add("GET", "/status", [](const Request& request, const PathParams&) {
    return Response::Text(200, "method=" + request.method);
  });
  Response response = DispatchNow(router, "HEAD", "/status");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "method=HEAD");
}

TEST(Router, CustomNotFoundHandlerIsUsed) {
  Router router;
  router.SetNotFound([](const Request& request) { return Response::Json(404, "{\"error\":1}"); });
  Response response = DispatchNow(router, "GET", "/nothing");
  EXPECT_EQ(response.status, 404);
  EXPECT_EQ(response.headers.Get("content-type"), "application/json");
}

TEST(Router, AsyncRouteReceivesTheReplyToCallLater) {
  Router router;
  Reply saved;
  router.AddAsync("GET", "/poll", [&](const Request&, const PathParams&, Reply reply) {
    saved = std::move(reply);
  });
  Request request;
  request.target = "/poll";
  std::optional<Response> answer;
  router.Dispatch(request, [&](Response response) { answer = std::move(response); });
  EXPECT_FALSE(answer.has_value());
  saved(Response::Text(200, "later"));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->body, "later");
}

TEST(Headers, NamesAreCaseInsensitive) {
  Headers headers;
  headers.Add("Content-Type", "text/plain");
  EXPECT_EQ(headers.Get("content-type"), "text/plain");
  EXPECT_EQ(headers.Get("CONTENT-TYPE"), "text/plain");
  EXPECT_FALSE(headers.Get("Content-Length").has_value());
}

TEST(Headers, SetReplacesEveryFieldOfThatName) {
  Headers headers;
  headers.Add("Accept", "a");
  headers.Add("accept", "b");
  headers.Add("X-Other", "c");
  headers.Set("ACCEPT", "d");
  ASSERT_EQ(headers.all().size(), 2u);
  EXPECT_EQ(headers.Get("accept"), "d");
  headers.Remove("x-other");
  EXPECT_EQ(headers.all().size(), 1u);
}

TEST(Request, PathIsDecodedWithoutTheQuery) {
  Request request;
  request.target = "/files/a%20b%2Fc?x=1";
  EXPECT_EQ(request.Path(), "/files/a b/c");
}

TEST(Request, QueryParametersAreDecodedInOrder) {
  Request request;
  request.target = "/search?q=a+b%26c&empty=&flag&q=second";
  auto params = request.QueryParams();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0], (std::pair<std::string, std::string>("q", "a b&c")));
  EXPECT_EQ(params[1], (std::pair<std::string, std::string>("empty", "")));
  EXPECT_EQ(params[2], (std::pair<std::string, std::string>("flag", "")));
  EXPECT_EQ(request.Query("q"), "a b&c");
  EXPECT_FALSE(request.Query("missing").has_value());
}

TEST(Request, QueryParametersWithMalformedEscapesAreDropped) {
  Request request;
  request.target = "/x?bad=%zz&short=%4&good=%41";
  auto params = request.QueryParams();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0].first, "good");
  EXPECT_EQ(params[0].second, "A");
}

TEST(PercentDecode, RejectsMalformedEscapes) {
  EXPECT_FALSE(PercentDecode("%", false).has_value());
  EXPECT_FALSE(PercentDecode("abc%2", false).has_value());
  EXPECT_FALSE(PercentDecode("%g0", false).has_value());
  EXPECT_EQ(PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(PercentDecode("a+b", true), "a b");
}

TEST(PercentDecode, DecodesEscapesBetweenAndAtTheEndsOfPlainRuns) {
  EXPECT_EQ(PercentDecode("", false), "");
  EXPECT_EQ(PercentDecode("/api/v1/agent/whoami", false), "/api/v1/agent/whoami");
  EXPECT_EQ(PercentDecode("%41%42", false), "AB");
  EXPECT_EQ(PercentDecode("/a%2Fb%20c+d", false), "/a/b c+d");
  EXPECT_EQ(PercentDecode("+a%2b+", true), " a+ ");
  EXPECT_EQ(PercentDecode("%00x", false), std::string("\0x", 2));
}

TEST(PercentEncode, EscapesAllButUnreservedAndRoundTrips) {
  const std::string text = "a b/c?d=é~._-";
  std::string encoded = PercentEncode(text);
  EXPECT_EQ(encoded, "a%20b%2Fc%3Fd%3D%C3%A9~._-");
  EXPECT_EQ(PercentDecode(encoded, false), text);
}

TEST(ReasonPhrase, KnowsCommonStatusCodes) {
  EXPECT_EQ(ReasonPhrase(404), "Not Found");
  EXPECT_EQ(ReasonPhrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(ReasonPhrase(799), "");
}

}  // namespace
}  // namespace uplink::net
