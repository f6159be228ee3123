#include "common/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "support/process.h"

namespace uplink {
namespace {

TEST(WriteFileAtomic, WritesExactlyTheModeAskedForAndLeavesNoTemporaryFile) {
  testing::TempDir dir;
  const std::string path = dir.File("token");
  mode_t old_umask = ::umask(0);  // a careless umask must not widen the file
  Status written = WriteFileAtomic(path, "agt_secret", 0600);
  ::umask(old_umask);
  ASSERT_TRUE(written.ok()) << written.ToString();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*ReadFileBounded(path, 100), "agt_secret");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(WriteFileAtomic, ReplacesAnExistingFileWhole) {
  testing::TempDir dir;
  const std::string path = dir.File("config");
  ASSERT_TRUE(WriteFileAtomic(path, std::string(1000, 'x')).ok());
  ASSERT_TRUE(WriteFileAtomic(path, "short").ok());
  EXPECT_EQ(*ReadFileBounded(path, 2000), "short");
}

TEST(WriteFileAtomic, FailsClearlyInAMissingDirectory) {
  Status status = WriteFileAtomic("/nonexistent-dir/x", "y");
  EXPECT_EQ(status.code(), StatusCode::kIOError);
  EXPECT_NE(status.message().find("/nonexistent-dir/x"), std::string::npos);
}

TEST(ReadFileBounded, RefusesFilesOverTheLimitAndReportsMissingOnes) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.File("big"), std::string(5000, 'a'));
  EXPECT_EQ(ReadFileBounded(dir.File("big"), 4096).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadFileBounded(dir.File("missing"), 4096).status().code(), StatusCode::kIOError);
  // /proc files report size 0; the read must not trust that.
  auto stat = ReadFileBounded("/proc/self/stat", 1 << 16);
  ASSERT_TRUE(stat.ok());
  EXPECT_FALSE(stat->empty());
}

TEST(TrimWhitespace, TrimsBothEnds) { EXPECT_EQ(TrimWhitespace(" \tagt_x\r\n"), "agt_x"); }

}  // namespace
}  // namespace uplink
