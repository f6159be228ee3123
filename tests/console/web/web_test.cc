// The web console's server side: the session cookie and its parser, CSRF refusals, and the
// pages with their security headers.
#include <gtest/gtest.h>

#include <string>

#include "api_fixture.h"
#include "console/auth/web_session.h"
#include "console/web/web_assets.h"

namespace uplink::console {
namespace {

using testing::ApiTest;
using testing::Body;
using testing::ErrorCode;
using testing::kClientAddress;
using testing::kPassword;
using testing::Text;

// ---- cookie parsing ---------------------------------------------------------------------

TEST(CookieValueTest, FindsTheNamedCookieAmongOthers) {
  EXPECT_EQ(CookieValue("a=1; uplink_session=skt_abc; b=2", "uplink_session"), "skt_abc");
  EXPECT_EQ(CookieValue("uplink_session=skt_abc", "uplink_session"), "skt_abc");
  EXPECT_EQ(CookieValue("  uplink_session = skt_abc  ;", "uplink_session"), "skt_abc");
  EXPECT_EQ(CookieValue("uplink_session=\"skt_abc\"", "uplink_session"), "skt_abc");
  // The first of two wins, as browsers send the most specific path first.
  EXPECT_EQ(CookieValue("uplink_session=one; uplink_session=two", "uplink_session"), "one");
}

TEST(CookieValueTest, NamesMustMatchWhole) {
  EXPECT_EQ(CookieValue("xuplink_session=skt_abc", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session_old=skt_abc", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("UPLINK_SESSION=skt_abc", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("a=1; b=2", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session=x", ""), std::nullopt);
}

TEST(CookieValueTest, HostileInputIsRefused) {
  // Empty or missing values, no '=', and separators only.
  EXPECT_EQ(CookieValue("uplink_session=", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session=\"\"", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue(";;;;=;=", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("=skt_abc", "uplink_session"), std::nullopt);
  // Bytes a cookie value may not have: NUL, controls, blanks inside, quotes, backslash,
  // comma, non-ASCII; and a lone quote.
  EXPECT_EQ(CookieValue(std::string("uplink_session=skt\0abc", 22), "uplink_session"),
            std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session=skt\r\nabc", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session=skt abc", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session=skt\"abc", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session=\"skt_abc", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session=skt\\abc", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session=skt,abc", "uplink_session"), std::nullopt);
  EXPECT_EQ(CookieValue("uplink_session=skt\xc3\xa9", "uplink_session"), std::nullopt);
  // A huge header is not looked at, even when the cookie is at its start.
  std::string huge = "uplink_session=skt_abc; pad=" + std::string(kMaxCookieHeaderBytes, 'x');
  EXPECT_EQ(CookieValue(huge, "uplink_session"), std::nullopt);
  // Many separators are fine and still find the cookie.
  std::string many(4000, ';');
  EXPECT_EQ(CookieValue(many + "uplink_session=skt_abc", "uplink_session"), "skt_abc");
}

TEST(SessionCookieTest, CarriesEveryAttribute) {
  Secret token("skt_secret");
  EXPECT_EQ(SessionCookie(token, std::chrono::seconds(3600), true),
            "uplink_session=skt_secret; Max-Age=3600; Path=/; HttpOnly; SameSite=Strict; Secure");
  EXPECT_EQ(SessionCookie(token, std::chrono::seconds(60), false),
            "uplink_session=skt_secret; Max-Age=60; Path=/; HttpOnly; SameSite=Strict");
  EXPECT_EQ(ExpiredSessionCookie(true),
            "uplink_session=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict; Secure");
}

TEST(CsrfTokenTest, DependsOnTheSessionAndIsComparedWhole) {
  Secret one("skt_one");
  Secret two("skt_two");
  std::string token = CsrfTokenFor(one);
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(token, CsrfTokenFor(one));
  EXPECT_NE(token, CsrfTokenFor(two));
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_TRUE(CsrfTokenMatches(one, token));
  EXPECT_FALSE(CsrfTokenMatches(two, token));
  EXPECT_FALSE(CsrfTokenMatches(one, ""));
  EXPECT_FALSE(CsrfTokenMatches(one, token.substr(0, 63)));
  EXPECT_FALSE(CsrfTokenMatches(one, token + "0"));
  EXPECT_FALSE(CsrfTokenMatches(one, one.Reveal()));
}

TEST(StateChangingTest, OnlyReadsAreExempt) {
  EXPECT_FALSE(IsStateChanging("GET"));
  EXPECT_FALSE(IsStateChanging("HEAD"));
  EXPECT_FALSE(IsStateChanging("OPTIONS"));
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE", "get", ""}) {
    EXPECT_TRUE(IsStateChanging(method)) << method;
  }
}

// ---- sign-in, the cookie as a credential, CSRF ---------------------------------------------

class WebSessionTest : public ApiTest {
 protected:
  struct WebSession {
    std::string cookie;  // "uplink_session=skt_…"
    std::string csrf;
  };

