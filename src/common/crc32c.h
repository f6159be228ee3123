// CRC32C (Castagnoli, iSCSI), as LevelDB uses to frame its log records.
//
// Computed with the SSE4.2 crc32 instruction when the CPU has it (chosen once at run time;
// three streams side by side over inputs of 3 KiB or more, about 2.5 times one stream),
// and with a slicing-by-8 table otherwise. Both give the same values (tests check).
#pragma once

#include <cstdint>
#include <string_view>

namespace uplink::crc32c {

// The CRC of `prefix` followed by `data`, given crc = Value(prefix).
std::uint32_t Extend(std::uint32_t crc, std::string_view data);

inline std::uint32_t Value(std::string_view data) { return Extend(0, data); }

// A CRC stored next to the data it covers is masked: the CRC of a string that contains
// embedded CRCs is otherwise weak (LevelDB's rationale).
constexpr std::uint32_t kMaskDelta = 0xa282ead8u;

inline std::uint32_t Mask(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

inline std::uint32_t Unmask(std::uint32_t masked) {
  std::uint32_t rotated = masked - kMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

// The two implementations, exposed so that tests can compare them.
std::uint32_t ExtendPortable(std::uint32_t crc, std::string_view data);
// Only valid when HardwareAvailable().
std::uint32_t ExtendHardware(std::uint32_t crc, std::string_view data);
bool HardwareAvailable();

}  // namespace uplink::crc32c
