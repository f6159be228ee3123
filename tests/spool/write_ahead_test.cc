// Holding the cap on disk (SpoolOptions::reserve_disk): files written ahead of need, every
// consumed file kept, a backlog that only overwrites, and what a full disk, a crash, a
// cancelled write and a file system that does not overwrite in place do to it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "spool/fault_injection_fs.h"
#include "support/process.h"
#include "spool/spool.h"

namespace uplink::spool {
namespace {

using testing::FsOp;
using testing::MemoryFileSystem;

constexpr char kDir[] = "/spool";
constexpr std::uint64_t kSegment = 16 << 10;
constexpr std::uint64_t kCap = 512 << 10;  // 32 segments
constexpr char kFirstWrittenAhead[] = "09223372036854775808.free";

std::string Payload(std::uint64_t i, size_t size) {
  std::string payload = "record-" + std::to_string(i) + "-";
  payload.resize(std::max(size, payload.size()), static_cast<char>('a' + i % 26));
  return payload;
}

class WriteAheadTest : public ::testing::Test {
 protected:
  WriteAheadTest() {
    options.max_bytes = kCap;
    options.segment_bytes = kSegment;
    options.reserve_disk = true;
  }

  std::unique_ptr<Spool> Open() {
    auto spool = Spool::Open(fs, kDir, options, clock);
    EXPECT_TRUE(spool.ok()) << spool.status().ToString();
    return spool.ok() ? std::move(*spool) : nullptr;
  }

  // Opens the spool and writes its cap ahead, as idle time does.
  std::unique_ptr<Spool> OpenWrittenAhead() {
    std::unique_ptr<Spool> spool = Open();
    if (spool != nullptr) WriteAheadUntilDone(*spool);
    return spool;
  }

  // Calls WriteAhead until it has nothing more to do; returns how many files it wrote.
  static int WriteAheadUntilDone(Spool& spool) {
    int written = 0;
    while (true) {
      Result<bool> wrote = spool.WriteAhead();
      EXPECT_TRUE(wrote.ok()) << wrote.status().ToString();
      if (!wrote.ok() || !*wrote) return written;
      ++written;
    }
  }

