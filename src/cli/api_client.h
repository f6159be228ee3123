// The console's user API (docs/api.md) as the CLI calls it.
//
// Every reply the CLI acts on is a JSON object; anything else (a proxy's HTML, a huge body,
// `[]`) is an error that says so. Failures come back as a Status whose code picks the exit
// code (cli/exit_codes.h): 401 Unauthenticated, 403 PermissionDenied, 404 NotFound, 409 and
// 410 Conflict, 429 ResourceExhausted (with Retry-After in the message), 5xx and unusable
// replies Internal, other 4xx FailedPrecondition, transport failures and redirects
// Unavailable. The credential is set once and only ever reaches the Authorization header.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/secret.h"
#include "common/status.h"
#include "net/client.h"

namespace uplink::cli {

// "https://console.example:8443" without a trailing slash; InvalidArgument unless it is an
// https URL, or http to a loopback address. The message never repeats the URL, which may
// hold user info or a query.
Result<std::string> NormalizeConsoleUrl(std::string_view url);

struct ApiClientOptions {
  std::chrono::milliseconds request_timeout{30'000};  // sign-in hashes a password
  size_t max_reply_bytes = 4 << 20;
};

// What every connection to the console uses: its address, its trust (`ca_file`), uplink's
// User-Agent, the timeouts and the reply bound.
net::ClientOptions ConsoleClientOptions(const std::string& console, const std::string& ca_file,
                                        const ApiClientOptions& options);

class ApiClient {
 public:
  // `console` must come from NormalizeConsoleUrl.
  // `ca_file`: PEM CA bundle for a console behind a private CA; empty: the system store.
  static Result<std::unique_ptr<ApiClient>> Connect(const std::string& console,
                                                    const std::string& ca_file = "",
                                                    const ApiClientOptions& options = {});

  const std::string& console() const { return console_; }
  // `source` says where it came from ("UPLINK_API_KEY"); a 401 names it, never the value.
  void set_credential(Secret credential, std::string source) {
    credential_ = std::move(credential);
    credential_source_ = std::move(source);
  }

  // `target` is a path with an optional, already encoded query. A body is sent as JSON.
  Result<json::object> Call(std::string_view method, std::string_view target,
                            const std::optional<json::object>& body = std::nullopt);
  Result<json::object> Get(std::string_view target) { return Call("GET", target); }
  Result<json::object> Post(std::string_view target,
                            const std::optional<json::object>& body = std::nullopt) {
    return Call("POST", target, body);
  }

  // The `error.code` of the last refused call ("confirmation_required"), or "".
  const std::string& last_error_code() const { return last_error_code_; }
  // Its `error.message` as the console sent it (possibly several lines, unfiltered), or "".
  const std::string& last_error_message() const { return last_error_message_; }

  // The Status for a refusal (a non-2xx answer), by the table above; also for refusals that
  // did not come through Call, such as a WebSocket upgrade the console answered with an error.
  Status ErrorFor(const net::Response& response);

 private:
  ApiClient(std::unique_ptr<net::HttpClient> http, std::string console, size_t max_reply_bytes)
      : http_(std::move(http)), console_(std::move(console)), max_reply_bytes_(max_reply_bytes) {}

  std::unique_ptr<net::HttpClient> http_;
  std::string console_;
  Secret credential_;
  std::string credential_source_;
  std::string last_error_code_;
  std::string last_error_message_;
  size_t max_reply_bytes_;
};

}  // namespace uplink::cli
