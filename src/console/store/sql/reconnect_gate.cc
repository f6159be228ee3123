#include "console/store/sql/reconnect_gate.h"

#include <algorithm>

namespace uplink::console::sql {

Status ReconnectGate::TryBegin() {
  std::lock_guard lock(mutex_);
  if (backoff_.count() > 0) {
    if (attempts_ > 0) {
      return UnavailableError(last_error_ + " (another connection is trying to reconnect now)");
    }
    const SteadyTime now = clock_.SteadyNow();
    if (now < next_attempt_) {
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
}

void ReconnectGate::Failed(std::string error) {
  std::lock_guard lock(mutex_);
  --attempts_;
  FailedLocked(std::move(error));
}

void ReconnectGate::GaveUp(std::string error) {
  std::lock_guard lock(mutex_);
  FailedLocked(std::move(error));
}

std::uint64_t ReconnectGate::failures() const {
  std::lock_guard lock(mutex_);
  return failures_;
}

void ReconnectGate::FailedLocked(std::string error) {
  ++failures_;
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