  std::vector<std::string> FilesEndingIn(std::string_view suffix) {
    std::vector<std::string> out;
    auto names = fs.ListDir(kDir);
    if (!names.ok()) return out;
    for (const std::string& name : *names) {
      if (name.ends_with(suffix)) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Appends Payload(n, size) for n from *last + 1 while more() holds; *last follows.
  static void AppendWhile(Spool& spool, size_t size, std::uint64_t* last,
                          const std::function<bool()>& more) {
    while (more()) {
      const std::uint64_t next = *last + 1;
      auto sequence = spool.Append(Payload(next, size));
      ASSERT_TRUE(sequence.ok()) << sequence.status().ToString();
      ASSERT_EQ(*sequence, next);
      *last = next;
    }
  }

  // Checks that records first..last, and no other, come back in order with their payloads
  // (Payload(i, size); the last one's of `last_size` when given).
  void ExpectRecords(Spool& spool, std::uint64_t first, std::uint64_t last, size_t size,
                     size_t last_size = 0) {
    std::uint64_t next = first;
    for (auto batch = spool.Read(1 << 20, 1000); !batch.ok() || !batch->empty();
         batch = spool.Read(1 << 20, 1000)) {
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      for (const SpoolRecord& record : *batch) {
        ASSERT_EQ(record.sequence, next);
        ASSERT_EQ(record.payload, Payload(next, next == last && last_size != 0 ? last_size : size));
        ++next;
      }
    }
    EXPECT_EQ(next, last + 1);
  }

  MemoryFileSystem fs;
  FakeClock clock;
  SpoolOptions options;
};

TEST_F(WriteAheadTest, FillsTheCapWithFilesOfZeroesAndStopsThere) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(WriteAheadUntilDone(*spool), static_cast<int>(kCap / kSegment));
  const std::vector<std::string> spare = FilesEndingIn(".free");
  ASSERT_EQ(spare.size(), kCap / kSegment);
  EXPECT_EQ(spare.front(), kFirstWrittenAhead);
  for (const std::string& name : spare) {
    EXPECT_EQ(fs.Contents(std::string(kDir) + "/" + name), std::string(kSegment, '\0')) << name;
  }
  const SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.bytes, kCap);
  EXPECT_EQ(stats.spare_bytes, kCap);
  EXPECT_EQ(stats.write_aheads_cancelled, 0u);
  EXPECT_LE(fs.UsedBytes(), kCap + 1024);  // and STATE
  EXPECT_FALSE(*spool->WriteAhead());
}

TEST_F(WriteAheadTest, ABacklogOnlyOverwritesAndNeverGrowsAFile) {
  auto spool = OpenWrittenAhead();
  ASSERT_NE(spool, nullptr);
  // Half the cap waits; no record fits a file's end exactly, so without the early roll
  // files would grow past their size.
  constexpr size_t kSize = 1500;
  std::uint64_t last = 0;
  while (spool->Stats().bytes - spool->Stats().spare_bytes < kCap / 2) {
    ++last;
    ASSERT_EQ(*spool->Append(Payload(last, kSize)), last);
    ASSERT_EQ(spool->Stats().bytes, kCap);
  }
  EXPECT_TRUE(FilesEndingIn(".seg").empty());
  const std::vector<std::string> segments = FilesEndingIn(".rseg");
  ASSERT_GE(segments.size(), 16u);
  for (const std::string& name : segments) {
    EXPECT_EQ(fs.FileSize(std::string(kDir) + "/" + name).value(), kSegment) << name;
  }
  EXPECT_EQ(spool->Stats().losses.dropped.records, 0u);
  ExpectRecords(*spool, 1, last, kSize);
  // Consumed, every file goes back to the pool: the cap stays held, nothing to write.
  ASSERT_TRUE(spool->Consume(last).ok());
  EXPECT_EQ(FilesEndingIn(".rseg").size(), 1u);
  EXPECT_EQ(spool->Stats().bytes, kCap);
  EXPECT_FALSE(*spool->WriteAhead());
  // And the records survive a restart in files that held zeroes and earlier records.
  ASSERT_EQ(*spool->Append(Payload(last + 1, kSize)), last + 1);
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  ExpectRecords(*spool, last + 1, last + 1, kSize);
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
  EXPECT_EQ(spool->Stats().losses.corrupt.bytes, 0u);
}

TEST_F(WriteAheadTest, AtTheCapTheOldestSegmentsFileIsReusedAndTheCapHolds) {
  auto spool = OpenWrittenAhead();
  ASSERT_NE(spool, nullptr);
  constexpr size_t kSize = 3000;
  const std::uint64_t records = 2 * kCap / kSize;
  for (std::uint64_t i = 1; i <= records; ++i) {
    ASSERT_EQ(*spool->Append(Payload(i, kSize)), i);
    ASSERT_LE(spool->Stats().bytes, kCap);
    ASSERT_LE(fs.UsedBytes(), kCap + 1024);
  }
  const SpoolStats stats = spool->Stats();
  ASSERT_GT(stats.losses.dropped.records, 0u);
  EXPECT_EQ(stats.losses.dropped.records, stats.consumed_through);
  // Each new segment took the file of the oldest one it dropped: none is a new file.
  EXPECT_TRUE(FilesEndingIn(".seg").empty());
  EXPECT_EQ(stats.bytes, kCap);
  ExpectRecords(*spool, stats.consumed_through + 1, records, kSize);
  // Once what waits is consumed, idle time takes back what the drops gave away.
  ASSERT_TRUE(spool->Consume(records).ok());
  WriteAheadUntilDone(*spool);
  EXPECT_GE(spool->Stats().bytes, kCap - kSegment);
}

TEST_F(WriteAheadTest, AReaderNeverTakesWhatANewSegmentWroteOverTheFileItWasReading) {
  auto spool = OpenWrittenAhead();
  ASSERT_NE(spool, nullptr);
  // A backlog at the cap: the next segment drops the oldest one and writes over its file.
  constexpr size_t kSize = 3000;
  std::uint64_t last = 0;
  AppendWhile(*spool, kSize, &last, [&] { return spool->Stats().losses.dropped.records == 0; });
  // The reader stops inside its first read of the oldest segment's file...
  std::mutex mutex;
  std::condition_variable changed;
  bool parked = false, release = false;
  std::atomic<bool> armed{true};
  fs.SetBeforeRead([&] {
    if (!armed.exchange(false)) return;
    std::unique_lock lock(mutex);
    parked = true;
    changed.notify_all();
    changed.wait(lock, [&] { return release; });
  });
  std::vector<SpoolRecord> first_batch;
  std::thread reader([&] {
    auto batch = spool->Read(1 << 20, 5);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    first_batch = std::move(*batch);
  });
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return parked; });
  }
  // ...while the appends drop that segment and write a new one over its file.
  const std::uint64_t dropped_before = spool->Stats().consumed_through;
  AppendWhile(*spool, kSize, &last,
              [&] { return spool->Stats().consumed_through == dropped_before; });
  for (int i = 0; i < 3; ++i) {
    ++last;
    ASSERT_EQ(*spool->Append(Payload(last, kSize)), last);
  }
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  changed.notify_all();
  reader.join();
  fs.SetBeforeRead(nullptr);
  // It reads on from the oldest record still waiting, with nothing counted as damage.
  const SpoolStats stats = spool->Stats();
  ASSERT_FALSE(first_batch.empty());
  EXPECT_EQ(first_batch.front().sequence, stats.consumed_through + 1);
  for (size_t i = 0; i < first_batch.size(); ++i) {
    EXPECT_EQ(first_batch[i].sequence, stats.consumed_through + 1 + i);
    EXPECT_EQ(first_batch[i].payload, Payload(first_batch[i].sequence, kSize));
  }
  ExpectRecords(*spool, first_batch.back().sequence + 1, last, kSize);
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
  EXPECT_EQ(spool->Stats().losses.corrupt.bytes, 0u);
}

