#include "test_sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace uplink::net::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

sockaddr_in Loopback(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// Waits for `fd` to become readable before `deadline`.
bool ReadableBefore(int fd, SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  if (left.count() <= 0) return false;
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, static_cast<int>(left.count())) > 0;
}

int ListenOnLoopback(std::uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = Loopback(0);
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("cannot listen on 127.0.0.1");
  }
  port = ntohs(address.sin_port);
  return fd;
}

}  // namespace

RawConnection::RawConnection(std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = Loopback(port);
  if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawConnection::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string RawConnection::ReadUntilClosed(bool& closed, std::chrono::milliseconds patience) {
  const auto deadline = SteadyClock::now() + patience;
  std::string data;
  closed = false;
  char buffer[4096];
  while (ReadableBefore(fd_, deadline)) {
    ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      closed = true;  // orderly close or reset: either way the server is done with us
      break;
    }
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

std::optional<std::string> RawConnection::ReadUntil(std::string_view marker,
                                                    std::chrono::milliseconds patience) {
  const auto deadline = SteadyClock::now() + patience;
  std::string data;
  char buffer[4096];
  while (data.find(marker) == std::string::npos) {
    if (!ReadableBefore(fd_, deadline)) return std::nullopt;
    ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) return std::nullopt;
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

ScriptedServer::ScriptedServer(std::function<void(int listen_fd)> script) {
  listen_fd_ = ListenOnLoopback(port_);
  thread_ = std::thread([script = std::move(script), fd = listen_fd_] { script(fd); });
}

ScriptedServer::~ScriptedServer() {
  thread_.join();
  ::close(listen_fd_);
}

int AcceptWithin(int listen_fd, std::chrono::milliseconds patience) {
  if (!ReadableBefore(listen_fd, SteadyClock::now() + patience)) return -1;
  return ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
}

std::optional<std::string> ReadRequestHead(int fd, std::chrono::milliseconds patience) {
  const auto deadline = SteadyClock::now() + patience;
  std::string data;
  char c;
  // Byte by byte, so nothing after the head is consumed.
  while (!data.ends_with("\r\n\r\n")) {
    if (!ReadableBefore(fd, deadline) || ::recv(fd, &c, 1, 0) != 1) return std::nullopt;
    data += c;
  }
  return data;
}

void WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void WaitForPeerClose(int fd, std::chrono::milliseconds patience) {
  const auto deadline = SteadyClock::now() + patience;
  char buffer[4096];
  while (ReadableBefore(fd, deadline)) {
    if (::recv(fd, buffer, sizeof(buffer), 0) <= 0) return;
  }
}

void CloseFd(int fd) {
  if (fd >= 0) ::close(fd);
}

std::uint16_t UnusedPort() {
  std::uint16_t port = 0;
  ::close(ListenOnLoopback(port));
  return port;
}

}  // namespace uplink::net::testing
