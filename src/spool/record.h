// What a record holds in a segment (its framing is log_format.h): its append time, 8 bytes of
// little-endian Unix microseconds, then the payload.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/time.h"
#include "spool/log_format.h"

namespace uplink::spool {

constexpr size_t kAppendTimeBytes = 8;
// Framing a record costs at least this much besides its payload (estimates of dropped bytes,
// and the sequence numbers damage may have held).
constexpr std::uint64_t kRecordOverhead = framing::kHeaderSize + kAppendTimeBytes;

void EncodeAppendTime(WallTime appended_at, char (&out)[kAppendTimeBytes]);

struct DecodedRecord {
  WallTime appended_at;
  std::string_view payload;  // points into what was decoded
};

// nullopt when `stored` is too short to hold an append time.
std::optional<DecodedRecord> DecodeRecord(std::string_view stored);

// The payload bytes of the `waiting` last records of a segment of `records` records and
// `size` bytes, estimated from its size less the framing of each record (spool.h).
std::uint64_t EstimatePayloadBytes(std::uint64_t size, std::uint64_t records,
                                   std::uint64_t waiting);

}  // namespace uplink::spool