  net::Response SendWithCookie(const std::string& method, const std::string& target,
                               const std::string& cookie, const std::string& csrf,
                               const std::string& body = "") {
    net::Request request;
    request.method = method;
    request.target = target;
    if (!cookie.empty()) request.headers.Set("Cookie", "theme=dark; " + cookie);
    if (!csrf.empty()) request.headers.Set("X-CSRF-Token", csrf);
    if (!body.empty()) request.headers.Set("Content-Type", "application/json");
    request.body = body;
    request.remote_address = kClientAddress;
    return testing::Call(api_->router(), std::move(request));
  }

  net::Response WebSignIn(const std::string& email, const std::string& password = kPassword) {
    return Send("POST", "/api/v1/web/sign-in", "",
                ToJson(json::object{{"email", email}, {"password", password}}));
  }

  WebSession SignInAsAdmin() {
    net::Response response = WebSignIn("admin@example.com");
    EXPECT_EQ(response.status, 201) << response.body;
    std::string set_cookie(response.headers.Get("Set-Cookie").value_or(""));
    std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
    return {cookie, Text(Body(response), "csrf_token")};
  }

  void SetUp() override {
    ApiTest::SetUp();
    // The admin made by init has no password; give it one.
    net::Response response =
        AsAdmin("GET", "/api/v1/me");
    ASSERT_EQ(response.status, 200) << response.body;
    std::string id = Text(testing::Object(Body(response), "user"), "id");
    response = AsAdmin("POST", "/api/v1/users/" + id + "/password",
                       ToJson(json::object{{"password", kPassword}}));
    ASSERT_EQ(response.status, 200) << response.body;
  }
};

TEST_F(WebSessionTest, SignInSetsAnHttpOnlyStrictCookieAndHidesTheToken) {
  net::Response response = WebSignIn("admin@example.com");
  ASSERT_EQ(response.status, 201) << response.body;
  std::string set_cookie(response.headers.Get("Set-Cookie").value_or(""));
  EXPECT_TRUE(set_cookie.starts_with("uplink_session=skt_")) << set_cookie;
  EXPECT_NE(set_cookie.find("; HttpOnly"), std::string::npos);
  EXPECT_NE(set_cookie.find("; SameSite=Strict"), std::string::npos);
  EXPECT_NE(set_cookie.find("; Path=/"), std::string::npos);
  EXPECT_NE(set_cookie.find("; Secure"), std::string::npos);
  EXPECT_EQ(response.headers.Get("Cache-Control"), "no-store");
  json::object body = Body(response);
  EXPECT_EQ(body.if_contains("token"), nullptr);
  EXPECT_EQ(response.body.find("skt_"), std::string::npos) << response.body;
  EXPECT_EQ(Text(body, "csrf_token").size(), 64u);
  EXPECT_EQ(Text(testing::Object(body, "user"), "email"), "admin@example.com");
}

TEST_F(WebSessionTest, WrongPasswordSetsNoCookie) {
  net::Response response = WebSignIn("admin@example.com", "wrong password, surely");
  EXPECT_EQ(response.status, 401);
  EXPECT_EQ(ErrorCode(response), "invalid_credentials");
  EXPECT_FALSE(response.headers.Get("Set-Cookie").has_value());
}

TEST_F(WebSessionTest, TheCookieReadsTheApiAndTheSessionGivesTheCsrfToken) {
  WebSession web = SignInAsAdmin();
  net::Response list = SendWithCookie("GET", "/api/v1/connections", web.cookie, "");
  EXPECT_EQ(list.status, 200) << list.body;
  net::Response session = SendWithCookie("GET", "/api/v1/web/session", web.cookie, "");
  ASSERT_EQ(session.status, 200) << session.body;
  EXPECT_EQ(Text(Body(session), "csrf_token"), web.csrf);
  // A bearer credential has no web session.
  net::Response bearer = AsAdmin("GET", "/api/v1/web/session");
  EXPECT_EQ(bearer.status, 400) << bearer.body;
}

TEST_F(WebSessionTest, StateChangingCallsWithTheCookieNeedTheCsrfToken) {
  WebSession web = SignInAsAdmin();
  const std::string body = R"({"agent_name":"inventory","cluster_name":"gpu-a"})";
  for (const std::string& csrf : {std::string(), std::string("0"), web.csrf.substr(1),
                                  web.csrf + "a", std::string(64, 'f')}) {
    net::Response refused = SendWithCookie("POST", "/api/v1/connections", web.cookie, csrf, body);
    EXPECT_EQ(refused.status, 403) << csrf;
    EXPECT_EQ(ErrorCode(refused), "csrf_failed") << refused.body;
  }
  // Another session's CSRF token does not fit this one.
  WebSession other = SignInAsAdmin();
  net::Response crossed =
      SendWithCookie("PUT", "/api/v1/connections/x/namespaces", web.cookie, other.csrf, "{}");
  EXPECT_EQ(ErrorCode(crossed), "csrf_failed");
  // With the right token the call goes on to its own checks: a sensitive call wants the
  // password confirmed first.
  net::Response unconfirmed = SendWithCookie("POST", "/api/v1/connections", web.cookie, web.csrf,
                                             body);
  EXPECT_EQ(ErrorCode(unconfirmed), "confirmation_required") << unconfirmed.body;
  net::Response confirmed =
      SendWithCookie("POST", "/api/v1/session/confirm", web.cookie, web.csrf,
                     ToJson(json::object{{"password", kPassword}}));
  ASSERT_EQ(confirmed.status, 200) << confirmed.body;
  net::Response created =
      SendWithCookie("POST", "/api/v1/connections", web.cookie, web.csrf, body);
  EXPECT_EQ(created.status, 201) << created.body;
  // Bearer credentials need no CSRF token.
  net::Response bearer = AsAdmin("POST", "/api/v1/connections",
                                 R"({"agent_name":"inventory","cluster_name":"gpu-b"})");
  EXPECT_EQ(bearer.status, 201) << bearer.body;
}

TEST_F(WebSessionTest, ABearerHeaderWinsOverTheCookie) {
  WebSession web = SignInAsAdmin();
  net::Request request;
  request.method = "POST";
  request.target = "/api/v1/connections";
  request.headers.Set("Authorization", "Bearer " + admin_key_);
  request.headers.Set("Cookie", web.cookie);
  request.headers.Set("Content-Type", "application/json");
  request.body = R"({"agent_name":"inventory","cluster_name":"gpu-c"})";
  request.remote_address = kClientAddress;
  net::Response response = testing::Call(api_->router(), std::move(request));
  EXPECT_EQ(response.status, 201) << response.body;
}

// A browser sends the cookie with a WebSocket handshake from any page of the same site, and
// no CSRF header can ride along: the cookie opens none (the SSH relay's clients send a bearer).
TEST_F(WebSessionTest, TheCookieOpensNoWebSocket) {
  WebSession web = SignInAsAdmin();
  auto handshake = [&](const std::string& cookie, const std::string& bearer) {
    net::Request request;
    request.method = "GET";
    request.target = "/api/v1/reservations/res_0123456789abcdef/ssh/connect";
    request.headers.Set("Upgrade", "websocket");
    request.headers.Set("Connection", "Upgrade");
    request.headers.Set("Sec-WebSocket-Version", "13");
    request.headers.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
    request.headers.Set("Sec-WebSocket-Protocol", "uplink.ssh-client.v1");
    request.headers.Set("Origin", "https://sibling.example.com");
    if (!cookie.empty()) request.headers.Set("Cookie", cookie);
    if (!bearer.empty()) request.headers.Set("Authorization", "Bearer " + bearer);
    request.remote_address = kClientAddress;
    return testing::Call(api_->router(), std::move(request));
  };
  net::Response refused = handshake(web.cookie, "");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(ErrorCode(refused), "cookie_websocket");
  net::Response bearer = handshake("", admin_key_);
  EXPECT_NE(ErrorCode(bearer), "cookie_websocket") << bearer.body;
  EXPECT_NE(bearer.status, 403) << bearer.body;
  // The cookie still reads the API.
  EXPECT_EQ(SendWithCookie("GET", "/api/v1/connections", web.cookie, "").status, 200);
}

TEST_F(WebSessionTest, HostileOrUnknownCookiesAreRefused) {
  for (const std::string& cookie :
       {std::string("uplink_session=skt_notarealtoken"), std::string("uplink_session=uk_x"),
        std::string("uplink_session=") + std::string(100, 'A')}) {
    net::Response response = SendWithCookie("GET", "/api/v1/connections", cookie, "");
    EXPECT_EQ(response.status, 401) << cookie;
    EXPECT_EQ(ErrorCode(response), "invalid_token") << response.body;
  }
  net::Response none = SendWithCookie("GET", "/api/v1/connections", "", "");
  EXPECT_EQ(ErrorCode(none), "missing_token");
}

TEST_F(WebSessionTest, SignOutEndsTheSessionAndClearsTheCookie) {
  WebSession web = SignInAsAdmin();
  net::Response forged = SendWithCookie("POST", "/api/v1/web/sign-out", web.cookie, "");
  EXPECT_EQ(ErrorCode(forged), "csrf_failed");
  net::Response out = SendWithCookie("POST", "/api/v1/web/sign-out", web.cookie, web.csrf);
  ASSERT_EQ(out.status, 200) << out.body;
  EXPECT_EQ(out.headers.Get("Set-Cookie"), ExpiredSessionCookie(true));
  net::Response after = SendWithCookie("GET", "/api/v1/connections", web.cookie, "");
  EXPECT_EQ(after.status, 401);
  EXPECT_EQ(ErrorCode(after), "revoked");
}

class PlainHttpWebSessionTest : public WebSessionTest {
 protected:
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    options.secure_cookies = false;
    return options;
  }
};

TEST_F(PlainHttpWebSessionTest, LoopbackPlainHttpCookiesAreNotSecure) {
  net::Response response = WebSignIn("admin@example.com");
  ASSERT_EQ(response.status, 201) << response.body;
  std::string set_cookie(response.headers.Get("Set-Cookie").value_or(""));
  EXPECT_EQ(set_cookie.find("Secure"), std::string::npos) << set_cookie;
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos);
}

