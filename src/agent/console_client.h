// The agent's connection to the console (docs/protocol.md). It owns its HTTP connection and
// reads its own token file; it has no access to the Kubernetes credential.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/secret.h"
#include "common/status.h"
#include "common/time.h"
#include "net/client.h"

namespace uplink::agent {

struct ConsoleClientOptions {
  std::string base_url;    // https://console.example; http only for a loopback host
  std::string token_file;  // holds "agt_..."; re-read before every request
  std::string role = "inventory";
  std::string ca_file;     // optional private CA for the console; empty: system store
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds large_request_timeout{30'000};  // bodies over 1 MiB
};

// What one call produced. `status` is ok only for a 2xx reply with a JSON object body.
struct ConsoleReply {
  Status status;
  int http_status = 0;     // 0: no reply (connection failure, timeout, bad token file)
  std::string error_code;  // error.code of an error reply ("revoked"), if any
  std::optional<std::chrono::milliseconds> retry_after;
  json::value body;        // the parsed 2xx body
  // The `error` object of an error reply as sent (an upload's 422 names the refused record in
  // error.sequence); null when the reply carried none. Never quoted whole into messages.
  json::value error;
};

// When a request body is gzip-compressed.
enum class Compression {
  kAboveThreshold,  // only bodies over ConsoleClient::kGzipThreshold (reports)
  kAlways,          // every body (uploads: docs/protocol.md requires it)
};

class ConsoleClient {
 public:
  static constexpr size_t kGzipThreshold = 64 * 1024;
  static constexpr size_t kMaxReplyBytes = 1 << 20;

  static Result<std::unique_ptr<ConsoleClient>> Create(ConsoleClientOptions options,
                                                       Clock& clock = SystemClock());

  // POSTs `body` as JSON to `path` ("/api/v1/agent/inventory").
  ConsoleReply PostJson(std::string_view path, const json::value& body,
                        Compression compression = Compression::kAboveThreshold);

  // Ends the call under way (it fails with no reply) and every later one: for stopping while
  // a long poll is held. Safe from any thread.
  void Abort();

  const ConsoleClientOptions& options() const { return options_; }

 private:
  ConsoleClient(ConsoleClientOptions options, Clock& clock,
                std::unique_ptr<net::HttpClient> http, std::unique_ptr<net::HttpClient> large);

  ConsoleClientOptions options_;
  Clock& clock_;
  std::unique_ptr<net::HttpClient> http_;   // bodies up to 1 MiB (10 s)
  std::unique_ptr<net::HttpClient> large_;  // larger bodies (30 s)
};

// Checks a console URL: https, or http only to a loopback host. The error says what to do and
// never quotes the URL (it may carry a credential).
Status ValidateConsoleUrl(std::string_view url);

// Reads the connection token (agt_...) from `path`, trimmed; it stays a Secret until the
// Authorization header is set.
Result<Secret> ReadConsoleToken(const std::string& path);

// "https://console.example:443": what of a console URL may appear in logs and messages.
std::string ConsoleOrigin(const net::ParsedUrl& url);

}  // namespace uplink::agent
