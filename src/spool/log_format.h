// The framing of a spool segment file, modelled on LevelDB's log format (db/log_format.h)
// with a sequence number in every header.
//
// A file is a sequence of 32 KiB blocks. A record is written as one or more fragments, each
// a header followed by that many bytes of the record:
//
//   masked CRC32C (4) | length (2) | type (1) | sequence (8)      little endian, 15 bytes
//
// The CRC covers the type, the sequence and the fragment's bytes. A record that does not fit
// in what is left of a block is split: FIRST fills the block, MIDDLE fragments fill whole
// blocks, LAST ends it; FULL is a record in one fragment. Every fragment of a record carries
// the record's sequence. When fewer than 15 bytes remain in a block they are zero-filled
// (the trailer) and the next fragment starts the next block, so a reader that loses its
// place after damage finds it again at the next block boundary.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uplink::spool::framing {

enum RecordType : std::uint8_t {
  kZeroType = 0,  // never written: zero-filled space
  kFullType = 1,
  kFirstType = 2,
  kMiddleType = 3,
  kLastType = 4,
};
constexpr std::uint8_t kMaxRecordType = kLastType;

constexpr size_t kBlockSize = 32768;
constexpr size_t kHeaderSize = 4 + 2 + 1 + 8;

}  // namespace uplink::spool::framing
