#include "common/bounded_workers.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "common/thread_name.h"

namespace uplink {

BoundedWorkers::BoundedWorkers(std::string name, int threads, size_t max_queued)
    : max_queued_(max_queued) {
  for (int i = 0; i < std::max(threads, 1); ++i) {
    threads_.emplace_back([this, name] {
      NameThisThread(name);
      Run();
    });
  }
}

BoundedWorkers::~BoundedWorkers() { Stop(); }

bool BoundedWorkers::Submit(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || jobs_.size() >= max_queued_) return false;
    jobs_.push_back(std::move(job));
  }
  queued_.notify_one();
  return true;
}

void BoundedWorkers::Stop() {
  std::deque<std::function<void()>> unrun;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    unrun.swap(jobs_);
  }
  queued_.notify_all();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  // Destroyed here, outside the lock: what a job holds may run code when it goes.
  unrun.clear();
}

void BoundedWorkers::Run() {
  std::unique_lock lock(mutex_);
  while (true) {
    queued_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    try {
      job();
    } catch (const std::exception& e) {
      log::Logger("common.workers").Error("a job threw", {{"error", e.what()}});
    }
    job = nullptr;  // what it held goes before the next job waits
    lock.lock();
  }
}

}  // namespace uplink
