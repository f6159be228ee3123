// Contract tests of kubectl commands (protocol/commands.h): the cluster role's poll as the
// console reads it, the console's reply as the role reads it, and every way a run can end as
// the role reports it and the console reads it.
#include "protocol/commands.h"

#include <gtest/gtest.h>

#include "agent/cluster/snapshot.h"
#include "common/json.h"
#include "protocol/agent_api.h"

namespace uplink::protocol {
namespace {

json::value Json(std::string_view text) {
  auto parsed = ParseJson(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString() << ": " << text.substr(0, 80);
  return parsed.ok() ? *parsed : json::value();
}

// What one side sends, as the other parses it off the wire.
json::value OverTheWire(const json::object& sent) {
  auto parsed =
      ParseJson(json::serialize(sent), JsonLimits{kMaxCommandResultBytes, kMaxCommandResultDepth});
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : json::value();
}

TEST(CommandPollContract, WhatTheClusterRoleAsksTheConsoleReads) {
  for (const CommandPoll& sent : {CommandPoll{"cluster-7d9f8c-x2v4q", 50, 4}, CommandPoll{"", 0, 1},
                                  CommandPoll{"p", kMaxPollWaitSeconds, kMaxPollCommands}}) {
    auto read = DecodeCommandPoll(OverTheWire(EncodeCommandPoll(sent)).get_object());
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(read->agent_instance, sent.agent_instance);
    EXPECT_EQ(read->wait_seconds, sent.wait_seconds);
    EXPECT_EQ(read->max_commands, sent.max_commands);
  }
  auto defaults = DecodeCommandPoll(json::object{});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->wait_seconds, kDefaultPollWaitSeconds);
  EXPECT_EQ(defaults->max_commands, kDefaultPollCommands);
}

TEST(CommandPollDecode, RefusesHostileInput) {
  for (std::string_view bad :
       {R"({"wait_seconds":56})", R"({"wait_seconds":-1})", R"({"wait_seconds":"50"})",
        R"({"max_commands":0})", R"({"max_commands":17})", R"({"max_commands":1e3})",
        R"({"agent_instance":7})", R"({"agent_instance":null})", R"({"command":"rm -rf /"})",
        R"({"wait_seconds":18446744073709551616})"}) {
    EXPECT_FALSE(DecodeCommandPoll(Json(bad).get_object()).ok()) << bad;
  }
  json::object long_instance{{"agent_instance", std::string(kMaxInstanceBytes + 1, 'i')}};
  EXPECT_FALSE(DecodeCommandPoll(long_instance).ok());
  // A NUL or another control character: PostgreSQL's text cannot hold the first, and the
  // instance is stored with every connection's presence.
  for (std::string_view bad : {R"({"agent_instance":"pod\u0000x"})",
                               R"({"agent_instance":"pod\nx"})", R"({"agent_instance":"\u007f"})"}) {
    auto refused = DecodeCommandPoll(Json(bad).get_object());
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("control characters"), std::string::npos);
  }
  EXPECT_TRUE(DecodeCommandPoll(Json(R"({"agent_instance":"pod-\u00e9"})").get_object()).ok());
}

TEST(PollReplyContract, TheCommandsTheConsoleHandsOutTheClusterRoleRuns) {
  PollReply sent;
  sent.expires_at = FromUnixSeconds(1'900'000'000);
  sent.commands.push_back({NewCommandId(), {"kubectl", "get", "pods", "-n", "ml"}, 30});
  sent.commands.push_back({NewCommandId(), {"kubectl", std::string(kMaxCommandArgBytes, 'x')}, 30});
  auto read = DecodePollReply(OverTheWire(EncodePollReply(sent)));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->expires_at, sent.expires_at);
  ASSERT_EQ(read->commands.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(read->commands[i].id, sent.commands[i].id);
    EXPECT_EQ(read->commands[i].argv, sent.commands[i].argv);
    EXPECT_EQ(read->commands[i].timeout_seconds, kCommandTimeoutSeconds);
  }
  EXPECT_TRUE(DecodePollReply(OverTheWire(EncodePollReply(PollReply{})))->commands.empty());
}

TEST(PollReplyDecode, SkipsWhatHasNoUsableIdAndReportsWhatHasNoUsableArgv) {
  const std::string id = NewCommandId();
  auto read = DecodePollReply(
      Json(R"({"commands":[{"id":"cmd_XYZ","argv":["kubectl"]},{"argv":["kubectl"]},{"id":7},)"
           R"({"id":")" +
           id + R"(","argv":"kubectl get pods"},{"id":")" + id +
           R"(","argv":["kubectl",1]},{"id":")" + id + R"(","argv":[]}, "x"]})"));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->commands.size(), 3u) << "the entries with a valid id, whatever their argv";
  for (const PolledCommand& command : read->commands) {
    EXPECT_EQ(command.id, id);
    EXPECT_TRUE(command.argv.empty()) << "an unusable argv is refused, not guessed at";
  }
  std::string too_many = R"({"commands":[)";
  for (int i = 0; i <= kMaxPollCommands; ++i) too_many += std::string(i ? "," : "") + "{}";
  too_many += "]}";
  for (const std::string& bad : std::vector<std::string>{R"({})", R"({"commands":{}})", R"([])",
                                                         R"("commands")", too_many}) {
    EXPECT_FALSE(DecodePollReply(Json(bad)).ok()) << bad.substr(0, 60);
  }
  json::array argv(kMaxCommandArgs + 1, json::value("kubectl"));
  json::object over{{"commands", json::array{json::object{{"id", id}, {"argv", argv}}}}};
  EXPECT_TRUE(DecodePollReply(over)->commands.at(0).argv.empty())
      << "more arguments than the guard ever passes";
}

