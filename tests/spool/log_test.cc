// The segment framing: what the writer encodes, and what the reader makes of it intact,
// damaged, cut short, hostile, or still being written.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "spool/log_format.h"
#include "spool/log_reader.h"
#include "spool/log_writer.h"

namespace uplink::spool::framing {
namespace {

// A segment file in memory; reads of chosen blocks can be made to fail.
class StringFile final : public ReadableFile {
 public:
  explicit StringFile(std::string bytes) : bytes_(std::move(bytes)) {}
  Result<std::string_view> Read(std::uint64_t offset, size_t n, char* scratch) const override {
    if (failing_block_ && offset / kBlockSize == *failing_block_)
      return IOError("read x: input/output error");
    if (offset >= bytes_.size()) return std::string_view(scratch, 0);
    const size_t count = std::min<std::uint64_t>(n, bytes_.size() - offset);
    std::memcpy(scratch, bytes_.data() + offset, count);
    return std::string_view(scratch, count);
  }
  std::optional<std::uint64_t> failing_block_;

 private:
  std::string bytes_;
};

struct Skip {
  std::uint64_t offset;
  std::uint64_t bytes;
  std::string reason;
};

class RecordingReporter final : public Reporter {
 public:
  void Corruption(std::uint64_t offset, std::uint64_t bytes, std::string_view reason) override {
    skips.push_back({offset, bytes, std::string(reason)});
  }
  std::uint64_t Total() const {
    std::uint64_t total = 0;
    for (const Skip& s : skips) total += s.bytes;
    return total;
  }
  std::vector<Skip> skips;
};

struct Read {
  std::uint64_t sequence;
  std::string payload;
  std::uint64_t offset;
  std::uint64_t end_offset;
};

std::vector<Read> ReadAll(const ReadableFile& file, std::uint64_t limit, Reporter* reporter,
                          size_t max_record = 1 << 20) {
  Reader reader(file, reporter, 0, limit, max_record);
  std::vector<Read> out;
  LogRecord record;
  while (reader.ReadRecord(&record)) {
    out.push_back({record.sequence, std::string(record.payload), record.offset, record.end_offset});
  }
  return out;
}

std::string Payload(size_t size, char seed) {
  std::string payload(size, '\0');
  for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>(seed + i * 7);
  return payload;
}

// A fragment with a valid checksum, built by hand: hostile inputs must be well-formed
// enough to reach the checks behind the CRC.
std::string Fragment(std::uint8_t type, std::uint64_t sequence, std::string_view data) {
  std::string header(kHeaderSize, '\0');
  header[4] = static_cast<char>(data.size() & 0xff);
  header[5] = static_cast<char>(data.size() >> 8);
  header[6] = static_cast<char>(type);
  for (int i = 0; i < 8; ++i) header[7 + i] = static_cast<char>((sequence >> (8 * i)) & 0xff);
  std::uint32_t crc = crc32c::Extend(crc32c::Value(std::string_view(header).substr(6, 9)), data);
  crc = crc32c::Mask(crc);
  for (int i = 0; i < 4; ++i) header[i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  return header + std::string(data);
}

TEST(LogFormat, RoundTripsRecordsOfEverySizeClass) {
  const std::vector<size_t> sizes = {
      0, 1, 100, kBlockSize - kHeaderSize, kBlockSize, 3 * kBlockSize + 17, 5, 0, 70000};
  std::string file;
  Writer writer;
  for (size_t i = 0; i < sizes.size(); ++i)
    writer.AddRecord(100 + i, Payload(sizes[i], 'a' + i), &file);
  EXPECT_EQ(writer.offset(), file.size());
  StringFile readable(file);
  RecordingReporter reporter;
  std::vector<Read> records = ReadAll(readable, file.size(), &reporter);
  ASSERT_EQ(records.size(), sizes.size());
  std::uint64_t previous_end = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(records[i].sequence, 100 + i);
    EXPECT_EQ(records[i].payload, Payload(sizes[i], 'a' + i));
    EXPECT_GE(records[i].offset, previous_end);
    EXPECT_GT(records[i].end_offset, records[i].offset);
    previous_end = records[i].end_offset;
  }
  EXPECT_EQ(previous_end, file.size());
  EXPECT_TRUE(reporter.skips.empty());
}

TEST(LogFormat, AWriterResumedAtAnOffsetEncodesWhatOneWriterWould) {
  std::string whole;
  Writer one;
  for (int i = 0; i < 40; ++i) one.AddRecord(i + 1, Payload(1000 + 997 * i, 'x'), &whole);
  std::string pieces;
  for (int i = 0; i < 40; ++i) {
    Writer resumed(pieces.size());  // as the spool does for every group
    resumed.AddRecord(i + 1, Payload(1000 + 997 * i, 'x'), &pieces);
  }
  EXPECT_EQ(pieces, whole);
}

// The spool reserves a record's place from EncodedEnd, then encodes it there: the two must
// agree at every position in a block, for records of every size class.
TEST(LogFormat, EncodedEndIsWhereTheEncodingEnds) {
  const std::uint64_t lengths[] = {0, 1, 7, kBlockSize - kHeaderSize - 1, kBlockSize - kHeaderSize,
                                   kBlockSize, 3 * kBlockSize + 5, 100'000};
  for (std::uint64_t offset : {0ul, 1ul, 100ul, kBlockSize - kHeaderSize - 1, kBlockSize - kHeaderSize,
                               kBlockSize - kHeaderSize + 1, kBlockSize - 1, kBlockSize,
                               5 * kBlockSize + 12'345}) {
    for (std::uint64_t length : lengths) {
      std::string out;
      Writer writer(offset);
      writer.AddRecord(1, Payload(length, 'e'), &out);
      EXPECT_EQ(Writer::EncodedEnd(offset, length), offset + out.size())
          << "offset " << offset << " length " << length;
      EXPECT_EQ(writer.offset(), offset + out.size());
    }
  }
}

// A record given as its append time and payload encodes as the two joined would.
TEST(LogFormat, ARecordInTwoPiecesEncodesAsTheJoinedRecord) {
  for (std::uint64_t offset : {0ul, kBlockSize - kHeaderSize - 3, kBlockSize - kHeaderSize - 8,
                               kBlockSize - kHeaderSize - 9, 2 * kBlockSize + 77}) {
    for (size_t head : {0ul, 3ul, 8ul}) {
      for (size_t tail : {0ul, 1ul, 8ul, 40'000ul, 70'000ul}) {
        const std::string record = Payload(head + tail, 'j');
        std::string joined, pieces;
        Writer(offset).AddRecord(9, record, &joined);
        Writer(offset).AddRecord(9, std::string_view(record).substr(0, head),
                                 std::string_view(record).substr(head), &pieces);
        EXPECT_EQ(pieces, joined) << offset << " " << head << " " << tail;
      }
    }
  }
}

TEST(LogFormat, FillsATrailerShorterThanAHeaderWithZeroesAndStartsTheNextBlock) {
  std::string file;
  Writer writer;
  // Leaves 10 bytes in the first block: too few for a header.
  writer.AddRecord(1, Payload(kBlockSize - kHeaderSize - 10, 'p'), &file);
  ASSERT_EQ(file.size(), kBlockSize - 10);
  writer.AddRecord(2, "next", &file);
  EXPECT_EQ(file.substr(kBlockSize - 10, 10), std::string(10, '\0'));
  EXPECT_EQ(file.size(), kBlockSize + kHeaderSize + 4);
  StringFile readable(file);
  std::vector<Read> records = ReadAll(readable, file.size(), nullptr);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].offset, kBlockSize);
  EXPECT_EQ(records[0].end_offset, kBlockSize - 10);
}

TEST(LogFormat, ExactlyAHeaderLeftInABlockStartsARecordWithAnEmptyFirstFragment) {
  std::string file;
  Writer writer;
  writer.AddRecord(1, Payload(kBlockSize - 2 * kHeaderSize, 'p'), &file);
  ASSERT_EQ(kBlockSize - file.size(), kHeaderSize);
  writer.AddRecord(2, "spans", &file);
  EXPECT_EQ(static_cast<std::uint8_t>(file[kBlockSize - kHeaderSize + 6]), kFirstType);
  StringFile readable(file);
  RecordingReporter reporter;
  std::vector<Read> records = ReadAll(readable, file.size(), &reporter);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].payload, "spans");
  EXPECT_TRUE(reporter.skips.empty());
}

