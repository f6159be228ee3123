#include "common/backoff.h"

#include <gtest/gtest.h>

#include <vector>

namespace uplink {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(Backoff, TheCeilingDoublesFromTheBaseUntilTheFiveMinuteCap) {
  Backoff backoff(BackoffOptions{}, [] { return 0.999999; });
  std::vector<std::int64_t> waits;
  for (int i = 0; i < 12; ++i) waits.push_back(backoff.NextDelay().count() / 1000);
  // Random near 1 shows the ceiling: 1, 2, 4, ... 256 s, then 300 s (the cap) forever.
  EXPECT_EQ(waits, (std::vector<std::int64_t>{0, 1, 3, 7, 15, 31, 63, 127, 255, 299, 299, 299}));
  EXPECT_EQ(backoff.failures(), 12);
}

TEST(Backoff, FullJitterScalesTheCeilingByTheRandomSource) {
  std::vector<double> draws{0.0, 0.5, 0.25, 0.5};
  size_t next = 0;
  Backoff backoff(BackoffOptions{}, [&] { return draws[next++ % draws.size()]; });
  EXPECT_EQ(backoff.NextDelay(), milliseconds(0));      // 0 x 1 s
  EXPECT_EQ(backoff.NextDelay(), milliseconds(1'000));  // 0.5 x 2 s
  EXPECT_EQ(backoff.NextDelay(), milliseconds(1'000));  // 0.25 x 4 s
  EXPECT_EQ(backoff.NextDelay(), milliseconds(4'000));  // 0.5 x 8 s
}

TEST(Backoff, ASuccessResetsTheSchedule) {
  Backoff backoff(BackoffOptions{}, [] { return 0.5; });
  for (int i = 0; i < 20; ++i) (void)backoff.NextDelay();
  EXPECT_EQ(backoff.NextDelay(), milliseconds(150'000));
  backoff.Reset();
  EXPECT_EQ(backoff.failures(), 0);
  EXPECT_EQ(backoff.NextDelay(), milliseconds(500));
}

TEST(Backoff, RetryAfterIsAFloorButNeverLowersTheWait) {
  Backoff backoff(BackoffOptions{}, [] { return 0.0; });
  EXPECT_EQ(backoff.NextDelay(seconds(30)), milliseconds(30'000));
  Backoff high(BackoffOptions{}, [] { return 0.999; });
  for (int i = 0; i < 10; ++i) (void)high.NextDelay();
  EXPECT_GT(high.NextDelay(seconds(1)), milliseconds(200'000));
}

TEST(Backoff, AnAbsurdRetryAfterIsCappedAtAnHour) {
  Backoff backoff(BackoffOptions{}, [] { return 0.0; });
  EXPECT_EQ(backoff.NextDelay(std::chrono::hours(24 * 365)), milliseconds(3'600'000));
}

TEST(Backoff, ARandomSourceOutsideTheUnitIntervalCannotExceedTheCeiling) {
  Backoff backoff(BackoffOptions{}, [] { return 7.0; });
  EXPECT_EQ(backoff.NextDelay(), milliseconds(1'000));
  Backoff negative(BackoffOptions{}, [] { return -3.0; });
  EXPECT_EQ(negative.NextDelay(), milliseconds(0));
}

TEST(Backoff, TheDefaultRandomSourceStaysWithinTheCeiling) {
  Backoff backoff;
  for (int i = 0; i < 100; ++i) {
    auto wait = backoff.NextDelay();
    EXPECT_GE(wait, milliseconds(0));
    EXPECT_LE(wait, milliseconds(300'000));
  }
}

TEST(RetryAfter, DeltaSecondsAreParsed) {
  WallTime now = FromUnixSeconds(1'800'000'000);
  EXPECT_EQ(*ParseRetryAfter("120", now), milliseconds(120'000));
  EXPECT_EQ(*ParseRetryAfter(" 0 ", now), milliseconds(0));
}

TEST(RetryAfter, HttpDatesInAllThreeFormsAreRelativeToNow) {
  WallTime now = FromUnixSeconds(784'111'747);  // Sun, 06 Nov 1994 08:49:07 GMT
  EXPECT_EQ(*ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now), milliseconds(30'000));
  EXPECT_EQ(*ParseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", now), milliseconds(30'000));
  EXPECT_EQ(*ParseRetryAfter("Sun Nov  6 08:49:37 1994", now), milliseconds(30'000));
}

TEST(RetryAfter, ADateInThePastMeansNoExtraWait) {
  WallTime now = FromUnixSeconds(1'800'000'000);
  EXPECT_EQ(*ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now), milliseconds(0));
}

TEST(RetryAfter, GarbageIsRejectedWithoutEchoingControlCharacters) {
  WallTime now = FromUnixSeconds(1'800'000'000);
  for (const char* text : {"", "soon", "-5", "1.5", "12abc", "Sun, 06 Nov 1994", "\x1b[2J",
                           "Sun, 32 Nov 1994 08:49:37 GMT"}) {
    auto parsed = ParseRetryAfter(text, now);
    EXPECT_FALSE(parsed.ok()) << text;
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().message().find('\x1b'), std::string::npos);
    }
  }
  EXPECT_FALSE(ParseRetryAfter(std::string(1000, '1'), now).ok());
}

TEST(RetryAfter, AHugeDeltaSaturatesInsteadOfOverflowing) {
  WallTime now = FromUnixSeconds(1'800'000'000);
  auto parsed = ParseRetryAfter("99999999999999999999", now);
  ASSERT_TRUE(parsed.ok());
  EXPECT_GT(*parsed, milliseconds(0));
}

TEST(RetryAfter, ADateFarInTheFutureIsCappedAtAnHourInsteadOfOverflowing) {
  WallTime now = FromUnixSeconds(1'800'000'000);
  for (const char* date : {"Fri, 31 Dec 9999 23:59:59 GMT", "Fri Dec 31 23:59:59 9999",
                           "Tue, 01 Jan 2263 00:00:00 GMT"}) {
    auto parsed = ParseRetryAfter(date, now);
    ASSERT_TRUE(parsed.ok()) << date << ": " << parsed.status().ToString();
    EXPECT_EQ(*parsed, std::chrono::hours(1)) << date;
  }
  EXPECT_EQ(*ParseRetryAfter("86400", now), std::chrono::hours(1));
  EXPECT_EQ(*ParseRetryAfter("99999999999999999999", now), std::chrono::hours(1));
}

}  // namespace
}  // namespace uplink
