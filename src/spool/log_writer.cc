#include "spool/log_writer.h"

#include <algorithm>

#include "common/crc32c.h"
#include "spool/coding.h"
#include "spool/log_format.h"

namespace uplink::spool::framing {

void Writer::AddRecord(std::uint64_t sequence, std::string_view record, std::string* out) {
  AddRecord(sequence, record, std::string_view(), out);
}

void Writer::AddRecord(std::uint64_t sequence, std::string_view head, std::string_view tail,
                       std::string* out) {
  std::string framing;
  std::vector<std::string_view> pieces;
  AddRecordPieces(sequence, head, tail, &framing, &pieces);
  size_t bytes = 0;
  for (std::string_view piece : pieces) bytes += piece.size();
  out->reserve(out->size() + bytes);
  for (std::string_view piece : pieces) out->append(piece);
}

void Writer::AddRecordPieces(std::uint64_t sequence, std::string_view head,
                             std::string_view tail, std::string* framing,
                             std::vector<std::string_view>* pieces) {
  const size_t length = head.size() + tail.size();
  // Reserved whole, so that the views into it stay valid while it is filled.
  framing->reserve(static_cast<size_t>(EncodedEnd(offset_, length) - offset_) - length);
  bool first = true;
  // An empty record still gets one (FULL) fragment.
  do {
    const size_t framing_start = framing->size();
    size_t left_in_block = kBlockSize - static_cast<size_t>(offset_ % kBlockSize);
    if (left_in_block < kHeaderSize) {  // the trailer
      framing->append(left_in_block, '\0');
      offset_ += left_in_block;
      left_in_block = kBlockSize;
    }
    const size_t fragment_length = std::min(head.size() + tail.size(), left_in_block - kHeaderSize);
    const bool last = fragment_length == head.size() + tail.size();
    const RecordType type = first && last ? kFullType
                            : first       ? kFirstType
                            : last        ? kLastType
                                          : kMiddleType;
    // The fragment's bytes: the rest of `head`, then the start of `tail`.
    const std::string_view from_head = head.substr(0, fragment_length);
    const std::string_view from_tail = tail.substr(0, fragment_length - from_head.size());
    char header[kHeaderSize];
    PutFixed16(header + 4, static_cast<std::uint16_t>(fragment_length));
    header[6] = static_cast<char>(type);
    PutFixed64(header + 7, sequence);
    std::uint32_t crc = crc32c::Value(std::string_view(header + 6, 1 + 8));
    crc = crc32c::Extend(crc32c::Extend(crc, from_head), from_tail);
    PutFixed32(header, crc32c::Mask(crc));
    framing->append(header, kHeaderSize);
    pieces->emplace_back(framing->data() + framing_start, framing->size() - framing_start);
    if (!from_head.empty()) pieces->push_back(from_head);
    if (!from_tail.empty()) pieces->push_back(from_tail);
    offset_ += kHeaderSize + fragment_length;
    head.remove_prefix(from_head.size());
    tail.remove_prefix(from_tail.size());
    first = false;
  } while (!head.empty() || !tail.empty());
}

std::uint64_t Writer::EncodedEnd(std::uint64_t file_offset, std::uint64_t length) {
  std::uint64_t offset = file_offset;
  do {
    std::uint64_t left_in_block = kBlockSize - offset % kBlockSize;
    if (left_in_block < kHeaderSize) {
      offset += left_in_block;
      left_in_block = kBlockSize;
    }
    const std::uint64_t fragment_length = std::min(length, left_in_block - kHeaderSize);
    offset += kHeaderSize + fragment_length;
    length -= fragment_length;
  } while (length > 0);
  return offset;
}

}  // namespace uplink::spool::framing
