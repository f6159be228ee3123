// WebSockets over Beast. Every connection is one websocket::stream on a strand; the blocking
// calls of the WebSocket interface post their operation to that strand and wait for its
// completion. This is the only file that instantiates Beast's WebSocket templates.
#include "net/websocket.h"

#include <strings.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <optional>
#include <thread>
#include <vector>

#include "common/log.h"
#include "net/dial_impl.h"
#include "net/websocket_impl.h"

namespace uplink::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr auto kUseAwaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::string_view kClosedText = "the WebSocket connection is closed";

const log::Logger& Log() {
  static const log::Logger logger("net.websocket");
  return logger;
}

// Beast's next layer: an AnyStream it owns, read after any bytes the HTTP layer had already
// read past the upgrade request.
class OwnedStream {
 public:
  using executor_type = asio::any_io_executor;

  OwnedStream(std::unique_ptr<AnyStream> stream, std::string early_bytes)
      : stream_(std::move(stream)), early_bytes_(std::move(early_bytes)) {}

  executor_type get_executor() { return stream_->get_executor(); }
  AnyStream& stream() { return *stream_; }

  template <typename MutableBuffers, typename Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    if (early_bytes_.empty()) return stream_->async_read_some(buffers, std::forward<Token>(token));
    size_t copied = asio::buffer_copy(buffers, asio::buffer(early_bytes_));
    early_bytes_.erase(0, copied);
    return asio::async_initiate<Token, void(error_code, size_t)>(
        [](auto handler, executor_type executor, size_t bytes) {
          asio::post(executor, [handler = std::move(handler), bytes]() mutable {
            std::move(handler)(error_code(), bytes);
          });
        },
        token, get_executor(), copied);
  }

  template <typename ConstBuffers, typename Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return stream_->async_write_some(buffers, std::forward<Token>(token));
  }

 private:
  std::unique_ptr<AnyStream> stream_;
  std::string early_bytes_;
};

