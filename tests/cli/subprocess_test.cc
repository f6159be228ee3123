#include "cli/subprocess.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "support/process.h"

namespace uplink::cli {
namespace {

TEST(Subprocess, PassesStdinAndCapturesBothOutputsAndTheExitCode) {
  auto result = RunProcess({"/bin/sh", "-c", "cat; echo to-stderr >&2; exit 3"}, "from stdin",
                           std::chrono::seconds(30));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->out, "from stdin");
  EXPECT_EQ(result->err, "to-stderr\n");
}

TEST(Subprocess, ArgumentsReachTheProgramAsTheyAreWithoutAShell) {
  auto result =
      RunProcess({"/bin/echo", "$HOME", "; rm -rf /", "a b"}, "", std::chrono::seconds(30));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->out, "$HOME ; rm -rf / a b\n");
}

TEST(Subprocess, LargeInputAndOutputDoNotDeadlock) {
  std::string big(1 << 20, 'z');
  auto result = RunProcess({"/bin/cat"}, big, std::chrono::seconds(60), 2 << 20);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->out.size(), big.size());
}

TEST(Subprocess, OutputBeyondTheLimitIsDropped) {
  auto result =
      RunProcess({"/bin/sh", "-c", "head -c 100000 /dev/zero"}, "", std::chrono::seconds(30), 1000);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->out.size(), 1000u);
  EXPECT_EQ(result->exit_code, 0);
}

TEST(Subprocess, AProgramThatExitsWithoutReadingItsInputIsNotAnError) {
  auto result = RunProcess({"/bin/true"}, std::string(1 << 20, 'x'), std::chrono::seconds(30));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 0);
}

TEST(Subprocess, AMissingProgramIsNotFound) {
  auto result = RunProcess({"/nonexistent/kubectl", "version"}, "", std::chrono::seconds(30));
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("/nonexistent/kubectl"), std::string::npos);
}

TEST(Subprocess, AProgramThatRunsTooLongIsStopped) {
  auto result = RunProcess({"/bin/sleep", "600"}, "", std::chrono::milliseconds(200));
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
}

TEST(Subprocess, TheConsoleCredentialIsNotPassedOn) {
  ::setenv("UPLINK_API_KEY", "uk_must_not_leak", 1);
  auto result = RunProcess({"/usr/bin/env"}, "", std::chrono::seconds(30));
  ::unsetenv("UPLINK_API_KEY");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->out.find("uk_must_not_leak"), std::string::npos);
  EXPECT_NE(result->out.find("PATH="), std::string::npos);
}

TEST(Subprocess, FindOnPathSkipsRelativeAndMissingEntries) {
  uplink::testing::TempDir dir;
  uplink::testing::WriteFileOrDie(dir.File("kubectl"), "#!/bin/sh\n", 0755);
  uplink::testing::WriteFileOrDie(dir.File("not-executable"), "", 0644);
  EXPECT_EQ(FindOnPath("kubectl", "/nonexistent::relative:" + dir.path()), dir.File("kubectl"));
  EXPECT_EQ(FindOnPath("not-executable", dir.path()), std::nullopt);
  EXPECT_EQ(FindOnPath("kubectl", ""), std::nullopt);
}

}  // namespace
}  // namespace uplink::cli
