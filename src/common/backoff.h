// Exponential back-off with full jitter (AWS architecture blog, "Exponential Backoff and
// Jitter"): after n consecutive failures wait a uniform random time in [0, min(cap, base*2^n)],
// so that many agents failing together do not retry together. A server's Retry-After sets a
// floor under the wait.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string_view>

#include "common/status.h"
#include "common/time.h"

namespace uplink {

// The longest wait a Retry-After can ask for (docs/protocol.md: one hour).
inline constexpr std::chrono::milliseconds kMaxRetryAfter{60 * 60'000};

struct BackoffOptions {
  std::chrono::milliseconds base{1'000};
  std::chrono::milliseconds cap{5 * 60'000};
  // A Retry-After beyond this is treated as this, so a misconfigured server cannot park the
  // agent for days.
  std::chrono::milliseconds max_retry_after = kMaxRetryAfter;
};

class Backoff {
 public:
  // Returns a uniform value in [0, 1); injectable so tests can fix the jitter.
  using RandomSource = std::function<double()>;

  explicit Backoff(BackoffOptions options = {}, RandomSource random = {});

  // Records one more failure and returns how long to wait before the next attempt.
  std::chrono::milliseconds NextDelay(
      std::optional<std::chrono::milliseconds> retry_after = std::nullopt);

  // After a success: the next failure starts again from `base`.
  void Reset() { failures_ = 0; }

  int failures() const { return failures_; }

 private:
  BackoffOptions options_;
  RandomSource random_;
  int failures_ = 0;
};

// Parses a Retry-After value: delta-seconds ("120") or an HTTP-date ("Wed, 21 Oct 2015
// 07:28:00 GMT", also the obsolete RFC 850 and asctime forms), relative to `now`. Dates in
// the past give zero; waits beyond kMaxRetryAfter (dates up to year 9999 included) give
// kMaxRetryAfter. Anything else is InvalidArgument.
Result<std::chrono::milliseconds> ParseRetryAfter(std::string_view value, WallTime now);

}  // namespace uplink
