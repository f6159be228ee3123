// Private to net/*.cc: a type-erased byte stream over TCP or TLS.
//
// Beast's HTTP read and write operations are heavy templates; instantiating them once for this
// one stream type instead of once per transport roughly halves the compile time of server.cc
// and client.cc. The cost is one virtual call per read or write system call.
#pragma once

#include <array>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace uplink::net {

// Loads a PEM certificate chain and its private key into `context` and checks they belong
// together; `what` names them in errors ("TLS certificate", "client certificate").
inline Status LoadCertificateAndKey(boost::asio::ssl::context& context, const std::string& cert_pem,
                                    const std::string& key_pem, std::string_view what) {
  boost::system::error_code ec;
  context.use_certificate_chain(boost::asio::buffer(cert_pem), ec);
  if (ec) return InvalidArgumentError("loading the " + std::string(what) + ": " + ec.message());
  context.use_private_key(boost::asio::buffer(key_pem), boost::asio::ssl::context::pem, ec);
  if (ec) return InvalidArgumentError("loading the " + std::string(what) + " key: " + ec.message());
  if (SSL_CTX_check_private_key(context.native_handle()) != 1) {
    return InvalidArgumentError("the " + std::string(what) + " key does not match its certificate");
  }
  return Status::Ok();
}

class AnyStream {
 public:
  using executor_type = boost::asio::any_io_executor;
  using Completion = boost::asio::any_completion_handler<void(boost::system::error_code, size_t)>;

  virtual ~AnyStream() = default;
  virtual executor_type get_executor() = 0;
  // The TCP layer, for deadlines and the socket itself.
  virtual boost::beast::tcp_stream& tcp() = 0;

  // AsyncReadStream: reads into the first non-empty buffer, as read_some may.
  template <typename MutableBuffers, typename Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    boost::asio::mutable_buffer target;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      target = *it;
      if (target.size() > 0) break;
    }
    return boost::asio::async_initiate<Token, void(boost::system::error_code, size_t)>(
        [this](auto handler, boost::asio::mutable_buffer buffer) {
          ReadSome(buffer, Completion(std::move(handler)));
        },
        token, target);
  }

  // AsyncWriteStream: writes from up to kMaxWriteBuffers buffers at once, as write_some may.
  template <typename ConstBuffers, typename Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    size_t count = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers) && count < kMaxWriteBuffers; ++it) {
      write_buffers_[count++] = *it;
    }
    return boost::asio::async_initiate<Token, void(boost::system::error_code, size_t)>(
        [this](auto handler, size_t n) {
          WriteSome(std::span<const boost::asio::const_buffer>(write_buffers_.data(), n),
                    Completion(std::move(handler)));
        },
        token, count);
  }

 protected:
  virtual void ReadSome(boost::asio::mutable_buffer buffer, Completion handler) = 0;
  virtual void WriteSome(std::span<const boost::asio::const_buffer> buffers,
                         Completion handler) = 0;

 private:
  static constexpr size_t kMaxWriteBuffers = 16;
  // Holds the buffer list of the one write in flight.
  std::array<boost::asio::const_buffer, kMaxWriteBuffers> write_buffers_;
};

// An AnyStream over a concrete stream: beast::tcp_stream or beast::ssl_stream<tcp_stream>.
template <typename Stream>
class StreamAdapter final : public AnyStream {
 public:
  explicit StreamAdapter(Stream&& stream) : stream_(std::move(stream)) {}

  executor_type get_executor() override { return stream_.get_executor(); }
  boost::beast::tcp_stream& tcp() override { return boost::beast::get_lowest_layer(stream_); }

 protected:
  // Boost 1.81's any_completion_handler carries an executor that Beast cannot post through,
  // so completions are bound to the stream's executor: the one the caller runs on already.
  void ReadSome(boost::asio::mutable_buffer buffer, Completion handler) override {
    stream_.async_read_some(buffer,
                            boost::asio::bind_executor(stream_.get_executor(), std::move(handler)));
  }
  void WriteSome(std::span<const boost::asio::const_buffer> buffers, Completion handler) override {
    stream_.async_write_some(
        buffers, boost::asio::bind_executor(stream_.get_executor(), std::move(handler)));
  }

 private:
  Stream stream_;
};

}  // namespace uplink::net
