#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/metrics.h"

namespace uplink::metrics {
namespace {

std::string GoFloat(double value) {
  std::string out;
  AppendGoFloat(out, value);
  return out;
}

TEST(AppendGoFloat, PrintsLikeGosShortestGFormat) {
  // Expected texts are what strconv.FormatFloat(v, 'g', -1, 64) returns, as node_exporter
  // serves them.
  EXPECT_EQ(GoFloat(0), "0");
  EXPECT_EQ(GoFloat(-0.0), "0");
  EXPECT_EQ(GoFloat(1), "1");
  EXPECT_EQ(GoFloat(-1), "-1");
  EXPECT_EQ(GoFloat(0.52), "0.52");
  EXPECT_EQ(GoFloat(100000), "100000");
  EXPECT_EQ(GoFloat(999999), "999999");
  EXPECT_EQ(GoFloat(123456.5), "123456.5");
  EXPECT_EQ(GoFloat(1e6), "1e+06");
  EXPECT_EQ(GoFloat(1234567), "1.234567e+06");
  EXPECT_EQ(GoFloat(16777216000), "1.6777216e+10");
  EXPECT_EQ(GoFloat(1764400000), "1.7644e+09");
  EXPECT_EQ(GoFloat(0.0001), "0.0001");
  EXPECT_EQ(GoFloat(0.00001), "1e-05");
  EXPECT_EQ(GoFloat(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(GoFloat(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(GoFloat(1e21), "1e+21");
  EXPECT_EQ(GoFloat(1e100), "1e+100");
  EXPECT_EQ(GoFloat(5e-324), "5e-324");
  EXPECT_EQ(GoFloat(18446744073709551615.0), "1.8446744073709552e+19");
  EXPECT_EQ(GoFloat(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
  EXPECT_EQ(GoFloat(std::nan("")), "NaN");
  EXPECT_EQ(GoFloat(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(GoFloat(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(AppendGoFloat, PrintsWholeNumbersAroundTwoToThe53LikeGo) {
  // Integers up to 2^53 are printed from their own digits, larger ones through the float
  // conversion; either way the text is Go's.
  EXPECT_EQ(GoFloat(123456789), "1.23456789e+08");
  EXPECT_EQ(GoFloat(-120000000), "-1.2e+08");
  EXPECT_EQ(GoFloat(9007199254740991.0), "9.007199254740991e+15");
  EXPECT_EQ(GoFloat(9007199254740992.0), "9.007199254740992e+15");
  EXPECT_EQ(GoFloat(9007199254740994.0), "9.007199254740994e+15");
  EXPECT_EQ(GoFloat(1e15), "1e+15");
  EXPECT_EQ(GoFloat(1e16), "1e+16");
  EXPECT_EQ(GoFloat(100), "100");
  EXPECT_EQ(GoFloat(-999999), "-999999");
  EXPECT_EQ(GoFloat(0.5), "0.5");
  EXPECT_EQ(GoFloat(12345.67), "12345.67");
  EXPECT_EQ(GoFloat(0.000123), "0.000123");
}

TEST(AppendGoFloat, ReadsBackToTheSameDouble) {
  for (double value : {1.0 / 3, 2.0 / 3 * 1e7, 123.456e-3, 4503599627370497.0, 9.87654321e-5}) {
    EXPECT_EQ(std::stod(GoFloat(value)), value) << GoFloat(value);
  }
}

}  // namespace
}  // namespace uplink::metrics
