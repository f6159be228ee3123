#include <gtest/gtest.h>

#include "common/json.h"
#include "common/yaml.h"

namespace uplink {
namespace {

TEST(ParseYaml, ChargesAliasesByTheSizeOfWhatTheyCopy) {
  // One 100 KB scalar named once and copied a thousand times: 100 MB if expanded.
  std::string text = "big: &big " + std::string(100'000, 'x') + "\ncopies:\n";
  for (int i = 0; i < 1000; ++i) text += "- *big\n";
  auto value = ParseYaml(text);
  EXPECT_EQ(value.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(value.status().message().find("MiB"), std::string::npos);
}

TEST(ParseYaml, AcceptsReasonableAliasUse) {
  auto value = ParseYaml("base: &base {cpu: 1, gpu: 8}\na: *base\nb: *base\n");
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(value->at("b").at("gpu").as_int64(), 8);
}

}  // namespace
}  // namespace uplink
