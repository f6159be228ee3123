// The command line: every command and group answers --help, and every malformed line is a
// usage error (exit 2) on stderr that says what to run.
#include "cli/command_line.h"

#include <gtest/gtest.h>

#include "cli_harness.h"

namespace uplink::cli {
namespace {

using testing::Cli;
using testing::CliResult;

EnvLookup NoEnv() {
  return [](const char*) -> const char* { return nullptr; };
}

std::vector<std::string> Words(const CommandSpec& c) {
  std::vector<std::string> words;
  if (!c.group.empty()) words.emplace_back(c.group);
  words.emplace_back(c.name);
  return words;
}

TEST(CommandLine, EveryCommandAnswersHelpWithItsUsageOnStdout) {
  Cli cli;
  for (const CommandSpec& c : Commands()) {
    for (const char* help : {"--help", "-h"}) {
      auto args = Words(c);
      args.push_back(help);
      CliResult r = cli.Run(args);
      EXPECT_EQ(r.code, 0) << c.Path() << " " << help << ": " << r.err;
      EXPECT_EQ(r.out.rfind("usage: uplink " + c.Path(), 0), 0u) << r.out;
      EXPECT_TRUE(r.err.empty()) << r.err;
      for (const FlagSpec& f : c.flags) {
        EXPECT_NE(r.out.find("--" + std::string(f.name)), std::string::npos)
            << c.Path() << " help lacks --" << f.name;
      }
    }
    // Help wins over operands and flags after it, and over flags before it.
    auto args = Words(c);
    args.insert(args.end(), {"--output", "json", "--help", "--no-such-flag"});
    EXPECT_EQ(cli.Run(args).code, 0) << c.Path();
  }
}

TEST(CommandLine, GroupsAndTheTopLevelAnswerHelp) {
  Cli cli;
  for (const auto& [group, summary] : Groups()) {
    CliResult r = cli.Run({std::string(group), "--help"});
    EXPECT_EQ(r.code, 0);
    EXPECT_NE(r.out.find("usage: uplink " + std::string(group)), std::string::npos);
    for (const CommandSpec& c : Commands()) {
      if (c.group == group) {
        EXPECT_NE(r.out.find(c.Path()), std::string::npos) << c.Path();
      }
    }
  }
  for (const char* help : {"--help", "-h"}) {
    CliResult r = cli.Run({help});
    EXPECT_EQ(r.code, 0);
    for (const CommandSpec& c : Commands()) {
      EXPECT_NE(r.out.find("uplink " + c.Path()), std::string::npos) << c.Path();
    }
    EXPECT_NE(r.out.find("exit codes"), std::string::npos);
  }
}

TEST(CommandLine, NothingAtAllPrintsTheUsageOnStderr) {
  Cli cli;
  CliResult r = cli.Run({});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("usage: uplink"), std::string::npos);
}

TEST(CommandLine, MalformedLinesAreUsageErrorsOnStderr) {
  Cli cli;
  const std::vector<std::vector<std::string>> bad = {
      {"frobnicate"},
      {"connections"},
      {"connections", "frobnicate"},
      {"connections", "users"},
      {"users", "list", "extra"},
      {"connections", "show"},
      {"connections", "show", "a", "b"},
      {"connections", "list", "--bogus"},
      {"connections", "list", "-x"},
      {"connections", "list", "--token-out", "f"},       // a flag of another command
      {"connections", "create", "c", "--token-out"},     // no value
      {"connections", "create", "c", "--handover=yes"},  // a switch takes no value
      {"connections", "list", "--output", "xml"},
      {"connections", "install"},
      {"users", "create"},
      {"api-keys", "create"},
      {"api-keys", "revoke"},
      {"login", "someone@example.com"},
      {"--agent-name", "a", "connections", "create", "c"},  // command flags follow the command
      {"list"},
  };
  for (const auto& args : bad) {
    CliResult r = cli.Run(args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(r.code, 2) << line << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << line << "\n" << r.out;
    EXPECT_EQ(r.err.rfind("uplink: ", 0), 0u) << line << "\n" << r.err;
    EXPECT_NE(r.err.find("--help"), std::string::npos) << line << "\n" << r.err;
  }
  // UPLINK_OUTPUT is checked like the flag.
  cli.env["UPLINK_OUTPUT"] = "yaml";
  EXPECT_EQ(cli.Run({"connections", "list"}).code, 2);
}

TEST(CommandLine, ParsesOperandsFlagsAndGlobalsAnywhere) {
  auto line = ParseCommandLine(
      {"--console", "https://c.example", "connections", "create", "gpu-a", "--agent-name=agent-x",
       "--expires-in", "30d", "--handover", "--output=json"},
      NoEnv());
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_EQ(line->command->id, CommandId::kConnectionsCreate);
  EXPECT_EQ(line->operands, std::vector<std::string>{"gpu-a"});
  EXPECT_EQ(line->Get("agent-name"), "agent-x");
  EXPECT_EQ(line->Get("expires-in"), "30d");
  EXPECT_TRUE(line->Has("handover"));
  EXPECT_FALSE(line->Has("token-out"));
  EXPECT_EQ(line->globals.console, "https://c.example");
  EXPECT_EQ(line->globals.output, "json");

  // "--" ends the flags: a cluster name may start with a dash.
  line = ParseCommandLine({"connections", "show", "--", "-odd-name"}, NoEnv());
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->operands, std::vector<std::string>{"-odd-name"});
}

TEST(CommandLine, GetIsShowAndEveryCommandParsesWithItsOperands) {
  auto get = ParseCommandLine({"connections", "get", "abc"}, NoEnv());
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->command->id, CommandId::kConnectionsShow);
  auto users_get = ParseCommandLine({"users", "get", "me"}, NoEnv());
  ASSERT_TRUE(users_get.ok());
  EXPECT_EQ(users_get->command->id, CommandId::kUsersShow);

