// HttpClient over Beast: each Send runs a private io_context until its exchange is done.
#include "net/client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
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
#include "net/stream_impl.h"
#include "net/tls_library.h"

namespace uplink::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

constexpr auto kUseAwaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t kMaxResponseHeaderBytes = 64 * 1024;
constexpr int kMaxInterimResponses = 16;

// Letters, digits, '-' and '.': what a DNS name (and a certificate's DNS name) may hold.
bool IsPlainHostName(std::string_view host) {
  return host.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") == std::string_view::npos;
}

bool IsIpLiteral(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// The reason OpenSSL gave, including why certificate verification failed.
std::string TlsFailureReason(TlsStream& stream, const boost::system::error_code& ec) {
  long verify = SSL_get_verify_result(stream.native_handle());
  if (verify != X509_V_OK) {
    return std::string("certificate verification failed: ") + X509_verify_cert_error_string(verify);
  }
  return ec.message();
}

// Refuses what would corrupt the request on the wire (e.g. a CR LF smuggled into a header).
Status Validate(const Request& request) {
  if (request.method.empty() ||
      request.method.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos) {
    return InvalidArgumentError("invalid HTTP method \"" + request.method + "\"");
  }
  if (!request.target.empty() && (request.target.front() != '/' ||
                                  request.target.find_first_of(" \r\n") != std::string::npos)) {
    // The target is not quoted: its query may carry a credential.
    return InvalidArgumentError("the request target must start with / and hold no spaces or "
                                "line breaks");
  }
  for (const auto& [name, value] : request.headers.all()) {
    if (name.empty() || name.find_first_of(" :\r\n") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos) {
      return InvalidArgumentError("invalid header field \"" + name + "\"");
    }
  }
  return Status::Ok();
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

  Status SetUpTls() {
    if (url_.scheme != "https") return Status::Ok();
    UPLINK_RETURN_IF_ERROR(LoadTlsLibrary());
    tls_.emplace(ssl::context::tls_client);
    tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    SSL_CTX_set_min_proto_version(tls_->native_handle(), TLS1_2_VERSION);
    tls_->set_verify_mode(ssl::verify_peer);
    boost::system::error_code ec;
    if (!options_.ca_pem.empty()) {
      tls_->add_certificate_authority(asio::buffer(options_.ca_pem), ec);
      if (ec) return InvalidArgumentError("loading CA certificates from ca_pem: " + ec.message());
    } else if (!options_.ca_file.empty()) {
      tls_->load_verify_file(options_.ca_file, ec);
      if (ec) {
        return InvalidArgumentError("loading CA file " + options_.ca_file + ": " + ec.message());
      }
    } else {
      tls_->set_default_verify_paths(ec);
      if (ec) return InvalidArgumentError("loading the system CA store: " + ec.message());
    }
    if (options_.client_cert_pem.empty() != options_.client_key_pem.empty()) {
      return InvalidArgumentError("a client certificate needs both a certificate and a key");
    }
    if (!options_.client_cert_pem.empty()) {
      return LoadCertificateAndKey(*tls_, options_.client_cert_pem, options_.client_key_pem,
                                   "client certificate");
    }
    return Status::Ok();
  }

  Result<Response> Send(Request request) override {
    UPLINK_RETURN_IF_ERROR(Validate(request));
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
  std::string Where() const {
    std::string host = url_.host.find(':') != std::string::npos ? "[" + url_.host + "]" : url_.host;
    return host + ":" + std::to_string(url_.port);
  }

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
    std::vector<tcp::endpoint> endpoints;
    if (IsIpLiteral(url_.host)) {
      endpoints.emplace_back(asio::ip::make_address(url_.host), url_.port);
    } else {
      auto resolver = std::make_shared<tcp::resolver>(io_);
      // Name resolution has no deadline of its own: cancel it when the connect deadline passes.
      // The timer may fire after the resolver is gone, hence the weak reference.
      asio::steady_timer limit(io_, connect_deadline);
      limit.async_wait([weak = std::weak_ptr(resolver)](boost::system::error_code ec) {
        if (auto live = weak.lock(); live && !ec) live->cancel();
      });
      auto [ec, results] =
          co_await resolver->async_resolve(url_.host, std::to_string(url_.port), kUseAwaitable);
      limit.cancel();
      if (ec == asio::error::operation_aborted) {
        co_return DeadlineExceededError("resolving " + url_.host + " timed out");
      }
      if (ec) co_return UnavailableError("resolving " + url_.host + ": " + ec.message());
      for (const auto& entry : results) endpoints.push_back(entry.endpoint());
    }

    PlainStream socket_stream(io_);
    socket_stream.expires_at(connect_deadline);
    auto [connect_ec, endpoint] = co_await socket_stream.async_connect(endpoints, kUseAwaitable);
    if (connect_ec == beast::error::timeout) {
      co_return DeadlineExceededError("connecting to " + Where() + " timed out");
    }
    if (connect_ec)
      co_return UnavailableError("connecting to " + Where() + ": " + connect_ec.message());
    socket_stream.socket().set_option(tcp::no_delay(true));

    buffer_.clear();  // nothing read on an earlier connection belongs to this one
    if (!tls_) {
      connection_ = std::make_unique<StreamAdapter<PlainStream>>(std::move(socket_stream));
      co_return Status::Ok();
    }
    TlsStream stream(std::move(socket_stream), *tls_);
    {
      SSL* ssl = stream.native_handle();
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      // Never proceed without hostname verification: any certificate from the CA would do.
      bool verification_set = false;
      if (IsIpLiteral(url_.host)) {
        // An IP literal is checked against IP subjectAltNames and is not sent as SNI.
        verification_set = X509_VERIFY_PARAM_set1_ip_asc(param, url_.host.c_str()) == 1;
      } else {
        verification_set =
            X509_VERIFY_PARAM_set1_host(param, url_.host.c_str(), url_.host.size()) == 1 &&
            SSL_set_tlsext_host_name(ssl, url_.host.c_str()) == 1;
      }
      if (!verification_set) {
        co_return InternalError("could not set up certificate name verification for " + Where() +
                                "; refusing to connect");
      }
      beast::get_lowest_layer(stream).expires_at(deadline);
      auto [handshake_ec] =
          co_await stream.async_handshake(ssl::stream_base::client, kUseAwaitable);
      if (handshake_ec == beast::error::timeout) {
        co_return DeadlineExceededError("TLS handshake with " + Where() + " timed out");
      }
      if (handshake_ec) {
        co_return UnavailableError("TLS handshake with " + Where() +
                                   " failed: " + TlsFailureReason(stream, handshake_ec));
      }
    }
    connection_ = std::make_unique<StreamAdapter<TlsStream>>(std::move(stream));
    co_return Status::Ok();
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
