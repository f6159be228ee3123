// The spool over the fault-injecting file system: appends, reads, the cursor, the cap, every
// kind of damage, a full disk and failing calls.
#include "spool/spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "spool/fault_injection_fs.h"
#include "spool/log_format.h"
#include "spool/record.h"
#include "spool/spool_impl.h"

namespace uplink::spool {
namespace {

using testing::CrashTiming;
using testing::FsOp;
using testing::MemoryFileSystem;

constexpr char kDir[] = "/spool";
constexpr size_t kRecordOverheadForTests = 64;  // framing and append time, with room

std::string Payload(std::uint64_t i, size_t size = 100) {
  std::string payload = "record-" + std::to_string(i) + "-";
  payload.resize(std::max(size, payload.size()), static_cast<char>('a' + i % 26));
  return payload;
}

std::vector<std::uint64_t> Sequences(const std::vector<SpoolRecord>& records) {
  std::vector<std::uint64_t> out;
  for (const SpoolRecord& r : records) out.push_back(r.sequence);
  return out;
}

std::vector<std::uint64_t> Range(std::uint64_t first, std::uint64_t last) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = first; s <= last; ++s) out.push_back(s);
  return out;
}

class SpoolTest : public ::testing::Test {
 protected:
  SpoolTest() {
    options.segment_bytes = 16 << 10;
    options.max_bytes = 1 << 20;
  }

  std::unique_ptr<Spool> Open() {
    auto spool = Spool::Open(fs, kDir, options, clock);
    EXPECT_TRUE(spool.ok()) << spool.status().ToString();
    return spool.ok() ? std::move(*spool) : nullptr;
  }

  // Opens the spool with a reader that has read everything (none yet), as a shipper waits.
  std::unique_ptr<Spool> OpenWithTheReaderWaiting() {
    auto spool = Open();
    if (spool) {
      EXPECT_TRUE(ReadAll(*spool).empty());
    }
    return spool;
  }

  // Appends records `first`..`last` with Payload(i, size) and checks their sequences.
  void AppendRange(Spool& spool, std::uint64_t first, std::uint64_t last, size_t size = 100) {
    for (std::uint64_t i = first; i <= last; ++i) {
      auto sequence = spool.Append(Payload(i, size));
      ASSERT_TRUE(sequence.ok()) << sequence.status().ToString();
      ASSERT_EQ(*sequence, i);
    }
  }

  static std::vector<SpoolRecord> ReadAll(Spool& spool) {
    std::vector<SpoolRecord> all;
    while (true) {
      auto batch = spool.Read(1 << 20, 1000);
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok() || batch->empty()) return all;
      for (auto& r : *batch) all.push_back(std::move(r));
    }
  }

  // Segments, fresh (.seg) or written into a recycled file (.rseg), by first sequence.
  std::vector<std::string> SegmentFiles() {
    std::vector<std::string> out = FilesEndingIn(".seg");
    for (std::string& name : FilesEndingIn(".rseg")) out.push_back(std::move(name));
    std::sort(out.begin(), out.end());
    return out;
  }

  // Consumed segments' files kept for reuse.
  std::vector<std::string> FreeFiles() { return FilesEndingIn(".free"); }

  std::vector<std::string> FilesEndingIn(std::string_view suffix) {
    std::vector<std::string> out;
    auto names = fs.ListDir(kDir);
    if (!names.ok()) return out;
    for (const std::string& name : *names) {
      if (name.size() == 20 + suffix.size() && name.ends_with(suffix)) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string SegmentPath(size_t index) {
    return std::string(kDir) + "/" + SegmentFiles().at(index);
  }

  MemoryFileSystem fs;
  FakeClock clock;
  SpoolOptions options;
};

// ---- basics -------------------------------------------------------------------------------

TEST_F(SpoolTest, OpenCreatesTheSpoolDurablyAndLocksItsDirectory) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  const std::string id = spool->Stats().spool_id;
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(spool->dir(), kDir);
  auto second = Spool::Open(fs, kDir, options, clock);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another process"), std::string::npos);

  spool.reset();
  fs.LosePower();
  fs.PowerOn();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().spool_id, id);
}

TEST_F(SpoolTest, AppendsAreReadInOrderWithTheirAppendTimes) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  std::vector<WallTime> times;
  for (std::uint64_t i = 1; i <= 3; ++i) {
    times.push_back(clock.Now());
    ASSERT_EQ(*spool->Append(Payload(i)), i);
    clock.Advance(std::chrono::milliseconds(1500));
  }
  SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.waiting_records, 3u);
  EXPECT_EQ(stats.first_sequence, 1u);
  EXPECT_EQ(stats.last_sequence, 3u);
  EXPECT_EQ(stats.consumed_through, 0u);
  EXPECT_EQ(stats.segments, 1u);
  EXPECT_GT(stats.bytes, 300u);
  ASSERT_TRUE(stats.oldest_appended_at.has_value());
  EXPECT_EQ(*stats.oldest_appended_at, times[0]);

  std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_EQ(Sequences(records), Range(1, 3));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(records[i].payload, Payload(i + 1));
    EXPECT_EQ(records[i].appended_at, times[i]);
  }
  EXPECT_TRUE(spool->Read(1 << 20, 100)->empty());
}

TEST_F(SpoolTest, EmptyAndMultiBlockRecordsRoundTrip) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  const std::string big = Payload(2, 200'000);
  ASSERT_EQ(*spool->Append(""), 1u);
  ASSERT_EQ(*spool->Append(big), 2u);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].payload, "");
  EXPECT_EQ(records[1].payload, big);
}

TEST_F(SpoolTest, ReadStaysWithinItsLimitsButReturnsAtLeastOneRecord) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 10);
  EXPECT_EQ(Sequences(*spool->Read(250, 100)), Range(1, 2));
  EXPECT_EQ(Sequences(*spool->Read(1, 100)), Range(3, 3));  // over the byte limit alone
  EXPECT_EQ(Sequences(*spool->Read(1 << 20, 3)), Range(4, 6));
  EXPECT_EQ(Sequences(*spool->Read(1 << 20, 0)), Range(7, 7));
  EXPECT_EQ(Sequences(*spool->Read(1 << 20, 100)), Range(8, 10));
  EXPECT_TRUE(spool->Read(1 << 20, 100)->empty());
  AppendRange(*spool, 11, 11);
  EXPECT_EQ(Sequences(*spool->Read(1 << 20, 100)), Range(11, 11));
}

TEST_F(SpoolTest, TheCursorSurvivesARestartAndSequencesAreNeverReused) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 5);
  ASSERT_EQ(ReadAll(*spool).size(), 5u);
  ASSERT_TRUE(spool->Consume(3).ok());
  EXPECT_EQ(spool->Stats().waiting_records, 2u);
  EXPECT_EQ(spool->Stats().first_sequence, 4u);

  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.consumed_through, 3u);
  EXPECT_EQ(stats.last_sequence, 5u);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(4, 5));
  AppendRange(*spool, 6, 6);
  ASSERT_TRUE(spool->Consume(6).ok());
  EXPECT_EQ(spool->Stats().waiting_records, 0u);
  EXPECT_FALSE(spool->Stats().oldest_appended_at.has_value());

  // Everything consumed: the restart still continues the numbering.
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().last_sequence, 6u);
  AppendRange(*spool, 7, 7);
}

TEST_F(SpoolTest, RewindReadsAgainFromTheOldestWaitingRecord) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 6);
  ASSERT_EQ(Sequences(*spool->Read(1 << 20, 4)), Range(1, 4));
  ASSERT_TRUE(spool->Consume(2).ok());
  spool->Rewind();
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(3, 6));
  spool->Rewind();
  EXPECT_EQ(Sequences(*spool->Read(150, 100)), Range(3, 3));
  spool->Rewind();
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(3, 6));
}

TEST_F(SpoolTest, ConsumeIgnoresSequencesAlreadyConsumedOrNeverAppended) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 5);
  ASSERT_TRUE(spool->Consume(50).ok());
  EXPECT_EQ(spool->Stats().consumed_through, 5u);
  ASSERT_TRUE(spool->Consume(2).ok());
  EXPECT_EQ(spool->Stats().consumed_through, 5u);
  AppendRange(*spool, 6, 6);  // the consumed range did not swallow a future sequence
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(6, 6));
}

TEST_F(SpoolTest, RejectedCountsAddUpAndArePersisted) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 5);
  ASSERT_TRUE(spool->Consume(2, {1, 100}).ok());
  ASSERT_TRUE(spool->Consume(2, {2, 30}).ok());  // counted even when the cursor stays
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().losses.rejected.records, 3u);
  EXPECT_EQ(spool->Stats().losses.rejected.bytes, 130u);
}

TEST_F(SpoolTest, ARecordOverTheLimitIsRefusedAndNothingIsDropped) {
  options.max_record_bytes = 1000;
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 2);
  auto refused = spool->Append(std::string(1001, 'x'));
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("1001 bytes is over the 1000-byte limit"),
            std::string::npos);
  EXPECT_EQ(*spool->Append(std::string(1000, 'x')), 3u);
  EXPECT_EQ(spool->Stats().losses.dropped.records, 0u);
  // The record limit is also never more than a quarter of the cap.
  options.max_record_bytes = 1 << 30;
  options.max_bytes = 1 << 20;
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Append(std::string((1 << 18) + 1, 'x')).status().code(),
            StatusCode::kResourceExhausted);
}

