// HttpClient over Beast: each Send runs a private io_context until its exchange is done.
#include "net/client.h"

#include <poll.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "common/text.h"
#include "net/dial_impl.h"
#include "net/stream_impl.h"

namespace uplink::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr auto kUseAwaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t kMaxResponseHeaderBytes = 64 * 1024;
constexpr int kMaxInterimResponses = 16;

// Letters, digits, '-' and '.': what a DNS name (and a certificate's DNS name) may hold.
bool IsPlainHostName(std::string_view host) {
  return host.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") == std::string_view::npos;
}

// A peer that closed, or sent anything, while the connection sat idle cannot carry a request.
bool IdleConnectionIsStale(int fd) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, 0) != 0;
}

class ClientImpl final : public HttpClient {
 public:
  ClientImpl(ClientOptions options, ParsedUrl url)
      : HttpClient(std::move(options)), url_(std::move(url)), authority_(Authority()) {}

  Status SetUpTls() { return MakeClientTlsContext(url_, options_, tls_); }

  Result<Response> Send(Request request) override {
    UPLINK_RETURN_IF_ERROR(ValidateRequest(request));
    std::lock_guard lock(mutex_);
    if (aborted_) return UnavailableError("the HTTP client to " + Where() + " was stopped");
    const auto deadline = Clock::now() + options_.request_timeout;
    Response response;
    Status status;
    io_.restart();
    asio::co_spawn(
        io_, Exchange(request, deadline, response), [&](std::exception_ptr error, Status result) {
          status = error ? InternalError("HTTP exchange threw an exception") : std::move(result);
        });
    io_.run();
    if (!status.ok()) {
      connection_.reset();
      return status;
    }
    return response;
  }

  void Abort() override {
    aborted_ = true;
    // Runs inside the Send under way (io_ is only run there): closing its socket makes the
    // pending read finish with an error, so the exchange ends the normal way.
    asio::post(io_, [this] {
      if (!connection_) return;
      boost::system::error_code ignored;
      connection_->tcp().socket().close(ignored);
    });
  }

 private:
  std::string Authority() const {
    std::string host = url_.host.find(':') != std::string::npos ? "[" + url_.host + "]" : url_.host;
    const bool default_port =
        (url_.scheme == "http" && url_.port == 80) || (url_.scheme == "https" && url_.port == 443);
    return default_port ? host : host + ":" + std::to_string(url_.port);
  }

  // "127.0.0.1:8443" for messages, whatever the port.
  std::string Where() const { return HostAndPort(url_); }

  asio::awaitable<Status> Exchange(const Request& request, Clock::time_point deadline,
                                   Response& response) {
    http::request<http::string_body> message = BuildMessage(request);
    // One transparent retry: a kept-alive connection the server closed while our request was
    // being written is replaced once by a fresh one.
    for (int attempt = 0;; ++attempt) {
      bool reused = connection_ != nullptr;
      // Bytes already read but not consumed by the last response mean the connection is out of
      // step with its replies (extra data after a response): it cannot carry another request.
      if (reused && (buffer_.size() != 0 ||
                     IdleConnectionIsStale(connection_->tcp().socket().native_handle()))) {
        connection_.reset();
        reused = false;
      }
      if (!connection_) {
        Status connected = co_await Connect(deadline);
        if (!connected.ok()) co_return connected;
      }
      // An Abort while connecting found no socket to close.
      if (aborted_) co_return UnavailableError("the HTTP client to " + Where() + " was stopped");
      bool written = false;
      Status status = co_await RoundTrip(message, deadline, written, response);
      if (status.ok() || written || !reused || attempt > 0) co_return status;
      connection_.reset();
    }
  }

