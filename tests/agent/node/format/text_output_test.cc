#include "agent/node/format/text_output.h"

#include <gtest/gtest.h>


#include "common/json.h"

namespace uplink::agent::node {
namespace {

using namespace std::string_literals;

std::string JsonString(std::string_view text, std::size_t max_bytes = 253) {
  std::string out;
  AppendJsonString(out, text, max_bytes);
  return out;
}

TEST(AppendJsonString, EscapesWhatJsonRequires) {
  EXPECT_EQ(JsonString("eth0"), "\"eth0\"");
  EXPECT_EQ(JsonString("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(JsonString("tab\there\nnl"), R"("tab\there\nnl")");
  EXPECT_EQ(JsonString("\x01\x1f\x7f"), R"("\u0001\u001f\u007f")");
  EXPECT_EQ(JsonString("nul\0x"s), R"("nul\u0000x")");
  EXPECT_EQ(JsonString("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
}

TEST(AppendJsonString, ReplacesInvalidUtf8) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(JsonString("a\xFFz"), "\"a" + replacement + "z\"");
  EXPECT_EQ(JsonString("\xC0\xAF"), "\"" + replacement + replacement + "\"") << "overlong";
  EXPECT_EQ(JsonString("\xED\xA0\x80"), "\"" + replacement + replacement + replacement + "\"")
      << "a UTF-16 surrogate";
  EXPECT_EQ(JsonString("\xE2\x82"), "\"" + replacement + replacement + "\"") << "cut short";
  EXPECT_EQ(JsonString("\xF4\x90\x80\x80").size(), 2 + 4 * replacement.size()) << "past U+10FFFF";
}

TEST(AppendJsonString, CutsBetweenCharactersAtTheBound) {
  EXPECT_EQ(JsonString("abcdef", 3), "\"abc\"");
  EXPECT_EQ(JsonString("ab\xE2\x82\xAC", 4), "\"ab\"") << "the euro sign does not fit whole";
  EXPECT_EQ(JsonString("ab\xE2\x82\xAC", 5), "\"ab\xE2\x82\xAC\"");
  EXPECT_EQ(JsonString("\"\"\"", 2), R"("\"\"")") << "escapes do not count against the bound";
}

TEST(AppendJsonString, AlwaysMakesAStringJsonAccepts) {
  std::string every_byte;
  for (int i = 0; i < 256; ++i) every_byte += static_cast<char>(i);
  for (std::size_t cut = 0; cut <= every_byte.size(); cut += 7) {
    const std::string literal = JsonString(every_byte.substr(cut), 4096);
    auto parsed = ParseJson(literal);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_TRUE(parsed->is_string());
  }
}

TEST(AppendJsonNumber, WritesShortestDigitsAndWholeIntegers) {
  std::string out;
  AppendJsonNumber(out, 0.52);
  out += ' ';
  AppendJsonNumber(out, std::uint64_t{18446744073709551615u});
  out += ' ';
  AppendJsonNumber(out, std::int64_t{-5});
  out += ' ';
  AppendJsonNumber(out, 1e300);
  EXPECT_EQ(out, "0.52 18446744073709551615 -5 1e+300");
}

TEST(AppendLabelValue, EscapesBackslashQuoteAndNewlineOnly) {
  std::string out;
  AppendLabelValue(out, "a\\b\"c\nd\te");
  EXPECT_EQ(out, "a\\\\b\\\"c\\nd\te");
  out.clear();
  AppendLabelValue(out, "bad\xFF");
  EXPECT_EQ(out, "bad\xEF\xBF\xBD");
  out.clear();
  AppendLabelValue(out, "caf\xC3\xA9\xFF\"x\xE2\x82\xAC\xE2\x82");
  EXPECT_EQ(out, "caf\xC3\xA9\xEF\xBF\xBD\\\"x\xE2\x82\xAC\xEF\xBF\xBD\xEF\xBF\xBD")
      << "valid characters kept, each invalid byte replaced, escapes between them";
}

}  // namespace
}  // namespace uplink::agent::node
