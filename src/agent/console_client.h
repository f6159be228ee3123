// The agent's connection to the console (docs/protocol.md). It owns its HTTP connection and
// reads its own token file; it has no access to the Kubernetes credential.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/status.h"
#include "common/time.h"
#include "net/client.h"
#include "protocol/errors.h"

namespace uplink::agent {

// The connection token's expiry as the console tells it (`expires_at` in its replies),
// shared by the clients of one agent so that it warns once per day, not once per client.
class TokenExpiry {
 public:
  // The agent warns from this long before the expiry (the console shows it from then too).
  static constexpr std::chrono::hours kWarnWithin{14 * 24};

  // Records what a reply said; logs a warning when the token expires within kWarnWithin and
  // the whole days left (rounded up) differ from the last warning's.
  void Update(WallTime expires_at, WallTime now);
  std::optional<WallTime> expires_at() const;

 private:
  mutable std::mutex mutex_;
  std::optional<WallTime> expires_at_;
  std::optional<std::int64_t> warned_days_;
  log::Logger log_{"agent.token"};
};

struct ConsoleClientOptions {
  std::string base_url;    // https://console.example; http only for a loopback host
  std::string token_file;  // holds "agt_..."; re-read before every request
  std::string role = "inventory";
  std::string ca_file;     // optional private CA for the console; empty: system store
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds large_request_timeout{30'000};  // bodies over 1 MiB
  // A file holding the cluster's identity (the kube-system namespace's UID), re-read before
  // every request, for a role that cannot read it from Kubernetes (the node role reads the
  // status ConfigMap the inventory role writes, mounted by the kubelet). Empty: none, unless
  // SetClusterUid is called. A missing or empty file sends no identity.
  std::string cluster_uid_file;
  // Shared by the clients of one agent; null: the client keeps its own.
  std::shared_ptr<TokenExpiry> token_expiry;
};

// What one call produced. `status` is ok only for a 2xx reply with a JSON object body.
struct ConsoleReply {
  Status status;
  int http_status = 0;     // 0: no reply (connection failure, timeout, bad token file)
  std::string error_code;  // error.code of an error reply ("revoked"), if any
  std::optional<std::chrono::milliseconds> retry_after;
  json::value body;        // the parsed 2xx body
  // The error body of an error reply (an upload's 422 names the refused record in its
  // sequence); none when the reply carried none. Never quoted whole into messages.
  std::optional<protocol::ErrorBody> error;
  // The whole error body, parsed, for a call whose errors carry more (an output gap's "have").
  json::value error_json;
};

// When a request body is gzip-compressed.
enum class Compression {
  kAboveThreshold,  // only bodies over protocol::kGzipThreshold (reports)
  kAlways,          // every body (uploads: docs/protocol.md requires it)
};

class ConsoleClient {
 public:
  static Result<std::unique_ptr<ConsoleClient>> Create(ConsoleClientOptions options,
                                                       Clock& clock = SystemClock());

  // POSTs `body` as JSON to `path` ("/api/v1/agent/inventory").
  ConsoleReply PostJson(std::string_view path, const json::value& body,
                        Compression compression = Compression::kAboveThreshold);

  // Ends the call under way (it fails with no reply) and every later one: for stopping while
  // a long poll is held. Safe from any thread.
  void Abort();

  // Every later call names this cluster (the Uplink-Cluster-UID header, docs/protocol.md,
  // "Cluster identity"), whatever cluster_uid_file holds. Safe from any thread.
  void SetClusterUid(std::string uid);

  // When the connection token expires, as the console's last reply that said so told.
  std::optional<WallTime> token_expires_at() const { return options_.token_expiry->expires_at(); }

  const ConsoleClientOptions& options() const { return options_; }

 private:
  ConsoleClient(ConsoleClientOptions options, Clock& clock,
                std::unique_ptr<net::HttpClient> http, std::unique_ptr<net::HttpClient> large);

  // The identity to send: the one set, else the file's, else none.
  std::optional<std::string> ClusterUid() const;

  ConsoleClientOptions options_;
  Clock& clock_;
  mutable std::mutex cluster_uid_mutex_;
  std::string cluster_uid_;  // set by SetClusterUid
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
