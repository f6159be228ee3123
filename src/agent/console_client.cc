#include "agent/console_client.h"

#include <algorithm>

#include "common/backoff.h"
#include "common/files.h"
#include "common/gzip.h"
#include "common/text.h"
#include "net/http.h"
#include "net/server.h"
#include "protocol/agent_api.h"
#include "protocol/errors.h"
#include "protocol/whoami.h"

namespace uplink::agent {
namespace {

constexpr size_t kMaxTokenBytes = 4096;
constexpr size_t kLargeBodyBytes = 1 << 20;
constexpr size_t kMaxClusterUidFileBytes = 4096;

}  // namespace

void TokenExpiry::Update(WallTime expires_at, WallTime now) {
  std::lock_guard lock(mutex_);
  expires_at_ = expires_at;
  auto left = expires_at - now;
  if (left > kWarnWithin) {
    warned_days_.reset();  // renewed: warn again when the new expiry comes near
    return;
  }
  std::int64_t days = std::max<std::int64_t>(0, std::chrono::ceil<std::chrono::days>(left).count());
  if (warned_days_ == days) return;
  warned_days_ = days;
  log_.Warn("the connection token expires in " + std::to_string(days) +
                (days == 1 ? " day" : " days") +
                "; generate a new installation code in the console ('uplink connections rotate "
                "CLUSTER --renew') and put it in the agent's Secret",
            {{"expires_at", FormatRfc3339(expires_at)}, {"days_left", days}});
}

std::optional<WallTime> TokenExpiry::expires_at() const {
  std::lock_guard lock(mutex_);
  return expires_at_;
}

Result<Secret> ReadConsoleToken(const std::string& path) {
  if (path.empty()) return FailedPreconditionError("no console token file is configured");
  auto content = ReadFileBounded(path, kMaxTokenBytes);
  if (!content.ok()) return content.status().WithContext("reading the console token file");
  std::string_view token = TrimWhitespace(*content);
  if (token.empty()) {
    return FailedPreconditionError("the console token file " + path +
                                   " is empty; it should hold the connection token (agt_...), "
                                   "or for the workspace role the execution credential (exe_...)");
  }
  for (char c : token) {
    // The token goes into a header; a stray newline would split it.
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return FailedPreconditionError("the console token file " + path +
                                     " holds characters a token cannot have");
    }
  }
  Secret secret{std::string(token)};
  std::fill(content->begin(), content->end(), '\0');  // the file's copy of the token
  return secret;
}

Status ValidateConsoleUrl(std::string_view url) {
  // The URL is never quoted back: it may carry a credential (user:password@, ?token=agt_...).
  auto parsed = net::ParseBaseUrl(url);
  if (!parsed.ok()) {
    return InvalidArgumentError("--console is not a valid URL: " + parsed.status().message() +
                                "; use https://HOST[:PORT]");
  }
  if (parsed->scheme == "http" && !net::IsLoopbackHost(parsed->host)) {
    return InvalidArgumentError("--console " + ConsoleOrigin(*parsed) +
                                " uses plain http; use https (http is accepted only for a "
                                "loopback console during development)");
  }
  return Status::Ok();
}

std::string ConsoleOrigin(const net::ParsedUrl& url) {
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  return url.scheme + "://" + host + ":" + std::to_string(url.port);
}

Result<std::unique_ptr<ConsoleClient>> ConsoleClient::Create(ConsoleClientOptions options,
                                                             Clock& clock) {
  UPLINK_RETURN_IF_ERROR(ValidateConsoleUrl(options.base_url));
  net::ClientOptions http;
  http.base_url = options.base_url;
  http.ca_file = options.ca_file;
  http.connect_timeout = options.connect_timeout;
  http.request_timeout = options.request_timeout;
  http.max_response_bytes = protocol::kMaxReplyBytes;
  http.user_agent = protocol::AgentUserAgent(UPLINK_VERSION, options.role);
  if (!options.token_expiry) options.token_expiry = std::make_shared<TokenExpiry>();
  net::ClientOptions large_http = http;
  large_http.request_timeout = options.large_request_timeout;
  auto small = net::HttpClient::Create(std::move(http));
  if (!small.ok()) return small.status().WithContext("console client");
  auto large = net::HttpClient::Create(std::move(large_http));
  if (!large.ok()) return large.status().WithContext("console client");
  return std::unique_ptr<ConsoleClient>(new ConsoleClient(
      std::move(options), clock, std::move(small).value(), std::move(large).value()));
}

ConsoleClient::ConsoleClient(ConsoleClientOptions options, Clock& clock,
                             std::unique_ptr<net::HttpClient> http,
                             std::unique_ptr<net::HttpClient> large)
    : options_(std::move(options)), clock_(clock), http_(std::move(http)), large_(std::move(large)) {}