TEST_F(SpoolTest, RefusesOptionsItCannotHonour) {
  SpoolOptions tiny;
  tiny.max_bytes = 1000;
  EXPECT_EQ(Spool::Open(fs, kDir, tiny, clock).status().code(), StatusCode::kInvalidArgument);
  SpoolOptions segments_too_large;
  segments_too_large.max_bytes = 1 << 20;
  segments_too_large.segment_bytes = 600 << 10;
  EXPECT_EQ(Spool::Open(fs, kDir, segments_too_large, clock).status().code(),
            StatusCode::kInvalidArgument);
  SpoolOptions no_records;
  no_records.max_record_bytes = 0;
  EXPECT_EQ(Spool::Open(fs, kDir, no_records, clock).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SpoolTest, OpenFailsClearlyWhenTheDirectoryCannotBeRead) {
  fs.FailAlways(FsOp::kListDir, EIO);
  auto spool = Spool::Open(fs, kDir, options, clock);
  EXPECT_EQ(spool.status().code(), StatusCode::kIOError);
  EXPECT_NE(spool.status().message().find(kDir), std::string::npos);
}

TEST_F(SpoolTest, StatsDoesNoIo) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 3);
  const int reads = fs.Calls(FsOp::kRead), opens = fs.Calls(FsOp::kOpen),
            lists = fs.Calls(FsOp::kListDir);
  for (int i = 0; i < 10; ++i) (void)spool->Stats();
  EXPECT_EQ(fs.Calls(FsOp::kRead), reads);
  EXPECT_EQ(fs.Calls(FsOp::kOpen), opens);
  EXPECT_EQ(fs.Calls(FsOp::kListDir), lists);
}

TEST_F(SpoolTest, OldestAppendedAtFollowsTheOldestWaitingRecord) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_FALSE(spool->Stats().oldest_appended_at.has_value());
  std::vector<WallTime> times;
  for (std::uint64_t i = 1; i <= 300; ++i) {  // several segments
    times.push_back(clock.Now());
    ASSERT_EQ(*spool->Append(Payload(i, 200)), i);
    clock.Advance(std::chrono::seconds(1));
  }
  ASSERT_GT(SegmentFiles().size(), 2u);
  EXPECT_EQ(spool->Stats().oldest_appended_at, times[0]);
  // Consumed through records the reader returned, through records it did not, and through
  // exactly what it returned (the time of the next one is then read from the file).
  ASSERT_EQ(spool->Read(1 << 20, 50)->size(), 50u);
  ASSERT_TRUE(spool->Consume(20).ok());
  EXPECT_EQ(spool->Stats().oldest_appended_at, times[20]);
  ASSERT_TRUE(spool->Consume(120).ok());
  EXPECT_EQ(spool->Stats().oldest_appended_at, times[120]);
  ASSERT_EQ(spool->Read(1 << 20, 30)->size(), 30u);
  ASSERT_TRUE(spool->Consume(150).ok());
  EXPECT_EQ(spool->Stats().oldest_appended_at, times[150]);
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().oldest_appended_at, times[150]);
  ASSERT_TRUE(spool->Consume(300).ok());
  EXPECT_FALSE(spool->Stats().oldest_appended_at.has_value());
  const WallTime later = clock.Now();
  AppendRange(*spool, 301, 301);
  EXPECT_EQ(spool->Stats().oldest_appended_at, later);
}

// ---- segments -----------------------------------------------------------------------------

TEST_F(SpoolTest, SegmentsRollAndThoseConsumedAreRecycledOrRemoved) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 400, 500);
  const std::vector<std::string> before = SegmentFiles();
  ASSERT_GE(before.size(), 10u);
  EXPECT_EQ(before.front(), "00000000000000000001.seg");
  EXPECT_EQ(spool->Stats().segments, before.size());
  // Every segment but the newest stays near the roll size.
  for (size_t i = 0; i + 1 < before.size(); ++i) {
    const std::uint64_t size = fs.Contents(std::string(kDir) + "/" + before[i])->size();
    EXPECT_GE(size, options.segment_bytes);
    EXPECT_LT(size, options.segment_bytes + 600);
  }
  ASSERT_TRUE(spool->Consume(200).ok());
  const std::vector<std::string> after = SegmentFiles();
  EXPECT_LT(after.size(), before.size());
  EXPECT_EQ(spool->Stats().segments, after.size());
  // The oldest segment left holds record 201.
  const std::uint64_t oldest_first = std::stoull(after.front().substr(0, 20));
  EXPECT_LE(oldest_first, 201u);
  const std::uint64_t second_first = std::stoull(after.at(1).substr(0, 20));
  EXPECT_GT(second_first, 201u);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(201, 400));
  // Fully consumed: all but the newest go; two of their files are kept for reuse.
  ASSERT_TRUE(spool->Consume(400).ok());
  EXPECT_EQ(SegmentFiles().size(), 1u);
  EXPECT_EQ(FreeFiles().size(), 2u);
  // Reopened with nothing waiting, the newest goes too, and numbering goes on in a file
  // kept for reuse.
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_TRUE(SegmentFiles().empty());
  AppendRange(*spool, 401, 401);
  EXPECT_EQ(SegmentFiles(), std::vector<std::string>{"00000000000000000401.rseg"});
  EXPECT_LE(FreeFiles().size(), 2u);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(401, 401));
}

TEST_F(SpoolTest, RecycledFilesNeverYieldTheirEarlierRecords) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 400);
  ASSERT_EQ(Sequences(ReadAll(*spool)), Range(1, 400));
  ASSERT_TRUE(spool->Consume(400).ok());
  ASSERT_EQ(FreeFiles().size(), 2u);
  // A few records over the start of a file that holds a segment's worth of older ones.
  AppendRange(*spool, 401, 420);
  ASSERT_EQ(SegmentFiles().size(), 2u);
  EXPECT_TRUE(SegmentFiles().back().ends_with(".rseg"));
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(401, 420));
  // Sealed recycled segments, and a recycled newest one, read the same after a restart.
  AppendRange(*spool, 421, 700);
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(401, 700));
  AppendRange(*spool, 701, 710);
  spool->Rewind();
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(401, 710));
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
  EXPECT_EQ(spool->Stats().losses.corrupt.bytes, 0u);
}

TEST_F(SpoolTest, DamageInARecycledSegmentIsSkippedAndCountedLikeAnywhereElse) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 400);
  ASSERT_TRUE(spool->Consume(400).ok());
  AppendRange(*spool, 401, 800);
  spool.reset();
  const std::vector<std::string> recycled = FilesEndingIn(".rseg");
  ASSERT_FALSE(recycled.empty());
  ASSERT_TRUE(fs.FlipBit(std::string(kDir) + "/" + recycled.front(), 100));
  spool = Open();
  ASSERT_NE(spool, nullptr);
  const std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().sequence, 800u);
  const std::uint64_t lost = 400 - records.size();
  EXPECT_GT(lost, 0u);
  for (const SpoolRecord& record : records) EXPECT_GT(record.sequence, 400u);
  ASSERT_TRUE(spool->Consume(800).ok());
  EXPECT_EQ(spool->Stats().losses.corrupt.records, lost);
}

// Damage amid the newest segment's records, with intact records after it, is damage, not a
// torn write (the last write, which nothing follows): the records after it may have been
// acknowledged, so their sequences are never handed out again. Until 2026-12-04 a recycled
// newest segment was cut at the damage, and so was a fresh one whose damage was a length
// running past the file's end, and the next appends took those sequences again.
TEST_F(SpoolTest, DamageAmidTheNewestRecycledSegmentHandsNoneOfItsSequencesOutAgain) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 400);
  ASSERT_TRUE(spool->Consume(400).ok());
  AppendRange(*spool, 401, 420);
  const size_t newest = SegmentFiles().size() - 1;
  ASSERT_TRUE(SegmentFiles().at(newest).ends_with(".rseg"));
  const std::uint64_t first = std::stoull(SegmentFiles().at(newest).substr(0, 20));
  ASSERT_LT(first, 410u);
  spool.reset();
  // Inside record 410's payload (100 bytes each, after their framing).
  ASSERT_TRUE(fs.FlipBit(SegmentPath(newest),
                         (410 - first) * (kRecordOverhead + 100) + kRecordOverhead + 50));
  spool = Open();
  ASSERT_NE(spool, nullptr);
  auto next = spool->Append(Payload(421, 100));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(*next, 420u);
  const std::vector<std::uint64_t> read = Sequences(ReadAll(*spool));
  ASSERT_GE(read.size(), 10u);
  EXPECT_EQ(std::vector<std::uint64_t>(read.begin(), read.begin() + 9), Range(401, 409));
  EXPECT_EQ(read.back(), *next);
  EXPECT_EQ(std::count(read.begin(), read.end(), 410u), 0);
  EXPECT_TRUE(std::is_sorted(read.begin(), read.end()));
  ASSERT_TRUE(spool->Consume(*next).ok());
  EXPECT_GT(spool->Stats().losses.corrupt.records, 0u);
}

