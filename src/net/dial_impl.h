// Private to net/*.cc: opening a client connection (resolve, connect, TLS with certificate
// and host name verification) for HttpClient and ConnectWebSocket alike.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "net/client.h"
#include "net/http.h"
#include "net/stream_impl.h"

namespace uplink::net {

// Refuses what would corrupt a request on the wire: a bad method, a target that does not
// start with '/' or holds spaces or line breaks, a header field with a line break.
Status ValidateRequest(const Request& request);

// The TLS client context for `options` (its CA, or the system store, and an optional client
// certificate); nothing for an http URL.
Status MakeClientTlsContext(const ParsedUrl& url, const ClientOptions& options,
                            std::optional<boost::asio::ssl::context>& context);

// "127.0.0.1:8443", "[::1]:443": how errors name the server.
std::string HostAndPort(const ParsedUrl& url);

// Resolves and connects within `connect_deadline`, then completes the TLS handshake (when
// `tls` is set, verifying the certificate and that it names url.host) within `deadline`.
// Errors: DeadlineExceeded, Unavailable (refused, reset, handshake or verification failed,
// with OpenSSL's reason).
boost::asio::awaitable<Status> DialStream(boost::asio::io_context& io, const ParsedUrl& url,
                                          boost::asio::ssl::context* tls,
                                          std::chrono::steady_clock::time_point connect_deadline,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::unique_ptr<AnyStream>& connection);

}  // namespace uplink::net