void ConsoleClient::Abort() {
  http_->Abort();
  large_->Abort();
}

void ConsoleClient::SetClusterUid(std::string uid) {
  std::lock_guard lock(cluster_uid_mutex_);
  cluster_uid_ = std::move(uid);
}

std::optional<std::string> ConsoleClient::ClusterUid() const {
  {
    std::lock_guard lock(cluster_uid_mutex_);
    if (!cluster_uid_.empty()) return cluster_uid_;
  }
  if (options_.cluster_uid_file.empty()) return std::nullopt;
  // Missing until the kubelet has projected the status ConfigMap's key: no identity yet.
  auto content = ReadFileBounded(options_.cluster_uid_file, kMaxClusterUidFileBytes);
  if (!content.ok()) return std::nullopt;
  std::string_view uid = TrimWhitespace(*content);
  if (!protocol::IsClusterUid(uid)) return std::nullopt;
  return std::string(uid);
}

ConsoleReply ConsoleClient::PostJson(std::string_view path, const json::value& body,
                                     Compression compression) {
  ConsoleReply reply;
  std::string what = "POST " + std::string(path);
  // Re-read before every request: a rotated Secret takes effect without a restart.
  auto token = ReadConsoleToken(options_.token_file);
  if (!token.ok()) {
    reply.status = token.status();
    return reply;
  }
  net::Request request;
  request.method = "POST";
  request.target = std::string(path);
  request.headers.Set("Authorization", "Bearer " + token->Reveal());
  request.headers.Set("Content-Type", "application/json");
  request.headers.Set("Accept", "application/json");
  if (std::optional<std::string> uid = ClusterUid()) {
    request.headers.Set(std::string(protocol::kClusterUidHeader), *uid);
  }
  std::string text = ToJson(body);
  size_t plain_size = text.size();
  if (compression == Compression::kAlways || plain_size > protocol::kGzipThreshold) {
    auto compressed = GzipCompress(text);
    if (!compressed.ok()) {
      reply.status = compressed.status().WithContext(what + ": compressing the body");
      return reply;
    }
    text = std::move(compressed).value();
    request.headers.Set("Content-Encoding", "gzip");
  }
  request.body = std::move(text);
  net::HttpClient& client = plain_size > kLargeBodyBytes ? *large_ : *http_;
  auto response = client.Send(std::move(request));
  if (!response.ok()) {
    reply.status = response.status().WithContext(what + " to the console");
    return reply;
  }
  reply.http_status = response->status;
  if (auto header = response->headers.Get("Retry-After"); header) {
    auto retry_after = ParseRetryAfter(*header, clock_.Now());
    if (retry_after.ok()) reply.retry_after = *retry_after;
  }
  std::string status_text =
      std::to_string(response->status) + " " + std::string(net::ReasonPhrase(response->status));

  if (response->status >= 300 && response->status <= 399) {
    reply.status = FailedPreconditionError(
        what + ": the console answered " + status_text +
        "; redirects are refused (a redirect must not carry the token elsewhere); check --console");
    return reply;
  }
  if (response->status >= 200 && response->status <= 299) {
    auto parsed = ParseJson(response->body,
                            JsonLimits{.max_bytes = protocol::kMaxReplyBytes, .max_depth = 16});
    if (!parsed.ok() || !parsed->is_object()) {
      reply.status = UnavailableError(what + ": the console answered " + status_text +
                                      " with a body that is not a JSON object");
      return reply;
    }
    reply.body = std::move(parsed).value();
    if (std::optional<WallTime> at = protocol::DecodeExpiresAt(reply.body)) {
      options_.token_expiry->Update(*at, clock_.Now());
    }
    return reply;
  }
  // An error reply: {"error": {"code": "...", "message": "..."}}; never echo anything else.
  std::string detail = " (the reply carried no protocol error body)";
  auto error_json =
      ParseJson(response->body, JsonLimits{.max_bytes = protocol::kMaxReplyBytes, .max_depth = 16});
  if (error_json.ok()) reply.error_json = std::move(error_json).value();
  if (std::optional<protocol::ErrorBody> error = protocol::DecodeErrorBody(reply.error_json)) {
    reply.error = *error;
    reply.error_code = OneLineExcerpt(error->code);
    detail = reply.error_code.empty() ? "" : " " + reply.error_code;
    if (!error->message.empty()) detail += ": " + OneLineExcerpt(error->message);
  }
  reply.status = Status(net::StatusCodeForHttpStatus(response->status),
                        what + ": the console answered " + status_text + detail);
  return reply;
}

}  // namespace uplink::agent
