#include <gtest/gtest.h>

#include "common/time.h"
#include "console/api/connection_view.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

class ConnectionStatusTest : public ::testing::Test {
 protected:
  ConnectionStatus StatusNow() const {
    return ComputeStatus(connection_, clock_.Now(), kDefaultActiveWindow);
  }
  Liveness LivenessNow() const { return ComputeLiveness(connection_, clock_.Now(), {}); }

  FakeClock clock_;
  Connection connection_ = [this] {
    Connection c;
    c.created_at = clock_.Now();
    c.expires_at = clock_.Now() + hours(24);
    return c;
  }();
};

TEST_F(ConnectionStatusTest, NeverAndWaitingBeforeTheFirstCall) {
  EXPECT_EQ(StatusNow(), ConnectionStatus::kNever);
  EXPECT_EQ(LivenessNow(), Liveness::kWaiting);
  // An inventory report alone is not what liveness reads: the store sets last_seen_at with it.
  connection_.last_report_at = clock_.Now();
  EXPECT_EQ(LivenessNow(), Liveness::kWaiting);
}

TEST_F(ConnectionStatusTest, ActiveForTheWholeWindowThenStale) {
  connection_.last_seen_at = clock_.Now();
  EXPECT_EQ(StatusNow(), ConnectionStatus::kActive);
  clock_.Advance(minutes(10) - seconds(1));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kActive);
  clock_.Advance(seconds(1));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kStale);
  clock_.Advance(hours(10));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kStale);
}

TEST_F(ConnectionStatusTest, LivenessIsConnectedThenStaleAt90SecondsThenOfflineAt150Seconds) {
  connection_.last_seen_at = clock_.Now();
  EXPECT_EQ(LivenessNow(), Liveness::kConnected);
  clock_.Advance(seconds(89));
  EXPECT_EQ(LivenessNow(), Liveness::kConnected);
  clock_.Advance(seconds(1));
  EXPECT_EQ(LivenessNow(), Liveness::kStale);
  clock_.Advance(seconds(59));
  EXPECT_EQ(LivenessNow(), Liveness::kStale);
  clock_.Advance(seconds(1));
  EXPECT_EQ(LivenessNow(), Liveness::kOffline);
}

TEST_F(ConnectionStatusTest, ThresholdsAndTheWindowAreConfigurable) {
  connection_.last_seen_at = clock_.Now();
  clock_.Advance(seconds(20));
  StatusThresholds tight{seconds(10), seconds(30)};
  EXPECT_EQ(ComputeLiveness(connection_, clock_.Now(), tight), Liveness::kStale);
  EXPECT_EQ(ComputeStatus(connection_, clock_.Now(), seconds(20)), ConnectionStatus::kStale);
  EXPECT_EQ(ComputeStatus(connection_, clock_.Now(), seconds(21)), ConnectionStatus::kActive);
  clock_.Advance(seconds(10));
  EXPECT_EQ(ComputeLiveness(connection_, clock_.Now(), tight), Liveness::kOffline);
}

TEST_F(ConnectionStatusTest, ExpiredWinsOverRecentReports) {
  clock_.Advance(hours(24));
  connection_.last_seen_at = clock_.Now();
  EXPECT_EQ(StatusNow(), ConnectionStatus::kExpired);
  EXPECT_EQ(LivenessNow(), Liveness::kConnected);  // liveness says only what calls say
}

TEST_F(ConnectionStatusTest, RevokedWinsOverEverything) {
  connection_.last_seen_at = clock_.Now();
  connection_.revoked_at = clock_.Now();
  EXPECT_EQ(StatusNow(), ConnectionStatus::kRevoked);
  clock_.Advance(hours(48));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kRevoked);
}

TEST(ConnectionStatusName, NamesMatchTheApi) {
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kNever), "never");
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kActive), "active");
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kStale), "stale");
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kExpired), "expired");
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kRevoked), "revoked");
  EXPECT_EQ(LivenessName(Liveness::kWaiting), "waiting");
  EXPECT_EQ(LivenessName(Liveness::kConnected), "connected");
  EXPECT_EQ(LivenessName(Liveness::kStale), "stale");
  EXPECT_EQ(LivenessName(Liveness::kOffline), "offline");
  EXPECT_EQ(HandoverStatusName(HandoverStatus::kPending), "pending");
  EXPECT_EQ(HandoverStatusName(HandoverStatus::kRedeemed), "redeemed");
  EXPECT_EQ(HandoverStatusName(HandoverStatus::kExpired), "expired");
  EXPECT_EQ(HandoverStatusName(HandoverStatus::kSuperseded), "superseded");
}

class HandoverStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handover_.lookup_prefix = "hoc_Ab12Cd34";
    handover_.created_at = clock_.Now();
    handover_.expires_at = clock_.Now() + minutes(10);
    connection_.expires_at = clock_.Now() + hours(24);
    connection_.token_prefix = PlaceholderTokenPrefix(handover_.lookup_prefix);
  }
  HandoverStatus StatusNow() const {
    return ComputeHandoverStatus(handover_, connection_, clock_.Now());
  }

  FakeClock clock_;
  Handover handover_;
  Connection connection_;
};

TEST_F(HandoverStatusTest, ThePlaceholderNamesTheCode) {
  EXPECT_EQ(connection_.token_prefix, "agt_Ab12Cd34");
}

TEST_F(HandoverStatusTest, PendingUntilItExpiresAfterTenMinutes) {
  EXPECT_EQ(StatusNow(), HandoverStatus::kPending);
  clock_.Advance(minutes(10) - seconds(1));
  EXPECT_EQ(StatusNow(), HandoverStatus::kPending);
  clock_.Advance(seconds(1));
  EXPECT_EQ(StatusNow(), HandoverStatus::kExpired);
}

TEST_F(HandoverStatusTest, RedeemedWinsOverLaterRotatesAndExpiry) {
  handover_.redeemed_at = clock_.Now();
  connection_.token_prefix = "agt_Zz99Yy88";  // the minted token
  clock_.Advance(hours(1));
  EXPECT_EQ(StatusNow(), HandoverStatus::kRedeemed);
}

TEST_F(HandoverStatusTest, ARotateOrARevokeSupersedesIt) {
  handover_.superseded_at = clock_.Now();  // a later rotate
  EXPECT_EQ(StatusNow(), HandoverStatus::kSuperseded);
  handover_.superseded_at.reset();
  connection_.revoked_at = clock_.Now();
  EXPECT_EQ(StatusNow(), HandoverStatus::kSuperseded);
}

}  // namespace
}  // namespace uplink::console
