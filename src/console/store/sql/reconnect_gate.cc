#include "console/store/sql/reconnect_gate.h"

#include <algorithm>

namespace uplink::console::sql {
namespace {

constexpr const char* kReconnectsTotal = "uplink_console_store_reconnects_total";
constexpr const char* kRefusedTotal = "uplink_console_store_reconnects_refused_total";
constexpr const char* kGivenUpTotal = "uplink_console_store_statements_given_up_total";
constexpr const char* kReachable = "uplink_console_store_reachable";

}  // namespace

ReconnectGate::ReconnectGate(const Clock& clock) : clock_(clock) {
  metrics_.DeclareCounter(kReconnectsTotal,
                          "Attempts to reconnect to the store's database, by outcome.");
  metrics_.DeclareCounter(kRefusedTotal,
                          "Calls failed at once, without trying, because another connection "
                          "was reconnecting or the back-off after a failure had not passed.");
  metrics_.DeclareCounter(kGivenUpTotal,
                          "Statements the database did not answer in time; each gave up its "
                          "connection.");
  metrics_.DeclareGauge(kReachable,
                        "0 from a failed reconnect or a statement given up until a reconnect "
                        "succeeds; else 1.");
  metrics_.Set(kReachable, 1);
  for (const char* outcome : {"succeeded", "failed"}) {
    metrics_.Increment(kReconnectsTotal, {{"outcome", outcome}}, 0);
  }
}

Status ReconnectGate::TryBegin() {
  std::lock_guard lock(mutex_);
  if (backoff_.count() > 0) {
    if (attempts_ > 0) {
      metrics_.Increment(kRefusedTotal);
      return UnavailableError(last_error_ + " (another connection is trying to reconnect now)");
    }
    const SteadyTime now = clock_.SteadyNow();
    if (now < next_attempt_) {
      metrics_.Increment(kRefusedTotal);
      const auto wait = std::chrono::ceil<std::chrono::seconds>(next_attempt_ - now);
      return UnavailableError(last_error_ + " (the next attempt to reconnect is in " +
                              std::to_string(wait.count()) + " s)");
    }
  }
  ++attempts_;
  return Status::Ok();
}

void ReconnectGate::Succeeded() {
  std::lock_guard lock(mutex_);
  --attempts_;
  backoff_ = std::chrono::milliseconds(0);
  last_error_.clear();
  metrics_.Increment(kReconnectsTotal, {{"outcome", "succeeded"}});
  metrics_.Set(kReachable, 1);
}

void ReconnectGate::Failed(std::string error) {
  std::lock_guard lock(mutex_);
  --attempts_;
  metrics_.Increment(kReconnectsTotal, {{"outcome", "failed"}});
  FailedLocked(std::move(error));
}

void ReconnectGate::GaveUp(std::string error) {
  std::lock_guard lock(mutex_);
  metrics_.Increment(kGivenUpTotal);
  FailedLocked(std::move(error));
}

void ReconnectGate::FailedLocked(std::string error) {
  failures_.fetch_add(1, std::memory_order_release);
  metrics_.Set(kReachable, 0);
  const SteadyTime now = clock_.SteadyNow();
  // Attempts that began together, while reconnecting was open to all, fail as one round.
  if (backoff_.count() == 0) {
    backoff_ = kFirstBackoff;
  } else if (now >= next_attempt_) {
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  }
  next_attempt_ = now + backoff_;
  last_error_ = std::move(error);
}

}  // namespace uplink::console::sql