// ---- pages and assets -----------------------------------------------------------------------

void ExpectSecurityHeaders(const net::Response& response) {
  EXPECT_EQ(response.headers.Get("Content-Security-Policy"), kWebContentSecurityPolicy);
  EXPECT_EQ(response.headers.Get("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(response.headers.Get("X-Frame-Options"), "DENY");
}

TEST(WebContentSecurityPolicyTest, AllowsNoInlineCodeNorOtherOrigins) {
  std::string_view csp = kWebContentSecurityPolicy;
  EXPECT_NE(csp.find("default-src 'self'"), std::string_view::npos);
  EXPECT_NE(csp.find("script-src 'self';"), std::string_view::npos);
  EXPECT_NE(csp.find("style-src 'self';"), std::string_view::npos);
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string_view::npos);
  EXPECT_NE(csp.find("object-src 'none'"), std::string_view::npos);
  EXPECT_EQ(csp.find("unsafe"), std::string_view::npos);
  EXPECT_EQ(csp.find("*"), std::string_view::npos);
  EXPECT_EQ(csp.find("http"), std::string_view::npos);
}

class WebPagesTest : public ApiTest {
 protected:
  net::Response Get(const std::string& target, const std::string& method = "GET") {
    net::Request request;
    request.method = method;
    request.target = target;
    request.remote_address = kClientAddress;
    return testing::Call(api_->router(), std::move(request));
  }
};

// The script and style sheet index.html loads, by their paths.
std::vector<std::string> AssetPaths(const std::string& index) {
  std::vector<std::string> paths;
  for (size_t at = index.find("/assets/"); at != std::string::npos;
       at = index.find("/assets/", at + 1)) {
    paths.push_back(index.substr(at, index.find('"', at) - at));
  }
  return paths;
}

TEST_F(WebPagesTest, TheRootAndClientRoutesAreIndexNeverCached) {
  for (const char* path : {"/", "/connections", "/tokens/x?y=1", "/index.html"}) {
    net::Response response = Get(path);
    ASSERT_EQ(response.status, 200) << path;
    EXPECT_EQ(response.headers.Get("Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(response.headers.Get("Cache-Control"), "no-cache");
    ExpectSecurityHeaders(response);
    EXPECT_NE(response.body.find("<div id=\"app\">"), std::string::npos);
    // No inline script or style in the page: only files from the console.
    EXPECT_EQ(response.body.find("<script>"), std::string::npos);
    EXPECT_EQ(response.body.find("<style"), std::string::npos);
    EXPECT_EQ(response.body.find("style="), std::string::npos);
  }
  net::Response head = Get("/", "HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
}

TEST_F(WebPagesTest, HashedAssetsAreCachedForAYear) {
  // The script, the style sheet and the icon.
  std::vector<std::string> assets = AssetPaths(Get("/").body);
  ASSERT_EQ(assets.size(), 3u);
  for (const std::string& path : assets) {
    net::Response response = Get(path);
    ASSERT_EQ(response.status, 200) << path;
    EXPECT_EQ(response.headers.Get("Cache-Control"), "public, max-age=31536000, immutable");
    ExpectSecurityHeaders(response);
    EXPECT_FALSE(response.body.empty());
    EXPECT_EQ(response.headers.Get("Content-Type"),
              path.ends_with(".js")    ? "text/javascript; charset=utf-8"
              : path.ends_with(".svg") ? "image/svg+xml"
                                       : "text/css; charset=utf-8");
  }
}

TEST_F(WebPagesTest, UnknownAssetsAndApiPathsAre404) {
  for (const char* path : {"/assets/app-NOPE.js", "/assets/", "/assets/../index.html",
                                  "/assets/%2e%2e/index.html", "/assets//index.html"}) {
    net::Response response = Get(path);
    EXPECT_EQ(response.status, 404) << path;
    EXPECT_EQ(response.body.find("<div id=\"app\">"), std::string::npos) << path;
  }
  for (const char* path : {"/api/v1/nope", "/api", "/api/v2/connections"}) {
    net::Response response = Get(path);
    EXPECT_EQ(response.status, 404) << path;
    EXPECT_EQ(ErrorCode(response), "not_found") << path;
  }
  // Only reads get a page: anything else is the API's 404.
  net::Response post = Get("/connections", "POST");
  EXPECT_EQ(post.status, 404);
  EXPECT_EQ(ErrorCode(post), "not_found");
}

TEST(ServeWebFileTest, WithoutPagesTheConsoleSaysSo) {
  net::Request request;
  request.target = "/";
  net::Response response = ServeWebFile(request, [](std::string_view) { return std::string_view(); });
  EXPECT_EQ(response.status, 404);
  EXPECT_NE(response.body.find("without its web pages"), std::string::npos);
  ExpectSecurityHeaders(response);
}

}  // namespace
}  // namespace uplink::console
