#include "net/http.h"

#include <algorithm>

#include "common/text.h"

namespace uplink::net {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string_view> Headers::Get(std::string_view name) const {
  for (const auto& [key, value] : fields_) {
    if (EqualsIgnoringAsciiCase(key, name)) return std::string_view(value);
  }
  return std::nullopt;
}

void Headers::Set(std::string_view name, std::string_view value) {
  Remove(name);
  Add(name, value);
}

void Headers::Add(std::string_view name, std::string_view value) {
  fields_.emplace_back(std::string(name), std::string(value));
}

void Headers::Remove(std::string_view name) {
  std::erase_if(fields_,
                [&](const auto& field) { return EqualsIgnoringAsciiCase(field.first, name); });
}

std::optional<std::string> PercentDecode(std::string_view text, bool plus_as_space) {
  const std::string_view special = plus_as_space ? "%+" : "%";
  std::string out;
  out.reserve(text.size());
  // Runs without escapes are copied whole: every request's path comes through here.
  for (size_t i = 0; i < text.size();) {
    size_t run_end = std::min(text.find_first_of(special, i), text.size());
    out.append(text, i, run_end - i);
    i = run_end;
    if (i == text.size()) break;
    if (text[i] == '+') {
      out += ' ';
      ++i;
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    int hi = HexValue(text[i + 1]);
    int lo = HexValue(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 3;
  }
  return out;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string Request::Path() const {
  std::string_view raw = target;
  if (auto q = raw.find('?'); q != std::string_view::npos) raw = raw.substr(0, q);
  return PercentDecode(raw, false).value_or(std::string(raw));
}

std::vector<std::pair<std::string, std::string>> Request::QueryParams() const {
  std::vector<std::pair<std::string, std::string>> params;
  auto q = target.find('?');
  if (q == std::string::npos) return params;
  std::string_view query = std::string_view(target).substr(q + 1);
  if (auto hash = query.find('#'); hash != std::string_view::npos) query = query.substr(0, hash);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    std::string_view key = pair.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    auto decoded_key = PercentDecode(key, true);
    auto decoded_value = PercentDecode(value, true);
    if (!decoded_key || !decoded_value) continue;  // malformed escapes are dropped, not guessed
    params.emplace_back(std::move(*decoded_key), std::move(*decoded_value));
  }
  return params;
}

std::optional<std::string> Request::Query(std::string_view key) const {
  for (auto& [k, v] : QueryParams()) {
    if (k == key) return v;
  }
  return std::nullopt;
}

Response Response::Json(int status, std::string body) {
  Response response;
  response.status = status;
  response.headers.Set("Content-Type", "application/json");
  response.body = std::move(body);
  return response;
}

Response Response::Text(int status, std::string body) {
  Response response;
  response.status = status;
  response.headers.Set("Content-Type", "text/plain; charset=utf-8");
  response.body = std::move(body);
  return response;
}

StatusCode StatusCodeForHttpStatus(int http_status) {
  switch (http_status) {
    case 400: return StatusCode::kInvalidArgument;
    case 401: return StatusCode::kUnauthenticated;
    case 403: return StatusCode::kPermissionDenied;
    case 404: return StatusCode::kNotFound;
    case 408: return StatusCode::kDeadlineExceeded;
    case 409: return StatusCode::kConflict;
    case 410: return StatusCode::kFailedPrecondition;
    case 413: return StatusCode::kResourceExhausted;
    case 422: return StatusCode::kInvalidArgument;
    case 429: return StatusCode::kUnavailable;
    case 504: return StatusCode::kDeadlineExceeded;
    default:
      if (http_status >= 500) return StatusCode::kUnavailable;
      if (http_status >= 400) return StatusCode::kFailedPrecondition;
      return StatusCode::kInternal;  // not an error status: the caller misjudged the reply
  }
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
  }
}

}  // namespace uplink::net