TEST_F(SpoolTest, ALengthRunningPastTheEndAmidTheNewestSegmentHandsNoneOfItsSequencesOutAgain) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 10);
  spool.reset();
  // Record 5's fragment length, inside its block but past the file's end.
  const std::uint64_t record_5 = 4 * (kRecordOverhead + 100);
  ASSERT_TRUE(fs.OverwriteStored(SegmentPath(0), record_5 + 4, std::string("\x20\x4e", 2)));
  spool = Open();
  ASSERT_NE(spool, nullptr);
  auto next = spool->Append(Payload(11, 100));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(*next, 10u);
  const std::vector<std::uint64_t> read = Sequences(ReadAll(*spool));
  ASSERT_GE(read.size(), 5u);
  EXPECT_EQ(std::vector<std::uint64_t>(read.begin(), read.begin() + 4), Range(1, 4));
  EXPECT_EQ(read.back(), *next);
  // Records 5 to 10 are lost to the damage, and counted so, never taken for a torn write.
  ASSERT_TRUE(spool->Consume(*next).ok());
  EXPECT_GE(spool->Stats().losses.corrupt.records, 6u);
}

TEST_F(SpoolTest, LostStateDiscardsTheFilesKeptForReuse) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 400);
  ASSERT_TRUE(spool->Consume(400).ok());
  ASSERT_EQ(FreeFiles().size(), 2u);
  spool.reset();
  ASSERT_TRUE(fs.Remove(std::string(kDir) + "/STATE").ok());
  spool = Open();
  ASSERT_NE(spool, nullptr);
  // Numbering may start again below their records' sequences: they must never be read.
  EXPECT_TRUE(FreeFiles().empty());
}

TEST_F(SpoolTest, ANewestRecycledSegmentWithATailIsRemovedNotReusedAgain) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 400);
  ASSERT_TRUE(spool->Consume(400).ok());
  for (std::uint64_t i = 401; i <= 700; i += 20) {  // consumed as it goes: every file reused
    AppendRange(*spool, i, i + 19);
    ASSERT_TRUE(spool->Consume(i + 19).ok());
  }
  const std::vector<std::string> before = SegmentFiles();
  ASSERT_EQ(before.size(), 1u);
  ASSERT_TRUE(before.front().ends_with(".rseg"));
  spool.reset();
  // Nothing waits, but the file holds more than its records (earlier ones, or blocks of a
  // torn group that the next appends' sequences would meet): it must not be handed out again.
  spool = Open();
  ASSERT_NE(spool, nullptr);
  const std::string number = before.front().substr(0, 20);
  for (const std::string& name : FreeFiles()) EXPECT_NE(name.substr(0, 20), number);
  EXPECT_FALSE(fs.Contents(std::string(kDir) + "/" + before.front()).has_value());
  AppendRange(*spool, 701, 710);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(701, 710));
}

TEST_F(SpoolTest, ALostStateIsNotRecreatedWhileFilesKeptForReuseCannotBeRemoved) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 400);
  ASSERT_TRUE(spool->Consume(400).ok());
  ASSERT_EQ(FreeFiles().size(), 2u);
  spool.reset();
  ASSERT_TRUE(fs.Remove(std::string(kDir) + "/STATE").ok());
  fs.FailAlways(FsOp::kRemove, EIO);
  auto refused = Spool::Open(fs, kDir, options, clock);
  EXPECT_EQ(refused.status().code(), StatusCode::kIOError);
  EXPECT_NE(refused.status().message().find("kept for reuse"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(fs.Contents(std::string(kDir) + "/STATE").value_or(""), "");  // no state written
  fs.ClearFaults();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_TRUE(FreeFiles().empty());
}

TEST_F(SpoolTest, OpenReadsAtMostTwoSegmentsHoweverLargeTheSpool) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 1000, 500);
  ASSERT_TRUE(spool->Consume(500).ok());
  ASSERT_GE(SegmentFiles().size(), 15u);
  spool.reset();
  const int opens = fs.Calls(FsOp::kOpen), reads = fs.Calls(FsOp::kRead);
  spool = Open();
  ASSERT_NE(spool, nullptr);
  // STATE; the newest segment to recover it and to append to it; the segment of record 501.
  EXPECT_LE(fs.Calls(FsOp::kOpen) - opens, 4);
  const int blocks_per_segment = static_cast<int>(options.segment_bytes / framing::kBlockSize) + 2;
  EXPECT_LE(fs.Calls(FsOp::kRead) - reads, 1 + 2 * blocks_per_segment);
  EXPECT_EQ(spool->Stats().first_sequence, 501u);
}

TEST_F(SpoolTest, StrayFilesInTheDirectoryAreIgnoredAndKept) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 3);
  spool.reset();
  const std::vector<std::string> strays = {"notes.txt",
                                           "STATE.tmp",
                                           "123.seg",
                                           "00000000000000000000.seg",
                                           "0000000000000000000x.seg",
                                           "99999999999999999999.seg",
                                           "00000000000000000002.seg.tmp"};
  for (const std::string& name : strays)
    ASSERT_TRUE(fs.PutFile(std::string(kDir) + "/" + name, "junk"));
  ASSERT_TRUE(fs.CreateDir(std::string(kDir) + "/subdir").ok());
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 3));
  AppendRange(*spool, 4, 4);
  ASSERT_TRUE(spool->Consume(4).ok());
  for (const std::string& name : strays)
    EXPECT_TRUE(fs.Contents(std::string(kDir) + "/" + name).has_value()) << name;
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
}

// ---- the cap ------------------------------------------------------------------------------

class CappedSpoolTest : public SpoolTest {
 protected:
  CappedSpoolTest() {
    options.max_bytes = 64 << 10;
    options.segment_bytes = 8 << 10;
  }
};

TEST_F(CappedSpoolTest, DropsTheOldestSegmentsAndCountsWhatWaitedInThem) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  for (std::uint64_t i = 1; i <= 300; ++i) {
    ASSERT_EQ(*spool->Append(Payload(i, 1000)), i);
    ASSERT_LE(spool->Stats().bytes, options.max_bytes);
    ASSERT_LE(fs.UsedBytes(), options.max_bytes + 1024);  // segments plus STATE
  }
  SpoolStats stats = spool->Stats();
  ASSERT_GT(stats.consumed_through, 200u);
  EXPECT_EQ(stats.losses.dropped.records, stats.consumed_through);
  // Dropped bytes are estimated from segment sizes: within the block trailers of exact.
  EXPECT_LE(stats.losses.dropped.bytes, stats.consumed_through * 1000);
  EXPECT_GE(stats.losses.dropped.bytes, stats.consumed_through * 1000 * 99 / 100);
  EXPECT_EQ(stats.last_sequence, 300u);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(stats.consumed_through + 1, 300));

  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().losses.dropped.records, stats.losses.dropped.records);
  EXPECT_EQ(spool->Stats().losses.dropped.bytes, stats.losses.dropped.bytes);
  EXPECT_EQ(spool->Stats().spool_id, stats.spool_id);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(stats.consumed_through + 1, 300));
}

TEST_F(CappedSpoolTest, FilesKeptForReuseCountAndGoBeforeAnyWaitingRecord) {
  options.segment_bytes = options.max_bytes / 2;
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  std::uint64_t next = 1;
  for (; SegmentFiles().size() < 2; ++next) ASSERT_EQ(*spool->Append(Payload(next, 1000)), next);
  ASSERT_TRUE(spool->Consume(next - 2).ok());  // the first segment's records
  ASSERT_EQ(FreeFiles().size(), 1u);
  // The second segment grows until it and the kept file no longer fit together.
  for (; !FreeFiles().empty(); ++next) {
    ASSERT_EQ(*spool->Append(Payload(next, 1000)), next);
    ASSERT_LE(spool->Stats().bytes, options.max_bytes);
  }
  EXPECT_EQ(spool->Stats().losses.dropped.records, 0u);
}

TEST_F(CappedSpoolTest, AGroupOverwritingARecycledFileIsNotCountedTwice) {
  options.segment_bytes = 0;  // the default: half of this small cap
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  // A reader that keeps up: what waits stays small, so the cap never forces a drop, even
  // though the segment being written and the files kept for reuse fill most of it.
  for (std::uint64_t i = 1; i <= 300; ++i) {
    auto sequence = spool->Append(Payload(i, 4000));
    ASSERT_TRUE(sequence.ok()) << i << ": " << sequence.status().ToString();
    ASSERT_LE(spool->Stats().bytes, options.max_bytes);
    if (i % 3 == 0) {
      ASSERT_TRUE(spool->Consume(i).ok());
    }
  }
  EXPECT_GT(FilesEndingIn(".rseg").size() + FreeFiles().size(), 0u);  // recycling happened
  EXPECT_EQ(spool->Stats().losses.dropped.records, 0u);
}

TEST_F(CappedSpoolTest, CountsOnlyRecordsThatWereStillWaiting) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 40, 1000);
  ASSERT_EQ(ReadAll(*spool).size(), 40u);
  // Consumed, but the segment holding 40 stays until the cap takes it.
  ASSERT_TRUE(spool->Consume(12).ok());
  AppendRange(*spool, 41, 100, 1000);
  SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.losses.dropped.records, stats.consumed_through - 12);
}

