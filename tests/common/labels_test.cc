#include "common/labels.h"

#include <gtest/gtest.h>

#include <string>

namespace uplink::labels {
namespace {

Selector MustParse(std::string_view text) {
  Result<Selector> selector = Selector::Parse(text);
  EXPECT_TRUE(selector.ok()) << text << ": " << selector.status().ToString();
  return selector.ok() ? *selector : Selector();
}

std::string ParseError(std::string_view text) {
  Result<Selector> selector = Selector::Parse(text);
  EXPECT_FALSE(selector.ok()) << "accepted: " << text;
  if (selector.ok()) return "";
  EXPECT_EQ(selector.status().code(), StatusCode::kInvalidArgument);
  return selector.status().message();
}

const LabelMap kGpuNode = {{"nvidia.com/gpu.present", "true"},
                           {"nvidia.com/gpu.count", "8"},
                           {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                           {"kubernetes.io/os", "linux"},
                           {"node-role.kubernetes.io/worker", ""}};
const LabelMap kCpuNode = {{"kubernetes.io/os", "linux"},
                           {"node-role.kubernetes.io/control-plane", ""}};

TEST(NodeSelector, CanonicalAndNeverEmpty) {
  EXPECT_EQ(*CanonicalNodeSelector("zone in (b, a),nvidia.com/gpu.present=true"),
            "nvidia.com/gpu.present=true,zone in (a,b)");
  EXPECT_EQ(*CanonicalNodeSelector(kDefaultGpuNodeSelector), kDefaultGpuNodeSelector);
  for (const char* empty : {"", "   "}) {
    auto refused = CanonicalNodeSelector(empty);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("an empty selector would report every node"),
              std::string::npos);
  }
  auto bad = CanonicalNodeSelector("pool in (a,");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().message().starts_with("not a label selector: found ")) << bad.status().ToString();
}

TEST(LabelSelector, EmptyAndWhitespaceSelectorsMatchEverything) {
  for (std::string_view text : {"", "   ", "\t"}) {
    Selector selector = MustParse(text);
    EXPECT_TRUE(selector.empty());
    EXPECT_TRUE(selector.Matches(kGpuNode));
    EXPECT_TRUE(selector.Matches({}));
  }
}

TEST(LabelSelector, EqualityOperatorsSelectOnValue) {
  EXPECT_TRUE(MustParse("nvidia.com/gpu.present=true").Matches(kGpuNode));
  EXPECT_TRUE(MustParse("nvidia.com/gpu.present==true").Matches(kGpuNode));
  EXPECT_FALSE(MustParse("nvidia.com/gpu.present=true").Matches(kCpuNode));
  EXPECT_FALSE(MustParse("nvidia.com/gpu.present!=true").Matches(kGpuNode));
  // != matches objects that lack the label, like the real API server.
  EXPECT_TRUE(MustParse("nvidia.com/gpu.present!=true").Matches(kCpuNode));
}

TEST(LabelSelector, EmptyValueAfterEqualsSelectsLabelsWithEmptyValue) {
  EXPECT_TRUE(MustParse("node-role.kubernetes.io/worker=").Matches(kGpuNode));
  EXPECT_FALSE(MustParse("node-role.kubernetes.io/worker=").Matches(kCpuNode));
}

TEST(LabelSelector, SetOperatorsSelectOnMembership) {
  EXPECT_TRUE(MustParse("nvidia.com/gpu.count in (4,8)").Matches(kGpuNode));
  EXPECT_FALSE(MustParse("nvidia.com/gpu.count in (1, 2)").Matches(kGpuNode));
  EXPECT_FALSE(MustParse("nvidia.com/gpu.count in (4,8)").Matches(kCpuNode));
  EXPECT_FALSE(MustParse("nvidia.com/gpu.count notin (8)").Matches(kGpuNode));
  EXPECT_TRUE(MustParse("nvidia.com/gpu.count notin (8)").Matches(kCpuNode));
}

TEST(LabelSelector, ExistenceOperatorsSelectOnPresence) {
  EXPECT_TRUE(MustParse("nvidia.com/gpu.present").Matches(kGpuNode));
  EXPECT_FALSE(MustParse("nvidia.com/gpu.present").Matches(kCpuNode));
  EXPECT_FALSE(MustParse("!nvidia.com/gpu.present").Matches(kGpuNode));
  EXPECT_TRUE(MustParse("! nvidia.com/gpu.present").Matches(kCpuNode));
}

TEST(LabelSelector, NumericComparisonsNeedIntegerLabels) {
  EXPECT_TRUE(MustParse("nvidia.com/gpu.count>4").Matches(kGpuNode));
  EXPECT_FALSE(MustParse("nvidia.com/gpu.count<4").Matches(kGpuNode));
  EXPECT_FALSE(MustParse("nvidia.com/gpu.product>4").Matches(kGpuNode));
  EXPECT_FALSE(MustParse("nvidia.com/gpu.count>4").Matches(kCpuNode));
  EXPECT_NE(ParseError("nvidia.com/gpu.count>four").find("must be an integer"), std::string::npos);
}

TEST(LabelSelector, CommaSeparatedRequirementsAreAllRequired) {
  Selector selector = MustParse("kubernetes.io/os=linux, nvidia.com/gpu.present=true,!foo");
  EXPECT_EQ(selector.requirements().size(), 3u);
  EXPECT_TRUE(selector.Matches(kGpuNode));
  EXPECT_FALSE(selector.Matches(kCpuNode));
}

TEST(LabelSelector, KeywordsAreOrdinaryWordsInValuePosition) {
  EXPECT_TRUE(MustParse("mode=in").Matches({{"mode", "in"}}));
  EXPECT_TRUE(MustParse("mode in (notin,in)").Matches({{"mode", "notin"}}));
}

TEST(LabelSelector, CanonicalFormSortsByKeyAndDeduplicatesSets) {
  EXPECT_EQ(MustParse("z==1,a in (y, x, y),!b").ToString(), "a in (x,y),!b,z=1");
  EXPECT_EQ(MustParse("k notin (a)").ToString(), "k notin (a)");
}

TEST(LabelSelector, SyntaxErrorsSayWhatWasExpectedAndWhere) {
  EXPECT_NE(ParseError("a=b,").find("end of selector"), std::string::npos);
  EXPECT_NE(ParseError(",a=b").find("position 0"), std::string::npos);
  EXPECT_NE(ParseError("a=b,,c=d").find("expected '!' or a label key"), std::string::npos);
  EXPECT_NE(ParseError("a b").find("an operator"), std::string::npos);
  EXPECT_NE(ParseError("a=b c").find("',' or end of selector"), std::string::npos);
  EXPECT_NE(ParseError("a in (x").find("',' or ')'"), std::string::npos);
  EXPECT_NE(ParseError("a in x").find("'('"), std::string::npos);
  EXPECT_NE(ParseError("a in ()").find("at least one value"), std::string::npos);
  EXPECT_NE(ParseError("!a=b").find("after '!a'"), std::string::npos);
  ParseError("a=(b)");
  ParseError("=b");
  ParseError("!");
  ParseError("a!b");
}

TEST(LabelSelector, UnbalancedParenthesesAreRejected) {
  ParseError("a in ((x)");
  ParseError("a in (x))");
  ParseError("a in (x,(y))");
  ParseError(")");
  ParseError("a in (x");
}

TEST(LabelSelector, InvalidKeysAreRejectedLikeApimachinery) {
  EXPECT_NE(ParseError("/gpu=1").find("prefix before '/' is empty"), std::string::npos);
  EXPECT_NE(ParseError("nvidia.com/=1").find("name part is empty"), std::string::npos);
  EXPECT_NE(ParseError("a/b/c=1").find("at most one '/'"), std::string::npos);
  EXPECT_NE(ParseError("NVIDIA.com/gpu=1").find("DNS subdomain"), std::string::npos);
  EXPECT_NE(ParseError("-gpu=1").find("name part"), std::string::npos);
  ParseError(std::string(64, 'k') + "=1");
  ParseError(std::string(254, 'p') + "/k=1");
  MustParse(std::string(63, 'k') + "=1");
  MustParse("Upper_Case.name-1=1");
}

TEST(LabelSelector, InvalidValuesAreRejected) {
  EXPECT_NE(ParseError("a=-x").find("value \"-x\""), std::string::npos);
  ParseError("a=x/y");
  ParseError("a=" + std::string(64, 'v'));
  ParseError("a in (ok, bad/value)");
  MustParse("a=" + std::string(63, 'v'));
}

TEST(LabelSelector, UnicodeIsRejectedInKeysAndValues) {
  ParseError("gpu=\xc3\xa9t\xc3\xa9");
  ParseError("\xe2\x9c\x93=yes");
  ParseError("a=\xff\xfe");
}

TEST(LabelSelector, ControlBytesInErrorsAreEscaped) {
  std::string message = ParseError(std::string("a=\x01\x1b[31m"));
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
  EXPECT_NE(message.find("\\x1b"), std::string::npos);
}

TEST(LabelSelector, HugeSelectorsAreRefusedBeforeParsing) {
  std::string huge(kMaxSelectorBytes + 1, 'a');
  EXPECT_NE(ParseError(huge).find("at most"), std::string::npos);
}

TEST(LabelSelector, LongButBoundedSelectorsParseInLinearTime) {
  std::string many;
  for (int i = 0; i < 2000; ++i) many += (i ? "," : "") + std::string("k") + std::to_string(i);
  Selector selector = MustParse(many);
  EXPECT_EQ(selector.requirements().size(), 2000u);
  EXPECT_FALSE(selector.Matches({{"k1", "x"}}));
  std::string deep(10000, '(');
  ParseError("a in " + deep);
}

TEST(LabelSelector, EmptyElementsInSetsAreTheEmptyValue) {
  Selector selector = MustParse("role in (,worker)");
  EXPECT_TRUE(selector.Matches({{"role", ""}}));
  EXPECT_TRUE(selector.Matches({{"role", "worker"}}));
  EXPECT_FALSE(selector.Matches({{"role", "gpu"}}));
}

}  // namespace
}  // namespace uplink::labels

namespace uplink::labels {
namespace {

// Found by label_selector_fuzz: an empty first value lost the comma after it.
TEST(LabelSelector, AnEmptyValueInASetSurvivesTheCanonicalForm) {
  auto selector = Selector::Parse("a in (x,yg,)");
  ASSERT_TRUE(selector.ok());
  EXPECT_EQ(selector->ToString(), "a in (,x,yg)");
  auto again = Selector::Parse(selector->ToString());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->requirements(), selector->requirements());
}

TEST(LabelSelector, ASetOfOnlyTheEmptyValueKeepsItsComma) {
  auto selector = Selector::Parse("a in (,,,,,)");
  ASSERT_TRUE(selector.ok());
  EXPECT_EQ(selector->ToString(), "a in (,)");
  auto again = Selector::Parse(selector->ToString());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->requirements(), selector->requirements());
}

}  // namespace
}  // namespace uplink::labels
