// Token buckets keyed by a string (a source address, a token prefix, an email), for failed
// authentication. Thread-safe; bounded memory: at most `max_keys` buckets, and when full the
// bucket closest to full (the least informative) is forgotten first.
//
// Time comes from the Clock's steady time, so tests drive it with FakeClock.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/time.h"

namespace uplink::console {

struct RateLimit {
  double burst = 30;                           // bucket size
  double refill_per_second = 0.5;              // tokens added per second
};

class RateLimiter {
 public:
  // `clock` must outlive this object. Needs burst >= 1, refill_per_second > 0, an empty
  // bucket refilled within ten years and max_keys >= 1 (the process stops otherwise).
  RateLimiter(const Clock& clock, RateLimit limit, std::size_t max_keys = 100'000);
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // nullopt when `key` may try (its bucket holds at least one token); otherwise how long until
  // it may, rounded up to whole seconds and at least 1 s (for Retry-After). Takes nothing.
  std::optional<std::chrono::seconds> Check(const std::string& key);

  // Takes one token for a failure. Returns what Check would say after it.
  std::optional<std::chrono::seconds> RecordFailure(const std::string& key);
  // Takes one token for a failure at `at`, in the past (another replica's charge heard late;
  // a later time is taken as now). Exact when a key's failures come in time order; one older
  // than the key's latest is charged with the weight it is sure to still have now, so it never
  // weighs more than it would have (it may weigh less). Returns what Check would say after it.
  std::optional<std::chrono::seconds> RecordFailureAt(const std::string& key, SteadyTime at);

  // Buckets held, including full ones not yet forgotten.
  std::size_t size() const;

 private:
  // A bucket is kept as the time it will be full again: each failure pushes that time one
  // token's refill interval later, and tokens = burst - (full_at - now) / interval. Whole
  // nanoseconds keep Retry-After exact where floating-point tokens would drift. The time of
  // the latest failure tells a failure heard late whether it still comes in order.
  struct Bucket {
    SteadyTime full_at;
    SteadyTime last_failure;
  };
  std::optional<std::chrono::seconds> WaitFor(SteadyTime full_at, SteadyTime now) const;
  // Called when inserting at capacity: forgets every full bucket and, if that frees fewer
  // than max_keys/16, also the fullest others, so the sweep runs at most once per
  // max_keys/16 insertions.
  void MakeRoom(SteadyTime now);

  const Clock& clock_;
  std::chrono::nanoseconds token_interval_{};  // time to refill one token
  std::chrono::nanoseconds full_span_{};       // time to refill an empty bucket
  std::size_t max_keys_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace uplink::console