// The end of a connection, for Beast's close handshake and failures: the TCP connection is
// shut down and closed (over TLS without a close_notify: the WebSocket close frames have
// already said goodbye).
void CloseTransport(OwnedStream& stream) {
  auto& socket = stream.stream().tcp().socket();
  error_code ignored;
  socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

// How Beast closes a failed connection.
void beast_close_socket(OwnedStream& stream) { CloseTransport(stream); }

template <typename TeardownHandler>
void async_teardown(beast::role_type, OwnedStream& stream, TeardownHandler&& handler) {
  CloseTransport(stream);
  asio::post(stream.get_executor(),
             [handler = std::forward<TeardownHandler>(handler)]() mutable { handler(error_code()); });
}

// A result handed from the strand to the thread blocked on it.
class WaiterBase {
 public:
  virtual ~WaiterBase() = default;
  virtual void Fail(const Status& status) = 0;
};

template <typename T>
class Waiter final : public WaiterBase {
 public:
  void Set(T value) {
    std::lock_guard lock(mutex_);
    if (value_) return;
    value_ = std::move(value);
    ready_.notify_all();
  }
  void Fail(const Status& status) override { Set(T(status)); }
  T Wait() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [this] { return value_.has_value(); });
    return std::move(*value_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::optional<T> value_;
};

// Completes a Waiter once: with the operation's result, or, when the operation is dropped
// unanswered (its io_context went away), with "closed".
template <typename T>
class Completion {
 public:
  explicit Completion(std::shared_ptr<Waiter<T>> waiter) : waiter_(std::move(waiter)) {}
  Completion(Completion&&) noexcept = default;
  Completion& operator=(Completion&&) noexcept = default;
  ~Completion() {
    if (waiter_) waiter_->Set(T(UnavailableError(std::string(kClosedText))));
  }
  void operator()(T value) {
    if (waiter_) waiter_->Set(std::move(value));
    waiter_.reset();
  }

 private:
  std::shared_ptr<Waiter<T>> waiter_;
};

// One WebSocket connection. Beast state is touched only on the stream's strand; the public
// calls post there and wait.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(OwnedStream stream, std::shared_ptr<IoGate> gate, WebSocketOptions options)
      : ws_(std::move(stream)), gate_(std::move(gate)), options_(options) {
    websocket::stream_base::timeout timeout;
    timeout.handshake_timeout = options_.handshake_timeout;
    timeout.idle_timeout = options_.idle_timeout;
    timeout.keep_alive_pings = true;
    ws_.set_option(timeout);
    ws_.read_message_max(options_.max_message_bytes);
    // One message, one frame: frames stay within max_message_bytes and nothing is split.
    ws_.auto_fragment(false);
    // A client masks what it sends through this buffer, one socket write per buffer-full:
    // Beast's 4 KiB default costs sixteen writes per 64 KiB message (the SSH relay's data).
    ws_.write_buffer_bytes(std::clamp<size_t>(options_.max_message_bytes, 4096, 64 * 1024));
  }

  websocket::stream<OwnedStream>& ws() { return ws_; }

  Result<WebSocketMessage> Read() {
    auto waiter = NewWaiter<Result<WebSocketMessage>>();
    Completion<Result<WebSocketMessage>> done(waiter);
    if (!Post([self = shared_from_this(), done = std::move(done)]() mutable {
          self->StartRead(std::move(done));
        })) {
      return UnavailableError(std::string(kClosedText));
    }
    return waiter->Wait();
  }

  Status Write(std::string_view data, bool binary) {
    if (data.size() > options_.max_message_bytes) {
      return InvalidArgumentError("a WebSocket message of " + std::to_string(data.size()) +
                                  " bytes is larger than the " +
                                  std::to_string(options_.max_message_bytes) + "-byte limit");
    }
    std::lock_guard lock(write_mutex_);
    auto waiter = NewWaiter<Status>();
    Completion<Status> done(waiter);
    // The operation owns its copy: a caller that gives up (at shutdown) must not leave Beast
    // writing from a buffer that is gone.
    auto payload = std::make_shared<std::string>(data);
    if (!Post([self = shared_from_this(), payload, binary, done = std::move(done)]() mutable {
          self->StartWrite(std::move(payload), binary, std::move(done));
        })) {
      return UnavailableError(std::string(kClosedText));
    }
    return waiter->Wait();
  }

  Status Close(std::uint16_t code, std::string_view reason) {
    std::lock_guard lock(write_mutex_);
    auto waiter = NewWaiter<Status>();
    Completion<Status> done(waiter);
    // A close frame's reason is at most 123 bytes.
    websocket::close_reason close_reason(static_cast<websocket::close_code>(code),
                                        reason.substr(0, 123));
    if (!Post([self = shared_from_this(), close_reason, done = std::move(done)]() mutable {
          self->StartClose(close_reason, std::move(done));
        })) {
      return UnavailableError(std::string(kClosedText));
    }
    return waiter->Wait();
  }

  void Abort() {
    Post([self = shared_from_this()] {
      self->aborted_ = true;
      CloseTransport(self->ws_.next_layer());
    });
  }

  // The io_context is going away: every blocked call fails now.
  void Detach() {
    std::vector<std::shared_ptr<WaiterBase>> pending;
    {
      std::lock_guard lock(waiters_mutex_);
      for (auto& weak : waiters_) {
        if (auto waiter = weak.lock()) pending.push_back(std::move(waiter));
      }
      waiters_.clear();
    }
    for (auto& waiter : pending) waiter->Fail(UnavailableError("the server is stopping"));
  }

  // Runs `fn` on the connection's strand, unless the io_context is being stopped.
  template <typename Fn>
  bool Post(Fn&& fn) {
    std::lock_guard lock(gate_->mutex);
    if (!gate_->open) return false;
    asio::post(ws_.get_executor(), std::forward<Fn>(fn));
    return true;
  }

  // Wakes the server session waiting for its handler (strand only).
  void SetSessionTimer(asio::steady_timer* timer) { session_timer_ = timer; }
  void WakeSession() {
    if (session_timer_) session_timer_->cancel();
  }

 private:
  template <typename T>
  std::shared_ptr<Waiter<T>> NewWaiter() {
    auto waiter = std::make_shared<Waiter<T>>();
    std::lock_guard lock(waiters_mutex_);
    std::erase_if(waiters_, [](const std::weak_ptr<WaiterBase>& weak) { return weak.expired(); });
    waiters_.push_back(waiter);
    return waiter;
  }

  void StartRead(Completion<Result<WebSocketMessage>> done) {
    if (read_pending_) {
      done(FailedPreconditionError("another Read is already waiting on this WebSocket"));
      return;
    }
    if (peer_closed_ || aborted_) {
      done(FailedPreconditionError(std::string(kClosedText)));
      return;
    }
    if (close_done_) {
      // Our Close already read the peer's answer: that is this Read's message.
      done(PeerClose());
      return;
    }
    read_pending_ = true;
    ws_.async_read(read_buffer_, [self = shared_from_this(), done = std::move(done)](
                                     error_code ec, size_t) mutable {
      self->read_pending_ = false;
      done(self->ReadResult(ec));
    });
  }

  Result<WebSocketMessage> ReadResult(const error_code& ec) {
    WebSocketMessage message;
    if (!ec) {
      message.type =
          ws_.got_text() ? WebSocketMessage::Type::kText : WebSocketMessage::Type::kBinary;
      message.data = beast::buffers_to_string(read_buffer_.data());
      read_buffer_.consume(read_buffer_.size());
      return message;
    }
    read_buffer_.consume(read_buffer_.size());
    // The closing handshake ended, whichever side began it: the peer's code and reason.
    if (ec == websocket::error::closed || (local_close_ && ec == asio::error::operation_aborted &&
                                           ws_.reason().code != websocket::close_code::none)) {
      return PeerClose();
    }
    return Failure(ec, "reading from");
  }

  // The peer's close frame, once the closing handshake is over.
  WebSocketMessage PeerClose() {
    peer_closed_ = true;
    WebSocketMessage message;
    message.type = WebSocketMessage::Type::kClose;
    message.close_code = static_cast<std::uint16_t>(ws_.reason().code);
    if (message.close_code == 0) message.close_code = 1005;  // no status code was present
    message.data = std::string(ws_.reason().reason.c_str());
    return message;
  }

  void StartWrite(std::shared_ptr<std::string> payload, bool binary, Completion<Status> done) {
    if (local_close_ || peer_closed_ || aborted_) {
      done(FailedPreconditionError(std::string(kClosedText)));
      return;
    }
    ws_.binary(binary);
    ws_.async_write(asio::buffer(*payload),
                    [self = shared_from_this(), payload, done = std::move(done)](
                        error_code ec, size_t) mutable {
                      done(ec ? self->Failure(ec, "writing to") : Status::Ok());
                    });
  }

  void StartClose(websocket::close_reason reason, Completion<Status> done) {
    if (local_close_ || peer_closed_ || aborted_ || !ws_.is_open()) {
      done(Status::Ok());  // already closing or closed: nothing more to say
      return;
    }
    local_close_ = true;
    ws_.async_close(reason, [self = shared_from_this(), done = std::move(done)](
                                error_code ec) mutable {
      self->close_done_ = !ec;
      done(!ec || ec == websocket::error::closed || ec == asio::error::operation_aborted
               ? Status::Ok()
               : self->Failure(ec, "closing the connection to"));
    });
  }

  Status Failure(const error_code& ec, std::string_view doing) const {
    std::string what = std::string(doing) + " the WebSocket peer";
    if (aborted_) return UnavailableError(what + ": the connection was aborted");
    if (ec == beast::error::timeout) {
      return DeadlineExceededError(what + ": nothing arrived (not even a pong) for " +
                                   std::to_string(options_.idle_timeout.count()) + " ms");
    }
    if (ec == websocket::error::message_too_big) {
      return ResourceExhaustedError(what + ": a message was larger than " +
                                    std::to_string(options_.max_message_bytes) +
                                    " bytes; closed with 1009");
    }
    if (ec == websocket::condition::protocol_violation) {
      return InvalidArgumentError(what + ": the peer broke the WebSocket protocol (" +
                                  ec.message() + "); closed");
    }
    return UnavailableError(what + ": " + ec.message());
  }

  websocket::stream<OwnedStream> ws_;
  const std::shared_ptr<IoGate> gate_;
  const WebSocketOptions options_;
  std::mutex write_mutex_;  // one Write or Close at a time, from any thread
  std::mutex waiters_mutex_;
  std::vector<std::weak_ptr<WaiterBase>> waiters_;
  // Strand only.
  beast::flat_buffer read_buffer_;
  bool read_pending_ = false;
  bool local_close_ = false;
  bool close_done_ = false;  // our closing handshake ended, the peer's frame read by it
  bool peer_closed_ = false;
  bool aborted_ = false;
  asio::steady_timer* session_timer_ = nullptr;
};

