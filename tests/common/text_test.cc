#include "common/text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace uplink {
namespace {

TEST(OneLineExcerpt, CutsBeforeAUtf8SequenceNeverInsideIt) {
  // "é" is C3 A9, "€" is E2 82 AC: a cut at 2 or 3 bytes would split them.
  EXPECT_EQ(OneLineExcerpt("a\xc3\xa9", 2), "a...");
  EXPECT_EQ(OneLineExcerpt("\xe2\x82\xac\xe2\x82\xac", 4), "\xe2\x82\xac...");
  EXPECT_EQ(OneLineExcerpt("\xe2\x82\xac", 3), "\xe2\x82\xac");
  EXPECT_EQ(OneLineExcerpt("ab", 5), "ab");
}

TEST(OneLineExcerpt, BlanksControlCharactersSoATerminalObeysNone) {
  EXPECT_EQ(OneLineExcerpt("a\nb\rc\td\x1b[31me\x7f"), "a b c d [31me ");
  // U+009B (CSI) in UTF-8 is C2 9B; a terminal treats it like ESC [.
  EXPECT_EQ(OneLineExcerpt("node\xc2\x9b" "2Jx"), "node 2Jx");
  EXPECT_EQ(OneLineExcerpt("\xc2\x80\xc2\x9f"), "  ");
  // Other two-byte characters stay: U+00A0-U+00FF and beyond.
  EXPECT_EQ(OneLineExcerpt("caf\xc3\xa9 \xc2\xa0x"), "caf\xc3\xa9 \xc2\xa0x");
  // A lone C2 at the end is left as it is (not a control).
  EXPECT_EQ(OneLineExcerpt("x\xc2"), "x\xc2");
}

TEST(OneLineExcerpt, CutsAtTheLimitAndSaysSo) {
  EXPECT_EQ(OneLineExcerpt("abcdef", 3), "abc...");
  EXPECT_EQ(OneLineExcerpt("abc", 3), "abc");
  EXPECT_EQ(OneLineExcerpt("", 3), "");
}

// One shell word whatever the text: plain when nothing in it is special to a shell, else
// single-quoted with every quote closed, escaped and reopened.
TEST(ShellQuote, QuotesOnlyWhatAShellWouldReadOtherwise) {
  EXPECT_EQ(ShellQuote("https://console.example:8443/charts"), "https://console.example:8443/charts");
  EXPECT_EQ(ShellQuote("nodes.selector=a=b,c"), "nodes.selector=a=b,c");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("prod east"), "'prod east'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(ShellQuote("a;b|c&d`e`"), "'a;b|c&d`e`'");
  EXPECT_EQ(ShellQuote("line\nbreak"), "'line\nbreak'");
  EXPECT_EQ(ShellQuote("x\\,y"), "'x\\,y'");
}

TEST(AsciiLower, LowersOnlyAToZWhateverTheByte) {
  EXPECT_EQ(AsciiLower("Impersonate-User"), "impersonate-user");
  EXPECT_EQ(AsciiLower("GZIP@[Z]"), "gzip@[z]");  // '@' and '[' sit right before and after A-Z
  // Bytes above 0x7f (UTF-8 of "ÄÖ") and NUL pass unchanged: no locale folds them.
  EXPECT_EQ(AsciiLower(std::string("\xc3\x84\xc3\x96\0X", 6)),
            std::string("\xc3\x84\xc3\x96\0x", 6));
  EXPECT_EQ(AsciiLower(""), "");
  for (int c = -128; c < 128; ++c) {
    char byte = static_cast<char>(c);
    char expected = (byte >= 'A' && byte <= 'Z') ? static_cast<char>(byte + 32) : byte;
    EXPECT_EQ(AsciiLower(byte), expected) << c;
  }
}

TEST(AsciiLower, ComparesAndMatchesPrefixesWithoutCase) {
  EXPECT_TRUE(EqualsIgnoringAsciiCase("Application/JSON", "application/json"));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("gzip", "gzip "));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("gzi", "gzip"));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("@", "`"));  // 0x40 and 0x60 differ by the case bit
  EXPECT_FALSE(EqualsIgnoringAsciiCase("\xc3\xa4", "\xc3\x84"));  // "ä" is not "Ä" in ASCII
  EXPECT_TRUE(StartsWithIgnoringAsciiCase("BEARER agt_x", "bearer "));
  EXPECT_FALSE(StartsWithIgnoringAsciiCase("Bear", "bearer "));
  EXPECT_TRUE(StartsWithIgnoringAsciiCase("anything", ""));
}

TEST(ParseDecimal, TakesDigitsOnlyWithinTheBounds) {
  EXPECT_EQ(ParseDecimal("0"), 0u);
  EXPECT_EQ(ParseDecimal("007"), 7u);
  EXPECT_EQ(ParseDecimal("18446744073709551615"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(ParseDecimal("500", 1, 500), 500u);
  EXPECT_EQ(ParseDecimal("1", 1, 500), 1u);
  EXPECT_EQ(ParseDecimalInt("9223372036854775807", 0, std::numeric_limits<std::int64_t>::max()),
            std::numeric_limits<std::int64_t>::max());
}

TEST(ParseDecimal, RefusesHostileInput) {
  for (const std::string& bad : std::vector<std::string>{
           "", "-1", "+1", " 1", "1 ", "1\n", "0x10", "1e3", "1.0", "１",  // full-width digit
           "18446744073709551616",                    // 2^64
           "99999999999999999999999999999999999999",  // far past 64 bits
           std::string("1\0002", 3),                  // a NUL inside
           "١"}) {                                    // Arabic-Indic one
    EXPECT_EQ(ParseDecimal(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(ParseDecimal("501", 1, 500), std::nullopt);
  EXPECT_EQ(ParseDecimal("0", 1, 500), std::nullopt);
  // 2^64 + 1 wraps to 1 in 64 bits; it must not slip through as 1.
  EXPECT_EQ(ParseDecimal("18446744073709551617", 0, 10), std::nullopt);
  EXPECT_EQ(ParseDecimalInt("9223372036854775808", 0, std::numeric_limits<std::int64_t>::max()),
            std::nullopt);
  EXPECT_EQ(ParseDecimalInt("5", -1, 10), std::nullopt) << "a negative minimum is not supported";
  EXPECT_EQ(ParseDecimalInt("5", 10, 1), std::nullopt) << "an empty range takes nothing";
  std::string long_zeros(100000, '0');
  EXPECT_EQ(ParseDecimal(long_zeros + "42"), 42u) << "leading zeros are only zeros";
}

}  // namespace
}  // namespace uplink
