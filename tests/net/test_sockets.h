// Plain POSIX sockets on 127.0.0.1 for tests that must misbehave on purpose. Every wait is
// bounded so a broken server or client fails the test instead of hanging it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace uplink::net::testing {

constexpr std::chrono::milliseconds kPatience{10'000};

// A client connection to 127.0.0.1:port.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  // False if the peer has gone (the write failed).
  bool Send(std::string_view bytes);
  // Reads until the peer closes or `patience` passes; `closed` says which.
  std::string ReadUntilClosed(bool& closed, std::chrono::milliseconds patience = kPatience);
  // Reads until `marker` arrives (returns everything read), or nullopt on close or timeout.
  std::optional<std::string> ReadUntil(std::string_view marker,
                                       std::chrono::milliseconds patience = kPatience);

 private:
  int fd_ = -1;
};

// A listener on 127.0.0.1 whose peer is a script run on its own thread.
class ScriptedServer {
 public:
  // `script` gets the listening socket; it should use the helpers below.
  explicit ScriptedServer(std::function<void(int listen_fd)> script);
  ~ScriptedServer();

  std::uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

// -1 if nobody connects within `patience`.
int AcceptWithin(int listen_fd, std::chrono::milliseconds patience = kPatience);
// Reads one request head (through the blank line), or nullopt on close or timeout.
std::optional<std::string> ReadRequestHead(int fd, std::chrono::milliseconds patience = kPatience);
void WriteAll(int fd, std::string_view bytes);
// Blocks until the peer closes (or `patience` passes), discarding what it sends.
void WaitForPeerClose(int fd, std::chrono::milliseconds patience = kPatience);
void CloseFd(int fd);

// A loopback port that refuses connections (bound, then closed).
std::uint16_t UnusedPort();

}  // namespace uplink::net::testing
