// A TCP proxy on loopback in front of a Unix socket (the test PostgreSQL server's), that a test
// can make go silent: while stalled it still accepts connections, but moves no byte either
// way, as a server that hangs or a network that drops packets looks to the client above the
// kernel. What the client sends is then neither answered nor refused. It can also hold every
// chunk it moves for a fixed time each way, as a database across a network is (the kernel's
// netem, which would do it below, is not on every machine).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace uplink::testing {

class StallProxy {
 public:
  // Forwards connections to 127.0.0.1:port() to the Unix socket at `target_path`, each chunk
  // `one_way_delay` after it was read (both ways, so a round trip takes twice that more).
  static Result<std::unique_ptr<StallProxy>> Start(
      std::string target_path, std::chrono::microseconds one_way_delay = {});
  ~StallProxy();
  StallProxy(const StallProxy&) = delete;
  StallProxy& operator=(const StallProxy&) = delete;

  std::uint16_t port() const { return port_; }
  // Stops moving bytes, on the connections open now and on those accepted later.
  void Stall();
  // Moves bytes again.
  void Resume();
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  struct Chunk {
    std::chrono::steady_clock::time_point due;
    std::string bytes;
  };
  struct Pair {
    int client = -1;
    int server = -1;
    std::deque<Chunk> to_server;  // read from the client, not yet due
    std::deque<Chunk> to_client;
    // A side that ended its sending (closed, or shut its writing down) is read no more; what
    // it sent before still reaches the other side when due, as a network delivers what was in
    // flight (a server's last error before it closes), and then the other side is told the end
    // (its writing shut down). The pair ends when both sides ended, or when a write fails.
    bool client_ended = false;
    bool server_ended = false;
    bool client_told = false;
    bool server_told = false;
  };
  StallProxy(int listener, std::uint16_t port, std::string target_path,
             std::chrono::microseconds one_way_delay, int wake_read, int wake_write);
  void Loop();
  // Writes the chunks of `queue` that are due to `to`; false when `to` ended.
  static bool Deliver(std::deque<Chunk>& queue, int to, std::chrono::steady_clock::time_point now);
  // Once the side that sends `from_queue` ended and all it sent was delivered, shuts `to`'s
  // writing down (once), so that `to` reads the end after the last byte.
  static void TellEnd(bool from_ended, const std::deque<Chunk>& from_queue, int to, bool& told);
  void Wake();

  const int listener_;
  const std::uint16_t port_;
  const std::string target_path_;
  const std::chrono::microseconds one_way_delay_;
  const int wake_read_;
  const int wake_write_;
  std::atomic<bool> stalled_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::vector<Pair> pairs_;  // the loop's thread only
  std::thread thread_;
};

}  // namespace uplink::testing