TEST_F(CappedSpoolTest, AReaderPastDroppedRecordsGoesOnFromTheOldestLeft) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 20, 1000);
  ASSERT_EQ(Sequences(*spool->Read(1 << 20, 5)), Range(1, 5));
  AppendRange(*spool, 21, 150, 1000);
  const std::uint64_t consumed = spool->Stats().consumed_through;
  ASSERT_GT(consumed, 20u);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(consumed + 1, 150));
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
  // The shipper acknowledging what it read before the drop changes nothing.
  ASSERT_TRUE(spool->Consume(5).ok());
  EXPECT_EQ(spool->Stats().consumed_through, consumed);
}

TEST_F(CappedSpoolTest, AQueueOfEmptyRecordsNeverOutgrowsTheCap) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (!spool->Append("").ok()) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(spool->Stats().bytes, options.max_bytes);
  EXPECT_EQ(spool->Stats().last_sequence, 8000u);
}

TEST_F(CappedSpoolTest, ReadingAndConsumingRunAlongsideAppendsAtTheCap) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  constexpr int kWriters = 3, kEach = 400;
  std::atomic<int> writers_left{kWriters};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        std::string payload = std::to_string(t) + ":" + std::to_string(i) + ":";
        payload.resize(700, 'w');
        EXPECT_TRUE(spool->Append(payload).ok());
      }
      --writers_left;
    });
  }
  // A shipper: reads a batch, checks it, consumes it; the cap may drop records meanwhile.
  std::vector<int> next_of_writer(kWriters, 0);
  std::uint64_t previous = 0;
  size_t delivered = 0;
  while (true) {
    const bool writing = writers_left.load() > 0;
    auto batch = spool->Read(16 << 10, 50);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    if (batch->empty()) {
      if (!writing) break;
      std::this_thread::yield();
      continue;
    }
    for (const SpoolRecord& record : *batch) {
      ASSERT_GT(record.sequence, previous);
      previous = record.sequence;
      const int writer = std::stoi(record.payload);
      const int index = std::stoi(record.payload.substr(record.payload.find(':') + 1));
      ASSERT_GE(index, next_of_writer.at(writer));  // each writer's records in its order
      next_of_writer[writer] = index + 1;
      ++delivered;
    }
    ASSERT_TRUE(spool->Consume(batch->back().sequence).ok());
  }
  for (auto& w : writers) w.join();
  SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.last_sequence, static_cast<std::uint64_t>(kWriters * kEach));
  EXPECT_EQ(stats.consumed_through, stats.last_sequence);
  EXPECT_GE(delivered + stats.losses.dropped.records, static_cast<size_t>(kWriters * kEach));
  EXPECT_EQ(stats.losses.corrupt.records, 0u);
  EXPECT_LE(stats.bytes, options.max_bytes);
}

// ---- concurrency --------------------------------------------------------------------------

TEST_F(SpoolTest, ConcurrentAppendsGetDistinctSequencesInEachCallersOrder) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  constexpr int kThreads = 8, kEach = 150;
  std::vector<std::vector<std::uint64_t>> sequences(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto sequence = spool->Append("t" + std::to_string(t) + "-" + std::to_string(i));
        if (sequence.ok()) sequences[t].push_back(*sequence);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::map<std::uint64_t, std::string> expected;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(sequences[t].size(), static_cast<size_t>(kEach));
    EXPECT_TRUE(std::is_sorted(sequences[t].begin(), sequences[t].end()));
    for (int i = 0; i < kEach; ++i)
      expected[sequences[t][i]] = "t" + std::to_string(t) + "-" + std::to_string(i);
  }
  ASSERT_EQ(expected.size(), static_cast<size_t>(kThreads * kEach));
  std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_EQ(records.size(), expected.size());
  for (const SpoolRecord& r : records) EXPECT_EQ(r.payload, expected.at(r.sequence));
  EXPECT_EQ(Sequences(records), Range(1, kThreads * kEach));
}

// Holds the first file sync until Release(), so that appends queue up behind it.
class FirstSyncGate {
 public:
  explicit FirstSyncGate(MemoryFileSystem& fs) : fs_(fs) {
    fs_.SetBeforeFileSync([this] {
      std::unique_lock lock(mutex_);
      if (started_) return;
      started_ = true;
      changed_.notify_all();
      changed_.wait(lock, [this] { return released_; });
    });
  }
  ~FirstSyncGate() { fs_.SetBeforeFileSync(nullptr); }

  void WaitUntilHeld() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return started_; });
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    changed_.notify_all();
  }

 private:
  MemoryFileSystem& fs_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool started_ = false, released_ = false;
};

// While one group's sync is held, the appends that arrive queue up and go out together.
TEST_F(SpoolTest, AppendsQueuedBehindASyncAreWrittenMeanwhileAndShareTheNextSync) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  FirstSyncGate gate(fs);
  const int syncs_before = fs.Calls(FsOp::kSync), writes_before = fs.Calls(FsOp::kWriteAt);
  std::thread leader([&] { EXPECT_TRUE(spool->Append("leader").ok()); });
  gate.WaitUntilHeld();
  constexpr int kFollowers = 7;
  std::atomic<int> started{0};
  std::vector<std::thread> followers;
  for (int i = 0; i < kFollowers; ++i) {
    followers.emplace_back([&, i] {
      ++started;
      EXPECT_TRUE(spool->Append("follower-" + std::to_string(i)).ok());
    });
  }
  while (started.load() < kFollowers) std::this_thread::yield();
  // The followers block in Append behind the leader; give them a moment to get there.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  gate.Release();
  leader.join();
  for (auto& f : followers) f.join();
  // The followers' groups are written while the leader's sync runs, and the next sync makes
  // them all durable at once (more only if a follower was late).
  EXPECT_LT(fs.Calls(FsOp::kSync) - syncs_before, 1 + kFollowers);
  EXPECT_LE(fs.Calls(FsOp::kSync) - syncs_before, fs.Calls(FsOp::kWriteAt) - writes_before);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 1 + kFollowers));
}

// The appends a sync releases come back together: the next sync waits for them (at most half
// as long as that sync took) instead of starting with the first one back.
TEST_F(SpoolTest, TheNextSyncWaitsForTheAppendsTheLastOneReleased) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  ASSERT_EQ(spool->Append("first").value_or(0), 1u);
  const int syncs_before = fs.Calls(FsOp::kSync);
  const int writes_before = fs.Calls(FsOp::kWriteAt);
  FirstSyncGate gate(fs);
  std::thread a([&] {
    EXPECT_TRUE(spool->Append("a1").ok());
    EXPECT_TRUE(spool->Append("a2").ok());  // back at once, as a writer in a loop is
  });
  gate.WaitUntilHeld();
  std::thread b([&] { EXPECT_TRUE(spool->Append("b1").ok()); });
  while (fs.Calls(FsOp::kWriteAt) - writes_before < 2) std::this_thread::yield();
  // b1 waits behind the sync, which takes long enough that the next one may wait 50 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  gate.Release();
  a.join();
  b.join();
  // The held sync (a1), then one for b1 and a2 together.
  EXPECT_EQ(fs.Calls(FsOp::kSync) - syncs_before, 2);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 4));
}

// Counts the file writes that start, and lets a test hold them: `hold(n, lock)` runs before
// the nth write goes on, with the gate's lock held.
class WriteGate {
 public:
  using Hold = std::function<void(int n, std::unique_lock<std::mutex>& lock)>;
  WriteGate(MemoryFileSystem& fs, Hold hold) : fs_(fs), hold_(std::move(hold)) {
    fs_.SetBeforeWrite([this] {
      std::unique_lock lock(mutex_);
      const int n = ++started_;
      changed_.notify_all();
      hold_(n, lock);
    });
  }
  ~WriteGate() { fs_.SetBeforeWrite(nullptr); }

  void WaitForWrites(int n) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return started_ >= n; });
  }
  // For a hold: whether n writes started within `bound` (which only keeps a broken spool
  // from hanging the test).
  bool AwaitWrites(std::unique_lock<std::mutex>& lock, int n, std::chrono::seconds bound) {
    return changed_.wait_for(lock, bound, [&] { return started_ >= n; });
  }

 private:
  MemoryFileSystem& fs_;
  Hold hold_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int started_ = 0;
};

// Appends encode and write their records side by side: a write that is held does not keep
// the next append from writing (it only waits, after its write, to become durable).
TEST_F(SpoolTest, AHeldWriteDoesNotKeepTheNextAppendFromWriting) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  ASSERT_EQ(spool->Append("first").value_or(0), 1u);
  bool overlapped = false;
  std::optional<WriteGate> gate;
  gate.emplace(fs, [&](int n, std::unique_lock<std::mutex>& lock) {
    if (n == 1) overlapped = gate->AwaitWrites(lock, 2, std::chrono::seconds(30));
  });
  std::thread held([&] { EXPECT_EQ(spool->Append("held").value_or(0), 2u); });
  gate->WaitForWrites(1);
  std::thread beside([&] { EXPECT_EQ(spool->Append("beside").value_or(0), 3u); });
  held.join();
  beside.join();
  gate.reset();
  EXPECT_TRUE(overlapped);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_EQ(Sequences(records), Range(1, 3));
  EXPECT_EQ(records[1].payload, "held");
  EXPECT_EQ(records[2].payload, "beside");
}

