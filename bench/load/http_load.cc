#include "bench/load/http_load.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

namespace uplink::bench {
namespace {

constexpr std::chrono::milliseconds kReconnectDelay{100};
constexpr size_t kReadChunk = 64 << 10;

// The value of header `name` in `head` (the status line and header fields), or empty.
std::string_view HeaderValue(std::string_view head, std::string_view name) {
  size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const size_t start = at + 2;
    const size_t end = std::min(head.find("\r\n", start), head.size());
    const std::string_view line = head.substr(start, end - start);
    if (line.size() > name.size() && line[name.size()] == ':' &&
        ::strncasecmp(line.data(), name.data(), name.size()) == 0) {
      std::string_view value = line.substr(name.size() + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      return value;
    }
    at = end == head.size() ? std::string_view::npos : end;
  }
  return {};
}

}  // namespace

Result<Target> ParseTarget(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) {
    return InvalidArgumentError("the load generator speaks plain http: http://IPv4:PORT");
  }
  url.remove_prefix(kScheme.size());
  while (url.ends_with('/')) url.remove_suffix(1);
  const size_t colon = url.rfind(':');
  Target target;
  if (colon == std::string_view::npos) return InvalidArgumentError("the URL has no :PORT");
  target.host = std::string(url.substr(0, colon));
  in_addr address{};
  if (::inet_pton(AF_INET, target.host.c_str(), &address) != 1) {
    return InvalidArgumentError("the URL's host must be an IPv4 address");
  }
  const std::string_view port = url.substr(colon + 1);
  unsigned value = 0;
  auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (error != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
    return InvalidArgumentError("the URL's port must be 1-65535");
  }
  target.port = static_cast<std::uint16_t>(value);
  return target;
}

struct HttpLoad::Connection {
  int id = 0;
  bool dedicated = false;
  size_t target_index = 0;
  Target target;
  int fd = -1;
  bool connected = false;
  bool closed = false;  // CloseDedicated: never opened again
  bool idle_listed = false;
  std::optional<LoadClock::time_point> reconnect_at;
  std::optional<LoadRequest> current;  // in flight
  LoadClock::time_point started{};     // when `current` was handed to this connection
  std::deque<LoadRequest> pending;     // dedicated: waiting for this connection
  size_t written = 0;
  std::string in;
};

HttpLoad::HttpLoad(std::vector<Target> targets, OnReply on_reply)
    : targets_(std::move(targets)),
      on_reply_(std::move(on_reply)),
      idle_pool_(targets_.size()),
      queue_(targets_.size()) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
}

HttpLoad::~HttpLoad() {
  for (auto& connection : connections_) {
    if (connection->fd >= 0) ::close(connection->fd);
  }
  if (epoll_ >= 0) ::close(epoll_);
}