  http::request<http::string_body> BuildMessage(const Request& request) const {
    http::request<http::string_body> message;
    message.version(11);
    message.method_string(request.method);
    std::string target = url_.path + (request.target.empty() ? "/" : request.target);
    message.target(target);
    for (const auto& [name, value] : request.headers.all()) message.insert(name, value);
    // Framing and the authority are ours: a stale caller value must not desynchronise the
    // connection or point the request elsewhere.
    message.erase(http::field::content_length);
    message.erase(http::field::transfer_encoding);
    message.erase(http::field::connection);
    message.set(http::field::host, authority_);
    if (message.find(http::field::user_agent) == message.end()) {
      message.set(http::field::user_agent, options_.user_agent);
    }
    message.body() = request.body;
    message.content_length(request.body.size());
    message.keep_alive(true);
    return message;
  }

  asio::awaitable<Status> Connect(Clock::time_point deadline) {
    const auto connect_deadline = std::min(deadline, Clock::now() + options_.connect_timeout);
    buffer_.clear();  // nothing read on an earlier connection belongs to this one
    co_return co_await DialStream(io_, url_, tls_ ? &*tls_ : nullptr, connect_deadline, deadline,
                                  connection_);
  }

  asio::awaitable<Status> RoundTrip(http::request<http::string_body>& message,
                                    Clock::time_point deadline, bool& written, Response& response) {
    AnyStream& stream = *connection_;
    stream.tcp().expires_at(deadline);
    auto [write_ec, sent] = co_await http::async_write(stream, message, kUseAwaitable);
    if (write_ec) co_return TransportError(write_ec, "sending the request to");
    written = true;

    // Interim 1xx responses (100 Continue, 103 Early Hints) precede the real one: skip them.
    // 101 Switching Protocols is final. The deadline and a count bound a server that only
    // ever sends interim responses.
    std::optional<http::response_parser<http::string_body>> parser;
    for (int interim = 0;; ++interim) {
      if (interim > kMaxInterimResponses) {
        co_return UnavailableError("reading the response from " + Where() + ": more than " +
                                   std::to_string(kMaxInterimResponses) +
                                   " interim (1xx) responses");
      }
      parser.emplace();
      parser->header_limit(kMaxResponseHeaderBytes);
      parser->body_limit(options_.max_response_bytes);
      if (message.method() == http::verb::head) parser->skip(true);
      auto [read_ec, received] = co_await http::async_read(stream, buffer_, *parser, kUseAwaitable);
      if (read_ec == http::error::body_limit) {
        co_return ResourceExhaustedError("response from " + Where() + " is larger than " +
                                         std::to_string(options_.max_response_bytes) + " bytes");
      }
      if (read_ec == http::error::header_limit) {
        co_return ResourceExhaustedError("response headers from " + Where() + " are larger than " +
                                         std::to_string(kMaxResponseHeaderBytes) + " bytes");
      }
      if (read_ec) co_return TransportError(read_ec, "reading the response from");
      unsigned code = parser->get().result_int();
      if (code < 100 || code > 199 || code == 101) break;
    }

    auto& reply = parser->get();
    response.status = static_cast<int>(reply.result_int());
    for (const auto& field : reply) response.headers.Add(field.name_string(), field.value());
    response.body = std::move(reply.body());
    if (!reply.keep_alive()) connection_.reset();
    co_return Status::Ok();
  }

  Status TransportError(const boost::system::error_code& ec, std::string_view doing) const {
    if (ec == beast::error::timeout) {
      return DeadlineExceededError(std::string(doing) + " " + Where() + " timed out after " +
                                   std::to_string(options_.request_timeout.count()) + " ms");
    }
    if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
        ec == asio::error::eof || ec == ssl::error::stream_truncated) {
      return UnavailableError(std::string(doing) + " " + Where() +
                              ": the connection closed before the exchange was complete");
    }
    if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
      return UnavailableError(std::string(doing) + " " + Where() +
                              ": malformed HTTP: " + ec.message());
    }
    return UnavailableError(std::string(doing) + " " + Where() + ": " + ec.message());
  }

  const ParsedUrl url_;
  const std::string authority_;  // the Host header
  std::mutex mutex_;             // serialises Send; everything below is used under it
  asio::io_context io_{1};
  std::optional<ssl::context> tls_;
  std::unique_ptr<AnyStream> connection_;  // the kept-alive connection, if any
  beast::flat_buffer buffer_;
  std::atomic<bool> aborted_{false};
};

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::Create(ClientOptions options) {
  UPLINK_ASSIGN_OR_RETURN(ParsedUrl url, ParseBaseUrl(options.base_url));
  if (options.connect_timeout.count() <= 0 || options.request_timeout.count() <= 0) {
    return InvalidArgumentError("client timeouts must be positive");
  }
  if (options.max_response_bytes == 0) {
    return InvalidArgumentError("max_response_bytes must be positive");
  }
  auto client = std::make_unique<ClientImpl>(std::move(options), std::move(url));
  UPLINK_RETURN_IF_ERROR(client->SetUpTls());
  return std::unique_ptr<HttpClient>(std::move(client));
}