TEST_F(WriteAheadTest, EveryConsumedFileIsKeptWithoutWritingAhead) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  for (std::uint64_t i = 1; i <= 100; ++i) ASSERT_EQ(*spool->Append(Payload(i, 1000)), i);
  const size_t segments = FilesEndingIn(".seg").size();
  ASSERT_GE(segments, 5u);
  ASSERT_TRUE(spool->Consume(100).ok());
  EXPECT_EQ(FilesEndingIn(".free").size(), segments - 1);  // all but the newest (not two)
}

TEST_F(WriteAheadTest, OpeningWithoutReservingKeepsTheFilesAndUsesThem) {
  auto spool = OpenWrittenAhead();
  ASSERT_NE(spool, nullptr);
  spool.reset();
  // `uplink-agent spool` commands open it without reserve_disk: they must not give it up.
  options.reserve_disk = false;
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().spare_bytes, kCap);
  EXPECT_EQ(FilesEndingIn(".free").size(), kCap / kSegment);
  for (std::uint64_t i = 1; i <= 50; ++i) ASSERT_EQ(*spool->Append(Payload(i, 1000)), i);
  EXPECT_TRUE(FilesEndingIn(".seg").empty());
  EXPECT_EQ(spool->Stats().bytes, kCap);
  // A smaller cap keeps only what fits under it.
  spool.reset();
  options.max_bytes = kCap / 2;
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_LE(spool->Stats().bytes, kCap / 2);
  EXPECT_LE(fs.UsedBytes(), kCap / 2 + 1024);
  ExpectRecords(*spool, 1, 50, 1000);
}

