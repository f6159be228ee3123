#include "console/store/rules/handover_rules.h"

namespace uplink::console {

std::string_view HandoverRefusalCode(HandoverRefusalReason reason) {
  switch (reason) {
    case HandoverRefusalReason::kRedeemed:
      return "handover_redeemed";
    case HandoverRefusalReason::kExpired:
      return "handover_expired";
    case HandoverRefusalReason::kSuperseded:
      return "handover_superseded";
    case HandoverRefusalReason::kOwnerDeactivated:
      return "owner_deactivated";
  }
  return "handover_superseded";
}

std::optional<HandoverRefusal> JudgeHandoverRedemption(const HandoverState& state, WallTime now) {
  if (state.redeemed) {
    return HandoverRefusal{HandoverRefusalReason::kRedeemed,
                           "this handover code was already used, and works only once; rotate "
                           "the connection's token to get a new one"};
  }
  if (state.connection_revoked) {
    return HandoverRefusal{HandoverRefusalReason::kSuperseded,
                           "the connection was revoked, so this handover code no longer works; "
                           "a revoked connection cannot be rotated, so create a new connection"};
  }
  if (state.superseded) {
    return HandoverRefusal{HandoverRefusalReason::kSuperseded,
                           "a later rotate replaced this handover code; rotate the connection's "
                           "token again to get a new one"};
  }
  if (state.expires_at <= now) {
    return HandoverRefusal{HandoverRefusalReason::kExpired,
                           "this handover code has expired; rotate the connection's token to "
                           "get a new one"};
  }
  if (state.owner_deactivated) {
    return HandoverRefusal{HandoverRefusalReason::kOwnerDeactivated,
                           "the connection's owner is deactivated; an admin must reactivate them "
                           "before this code can be used"};
  }
  return std::nullopt;
}

}  // namespace uplink::console
