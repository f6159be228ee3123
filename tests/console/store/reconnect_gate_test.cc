// When the connections of one store may reconnect (reconnect_gate.h), on a clock the test moves.
#include "console/store/sql/reconnect_gate.h"

#include <gtest/gtest.h>

namespace uplink::console::sql {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

bool Refused(const Status& status, std::string_view why) {
  return status.code() == StatusCode::kUnavailable &&
         status.message().find(why) != std::string::npos;
}

TEST(ReconnectGateTest, WhileReconnectingSucceedsEveryConnectionMayTryAtOnce) {
  FakeClock clock;
  ReconnectGate gate(clock);
  ASSERT_TRUE(gate.TryBegin().ok());
  ASSERT_TRUE(gate.TryBegin().ok());
  gate.Succeeded();
  gate.Succeeded();
  EXPECT_TRUE(gate.TryBegin().ok());
}

TEST(ReconnectGateTest, AfterAFailureOneTriesAtATimeAndTheBackoffDoublesToItsCap) {
  FakeClock clock;
  ReconnectGate gate(clock);
  ASSERT_TRUE(gate.TryBegin().ok());
  gate.Failed("PostgreSQL is unreachable: timeout expired");
  milliseconds backoff = ReconnectGate::kFirstBackoff;
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE(round);
    Status early = gate.TryBegin();
    EXPECT_TRUE(Refused(early, "PostgreSQL is unreachable: timeout expired")) << early.ToString();
    EXPECT_TRUE(Refused(early, "the next attempt to reconnect is in " +
                                   std::to_string(backoff.count() / 1000) + " s"))
        << early.ToString();
    clock.Advance(backoff - milliseconds(1));
    EXPECT_FALSE(gate.TryBegin().ok());
    clock.Advance(milliseconds(1));
    ASSERT_TRUE(gate.TryBegin().ok());
    EXPECT_TRUE(Refused(gate.TryBegin(), "another connection is trying to reconnect now"));
    gate.Failed("PostgreSQL is unreachable: timeout expired");
    backoff = std::min(backoff * 2, ReconnectGate::kMaxBackoff);
  }
  EXPECT_EQ(backoff, ReconnectGate::kMaxBackoff);

  // A success opens it to all again, and the next failure starts from the first back-off.
  clock.Advance(backoff);
  ASSERT_TRUE(gate.TryBegin().ok());
  gate.Succeeded();
  ASSERT_TRUE(gate.TryBegin().ok());
  ASSERT_TRUE(gate.TryBegin().ok());
  gate.Succeeded();
  gate.Failed("refused");
  EXPECT_TRUE(Refused(gate.TryBegin(), "the next attempt to reconnect is in 1 s"));
}

TEST(ReconnectGateTest, ItsSeriesCountAttemptsRefusalsAndGiveUps) {
  FakeClock clock;
  ReconnectGate gate(clock);
  // The value of one series, as its line in the text reads.
  auto series = [&gate](const std::string& name) {
    std::string text = "\n";
    gate.RenderMetrics(text);
    const size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) return std::string("absent");
    const size_t value = at + name.size() + 2;
    return text.substr(value, text.find('\n', value) - value);
  };
  EXPECT_EQ(series("uplink_console_store_reachable"), "1");
  EXPECT_EQ(series("uplink_console_store_reconnects_total{outcome=\"failed\"}"), "0");
  gate.GaveUp("PostgreSQL did not answer within 15 s");
  EXPECT_EQ(series("uplink_console_store_reachable"), "0");
  EXPECT_EQ(series("uplink_console_store_statements_given_up_total"), "1");
  EXPECT_FALSE(gate.TryBegin().ok());
  EXPECT_FALSE(gate.TryBegin().ok());
  EXPECT_EQ(series("uplink_console_store_reconnects_refused_total"), "2");
  clock.Advance(ReconnectGate::kFirstBackoff);
  ASSERT_TRUE(gate.TryBegin().ok());
  gate.Failed("refused");
  EXPECT_EQ(series("uplink_console_store_reconnects_total{outcome=\"failed\"}"), "1");
  clock.Advance(2 * ReconnectGate::kFirstBackoff);
  ASSERT_TRUE(gate.TryBegin().ok());
  gate.Succeeded();
  EXPECT_EQ(series("uplink_console_store_reconnects_total{outcome=\"succeeded\"}"), "1");
  EXPECT_EQ(series("uplink_console_store_reachable"), "1");
}

TEST(ReconnectGateTest, AttemptsThatBeganTogetherFailAsOneRound) {
  FakeClock clock;
  ReconnectGate gate(clock);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(gate.TryBegin().ok());
  for (int i = 0; i < 5; ++i) {
    clock.Advance(milliseconds(100));
    gate.Failed("refused");
  }
  // One back-off from the last failure, not 2^5 of them.
  EXPECT_TRUE(Refused(gate.TryBegin(), "the next attempt to reconnect is in 1 s"));
  clock.Advance(ReconnectGate::kFirstBackoff);
  EXPECT_TRUE(gate.TryBegin().ok());
}

}  // namespace
}  // namespace uplink::console::sql
