#include <gtest/gtest.h>

#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"

namespace uplink {
namespace {

TEST(Log, WritesOneJsonObjectPerLineWithFields) {
  std::string captured;
  log::SetSinkForTesting([&](std::string_view line) { captured += line; });
  log::Logger("agent.inventory").Info("report accepted", {{"nodes", 12}, {"ok", true}});
  log::SetSinkForTesting(nullptr);
  ASSERT_FALSE(captured.empty());
  EXPECT_EQ(captured.back(), '\n');
  auto value = ParseJson(captured.substr(0, captured.size() - 1));
  ASSERT_TRUE(value.ok()) << captured;
  EXPECT_EQ(value->at("component").as_string(), "agent.inventory");
  EXPECT_EQ(value->at("msg").as_string(), "report accepted");
  EXPECT_EQ(value->at("nodes").as_int64(), 12);
  EXPECT_EQ(value->at("level").as_string(), "info");
}

TEST(Log, NeverPrintsASecretAndEscapesControlCharacters) {
  std::string line = log::FormatLine(log::Level::kWarn, "c", "bad\nline\x01",
                                     {{"token", Secret("agt_abcdef")}});
  EXPECT_EQ(line.find("agt_abcdef"), std::string::npos);
  EXPECT_NE(line.find("[redacted]"), std::string::npos);
  EXPECT_TRUE(ParseJson(line.substr(0, line.size() - 1)).ok()) << line;
}

TEST(Log, DropsLinesBelowTheMinimumLevel) {
  int lines = 0;
  log::SetSinkForTesting([&](std::string_view) { ++lines; });
  ASSERT_TRUE(log::SetMinLevel("warn").ok());
  log::Logger("c").Info("quiet");
  log::Logger("c").Error("loud");
  log::SetMinLevel(log::Level::kInfo);
  log::SetSinkForTesting(nullptr);
  EXPECT_EQ(lines, 1);
  EXPECT_FALSE(log::SetMinLevel("chatty").ok());
}

TEST(Metrics, RendersPrometheusTextWithEscapedLabels) {
  metrics::Registry registry;
  registry.DeclareCounter("uplink_requests_total", "Requests served.");
  registry.DeclareGauge("uplink_nodes", "Nodes in the last report.");
  registry.Increment("uplink_requests_total", {{"code", "200"}});
  registry.Increment("uplink_requests_total", {{"code", "200"}});
  registry.Set("uplink_nodes", 12, {{"cluster", "a\"b"}});
  std::string text = registry.RenderText();
  EXPECT_NE(text.find("# TYPE uplink_requests_total counter"), std::string::npos);
  EXPECT_NE(text.find("uplink_requests_total{code=\"200\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("uplink_nodes{cluster=\"a\\\"b\"} 12\n"), std::string::npos);
  EXPECT_EQ(registry.Get("uplink_requests_total", {{"code", "200"}}), 2);
}

TEST(Metrics, EscapesEverySpecialCharacterWhereverItIsAndSortsSamples) {
  metrics::Registry registry;
  registry.DeclareCounter("uplink_paths_total", "Paths seen.");
  registry.Increment("uplink_paths_total", {{"path", "\\a\nb\"c\\"}, {"method", "GET"}});
  registry.Increment("uplink_paths_total", {{"path", "\n"}, {"method", "PUT"}}, 3);
  registry.Increment("uplink_paths_total", {{"path", ""}, {"method", "GET"}});
  std::string text = registry.RenderText();
  size_t empty = text.find("uplink_paths_total{path=\"\",method=\"GET\"} 1\n");
  size_t escaped =
      text.find("uplink_paths_total{path=\"\\\\a\\nb\\\"c\\\\\",method=\"GET\"} 1\n");
  size_t newline = text.find("uplink_paths_total{path=\"\\n\",method=\"PUT\"} 3\n");
  ASSERT_NE(empty, std::string::npos) << text;
  ASSERT_NE(escaped, std::string::npos) << text;
  ASSERT_NE(newline, std::string::npos) << text;
  EXPECT_LT(empty, escaped);  // sorted by rendered labels, whatever the update order
  EXPECT_LT(escaped, newline);
  EXPECT_EQ(registry.Get("uplink_paths_total", {{"path", "\n"}, {"method", "PUT"}}), 3);
  EXPECT_EQ(registry.Get("uplink_paths_total", {{"path", "\n"}, {"method", "GET"}}), 0);
}

}  // namespace
}  // namespace uplink