// Three records in the first block, one spanning into the third block, one after it.
struct Layout {
  std::string file;
  std::vector<std::uint64_t> offsets;
};

Layout MakeLayout() {
  Layout layout;
  Writer writer;
  const std::vector<size_t> sizes = {100, 200, 300, 2 * kBlockSize, 50};
  for (size_t i = 0; i < sizes.size(); ++i) {
    layout.offsets.push_back(layout.file.size());
    writer.AddRecord(i + 1, Payload(sizes[i], 'k'), &layout.file);
  }
  return layout;
}

std::vector<std::uint64_t> Sequences(const std::vector<Read>& records) {
  std::vector<std::uint64_t> out;
  for (const Read& r : records) out.push_back(r.sequence);
  return out;
}

TEST(LogReader, AFlippedBitLosesTheRestOfItsBlockOnlyAndIsReported) {
  Layout layout = MakeLayout();
  layout.file[layout.offsets[1] + kHeaderSize + 5] ^= 0x10;  // inside record 2's payload
  StringFile readable(layout.file);
  RecordingReporter reporter;
  std::vector<Read> records = ReadAll(readable, layout.file.size(), &reporter);
  // Records 2, 3 and the start of 4 shared the first block; 4 loses its FIRST fragment, so
  // its MIDDLE and LAST are reported too. Record 5 is read.
  EXPECT_EQ(Sequences(records), (std::vector<std::uint64_t>{1, 5}));
  ASSERT_FALSE(reporter.skips.empty());
  EXPECT_EQ(reporter.skips[0].offset, layout.offsets[1]);
  EXPECT_EQ(reporter.skips[0].bytes, kBlockSize - layout.offsets[1]);
  EXPECT_EQ(reporter.skips[0].reason, "checksum mismatch");
  EXPECT_EQ(reporter.Total(), layout.offsets[4] - layout.offsets[1]);
}

