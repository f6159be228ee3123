// The command wrapper, run here by a local sh exactly as the exec API runs it in a workspace:
// a command runs once however often it is delivered, its output is kept up to the cap, a
// timeout kills its whole process group; and the result line it prints is read back.
#include "agent/workspace/command_runner.h"

#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "support/process.h"

namespace uplink::agent::workspace {
namespace {

using uplink::testing::ReadFileOrEmpty;
using uplink::testing::TempDir;

struct LocalRun {
  std::string out;
  CommandOutcome outcome;
};

// The argv of CommandArgv in `dir` (the workspace's scratch), the code on stdin.
LocalRun RunLocally(const std::string& dir, const WorkspaceCommand& command) {
  std::vector<std::string> argv = CommandArgv(command);
  argv[0] = "/bin/sh";
  argv.insert(argv.begin(), {"/usr/bin/env", "-C", dir});
  auto result = RunProcess(ProcessOptions{.argv = argv, .input = command.code,
                                          .timeout = std::chrono::seconds(60)});
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (!result.ok()) return {};
  EXPECT_EQ(result->exit_code, 0) << result->err;
  return LocalRun{result->out, ParseCommandOutcome(result->err, "")};
}

WorkspaceCommand Command(std::string id, std::string code, std::string kind = "shell") {
  return WorkspaceCommand{.id = std::move(id), .reservation_id = "res_0123456789abcdef",
                          .kind = std::move(kind), .code = std::move(code),
                          .timeout_seconds = 30, .output_cap_bytes = 1 << 20};
}

TEST(CommandWrapperTest, RunsOnceAndReplaysForASecondDelivery) {
  TempDir dir;
  WorkspaceCommand command = Command("wsc_0000000000000001",
                                     "echo run >> runs; echo out; echo err >&2; exit 3");
  LocalRun first = RunLocally(dir.path(), command);
  EXPECT_EQ(first.out, "out\nerr\n");
  EXPECT_EQ(first.outcome.state, "exited");
  EXPECT_EQ(first.outcome.exit_code, 3);
  LocalRun again = RunLocally(dir.path(), command);
  EXPECT_EQ(again.out, "out\nerr\n");
  EXPECT_EQ(again.outcome.exit_code, 3);
  EXPECT_EQ(ReadFileOrEmpty(dir.File("runs")), "run\n") << "a re-delivery ran the code again";
}

TEST(CommandWrapperTest, PythonCodeRunsUnderPython3) {
  TempDir dir;
  LocalRun run = RunLocally(dir.path(), Command("wsc_0000000000000002",
                                           "import sys\nprint(sum(range(10)))\nsys.exit(4)\n",
                                           "python"));
  EXPECT_EQ(run.out, "45\n");
  EXPECT_EQ(run.outcome.exit_code, 4);
}

TEST(CommandWrapperTest, ATimeoutKillsTheWholeProcessGroup) {
  TempDir dir;
  WorkspaceCommand command =
      Command("wsc_0000000000000003", "(sleep 3; echo survived > child) & sleep 3; echo late");
  command.timeout_seconds = 1;
  LocalRun run = RunLocally(dir.path(), command);
  EXPECT_EQ(run.outcome.state, "timeout");
  EXPECT_EQ(run.out, "");
  // Had the background child outlived the kill, it would write this after 3 s.
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  EXPECT_EQ(ReadFileOrEmpty(dir.File("child")), "");
}

TEST(CommandWrapperTest, OutputPastTheCapIsNotKeptAndTheCommandStillFinishes) {
  TempDir dir;
  WorkspaceCommand command =
      Command("wsc_0000000000000004", "head -c 100000 /dev/zero | tr '\\0' x; echo; echo done >&2");
  command.output_cap_bytes = 1000;
  LocalRun run = RunLocally(dir.path(), command);
  EXPECT_EQ(run.out.size(), 1001u) << "the cap and one byte, so that the cut shows";
  EXPECT_EQ(run.outcome.state, "exited");
  EXPECT_EQ(run.outcome.exit_code, 0);
}

TEST(CommandOutcomeTest, ReadsTheResultLineAndNothingElse) {
  EXPECT_EQ(ParseCommandOutcome("uplink-result: exit 0\n", "").exit_code, 0);
  EXPECT_EQ(ParseCommandOutcome("noise\nuplink-result: exit 255\n", "").exit_code, 255);
  EXPECT_EQ(ParseCommandOutcome("uplink-result: timeout\n", "").state, "timeout");
  for (const char* hostile : {"", "uplink-result: exit 256", "uplink-result: exit -1",
                              "uplink-result: exit 1x", "xuplink-result: exit 0",
                              "uplink-result: done"}) {
    CommandOutcome outcome = ParseCommandOutcome(hostile, "");
    EXPECT_EQ(outcome.state, "failed") << hostile;
    EXPECT_FALSE(outcome.exit_code) << hostile;
  }
  CommandOutcome failed = ParseCommandOutcome(
      "", R"({"status":"Failure","message":"exec: \"sh\": executable file not found"})");
  EXPECT_NE(failed.message.find("executable file not found"), std::string::npos);
}

}  // namespace
}  // namespace uplink::agent::workspace