// A sync about to start waits for the records already reserved to be written, and covers
// them: they would otherwise wait for the whole next sync.
TEST_F(SpoolTest, ASyncCoversTheRecordsBeingWrittenWhenItStarts) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  ASSERT_EQ(spool->Append("first").value_or(0), 1u);
  const int syncs_before = fs.Calls(FsOp::kSync);
  std::optional<WriteGate> gate;
  gate.emplace(fs, [&](int n, std::unique_lock<std::mutex>& lock) {
    if (n == 1) {  // until the second record is reserved and being written
      gate->AwaitWrites(lock, 2, std::chrono::seconds(30));
    } else {  // while the first record's append goes on to sync
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::thread first([&] { EXPECT_EQ(spool->Append("written").value_or(0), 2u); });
  gate->WaitForWrites(1);
  std::thread second([&] { EXPECT_EQ(spool->Append("being written").value_or(0), 3u); });
  first.join();
  second.join();
  gate.reset();
  EXPECT_EQ(fs.Calls(FsOp::kSync) - syncs_before, 1);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 3));
}

// Over a recycled file's blocks each record's write-out starts at once; in a new file it
// waits for the sync (starting it there would allocate blocks a record at a time). A
// record's last page is left to the sync, which the next record fills, and so is a small
// record, which the sync sends with its neighbours.
TEST_F(SpoolTest, WriteOutStartsEarlyOnlyForLargeRecordsOverARecycledFilesBlocks) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  constexpr size_t kLarge = 40 << 10;  // over segment_bytes: a segment each
  AppendRange(*spool, 1, 10, kLarge);
  EXPECT_EQ(fs.Calls(FsOp::kStartWriteback), 0);
  ASSERT_TRUE(spool->Consume(10).ok());
  ASSERT_EQ(FreeFiles().size(), 2u);
  AppendRange(*spool, 11, 12, kLarge);
  ASSERT_EQ(FilesEndingIn(".rseg").size(), 2u);
  EXPECT_EQ(fs.Calls(FsOp::kStartWriteback), 2);
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  for (const auto& [from, to] : fs.WritebackRanges()) {
    EXPECT_EQ(from % page, 0u);
    EXPECT_EQ(to % page, 0u);
    EXPECT_GE(to - from, kLarge - page);
    EXPECT_LT(to, kLarge + kRecordOverheadForTests);
  }
  // Small records over recycled blocks: left to the sync.
  AppendRange(*spool, 13, 14, kLarge);
  ASSERT_TRUE(spool->Consume(14).ok());
  ASSERT_EQ(FreeFiles().size(), 2u);
  const int before = fs.Calls(FsOp::kStartWriteback);
  AppendRange(*spool, 15, 40, 500);
  ASSERT_FALSE(FilesEndingIn(".rseg").empty());
  EXPECT_EQ(fs.Calls(FsOp::kStartWriteback), before);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(15, 40));
}

// ---- preallocation ------------------------------------------------------------------------

// A new segment's blocks are allocated when it starts; the cap counts them, and what a
// stopped process did not fill is released when the spool is opened again.
TEST_F(SpoolTest, ANewSegmentIsPreallocatedAndWhatItDidNotFillIsReleasedAtOpen) {
  fs.EnablePreallocation();
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 3);
  const std::string segment = SegmentPath(0);
  EXPECT_EQ(fs.AllocatedBytes(segment), options.segment_bytes);
  EXPECT_LT(fs.Contents(segment)->size(), 500u);
  EXPECT_EQ(spool->Stats().bytes, options.segment_bytes);
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(fs.AllocatedBytes(segment), fs.Contents(segment)->size());
  EXPECT_EQ(spool->Stats().bytes, fs.Contents(segment)->size());
  AppendRange(*spool, 4, 4);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 4));
}

// Preallocating never takes the room of a waiting record: near the cap a new segment gets
// only what is left under it, so the first record is dropped where it would be without.
TEST_F(CappedSpoolTest, PreallocationDropsNoRecordEarlier) {
  auto first_drop = [&](bool preallocate) -> std::uint64_t {
    MemoryFileSystem disk;
    if (preallocate) disk.EnablePreallocation();
    auto spool = Spool::Open(disk, kDir, options, clock);
    if (!spool.ok()) return 0;
    for (std::uint64_t i = 1; i < 1000; ++i) {
      if ((*spool)->Append(Payload(i, 1000)).value_or(0) != i) return 0;
      EXPECT_LE((*spool)->Stats().bytes, options.max_bytes);
      if (i == 1 && preallocate) {
        EXPECT_EQ(disk.AllocatedBytes(std::string(kDir) + "/00000000000000000001.seg"),
                  options.segment_bytes);
      }
      if ((*spool)->Stats().losses.dropped.records > 0) return i;
    }
    return 0;
  };
  const std::uint64_t without = first_drop(false);
  ASSERT_GT(without, 0u);
  EXPECT_EQ(first_drop(true), without);
}

// On a full disk, records still go into the blocks preallocated for the segment; once it is
// full, appends fail clearly, and consuming frees space again.
TEST_F(SpoolTest, AFullDiskStillTakesRecordsIntoPreallocatedBlocks) {
  fs.EnablePreallocation();
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 1);
  fs.SetCapacity(fs.UsedBytes());
  std::uint64_t next = 2;
  Result<std::uint64_t> appended = spool->Append(Payload(next));
  for (; appended.ok(); appended = spool->Append(Payload(next))) {
    ASSERT_EQ(*appended, next);
    ++next;
  }
  EXPECT_GT(next, options.segment_bytes / 200);  // about a segment's worth of 123-byte records
  EXPECT_EQ(appended.status().code(), StatusCode::kIOError);
  EXPECT_NE(appended.status().message().find("no space left on device"), std::string::npos);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, next - 1));
  ASSERT_TRUE(spool->Consume(next - 1).ok());
  fs.SetCapacity(std::nullopt);
  EXPECT_EQ(spool->Append(Payload(next)).value_or(0), next);
}

// ---- failures -----------------------------------------------------------------------------

TEST_F(SpoolTest, AFailedSyncFailsEveryGroupWrittenBehindItAndTheirSequencesAreReused) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  ASSERT_EQ(spool->Append("before").value_or(0), 1u);
  FirstSyncGate gate(fs);
  fs.FailNth(FsOp::kSync, 1, EIO);
  const int writes_before = fs.Calls(FsOp::kWriteAt);
  std::atomic<int> failed{0};
  std::thread leader([&] { failed += spool->Append("leader").ok() ? 0 : 1; });
  gate.WaitUntilHeld();
  constexpr int kFollowers = 3;
  std::vector<std::thread> followers;
  for (int i = 0; i < kFollowers; ++i) {
    followers.emplace_back([&] { failed += spool->Append("follower").ok() ? 0 : 1; });
  }
  // The followers' groups are written behind the blocked sync.
  while (fs.Calls(FsOp::kWriteAt) - writes_before < 2) std::this_thread::yield();
  gate.Release();
  leader.join();
  for (auto& f : followers) f.join();
  // The leader and the groups written behind it failed; a follower that queued only after
  // the repair succeeded. The cut took every failed group out, so their sequences are reused.
  EXPECT_GE(failed.load(), 2);
  const std::uint64_t succeeded = 1 + kFollowers - failed.load();
  ASSERT_EQ(spool->Append("after").value_or(0), 2 + succeeded);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_EQ(records.size(), 2 + succeeded);
  EXPECT_EQ(records.front().payload, "before");
  EXPECT_EQ(records.back().payload, "after");
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 2 + succeeded));
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
}

TEST_F(SpoolTest, ADiskFullFailsAppendsClearlyWhileReadAndConsumeFreeSpace) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 100, 500);
  const std::string newest = std::string(kDir) + "/" + SegmentFiles().back();
  const size_t newest_size = fs.Contents(newest)->size();
  fs.SetCapacity(fs.UsedBytes() + 300);  // part of the next record fits
  auto full = spool->Append(Payload(101, 500));
  ASSERT_EQ(full.status().code(), StatusCode::kIOError);
  EXPECT_NE(full.status().message().find("no space left on device"), std::string::npos);
  EXPECT_EQ(fs.Contents(newest)->size(), newest_size);  // the partial write was cut off
  EXPECT_EQ(spool->Append(Payload(101, 500)).status().code(), StatusCode::kIOError);

  // Reading and consuming still work, and consuming frees the space.
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 100));
  ASSERT_TRUE(spool->Consume(100).ok());
  AppendRange(*spool, 101, 110, 500);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(101, 110));
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(101, 110));
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
}

TEST_F(SpoolTest, AFailedSyncIsCutOffAndItsSequenceReused) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 3);
  const std::string segment = SegmentPath(0);
  const size_t size = fs.Contents(segment)->size();
  fs.FailNth(FsOp::kSync, 1, EIO);
  auto failed = spool->Append("lost");
  EXPECT_EQ(failed.status().code(), StatusCode::kIOError);
  EXPECT_NE(failed.status().message().find("input/output error"), std::string::npos);
  EXPECT_EQ(fs.Contents(segment)->size(), size);
  EXPECT_EQ(*spool->Append(Payload(4)), 4u);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  EXPECT_EQ(Sequences(records), Range(1, 4));
  EXPECT_EQ(records.back().payload, Payload(4));
}