TEST_F(WriteAheadTest, NothingIsWrittenAheadWhereFilesAreNotOverwrittenInPlace) {
  fs.SetOverwritesInPlace(false);  // tmpfs: it would only take memory
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_FALSE(*spool->WriteAhead());
  EXPECT_TRUE(FilesEndingIn(".free").empty());
  for (std::uint64_t i = 1; i <= 100; ++i) ASSERT_EQ(*spool->Append(Payload(i, 1000)), i);
  ASSERT_TRUE(spool->Consume(100).ok());
  EXPECT_EQ(FilesEndingIn(".free").size(), 2u);
}

TEST_F(WriteAheadTest, AFullDiskFailsItCleanlyAndAppendsGoOn) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  ASSERT_EQ(*spool->Append(Payload(1, 1000)), 1u);
  fs.SetCapacity(fs.UsedBytes() + kSegment / 2);
  Result<bool> wrote = spool->WriteAhead();
  ASSERT_FALSE(wrote.ok());
  EXPECT_NE(wrote.status().message().find("no space left on device"), std::string::npos);
  EXPECT_NE(wrote.status().message().find("writing a spool file ahead"), std::string::npos);
  EXPECT_TRUE(FilesEndingIn(".free").empty());
  EXPECT_EQ(spool->Stats().spare_bytes, 0u);
  fs.SetCapacity(std::nullopt);
  ASSERT_EQ(*spool->Append(Payload(2, 1000)), 2u);
  EXPECT_TRUE(*spool->WriteAhead());
  ExpectRecords(*spool, 1, 2, 1000);
}

TEST_F(WriteAheadTest, AFileCutShortByACrashIsTakenBackAndNumberingGoesOn) {
  {
    auto spool = Open();
    ASSERT_NE(spool, nullptr);
    fs.FailNth(FsOp::kSync, 1, EIO);  // the first chunk's sync
    EXPECT_FALSE(spool->WriteAhead().ok());
    EXPECT_TRUE(FilesEndingIn(".free").empty());  // a failed one leaves nothing
  }
  // A crash midway leaves part of a file: Open keeps it for what it holds.
  ASSERT_TRUE(fs.PutFile(std::string(kDir) + "/" + kFirstWrittenAhead, std::string(1000, '\0')));
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().spare_bytes, 1000u);
  EXPECT_TRUE(*spool->WriteAhead());
  EXPECT_EQ(FilesEndingIn(".free"),
            (std::vector<std::string>{kFirstWrittenAhead, "09223372036854775809.free"}));
  for (std::uint64_t i = 1; i <= 20; ++i) ASSERT_EQ(*spool->Append(Payload(i, 1000)), i);
  ExpectRecords(*spool, 1, 20, 1000);
}

TEST_F(WriteAheadTest, KeptFilesWithTheLastNumbersAndOneTooLargeForTheCapAreHandled) {
  // Left by anyone in a spool: the highest number a name can hold, the first a file written
  // ahead takes, and one larger than the cap. (A spool without STATE removes them all.)
  ASSERT_NE(Open(), nullptr);
  const std::string last = std::string(kDir) + "/18446744073709551615.free";
  ASSERT_TRUE(fs.PutFile(last, std::string(1000, '\0')));
  ASSERT_TRUE(fs.PutFile(std::string(kDir) + "/" + kFirstWrittenAhead, std::string(1000, '\0')));
  ASSERT_TRUE(fs.PutFile(std::string(kDir) + "/00000000000000000007.free",
                         std::string(kCap + 1, 'x')));
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().spare_bytes, 2000u);  // the one over the cap was removed
  EXPECT_FALSE(fs.Contents(std::string(kDir) + "/00000000000000000007.free").has_value());
  // Numbering goes on without taking a name in use, and the cap holds.
  WriteAheadUntilDone(*spool);
  EXPECT_LE(spool->Stats().bytes, kCap);
  EXPECT_EQ(fs.Contents(last), std::string(1000, '\0'));
  const std::vector<std::string> spare = FilesEndingIn(".free");
  EXPECT_EQ(std::set<std::string>(spare.begin(), spare.end()).size(), spare.size());
  EXPECT_GE(spare.size(), kCap / kSegment - 1);
  for (std::uint64_t i = 1; i <= 50; ++i) ASSERT_EQ(*spool->Append(Payload(i, 1000)), i);
  ExpectRecords(*spool, 1, 50, 1000);
}

