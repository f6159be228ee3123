// A fixed number of threads running submitted jobs in order, with a bounded queue: work that
// would block an event loop's thread (a password hash: 64 MiB and ~0.1 s) runs here instead,
// and a burst beyond the queue is refused at once rather than piling up callers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace uplink {

class BoundedWorkers {
 public:
  // `threads` (at least 1) named `name`; at most `max_queued` jobs wait for one of them.
  BoundedWorkers(std::string name, int threads, size_t max_queued);
  ~BoundedWorkers();
  BoundedWorkers(const BoundedWorkers&) = delete;
  BoundedWorkers& operator=(const BoundedWorkers&) = delete;

  // Queues `job`; false, with `job` destroyed unrun, when `max_queued` jobs already wait or
  // Stop was called.
  bool Submit(std::function<void()> job);
  // Refuses new jobs, waits for those running, destroys the queued ones unrun and joins the
  // threads. Idempotent.
  void Stop();

 private:
  void Run();

  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace uplink