  for (const CommandSpec& c : Commands()) {
    auto args = Words(c);
    for (size_t i = 0; i < c.min_operands; ++i) args.push_back("operand" + std::to_string(i));
    for (const FlagSpec& f : c.flags) {
      args.push_back("--" + std::string(f.name));
      if (!f.value_name.empty()) args.push_back("value");
    }
    auto line = ParseCommandLine(args, NoEnv());
    ASSERT_TRUE(line.ok()) << c.Path() << ": " << line.status().ToString();
    EXPECT_EQ(line->command->id, c.id);
    for (const FlagSpec& f : c.flags) EXPECT_TRUE(line->Has(f.name)) << f.name;
  }
}

TEST(CommandLine, GlobalsComeFromTheEnvironmentAndTheCommandLineWins) {
  std::map<std::string, std::string> vars{{"UPLINK_CONSOLE", "https://env.example"},
                                          {"UPLINK_API_KEY_FILE", "/env/key"},
                                          {"UPLINK_OUTPUT", "json"},
                                          {"UPLINK_AGENT_NAME", "ignored"}};
  EnvLookup env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  auto line = ParseCommandLine({"connections", "create", "c"}, env);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->globals.console, "https://env.example");
  EXPECT_EQ(line->globals.api_key_file, "/env/key");
  EXPECT_EQ(line->globals.output, "json");
  EXPECT_FALSE(line->Has("agent-name")) << "command flags have no environment variables";
  line = ParseCommandLine({"connections", "list", "--console", "https://flag.example"}, env);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->globals.console, "https://flag.example");
}

TEST(CommandLine, ThereIsNoFlagForACredential) {
  for (const char* flag : {"--api-key", "--token", "--password", "--code", "--key"}) {
    auto line = ParseCommandLine({"login", flag, "secret-value"}, NoEnv());
    EXPECT_FALSE(line.ok()) << flag;
    EXPECT_EQ(line.status().message().find("secret-value"), std::string::npos);
  }
}

}  // namespace
}  // namespace uplink::cli
