// Private to net/*.cc: how HttpServer hands an upgraded connection to websocket.cc.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <memory>
#include <mutex>
#include <string>

#include "net/stream_impl.h"
#include "net/websocket.h"

namespace uplink::net {

// Closed (under its mutex) before an io_context stops for good: from then on nothing may be
// posted to that io_context, so late calls from other threads fail instead.
struct IoGate {
  std::mutex mutex;
  bool open = true;
};

// Completes the opening handshake on `stream` (the server has read `request`; `early_bytes`
// are what it read past the request), then runs accept.handler on a thread of its own and
// returns once the handler has. If the io_context is destroyed first, the handler's blocked
// calls fail and the handler is waited for.
boost::asio::awaitable<void> ServeWebSocket(
    std::unique_ptr<AnyStream> stream, std::string early_bytes,
    const boost::beast::http::request<boost::beast::http::string_body>& request,
    const WebSocketAccept& accept, std::shared_ptr<IoGate> gate, std::string server_header);

}  // namespace uplink::net
