// Spool segments are read back after crashes and disk damage: whatever bytes a segment holds,
// the reader must return only records that are byte for byte what the writer encodes for
// them, never report a byte twice or outside the file, and give the same answer to a reader
// that follows the file as it grows as to one that reads it whole. The search Open makes for
// intact fragments after damage (HoldsFragmentIn) must find every record the reader returns,
// from wherever it starts, and read nothing outside the range it is given.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "spool/log_reader.h"
#include "spool/log_writer.h"

namespace {

using uplink::spool::ReadableFile;
using uplink::spool::framing::HoldsFragmentIn;
using uplink::spool::framing::LogRecord;
using uplink::spool::framing::Reader;
using uplink::spool::framing::Reporter;
using uplink::spool::framing::Writer;

constexpr size_t kMaxRecord = 256 << 10;

class BytesFile final : public ReadableFile {
 public:
  explicit BytesFile(std::string_view bytes) : bytes_(bytes) {}
  uplink::Result<std::string_view> Read(std::uint64_t offset, size_t n,
                                        char* scratch) const override {
    if (offset >= bytes_.size()) return std::string_view(scratch, 0);
    const size_t count = std::min<std::uint64_t>(n, bytes_.size() - offset);
    std::memcpy(scratch, bytes_.data() + offset, count);
    return std::string_view(scratch, count);
  }

 private:
  std::string_view bytes_;
};

class RangeReporter final : public Reporter {
 public:
  void Corruption(std::uint64_t offset, std::uint64_t bytes, std::string_view reason) override {
    FUZZ_CHECK(bytes > 0);
    FUZZ_CHECK(!reason.empty());
    ranges.emplace_back(offset, offset + bytes);
    total += bytes;
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // [begin, end)
  std::uint64_t total = 0;
};

struct Seen {
  std::uint64_t sequence;
  std::uint64_t offset;
  std::uint64_t end_offset;
};

std::vector<Seen> Drain(Reader& reader, std::string_view bytes,
                        std::vector<std::pair<std::uint64_t, std::uint64_t>>* ranges) {
  std::vector<Seen> seen;
  LogRecord record;
  while (reader.ReadRecord(&record)) {
    FUZZ_CHECK(record.end_offset <= bytes.size());
    FUZZ_CHECK(record.offset < record.end_offset);
    FUZZ_CHECK(record.payload.size() <= kMaxRecord);
    std::string encoded;
    Writer writer(record.offset);
    writer.AddRecord(record.sequence, record.payload, &encoded);
    FUZZ_CHECK(writer.offset() == record.end_offset);
    FUZZ_CHECK(bytes.substr(record.offset, record.end_offset - record.offset) == encoded);
    seen.push_back({record.sequence, record.offset, record.end_offset});
    ranges->emplace_back(record.offset, record.end_offset);
  }
  return seen;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const BytesFile file(bytes);

  RangeReporter whole_reporter;
  Reader whole_reader(file, &whole_reporter, 0, size, kMaxRecord);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> used;
  const std::vector<Seen> whole = Drain(whole_reader, bytes, &used);
  used.insert(used.end(), whole_reporter.ranges.begin(), whole_reporter.ranges.end());
  std::sort(used.begin(), used.end());
  for (size_t i = 0; i < used.size(); ++i) {
    FUZZ_CHECK(used[i].second <= size);
    if (i > 0) FUZZ_CHECK(used[i - 1].second <= used[i].first);  // records and skips never overlap
  }

  // The same file appearing a few bytes at a time (the step comes from the input).
  const std::uint64_t step = size == 0 ? 1 : 1 + (data[0] * 131u) % 8192;
  RangeReporter growing_reporter;
  Reader growing_reader(file, &growing_reporter, 0, 0, kMaxRecord);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ignored;
  std::vector<Seen> growing;
  for (std::uint64_t limit = 0;; limit = std::min<std::uint64_t>(limit + step, size)) {
    growing_reader.ExtendLimit(limit);
    for (const Seen& s : Drain(growing_reader, bytes, &ignored)) growing.push_back(s);
    if (limit == size) break;
  }
  FUZZ_CHECK(growing.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    FUZZ_CHECK(growing[i].sequence == whole[i].sequence);
    FUZZ_CHECK(growing[i].offset == whole[i].offset);
    FUZZ_CHECK(growing[i].end_offset == whole[i].end_offset);
  }
  FUZZ_CHECK(growing_reporter.total == whole_reporter.total);

  for (const Seen& s : whole) {
    FUZZ_CHECK(HoldsFragmentIn(file, s.offset, size, s.sequence, s.sequence));
    FUZZ_CHECK(!HoldsFragmentIn(file, s.offset, size, s.sequence + 1, s.sequence));  // empty
  }
  // Any range and any sequences, from the input: no read outside the file, no crash.
  if (size >= 2) {
    const std::uint64_t from = (data[size - 1] * 257u + data[size - 2]) % (size + 1);
    (void)HoldsFragmentIn(file, from, size, 0, UINT64_MAX);
  }
  return 0;
}
