#include "common/quantity.h"

#include <gtest/gtest.h>

#include <string>

namespace uplink {
namespace {

std::int64_t Milli(std::string_view text) {
  auto q = Quantity::Parse(text);
  EXPECT_TRUE(q.ok()) << text << ": " << q.status().ToString();
  if (!q.ok()) return -1;
  auto milli = q->MilliValue();
  EXPECT_TRUE(milli.ok()) << text << ": " << milli.status().ToString();
  return milli.value_or(-1);
}

TEST(Quantity, PlainIntegersAndDecimalSuffixesGiveExactMilliValues) {
  EXPECT_EQ(Milli("8"), 8000);
  EXPECT_EQ(Milli("0"), 0);
  EXPECT_EQ(Milli("1500m"), 1500);
  EXPECT_EQ(Milli("2k"), 2'000'000);
  EXPECT_EQ(Milli("3M"), 3'000'000'000);
  EXPECT_EQ(Milli("1G"), 1'000'000'000'000);
  EXPECT_EQ(Milli("1T"), 1'000'000'000'000'000);
  EXPECT_EQ(Milli("1000000u"), 1000);
  EXPECT_EQ(Milli("5000000n"), 5);
}

TEST(Quantity, BinarySuffixesArePowersOfTwo) {
  EXPECT_EQ(Milli("1Ki"), 1024'000);
  EXPECT_EQ(Milli("16367668Ki"), 16367668LL * 1024 * 1000);
  EXPECT_EQ(Milli("1Mi"), 1048576'000);
  EXPECT_EQ(Milli("1.5Ki"), 1536'000);
  EXPECT_EQ(Milli("1Ti"), (1LL << 40) * 1000);
  EXPECT_EQ(Milli("1Pi"), (1LL << 50) * 1000);
}

TEST(Quantity, SignsFractionsAndExponentsFollowTheApimachineryGrammar) {
  EXPECT_EQ(Milli("+4"), 4000);
  EXPECT_EQ(Milli("-4"), -4000);
  EXPECT_EQ(Milli("0.5"), 500);
  EXPECT_EQ(Milli(".5"), 500);
  EXPECT_EQ(Milli("5."), 5000);
  EXPECT_EQ(Milli("1e3"), 1'000'000);
  EXPECT_EQ(Milli("1E3"), 1'000'000);
  EXPECT_EQ(Milli("15e-1"), 1500);
  EXPECT_EQ(Milli("2e+2"), 200'000);
  EXPECT_EQ(Milli("-0"), 0);
  EXPECT_EQ(Milli("000012"), 12'000);
  EXPECT_EQ(Milli("1.50"), 1500);
}

TEST(Quantity, TheExaSuffixesParseButOverflowMilliUnitsWithAClearError) {
  for (const char* text : {"1E", "1Ei", "10P", "9223372036854775808m"}) {
    auto q = Quantity::Parse(text);
    ASSERT_TRUE(q.ok()) << text;
    auto milli = q->MilliValue();
    ASSERT_FALSE(milli.ok()) << text;
    EXPECT_EQ(milli.status().code(), StatusCode::kResourceExhausted) << text;
    EXPECT_NE(milli.status().message().find("too large"), std::string::npos);
  }
  EXPECT_EQ(Milli("9223372036854775807m"), 9223372036854775807LL);
}

TEST(Quantity, WholeCountRefusesFractionsAndNegativesInsteadOfRounding) {
  EXPECT_EQ(*Quantity::Parse("8")->WholeCount(), 8);
  EXPECT_EQ(*Quantity::Parse("8000m")->WholeCount(), 8);
  EXPECT_EQ(*Quantity::Parse("1e1")->WholeCount(), 10);
  auto fractional = Quantity::Parse("1500m")->WholeCount();
  ASSERT_FALSE(fractional.ok());
  EXPECT_EQ(fractional.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fractional.status().message().find("'1500m' is not a whole number"),
            std::string::npos);
  EXPECT_FALSE(Quantity::Parse("0.5")->WholeCount().ok());
  EXPECT_FALSE(Quantity::Parse("1n")->WholeCount().ok());
  auto negative = Quantity::Parse("-1")->WholeCount();
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("negative"), std::string::npos);
}

TEST(Quantity, ValuesFinerThanAThousandthAreRefusedRatherThanRounded) {
  auto milli = Quantity::Parse("1n")->MilliValue();
  ASSERT_FALSE(milli.ok());
  EXPECT_EQ(milli.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(milli.status().message().find("finer than a thousandth"), std::string::npos);
}

TEST(Quantity, MalformedTextIsRejectedWithAMessageNamingIt) {
  for (const char* text :
       {"", "eight", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i",
        "-3.01e-", "1e", "1e+", "1 ", " 1", "1K", "1KI", "1ki", ".", "-", "+", "--1", "1..",
        "0x10", "1,5", "1e3.5", "1Gi1", "e3", "Ki", "1\n", "1mm", "\xff", "NaN", "Infinity"}) {
    auto q = Quantity::Parse(text);
    EXPECT_FALSE(q.ok()) << "accepted '" << text << "'";
    if (!q.ok()) {
      EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument) << text;
      EXPECT_NE(q.status().message().find("is not a Kubernetes quantity"), std::string::npos)
          << q.status().message();
    }
  }
  EXPECT_EQ(Quantity::Parse("eight").status().message(), "'eight' is not a Kubernetes quantity");
}

TEST(Quantity, HostileInputsAreBoundedAndNeverEchoedInFull) {
  std::string long_digits(10'000, '9');
  auto q = Quantity::Parse(long_digits);
  ASSERT_FALSE(q.ok());
  EXPECT_LT(q.status().message().size(), 200u);

  auto huge_exponent = Quantity::Parse("1e99999999999999999999");
  ASSERT_FALSE(huge_exponent.ok());
  EXPECT_NE(huge_exponent.status().message().find("exponent out of range"), std::string::npos);

  auto control = Quantity::Parse(std::string("1\x1b[31m", 7));
  ASSERT_FALSE(control.ok());
  EXPECT_EQ(control.status().message().find('\x1b'), std::string::npos);

  // Many significant digits within the length limit: refused, not truncated.
  auto precise = Quantity::Parse("1.000000000000000000000000000000000000000001");
  ASSERT_FALSE(precise.ok());
  EXPECT_NE(precise.status().message().find("significant digits"), std::string::npos);

  // Zero with an absurd exponent is still exactly zero.
  EXPECT_EQ(Milli("0e999"), 0);
  auto big = Quantity::Parse("1e999");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->MilliValue().status().code(), StatusCode::kResourceExhausted);
  auto tiny = Quantity::Parse("1e-999");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->MilliValue().status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace uplink
