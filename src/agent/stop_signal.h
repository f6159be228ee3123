// A stop request that interrupts waits: the loop between inventory cycles sleeps on it, and
// SIGINT/SIGTERM (or a test) ends that sleep at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace uplink::agent {

class StopSignal {
 public:
  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    changed_.notify_all();
  }

  bool stopped() const {
    std::lock_guard lock(mutex_);
    return stopped_;
  }

  // Waits up to `duration`; false when stopped (before or during the wait).
  bool WaitFor(std::chrono::milliseconds duration) {
    std::unique_lock lock(mutex_);
    return !changed_.wait_for(lock, duration, [&] { return stopped_; });
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stopped_ = false;
};

}  // namespace uplink::agent