TEST(CommandResultContract, EveryWayARunEndsReachesTheConsoleAsTheAgentSaidIt) {
  agent::cluster::KubectlRun ok;
  ok.exit_code = 0;
  ok.stdout_text = "NAME\ntrainer-0\n";
  ok.stderr_text = "";
  ok.duration_ms = 340;
  agent::cluster::KubectlRun nonzero = ok;
  nonzero.exit_code = 1;
  nonzero.stderr_text = "Error from server (NotFound): pods \"x\" not found\n\xc3";
  agent::cluster::KubectlRun killed;
  killed.exit_code = -9;
  agent::cluster::KubectlRun huge = ok;
  huge.stdout_text = std::string(kMaxCommandStdoutBytes + 1, 'x');
  agent::cluster::KubectlRun almost = ok;
  almost.stdout_text = std::string(kMaxCommandStdoutBytes, 'x');
  const std::vector<Result<agent::cluster::KubectlRun>> runs = {
      ok,
      nonzero,
      killed,
      huge,
      almost,
      PermissionDeniedError("kubectl delete is not read-only"),
      DeadlineExceededError("kubectl ran for 30 s"),
      UnavailableError("the agent is stopping; the command was cut short"),
      InternalError("fork failed")};
  for (const Result<agent::cluster::KubectlRun>& run : runs) {
    const CommandResult sent = agent::cluster::RunResult(run, 12);
    auto read = DecodeCommandResult(OverTheWire(EncodeCommandResult(sent)));
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(read->error_code, sent.error_code);
    EXPECT_EQ(read->error_message, sent.error_message);
    EXPECT_EQ(read->exit_code, sent.exit_code);
    EXPECT_EQ(read->stdout_text, sent.stdout_text);
    EXPECT_EQ(read->stderr_text, sent.stderr_text);
    EXPECT_EQ(read->duration_ms, sent.duration_ms);
  }
  EXPECT_EQ(agent::cluster::RunResult(huge, 0).error_code, kCommandOutputTooLarge);
  EXPECT_EQ(agent::cluster::RunResult(killed, 0).error_code, kCommandFailed);
}

TEST(CommandResultDecode, RefusesHostileInput) {
  for (std::string_view bad :
       {R"({})", R"([])", R"({"exit_code":0,"stdout":"","stderr":""})",
        R"({"exit_code":256,"stdout":"","stderr":"","duration_ms":1})",
        R"({"exit_code":-1,"stdout":"","stderr":"","duration_ms":1})",
        R"({"exit_code":0,"stdout":1,"stderr":"","duration_ms":1})",
        R"({"exit_code":0,"stdout":"","stderr":"","duration_ms":3600001})",
        R"({"exit_code":0,"error":{"code":"failed","message":"x"},"duration_ms":1})",
        R"({"error":{"code":"exploded","message":"x"},"duration_ms":1})",
        R"({"error":{"code":"failed"},"duration_ms":1})", R"({"error":"failed","duration_ms":1})",
        R"({"exit_code":0,"stdout":"","stderr":"","duration_ms":1,"uid":0})"}) {
    EXPECT_FALSE(DecodeCommandResult(Json(bad)).ok()) << bad;
  }
  json::object message_too_long{
      {"error", json::object{{"code", "failed"},
                             {"message", std::string(kMaxAgentErrorMessageBytes + 1, 'm')}}},
      {"duration_ms", 1}};
  EXPECT_FALSE(DecodeCommandResult(message_too_long).ok());
}

}  // namespace
}  // namespace uplink::protocol
