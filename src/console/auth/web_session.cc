#include "console/auth/web_session.h"

#include "common/crypto.h"

namespace uplink::console {
namespace {

constexpr std::string_view kBlanks = " \t";

std::string_view Trim(std::string_view text) {
  size_t begin = text.find_first_not_of(kBlanks);
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(kBlanks);
  return text.substr(begin, end - begin + 1);
}

// RFC 6265's cookie-octet: printable ASCII except blanks, '"', ',', ';' and '\'.
bool IsCookieOctet(unsigned char c) {
  return c > 0x20 && c < 0x7f && c != '"' && c != ',' && c != ';' && c != '\\';
}

}  // namespace

std::optional<std::string> CookieValue(std::string_view header, std::string_view name) {
  if (header.size() > kMaxCookieHeaderBytes || name.empty()) return std::nullopt;
  while (!header.empty()) {
    size_t end = header.find(';');
    std::string_view pair = header.substr(0, end);
    header = end == std::string_view::npos ? std::string_view() : header.substr(end + 1);
    size_t equals = pair.find('=');
    if (equals == std::string_view::npos) continue;
    if (Trim(pair.substr(0, equals)) != name) continue;
    std::string_view value = Trim(pair.substr(equals + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (value.empty()) return std::nullopt;
    for (char c : value) {
      if (!IsCookieOctet(static_cast<unsigned char>(c))) return std::nullopt;
    }
    return std::string(value);
  }
  return std::nullopt;
}

std::optional<Secret> SessionCookieToken(const net::Request& request) {
  std::optional<std::string_view> header = request.headers.Get("Cookie");
  if (!header) return std::nullopt;
  std::optional<std::string> value = CookieValue(*header, kSessionCookieName);
  if (!value) return std::nullopt;
  return Secret(std::move(*value));
}

std::string SessionCookie(const Secret& token, std::chrono::seconds max_age, bool secure) {
  return std::string(kSessionCookieName) + "=" + token.Reveal() +
         "; Max-Age=" + std::to_string(max_age.count()) + "; Path=/; HttpOnly; SameSite=Strict" +
         (secure ? "; Secure" : "");
}

std::string ExpiredSessionCookie(bool secure) {
  return std::string(kSessionCookieName) + "=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict" +
         (secure ? "; Secure" : "");
}

std::string CsrfTokenFor(const Secret& session_token) {
  std::string input = "uplink-csrf-v1";
  input.push_back('\0');
  input += session_token.Reveal();
  return Sha256Hex(input);
}

bool CsrfTokenMatches(const Secret& session_token, std::string_view presented) {
  return ConstantTimeEquals(CsrfTokenFor(session_token), presented);
}

bool IsStateChanging(std::string_view method) {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

}  // namespace uplink::console
