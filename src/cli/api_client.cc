#include "cli/api_client.h"

#include <algorithm>
#include <cctype>

#include "common/text.h"
#include "net/server.h"
#include "protocol/errors.h"

namespace uplink::cli {
namespace {

// "30" stays "30 seconds"; anything else (an HTTP date, garbage) is shown as sent, shortened.
std::string RetryAfterText(const net::Response& response) {
  auto value = response.headers.Get("Retry-After");
  if (!value) return "a while";
  std::string_view text = *value;
  bool digits = !text.empty() && text.size() <= 9 &&
                std::all_of(text.begin(), text.end(),
                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  return digits ? std::string(text) + " seconds" : "'" + OneLineExcerpt(text, 40) + "'";
}

}  // namespace

Result<std::string> NormalizeConsoleUrl(std::string_view url) {
  std::string trimmed(url);
  while (!trimmed.empty() && trimmed.back() == '/') trimmed.pop_back();
  auto parsed = net::ParseBaseUrl(trimmed);
  if (!parsed.ok()) {
    return InvalidArgumentError("the console address is not a usable URL (" +
                                parsed.status().message() +
                                "); pass --console https://HOST[:PORT]");
  }
  if (parsed->scheme != "https" && !net::IsLoopbackHost(parsed->host)) {
    return InvalidArgumentError(
        "the console address must be https:// (plain http only to a loopback address), so that "
        "credentials never cross the network unencrypted");
  }
  return trimmed;
}

net::ClientOptions ConsoleClientOptions(const std::string& console, const std::string& ca_file,
                                        const ApiClientOptions& client) {
  net::ClientOptions options;
  options.base_url = console;
  options.ca_file = ca_file;
  options.user_agent = "uplink-cli/" UPLINK_VERSION;
  options.request_timeout = client.request_timeout;
  options.max_response_bytes = client.max_reply_bytes;
  return options;
}

Result<std::unique_ptr<ApiClient>> ApiClient::Connect(const std::string& console,
                                                      const std::string& ca_file,
                                                      const ApiClientOptions& client) {
  auto http = net::HttpClient::Create(ConsoleClientOptions(console, ca_file, client));
  if (!http.ok()) {
    return InvalidArgumentError((ca_file.empty() ? "--console: " : "--console or --ca-file: ") +
                                http.status().message());
  }
  return std::unique_ptr<ApiClient>(
      new ApiClient(std::move(*http), console, client.max_reply_bytes));
}

Result<json::object> ApiClient::Call(std::string_view method, std::string_view target,
                                     const std::optional<json::object>& body) {
  last_error_code_.clear();
  last_error_message_.clear();
  net::Request request;
  request.method = std::string(method);
  request.target = std::string(target);
  request.headers.Set("Accept", "application/json");
  if (!credential_.empty()) request.headers.Set("Authorization", "Bearer " + credential_.Reveal());
  if (body) {
    request.headers.Set("Content-Type", "application/json");
    request.body = json::serialize(*body);
  }
  auto sent = http_->Send(std::move(request));
  if (!sent.ok()) {
    const Status& s = sent.status();
    if (s.code() == StatusCode::kResourceExhausted) {
      return InternalError("the console's reply is larger than " +
                           std::to_string(max_reply_bytes_ >> 20) +
                           " MiB, far more than any reply uplink expects; check that --console "
                           "is the console's address");
    }
    if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded) {
      return Status(s.code(), "cannot reach the console: " + s.message());
    }
    return UnavailableError("cannot reach the console: " + s.message());
  }
  const net::Response& response = *sent;
  if (response.status < 200 || response.status >= 300) return ErrorFor(response);
  auto parsed = ParseJson(response.body, JsonLimits{max_reply_bytes_});
  if (!parsed.ok() || !parsed->is_object()) {
    return InternalError(
        "the console's reply is not the JSON object uplink expects; check that --console is the "
        "console's address and not a proxy or another service");
  }
  return std::move(parsed->get_object());
}

Status ApiClient::ErrorFor(const net::Response& response) {
  const int http = response.status;
  if (http >= 300 && http < 400) {
    return UnavailableError("the console answered " + std::to_string(http) +
                            " (a redirect); uplink never follows a redirect with a credential. "
                            "Use the console's final address in --console");
  }
  std::string code;
  std::string message;
  if (std::optional<protocol::ErrorBody> error = protocol::DecodeErrorBody(response.body)) {
    code = OneLineExcerpt(error->code, 64);
    last_error_message_ = std::move(error->message);
    message = OneLineExcerpt(last_error_message_, 500);
  }
  last_error_code_ = code;
  std::string what = "the console answered " + std::to_string(http) +
                     (code.empty() ? " " + std::string(net::ReasonPhrase(http)) : " " + code);
  if (!message.empty()) what += ": " + message;
  switch (http) {
    case 401:
      if (!credential_source_.empty()) what += " (the credential from " + credential_source_ + ")";
      return UnauthenticatedError(what);
    case 403:
      return PermissionDeniedError(what);
    case 404:
      return NotFoundError(what);
    case 409:
    case 410:
      return ConflictError(what);
    case 429:
      return ResourceExhaustedError(what + " (rate limited: retry after " +
                                    RetryAfterText(response) + ")");
    default:
      break;
  }
  if (http >= 500) return InternalError(what + " (a console failure: try again later)");
  return FailedPreconditionError(what);
}

}  // namespace uplink::cli