TEST_F(WriteAheadTest, APowerLossLosesNoAcknowledgedRecordInFilesWrittenAhead) {
  auto spool = OpenWrittenAhead();
  ASSERT_NE(spool, nullptr);
  for (std::uint64_t i = 1; i <= 200; ++i) ASSERT_EQ(*spool->Append(Payload(i, 700)), i);
  ASSERT_TRUE(spool->Consume(50).ok());
  spool.reset();
  fs.LosePower();
  fs.PowerOn();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  ExpectRecords(*spool, 51, 200, 700);
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
  EXPECT_LE(spool->Stats().bytes, kCap);
}

TEST_F(WriteAheadTest, AnAppendThatNeedsTheRoomCancelsAWriteAheadBetweenChunks) {
  options.max_bytes = 8 << 20;
  options.segment_bytes = 2 << 20;  // two chunks of 1 MiB
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  // Records wait until a file written ahead would take the room the next record needs.
  constexpr size_t kSize = 64 << 10;
  std::uint64_t last = 0;
  AppendWhile(*spool, kSize, &last, [&] {
    return spool->Stats().bytes + options.segment_bytes + 2 * kSize <= options.max_bytes;
  });
  constexpr size_t kLarger = 2 * kSize + 4096;  // more than the room a file would leave
  // The write ahead stops before its first chunk; its writes are counted.
  std::mutex mutex;
  std::condition_variable changed;
  bool holding = false, release = false;
  std::thread::id writer_id;
  int writer_writes = 0;
  fs.SetBeforeWrite([&] {
    std::unique_lock lock(mutex);
    if (std::this_thread::get_id() != writer_id) return;
    if (++writer_writes > 1) return;
    holding = true;
    changed.notify_all();
    changed.wait(lock, [&] { return release; });
  });
  std::thread writer([&] {
    {
      std::lock_guard lock(mutex);
      writer_id = std::this_thread::get_id();
    }
    Result<bool> wrote = spool->WriteAhead();
    EXPECT_TRUE(wrote.ok() && *wrote);
  });
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return holding; });
  }
  // The next record needs the room: its append cancels the file and waits for it to go.
  std::thread appender([&] { EXPECT_EQ(*spool->Append(Payload(last + 1, kLarger)), last + 1); });
  // The writer goes on once the append has cancelled it (and waits for the file to go).
  EXPECT_TRUE(uplink::testing::WaitFor([&] { return spool->Stats().write_aheads_cancelled == 1; },
                                       std::chrono::seconds(30)));
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  changed.notify_all();
  writer.join();
  appender.join();
  fs.SetBeforeWrite(nullptr);
  EXPECT_EQ(writer_writes, 1);  // cancelled after its first chunk, not completed
  EXPECT_TRUE(FilesEndingIn(".free").empty());
  const SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.spare_bytes, 0u);
  EXPECT_EQ(stats.write_aheads_cancelled, 1u);
  EXPECT_LE(stats.bytes, options.max_bytes);
  EXPECT_EQ(stats.losses.dropped.records, 0u);  // the file went, not a record
  ExpectRecords(*spool, 1, last + 1, kSize, kLarger);
}

}  // namespace
}  // namespace uplink::spool
