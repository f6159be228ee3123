#include "spool/log_reader.h"

#include <algorithm>
#include <cstring>

#include "common/crc32c.h"
#include "spool/coding.h"
#include "spool/log_format.h"

namespace uplink::spool::framing {

Reader::Reader(const ReadableFile& file, Reporter* reporter, std::uint64_t start_offset,
               std::uint64_t limit, size_t max_record_bytes, std::uint64_t min_sequence)
    : file_(file),
      reporter_(reporter),
      max_record_bytes_(max_record_bytes),
      min_sequence_(min_sequence),
      limit_(limit),
      block_(new char[kBlockSize]),
      block_start_(start_offset - start_offset % kBlockSize),
      block_length_(static_cast<size_t>(start_offset % kBlockSize)),
      position_(block_length_) {}

void Reader::ExtendLimit(std::uint64_t limit) { limit_ = std::max(limit_, limit); }

void Reader::Report(std::uint64_t offset, std::uint64_t bytes, std::string_view reason) {
  if (reporter_ != nullptr && bytes > 0) reporter_->Corruption(offset, bytes, reason);
}

void Reader::BreakChain(std::string_view reason) {
  if (!in_chain_) return;
  Report(chain_offset_, chain_end_ - chain_offset_, reason);
  in_chain_ = false;
  chain_.clear();
}

void Reader::Damage(std::string_view reason) {
  BreakChain("record cut off by damage");
  skipping_ = true;
  reported_until_ = block_start_ + position_;
  skip_reason_ = reason;
}

bool Reader::Refill() {
  const std::uint64_t loaded_end = block_start_ + block_length_;
  const std::uint64_t wanted_end = std::min(block_start_ + kBlockSize, limit_);
  if (wanted_end <= loaded_end) return false;
  const size_t wanted = static_cast<size_t>(wanted_end - loaded_end);
  char* target = block_.get() + block_length_;
  Result<std::string_view> read = file_.Read(loaded_end, wanted, target);
  if (!read.ok()) {
    Damage("unreadable: " + read.status().message());
    return true;
  }
  if (read->data() != target) std::memmove(target, read->data(), read->size());
  block_length_ += read->size();
  // A file shorter than the limit claimed (shrunk underneath us): its end is the limit.
  if (read->size() < wanted) limit_ = block_start_ + block_length_;
  return !read->empty();
}

bool HoldsFragmentIn(const ReadableFile& file, std::uint64_t from, std::uint64_t to,
                     std::uint64_t min_sequence, std::uint64_t max_sequence) {
  std::unique_ptr<char[]> block(new char[kBlockSize]);
  // Fragments never cross a block, so each block is searched alone.
  for (std::uint64_t block_start = from - from % kBlockSize; block_start < to;
       block_start += kBlockSize) {
    Result<std::string_view> read = file.Read(
        block_start, static_cast<size_t>(std::min<std::uint64_t>(kBlockSize, to - block_start)),
        block.get());
    if (!read.ok()) return false;
    const std::string_view bytes = *read;
    const size_t first = block_start < from ? static_cast<size_t>(from - block_start) : 0;
    for (size_t at = first; at + kHeaderSize <= bytes.size(); ++at) {
      const char* header = bytes.data() + at;
      // The cheap tests first: a checksum is computed only where the rest already fits.
      const std::uint64_t sequence = GetFixed64(header + 7);
      if (sequence < min_sequence || sequence > max_sequence) continue;
      const auto type = static_cast<std::uint8_t>(header[6]);
      if (type == kZeroType || type > kMaxRecordType) continue;
      const size_t length = GetFixed16(header + 4);
      if (at + kHeaderSize + length > bytes.size()) continue;
      if (crc32c::Unmask(GetFixed32(header)) ==
          crc32c::Value(std::string_view(header + 6, 1 + 8 + length))) {
        return true;
      }
    }
    if (bytes.size() < kBlockSize) return false;
  }
  return false;
}

bool Reader::ReadRecord(LogRecord* record) {
  while (!stale_) {
    const std::uint64_t block_end = block_start_ + kBlockSize;
    if (skipping_) {
      const std::uint64_t reachable = std::min(block_end, limit_);
      if (reachable > reported_until_) {
        Report(reported_until_, reachable - reported_until_, skip_reason_);
        reported_until_ = reachable;
      }
      if (limit_ < block_end) return false;
      skipping_ = false;
      block_start_ = block_end;
      block_length_ = position_ = 0;
      continue;
    }
    if (kBlockSize - position_ < kHeaderSize) {  // the zero-filled trailer
      if (limit_ < block_end) return false;
      block_start_ = block_end;
      block_length_ = position_ = 0;
      continue;
    }
    if (block_length_ - position_ < kHeaderSize) {
      if (!Refill()) return false;
      continue;
    }
    const char* header = block_.get() + position_;
    const size_t length = GetFixed16(header + 4);
    const auto type = static_cast<std::uint8_t>(header[6]);
    const std::uint64_t sequence = GetFixed64(header + 7);
    if (position_ + kHeaderSize + length > kBlockSize) {
      Damage("fragment length runs past its block");
      continue;
    }
    if (position_ + kHeaderSize + length > block_length_) {
      if (!Refill()) return false;
      continue;
    }
    const std::uint32_t expected_crc = crc32c::Unmask(GetFixed32(header));
    const std::uint32_t actual_crc = crc32c::Value(std::string_view(header + 6, 1 + 8 + length));
    if (actual_crc != expected_crc) {
      Damage("checksum mismatch");
      continue;
    }
    const std::string_view fragment(header + kHeaderSize, length);
    const std::uint64_t fragment_offset = block_start_ + position_;
    const std::uint64_t fragment_end = fragment_offset + kHeaderSize + length;
    const bool fills_block = position_ + kHeaderSize + length == kBlockSize;
    const bool starts_block = position_ == 0;
    position_ += kHeaderSize + length;
    // From here on the checksum vouches for the length: a bad fragment is skipped alone.
    if (type == kZeroType || type > kMaxRecordType) {
      BreakChain("record interrupted by a fragment of unknown type");
      Report(fragment_offset, fragment_end - fragment_offset,
             "unknown fragment type " + std::to_string(type));
      continue;
    }

    if (sequence < min_sequence_) {
      // The previous use of a recycled file: nothing after it was written by this one.
      BreakChain("record cut off by older data");
      stale_ = true;
      return false;
    }

    // A fragment that cannot belong to the record being reassembled ends it first.
    const bool continues_chain = (type == kMiddleType || type == kLastType) && in_chain_ &&
                                 sequence == chain_sequence_ && starts_block;
    if (!continues_chain) BreakChain("record without its last fragment");

    // What the writer never produces is damage: a continuation that does not start a block
    // or belongs to no record, a FIRST or MIDDLE that does not fill its block, an empty
    // LAST. Refusing these keeps every returned record byte-identical to its encoding.
    bool well_formed = true;
    switch (type) {
      case kFullType:
        break;
      case kFirstType:
        well_formed = fills_block;
        break;
      case kMiddleType:
        well_formed = continues_chain && fills_block;
        break;
      case kLastType:
        well_formed = continues_chain && length > 0;
        break;
    }
    if (!well_formed) {
      BreakChain("record with a malformed fragment");
      Report(fragment_offset, fragment_end - fragment_offset, "malformed fragment");
      continue;
    }
    if (type == kFullType) {
      if (length > max_record_bytes_) {
        Report(fragment_offset, fragment_end - fragment_offset, "record over the size limit");
        continue;
      }
      *record = LogRecord{sequence, fragment, fragment_offset, fragment_end};
      return true;
    }
    if (type == kFirstType) {
      in_chain_ = true;
      chain_sequence_ = sequence;
      chain_offset_ = fragment_offset;
      chain_.clear();
    }
    chain_end_ = fragment_end;
    if (chain_.size() + length > max_record_bytes_) {
      BreakChain("record over the size limit");
      continue;
    }
    chain_.append(fragment);
    if (type == kLastType) {
      in_chain_ = false;
      *record = LogRecord{sequence, chain_, chain_offset_, fragment_end};
      return true;
    }
  }
  return false;
}

}  // namespace uplink::spool::framing
