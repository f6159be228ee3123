#include <gtest/gtest.h>

#include "common/time.h"
#include "console/api/connection_view.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

class ConnectionStatusTest : public ::testing::Test {
 protected:
  ConnectionStatus StatusNow() const { return ComputeStatus(connection_, clock_.Now(), {}); }

  FakeClock clock_;
  Connection connection_ = [this] {
    Connection c;
    c.created_at = clock_.Now();
    c.expires_at = clock_.Now() + hours(24);
    return c;
  }();
};

TEST_F(ConnectionStatusTest, NeverBeforeTheFirstReport) {
  EXPECT_EQ(StatusNow(), ConnectionStatus::kNever);
}

TEST_F(ConnectionStatusTest, ActiveThenStaleAt90SecondsThenOfflineAt150Seconds) {
  connection_.last_report_at = clock_.Now();
  EXPECT_EQ(StatusNow(), ConnectionStatus::kActive);
  clock_.Advance(seconds(89));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kActive);
  clock_.Advance(seconds(1));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kStale);
  clock_.Advance(seconds(59));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kStale);
  clock_.Advance(seconds(1));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kOffline);
}

TEST_F(ConnectionStatusTest, ThresholdsAreConfigurable) {
  connection_.last_report_at = clock_.Now();
  clock_.Advance(seconds(20));
  StatusThresholds tight{seconds(10), seconds(30)};
  EXPECT_EQ(ComputeStatus(connection_, clock_.Now(), tight), ConnectionStatus::kStale);
  clock_.Advance(seconds(10));
  EXPECT_EQ(ComputeStatus(connection_, clock_.Now(), tight), ConnectionStatus::kOffline);
}

TEST_F(ConnectionStatusTest, ExpiredWinsOverRecentReports) {
  connection_.last_report_at = clock_.Now() + hours(24);
  clock_.Advance(hours(24));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kExpired);
}

TEST_F(ConnectionStatusTest, RevokedWinsOverEverything) {
  connection_.last_report_at = clock_.Now();
  connection_.revoked_at = clock_.Now();
  EXPECT_EQ(StatusNow(), ConnectionStatus::kRevoked);
  clock_.Advance(hours(48));
  EXPECT_EQ(StatusNow(), ConnectionStatus::kRevoked);
}

TEST(ConnectionStatusName, NamesMatchTheApi) {
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kNever), "never");
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kActive), "active");
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kStale), "stale");
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kOffline), "offline");
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kExpired), "expired");
  EXPECT_EQ(ConnectionStatusName(ConnectionStatus::kRevoked), "revoked");
}

}  // namespace
}  // namespace uplink::console
