// Protobuf's base-128 varints, as remote write's messages and the forwarder's queue records
// use them for lengths and integers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace uplink::console::remote_write {

inline void PutVarint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

// Reads a varint at `at`, advancing it; false when `bytes` ends first or the varint is longer
// than ten bytes.
inline bool GetVarint(std::string_view bytes, size_t& at, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= bytes.size()) return false;
    const auto byte = static_cast<std::uint8_t>(bytes[at++]);
    value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace uplink::console::remote_write
