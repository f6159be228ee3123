#include "common/text.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace uplink
