#include "support/stall_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

namespace uplink::testing {
namespace {

int ConnectUnix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool WriteAll(int to, std::string_view bytes) {
  while (!bytes.empty()) {
    // A side that closed fails the write (EPIPE) rather than raising SIGPIPE.
    ssize_t wrote = ::send(to, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (wrote <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(wrote));
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<StallProxy>> StallProxy::Start(std::string target_path,
                                                     std::chrono::microseconds one_way_delay) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return IOError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 64) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    Status error = IOError(std::string("listening on loopback: ") + std::strerror(errno));
    ::close(listener);
    return error;
  }
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(listener);
    return IOError(std::string("pipe: ") + std::strerror(errno));
  }
  return std::unique_ptr<StallProxy>(new StallProxy(listener, ntohs(address.sin_port),
                                                    std::move(target_path), one_way_delay,
                                                    wake[0], wake[1]));
}

StallProxy::StallProxy(int listener, std::uint16_t port, std::string target_path,
                       std::chrono::microseconds one_way_delay, int wake_read, int wake_write)
    : listener_(listener),
      port_(port),
      target_path_(std::move(target_path)),
      one_way_delay_(one_way_delay),
      wake_read_(wake_read),
      wake_write_(wake_write) {
  thread_ = std::thread([this] { Loop(); });
}

StallProxy::~StallProxy() {
  stopping_ = true;
  Wake();
  thread_.join();
  for (const Pair& pair : pairs_) {
    ::close(pair.client);
    ::close(pair.server);
  }
  ::close(listener_);
  ::close(wake_read_);
  ::close(wake_write_);
}

void StallProxy::Stall() {
  stalled_ = true;
  Wake();
}

void StallProxy::Resume() {
  stalled_ = false;
  Wake();
}

void StallProxy::Wake() {
  char byte = 1;
  (void)!::write(wake_write_, &byte, 1);
}

bool StallProxy::Deliver(std::deque<Chunk>& queue, int to,
                         std::chrono::steady_clock::time_point now) {
  while (!queue.empty() && queue.front().due <= now) {
    if (!WriteAll(to, queue.front().bytes)) return false;
    queue.pop_front();
  }
  return true;
}

void StallProxy::TellEnd(bool from_ended, const std::deque<Chunk>& from_queue, int to, bool& told) {
  if (told || !from_ended || !from_queue.empty()) return;
  ::shutdown(to, SHUT_WR);
  told = true;
}

void StallProxy::Loop() {
  using Clock = std::chrono::steady_clock;
  // Reads what `from` has into `queue`, due after the delay; false when `from` ended.
  auto take = [this](int from, std::deque<Chunk>& queue) {
    char buffer[16384];
    ssize_t got = ::read(from, buffer, sizeof buffer);
    if (got <= 0) return false;
    queue.push_back({Clock::now() + one_way_delay_, std::string(buffer, static_cast<size_t>(got))});
    return true;
  };
  while (!stopping_) {
    std::vector<pollfd> fds = {{wake_read_, POLLIN, 0}, {listener_, POLLIN, 0}};
    const bool stalled = stalled_;
    std::optional<Clock::time_point> next_due;
    if (!stalled) {
      for (const Pair& pair : pairs_) {
        // poll skips a negative descriptor: an ended side, which would be readable for good.
        fds.push_back({pair.client_ended ? -1 : pair.client, POLLIN, 0});
        fds.push_back({pair.server_ended ? -1 : pair.server, POLLIN, 0});
        for (const std::deque<Chunk>* queue : {&pair.to_server, &pair.to_client}) {
          if (!queue->empty() && (!next_due || queue->front().due < *next_due)) {
            next_due = queue->front().due;
          }
        }
      }
    }
    timespec timeout{};
    if (next_due) {
      const auto left = std::max(Clock::duration::zero(), *next_due - Clock::now());
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timeout = {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    }
    if (::ppoll(fds.data(), fds.size(), next_due ? &timeout : nullptr, nullptr) < 0) continue;
    if ((fds[0].revents & POLLIN) != 0) {
      char drain[64];
      while (::read(wake_read_, drain, sizeof drain) > 0) {
      }
    }
    if ((fds[1].revents & POLLIN) != 0) {
      int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        // Each chunk goes out when it is due, not when the previous one is acknowledged:
        // with Nagle's algorithm a reply in two chunks would wait for the client's delayed
        // acknowledgement (up to 40 ms).
        const int one = 1;
        ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int server = ConnectUnix(target_path_);
        if (server < 0) {
          ::close(client);
        } else {
          pairs_.push_back({client, server, {}, {}});
        }
        ++accepted_;
      }
    }
    if (stalled) continue;
    std::vector<Pair> open;
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < pairs_.size(); ++i) {
      Pair& pair = pairs_[i];
      // Pairs accepted in this round have no pollfd yet.
      const size_t at = 2 + 2 * i;
      if (at + 1 < fds.size()) {
        if (fds[at].revents != 0) pair.client_ended = !take(pair.client, pair.to_server);
        if (fds[at + 1].revents != 0) pair.server_ended = !take(pair.server, pair.to_client);
      }
      const Clock::time_point delivered_at = one_way_delay_.count() == 0 ? Clock::now() : now;
      bool alive = Deliver(pair.to_server, pair.server, delivered_at) &&
                   Deliver(pair.to_client, pair.client, delivered_at);
      if (alive) {
        TellEnd(pair.client_ended, pair.to_server, pair.server, pair.server_told);
        TellEnd(pair.server_ended, pair.to_client, pair.client, pair.client_told);
        alive = !(pair.client_told && pair.server_told);
      }
      if (alive) {
        open.push_back(std::move(pair));
      } else {
        ::close(pair.client);
        ::close(pair.server);
      }
    }
    pairs_ = std::move(open);
  }
}

}  // namespace uplink::testing
