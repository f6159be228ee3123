#include "console/api/workspace_signals.h"

#include "common/thread_name.h"

namespace uplink::console {
namespace {

constexpr size_t kMaxGenerations = 65536;

}  // namespace

WorkspaceSignals::WorkspaceSignals(const Clock& clock) : clock_(clock) {}

WorkspaceSignals::~WorkspaceSignals() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  std::vector<Wake> left;
  {
    std::lock_guard lock(mutex_);
    left = std::move(ready_);
    for (auto& [key, waiter] : waiters_) left.push_back(std::move(waiter.wake));
    waiters_.clear();
  }
  for (Wake& wake : left) wake();
}

std::uint64_t WorkspaceSignals::Generation(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = generations_.find(key);
  return it == generations_.end() ? 0 : it->second;
}

void WorkspaceSignals::Wait(const std::string& key, std::uint64_t generation, SteadyTime deadline,
                            Wake wake) {
  {
    std::lock_guard lock(mutex_);
    auto it = generations_.find(key);
    const std::uint64_t now = it == generations_.end() ? 0 : it->second;
    if (now != generation || stopping_) {
      ready_.push_back(std::move(wake));
    } else {
      waiters_.emplace(key, Waiter{key, deadline, std::move(wake)});
    }
  }
  changed_.notify_all();
}

void WorkspaceSignals::Notify(const std::string& key) {
  {
    std::lock_guard lock(mutex_);
    // Keys are ids, one per command: forget the idle ones now and then. A waiter whose key was
    // forgotten sees a changed generation and is answered at once, which is harmless.
    if (generations_.size() >= kMaxGenerations) {
      std::erase_if(generations_, [&](const auto& entry) { return !waiters_.contains(entry.first); });
    }
    ++generations_[key];
    auto [first, last] = waiters_.equal_range(key);
    for (auto it = first; it != last; ++it) ready_.push_back(std::move(it->second.wake));
    waiters_.erase(first, last);
  }
  changed_.notify_all();
}

size_t WorkspaceSignals::waiting() const {
  std::lock_guard lock(mutex_);
  return waiters_.size();
}

void WorkspaceSignals::TakeDueLocked(std::vector<Wake>& due) {
  due = std::move(ready_);
  ready_.clear();
  const SteadyTime now = clock_.SteadyNow();
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline <= now) {
      due.push_back(std::move(it->second.wake));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void WorkspaceSignals::StartReaper() {
  reaper_ = std::thread([this] {
    NameThisThread("workspace-reap");
    ReaperLoop();
  });
}

void WorkspaceSignals::ReaperLoop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    std::vector<Wake> due;
    TakeDueLocked(due);
    if (!due.empty()) {
      lock.unlock();
      for (Wake& wake : due) wake();
      lock.lock();
      continue;
    }
    changed_.wait_for(lock, std::chrono::milliseconds(100),
                      [&] { return stopping_ || !ready_.empty(); });
  }
}

}  // namespace uplink::console