TEST_F(SpoolTest, AFailedAppendThatCannotBeCutOffIsSkippedNotCountedAsLost) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 3);
  fs.FailNth(FsOp::kSync, 1, EIO);
  fs.FailNth(FsOp::kTruncate, 1, EIO);
  EXPECT_FALSE(spool->Append("unknown fate").ok());
  EXPECT_EQ(*spool->Append(Payload(5)), 5u);
  EXPECT_EQ(SegmentFiles().size(), 2u);  // away from the unknown bytes
  EXPECT_EQ(SegmentFiles().back(), "00000000000000000005.seg");
  EXPECT_EQ(Sequences(ReadAll(*spool)), (std::vector<std::uint64_t>{1, 2, 3, 5}));
  SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.losses.corrupt.records, 0u);
  EXPECT_EQ(stats.waiting_records, 4u);
  ASSERT_TRUE(spool->Consume(5).ok());
  EXPECT_EQ(spool->Stats().waiting_records, 0u);
}

TEST_F(SpoolTest, ASegmentWhoseEntryCannotBeMadeDurableIsNotUsed) {
  options.segment_bytes = 1 << 10;
  options.max_bytes = 64 << 10;
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 9);  // 9 x 123 bytes: the next append starts a segment
  ASSERT_EQ(SegmentFiles().size(), 1u);
  fs.FailNth(FsOp::kSyncDir, 1, EIO);
  EXPECT_EQ(spool->Append(Payload(10)).status().code(), StatusCode::kIOError);
  EXPECT_EQ(SegmentFiles().size(), 1u);
  AppendRange(*spool, 10, 10);
  EXPECT_EQ(SegmentFiles().size(), 2u);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 10));
}

TEST_F(SpoolTest, AFailedRemovalIsRetriedByTheNextConsume) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 200, 500);
  const size_t segments = SegmentFiles().size();
  fs.FailAlways(FsOp::kRemove, EIO);
  fs.FailAlways(FsOp::kRename, EIO);
  ASSERT_TRUE(spool->Consume(200).ok());
  EXPECT_EQ(SegmentFiles().size(), segments);
  EXPECT_EQ(spool->Stats().consumed_through, 200u);
  fs.ClearFaults();
  ASSERT_TRUE(spool->Consume(200).ok());
  EXPECT_EQ(SegmentFiles().size(), 1u);
}

TEST_F(SpoolTest, OpenRemovesWhatAConsumeBeforeTheRestartCouldNot) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 200, 500);
  fs.FailAlways(FsOp::kRemove, EIO);
  ASSERT_TRUE(spool->Consume(150).ok());
  spool.reset();
  fs.ClearFaults();
  const size_t before = SegmentFiles().size();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_LT(SegmentFiles().size(), before);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(151, 200));
}

TEST_F(SpoolTest, AFailedStateWriteLeavesTheCursorWhereItWas) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 5);
  ASSERT_EQ(ReadAll(*spool).size(), 5u);
  fs.FailNth(FsOp::kWriteAt, 1, EIO);
  Status consumed = spool->Consume(3);
  EXPECT_EQ(consumed.code(), StatusCode::kIOError);
  EXPECT_NE(consumed.message().find("persisting the spool cursor"), std::string::npos);
  EXPECT_EQ(spool->Stats().consumed_through, 0u);
  ASSERT_TRUE(spool->Consume(3).ok());
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(4, 5));
}

TEST_F(SpoolTest, AnUnreadableBlockIsSkippedAndCounted) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 200, 500);
  fs.FailNth(FsOp::kRead, 1, EIO);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_FALSE(records.empty());
  EXPECT_GT(records.front().sequence, 1u);
  EXPECT_EQ(records.back().sequence, 200u);
  SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.losses.corrupt.records, 200 - records.size());
  EXPECT_GT(stats.losses.corrupt.bytes, 0u);
}

// ---- damage -------------------------------------------------------------------------------

TEST_F(SpoolTest, AFlippedBitInAnOlderSegmentCostsOnlyItsBlockAndIsCountedOnce) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 200, 500);
  spool.reset();
  ASSERT_TRUE(fs.FlipBit(SegmentPath(1), 1000, 3));
  spool = Open();
  ASSERT_NE(spool, nullptr);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  const std::uint64_t lost = 200 - records.size();
  EXPECT_GT(lost, 0u);
  EXPECT_LT(lost, framing::kBlockSize / 500 + 2);
  for (const SpoolRecord& r : records) EXPECT_EQ(r.payload, Payload(r.sequence, 500));
  EXPECT_EQ(records.back().sequence, 200u);
  SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.losses.corrupt.records, lost);
  EXPECT_GT(stats.losses.corrupt.bytes, 0u);

  // Found again after a Rewind or a restart, it is still counted once.
  spool->Rewind();
  ASSERT_EQ(ReadAll(*spool).size(), records.size());
  EXPECT_EQ(spool->Stats().losses.corrupt.records, lost);
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  ASSERT_EQ(ReadAll(*spool).size(), records.size());
  EXPECT_EQ(spool->Stats().losses.corrupt.records, lost);
  ASSERT_TRUE(spool->Consume(200).ok());
  EXPECT_EQ(spool->Stats().losses.corrupt.records, lost);
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().losses.corrupt.records, lost);
  EXPECT_EQ(spool->Stats().losses.corrupt.bytes, stats.losses.corrupt.bytes);
  EXPECT_TRUE(ReadAll(*spool).empty());
}

TEST_F(SpoolTest, DamageAmongConsumedRecordsIsNotCounted) {
  options.segment_bytes = 256 << 10;
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 100, 600);  // two blocks
  ASSERT_EQ(ReadAll(*spool).size(), 100u);
  ASSERT_TRUE(spool->Consume(70).ok());
  spool.reset();
  ASSERT_TRUE(fs.FlipBit(SegmentPath(0), 100));  // record 1: consumed, but its block goes
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(71, 100));
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
  EXPECT_EQ(spool->Stats().losses.corrupt.bytes, 0u);
}

TEST_F(SpoolTest, ATornTailOfTheNewestSegmentIsCutOffAndAppendingGoesOn) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 10);
  spool.reset();
  const std::string newest = SegmentPath(0);
  const size_t size = fs.Contents(newest)->size();
  ASSERT_TRUE(fs.TruncateStored(newest, size - 20));  // record 10 torn
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(fs.Contents(newest)->size(), size - 20 - (100 + 8 + framing::kHeaderSize - 20));
  EXPECT_EQ(spool->Stats().last_sequence, 9u);
  AppendRange(*spool, 10, 12);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 12));
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);
}

// Random bytes are not what a crash leaves after a write: they are treated as damage.
TEST_F(SpoolTest, GarbageAfterTheNewestRecordIsKeptCountedAndSkipped) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 10);
  spool.reset();
  const std::string newest = SegmentPath(0);
  const size_t size = fs.Contents(newest)->size();
  std::mt19937 random(3);
  std::string garbage(5000, '\0');
  for (char& c : garbage) c = static_cast<char>(random());
  ASSERT_TRUE(fs.OverwriteStored(newest, size, garbage));
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(fs.Contents(newest)->size(), size + garbage.size());
  auto next = spool->Append("next");
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 11 + garbage.size() / (framing::kHeaderSize + 8));
  std::vector<SpoolRecord> records = ReadAll(*spool);
  EXPECT_EQ(records.size(), 11u);
  EXPECT_EQ(records.back().sequence, *next);
  EXPECT_EQ(spool->Stats().losses.corrupt.records, *next - 11);
  EXPECT_EQ(spool->Stats().losses.corrupt.bytes, garbage.size());
}

TEST_F(SpoolTest, ZeroesAfterTheNewestRecordAreATornWriteAndAreCutOff) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 10);
  spool.reset();
  const std::string newest = SegmentPath(0);
  const size_t size = fs.Contents(newest)->size();
  ASSERT_TRUE(fs.OverwriteStored(newest, size, std::string(3000, '\0')));
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(fs.Contents(newest)->size(), size);
  AppendRange(*spool, 11, 11);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(1, 11));
  EXPECT_EQ(spool->Stats().losses.corrupt.bytes, 0u);
}

TEST_F(SpoolTest, DamageInsideTheNewestSegmentStaysAndIsSkipped) {
  options.segment_bytes = 256 << 10;
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 100, 600);  // two blocks
  spool.reset();
  ASSERT_TRUE(fs.FlipBit(SegmentPath(0), 5000));
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().last_sequence, 100u);
  AppendRange(*spool, 101, 101, 600);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  EXPECT_EQ(records.back().sequence, 101u);
  EXPECT_EQ(records.front().sequence, 1u);
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 101 - records.size());
  EXPECT_GT(spool->Stats().losses.corrupt.records, 0u);
  for (const SpoolRecord& r : records) EXPECT_EQ(r.payload, Payload(r.sequence, 600));
}

// Damage after the last intact record of the newest segment may have held acknowledged
// records: their number is unknown, so sequences are skipped rather than possibly reused.
TEST_F(SpoolTest, DamageAtTheEndOfTheNewestSegmentNeverLeadsToReusedSequences) {
  options.segment_bytes = 256 << 10;
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 100, 600);
  spool.reset();
  const std::string newest = SegmentPath(0);
  ASSERT_TRUE(fs.FlipBit(newest, fs.Contents(newest)->size() - 5000));
  spool = Open();
  ASSERT_NE(spool, nullptr);
  auto next = spool->Append("after the damage");
  ASSERT_TRUE(next.ok());
  EXPECT_GT(*next, 100u);
  EXPECT_EQ(SegmentFiles().size(), 2u);  // the damaged segment is kept as it is
  std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_GE(records.size(), 2u);
  EXPECT_EQ(records.back().payload, "after the damage");
  EXPECT_LT(records[records.size() - 2].sequence, 100u);
  // Every skipped sequence is counted, as the console counts every missing one.
  EXPECT_EQ(spool->Stats().losses.corrupt.records, *next - records.size());
  EXPECT_GT(spool->Stats().losses.corrupt.bytes, 0u);
}

