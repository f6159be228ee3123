// The rules an agent's call meets before anything is stored, without a database.
#include <gtest/gtest.h>

#include <chrono>

#include "console/store/rules/connection_rules.h"

namespace uplink::console {
namespace {

using std::chrono::seconds;

const WallTime kNow = WallTime(std::chrono::hours(24 * 20000));

StoredAgentToken Live() { return {"hash-a", kNow + seconds(60), false, false}; }

TEST(ConnectionRules, TheTokenTheCallBeganWithMustStillBeTheLiveOne) {
  EXPECT_TRUE(AgentTokenStillLive(Live(), "hash-a", kNow));
  EXPECT_FALSE(AgentTokenStillLive(Live(), "hash-b", kNow));  // rotated meanwhile
  StoredAgentToken revoked = Live();
  revoked.revoked = true;
  EXPECT_FALSE(AgentTokenStillLive(revoked, "hash-a", kNow));
  StoredAgentToken deactivated = Live();
  deactivated.owner_deactivated = true;
  EXPECT_FALSE(AgentTokenStillLive(deactivated, "hash-a", kNow));
  // The expiry is exclusive.
  EXPECT_TRUE(AgentTokenStillLive(Live(), "hash-a", kNow + seconds(59)));
  EXPECT_FALSE(AgentTokenStillLive(Live(), "hash-a", kNow + seconds(60)));
}

TEST(ConnectionRules, AConnectionIsBoundByItsFirstClusterAndRefusesAnyOther) {
  EXPECT_EQ(DecideClusterBinding(std::nullopt, "uid-1"), ClusterBinding::kBind);
  EXPECT_EQ(DecideClusterBinding("uid-1", "uid-1"), ClusterBinding::kAlreadyBound);
  EXPECT_EQ(DecideClusterBinding("uid-1", "uid-2"), ClusterBinding::kMismatch);
}

}  // namespace
}  // namespace uplink::console
