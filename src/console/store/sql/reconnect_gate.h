// When the connections of one store may try to reconnect to their database. While the last
// attempt succeeded, any may (a restarted server takes them all back at once). Once one has
// failed, or a connection gave up waiting for an answer, one at a time, and none until a
// back-off has passed (1 s, doubling to 30 s): a server
// that does not answer holds each connect attempt for the whole connect timeout, and without
// the gate every thread that found its connection lost (the HTTP threads' lookups among
// them) would keep waiting that long, leaving none to answer /healthz. With it one thread
// waits and the others fail at once with kUnavailable, saying why and when the next attempt
// is.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/metrics.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::console::sql {

class ReconnectGate {
 public:
  static constexpr std::chrono::milliseconds kFirstBackoff{1'000};
  static constexpr std::chrono::milliseconds kMaxBackoff{30'000};

  // `clock` must outlive the gate.
  explicit ReconnectGate(const Clock& clock = SystemClock());
  ReconnectGate(const ReconnectGate&) = delete;
  ReconnectGate& operator=(const ReconnectGate&) = delete;

  // Ok when the caller may attempt now; it must then call Succeeded or Failed. Otherwise
  // kUnavailable with the last attempt's error and why this caller may not try now.
  Status TryBegin();
  void Succeeded();
  // `error` is the attempt's error message, repeated to the callers refused meanwhile.
  void Failed(std::string error);
  // A connection gave up on a server that did not answer: a failure as a failed attempt is,
  // without an attempt.
  void GaveUp(std::string error);

  // Counts failures. A connection made before the latest one may be as dead as the one that
  // failed: it reconnects (through this gate) before its next statement, rather than finding
  // out by waiting for an answer that does not come.
  // Read before every statement: an atomic, not the mutex.
  std::uint64_t failures() const { return failures_.load(std::memory_order_acquire); }

  // For /metrics: uplink_console_store_reconnects_total{outcome}, ..._reconnects_refused_total,
  // ..._statements_given_up_total and uplink_console_store_reachable.
  void RenderMetrics(std::string& out) const { metrics_.RenderTextTo(out); }

 private:
  const Clock& clock_;
  void FailedLocked(std::string error);

  mutable std::mutex mutex_;
  std::atomic<std::uint64_t> failures_{0};  // written under mutex_
  int attempts_ = 0;                      // under way
  std::chrono::milliseconds backoff_{0};  // zero while the last attempt succeeded
  SteadyTime next_attempt_{};
  std::string last_error_;
  metrics::Registry metrics_;
};

}  // namespace uplink::console::sql