TEST(LogReader, DamageInTheMiddleOfAFragmentedRecordDropsItWholeAndReportsItsPieces) {
  Layout layout = MakeLayout();
  layout.file[kBlockSize + 100] ^= 0x01;  // record 4's MIDDLE fragment
  StringFile readable(layout.file);
  RecordingReporter reporter;
  std::vector<Read> records = ReadAll(readable, layout.file.size(), &reporter);
  EXPECT_EQ(Sequences(records), (std::vector<std::uint64_t>{1, 2, 3, 5}));
  // Its FIRST (cut off by damage), its MIDDLE's block, its LAST (an orphan).
  EXPECT_EQ(reporter.Total(), layout.offsets[4] - layout.offsets[3]);
}

TEST(LogReader, ATornTailIsNeitherReturnedNorReported) {
  Layout layout = MakeLayout();
  for (std::uint64_t cut : {layout.offsets[4] + 3, layout.offsets[4] + kHeaderSize + 10,
                            layout.offsets[3] + kBlockSize + 5}) {
    StringFile readable(layout.file.substr(0, cut));
    RecordingReporter reporter;
    std::vector<Read> records = ReadAll(readable, cut, &reporter);
    EXPECT_EQ(records.size(), cut > layout.offsets[4] ? 4u : 3u) << cut;
    EXPECT_TRUE(reporter.skips.empty()) << cut;
  }
}

TEST(LogReader, ARecordBeyondTheLimitIsReadOnceTheLimitReachesIt) {
  Layout layout = MakeLayout();
  StringFile readable(layout.file);
  RecordingReporter reporter;
  Reader reader(readable, &reporter, 0, layout.offsets[3] + 100, 1 << 20);
  LogRecord record;
  for (std::uint64_t expected = 1; expected <= 3; ++expected) {
    ASSERT_TRUE(reader.ReadRecord(&record));
    EXPECT_EQ(record.sequence, expected);
  }
  EXPECT_FALSE(reader.ReadRecord(&record));  // record 4 is only partly within the limit
  EXPECT_FALSE(reader.ReadRecord(&record));
  reader.ExtendLimit(layout.offsets[4]);
  ASSERT_TRUE(reader.ReadRecord(&record));
  EXPECT_EQ(record.sequence, 4u);
  EXPECT_EQ(record.payload, Payload(2 * kBlockSize, 'k'));
  EXPECT_FALSE(reader.ReadRecord(&record));
  reader.ExtendLimit(layout.file.size());
  ASSERT_TRUE(reader.ReadRecord(&record));
  EXPECT_EQ(record.sequence, 5u);
  EXPECT_TRUE(reporter.skips.empty());
}

