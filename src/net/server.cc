// HttpServer over Beast: one coroutine per connection, each on its own strand.
#include "net/server.h"

#include <openssl/ssl.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cstdio>
#include <ctime>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/files.h"
#include "common/log.h"
#include "common/text.h"
#include "common/thread_name.h"
#include "net/stream_impl.h"
#include "net/tls_library.h"
#include "net/websocket_impl.h"

namespace uplink::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

constexpr auto kUseAwaitable = asio::as_tuple(asio::use_awaitable);
// After an error reply, unread request bytes are drained for at most this long (and this
// many bytes) so that closing does not reset the connection before the client reads the reply.
constexpr std::chrono::milliseconds kLingerTime{1'000};
constexpr size_t kLingerBytes = 1 << 20;

const log::Logger& Log() {
  static const log::Logger logger("net.server");
  return logger;
}

// RFC 9110 IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
std::string HttpDate() {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char out[40];
  std::snprintf(out, sizeof(out), "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday],
                tm.tm_mday, kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return out;
}

// One answer handed from any thread to the session waiting for it on its strand: a request's
// Response, or the next piece of a streamed body.
template <typename Answer>
class BasicExchange : public std::enable_shared_from_this<BasicExchange<Answer>> {
 public:
  BasicExchange(std::shared_ptr<IoGate> gate, asio::any_io_executor strand,
                asio::steady_timer* wake)
      : gate_(std::move(gate)), strand_(std::move(strand)), wake_(wake) {}

  // Any thread. The first answer wins; returns whether this call was it.
  bool Deliver(Answer answer) {
    std::lock_guard gate_lock(gate_->mutex);
    std::lock_guard lock(mutex_);
    if (answered_ || !gate_->open) return false;
    answered_ = true;
    answer_ = std::move(answer);
    if (strand_) asio::post(*strand_, [self = this->shared_from_this()] { self->Wake(); });
    return true;
  }

  // On the session's strand.
  std::optional<Answer> Take() {
    std::lock_guard lock(mutex_);
    return std::exchange(answer_, std::nullopt);
  }

  // The session is done with this request (or gone): drop its timer and executor, which must
  // not outlive the io_context while a Reply may still hold this object.
  void Detach() {
    std::lock_guard lock(mutex_);
    wake_ = nullptr;
    strand_.reset();
  }

 private:
  void Wake() {
    std::lock_guard lock(mutex_);
    if (wake_) wake_->cancel();
  }

  std::shared_ptr<IoGate> gate_;
  std::mutex mutex_;
  bool answered_ = false;
  std::optional<Answer> answer_;
  std::optional<asio::any_io_executor> strand_;  // the connection's strand
  asio::steady_timer* wake_;
};

using Exchange = BasicExchange<Response>;
// The next piece of a streamed body, or nothing at its end.
using ChunkExchange = BasicExchange<std::optional<std::string>>;

// Held by every copy of a Reply; if the handler drops them all unanswered, the client gets 500.
struct ReplyHolder {
  explicit ReplyHolder(std::shared_ptr<Exchange> e) : exchange(std::move(e)) {}
  ~ReplyHolder() {
    if (exchange->Deliver(Response::Text(500, "internal error: request was not answered\n"))) {
      Log().Error("handler dropped its reply without answering");
    }
  }
  std::shared_ptr<Exchange> exchange;
};

template <typename Answer>
struct DetachOnExit {
  ~DetachOnExit() { exchange->Detach(); }
  std::shared_ptr<BasicExchange<Answer>> exchange;
};

// "1a\r\n...\r\n": one chunk of a chunked body (RFC 9112 section 7.1).
std::string Chunk(std::string_view data) {
  char size[20];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string chunk = size;
  chunk.append(data);
  chunk.append("\r\n");
  return chunk;
}

// The request line and header fields; the body is moved in once it has been read.
Request RequestHead(const http::request<http::string_body>& message, std::string remote_address) {
  Request request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  for (const auto& field : message) {
    request.headers.Add(field.name_string(), field.value());
  }
  request.remote_address = std::move(remote_address);
  return request;
}

bool HasConnectionClose(const Headers& headers) {
  auto value = headers.Get("Connection");
  return value && EqualsIgnoringAsciiCase(*value, "close");
}

bool StatusForbidsBody(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

class ServerImpl final : public HttpServer {
 public:
  ServerImpl(ServerOptions options, RequestHandler handler)
      : options_(std::move(options)), handler_(std::move(handler)) {}
  ~ServerImpl() override { Stop(); }

  Status Listen() {
    std::string host;
    std::uint16_t port = 0;
    UPLINK_RETURN_IF_ERROR(SplitHostPort(options_.listen, host, port));
    if (options_.tls) UPLINK_RETURN_IF_ERROR(SetUpTls(*options_.tls));

    io_ = std::make_unique<asio::io_context>(options_.threads);
    boost::system::error_code ec;
    tcp::endpoint endpoint;
    auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
    if (!ec) {
      endpoint = tcp::endpoint(address, port);
    } else {
      tcp::resolver resolver(*io_);
      auto results = resolver.resolve(host, std::to_string(port), ec);
      if (ec || results.empty()) {
        return UnavailableError("resolving listen host " + host + ": " + ec.message());
      }
      endpoint = results.begin()->endpoint();
    }
    // The acceptor runs on a thread of its own: handlers may block their I/O thread (the
    // console's wait on its store), and an accept loop waiting behind them lets the kernel's
    // accept queue fill, after which it drops connection attempts (clients see resets and
    // retransmitted SYNs, the server sees nothing).
    accept_io_ = std::make_unique<asio::io_context>(1);
    // Between connections io_ has no work of its own; its threads wait for the next one.
    io_work_.emplace(io_->get_executor());
    acceptor_ = std::make_unique<tcp::acceptor>(*accept_io_);
    acceptor_->open(endpoint.protocol(), ec);
    if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(endpoint, ec);
    if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return UnavailableError("listening on " + options_.listen + ": " + ec.message());
    port_ = acceptor_->local_endpoint(ec).port();
    if (ec) return UnavailableError("listening on " + options_.listen + ": " + ec.message());

    asio::co_spawn(*accept_io_, AcceptLoop(), asio::detached);
    accept_thread_ = std::thread([this] {
      NameThisThread("http-accept");
      Run(*accept_io_);
    });
    for (int i = 0; i < options_.threads; ++i) {
      threads_.emplace_back([this] {
        NameThisThread("http-io");
        Run(*io_);
      });
    }
    Log().Info("listening",
               {{"address", host}, {"port", port_}, {"tls", options_.tls.has_value()}});
    return Status::Ok();
  }

  std::uint16_t port() const override { return port_; }

  void Stop() override {
    std::lock_guard stop_lock(stop_mutex_);
    if (!io_) return;
    {
      std::lock_guard lock(gate_->mutex);
      gate_->open = false;
    }
    // No session starts once the accept thread is joined.
    if (accept_io_) accept_io_->stop();
    if (accept_thread_.joinable()) accept_thread_.join();
    io_->stop();
    for (auto& thread : threads_) thread.join();
    threads_.clear();
    // Destroying an io_context destroys what it still holds: the acceptor's, a socket accepted
    // but not yet handed over (registered with io_, so before io_); io_'s, the suspended
    // connection coroutines, closing their sockets.
    acceptor_.reset();
    accept_io_.reset();
    io_work_.reset();
    io_.reset();
    if (port_ != 0) Log().Info("stopped", {{"port", port_}});
  }

 private:
  Status SetUpTls(const TlsServerConfig& tls) {
    UPLINK_RETURN_IF_ERROR(LoadTlsLibrary());
    tls_ = std::make_unique<ssl::context>(ssl::context::tls_server);
    tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                      ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(tls_->native_handle(), TLS1_2_VERSION);
    return LoadCertificateAndKey(*tls_, tls.cert_chain_pem, tls.private_key_pem,
                                 "TLS certificate");
  }

  static void Run(asio::io_context& io) {
    // Connection coroutines catch their own errors; this keeps a thread alive regardless.
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {
        Log().Error("unexpected exception in server loop", {{"error", e.what()}});
      }
    }
  }

  asio::awaitable<void> AcceptLoop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_->async_accept(asio::make_strand(*io_), kUseAwaitable);
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) {
        Log().Warn("accept failed", {{"error", ec.message()}});
        // Out of descriptors, typically: back off instead of spinning.
        asio::steady_timer pause(co_await asio::this_coro::executor, std::chrono::milliseconds(50));
        co_await pause.async_wait(kUseAwaitable);
        continue;
      }
      if (connections_.fetch_add(1) >= options_.max_connections) {
        connections_.fetch_sub(1);
        Tell("refused");  // before the close, which the client may see at once
        socket.close(ec);
        // A flood past the limit would otherwise write a line per connection.
        ++refused_unlogged_;
        const auto now = std::chrono::steady_clock::now();
        if (now >= next_refusal_log_) {
          Log().Warn("connections refused: too many connections",
                     {{"max_connections", options_.max_connections},
                      {"refused_since_last_line", refused_unlogged_}});
          refused_unlogged_ = 0;
          next_refusal_log_ = now + kRefusalLogInterval;
        }
        continue;
      }
      Tell("accepted");
      auto executor = socket.get_executor();
      if (tls_) {
        asio::co_spawn(executor,
                       Session(beast::ssl_stream<beast::tcp_stream>(std::move(socket), *tls_)),
                       asio::detached);
      } else {
        asio::co_spawn(executor, Session(beast::tcp_stream(std::move(socket))), asio::detached);
      }
    }
  }

  template <typename Stream>
  asio::awaitable<void> Session(Stream stream) {
    struct Release {
      ~Release() {
        server.connections_.fetch_sub(1);
        server.Tell("closed");
      }
      ServerImpl& server;
    } release{*this};
    try {
      auto& tcp_stream = beast::get_lowest_layer(stream);
      boost::system::error_code ec;
      std::string remote = tcp_stream.socket().remote_endpoint(ec).address().to_string();
      if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
        tcp_stream.expires_after(options_.read_timeout);
        auto [handshake_ec] =
            co_await stream.async_handshake(ssl::stream_base::server, kUseAwaitable);
        if (handshake_ec) {
          Log().Debug("TLS handshake failed",
                      {{"remote", remote}, {"error", handshake_ec.message()}});
          co_return;
        }
      }
      co_await Serve(std::make_unique<StreamAdapter<Stream>>(std::move(stream)), std::move(remote));
    } catch (const std::exception& e) {
      Log().Error("connection failed", {{"error", e.what()}});
    }
  }

  // `owned` moves on to the WebSocket layer when a handler accepts an upgrade.
  asio::awaitable<void> Serve(std::unique_ptr<AnyStream> owned, std::string remote) {
    AnyStream& stream = *owned;
    auto& tcp_stream = stream.tcp();
    beast::flat_buffer buffer;
    for (bool first = true;; first = false) {
      // Wait for the first byte of the next request under the idle timeout (the read timeout
      // for a new connection), then give the whole request the read timeout.
      // On a new connection the read timeout runs from the accept, not from the first byte.
      bool deadline_set = false;
      if (buffer.size() == 0) {
        tcp_stream.expires_after(first ? options_.read_timeout : options_.idle_timeout);
        deadline_set = first;
        auto [read_ec, bytes] =
            co_await stream.async_read_some(buffer.prepare(4096), kUseAwaitable);
        if (read_ec) co_return;
        buffer.commit(bytes);
      }
      if (!deadline_set) tcp_stream.expires_after(options_.read_timeout);
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(
          std::min<size_t>(options_.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
      // Until the header is read only the upper bound applies (Beast checks Content-Length
      // against it when the header ends).
      parser.body_limit(options_.max_body_bytes);
      auto [header_ec, header_bytes] =
          co_await http::async_read_header(stream, buffer, parser, kUseAwaitable);
      Request request;
      boost::system::error_code read_ec = header_ec;
      if (!read_ec) {
        request = RequestHead(parser.get(), remote);
        size_t body_limit = options_.max_body_bytes;
        if (options_.body_limit_for) {
          body_limit = std::min(body_limit, options_.body_limit_for(request));
        }
        // Beast checks Content-Length against the limit only while parsing the header, so the
        // tighter limit is checked here; chunked bodies are counted against it as they arrive.
        auto content_length = parser.content_length();
        if (content_length && *content_length > body_limit) {
          read_ec = http::error::body_limit;
        } else {
          parser.body_limit(body_limit);
          auto [body_ec, body_bytes] =
              co_await http::async_read(stream, buffer, parser, kUseAwaitable);
          read_ec = body_ec;
        }
      }
      if (read_ec) {
        int status = 0;
        if (read_ec == http::error::header_limit) {
          status = 431;
        } else if (read_ec == http::error::body_limit) {
          status = 413;
        } else if (read_ec.category() ==
                       http::make_error_code(http::error::bad_method).category() &&
                   read_ec != http::error::end_of_stream &&
                   read_ec != http::error::partial_message) {
          status = 400;
        }
        Log().Debug("request not read", {{"remote", remote}, {"error", read_ec.message()}});
        if (status == 0) {
          // Not when the server stops, which aborts what it was reading.
          if (read_ec != asio::error::operation_aborted) {
            Lost(read_ec == beast::error::timeout ? "read_timeout" : "client_closed");
          }
        } else {
          Response refusal = options_.refusal
                                 ? options_.refusal(status)
                                 : Response::Text(status, std::string(ReasonPhrase(status)) + "\n");
          co_await Write(stream, std::move(refusal), /*head=*/false, /*keep_alive=*/false);
          co_await Linger(stream);
        }
        co_return;
      }

      auto message = parser.release();
      const bool head = message.method() == http::verb::head;
      const bool client_keep_alive = message.keep_alive();
      const bool upgrade_requested = IsWebSocketUpgrade(request);
      request.body = std::move(message.body());
      // The request moves into the handler; the debug line's fields are kept only when written.
      const bool log_request = log::Enabled(log::Level::kDebug);
      std::string method;
      std::string path;
      if (log_request) {
        method = request.method;
        path = request.Path();
      }

      asio::steady_timer wake(co_await asio::this_coro::executor,
                              std::chrono::steady_clock::time_point::max());
      auto exchange = std::make_shared<Exchange>(gate_, wake.get_executor(), &wake);
      DetachOnExit<Response> detach{exchange};
      Invoke(std::move(request), exchange);
      std::optional<Response> response;
      while (!(response = exchange->Take())) {
        co_await wake.async_wait(kUseAwaitable);
      }
      if (log_request) {
        Log().Debug("request", {{"method", method},
                                {"path", path},
                                {"status", response->status},
                                {"remote", remote}});
      }
      if (response->websocket) {
        if (upgrade_requested) {
          co_await ServeWebSocket(std::move(owned), beast::buffers_to_string(buffer.data()),
                                  message, *response->websocket, gate_, options_.server_header);
          co_return;
        }
        Log().Error("handler accepted a WebSocket for a request that is not an upgrade");
        response = Response::Text(500, "internal error\n");
      }
      if (response->stream && !head) {
        co_await WriteStream(stream, std::move(*response));
        co_return;
      }
      const bool keep_alive = client_keep_alive && !HasConnectionClose(response->headers);
      if (!co_await Write(stream, std::move(*response), head, keep_alive) || !keep_alive) {
        co_return;
      }
    }
  }

  void Invoke(Request request, const std::shared_ptr<Exchange>& exchange) {
    auto holder = std::make_shared<ReplyHolder>(exchange);
    // `reply` stays alive here until after the catch, so a throwing handler is answered below
    // rather than by ReplyHolder's "dropped" path.
    const Reply reply = [holder](Response response) {
      holder->exchange->Deliver(std::move(response));
    };
    holder.reset();
    const std::string method = request.method;
    try {
      handler_(std::move(request), reply);
      return;
    } catch (const std::exception& e) {
      Log().Error("handler threw", {{"method", method}, {"error", e.what()}});
    } catch (...) {
      Log().Error("handler threw a non-standard exception", {{"method", method}});
    }
    exchange->Deliver(Response::Text(500, "internal error\n"));
  }

  // Writes `response`; returns false if the connection is no longer usable.
  asio::awaitable<bool> Write(AnyStream& stream, Response response, bool head, bool keep_alive) {
    if (response.status < 100 || response.status > 599) {
      Log().Error("handler returned an invalid status", {{"status", response.status}});
      response = Response::Text(500, "internal error\n");
    }
    http::response<http::string_body> message;
    message.version(11);
    message.result(static_cast<unsigned>(response.status));
    if (auto reason = ReasonPhrase(response.status); !reason.empty()) message.reason(reason);
    for (const auto& [name, value] : response.headers.all()) {
      message.insert(name, value);
    }
    // Framing is ours alone: a handler's own length or encoding would desynchronise the stream.
    message.erase(http::field::content_length);
    message.erase(http::field::transfer_encoding);
    message.set(http::field::date, HttpDate());
    message.set(http::field::server, options_.server_header);
    message.keep_alive(keep_alive);
    if (StatusForbidsBody(response.status)) {
      // RFC 9110 forbids Content-Length on 1xx and 204, and a body on any of these.
    } else {
      message.content_length(response.body.size());
      if (!head) message.body() = std::move(response.body);
    }
    stream.tcp().expires_after(options_.write_timeout);
    auto [ec, bytes] = co_await http::async_write(stream, message, kUseAwaitable);
    if (ec) {
      Log().Debug("response not written", {{"error", ec.message()}});
      if (ec != asio::error::operation_aborted) Lost("write_failed");
    }
    co_return !ec;
  }

  void Lost(std::string_view reason) {
    if (options_.on_request_lost) options_.on_request_lost(reason);
  }

  void Tell(std::string_view connection_event) {
    if (options_.on_connection) options_.on_connection(connection_event);
  }

  // A streamed body: the header, then each piece the stream produces as one chunk, until it
  // ends or the client is gone. The connection closes after it.
  asio::awaitable<void> WriteStream(AnyStream& stream, Response response) {
    struct CancelOnExit {
      ~CancelOnExit() { body->Cancel(); }
      std::shared_ptr<BodyStream> body;
    } cancel{response.stream};
    http::response<http::empty_body> message;
    message.version(11);
    message.result(static_cast<unsigned>(response.status));
    if (auto reason = ReasonPhrase(response.status); !reason.empty()) message.reason(reason);
    for (const auto& [name, value] : response.headers.all()) message.insert(name, value);
    message.erase(http::field::content_length);
    message.set(http::field::date, HttpDate());
    message.set(http::field::server, options_.server_header);
    message.chunked(true);
    message.keep_alive(false);
    http::response_serializer<http::empty_body> serializer(message);
    stream.tcp().expires_after(options_.write_timeout);
    auto [header_ec, header_bytes] =
        co_await http::async_write_header(stream, serializer, kUseAwaitable);
    if (header_ec) co_return;
    asio::steady_timer wake(co_await asio::this_coro::executor,
                            std::chrono::steady_clock::time_point::max());
    for (;;) {
      auto exchange = std::make_shared<ChunkExchange>(gate_, wake.get_executor(), &wake);
      DetachOnExit<std::optional<std::string>> detach{exchange};
      response.stream->Next([exchange](std::optional<std::string> piece) {
        exchange->Deliver(std::move(piece));
      });
      // The next piece may be long in coming (a quiet watch): no deadline while it is.
      stream.tcp().expires_never();
      std::optional<std::optional<std::string>> piece;
      while (!(piece = exchange->Take())) {
        wake.expires_at(std::chrono::steady_clock::time_point::max());
        co_await wake.async_wait(kUseAwaitable);
      }
      bool more = piece->has_value() && !(*piece)->empty();
      std::string bytes = more ? Chunk(**piece) : "0\r\n\r\n";
      stream.tcp().expires_after(options_.write_timeout);
      auto [ec, written] = co_await asio::async_write(stream, asio::buffer(bytes), kUseAwaitable);
      if (ec || !more) co_return;
    }
  }

  // Half-closes and discards what the client still sends, briefly, so its pending writes do
  // not turn our close into a reset that would destroy the error reply before it is read.
  asio::awaitable<void> Linger(AnyStream& stream) {
    auto& tcp_stream = stream.tcp();
    boost::system::error_code ec;
    tcp_stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    tcp_stream.expires_after(
        std::min<std::chrono::milliseconds>(kLingerTime, options_.read_timeout));
    char scratch[16 * 1024];
    for (size_t drained = 0; drained < kLingerBytes;) {
      auto [read_ec, bytes] = co_await stream.async_read_some(asio::buffer(scratch), kUseAwaitable);
      if (read_ec) break;
      drained += bytes;
    }
  }

  const ServerOptions options_;
  const RequestHandler handler_;
  std::unique_ptr<ssl::context> tls_;  // outlives io_, which owns the streams using it
  std::unique_ptr<asio::io_context> io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> io_work_;
  std::unique_ptr<asio::io_context> accept_io_;  // the acceptor's alone
  std::unique_ptr<tcp::acceptor> acceptor_;
  std::thread accept_thread_;
  std::vector<std::thread> threads_;
  std::shared_ptr<IoGate> gate_ = std::make_shared<IoGate>();
  std::atomic<size_t> connections_{0};
  // The accept thread's alone: refusals at max_connections not yet in a log line.
  static constexpr std::chrono::seconds kRefusalLogInterval{10};
  std::uint64_t refused_unlogged_ = 0;
  std::chrono::steady_clock::time_point next_refusal_log_{};
  std::uint16_t port_ = 0;
  std::mutex stop_mutex_;
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(ServerOptions options,
                                                      RequestHandler handler) {
  if (!handler) return InvalidArgumentError("HttpServer needs a request handler");
  if (options.threads < 1) return InvalidArgumentError("HttpServer needs at least one thread");
  if (options.max_connections < 1) return InvalidArgumentError("max_connections must be positive");
  if (options.read_timeout.count() <= 0 || options.idle_timeout.count() <= 0 ||
      options.write_timeout.count() <= 0) {
    return InvalidArgumentError("server timeouts must be positive");
  }
  auto server = std::make_unique<ServerImpl>(std::move(options), std::move(handler));
  UPLINK_RETURN_IF_ERROR(server->Listen());
  return std::unique_ptr<HttpServer>(std::move(server));
}

Result<TlsServerConfig> LoadTlsServerConfig(const std::string& cert_file,
                                            const std::string& key_file) {
  constexpr size_t kMaxPemBytes = 1 << 20;
  TlsServerConfig config;
  UPLINK_ASSIGN_OR_RETURN(config.cert_chain_pem, ReadFileBounded(cert_file, kMaxPemBytes));
  if (config.cert_chain_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return InvalidArgumentError("TLS certificate file " + cert_file + " holds no PEM certificate");
  }
  UPLINK_ASSIGN_OR_RETURN(config.private_key_pem, ReadFileBounded(key_file, kMaxPemBytes));
  if (config.private_key_pem.find("PRIVATE KEY-----") == std::string::npos) {
    return InvalidArgumentError("TLS key file " + key_file + " holds no PEM private key");
  }
  return config;
}

Status SplitHostPort(std::string_view listen, std::string& host, std::uint16_t& port) {
  std::string_view host_part;
  std::string_view port_part;
  if (listen.starts_with('[')) {
    auto close = listen.find("]:");
    if (close == std::string_view::npos) {
      return InvalidArgumentError("\"" + std::string(listen) + "\" is not [IPv6]:PORT");
    }
    host_part = listen.substr(1, close - 1);
    port_part = listen.substr(close + 2);
  } else {
    auto colon = listen.rfind(':');
    if (colon == std::string_view::npos) {
      return InvalidArgumentError("\"" + std::string(listen) + "\" has no :PORT");
    }
    host_part = listen.substr(0, colon);
    port_part = listen.substr(colon + 1);
    if (host_part.find(':') != std::string_view::npos) {
      return InvalidArgumentError("\"" + std::string(listen) +
                                  "\": write IPv6 addresses in brackets, [::1]:PORT");
    }
  }
  if (host_part.empty()) return InvalidArgumentError("\"" + std::string(listen) + "\" has no host");
  std::optional<std::uint64_t> port_number = ParseDecimal(port_part, 0, 65535);
  if (!port_number) {
    return InvalidArgumentError("\"" + std::string(listen) + "\": port must be 0-65535");
  }
  host = std::string(host_part);
  port = static_cast<std::uint16_t>(*port_number);
  return Status::Ok();
}

bool IsLoopbackHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.ends_with('.')) host.remove_suffix(1);
  if (EqualsIgnoringAsciiCase(host, "localhost")) return true;
  boost::system::error_code ec;
  auto address = asio::ip::make_address(std::string(host), ec);
  if (ec) return false;
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).is_loopback();
  }
  return address.is_loopback();
}

}  // namespace uplink::net
