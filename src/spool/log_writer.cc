#include "spool/log_writer.h"

#include <algorithm>

#include "common/crc32c.h"
#include "spool/coding.h"
#include "spool/log_format.h"

namespace uplink::spool::framing {

void Writer::AddRecord(std::uint64_t sequence, std::string_view record, std::string* out) {
  bool first = true;
  // An empty record still gets one (FULL) fragment.
  do {
    size_t left_in_block = kBlockSize - static_cast<size_t>(offset_ % kBlockSize);
    if (left_in_block < kHeaderSize) {  // the trailer
      out->append(left_in_block, '\0');
      offset_ += left_in_block;
      left_in_block = kBlockSize;
    }
    const size_t fragment_length = std::min(record.size(), left_in_block - kHeaderSize);
    const bool last = fragment_length == record.size();
    const RecordType type = first && last ? kFullType
                            : first       ? kFirstType
                            : last        ? kLastType
                                          : kMiddleType;
    char header[kHeaderSize];
    PutFixed16(header + 4, static_cast<std::uint16_t>(fragment_length));
    header[6] = static_cast<char>(type);
    PutFixed64(header + 7, sequence);
    std::uint32_t crc = crc32c::Value(std::string_view(header + 6, 1 + 8));
    crc = crc32c::Extend(crc, record.substr(0, fragment_length));
    PutFixed32(header, crc32c::Mask(crc));
    out->append(header, kHeaderSize);
    out->append(record.data(), fragment_length);
    offset_ += kHeaderSize + fragment_length;
    record.remove_prefix(fragment_length);
    first = false;
  } while (!record.empty());
}

}  // namespace uplink::spool::framing
