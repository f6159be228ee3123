#include "common/decimal.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

namespace uplink {
namespace {

// What std::from_chars makes of the whole of `text`, the reference for every accepted input.
std::optional<double> FromChars(std::string_view text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

TEST(ParseFiniteDouble, ReadsWhatProcAndNvidiaSmiWrite) {
  EXPECT_EQ(ParseFiniteDouble("0.52"), 0.52);
  EXPECT_EQ(ParseFiniteDouble("245.67"), 245.67);
  EXPECT_EQ(ParseFiniteDouble("1410"), 1410.0);
  EXPECT_EQ(ParseFiniteDouble("-3.5"), -3.5);
  EXPECT_EQ(ParseFiniteDouble(".5"), 0.5);
  EXPECT_EQ(ParseFiniteDouble("5."), 5.0);
  EXPECT_EQ(ParseFiniteDouble("1e3"), 1000.0);
  EXPECT_EQ(ParseFiniteDouble("2.5E-3"), 0.0025);
  EXPECT_EQ(ParseFiniteDouble("1e+2"), 100.0);
  EXPECT_EQ(ParseFiniteDouble("0"), 0.0);
}

TEST(ParseFiniteDouble, RefusesAnythingElse) {
  for (const char* bad : {"", "-", ".", "-.", "+1", " 1", "1 ", "1e", "1e+", "e5", "0x1p3",
                          "inf", "-inf", "nan", "infinity", "1,5", "1.5.2", "--1", "1e5e5",
                          "1\n", "12a", "1e400", "-1e400"}) {
    EXPECT_EQ(ParseFiniteDouble(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(ParseFiniteDouble(std::string(200, '1')), std::nullopt);  // beyond the bound
  EXPECT_EQ(ParseFiniteDouble(std::string_view("1\0", 2)), std::nullopt);
}

TEST(ParseFiniteDouble, AgreesWithFromCharsToTheLastBit) {
  std::mt19937_64 random(20261130);
  std::uniform_int_distribution<int> digits(1, 20), exponent(-330, 310), kind(0, 3);
  char buffer[64];
  for (int i = 0; i < 100'000; ++i) {
    std::string text;
    if (random() % 2) text += '-';
    const int integer = digits(random), fraction = digits(random);
    for (int d = 0; d < integer; ++d) text += static_cast<char>('0' + random() % 10);
    if (kind(random) != 0) {
      text += '.';
      for (int d = 0; d < fraction; ++d) text += static_cast<char>('0' + random() % 10);
    }
    if (kind(random) == 0) text += "e" + std::to_string(exponent(random));
    const std::optional<double> reference = FromChars(text);
    const std::optional<double> parsed = ParseFiniteDouble(text);
    if (!reference) {
      // from_chars refuses both overflow and underflow; only underflow is a number here,
      // rounded to a subnormal or zero as strtod does.
      if (parsed) {
        EXPECT_LT(std::fabs(*parsed), DBL_MIN) << text;
      }
      continue;
    }
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(*parsed, *reference) << text;
    // And every double printed shortest reads back exactly.
    const double value = *reference;
    auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
    ASSERT_EQ(error, std::errc());
    EXPECT_EQ(ParseFiniteDouble(std::string_view(buffer, end - buffer)), value)
        << std::string_view(buffer, end - buffer);
  }
}

}  // namespace
}  // namespace uplink
