#include "common/subprocess.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <thread>

#include "common/files.h"
#include "support/process.h"

namespace uplink {
namespace {

using ::testing::HasSubstr;

ProcessOptions Options(std::vector<std::string> argv) {
  ProcessOptions options;
  options.argv = std::move(argv);
  return options;
}

TEST(RunProcess, PassesStdinAndCapturesBothOutputsAndTheExitCode) {
  ProcessOptions options = Options({"/bin/sh", "-c", "cat; echo to-stderr >&2; exit 3"});
  options.input = "from stdin";
  auto result = RunProcess(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->out, "from stdin");
  EXPECT_EQ(result->err, "to-stderr\n");
}

TEST(RunProcess, ArgumentsReachTheProgramAsTheyAreWithoutAShell) {
  auto result = RunProcess(Options({"/bin/echo", "$HOME", "; rm -rf /", "a b"}));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->out, "$HOME ; rm -rf / a b\n");
}

TEST(RunProcess, WithoutInputStdinIsEmpty) {
  auto result = RunProcess(Options({"/bin/sh", "-c", "wc -c"}));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(TrimWhitespace(result->out), "0");
}

TEST(RunProcess, LargeInputAndOutputDoNotDeadlock) {
  ProcessOptions options = Options({"/bin/cat"});
  options.input = std::string(1 << 20, 'z');
  options.max_output_bytes = 2 << 20;
  options.timeout = std::chrono::seconds(60);
  auto result = RunProcess(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->out, options.input);
}

TEST(RunProcess, OutputBeyondTheBoundIsAFailureAndKillsTheProgram) {
  ProcessOptions options = Options({"/bin/sh", "-c", "cat /dev/zero"});
  options.max_output_bytes = 1 << 20;
  options.timeout = std::chrono::seconds(60);
  auto result = RunProcess(options);
  EXPECT_EQ(result.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(result.status().message(), HasSubstr("wrote more than 1048576 bytes"));
}

TEST(RunProcess, OutputOfExactlyTheBoundIsKeptWhole) {
  ProcessOptions options = Options({"/bin/sh", "-c", "head -c 1000 /dev/zero"});
  options.max_output_bytes = 1000;
  auto result = RunProcess(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->out.size(), 1000u);
}

TEST(RunProcess, StderrKeepsItsStartAndSaysHowMuchWasNotKept) {
  ProcessOptions options = Options({"/bin/sh", "-c", "head -c 5000 /dev/zero | tr '\\0' e >&2"});
  options.max_error_bytes = 1000;
  auto result = RunProcess(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->err.substr(0, 1000), std::string(1000, 'e'));
  EXPECT_THAT(result->err, HasSubstr("[4000 more bytes of stderr were not kept]"));
  EXPECT_EQ(result->exit_code, 0);
}

TEST(RunProcess, AProgramThatExitsWithoutReadingItsInputIsNotAnError) {
  ProcessOptions options = Options({"/bin/true"});
  options.input = std::string(1 << 20, 'x');
  auto result = RunProcess(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 0);
}

TEST(RunProcess, AMissingProgramIsNotFound) {
  auto result = RunProcess(Options({"/nonexistent/kubectl", "version"}));
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr("/nonexistent/kubectl"));
}

TEST(RunProcess, AProgramIsNotLookedUpOnPath) {
  auto result = RunProcess(Options({"true"}));
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
}

TEST(RunProcess, AnEmptyArgvIsAnInternalError) {
  EXPECT_EQ(RunProcess(ProcessOptions{}).status().code(), StatusCode::kInternal);
}

TEST(RunProcess, AKillSignalIsReportedAsANegativeExitCode) {
  auto result = RunProcess(Options({"/bin/sh", "-c", "kill -9 $$"}));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, -SIGKILL);
}

std::string TrimmedPid(const std::string& text) {
  return text.substr(0, text.find_first_not_of("0123456789"));
}

// Gone, or a zombie waiting for a reaper that containers may not have.
bool ProcessEnded(const std::string& pid) {
  std::string stat = uplink::testing::ReadFileOrEmpty("/proc/" + pid + "/stat");
  size_t paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && stat.compare(paren, 4, ") Z ") == 0);
}

TEST(RunProcess, AHungProgramAndWhatItStartedAreKilled) {
  uplink::testing::TempDir dir;
  // The shell leaves a grandchild that holds stdout open; the group kill reaches it.
  ProcessOptions options =
      Options({"/bin/sh", "-c", "sleep 600 & echo $! > " + dir.File("pid") + "; wait"});
  options.timeout = std::chrono::milliseconds(300);
  auto result = RunProcess(options);
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("did not finish within 300 ms and was killed"));
  std::string pid = TrimmedPid(uplink::testing::ReadFileOrEmpty(dir.File("pid")));
  ASSERT_FALSE(pid.empty());
  EXPECT_TRUE(uplink::testing::WaitFor([&] { return ProcessEnded(pid); }));
}

