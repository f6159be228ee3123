// The handover redemption rule on its own, without a database: each refusal arrives typed,
// in the order that keeps a code that is gone for good from looking recoverable.
#include <gtest/gtest.h>

#include <chrono>

#include "console/store/rules/handover_rules.h"

namespace uplink::console {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

const WallTime kNow = WallTime(std::chrono::hours(24 * 20000));

HandoverState Live() {
  HandoverState state;
  state.expires_at = kNow + minutes(10);
  return state;
}

std::optional<HandoverRefusalReason> Reason(const HandoverState& state, WallTime now = kNow) {
  auto refusal = JudgeHandoverRedemption(state, now);
  if (!refusal) return std::nullopt;
  EXPECT_FALSE(refusal->message.empty());
  return refusal->reason;
}

TEST(HandoverRules, ALiveCodeIsRedeemedUntilItsExpiryWhichIsExclusive) {
  EXPECT_EQ(Reason(Live()), std::nullopt);
  EXPECT_EQ(Reason(Live(), kNow + minutes(10) - seconds(1)), std::nullopt);
  EXPECT_EQ(Reason(Live(), kNow + minutes(10)), HandoverRefusalReason::kExpired);
}

TEST(HandoverRules, EachRefusalHasItsOwnReasonAndCode) {
  HandoverState redeemed = Live();
  redeemed.redeemed = true;
  EXPECT_EQ(Reason(redeemed), HandoverRefusalReason::kRedeemed);
  HandoverState superseded = Live();
  superseded.superseded = true;
  EXPECT_EQ(Reason(superseded), HandoverRefusalReason::kSuperseded);
  HandoverState revoked = Live();
  revoked.connection_revoked = true;
  EXPECT_EQ(Reason(revoked), HandoverRefusalReason::kSuperseded);
  EXPECT_NE(JudgeHandoverRedemption(revoked, kNow)->message.find("create a new connection"),
            std::string::npos);
  HandoverState deactivated = Live();
  deactivated.owner_deactivated = true;
  EXPECT_EQ(Reason(deactivated), HandoverRefusalReason::kOwnerDeactivated);

  EXPECT_EQ(HandoverRefusalCode(HandoverRefusalReason::kRedeemed), "handover_redeemed");
  EXPECT_EQ(HandoverRefusalCode(HandoverRefusalReason::kExpired), "handover_expired");
  EXPECT_EQ(HandoverRefusalCode(HandoverRefusalReason::kSuperseded), "handover_superseded");
  EXPECT_EQ(HandoverRefusalCode(HandoverRefusalReason::kOwnerDeactivated), "owner_deactivated");
}

TEST(HandoverRules, AGoneCodeIsRefusedForThatBeforeADeactivatedOwner) {
  // Reactivating the owner would not make these work, so the owner is not what they are
  // refused for.
  HandoverState state = Live();
  state.owner_deactivated = true;
  state.expires_at = kNow - seconds(1);
  EXPECT_EQ(Reason(state), HandoverRefusalReason::kExpired);
  state.superseded = true;
  EXPECT_EQ(Reason(state), HandoverRefusalReason::kSuperseded);
  state.redeemed = true;
  EXPECT_EQ(Reason(state), HandoverRefusalReason::kRedeemed);
}

}  // namespace
}  // namespace uplink::console
