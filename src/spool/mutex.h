// The spool's lock rules, checked by the compiler: a mutex and a condition variable that carry
// Clang's thread-safety attributes (LevelDB's port/thread_annotations.h and port_stdcxx.h are
// the model). A member names the mutex that guards it (GUARDED_BY), a function the mutexes
// it needs held (REQUIRES) or must not hold (EXCLUDES). `make test` compiles the spool with
// clang -Wthread-safety -Werror (the spool_thread_safety test), which rejects code that
// breaks a rule; GCC ignores the attributes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define UPLINK_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define UPLINK_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(name) UPLINK_THREAD_ANNOTATION(capability(name))
#define SCOPED_CAPABILITY UPLINK_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(mutex) UPLINK_THREAD_ANNOTATION(guarded_by(mutex))
#define ACQUIRED_BEFORE(...) UPLINK_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define REQUIRES(...) UPLINK_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) UPLINK_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) UPLINK_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) UPLINK_THREAD_ANNOTATION(release_capability(__VA_ARGS__))

namespace uplink::spool {

class CAPABILITY("mutex") Mutex {
 public:
  void Lock() ACQUIRE() { mutex_.lock(); }
  void Unlock() RELEASE() { mutex_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mutex_;
};

// Holds a mutex for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_->Lock(); }
  ~MutexLock() RELEASE() { mutex_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mutex_;
};

// Waits release the mutex and take it again before they return, as std::condition_variable's
// do; wake-ups may be spurious, so callers wait in a loop on their condition.
class CondVar {
 public:
  void Wait(Mutex& mutex) REQUIRES(mutex) {
    std::unique_lock lock(mutex.mutex_, std::adopt_lock);
    condition_.wait(lock);
    lock.release();
  }
  // False when the time ran out.
  template <typename Rep, typename Period>
  bool WaitFor(Mutex& mutex, std::chrono::duration<Rep, Period> timeout) REQUIRES(mutex) {
    std::unique_lock lock(mutex.mutex_, std::adopt_lock);
    const bool woken = condition_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void Signal() { condition_.notify_one(); }
  void SignalAll() { condition_.notify_all(); }

 private:
  std::condition_variable condition_;
};

}  // namespace uplink::spool
