// Fixed-width little-endian integers, as the spool's files store them (LevelDB's
// util/coding.h): segment fragment headers, record append times and STATE slots.
#pragma once

#include <cstdint>

namespace uplink::spool {

inline void PutFixed16(char* out, std::uint16_t value) {
  out[0] = static_cast<char>(value & 0xff);
  out[1] = static_cast<char>(value >> 8);
}

inline void PutFixed32(char* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

inline void PutFixed64(char* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

inline std::uint16_t GetFixed16(const char* p) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(p[0]) |
                                    (static_cast<unsigned char>(p[1]) << 8));
}

inline std::uint32_t GetFixed32(const char* p) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

inline std::uint64_t GetFixed64(const char* p) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

}  // namespace uplink::spool
