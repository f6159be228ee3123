// The rule that decides whether a handover code may still be redeemed (docs/security.md,
// "Handover codes"). A plain function over what the store read, so that every store applies
// the same rule and it is tested without a database.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/time.h"

namespace uplink::console {

// Why a handover code was refused. The API answers 410 Gone for the first three (the code
// will never work again) and 403 for kOwnerDeactivated (it works again once the owner is
// reactivated).
enum class HandoverRefusalReason {
  kRedeemed,          // it was used already: a code works once
  kExpired,           // its expiry passed
  kSuperseded,        // a later rotate replaced it, or its connection was revoked
  kOwnerDeactivated,  // the connection's owner is deactivated
};

// The API's error code and the audit detail's "reason": "handover_redeemed",
// "handover_expired", "handover_superseded" or "owner_deactivated".
std::string_view HandoverRefusalCode(HandoverRefusalReason reason);

// A refused redemption: why, and a message for people that says what to do.
struct HandoverRefusal {
  HandoverRefusalReason reason = HandoverRefusalReason::kRedeemed;
  std::string message;
};

// What the store holds about a handover code and its connection when it is redeemed.
struct HandoverState {
  WallTime expires_at;
  bool redeemed = false;
  bool superseded = false;
  bool connection_revoked = false;
  bool owner_deactivated = false;
};

// Nullopt when the code may be redeemed at `now`. A code that is gone for good is refused
// for that before a deactivated owner is: reactivating the owner would not make it work.
std::optional<HandoverRefusal> JudgeHandoverRedemption(const HandoverState& state, WallTime now);

}  // namespace uplink::console
