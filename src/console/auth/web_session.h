// The browser's credential: the session token in an HttpOnly cookie, plus a CSRF token the
// page sends in a header on every state-changing call (docs/web.md, docs/security.md).
//
// The CSRF token is derived from the session token (a domain-separated SHA-256), so it needs
// no storage, dies with the session, and cannot be computed without the cookie's value,
// which the page's scripts never see.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/secret.h"
#include "net/http.h"

namespace uplink::console {

inline constexpr std::string_view kSessionCookieName = "uplink_session";
inline constexpr std::string_view kCsrfHeaderName = "X-CSRF-Token";
// A Cookie header longer than this is not looked at: browsers send at most a few KiB.
inline constexpr size_t kMaxCookieHeaderBytes = 8192;

// The value of the cookie called `name` in a Cookie header ("a=1; b=2"): the first one, with
// surrounding blanks trimmed and optional double quotes removed. nullopt when it is absent,
// empty, the header is over kMaxCookieHeaderBytes, or the value has bytes a cookie value may
// not have (controls, NUL, blanks inside, quotes, commas, semicolons, backslashes, non-ASCII).
std::optional<std::string> CookieValue(std::string_view header, std::string_view name);

// The session token from the request's session cookie; nullopt without one.
std::optional<Secret> SessionCookieToken(const net::Request& request);

// The Set-Cookie value that stores `token` for `max_age`: HttpOnly, SameSite=Strict, Path=/,
// and Secure when `secure`.
std::string SessionCookie(const Secret& token, std::chrono::seconds max_age, bool secure);
// The Set-Cookie value that deletes the session cookie.
std::string ExpiredSessionCookie(bool secure);

// The CSRF token of a session: hex SHA-256 of "uplink-csrf-v1\0" + token.
std::string CsrfTokenFor(const Secret& session_token);
// Whether `presented` is the CSRF token of `session_token`, compared in constant time.
bool CsrfTokenMatches(const Secret& session_token, std::string_view presented);

// Whether a method may change state (everything but GET, HEAD and OPTIONS).
bool IsStateChanging(std::string_view method);

}  // namespace uplink::console
