// WebSockets (RFC 6455) as small blocking values, for both ends of a connection. Nothing here
// includes Beast or Asio: websocket.cc is the one file that instantiates Beast's WebSocket
// templates.
//
// A WebSocket carries whole messages. One thread may Read while others Write (writes are
// serialised, each blocking until its frame is handed to the kernel, so a peer that stops
// reading slows the writer down: back-pressure) and any thread may Close or Abort. Keep a Read
// waiting for the connection's whole life: pings, pongs and the peer's close are processed by
// it, and keepalive pings are sent at half the idle timeout.
//
// Server side: a handler answers a request for which IsWebSocketUpgrade() holds with
// AcceptWebSocket(); HttpServer then completes the handshake and runs the WebSocketHandler on
// a thread of its own. Client side: ConnectWebSocket() dials, upgrades and negotiates a
// subprotocol.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/client.h"
#include "net/http.h"

namespace uplink::net {

// Close codes (RFC 6455 section 7.4.1) uplink sends or expects.
inline constexpr std::uint16_t kCloseNormal = 1000;
inline constexpr std::uint16_t kCloseGoingAway = 1001;
inline constexpr std::uint16_t kCloseProtocolError = 1002;
inline constexpr std::uint16_t kCloseInvalidPayload = 1007;
inline constexpr std::uint16_t kClosePolicyViolation = 1008;
inline constexpr std::uint16_t kCloseTooBig = 1009;
inline constexpr std::uint16_t kCloseInternalError = 1011;

struct WebSocketOptions {
  // A larger incoming message (all its fragments together) closes the connection with 1009;
  // Write refuses larger messages too, so both directions keep frames within it.
  size_t max_message_bytes = 64 * 1024;
  // For the opening and the closing handshakes.
  std::chrono::milliseconds handshake_timeout{10'000};
  // Nothing from the peer (data, ping or pong) for this long closes the connection; a ping is
  // sent after half of it, so a live peer always answers in time.
  std::chrono::milliseconds idle_timeout{60'000};
};

struct WebSocketMessage {
  enum class Type { kBinary, kText, kClose };
  Type type = Type::kBinary;
  std::string data;               // the payload; for kClose, the reason the peer gave
  std::uint16_t close_code = 0;   // kClose only; 1005 when the peer's close frame had none
};

class WebSocket {
 public:
  // Destroying an open WebSocket aborts the connection (no closing handshake).
  virtual ~WebSocket() = default;

  // The subprotocol both ends agreed on; empty when none was.
  virtual const std::string& subprotocol() const = 0;

  // The next whole message. When the peer closes, one kClose message (its code and reason)
  // and then FailedPrecondition. Errors: Unavailable (connection lost or aborted),
  // DeadlineExceeded (idle timeout), ResourceExhausted (message over max_message_bytes; the
  // connection was closed with 1009), InvalidArgument (the peer broke the protocol: bad
  // opcode, unmasked client frame, bad fragmentation, invalid UTF-8 in text; closed with 1002
  // or 1007). Only one Read at a time.
  virtual Result<WebSocketMessage> Read() = 0;

  // Sends one message as one frame and returns once it is written.
  virtual Status Write(std::string_view data, bool binary = true) = 0;

  // Starts the closing handshake; Read then returns the peer's kClose. Later writes fail.
  virtual Status Close(std::uint16_t code = kCloseNormal, std::string_view reason = {}) = 0;

  // Drops the connection at once; blocked Reads and Writes return Unavailable.
  virtual void Abort() = 0;
};

// --- Server side -----------------------------------------------------------------------------

// True for a WebSocket opening handshake: `Upgrade: websocket` with `Connection: upgrade`.
bool IsWebSocketUpgrade(const Request& request);

// The subprotocols a client offers (Sec-WebSocket-Protocol, every field, comma-separated), in
// its order of preference.
std::vector<std::string> OfferedSubprotocols(const Request& request);

using WebSocketHandler = std::function<void(std::unique_ptr<WebSocket>)>;

// What HttpServer needs to upgrade a connection; made by AcceptWebSocket.
struct WebSocketAccept {
  std::string subprotocol;
  WebSocketHandler handler;
  WebSocketOptions options;
};

// The answer that upgrades the connection: 101 Switching Protocols with `subprotocol` (one
// the client offered, or empty for none), then `handler` runs on a thread of its own with the
// connection. The handler must return soon after its WebSocket fails: HttpServer::Stop fails
// every blocked call and then waits for the handlers. A malformed handshake (no key, a
// version other than 13) is answered 400 by the server and never reaches the handler.
Response AcceptWebSocket(std::string subprotocol, WebSocketHandler handler,
                         WebSocketOptions options = {});

// --- Client side -----------------------------------------------------------------------------

struct WebSocketConnectOptions {
  // The server (base_url, https or http), its trust, an optional client certificate and the
  // connect timeout; request_timeout bounds the whole opening handshake.
  ClientOptions client;
  // Path and query, appended to the base URL's path: "/api/v1/namespaces/a/pods/b/exec?...".
  std::string target;
  // Sent with the upgrade request, e.g. Authorization. Never logged or quoted in errors.
  Headers headers;
  // Offered in order of preference; the server's choice must be one of them.
  std::vector<std::string> subprotocols;
  WebSocketOptions websocket;
};

// Dials, upgrades (GET) and returns the connection. A server that answers anything but 101 is
// an error built from its status (PermissionDenied for 403, ...) whose message carries the
// start of the body (a Kubernetes Status message, say); `refusal`, when given, receives that
// whole response. A subprotocol the client did not offer is InvalidArgument.
Result<std::unique_ptr<WebSocket>> ConnectWebSocket(const WebSocketConnectOptions& options,
                                                    Response* refusal = nullptr);

}  // namespace uplink::net
