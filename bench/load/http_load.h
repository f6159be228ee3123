// The load generator's engine: many HTTP/1.1 keep-alive connections driven by one thread
// with epoll and non-blocking sockets, so that one process (and one core) holds ten thousand
// agents' connections open.
//
// Two kinds of connection:
//   - a pool of connections taking queued requests in order (uploads, reports: a request
//     waits for a free connection to its target, and that wait counts in its latency, which
//     runs from the time the request was due, so a slow server cannot hide behind a slow
//     generator); when a target refuses connections, the requests waiting for it end
//     unanswered, as a client behind a load balancer that drops a dead server sees;
//   - dedicated connections, one per agent, that send again what `on_reply` hands back (an
//     agent's long poll, sent again as soon as it is answered).
//
// It speaks only what uplink-console and nginx answer with: a status line, headers and a body
// of Content-Length bytes (none for 204 and 304). Plain HTTP on loopback: TLS would measure
// OpenSSL, the same for both servers.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace uplink::bench {

using LoadClock = std::chrono::steady_clock;

struct Target {
  std::string host;  // an IPv4 address
  std::uint16_t port = 0;
};

// http://IPv4:PORT, as the consoles and nginx of the load test listen.
Result<Target> ParseTarget(std::string_view url);

struct LoadRequest {
  std::shared_ptr<const std::string> bytes;  // the whole message; shared, so replays are free
  int kind = 0;                              // the caller's: which route
  int agent = 0;                             // the caller's: which simulated agent
  LoadClock::time_point due;                 // latency runs from here
  size_t target = 0;                         // pool requests: the index of the server
};

// A request without its whole reply this long after it was sent is given up and its connection
// closed: a generator that waited for good would hang the bench on one lost reply. Well above
// the console's longest hold of a long poll (50 s).
inline constexpr std::chrono::seconds kReplyTimeout{120};
inline constexpr int kNoReply = 0;     // the connection failed before a whole reply came
inline constexpr int kTimedOut = -1;   // no whole reply within kReplyTimeout

struct LoadReply {
  int status = kNoReply;  // the HTTP status, or kNoReply or kTimedOut
  // Without a reply: how the connection failed ("closed by the server", "reset", ...).
  std::string_view failure;
  LoadClock::duration latency{};
  std::string_view body;
  const LoadRequest* request = nullptr;
  int connection = 0;  // for SendOn: the dedicated connection this came on
};

class HttpLoad {
 public:
  // Called for every request's end, on the loop's thread; it may Queue or SendOn.
  using OnReply = std::function<void(const LoadReply&)>;

  HttpLoad(std::vector<Target> targets, OnReply on_reply);
  ~HttpLoad();
  HttpLoad(const HttpLoad&) = delete;
  HttpLoad& operator=(const HttpLoad&) = delete;

  // Opens `count` pool connections, spread evenly over the targets.
  Status OpenPool(size_t count);
  void Queue(LoadRequest request);
  // Opens a connection of its own that sends `first` once connected; returns its id.
  Result<int> OpenDedicated(LoadRequest first);
  // Sends `request` on dedicated connection `connection` once it is free.
  void SendOn(int connection, LoadRequest request);
  // Closes every dedicated connection (their requests in flight are abandoned, not counted).
  void CloseDedicated();

  // Runs the loop until `until`; `tick` runs at least every `tick_every` with the time.
  void RunUntil(LoadClock::time_point until, const std::function<void(LoadClock::time_point)>& tick,
                std::chrono::milliseconds tick_every = std::chrono::milliseconds(5));

  size_t queued() const;
  size_t in_flight() const { return in_flight_; }
  // Connections that failed or were closed by the server and opened again.
  std::uint64_t reconnects() const { return reconnects_; }

 private:
  struct Connection;
  Status Connect(Connection& connection);
  void Start(Connection& connection, LoadRequest request);
  void OnEvent(Connection& connection, std::uint32_t events);
  // Closes the connection (opened again later); its request in flight ends with `status`,
  // `failure` saying how.
  void Fail(Connection& connection, std::string_view failure, int status = kNoReply);
  bool Flush(Connection& connection);
  void Read(Connection& connection);
  void Feed(Connection& connection);
  void ReconnectDue(LoadClock::time_point now);
  // Gives up the requests sent more than kReplyTimeout before `now`.
  void TimeOutStale(LoadClock::time_point now);

  std::vector<Target> targets_;
  OnReply on_reply_;
  int epoll_ = -1;
  std::vector<std::unique_ptr<Connection>> connections_;
  // Per target: pool connections waiting for a request, requests waiting for a connection.
  std::vector<std::vector<Connection*>> idle_pool_;
  std::vector<std::deque<LoadRequest>> queue_;
  std::vector<int> reconnecting_;
  size_t in_flight_ = 0;
  std::uint64_t reconnects_ = 0;
  LoadClock::time_point next_timeout_scan_{};
  size_t next_target_ = 0;
};

}  // namespace uplink::bench
