#include "agent/node/host/proc_file.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>

#include "support/process.h"

namespace uplink::agent::node {
namespace {

TEST(ReadProcFile, ReadsAProcFileWhoseReportedSizeIsZero) {
  struct stat st {};
  ASSERT_EQ(::stat("/proc/self/status", &st), 0);
  ASSERT_EQ(st.st_size, 0) << "the premise: /proc reports no size";
  std::string out;
  EXPECT_FALSE(ReadProcFile("/proc/self/status", kSmallProcFileCap, out));
  EXPECT_NE(out.find("Name:"), std::string::npos);
}

TEST(ReadProcFile, ReadsAFileLargerThanItsFirstReadWhole) {
  testing::TempDir dir;
  std::string content;
  for (int i = 0; i < 5000; ++i) content += "line " + std::to_string(i) + "\n";
  testing::WriteFileOrDie(dir.File("big"), content);
  std::string out;
  EXPECT_FALSE(ReadProcFile(dir.File("big"), kLargeProcFileCap, out));
  EXPECT_EQ(out, content);
}

TEST(ReadProcFile, AcceptsExactlyTheCapAndRefusesOneByteMore) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.File("at_cap"), std::string(10000, 'a'));
  testing::WriteFileOrDie(dir.File("over_cap"), std::string(10001, 'a'));
  std::string out;
  EXPECT_FALSE(ReadProcFile(dir.File("at_cap"), 10000, out));
  EXPECT_EQ(out.size(), 10000u);
  auto failure = ReadProcFile(dir.File("over_cap"), 10000, out);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->errno_value, 0);
  EXPECT_NE(failure->error.find("10000-byte cap"), std::string::npos);
  EXPECT_TRUE(out.empty());
}

TEST(ReadProcFile, ReportsTheErrnoOfAFailedOpenOrRead) {
  testing::TempDir dir;
  std::string out = "stale";
  auto missing = ReadProcFile(dir.File("missing"), 100, out);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->errno_value, ENOENT);
  EXPECT_EQ(missing->error, "No such file or directory");
  EXPECT_TRUE(out.empty());
  auto directory = ReadProcFile(dir.path(), 100, out);
  ASSERT_TRUE(directory);
  EXPECT_EQ(directory->errno_value, EISDIR);
}

TEST(ReadProcFile, KeepsTheBufferCapacityAcrossReads) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.File("big"), std::string(100000, 'b'));
  testing::WriteFileOrDie(dir.File("small"), "x\n");
  std::string out;
  ASSERT_FALSE(ReadProcFile(dir.File("big"), kLargeProcFileCap, out));
  const std::size_t capacity = out.capacity();
  const char* data = out.data();
  ASSERT_FALSE(ReadProcFile(dir.File("small"), kLargeProcFileCap, out));
  EXPECT_EQ(out, "x\n");
  EXPECT_GE(out.capacity(), capacity);
  EXPECT_EQ(out.data(), data) << "a second read must not reallocate";
}

void IgnoreSignal(int) {}

TEST(ReadProcFile, ReadsThroughSignalsThatInterruptABlockedRead) {
  // A FIFO blocks the reader; signals without SA_RESTART make open and read fail with EINTR,
  // which ReadProcFile must retry rather than report.
  testing::TempDir dir;
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  struct sigaction action {}, previous {};
  action.sa_handler = IgnoreSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  ASSERT_EQ(::sigaction(SIGUSR1, &action, &previous), 0);

  const pthread_t reader = ::pthread_self();
  std::atomic<bool> read_done{false};
  std::thread writer([&] {
    for (int i = 0; i < 20 && !read_done; ++i) {
      ::pthread_kill(reader, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::ofstream(fifo) << "cpu  1 2 3 4\n";
    // Keep interrupting until the reader is through.
    while (!read_done) {
      ::pthread_kill(reader, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::string out;
  auto failure = ReadProcFile(fifo, 100, out);
  read_done = true;
  writer.join();
  ::sigaction(SIGUSR1, &previous, nullptr);
  EXPECT_FALSE(failure) << failure->error;
  EXPECT_EQ(out, "cpu  1 2 3 4\n");
}

}  // namespace
}  // namespace uplink::agent::node
