#include "common/flags.h"

#include <gtest/gtest.h>

#include <map>

namespace uplink {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

struct AgentFlags {
  std::string console;
  std::string token_file;
  std::int64_t limit = 500;
  bool once = false;
  std::chrono::milliseconds interval{60'000};
};

FlagSet MakeFlags(AgentFlags& f) {
  FlagSet flags("uplink-agent inventory");
  flags.String("console", &f.console, "console URL");
  flags.String("token-file", &f.token_file, "token file");
  flags.Int("limit", &f.limit, "page size");
  flags.Bool("once", &f.once, "one report");
  flags.Duration("interval", &f.interval, "report interval");
  return flags;
}

TEST(FlagSet, AcceptsSpaceAndEqualsFormsAndPositionals) {
  AgentFlags f;
  FlagSet flags = MakeFlags(f);
  ASSERT_TRUE(flags.Parse({"--console", "https://c", "--token-file=/t", "--once", "extra"},
                          FakeEnv({}))
                  .ok());
  EXPECT_EQ(f.console, "https://c");
  EXPECT_EQ(f.token_file, "/t");
  EXPECT_TRUE(f.once);
  EXPECT_EQ(flags.positional(), std::vector<std::string>{"extra"});
  EXPECT_TRUE(flags.WasSet("console"));
  EXPECT_FALSE(flags.WasSet("limit"));
}

TEST(FlagSet, EnvironmentSetsFlagsAndTheCommandLineWins) {
  AgentFlags f;
  FlagSet flags = MakeFlags(f);
  ASSERT_TRUE(flags.Parse({"--console", "https://cli"},
                          FakeEnv({{"UPLINK_CONSOLE", "https://env"},
                                   {"UPLINK_TOKEN_FILE", "/env-token"},
                                   {"UPLINK_INTERVAL", "90s"}}))
                  .ok());
  EXPECT_EQ(f.console, "https://cli");
  EXPECT_EQ(f.token_file, "/env-token");
  EXPECT_EQ(f.interval, std::chrono::seconds(90));
}

TEST(FlagSet, UnknownFlagIsAnErrorThatNamesIt) {
  AgentFlags f;
  FlagSet flags = MakeFlags(f);
  Status status = flags.Parse({"--consle", "x"}, FakeEnv({}));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--consle"), std::string::npos);
}

TEST(FlagSet, MissingValueAndBadNumbersAreErrors) {
  AgentFlags f;
  EXPECT_FALSE(MakeFlags(f).Parse({"--console"}, FakeEnv({})).ok());
  EXPECT_FALSE(MakeFlags(f).Parse({"--limit", "12x"}, FakeEnv({})).ok());
  EXPECT_FALSE(MakeFlags(f).Parse({"--once=maybe"}, FakeEnv({})).ok());
  Status env_error = MakeFlags(f).Parse({}, FakeEnv({{"UPLINK_LIMIT", "lots"}}));
  EXPECT_NE(env_error.message().find("UPLINK_LIMIT"), std::string::npos);
}

TEST(FlagSet, DoubleDashEndsFlags) {
  AgentFlags f;
  FlagSet flags = MakeFlags(f);
  ASSERT_TRUE(flags.Parse({"--", "--once"}, FakeEnv({})).ok());
  EXPECT_FALSE(f.once);
  EXPECT_EQ(flags.positional(), std::vector<std::string>{"--once"});
}

TEST(FlagSet, EnvNameIsUpperCaseWithUnderscores) {
  EXPECT_EQ(FlagSet::EnvName("status-configmap"), "UPLINK_STATUS_CONFIGMAP");
}

TEST(ParseDuration, AcceptsUnitsAndBareSeconds) {
  EXPECT_EQ(*ParseDuration("90"), std::chrono::seconds(90));
  EXPECT_EQ(*ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*ParseDuration("1h30m"), std::chrono::minutes(90));
  EXPECT_EQ(*ParseDuration("2d"), std::chrono::hours(48));
}

TEST(ParseDuration, RefusesGarbage) {
  for (const char* bad : {"", "s", "5x", "-5s", "1.5s", "99999999999999999999s", "5 s"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace uplink