TEST(RunProcess, AProgramThatClosesItsOutputsButRunsOnIsKilledAtTheDeadline) {
  ProcessOptions options = Options({"/bin/sh", "-c", "exec >&- 2>&-; sleep 600"});
  options.timeout = std::chrono::seconds(1);
  auto result = RunProcess(options);
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("within 1 s"));
}

TEST(RunProcess, ACancelStopsTheProgram) {
  std::atomic<bool> cancel = true;
  ProcessOptions options = Options({"/bin/sleep", "600"});
  options.timeout = std::chrono::seconds(600);
  options.cancel = &cancel;
  EXPECT_EQ(RunProcess(options).status().code(), StatusCode::kUnavailable);
}

TEST(RunProcess, ACancelWhileRunningStopsTheProgram) {
  std::atomic<bool> cancel = false;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  ProcessOptions options = Options({"/bin/sleep", "600"});
  options.timeout = std::chrono::seconds(600);
  options.cancel = &cancel;
  auto result = RunProcess(options);
  canceller.join();
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
}

TEST(RunProcess, AnExplicitEnvironmentIsAllTheChildGets) {
  ::setenv("UPLINK_SUBPROCESS_TEST_INHERITED", "leaked", 1);
  ProcessOptions options = Options({"/usr/bin/env"});
  options.environment = std::vector<std::string>{"ONLY=this", "HOME=/nowhere"};
  auto result = RunProcess(options);
  ::unsetenv("UPLINK_SUBPROCESS_TEST_INHERITED");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->out, "ONLY=this\nHOME=/nowhere\n");
}

TEST(RunProcess, WithoutAnEnvironmentTheChildInheritsOurs) {
  ::setenv("UPLINK_SUBPROCESS_TEST_INHERITED", "passed-on", 1);
  auto result = RunProcess(Options({"/usr/bin/env"}));
  ::unsetenv("UPLINK_SUBPROCESS_TEST_INHERITED");
  ASSERT_TRUE(result.ok());
  EXPECT_THAT(result->out, HasSubstr("UPLINK_SUBPROCESS_TEST_INHERITED=passed-on\n"));
}

TEST(RunProcess, WritingToAProgramThatExitedDoesNotRaiseSigpipe) {
  // With SIGPIPE at its default, a raised one would end this test binary.
  struct sigaction previous {};
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &default_action, &previous);
  for (int i = 0; i < 20; ++i) {
    ProcessOptions options = Options({"/bin/sh", "-c", "exec 0<&-; exit 0"});
    options.input = std::string(4 << 20, 'x');
    auto result = RunProcess(options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
  }
  ::sigaction(SIGPIPE, &previous, nullptr);
}

TEST(RunProcess, RunsConcurrentlyFromManyThreads) {
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      ProcessOptions options = Options({"/bin/sh", "-c", "cat; echo $0", std::to_string(t)});
      options.input = "thread-" + std::to_string(t) + ":";
      auto result = RunProcess(options);
      if (result.ok() && result->out == options.input + std::to_string(t) + "\n") ++right;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(right.load(), 8);
}

TEST(FindProgram, LooksOnlyInAbsoluteDirectoriesForAnExecutable) {
  uplink::testing::TempDir dir;
  uplink::testing::WriteFileOrDie(dir.File("kubectl"), "#!/bin/sh\n", 0755);
  uplink::testing::WriteFileOrDie(dir.File("not-executable"), "", 0644);
  EXPECT_EQ(FindProgram("kubectl", "/nonexistent::relative:" + dir.path()), dir.File("kubectl"));
  EXPECT_EQ(FindProgram("not-executable", dir.path()), std::nullopt);
  EXPECT_EQ(FindProgram(dir.File("kubectl"), ""), dir.File("kubectl"));
  EXPECT_EQ(FindProgram("/nonexistent/kubectl", dir.path()), std::nullopt);
  EXPECT_EQ(FindProgram("", dir.path()), std::nullopt);
  EXPECT_EQ(FindProgram("kubectl", ""), std::nullopt);
  EXPECT_EQ(FindProgram("kubectl", dir.path() + "/../" + "nonexistent"), std::nullopt);
}

TEST(InheritedEnvironment, LeavesOutTheNamedVariablesOnly) {
  ::setenv("UPLINK_API_KEY", "uk_must_not_leak", 1);
  ::setenv("UPLINK_API_KEY_NOT", "kept", 1);
  std::vector<std::string> env = InheritedEnvironment({"UPLINK_API_KEY"});
  ::unsetenv("UPLINK_API_KEY");
  ::unsetenv("UPLINK_API_KEY_NOT");
  EXPECT_THAT(env, ::testing::Not(::testing::Contains(HasSubstr("uk_must_not_leak"))));
  EXPECT_THAT(env, ::testing::Contains(std::string("UPLINK_API_KEY_NOT=kept")));
  EXPECT_THAT(env, ::testing::Contains(::testing::StartsWith("PATH=")));
}

}  // namespace
}  // namespace uplink
