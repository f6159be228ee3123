#include "console/auth/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace uplink::console {
namespace {

constexpr double kMaxFullRefillSeconds = 10.0 * 365 * 24 * 3600;

std::chrono::nanoseconds RoundToNanoseconds(double seconds) {
  return std::chrono::nanoseconds(std::llround(seconds * 1e9));
}

}  // namespace

RateLimiter::RateLimiter(const Clock& clock, RateLimit limit, std::size_t max_keys)
    : clock_(clock), max_keys_(max_keys) {
  // The limits come from validated flags or code, so a wrong one is a bug worth stopping for.
  bool valid = limit.burst >= 1 && limit.refill_per_second > 0 &&
               limit.burst / limit.refill_per_second <= kMaxFullRefillSeconds && max_keys >= 1;
  if (valid) {
    token_interval_ = RoundToNanoseconds(1.0 / limit.refill_per_second);
    // From the rounded interval, so that a whole burst is a whole number of intervals.
    double interval_seconds = static_cast<double>(token_interval_.count()) / 1e9;
    full_span_ = RoundToNanoseconds(limit.burst * interval_seconds);
    valid = token_interval_.count() > 0;
  }
  if (!valid) {
    std::fputs("fatal: a RateLimiter needs burst >= 1, refill_per_second > 0 (at most 1e9), an "
               "empty bucket refilled within ten years and max_keys >= 1\n",
               stderr);
    std::abort();
  }
}

std::optional<std::chrono::seconds> RateLimiter::Check(const std::string& key) {
  std::lock_guard lock(mutex_);
  if (buckets_.empty()) return std::nullopt;  // no recent failures at all: the usual case
  SteadyTime now = clock_.SteadyNow();
  auto it = buckets_.find(key);
  if (it == buckets_.end()) return std::nullopt;
  if (it->second.full_at <= now) {
    buckets_.erase(it);  // a full bucket says nothing a failure heard late would need
    return std::nullopt;
  }
  return WaitFor(it->second.full_at, now);
}

std::optional<std::chrono::seconds> RateLimiter::RecordFailure(const std::string& key) {
  return RecordFailureAt(key, clock_.SteadyNow());
}

std::optional<std::chrono::seconds> RateLimiter::RecordFailureAt(const std::string& key,
                                                                 SteadyTime at) {
  SteadyTime now = clock_.SteadyNow();
  at = std::min(at, now);
  std::lock_guard lock(mutex_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_keys_) MakeRoom(now);
    // A forgotten bucket was full: a failure at `at` on a full bucket weighs at most what it
    // does on a new one.
    it = buckets_.emplace(key, Bucket{at, at}).first;
  }
  Bucket& bucket = it->second;
  if (at >= bucket.last_failure) {
    // In order: as if it were taken at `at`. An empty bucket stays empty: failures while
    // refused do not push the wait further out.
    bucket.full_at = std::min(std::max(bucket.full_at, at) + token_interval_, at + full_span_);
    bucket.last_failure = at;
    return WaitFor(bucket.full_at, now);
  }
  // Older than the bucket's latest failure, whose history is not kept. Its weight now is at
  // least one interval less the time since `at` (when the bucket was full all along), and no
  // more than the room the bucket has now less that time (the bucket drained at most that
  // much since any failure in between, which the cap may have clipped): the smaller of the
  // two is sure, so it never weighs more than it would have.
  std::chrono::nanoseconds owed = std::max(bucket.full_at - now, std::chrono::nanoseconds::zero());
  std::chrono::nanoseconds weight = std::min(token_interval_, full_span_ - owed) - (now - at);
  if (weight > std::chrono::nanoseconds::zero()) {
    bucket.full_at = std::max(bucket.full_at, now) + weight;
  }
  return WaitFor(bucket.full_at, now);
}

std::size_t RateLimiter::size() const {
  std::lock_guard lock(mutex_);
  return buckets_.size();
}

std::optional<std::chrono::seconds> RateLimiter::WaitFor(SteadyTime full_at,
                                                         SteadyTime now) const {
  // At least one token is left while the bucket is no more than (burst - 1) tokens short.
  std::chrono::nanoseconds wait = (full_at - now) - (full_span_ - token_interval_);
  if (wait <= std::chrono::nanoseconds::zero()) return std::nullopt;
  auto seconds = std::chrono::ceil<std::chrono::seconds>(wait);
  return std::max(seconds, std::chrono::seconds(1));
}

void RateLimiter::MakeRoom(SteadyTime now) {
  const std::size_t batch = std::max<std::size_t>(1, max_keys_ / 16);
  std::size_t before = buckets_.size();
  std::erase_if(buckets_, [now](const auto& entry) { return entry.second.full_at <= now; });
  std::size_t freed = before - buckets_.size();
  if (freed >= batch) return;

  // The fullest buckets are those that will be full soonest.
  std::size_t extra = std::min(batch - freed, buckets_.size());
  std::vector<decltype(buckets_)::iterator> fullest;
  fullest.reserve(buckets_.size());
  for (auto it = buckets_.begin(); it != buckets_.end(); ++it) fullest.push_back(it);
  auto by_full_at = [](const auto& a, const auto& b) {
    return a->second.full_at < b->second.full_at;
  };
  std::nth_element(fullest.begin(), fullest.begin() + static_cast<std::ptrdiff_t>(extra - 1),
                   fullest.end(), by_full_at);
  for (std::size_t i = 0; i < extra; ++i) buckets_.erase(fullest[i]);
}

}  // namespace uplink::console