Status HttpLoad::Connect(Connection& connection) {
  connection.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (connection.fd < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(connection.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(connection.target.port);
  ::inet_pton(AF_INET, connection.target.host.c_str(), &address.sin_addr);
  if (::connect(connection.fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 &&
      errno != EINPROGRESS) {
    const int error = errno;
    ::close(connection.fd);
    connection.fd = -1;
    return UnavailableError(std::string("connect: ") + std::strerror(error));
  }
  epoll_event event{};
  event.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
  event.data.u32 = static_cast<std::uint32_t>(connection.id);
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, connection.fd, &event) != 0) {
    const int error = errno;
    ::close(connection.fd);
    connection.fd = -1;
    return UnavailableError(std::string("epoll_ctl: ") + std::strerror(error));
  }
  connection.connected = false;
  connection.written = 0;
  connection.in.clear();
  return Status::Ok();
}

Status HttpLoad::OpenPool(size_t count) {
  for (size_t i = 0; i < count; ++i) {
    auto connection = std::make_unique<Connection>();
    connection->id = static_cast<int>(connections_.size());
    connection->target_index = next_target_++ % targets_.size();
    connection->target = targets_[connection->target_index];
    UPLINK_RETURN_IF_ERROR(Connect(*connection));
    connections_.push_back(std::move(connection));
    Feed(*connections_.back());
  }
  return Status::Ok();
}

Result<int> HttpLoad::OpenDedicated(LoadRequest first) {
  auto connection = std::make_unique<Connection>();
  connection->id = static_cast<int>(connections_.size());
  connection->dedicated = true;
  connection->target = targets_[next_target_++ % targets_.size()];
  UPLINK_RETURN_IF_ERROR(Connect(*connection));
  connections_.push_back(std::move(connection));
  Start(*connections_.back(), std::move(first));
  return connections_.back()->id;
}

void HttpLoad::Queue(LoadRequest request) {
  std::vector<Connection*>& idle = idle_pool_.at(request.target);
  while (!idle.empty()) {
    Connection* connection = idle.back();
    idle.pop_back();
    connection->idle_listed = false;
    if (connection->current) continue;  // taken meanwhile
    Start(*connection, std::move(request));
    return;
  }
  queue_[request.target].push_back(std::move(request));
}

size_t HttpLoad::queued() const {
  size_t total = 0;
  for (const auto& waiting : queue_) total += waiting.size();
  return total;
}

void HttpLoad::SendOn(int id, LoadRequest request) {
  Connection& connection = *connections_.at(static_cast<size_t>(id));
  if (connection.closed) return;
  if (connection.current) {
    connection.pending.push_back(std::move(request));
  } else {
    Start(connection, std::move(request));
  }
}

void HttpLoad::CloseDedicated() {
  for (auto& connection : connections_) {
    if (!connection->dedicated || connection->closed) continue;
    if (connection->fd >= 0) ::close(connection->fd);
    connection->fd = -1;
    connection->closed = true;
    if (connection->current) --in_flight_;
    connection->current.reset();
    connection->pending.clear();
  }
}

void HttpLoad::Start(Connection& connection, LoadRequest request) {
  connection.current = std::move(request);
  connection.started = LoadClock::now();
  connection.written = 0;
  ++in_flight_;
  if (connection.connected) Flush(connection);
}

void HttpLoad::Feed(Connection& connection) {
  if (connection.current || connection.closed) return;
  if (connection.dedicated) {
    if (!connection.pending.empty()) {
      LoadRequest next = std::move(connection.pending.front());
      connection.pending.pop_front();
      Start(connection, std::move(next));
    }
    return;
  }
  std::deque<LoadRequest>& waiting = queue_[connection.target_index];
  if (!waiting.empty()) {
    LoadRequest next = std::move(waiting.front());
    waiting.pop_front();
    Start(connection, std::move(next));
  } else if (!connection.idle_listed) {
    connection.idle_listed = true;
    idle_pool_[connection.target_index].push_back(&connection);
  }
}

bool HttpLoad::Flush(Connection& connection) {
  if (!connection.current) return true;
  const std::string& bytes = *connection.current->bytes;
  while (connection.written < bytes.size()) {
    const ssize_t n = ::send(connection.fd, bytes.data() + connection.written,
                             bytes.size() - connection.written, MSG_NOSIGNAL);
    if (n > 0) {
      connection.written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    Fail(connection, errno == ECONNRESET || errno == EPIPE ? "reset (sending)" : "send failed");
    return false;
  }
  return true;
}

void HttpLoad::Fail(Connection& connection, std::string_view failure, int status) {
  if (connection.fd >= 0) ::close(connection.fd);
  connection.fd = -1;
  const bool refused = !connection.connected;
  connection.connected = false;
  auto fail = [&](LoadRequest failed, int with, std::string_view how) {
    LoadReply reply;
    reply.status = with;
    reply.failure = how;
    reply.latency = LoadClock::now() - failed.due;
    reply.request = &failed;
    reply.connection = connection.id;
    on_reply_(reply);
  };
  if (connection.current) {
    LoadRequest failed = std::move(*connection.current);
    connection.current.reset();
    --in_flight_;
    fail(std::move(failed), status, refused ? "not connected" : failure);
  }
  // The server refuses connections: what waits for it would wait for good.
  if (refused && !connection.dedicated) {
    for (LoadRequest& waiting : std::exchange(queue_[connection.target_index], {})) {
      fail(std::move(waiting), kNoReply, "connections refused");
    }
  }
  if (!connection.closed && !connection.reconnect_at) {
    connection.reconnect_at = LoadClock::now() + kReconnectDelay;
    reconnecting_.push_back(connection.id);
  }
}

void HttpLoad::Read(Connection& connection) {
  char chunk[kReadChunk];
  for (;;) {
    const ssize_t n = ::recv(connection.fd, chunk, sizeof(chunk), 0);
    if (n > 0) {
      connection.in.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    // Closed by the server (an idle keep-alive connection), or failed.
    Fail(connection, n == 0                 ? "closed by the server"
                     : errno == ECONNRESET ? "reset"
                                           : "receive failed");
    return;
  }
  while (connection.current) {
    const size_t head_end = connection.in.find("\r\n\r\n");
    if (head_end == std::string::npos) return;
    const std::string_view head(connection.in.data(), head_end);
    int status = 0;
    if (head.size() >= 12) std::from_chars(head.data() + 9, head.data() + 12, status);
    size_t length = 0;
    const std::string_view length_text = HeaderValue(head, "Content-Length");
    std::from_chars(length_text.data(), length_text.data() + length_text.size(), length);
    if (status == 204 || status == 304) length = 0;
    const size_t total = head_end + 4 + length;
    if (connection.in.size() < total) return;
    const bool close = HeaderValue(head, "Connection") == "close";
    LoadRequest done = std::move(*connection.current);
    connection.current.reset();
    --in_flight_;
    LoadReply reply;
    reply.status = status;
    reply.latency = LoadClock::now() - done.due;
    reply.body = std::string_view(connection.in).substr(head_end + 4, length);
    reply.request = &done;
    reply.connection = connection.id;
    on_reply_(reply);
    connection.in.erase(0, total);
    if (close) {
      Fail(connection, "closed after a reply");
      return;
    }
    Feed(connection);
  }
}

void HttpLoad::OnEvent(Connection& connection, std::uint32_t events) {
  if (connection.fd < 0) return;
  if (!connection.connected) {
    int error = 0;
    socklen_t size = sizeof(error);
    ::getsockopt(connection.fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0 || (events & (EPOLLERR | EPOLLHUP)) != 0) {
      Fail(connection, "not connected");
      return;
    }
    if ((events & EPOLLOUT) == 0) return;
    connection.connected = true;
    if (connection.current) {
      if (!Flush(connection)) return;
    } else {
      Feed(connection);
    }
  } else if ((events & EPOLLOUT) != 0 && !Flush(connection)) {
    return;
  }
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) Read(connection);
}

void HttpLoad::ReconnectDue(LoadClock::time_point now) {
  std::vector<int> waiting = std::exchange(reconnecting_, {});
  for (int id : waiting) {
    Connection& connection = *connections_[static_cast<size_t>(id)];
    if (connection.closed || !connection.reconnect_at) continue;
    if (*connection.reconnect_at > now || !Connect(connection).ok()) {
      if (*connection.reconnect_at <= now) connection.reconnect_at = now + kReconnectDelay;
      reconnecting_.push_back(id);
      continue;
    }
    connection.reconnect_at.reset();
    ++reconnects_;
    Feed(connection);
  }
}

void HttpLoad::TimeOutStale(LoadClock::time_point now) {
  if (now < next_timeout_scan_) return;
  next_timeout_scan_ = now + std::chrono::seconds(1);  // a scan of every connection, so rarely
  for (auto& connection : connections_) {
    if (!connection->current || connection->closed || now - connection->started < kReplyTimeout) {
      continue;
    }
    Fail(*connection, "timed out", kTimedOut);
  }
}

void HttpLoad::RunUntil(LoadClock::time_point until,
                        const std::function<void(LoadClock::time_point)>& tick,
                        std::chrono::milliseconds tick_every) {
  constexpr int kMaxEvents = 1024;
  epoll_event events[kMaxEvents];
  LoadClock::time_point next_tick = LoadClock::now();
  for (;;) {
    LoadClock::time_point now = LoadClock::now();
    if (now >= until) return;
    if (now >= next_tick) {
      if (tick) tick(now);
      next_tick = now + tick_every;
      ReconnectDue(now);
      TimeOutStale(now);
    }
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::min(next_tick, until) - now);
    const int ready = ::epoll_wait(epoll_, events, kMaxEvents,
                                   static_cast<int>(std::max<std::int64_t>(wait.count(), 0)) + 1);
    for (int i = 0; i < ready; ++i) {
      OnEvent(*connections_[events[i].data.u32], events[i].events);
    }
  }
}

}  // namespace uplink::bench
