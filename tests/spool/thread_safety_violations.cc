// Breaks each kind of lock rule the spool states (src/spool/mutex.h) once, on purpose: the
// spool_thread_safety_catches_violations test expects clang to reject every one. Never
// compiled into anything.
#include "spool/mutex.h"

namespace uplink::spool {

class Violations {
 public:
  void WritesUnguarded() { ++count_; }
  int ReadsUnguarded() { return count_; }
  void CallsWithoutTheLock() { NeedsTheLock(); }
  void CallsWithTheLock() {
    MutexLock lock(&mu_);
    MustNotHoldTheLock();
  }
  void WaitsWithoutTheLock() { changed_.Wait(mu_); }
  void ReturnsHoldingIt() { mu_.Lock(); }

 private:
  void NeedsTheLock() REQUIRES(mu_) {}
  void MustNotHoldTheLock() EXCLUDES(mu_) {}

  Mutex mu_;
  CondVar changed_;
  int count_ GUARDED_BY(mu_) = 0;
};

}  // namespace uplink::spool
