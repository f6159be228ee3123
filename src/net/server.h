// An HTTP/1.1 server with optional TLS, keep-alive, timeouts and body limits.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "net/router.h"

namespace uplink::net {

struct TlsServerConfig {
  std::string cert_chain_pem;  // leaf first
  std::string private_key_pem;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0 picks a free one
  std::optional<TlsServerConfig> tls;  // absent: plain HTTP
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;     // larger bodies get 413 without reaching the handler
  // Optional per-request body limit, asked once the header is read and before any body byte
  // is, with the method, target and headers (the body is empty). The smaller of its answer and
  // max_body_bytes applies, so a route that needs large bodies cannot make every route buffer
  // them. Called on a server thread: it must be cheap, thread-safe and must not block.
  std::function<size_t(const Request& head)> body_limit_for;
  // The reply to a request refused before any handler runs (400 malformed, 413 body too
  // large, 431 header too large), so that a service can answer in its own error format.
  // Absent: a plain-text reason phrase. Called on a server thread; must not block.
  std::function<Response(int status)> refusal;
  // Told of each request that ends without a response: "read_timeout" (it did not arrive in
  // full within read_timeout), "client_closed" (the client closed or reset the connection
  // mid-request) or "write_failed" (the response could not be written within write_timeout).
  // A keep-alive connection closed between requests is no request. Called on a server
  // thread; must be cheap, thread-safe and must not block.
  std::function<void(std::string_view reason)> on_request_lost;
  // Told of each connection: "accepted", "closed" (an accepted one ended, whoever ended it) or
  // "refused" (closed at once, over max_connections). Called on a server thread; must be
  // cheap, thread-safe and must not block.
  std::function<void(std::string_view event)> on_connection;
  std::chrono::milliseconds read_timeout{30'000};   // whole request, headers and body
  std::chrono::milliseconds idle_timeout{60'000};   // between keep-alive requests
  std::chrono::milliseconds write_timeout{30'000};
  // Further connections are closed at once, logged at most once per 10 s with how many.
  size_t max_connections = 1024;
  int threads = 2;
  std::string server_header = "uplink";
};

class HttpServer {
 public:
  // Binds, listens and starts serving on background threads.
  static Result<std::unique_ptr<HttpServer>> Start(ServerOptions options, RequestHandler handler);

  virtual ~HttpServer() = default;
  virtual std::uint16_t port() const = 0;
  // Stops accepting, closes connections and joins the threads. Idempotent.
  virtual void Stop() = 0;
};

// Reads a PEM certificate chain and key from files, with a clear error naming the file.
Result<TlsServerConfig> LoadTlsServerConfig(const std::string& cert_file, const std::string& key_file);

// Splits "HOST:PORT" or "[v6]:PORT"; the port must be 0-65535.
Status SplitHostPort(std::string_view listen, std::string& host, std::uint16_t& port);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(std::string_view host);

}  // namespace uplink::net
