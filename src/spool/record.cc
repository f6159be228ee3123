#include "spool/record.h"

#include <algorithm>
#include <chrono>

#include "spool/coding.h"

namespace uplink::spool {

void EncodeAppendTime(WallTime appended_at, char (&out)[kAppendTimeBytes]) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(appended_at.time_since_epoch());
  PutFixed64(out, static_cast<std::uint64_t>(micros.count()));
}

std::optional<DecodedRecord> DecodeRecord(std::string_view stored) {
  if (stored.size() < kAppendTimeBytes) return std::nullopt;
  const std::chrono::microseconds micros(static_cast<std::int64_t>(GetFixed64(stored.data())));
  return DecodedRecord{WallTime(std::chrono::duration_cast<WallTime::duration>(micros)),
                       stored.substr(kAppendTimeBytes)};
}

std::uint64_t EstimatePayloadBytes(std::uint64_t size, std::uint64_t records,
                                   std::uint64_t waiting) {
  if (records == 0 || waiting == 0) return 0;
  const unsigned __int128 framing = static_cast<unsigned __int128>(records) * kRecordOverhead;
  if (size <= framing) return 0;
  const unsigned __int128 payload = size - framing;
  return static_cast<std::uint64_t>(payload * std::min(waiting, records) / records);
}

}  // namespace uplink::spool
