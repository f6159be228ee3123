// A blocking HTTP/1.1 client with TLS, keep-alive, timeouts and a response size bound.
//
// It never follows redirects: a 3xx comes back as a Response for the caller to judge (a
// redirect must not carry a bearer token to another origin). It knows nothing about
// credentials; callers add their own Authorization header.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "net/http.h"

namespace uplink::net {

struct ClientOptions {
  // scheme://host[:port][/base/path]; https, or http (callers decide when http is allowed).
  std::string base_url;
  // Trust: a CA bundle in PEM, given inline or as a file. Neither: the system store.
  std::string ca_pem;
  std::string ca_file;
  // Optional client certificate (kubeconfigs may use one).
  std::string client_cert_pem;
  std::string client_key_pem;
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{10'000};  // the whole exchange
  size_t max_response_bytes = 4 << 20;
  std::string user_agent = "uplink/" UPLINK_VERSION;
};

class HttpClient {
 public:
  // Fails on a malformed base URL or unreadable TLS material.
  static Result<std::unique_ptr<HttpClient>> Create(ClientOptions options);

  virtual ~HttpClient() = default;

  // Sends `request` (its target is appended to the base URL's path) and returns the
  // response, whatever its status. Transport failures, timeouts and oversized responses are
  // errors: Unavailable, DeadlineExceeded, ResourceExhausted. Thread-safe; calls are
  // serialised over one kept-alive connection.
  virtual Result<Response> Send(Request request) = 0;

  // Ends the exchange under way, if any (its Send returns Unavailable), and makes every later
  // Send fail at once. Safe from any thread: how a long poll is cut short at shutdown.
  virtual void Abort() = 0;

  const ClientOptions& options() const { return options_; }

 protected:
  explicit HttpClient(ClientOptions options) : options_(std::move(options)) {}
  ClientOptions options_;
};

struct ParsedUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // without brackets
  std::uint16_t port = 0;
  std::string path;    // "" or "/prefix" without a trailing slash
};
// Accepts only http and https URLs without user info, query or fragment.
Result<ParsedUrl> ParseBaseUrl(std::string_view url);

}  // namespace uplink::net