// A reader that follows a growing file byte by byte sees what one reading it whole sees,
// damage included.
TEST(LogReader, FollowingAGrowingFileGivesWhatReadingItWholeGives) {
  Layout layout = MakeLayout();
  layout.file[layout.offsets[2] + 3] ^= 0x40;
  layout.file[kBlockSize * 2 + 40] ^= 0x02;
  StringFile readable(layout.file);
  RecordingReporter whole_reporter;
  std::vector<Read> whole = ReadAll(readable, layout.file.size(), &whole_reporter);

  RecordingReporter growing_reporter;
  Reader reader(readable, &growing_reporter, 0, 0, 1 << 20);
  std::vector<Read> growing;
  for (std::uint64_t limit = 0; limit <= layout.file.size(); limit += 97) {
    reader.ExtendLimit(limit);
    LogRecord record;
    while (reader.ReadRecord(&record)) {
      growing.push_back(
          {record.sequence, std::string(record.payload), record.offset, record.end_offset});
    }
  }
  reader.ExtendLimit(layout.file.size());
  LogRecord record;
  while (reader.ReadRecord(&record)) {
    growing.push_back(
        {record.sequence, std::string(record.payload), record.offset, record.end_offset});
  }
  EXPECT_EQ(Sequences(growing), Sequences(whole));
  EXPECT_EQ(growing_reporter.Total(), whole_reporter.Total());
  EXPECT_GT(whole_reporter.Total(), 0u);
}

TEST(LogReader, StartsAtARecordBoundary) {
  Layout layout = MakeLayout();
  StringFile readable(layout.file);
  for (size_t i = 0; i < layout.offsets.size(); ++i) {
    Reader reader(readable, nullptr, layout.offsets[i], layout.file.size(), 1 << 20);
    LogRecord record;
    ASSERT_TRUE(reader.ReadRecord(&record));
    EXPECT_EQ(record.sequence, i + 1);
  }
  // The end of a record that left only a trailer in its block.
  std::string file;
  Writer writer;
  writer.AddRecord(1, Payload(kBlockSize - kHeaderSize - 3, 'q'), &file);
  writer.AddRecord(2, "b", &file);
  StringFile trailer_file(file);
  Reader reader(trailer_file, nullptr, kBlockSize - 3, file.size(), 1 << 20);
  LogRecord record;
  ASSERT_TRUE(reader.ReadRecord(&record));
  EXPECT_EQ(record.sequence, 2u);
}

TEST(LogReader, AnUnreadableBlockIsSkippedAndReported) {
  Layout layout = MakeLayout();
  StringFile readable(layout.file);
  readable.failing_block_ = 1;  // record 4's MIDDLE fragment
  RecordingReporter reporter;
  std::vector<Read> records = ReadAll(readable, layout.file.size(), &reporter);
  EXPECT_EQ(Sequences(records), (std::vector<std::uint64_t>{1, 2, 3, 5}));
  ASSERT_FALSE(reporter.skips.empty());
  bool unreadable = false;
  for (const Skip& s : reporter.skips) unreadable |= s.reason.find("unreadable") == 0;
  EXPECT_TRUE(unreadable);
}

TEST(LogReader, RecordsOverTheSizeLimitAreSkippedWithoutHoldingThem) {
  Layout layout = MakeLayout();
  StringFile readable(layout.file);
  RecordingReporter reporter;
  std::vector<Read> records = ReadAll(readable, layout.file.size(), &reporter, 1000);
  EXPECT_EQ(Sequences(records), (std::vector<std::uint64_t>{1, 2, 3, 5}));
  EXPECT_EQ(reporter.Total(), layout.offsets[4] - layout.offsets[3]);
}

TEST(LogReader, RefusesFragmentsTheWriterNeverProduces) {
  struct Case {
    const char* name;
    std::string file;
  };
  const std::string filler(kBlockSize - 100 - 2 * kHeaderSize, 'f');
  std::vector<Case> cases = {
      {"first fragment that does not fill its block",
       Fragment(kFirstType, 1, "abc") + Fragment(kLastType, 1, "def")},
      {"last fragment without a first", Fragment(kLastType, 1, "orphan")},
      {"middle fragment without a first", Fragment(kMiddleType, 1, "orphan")},
      {"zero type", Fragment(kZeroType, 1, "zero")},
      {"type beyond the last", Fragment(9, 1, "nine")},
      {"continuation of another sequence",
       Fragment(kFirstType, 1, std::string(kBlockSize - kHeaderSize, 'a')) +
           Fragment(kLastType, 2, "b")},
      {"empty last fragment", Fragment(kFirstType, 1, std::string(kBlockSize - kHeaderSize, 'a')) +
                                  Fragment(kLastType, 1, "")},
      {"continuation not at a block start",
       Fragment(kFullType, 1, "x") + Fragment(kLastType, 1, "y")},
  };
  for (const Case& c : cases) {
    const std::string file = c.file + Fragment(kFullType, 7, "good");
    StringFile readable(file);
    RecordingReporter reporter;
    std::vector<Read> records = ReadAll(readable, file.size(), &reporter);
    ASSERT_FALSE(records.empty()) << c.name;
    EXPECT_EQ(records.back().sequence, 7u) << c.name;
    for (const Read& r : records) EXPECT_NE(r.sequence, 2u) << c.name;
    EXPECT_FALSE(reporter.skips.empty()) << c.name;
  }
}