// A client connection's own io_context and thread. The TLS context outlives the stream.
struct ClientRuntime {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::optional<asio::ssl::context> tls;
  std::shared_ptr<IoGate> gate = std::make_shared<IoGate>();
  std::thread thread;

  void Start() {
    thread = std::thread([this] { io.run(); });
  }
  void Stop() {
    {
      std::lock_guard lock(gate->mutex);
      gate->open = false;
    }
    work.reset();
    io.stop();
    if (thread.joinable()) thread.join();
  }
};

class WebSocketHandle final : public WebSocket {
 public:
  WebSocketHandle(std::shared_ptr<Connection> connection, std::string subprotocol,
                  std::unique_ptr<ClientRuntime> runtime = nullptr)
      : connection_(std::move(connection)),
        subprotocol_(std::move(subprotocol)),
        runtime_(std::move(runtime)) {}
  ~WebSocketHandle() override {
    connection_->Abort();
    if (runtime_) {
      runtime_->Stop();
      connection_->Detach();
      // The io_context's pending operations hold the connection: it goes with them.
      connection_.reset();
      runtime_.reset();
    }
  }

  const std::string& subprotocol() const override { return subprotocol_; }
  Result<WebSocketMessage> Read() override { return connection_->Read(); }
  Status Write(std::string_view data, bool binary) override {
    return connection_->Write(data, binary);
  }
  Status Close(std::uint16_t code, std::string_view reason) override {
    return connection_->Close(code, reason);
  }
  void Abort() override { connection_->Abort(); }

