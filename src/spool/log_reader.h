// Reads records framed by log::Writer from a segment file, one block at a time (memory: one
// block plus the record being reassembled), tolerating any damage.
//
// Damage (a checksum mismatch, an impossible length or type, a fragment chain that breaks
// off, an unreadable block) is reported with its byte count and reason, and reading resumes
// at the next block boundary. A record whose fragments are not all intact is dropped whole.
// Reading stops at `limit` (the bytes known to be complete: the durable end of a segment that
// is still being appended to, or its size); a record that extends past it is neither returned
// nor reported, so that a reader can wait for it (ExtendLimit) and a torn tail at the end of
// a file is not mistaken for damage.
//
// Reading also stops, for good, at an intact fragment whose sequence is below
// `min_sequence`: a recycled segment file still holds its previous records after the new
// ones, and those all have lower sequences (stale() then says so).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "spool/file_system.h"

namespace uplink::spool::framing {

struct LogRecord {
  std::uint64_t sequence = 0;
  std::string_view payload;      // valid until the next ReadRecord
  std::uint64_t offset = 0;      // where its first fragment starts in the file
  std::uint64_t end_offset = 0;  // just after its last fragment
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  // `bytes` bytes starting at file offset `offset` were skipped.
  virtual void Corruption(std::uint64_t offset, std::uint64_t bytes, std::string_view reason) = 0;
};

// Whether an intact fragment (its checksum right, its type known) with a sequence in
// [min_sequence, max_sequence] starts anywhere in [from, to) of `file`, whatever lies around
// it: what tells records written after damage from the remains of a torn write, which only
// the last write leaves. A read error counts as none found.
bool HoldsFragmentIn(const ReadableFile& file, std::uint64_t from, std::uint64_t to,
                     std::uint64_t min_sequence, std::uint64_t max_sequence);

class Reader {
 public:
  // Starts at `start_offset`, which must be 0 or the end offset of a record. `reporter` may
  // be null. Records longer than `max_record_bytes` are treated as damage, which bounds the
  // memory a damaged or hostile file can make the reader use.
  Reader(const ReadableFile& file, Reporter* reporter, std::uint64_t start_offset,
         std::uint64_t limit, size_t max_record_bytes, std::uint64_t min_sequence = 0);

  // Lets the reader go on to `limit` (never moves it back).
  void ExtendLimit(std::uint64_t limit);

  // The next intact record, or false when no further complete record lies before the limit.
  bool ReadRecord(LogRecord* record);

  // Whether reading stopped at a stale fragment (one below min_sequence).
  bool stale() const { return stale_; }

 private:
  // Loads more of the current block (up to the limit); false when there is nothing more.
  bool Refill();
  // Skips the rest of the current block from the read position, reporting it.
  void Damage(std::string_view reason);
  // Reports and forgets a partly reassembled record.
  void BreakChain(std::string_view reason);
  void Report(std::uint64_t offset, std::uint64_t bytes, std::string_view reason);

  const ReadableFile& file_;
  Reporter* const reporter_;
  const size_t max_record_bytes_;
  const std::uint64_t min_sequence_;
  bool stale_ = false;
  std::uint64_t limit_;

  std::unique_ptr<char[]> block_;
  std::uint64_t block_start_ = 0;  // file offset of block_[0]
  size_t block_length_ = 0;        // bytes of the block loaded
  size_t position_ = 0;            // next unparsed byte within the block

  // After damage: the rest of the block is skipped; bytes are reported as the limit reaches
  // them, so a reader that waits reports the same bytes as one that reads a finished file.
  bool skipping_ = false;
  std::uint64_t reported_until_ = 0;
  std::string skip_reason_;

  // The record being reassembled from fragments.
  bool in_chain_ = false;
  std::uint64_t chain_sequence_ = 0;
  std::uint64_t chain_offset_ = 0;
  std::uint64_t chain_end_ = 0;
  std::string chain_;
};

}  // namespace uplink::spool::framing