Result<ParsedUrl> ParseBaseUrl(std::string_view text) {
  namespace urls = boost::urls;
  // The URL itself never goes into a message: it may carry user:password@ or ?token=...
  // Messages name the problem and at most scheme://host:port.
  auto parsed = urls::parse_absolute_uri(text);
  if (!parsed) return InvalidArgumentError("the URL is not an absolute URL");
  const urls::url_view& url = *parsed;
  ParsedUrl out;
  out.scheme = std::string(url.scheme());
  out.scheme = AsciiLower(out.scheme);
  if (out.scheme != "http" && out.scheme != "https") {
    return InvalidArgumentError("the URL's scheme must be http or https");
  }
  // scheme://host[:port], for messages; a host that is not a plain name or address is not shown.
  auto origin = [&] {
    std::string host = "(invalid host)";
    if (url.host_type() == urls::host_type::ipv4) {
      host = url.host_ipv4_address().to_string();
    } else if (url.host_type() == urls::host_type::ipv6) {
      host = "[" + url.host_ipv6_address().to_string() + "]";
    } else if (url.host_type() == urls::host_type::name && IsPlainHostName(url.encoded_host())) {
      host = std::string(url.encoded_host());
    }
    std::string_view port = url.port();
    bool show_port = url.has_port() && !port.empty() && port.size() <= 5 &&
                     port.find_first_not_of("0123456789") == std::string_view::npos;
    return out.scheme + "://" + host + (show_port ? ":" + std::string(port) : "");
  };
  if (url.has_userinfo()) {
    return InvalidArgumentError(origin() + ": user info (a name or password before @) is not "
                                           "allowed in the URL");
  }
  if (url.has_query()) {
    return InvalidArgumentError(origin() + ": a query is not allowed in the URL");
  }
  if (url.has_fragment()) {
    return InvalidArgumentError(origin() + ": a fragment is not allowed in the URL");
  }
  switch (url.host_type()) {
    case urls::host_type::ipv4:
      out.host = url.host_ipv4_address().to_string();
      break;
    case urls::host_type::ipv6:
      out.host = url.host_ipv6_address().to_string();
      break;
    case urls::host_type::name: {
      // The host as written, not percent-decoded: a DNS name or certificate name has no
      // '%', and a decoded one could smuggle bytes (NUL, '/') into resolution and
      // hostname verification.
      std::string_view host = url.encoded_host();
      if (!IsPlainHostName(host)) {
        return InvalidArgumentError(out.scheme +
                                    "://(invalid host): the host may hold only letters, digits, "
                                    "'-' and '.' (or be an IP address)");
      }
      out.host = AsciiLower(host);
      break;
    }
    default:
      return InvalidArgumentError(out.scheme + "://(invalid host): unsupported host");
  }
  if (out.host.empty()) return InvalidArgumentError(origin() + ": the URL has no host");
  if (url.has_port()) {
    std::string_view port = url.port();
    std::optional<std::uint64_t> port_number = ParseDecimal(port, 1, 65535);
    if (!port_number) return InvalidArgumentError(origin() + ": port must be 1-65535");
    out.port = static_cast<std::uint16_t>(*port_number);
  } else {
    out.port = out.scheme == "https" ? 443 : 80;
  }
  out.path = std::string(url.encoded_path());
  while (!out.path.empty() && out.path.back() == '/') out.path.pop_back();
  return out;
}

}  // namespace uplink::net