 private:
  std::shared_ptr<Connection> connection_;
  const std::string subprotocol_;
  std::unique_ptr<ClientRuntime> runtime_;
};

bool HeaderHasToken(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.size() == token.size() &&
        ::strncasecmp(item.data(), token.data(), token.size()) == 0) {
      return true;
    }
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// RFC 7230 token characters: what a subprotocol name may hold.
bool IsToken(std::string_view text) {
  return !text.empty() && text.find_first_not_of("!#$%&'*+-.^_`|~0123456789"
                                                 "abcdefghijklmnopqrstuvwxyz"
                                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ") ==
                              std::string_view::npos;
}

// The start of a refusal's body, printable, for an error message.
std::string BodyExcerpt(std::string_view body) {
  std::string excerpt;
  for (char c : body.substr(0, 300)) {
    excerpt += (c >= 0x20 && c < 0x7f) ? c : ' ';
  }
  return excerpt;
}

asio::awaitable<Status> OpenClient(ClientRuntime& runtime, const ParsedUrl& url,
                                   const WebSocketConnectOptions& options,
                                   std::shared_ptr<Connection>& connection,
                                   std::string& subprotocol, Response& declined) {
  const auto deadline = Clock::now() + options.client.request_timeout;
  const auto connect_deadline = std::min(deadline, Clock::now() + options.client.connect_timeout);
  std::unique_ptr<AnyStream> stream;
  Status dialed = co_await DialStream(runtime.io, url, runtime.tls ? &*runtime.tls : nullptr,
                                      connect_deadline, deadline, stream);
  if (!dialed.ok()) co_return dialed;
  stream->tcp().expires_never();  // the WebSocket keeps its own time from here
  WebSocketOptions websocket_options = options.websocket;
  websocket_options.handshake_timeout =
      std::min(websocket_options.handshake_timeout,
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  connection = std::make_shared<Connection>(OwnedStream(std::move(stream), ""), runtime.gate,
                                            websocket_options);
  std::string offered;
  for (const std::string& name : options.subprotocols) {
    offered += (offered.empty() ? "" : ", ") + name;
  }
  connection->ws().set_option(websocket::stream_base::decorator(
      [headers = options.headers, agent = options.client.user_agent,
       offered](websocket::request_type& request) {
        for (const auto& [name, value] : headers.all()) request.set(name, value);
        request.set(http::field::user_agent, agent);
        if (!offered.empty()) request.set(http::field::sec_websocket_protocol, offered);
      }));
  const bool default_port =
      (url.scheme == "http" && url.port == 80) || (url.scheme == "https" && url.port == 443);
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  if (!default_port) host += ":" + std::to_string(url.port);
  websocket::response_type response;
  auto [ec] = co_await connection->ws().async_handshake(response, host, url.path + options.target,
                                                        kUseAwaitable);
  const std::string where = HostAndPort(url);
  if (ec == websocket::error::upgrade_declined || (ec && response.result_int() != 0 &&
                                                   response.result_int() != 101)) {
    declined.status = static_cast<int>(response.result_int());
    for (const auto& field : response) declined.headers.Add(field.name_string(), field.value());
    declined.body = response.body();
    co_return Status(StatusCodeForHttpStatus(declined.status),
                     "the server at " + where + " refused the WebSocket upgrade with HTTP " +
                         std::to_string(declined.status) + " " +
                         std::string(ReasonPhrase(declined.status)) +
                         (declined.body.empty() ? "" : ": " + BodyExcerpt(declined.body)));
  }
  if (ec == beast::error::timeout) {
    co_return DeadlineExceededError("the WebSocket handshake with " + where + " timed out");
  }
  if (ec) {
    co_return UnavailableError("the WebSocket handshake with " + where + " failed: " +
                               ec.message());
  }
  auto chosen = response.find(http::field::sec_websocket_protocol);
  if (chosen != response.end()) subprotocol = std::string(chosen->value());
  if (!subprotocol.empty() && std::find(options.subprotocols.begin(), options.subprotocols.end(),
                                        subprotocol) == options.subprotocols.end()) {
    co_return InvalidArgumentError("the server at " + where + " chose the subprotocol \"" +
                                   BodyExcerpt(subprotocol) + "\", which was not offered");
  }
  co_return Status::Ok();
}

}  // namespace

bool IsWebSocketUpgrade(const Request& request) {
  auto upgrade = request.headers.Get("Upgrade");
  auto connection = request.headers.Get("Connection");
  return upgrade && connection && HeaderHasToken(*upgrade, "websocket") &&
         HeaderHasToken(*connection, "upgrade");
}

std::vector<std::string> OfferedSubprotocols(const Request& request) {
  std::vector<std::string> offered;
  for (const auto& [name, value] : request.headers.all()) {
    if (name.size() != 22 || ::strncasecmp(name.data(), "Sec-WebSocket-Protocol", 22) != 0) {
      continue;
    }
    std::string_view rest = value;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (IsToken(item)) offered.emplace_back(item);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return offered;
}

Response AcceptWebSocket(std::string subprotocol, WebSocketHandler handler,
                         WebSocketOptions options) {
  Response response;
  response.status = 101;
  response.websocket = std::make_shared<const WebSocketAccept>(
      WebSocketAccept{std::move(subprotocol), std::move(handler), options});
  return response;
}

asio::awaitable<void> ServeWebSocket(std::unique_ptr<AnyStream> stream, std::string early_bytes,
                                     const http::request<http::string_body>& request,
                                     const WebSocketAccept& accept, std::shared_ptr<IoGate> gate,
                                     std::string server_header) {
  stream->tcp().expires_never();  // the WebSocket keeps its own time from here
  auto connection = std::make_shared<Connection>(
      OwnedStream(std::move(stream), std::move(early_bytes)), std::move(gate), accept.options);
  connection->ws().set_option(websocket::stream_base::decorator(
      [subprotocol = accept.subprotocol, server_header](websocket::response_type& response) {
        response.set(http::field::server, server_header);
        if (!subprotocol.empty()) response.set(http::field::sec_websocket_protocol, subprotocol);
      }));
  auto [accept_ec] = co_await connection->ws().async_accept(request, kUseAwaitable);
  if (accept_ec) {
    Log().Debug("WebSocket handshake refused", {{"error", accept_ec.message()}});
    co_return;
  }

  // The handler runs on a thread of its own; this session waits for it, so that a stopping
  // server can fail its blocked calls and join it.
  asio::steady_timer finished(co_await asio::this_coro::executor, Clock::time_point::max());
  connection->SetSessionTimer(&finished);
  auto done = std::make_shared<std::atomic<bool>>(false);
  struct JoinOnExit {
    ~JoinOnExit() {
      connection->Detach();
      if (thread.joinable()) thread.join();
      connection->SetSessionTimer(nullptr);
    }
    std::shared_ptr<Connection> connection;
    std::thread thread;
  } handler_thread{connection, {}};
  handler_thread.thread =
      std::thread([handler = accept.handler,
                   socket = std::make_unique<WebSocketHandle>(connection, accept.subprotocol),
                   connection, done]() mutable {
        try {
          handler(std::move(socket));
        } catch (const std::exception& e) {
          Log().Error("WebSocket handler threw", {{"error", e.what()}});
        }
        socket.reset();
        done->store(true);
        connection->Post([connection] { connection->WakeSession(); });
      });
  while (!done->load()) {
    co_await finished.async_wait(kUseAwaitable);
  }
}

Result<std::unique_ptr<WebSocket>> ConnectWebSocket(const WebSocketConnectOptions& options,
                                                    Response* refusal) {
  UPLINK_ASSIGN_OR_RETURN(ParsedUrl url, ParseBaseUrl(options.client.base_url));
  Request head;
  head.target = options.target.empty() ? "/" : options.target;
  head.headers = options.headers;
  UPLINK_RETURN_IF_ERROR(ValidateRequest(head));
  for (const std::string& name : options.subprotocols) {
    if (!IsToken(name)) {
      return InvalidArgumentError("\"" + BodyExcerpt(name) + "\" is not a valid subprotocol name");
    }
  }
  if (options.client.connect_timeout.count() <= 0 || options.client.request_timeout.count() <= 0 ||
      options.websocket.idle_timeout.count() <= 0 ||
      options.websocket.handshake_timeout.count() <= 0) {
    return InvalidArgumentError("WebSocket timeouts must be positive");
  }
  auto runtime = std::make_unique<ClientRuntime>();
  UPLINK_RETURN_IF_ERROR(MakeClientTlsContext(url, options.client, runtime->tls));
  runtime->Start();

  auto waiter = std::make_shared<Waiter<Status>>();
  std::shared_ptr<Connection> connection;
  std::string subprotocol;
  Response declined;
  declined.status = 0;  // set only when the server answered; a dial failure leaves it 0
  asio::co_spawn(runtime->io, OpenClient(*runtime, url, options, connection, subprotocol, declined),
                 [waiter](std::exception_ptr error, Status status) {
                   waiter->Set(error ? InternalError("the WebSocket handshake threw") : status);
                 });
  Status opened = waiter->Wait();
  if (!opened.ok()) {
    runtime->Stop();
    if (connection) connection->Detach();
    connection.reset();
    if (refusal && declined.status != 0) *refusal = std::move(declined);
    return opened;
  }
  return std::unique_ptr<WebSocket>(
      std::make_unique<WebSocketHandle>(std::move(connection), std::move(subprotocol),
                                        std::move(runtime)));
}

}  // namespace uplink::net
