// The POSIX file system on real files in a temporary directory. A full disk is /dev/full
// (every write fails with ENOSPC), which needs neither root nor a mount.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <filesystem>

#include "spool/file_system.h"
#include "spool/filename.h"
#include "spool/spool.h"
#include "support/process.h"

namespace uplink::spool {
namespace {

using uplink::testing::TempDir;

std::string ReadWhole(const ReadableFile& file, size_t limit = 1 << 20) {
  std::string scratch(limit, '\0');
  auto read = file.Read(0, limit, scratch.data());
  EXPECT_TRUE(read.ok()) << read.status().ToString();
  return read.ok() ? std::string(*read) : std::string();
}

TEST(PosixFileSystem, WritesSyncsAndReadsBack) {
  TempDir dir;
  FileSystem& fs = PosixFileSystem();
  const std::string path = dir.File("segment");
  auto writable = fs.OpenInPlace(path);
  ASSERT_TRUE(writable.ok()) << writable.status().ToString();
  ASSERT_TRUE((*writable)->WriteAt(0, "hello ").ok());
  ASSERT_TRUE((*writable)->WriteAt(6, std::string(100'000, 'x')).ok());
  ASSERT_TRUE((*writable)->Sync().ok());
  EXPECT_EQ(*fs.FileSize(path), 100'006u);
  auto readable = fs.OpenReadable(path);
  ASSERT_TRUE(readable.ok());
  char scratch[16];
  EXPECT_EQ(*(*readable)->Read(0, 5, scratch), "hello");
  EXPECT_EQ((*readable)->Read(100'000, 16, scratch)->size(), 6u);  // short at the end
  EXPECT_TRUE((*readable)->Read(200'000, 16, scratch)->empty());   // none past it
}

TEST(PosixFileSystem, WritesLandWhereTheyAreAimedAfterATruncateAndAReopen) {
  TempDir dir;
  FileSystem& fs = PosixFileSystem();
  const std::string path = dir.File("segment");
  auto writable = fs.OpenInPlace(path);
  ASSERT_TRUE((*writable)->WriteAt(0, "keep+garbage").ok());
  ASSERT_TRUE(fs.Truncate(path, 4).ok());
  ASSERT_TRUE((*writable)->WriteAt(4, "!").ok());
  EXPECT_EQ(ReadWhole(**fs.OpenReadable(path)), "keep!");
  // Reopened, a file keeps its bytes and is overwritten where aimed, or extended.
  auto again = fs.OpenInPlace(path);
  ASSERT_TRUE((*again)->WriteAt(0, "K").ok());
  ASSERT_TRUE((*again)->WriteAt(5, "?").ok());
  EXPECT_EQ(ReadWhole(**fs.OpenReadable(path)), "Keep!?");
}

// fallocate with KEEP_SIZE: the blocks are there, the size is not, and a truncate to the
// size releases them.
TEST(PosixFileSystem, PreallocatesBlocksWithoutGrowingTheFile) {
  TempDir dir;
  FileSystem& fs = PosixFileSystem();
  const std::string path = dir.File("segment");
  auto writable = fs.OpenInPlace(path);
  ASSERT_TRUE(writable.ok());
  ASSERT_TRUE((*writable)->WriteAt(0, "head").ok());
  Status preallocated = (*writable)->Preallocate(1 << 20);
  if (!preallocated.ok()) GTEST_SKIP() << "this file system cannot: " << preallocated.ToString();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4);
  EXPECT_GE(st.st_blocks * 512, 1 << 20);
  ASSERT_TRUE((*writable)->WriteAt(4, std::string(100'000, 'p')).ok());
  (*writable)->StartWriteback(0, 100'004);
  ASSERT_TRUE((*writable)->Sync().ok());
  EXPECT_EQ(*fs.FileSize(path), 100'004u);
  ASSERT_TRUE(fs.Truncate(path, 100'004).ok());
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LT(st.st_blocks * 512, 200'000);
  EXPECT_EQ(ReadWhole(**fs.OpenReadable(path)).substr(0, 5), "headp");
}

TEST(PosixFileSystem, RewritesInPlace) {
  TempDir dir;
  FileSystem& fs = PosixFileSystem();
  const std::string path = dir.File("STATE");
  auto file = fs.OpenInPlace(path);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->WriteAt(0, std::string(256, 'a')).ok());
  ASSERT_TRUE((*file)->WriteAt(128, std::string(128, 'b')).ok());
  ASSERT_TRUE((*file)->Sync().ok());
  char scratch[256];
  auto read = (*file)->Read(0, 256, scratch);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, std::string(128, 'a') + std::string(128, 'b'));
  EXPECT_EQ(*fs.FileSize(path), 256u);
}

TEST(PosixFileSystem, ListsCreatesAndRemoves) {
  TempDir dir;
  FileSystem& fs = PosixFileSystem();
  const std::string sub = dir.File("spool");
  ASSERT_TRUE(fs.CreateDir(sub).ok());
  ASSERT_TRUE(fs.CreateDir(sub).ok());  // already there
  ASSERT_TRUE(fs.OpenInPlace(sub + "/a").ok());
  ASSERT_TRUE(fs.OpenInPlace(sub + "/b").ok());
  ASSERT_TRUE(fs.SyncDir(sub).ok());
  auto names = fs.ListDir(sub);
  ASSERT_TRUE(names.ok());
  std::sort(names->begin(), names->end());
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(fs.Remove(sub + "/a").ok());
  EXPECT_EQ(fs.ListDir(sub)->size(), 1u);
  ASSERT_TRUE(fs.Rename(sub + "/b", sub + "/c").ok());
  EXPECT_EQ(*fs.ListDir(sub), std::vector<std::string>{"c"});
  EXPECT_EQ(fs.Rename(sub + "/b", sub + "/d").code(), StatusCode::kNotFound);
}

TEST(PosixFileSystem, ErrorsNameTheOperationAndThePath) {
  TempDir dir;
  FileSystem& fs = PosixFileSystem();
  const std::string missing = dir.File("missing");
  for (Status status : {fs.Remove(missing), fs.Rename(missing, missing + "2"),
                        fs.Truncate(missing, 0), fs.SyncDir(missing),
                        fs.FileSize(missing).status(), fs.OpenReadable(missing).status(),
                        fs.ListDir(missing).status()}) {
    EXPECT_EQ(status.code(), StatusCode::kNotFound) << status.ToString();
    EXPECT_NE(status.message().find(missing + ": no such file or directory"), std::string::npos)
        << status.ToString();
  }
  testing::WriteFileOrDie(dir.File("file"), "x");
  Status not_a_dir = fs.CreateDir(dir.File("file"));
  EXPECT_EQ(not_a_dir.code(), StatusCode::kIOError);
  EXPECT_NE(not_a_dir.message().find("create directory " + dir.File("file")), std::string::npos);
}

TEST(PosixFileSystem, AFullDiskSaysSo) {
  FileSystem& fs = PosixFileSystem();
  auto full = fs.OpenInPlace("/dev/full");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  Status status = (*full)->WriteAt(0, "data");
  EXPECT_EQ(status.code(), StatusCode::kIOError);
  EXPECT_EQ(status.message(), "write /dev/full: no space left on device");
}

TEST(PosixFileSystem, AVectoredWriteOfMorePiecesThanOneCallTakesLandsInOrder) {
  TempDir dir;
  FileSystem& fs = PosixFileSystem();
  auto file = fs.OpenInPlace(dir.File("segment"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  // Over IOV_MAX (1024) pieces, some empty, of sizes that cross the batches unevenly.
  std::vector<std::string> storage;
  for (int i = 0; i < 3000; ++i) {
    storage.push_back(std::string(i % 7 == 0 ? 0 : i % 300, static_cast<char>('a' + i % 26)));
  }
  std::vector<std::string_view> pieces(storage.begin(), storage.end());
  std::string expected;
  for (const std::string& piece : storage) expected += piece;
  ASSERT_TRUE((*file)->WriteAt(10, pieces).ok());
  ASSERT_TRUE((*file)->Sync().ok());
  std::string scratch(expected.size() + 10, '\0');
  auto read = (*file)->Read(0, scratch.size(), scratch.data());
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, std::string(10, '\0') + expected);
}

TEST(PosixFileSystem, AFailedVectoredWriteSaysWhy) {
  FileSystem& fs = PosixFileSystem();
  auto full = fs.OpenInPlace("/dev/full");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const std::string_view pieces[] = {"header", "payload"};
  Status status = (*full)->WriteAt(0, pieces);
  EXPECT_EQ(status.code(), StatusCode::kIOError);
  EXPECT_EQ(status.message(), "write /dev/full: no space left on device");
}

TEST(PosixFileSystem, FilesAreWrittenAheadOnlyWhereOverwritingWritesInPlace) {
  FileSystem& fs = PosixFileSystem();
  // /dev/shm is tmpfs: files written ahead would only take memory there.
  struct statfs shm {};
  ASSERT_EQ(::statfs("/dev/shm", &shm), 0);
  ASSERT_EQ(static_cast<unsigned long>(shm.f_type), 0x01021994ul);
  EXPECT_FALSE(fs.OverwritesInPlace("/dev/shm"));
  // A directory that cannot be looked at is not assumed to.
  EXPECT_FALSE(fs.OverwritesInPlace("/nonexistent/spool"));
  // The build's temporary directory is on the machine's disk (ext4 here, and in CI).
  TempDir dir;
  struct statfs disk {};
  ASSERT_EQ(::statfs(dir.path().c_str(), &disk), 0);
  if (static_cast<unsigned long>(disk.f_type) == 0xef53ul) {  // ext2/3/4
    EXPECT_TRUE(fs.OverwritesInPlace(dir.path()));
  }
}

TEST(PosixFileSystem, TheLockExcludesOtherHoldersUntilReleased) {
  TempDir dir;
  FileSystem& fs = PosixFileSystem();
  const std::string path = dir.File("LOCK");
  auto held = fs.Lock(path);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  auto second = fs.Lock(path);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(path + " is locked"), std::string::npos);
  // Another process sees it held too (flock(1) -n fails at once).
  auto other = testing::RunCommand({"/usr/bin/flock", "-n", path, "/bin/true"});
  EXPECT_EQ(other.exit_code, 1) << other.err;
  held->reset();
  EXPECT_TRUE(fs.Lock(path).ok());
  EXPECT_EQ(testing::RunCommand({"/usr/bin/flock", "-n", path, "/bin/true"}).exit_code, 0);
}

TEST(PosixFileSystem, DescriptorsAreClosedOnExec) {
  TempDir dir;
  FileSystem& fs = PosixFileSystem();
  const std::string path = dir.File("segment");
  auto writable = fs.OpenInPlace(path);
  auto readable = fs.OpenReadable(path);
  auto in_place = fs.OpenInPlace(dir.File("STATE"));
  auto lock = fs.Lock(dir.File("LOCK"));
  ASSERT_TRUE(writable.ok() && readable.ok() && in_place.ok() && lock.ok());
  int ours = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (ec || target.string().rfind(dir.path(), 0) != 0) continue;
    const int fd = std::stoi(entry.path().filename().string());
    EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << target;
    ++ours;
  }
  EXPECT_EQ(ours, 4);
}

TEST(PosixFileSystem, CarriesASpoolAcrossARestart) {
  TempDir dir;
  FakeClock clock;
  const std::string spool_dir = dir.File("spool");  // created by Open
  {
    auto spool = Spool::Open(PosixFileSystem(), spool_dir, {}, clock);
    ASSERT_TRUE(spool.ok()) << spool.status().ToString();
    for (int i = 1; i <= 50; ++i)
      ASSERT_EQ(*(*spool)->Append("record " + std::to_string(i)), static_cast<std::uint64_t>(i));
    ASSERT_TRUE((*spool)->Consume(20).ok());
    auto second = Spool::Open(PosixFileSystem(), spool_dir, {}, clock);
    EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  }
  auto spool = Spool::Open(PosixFileSystem(), spool_dir, {}, clock);
  ASSERT_TRUE(spool.ok()) << spool.status().ToString();
  auto records = (*spool)->Read(1 << 20, 100);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 30u);
  EXPECT_EQ(records->front().sequence, 21u);
  EXPECT_EQ(records->back().payload, "record 50");
  EXPECT_EQ(*(*spool)->Append("record 51"), 51u);
}

// An entry named like a segment that the spool did not write (a link, a directory) is not
// followed or read, and does not hold back the segments after it; in the newest segment's
// place it stops Open with a message that names it, since the numbers it held are unknown.
TEST(PosixFileSystem, ASpoolOpensPastEntriesThatAreNotRegularFiles) {
  TempDir dir;
  FakeClock clock;
  const std::string spool_dir = dir.File("spool");
  SpoolOptions options;
  options.segment_bytes = 16 << 10;
  options.max_bytes = 1 << 20;
  {
    auto spool = Spool::Open(PosixFileSystem(), spool_dir, options, clock);
    ASSERT_TRUE(spool.ok()) << spool.status().ToString();
    for (int i = 1; i <= 300; ++i) ASSERT_TRUE((*spool)->Append(std::string(200, 'r')).ok());
  }
  std::vector<SegmentFile> segments;
  for (const auto& entry : std::filesystem::directory_iterator(spool_dir)) {
    if (auto file = ParseSegmentFileName(entry.path().filename().string())) {
      segments.push_back(*file);
    }
  }
  std::sort(segments.begin(), segments.end(),
            [](const SegmentFile& a, const SegmentFile& b) { return a.first < b.first; });
  ASSERT_GE(segments.size(), 3u);
  const std::string oldest = spool_dir + "/" + SegmentFileName(1, segments[0].recycled);
  ASSERT_EQ(segments[0].first, 1u);
  std::filesystem::remove(oldest);
  std::filesystem::create_symlink(dir.File("nowhere"), oldest);
  std::filesystem::create_directory(spool_dir + "/" + SegmentFileName(2, false));

  {
    auto spool = Spool::Open(PosixFileSystem(), spool_dir, options, clock);
    ASSERT_TRUE(spool.ok()) << spool.status().ToString();
    auto records = (*spool)->Read(1 << 20, 1000);
    ASSERT_TRUE(records.ok()) << records.status().ToString();
    ASSERT_FALSE(records->empty());
    EXPECT_EQ(records->front().sequence, segments[1].first);
    EXPECT_EQ(records->back().sequence, 300u);
    EXPECT_EQ(records->size(), 300u - segments[1].first + 1);
    EXPECT_EQ(*(*spool)->Append("after"), 301u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("nowhere"))) << "the link was followed";

  const SegmentFile& newest = segments.back();
  const std::string newest_path = spool_dir + "/" + SegmentFileName(newest.first, newest.recycled);
  std::filesystem::remove(newest_path);
  std::filesystem::create_symlink(dir.File("nowhere"), newest_path);
  auto refused = Spool::Open(PosixFileSystem(), spool_dir, options, clock);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("is not a regular file"), std::string::npos)
      << refused.status().ToString();
}

}  // namespace
}  // namespace uplink::spool
