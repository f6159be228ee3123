// The delay proxy moves every byte, both ways, and an end as a network would: what one side
// sent before it closed still reaches the other, after the delay, before the end does.
#include "support/stall_proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <string_view>

#include "support/process.h"

namespace uplink::testing {
namespace {

using std::chrono::milliseconds;

constexpr std::chrono::microseconds kOneWayDelay = milliseconds(50);

// A Unix socket server that serves one connection with `serve` (given its descriptor).
class OneConnectionServer {
 public:
  explicit OneConnectionServer(std::function<void(int)> serve) {
    path_ = dir_.File("server.sock");
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path_.c_str(), sizeof address.sun_path - 1);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(listener_, 4), 0);
    served_ = std::async(std::launch::async, [this, serve = std::move(serve)] {
      int connection = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (connection < 0) return;
      serve(connection);
      ::close(connection);
    });
  }
  ~OneConnectionServer() {
    ::shutdown(listener_, SHUT_RDWR);  // an accept still waiting returns
    served_.wait();
    ::close(listener_);
  }
  const std::string& path() const { return path_; }
  // Waits (up to 10 s) for `serve` to return; false if it did not.
  bool Served() { return served_.wait_for(std::chrono::seconds(10)) == std::future_status::ready; }

 private:
  TempDir dir_;
  std::string path_;
  int listener_ = -1;
  std::future<void> served_;
};

int ConnectTo(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  return fd;
}

void SendAll(int fd, std::string_view bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// What `fd` reads until its end, or "<timed out>" after 10 s without one.
std::string ReadToEnd(int fd) {
  std::string got;
  for (;;) {
    pollfd readable{fd, POLLIN, 0};
    if (::poll(&readable, 1, 10'000) <= 0) return got + "<timed out>";
    char buffer[256];
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return got;
    got.append(buffer, static_cast<size_t>(n));
  }
}

TEST(StallProxyTest, MovesBytesBothWaysAfterTheDelay) {
  OneConnectionServer server([](int connection) {
    char buffer[4];
    ASSERT_EQ(::read(connection, buffer, sizeof buffer), 4);
    SendAll(connection, std::string(buffer, 4) + "-pong");
  });
  auto proxy = StallProxy::Start(server.path(), kOneWayDelay);
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  int client = ConnectTo((*proxy)->port());
  const auto sent = std::chrono::steady_clock::now();
  SendAll(client, "ping");
  EXPECT_EQ(ReadToEnd(client), "ping-pong");
  // Both ways held: not a timing bound on the machine, a floor the proxy sets.
  EXPECT_GE(std::chrono::steady_clock::now() - sent, 2 * kOneWayDelay);
  EXPECT_TRUE(server.Served());
  ::close(client);
}

TEST(StallProxyTest, WhatTheServerSentBeforeClosingReachesTheClientBeforeTheEnd) {
  // A PostgreSQL server's last error ("terminating connection ...") comes just before it
  // closes: the client must read the error, not a bare end.
  OneConnectionServer server([](int connection) { SendAll(connection, "last words"); });
  auto proxy = StallProxy::Start(server.path(), kOneWayDelay);
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  int client = ConnectTo((*proxy)->port());
  EXPECT_EQ(ReadToEnd(client), "last words");
  EXPECT_TRUE(server.Served());
  ::close(client);
}

TEST(StallProxyTest, WhatTheClientSentBeforeClosingReachesTheServerBeforeTheEnd) {
  std::promise<std::string> received;
  OneConnectionServer server(
      [&received](int connection) { received.set_value(ReadToEnd(connection)); });
  auto proxy = StallProxy::Start(server.path(), kOneWayDelay);
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  int client = ConnectTo((*proxy)->port());
  SendAll(client, "goodbye");
  ::close(client);
  EXPECT_EQ(received.get_future().get(), "goodbye");
  EXPECT_TRUE(server.Served());
}

TEST(StallProxyTest, AClientThatOnlyShutsItsWritingDownStillReadsTheAnswer) {
  OneConnectionServer server([](int connection) {
    std::string request = ReadToEnd(connection);
    SendAll(connection, "answer to " + request);
  });
  auto proxy = StallProxy::Start(server.path(), kOneWayDelay);
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  int client = ConnectTo((*proxy)->port());
  SendAll(client, "question");
  ::shutdown(client, SHUT_WR);
  EXPECT_EQ(ReadToEnd(client), "answer to question");
  EXPECT_TRUE(server.Served());
  ::close(client);
}

}  // namespace
}  // namespace uplink::testing
