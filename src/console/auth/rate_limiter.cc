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
  if (full_at_.empty()) return std::nullopt;  // no recent failures at all: the usual case
  SteadyTime now = clock_.SteadyNow();
  auto it = full_at_.find(key);
  if (it == full_at_.end()) return std::nullopt;
  if (it->second <= now) {
    full_at_.erase(it);  // a full bucket says nothing a missing one does not
    return std::nullopt;
  }
  return WaitFor(it->second, now);
}

std::optional<std::chrono::seconds> RateLimiter::RecordFailure(const std::string& key) {
  SteadyTime now = clock_.SteadyNow();
  std::lock_guard lock(mutex_);
  auto it = full_at_.find(key);
  if (it == full_at_.end()) {
    if (full_at_.size() >= max_keys_) MakeRoom(now);
    it = full_at_.emplace(key, now).first;
  }
  // An empty bucket stays empty: failures while refused do not push the wait further out.
  it->second = std::min(std::max(it->second, now) + token_interval_, now + full_span_);
  return WaitFor(it->second, now);
}

std::size_t RateLimiter::size() const {
  std::lock_guard lock(mutex_);
  return full_at_.size();
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
  std::size_t before = full_at_.size();
  std::erase_if(full_at_, [now](const auto& entry) { return entry.second <= now; });
  std::size_t freed = before - full_at_.size();
  if (freed >= batch) return;

  // The fullest buckets are those that will be full soonest.
  std::size_t extra = std::min(batch - freed, full_at_.size());
  std::vector<decltype(full_at_)::iterator> buckets;
  buckets.reserve(full_at_.size());
  for (auto it = full_at_.begin(); it != full_at_.end(); ++it) buckets.push_back(it);
  auto by_full_at = [](const auto& a, const auto& b) { return a->second < b->second; };
  std::nth_element(buckets.begin(), buckets.begin() + static_cast<std::ptrdiff_t>(extra - 1),
                   buckets.end(), by_full_at);
  for (std::size_t i = 0; i < extra; ++i) full_at_.erase(buckets[i]);
}

}  // namespace uplink::console
