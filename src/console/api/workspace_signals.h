// Long polls of the workspace area: the controller's sync waits for a change to its offer (a
// new reservation, a stop, an extension, a new command), and a user reading a command's
// output waits for more of it. A waiter is answered once: when its key is notified, when its
// deadline passes, or when this object is destroyed; always on the reaper thread, never on the
// thread that notifies (a request handler).
//
// A handler reads Generation(key) before it reads the store and passes it to Wait: a change
// notified in between wakes the waiter at once, so none is missed.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/time.h"

namespace uplink::console {

class WorkspaceSignals {
 public:
  using Wake = std::function<void()>;

  explicit WorkspaceSignals(const Clock& clock);
  WorkspaceSignals(const WorkspaceSignals&) = delete;
  WorkspaceSignals& operator=(const WorkspaceSignals&) = delete;
  // Stops the reaper and wakes every waiter.
  ~WorkspaceSignals();

  std::uint64_t Generation(const std::string& key) const;
  // Calls `wake` once, after Notify(key), at `deadline` (the clock's steady time), or at
  // destruction; at once when the key changed since `generation`.
  void Wait(const std::string& key, std::uint64_t generation, SteadyTime deadline, Wake wake);
  void Notify(const std::string& key);
  size_t waiting() const;

  // Runs due wakes on a thread of its own, checking deadlines at least every 100 ms.
  void StartReaper();

 private:
  struct Waiter {
    std::string key;
    SteadyTime deadline;
    Wake wake;
  };
  // Moves the waiters that are due into `due`.
  void TakeDueLocked(std::vector<Wake>& due);
  void ReaperLoop();

  const Clock& clock_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::uint64_t, std::less<>> generations_;
  std::multimap<std::string, Waiter, std::less<>> waiters_;
  std::vector<Wake> ready_;  // notified, to run on the reaper
  bool stopping_ = false;
  std::thread reaper_;
};

}  // namespace uplink::console
