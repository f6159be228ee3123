// Clocks and time formats. Code that decides by time takes a Clock& so tests can move it.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include "common/status.h"

namespace uplink {

using WallTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual WallTime Now() const = 0;
  virtual SteadyTime SteadyNow() const = 0;
};

// The process-wide real clock.
Clock& SystemClock();

// A clock that moves only when told to; both readings advance together.
class FakeClock : public Clock {
 public:
  explicit FakeClock(WallTime start = WallTime(std::chrono::seconds(1'800'000'000)));
  WallTime Now() const override;
  SteadyTime SteadyNow() const override;
  void Advance(std::chrono::nanoseconds by);
  void SetNow(WallTime now);

 private:
  mutable std::mutex mutex_;
  WallTime wall_;
  SteadyTime steady_;
};

// "2026-11-30T03:20:00Z" (seconds precision, UTC) as Kubernetes and the API use.
std::string FormatRfc3339(WallTime t);
// "2026-11-30T03:20:00.123Z"
// Exactly six fraction digits, as Kubernetes' metav1.MicroTime ("...:05.000000Z"); clients
// parse it with that fixed layout.
std::string FormatRfc3339Micro(WallTime t);
std::string FormatRfc3339Millis(WallTime t);
// Accepts "YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)"; anything else is InvalidArgument.
Result<WallTime> ParseRfc3339(std::string_view text);

// Seconds since the Unix epoch.
std::int64_t ToUnixSeconds(WallTime t);
WallTime FromUnixSeconds(std::int64_t seconds);

}  // namespace uplink