TEST_F(SpoolTest, ATruncatedOrMissingOlderSegmentIsCountedAndTheRestDelivered) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 300, 500);
  spool.reset();
  ASSERT_GE(SegmentFiles().size(), 5u);
  const std::string truncated = SegmentPath(1);
  ASSERT_TRUE(fs.TruncateStored(truncated, fs.Contents(truncated)->size() / 2));
  ASSERT_TRUE(fs.Remove(SegmentPath(3)).ok());
  spool = Open();
  ASSERT_NE(spool, nullptr);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  EXPECT_EQ(records.front().sequence, 1u);
  EXPECT_EQ(records.back().sequence, 300u);
  EXPECT_TRUE(std::is_sorted(
      records.begin(), records.end(),
      [](const SpoolRecord& a, const SpoolRecord& b) { return a.sequence < b.sequence; }));
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 300 - records.size());
  EXPECT_GT(300 - records.size(), 30u);
}

TEST_F(SpoolTest, SegmentsOverwrittenWithGarbageDoNotStopTheSpool) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 300, 500);
  spool.reset();
  std::mt19937 random(11);
  const std::vector<std::string> files = SegmentFiles();
  for (size_t index : {size_t{2}, files.size() - 1}) {
    const std::string path = std::string(kDir) + "/" + files[index];
    std::string garbage(fs.Contents(path)->size(), '\0');
    for (char& c : garbage) c = static_cast<char>(random());
    ASSERT_TRUE(fs.OverwriteStored(path, 0, garbage));
  }
  spool = Open();
  ASSERT_NE(spool, nullptr);
  const std::uint64_t newest_first = std::stoull(files.back().substr(0, 20));
  // Nothing in the newest segment is intact: appending goes on past what it may have held.
  auto next = spool->Append("after");
  ASSERT_TRUE(next.ok());
  EXPECT_GT(*next, 300u);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().payload, "after");
  for (const SpoolRecord& r : records) {
    if (r.sequence < newest_first) {
      EXPECT_EQ(r.payload, Payload(r.sequence, 500));
    }
  }
  EXPECT_EQ(spool->Stats().losses.corrupt.records, *next - records.size());
}

TEST_F(SpoolTest, ADamagedStateSlotFallsBackToTheOtherOne) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 10);
  ASSERT_TRUE(spool->Consume(4).ok());  // generation 2, slot 1; synced by the close
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  ASSERT_TRUE(spool->Consume(7).ok());  // generation 3, slot 0: never over the synced slot
  const std::string id = spool->Stats().spool_id;
  spool.reset();
  ASSERT_TRUE(fs.FlipBit(std::string(kDir) + "/STATE", 40));
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().spool_id, id);
  EXPECT_EQ(spool->Stats().consumed_through, 4u);  // delivered again rather than lost
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(5, 10));
  // The next write goes over the damaged slot.
  ASSERT_TRUE(spool->Consume(8).ok());
  spool.reset();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->Stats().consumed_through, 8u);
}

TEST_F(SpoolTest, TheCursorIsSyncedOnlyBeforeASegmentIsRetiredOrOnClose) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 5);
  ASSERT_EQ(ReadAll(*spool).size(), 5u);
  const int syncs_before = fs.Calls(FsOp::kSync);
  ASSERT_TRUE(spool->Consume(2).ok());
  ASSERT_TRUE(spool->Consume(4).ok());
  EXPECT_EQ(fs.Calls(FsOp::kSync), syncs_before);  // written, not synced
  EXPECT_EQ(spool->Stats().consumed_through, 4u);
  spool.reset();
  EXPECT_EQ(fs.Calls(FsOp::kSync), syncs_before + 1);  // the close syncs it

  // A power loss before any sync takes the lazy cursor back to the synced one: the records
  // are delivered again (the console recognises them), never lost.
  MemoryFileSystem lossy;
  auto opened = Spool::Open(lossy, kDir, options, clock);
  ASSERT_TRUE(opened.ok());
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE((*opened)->Append(Payload(i, 100)).ok());
  ASSERT_TRUE((*opened)->Consume(3).ok());
  lossy.CrashAtSyncPoint(lossy.sync_points() + 1, CrashTiming::kBeforeSync);
  opened->reset();  // the close's sync is the one that never happens
  lossy.PowerOn();
  auto reopened = Spool::Open(lossy, kDir, options, clock);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->Stats().consumed_through, 0u);
  EXPECT_EQ(Sequences(ReadAll(**reopened)), Range(1, 5));
}

// A cursor written lazily while its segment was the only one, then a roll: the next Consume
// retires that segment, and must sync the cursor first. Power lost at any point of it leaves
// nothing counted as damage and every waiting record there.
TEST_F(SpoolTest, ASegmentIsRetiredOnlyOnTheWordOfASyncedCursor) {
  for (CrashTiming timing : {CrashTiming::kBeforeSync, CrashTiming::kAfterSync}) {
    for (int later = 1; later <= 3; ++later) {
      SCOPED_TRACE("power lost " +
                   std::string(timing == CrashTiming::kBeforeSync ? "before" : "after") +
                   " sync point " + std::to_string(later) + " of the retiring Consume");
      MemoryFileSystem lossy;
      auto opened = Spool::Open(lossy, kDir, options, clock);
      ASSERT_TRUE(opened.ok());
      Spool& spool = **opened;
      std::uint64_t last = 0;
      while (spool.Stats().bytes < options.segment_bytes) {
        last = spool.Append(Payload(last + 1, 500)).value_or(0);
        ASSERT_GT(last, 0u);
      }
      ASSERT_EQ(spool.Stats().segments, 1u);
      ASSERT_EQ(ReadAll(spool).size(), last);
      ASSERT_TRUE(spool.Consume(last).ok());  // lazily: nothing to retire yet
      ASSERT_TRUE(spool.Append("after the roll").ok());
      ASSERT_EQ(spool.Stats().segments, 2u);
      lossy.CrashAtSyncPoint(lossy.sync_points() + later, timing);
      (void)spool.Consume(last);  // retires the first segment
      opened->reset();
      lossy.PowerOn();
      auto reopened = Spool::Open(lossy, kDir, options, clock);
      ASSERT_TRUE(reopened.ok());
      const SpoolStats stats = (*reopened)->Stats();
      EXPECT_EQ(stats.losses.corrupt.records, 0u);
      const std::vector<SpoolRecord> records = ReadAll(**reopened);
      ASSERT_FALSE(records.empty());
      EXPECT_EQ(records.front().sequence, stats.consumed_through + 1);
      EXPECT_EQ(records.back().payload, "after the roll");
      EXPECT_EQ(records.size(), last + 1 - stats.consumed_through);
    }
  }
}

TEST_F(SpoolTest, AFailedCursorSyncKeepsTheSegmentItWouldRetire) {
  auto spool = Open();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 100, 500);
  ASSERT_GT(SegmentFiles().size(), 2u);
  ASSERT_EQ(ReadAll(*spool).size(), 100u);
  const std::vector<std::string> files = SegmentFiles();
  fs.FailNth(FsOp::kSync, 1, EIO);
  Status consumed = spool->Consume(100);
  EXPECT_EQ(consumed.code(), StatusCode::kIOError);
  EXPECT_NE(consumed.message().find("persisting the spool cursor"), std::string::npos);
  EXPECT_EQ(spool->Stats().consumed_through, 0u);
  EXPECT_EQ(SegmentFiles(), files);
  ASSERT_TRUE(spool->Consume(100).ok());
  EXPECT_LT(SegmentFiles().size(), files.size());
}

TEST_F(SpoolTest, LostStateStartsANewSpoolIdAndDeliversEverythingOnDisk) {
  for (bool remove : {false, true}) {
    SCOPED_TRACE(remove ? "STATE removed" : "both slots damaged");
    MemoryFileSystem fresh;
    auto spool = Spool::Open(fresh, kDir, options, clock);
    ASSERT_TRUE(spool.ok());
    for (std::uint64_t i = 1; i <= 200; ++i) ASSERT_TRUE((*spool)->Append(Payload(i, 500)).ok());
    ASSERT_TRUE((*spool)->Consume(150).ok());
    const std::string id = (*spool)->Stats().spool_id;
    spool->reset();
    const std::string state = std::string(kDir) + "/STATE";
    if (remove) {
      ASSERT_TRUE(fresh.Remove(state).ok());
    } else {
      ASSERT_TRUE(fresh.FlipBit(state, 10));
      ASSERT_TRUE(fresh.FlipBit(state, 128 + 10));
    }
    auto reopened = Spool::Open(fresh, kDir, options, clock);
    ASSERT_TRUE(reopened.ok());
    SpoolStats stats = (*reopened)->Stats();
    EXPECT_NE(stats.spool_id, id);
    std::vector<SpoolRecord> records = ReadAll(**reopened);
    ASSERT_FALSE(records.empty());
    EXPECT_LE(records.front().sequence, 151u);
    EXPECT_EQ(records.back().sequence, 200u);
    EXPECT_EQ(stats.losses.corrupt.records, 0u);
    EXPECT_EQ(*(*reopened)->Append("next"), 201u);
  }
}