TEST(LogReader, ALengthRunningPastItsBlockIsDamage) {
  std::string header = Fragment(kFullType, 1, "x");
  header[4] = static_cast<char>(0xff);
  header[5] = static_cast<char>(0xff);
  std::string file = header + std::string(kBlockSize, 'z');
  file.resize(kBlockSize);
  std::string next;
  Writer(kBlockSize).AddRecord(2, "after", &next);
  file += next;
  StringFile readable(file);
  RecordingReporter reporter;
  std::vector<Read> records = ReadAll(readable, file.size(), &reporter);
  EXPECT_EQ(Sequences(records), (std::vector<std::uint64_t>{2}));
  ASSERT_EQ(reporter.skips.size(), 1u);
  EXPECT_EQ(reporter.skips[0].bytes, kBlockSize);
  EXPECT_EQ(reporter.skips[0].reason, "fragment length runs past its block");
}

TEST(LogReader, ZeroedAndRandomBlocksYieldNothingButReports) {
  std::mt19937_64 random(7);
  std::string garbage(3 * kBlockSize + 123, '\0');
  for (char& c : garbage) c = static_cast<char>(random());
  for (const std::string& file : {std::string(2 * kBlockSize, '\0'), garbage}) {
    StringFile readable(file);
    RecordingReporter reporter;
    EXPECT_TRUE(ReadAll(readable, file.size(), &reporter).empty());
    EXPECT_GT(reporter.Total(), 0u);
    EXPECT_LE(reporter.Total(), file.size());
  }
  StringFile empty("");
  EXPECT_TRUE(ReadAll(empty, 0, nullptr).empty());
}

TEST(LogReader, AFileShorterThanItsLimitEndsWhereItEnds) {
  Layout layout = MakeLayout();
  StringFile readable(layout.file.substr(0, layout.offsets[3]));
  RecordingReporter reporter;
  std::vector<Read> records = ReadAll(readable, layout.file.size(), &reporter);
  EXPECT_EQ(Sequences(records), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_TRUE(reporter.skips.empty());
}

TEST(LogReader, StopsAtTheFirstRecordOlderThanItsSegment) {
  // A recycled file: records 500-502 written over the start of one that held 100-199.
  std::string old_file, file;
  Writer old_writer;
  for (int i = 0; i < 100; ++i) old_writer.AddRecord(100 + i, Payload(700, 'o'), &old_file);
  Writer writer;
  for (int i = 0; i < 3; ++i) writer.AddRecord(500 + i, Payload(700, 'n'), &file);
  // Cut where an old record begins, so that it is intact and only its sequence gives it away.
  Writer probe;
  std::string probe_file;
  while (probe_file.size() < file.size()) probe.AddRecord(1, Payload(700, 'o'), &probe_file);
  file.resize(probe_file.size(), '\0');
  file += old_file.substr(file.size());
  StringFile readable(file);
  RecordingReporter reporter;
  Reader reader(readable, &reporter, 0, file.size(), 1 << 20, 500);
  std::vector<std::uint64_t> sequences;
  LogRecord record;
  while (reader.ReadRecord(&record)) sequences.push_back(record.sequence);
  EXPECT_EQ(sequences, (std::vector<std::uint64_t>{500, 501, 502}));
  EXPECT_TRUE(reader.stale());
  EXPECT_FALSE(reader.ReadRecord(&record));  // for good
  // Without a lower bound the same bytes read on into the old records.
  EXPECT_GT(ReadAll(readable, file.size(), nullptr).size(), 3u);
}

}  // namespace
}  // namespace uplink::spool::framing
