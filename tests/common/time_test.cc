#include "common/time.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace uplink {
namespace {

TEST(Rfc3339, FormatsAndParsesUtc) {
  WallTime t = FromUnixSeconds(1'796'097'600);  // 2026-12-01T04:00:00Z
  EXPECT_EQ(FormatRfc3339(t), "2026-12-01T04:00:00Z");
  EXPECT_EQ(*ParseRfc3339("2026-12-01T04:00:00Z"), t);
}

TEST(Rfc3339, AppliesOffsetsAndFractions) {
  EXPECT_EQ(ToUnixSeconds(*ParseRfc3339("2026-12-01T06:00:00+02:00")), 1'796'097'600);
  auto with_fraction = ParseRfc3339("2026-12-01T04:00:00.250Z");
  ASSERT_TRUE(with_fraction.ok());
  EXPECT_EQ(FormatRfc3339Millis(*with_fraction), "2026-12-01T04:00:00.250Z");
}

// Kubernetes clients parse MicroTime with a fixed six-digit layout: trailing zeros stay.
TEST(Rfc3339, MicroTimeAlwaysHasSixFractionDigits) {
  const WallTime t = FromUnixSeconds(1'796'097'600);
  EXPECT_EQ(FormatRfc3339Micro(t), "2026-12-01T04:00:00.000000Z");
  EXPECT_EQ(FormatRfc3339Micro(t + std::chrono::microseconds(492'590)),
            "2026-12-01T04:00:00.492590Z");
  EXPECT_EQ(FormatRfc3339Micro(t + std::chrono::nanoseconds(1'999)), "2026-12-01T04:00:00.000001Z");
}

TEST(Rfc3339, FormattingAgreesWithTheCLibraryAcrossTheClocksRange) {
  std::mt19937_64 random(20261130);
  std::vector<std::int64_t> seconds = {0, -1, 951'782'400 /* 2000-02-29 */, 4'107'456'000,
                                       -9'223'372'036, 9'223'372'036};
  for (int i = 0; i < 20'000; ++i) {
    seconds.push_back(std::uniform_int_distribution<std::int64_t>(-9'223'372'036,
                                                                  9'223'372'036)(random));
  }
  for (std::int64_t s : seconds) {
    std::time_t time = static_cast<std::time_t>(s);
    std::tm tm{};
    ASSERT_NE(gmtime_r(&time, &tm), nullptr);
    char expected[32];
    std::strftime(expected, sizeof expected, "%Y-%m-%dT%H:%M:%SZ", &tm);
    WallTime t = FromUnixSeconds(s) + std::chrono::milliseconds(7);
    ASSERT_EQ(FormatRfc3339(t), expected) << s;
    std::string millis = expected;
    millis.insert(millis.size() - 1, ".007");
    ASSERT_EQ(FormatRfc3339Millis(t), millis) << s;
  }
}

TEST(Rfc3339, RefusesMalformedTimes) {
  for (const char* bad : {"", "2026-12-01", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z",
                          "2026-12-01T24:00:00Z", "2026-12-01T04:00:00", "2026-12-01T04:00:00Zjunk",
                          "2026-12-01T04:00:00.Z", "2026-12-01T04:00:00+2:00", "garbage-garbage-garb"}) {
    EXPECT_FALSE(ParseRfc3339(bad).ok()) << bad;
  }
}

TEST(Rfc3339, YearsTheClockCannotHoldAreRefusedInsteadOfOverflowing) {
  for (const char* far : {"9999-12-31T23:59:59Z", "2263-01-01T00:00:00Z", "0001-01-01T00:00:00Z"}) {
    auto parsed = ParseRfc3339(far);
    ASSERT_FALSE(parsed.ok()) << far << " became " << FormatRfc3339(*parsed);
    EXPECT_NE(parsed.status().message().find("outside the years"), std::string::npos)
        << parsed.status().message();
  }
  auto last = ParseRfc3339("2262-01-01T00:00:00Z");
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(FormatRfc3339(*last), "2262-01-01T00:00:00Z");
}

TEST(FakeClock, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  WallTime start = clock.Now();
  SteadyTime steady = clock.SteadyNow();
  clock.Advance(std::chrono::seconds(90));
  EXPECT_EQ(clock.Now() - start, std::chrono::seconds(90));
  EXPECT_EQ(clock.SteadyNow() - steady, std::chrono::seconds(90));
}

}  // namespace
}  // namespace uplink