// ---- the tail -----------------------------------------------------------------------------

// Room for twice what the tail holds, in 1 MiB segments (the default for the size).
class TailTest : public SpoolTest {
 protected:
  TailTest() { options = SpoolOptions{.max_bytes = 64 << 20}; }
};

// A reader that keeps up is given the newest durable records from memory: the file system
// sees no read for them.
TEST_F(TailTest, TheTailServesTheRecordsAsTheFileHoldsThemWithoutReadingIt) {
  auto spool = OpenWithTheReaderWaiting();
  ASSERT_NE(spool, nullptr);
  const std::vector<std::string> payloads = {"",         "x", Payload(3), Payload(4, 32 << 10),
                                             Payload(5, 100 << 10), Payload(6, 7)};
  const WallTime start = clock.Now();
  for (size_t i = 0; i < payloads.size(); ++i) {
    clock.Advance(std::chrono::seconds(1));
    ASSERT_EQ(spool->Append(payloads[i]).value_or(0), i + 1);
  }
  const int reads = fs.Calls(FsOp::kRead);
  std::vector<SpoolRecord> served = ReadAll(*spool);
  EXPECT_EQ(fs.Calls(FsOp::kRead), reads);

  // Rewind reads them again, from the file.
  spool->Rewind();
  std::vector<SpoolRecord> from_file = ReadAll(*spool);
  EXPECT_GT(fs.Calls(FsOp::kRead), reads);
  ASSERT_EQ(served.size(), payloads.size());
  ASSERT_EQ(from_file.size(), payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(served[i].sequence, i + 1);
    EXPECT_EQ(served[i].payload, payloads[i]);
    EXPECT_EQ(served[i].appended_at, start + std::chrono::seconds(i + 1));
    EXPECT_EQ(from_file[i].sequence, served[i].sequence);
    EXPECT_EQ(from_file[i].payload, served[i].payload);
    EXPECT_EQ(from_file[i].appended_at, served[i].appended_at);
  }
  // What the reader was given from memory is remembered as from the file.
  ASSERT_TRUE(spool->Consume(3).ok());
  SpoolStats stats = spool->Stats();
  EXPECT_EQ(stats.waiting_records, 3u);
  EXPECT_EQ(stats.oldest_appended_at, start + std::chrono::seconds(4));
  EXPECT_EQ(stats.losses.corrupt.records, 0u);
}

TEST_F(TailTest, TheOldestWaitingRecordsTimeComesFromTheTailWithoutReading) {
  auto spool = OpenWithTheReaderWaiting();
  ASSERT_NE(spool, nullptr);
  const WallTime start = clock.Now();
  for (std::uint64_t i = 1; i <= 3; ++i) {
    clock.Advance(std::chrono::seconds(1));
    ASSERT_EQ(spool->Append(Payload(i)).value_or(0), i);
  }
  auto batch = spool->Read(1 << 20, 2);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(Sequences(*batch), Range(1, 2));
  const int reads = fs.Calls(FsOp::kRead), opens = fs.Calls(FsOp::kOpen);
  ASSERT_TRUE(spool->Consume(2).ok());
  EXPECT_EQ(spool->Stats().oldest_appended_at, start + std::chrono::seconds(3));
  EXPECT_EQ(fs.Calls(FsOp::kRead), reads);
  EXPECT_EQ(fs.Calls(FsOp::kOpen), opens);
}

TEST_F(TailTest, AReaderBehindTheTailGetsEverythingFromTheFileInOrderOnce) {
  auto spool = OpenWithTheReaderWaiting();
  ASSERT_NE(spool, nullptr);
  // Twice what the tail holds, appended while the reader reads nothing: the tail keeps the
  // oldest that fit after the first, then stops taking copies (the reader is behind it).
  constexpr size_t kSize = 64 << 10;
  constexpr std::uint64_t kRecords = 2 * kMaxTailBytes / kSize;
  AppendRange(*spool, 1, kRecords, kSize);
  // One record at a time, noting which came without a file read.
  auto read_one_at_a_time = [&](std::vector<std::uint64_t>* from_memory) {
    std::vector<std::uint64_t> sequences;
    while (true) {
      const int reads = fs.Calls(FsOp::kRead);
      auto batch = spool->Read(1, 1);
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok() || batch->empty()) return sequences;
      EXPECT_EQ(batch->size(), 1u);
      const SpoolRecord& record = batch->front();
      EXPECT_EQ(record.payload, Payload(record.sequence, kSize)) << record.sequence;
      sequences.push_back(record.sequence);
      if (fs.Calls(FsOp::kRead) == reads) from_memory->push_back(record.sequence);
    }
  };
  std::vector<std::uint64_t> from_memory;
  EXPECT_EQ(read_one_at_a_time(&from_memory), Range(1, kRecords));
  ASSERT_FALSE(from_memory.empty());
  EXPECT_GT(from_memory.front(), 1u);
  EXPECT_LT(from_memory.back(), kRecords);
  EXPECT_EQ(from_memory, Range(from_memory.front(), from_memory.back()));
  EXPECT_LE(from_memory.size() * kSize, kMaxTailBytes);  // the bound held
  EXPECT_EQ(spool->Stats().losses.corrupt.records, 0u);

  // Caught up again: the next records come from memory.
  AppendRange(*spool, kRecords + 1, kRecords + 8, kSize);
  from_memory.clear();
  EXPECT_EQ(read_one_at_a_time(&from_memory), Range(kRecords + 1, kRecords + 8));
  EXPECT_EQ(from_memory, Range(kRecords + 1, kRecords + 8));
}

TEST_F(TailTest, ARecordLargerThanTheTailIsNeverHeldInIt) {
  auto spool = OpenWithTheReaderWaiting();
  ASSERT_NE(spool, nullptr);
  const std::string large = Payload(1, kMaxTailBytes + 1);
  ASSERT_EQ(spool->Append(large).value_or(0), 1u);
  ASSERT_EQ(spool->Append(Payload(2)).value_or(0), 2u);
  const int reads = fs.Calls(FsOp::kRead);
  auto first = spool->Read(1, 1);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(Sequences(*first), Range(1, 1));
  EXPECT_EQ(first->front().payload, large);
  EXPECT_GT(fs.Calls(FsOp::kRead), reads);  // from the file
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(2, 2));
}

TEST_F(TailTest, AFailedAppendIsNeverServedFromTheTail) {
  auto spool = OpenWithTheReaderWaiting();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 3);
  fs.FailNth(FsOp::kWriteAt, 1, EIO);
  EXPECT_FALSE(spool->Append("the write failed").ok());
  fs.FailNth(FsOp::kSync, 1, EIO);
  EXPECT_FALSE(spool->Append("the sync failed").ok());
  ASSERT_EQ(spool->Append(Payload(4)).value_or(0), 4u);
  const int reads = fs.Calls(FsOp::kRead);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  EXPECT_EQ(fs.Calls(FsOp::kRead), reads);  // from memory
  ASSERT_EQ(Sequences(records), Range(1, 4));
  for (const SpoolRecord& record : records) EXPECT_EQ(record.payload, Payload(record.sequence));
}

TEST_F(CappedSpoolTest, RecordsDroppedAtTheCapAreNotServedFromTheTail) {
  auto spool = OpenWithTheReaderWaiting();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 20, 500);  // the tail holds them, unread
  AppendRange(*spool, 21, 300, 500);
  const SpoolStats stats = spool->Stats();
  ASSERT_GT(stats.consumed_through, 20u);
  EXPECT_EQ(stats.losses.dropped.records, stats.consumed_through);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  EXPECT_EQ(Sequences(records), Range(stats.consumed_through + 1, 300));
  for (const SpoolRecord& record : records) {
    EXPECT_EQ(record.payload, Payload(record.sequence, 500));
  }
}

TEST_F(TailTest, APowerLossAfterTailReadsLosesNothingAcknowledged) {
  auto spool = OpenWithTheReaderWaiting();
  ASSERT_NE(spool, nullptr);
  AppendRange(*spool, 1, 50, 300);
  auto batch = spool->Read(1 << 20, 20);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 20u);
  ASSERT_TRUE(spool->Consume(20).ok());
  AppendRange(*spool, 51, 60, 300);
  EXPECT_EQ(Sequences(ReadAll(*spool)), Range(21, 60));
  fs.LosePower();
  spool.reset();
  fs.PowerOn();
  spool = Open();
  ASSERT_NE(spool, nullptr);
  std::vector<SpoolRecord> records = ReadAll(*spool);
  ASSERT_FALSE(records.empty());
  EXPECT_LE(records.front().sequence, 21u);  // the cursor may have been lazily written
  EXPECT_EQ(Sequences(records), Range(records.front().sequence, 60));
  for (const SpoolRecord& record : records) {
    EXPECT_EQ(record.payload, Payload(record.sequence, 300));
  }
}

}  // namespace
}  // namespace uplink::spool
