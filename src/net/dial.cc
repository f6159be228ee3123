#include "net/dial_impl.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <vector>

#include "net/tls_library.h"

namespace uplink::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

constexpr auto kUseAwaitable = asio::as_tuple(asio::use_awaitable);

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

}  // namespace

// Refuses what would corrupt the request on the wire (e.g. a CR LF smuggled into a header).
Status ValidateRequest(const Request& request) {
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

std::string HostAndPort(const ParsedUrl& url) {
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  return host + ":" + std::to_string(url.port);
}

Status MakeClientTlsContext(const ParsedUrl& url, const ClientOptions& options,
                            std::optional<ssl::context>& context) {
  if (url.scheme != "https") return Status::Ok();
  UPLINK_RETURN_IF_ERROR(LoadTlsLibrary());
  context.emplace(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  context->set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (!options.ca_pem.empty()) {
    context->add_certificate_authority(asio::buffer(options.ca_pem), ec);
    if (ec) return InvalidArgumentError("loading CA certificates from ca_pem: " + ec.message());
  } else if (!options.ca_file.empty()) {
    context->load_verify_file(options.ca_file, ec);
    if (ec) return InvalidArgumentError("loading CA file " + options.ca_file + ": " + ec.message());
  } else {
    context->set_default_verify_paths(ec);
    if (ec) return InvalidArgumentError("loading the system CA store: " + ec.message());
  }
  if (options.client_cert_pem.empty() != options.client_key_pem.empty()) {
    return InvalidArgumentError("a client certificate needs both a certificate and a key");
  }
  if (!options.client_cert_pem.empty()) {
    return LoadCertificateAndKey(*context, options.client_cert_pem, options.client_key_pem,
                                 "client certificate");
  }
  return Status::Ok();
}

asio::awaitable<Status> DialStream(asio::io_context& io, const ParsedUrl& url, ssl::context* tls,
                                   std::chrono::steady_clock::time_point connect_deadline,
                                   std::chrono::steady_clock::time_point deadline,
                                   std::unique_ptr<AnyStream>& connection) {
  const std::string where = HostAndPort(url);
  std::vector<tcp::endpoint> endpoints;
  if (IsIpLiteral(url.host)) {
    endpoints.emplace_back(asio::ip::make_address(url.host), url.port);
  } else {
    auto resolver = std::make_shared<tcp::resolver>(io);
    // Name resolution has no deadline of its own: cancel it when the connect deadline passes.
    // The timer may fire after the resolver is gone, hence the weak reference.
    asio::steady_timer limit(io, connect_deadline);
    limit.async_wait([weak = std::weak_ptr(resolver)](boost::system::error_code ec) {
      if (auto live = weak.lock(); live && !ec) live->cancel();
    });
    auto [ec, results] =
        co_await resolver->async_resolve(url.host, std::to_string(url.port), kUseAwaitable);
    limit.cancel();
    if (ec == asio::error::operation_aborted) {
      co_return DeadlineExceededError("resolving " + url.host + " timed out");
    }
    if (ec) co_return UnavailableError("resolving " + url.host + ": " + ec.message());
    for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  }

  PlainStream socket_stream(io);
  socket_stream.expires_at(connect_deadline);
  auto [connect_ec, endpoint] = co_await socket_stream.async_connect(endpoints, kUseAwaitable);
  if (connect_ec == beast::error::timeout) {
    co_return DeadlineExceededError("connecting to " + where + " timed out");
  }
  if (connect_ec) co_return UnavailableError("connecting to " + where + ": " + connect_ec.message());
  socket_stream.socket().set_option(tcp::no_delay(true));

  if (!tls) {
    connection = std::make_unique<StreamAdapter<PlainStream>>(std::move(socket_stream));
    co_return Status::Ok();
  }
  TlsStream stream(std::move(socket_stream), *tls);
  {
    SSL* ssl = stream.native_handle();
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    // Never proceed without hostname verification: any certificate from the CA would do.
    bool verification_set = false;
    if (IsIpLiteral(url.host)) {
      // An IP literal is checked against IP subjectAltNames and is not sent as SNI.
      verification_set = X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str()) == 1;
    } else {
      verification_set = X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), url.host.size()) == 1 &&
                         SSL_set_tlsext_host_name(ssl, url.host.c_str()) == 1;
    }
    if (!verification_set) {
      co_return InternalError("could not set up certificate name verification for " + where +
                              "; refusing to connect");
    }
    beast::get_lowest_layer(stream).expires_at(deadline);
    auto [handshake_ec] = co_await stream.async_handshake(ssl::stream_base::client, kUseAwaitable);
    if (handshake_ec == beast::error::timeout) {
      co_return DeadlineExceededError("TLS handshake with " + where + " timed out");
    }
    if (handshake_ec) {
      co_return UnavailableError("TLS handshake with " + where +
                                 " failed: " + TlsFailureReason(stream, handshake_ec));
    }
  }
  connection = std::make_unique<StreamAdapter<TlsStream>>(std::move(stream));
  co_return Status::Ok();
}

}  // namespace uplink::net
