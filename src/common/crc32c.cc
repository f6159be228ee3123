#include "common/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace uplink::crc32c {
namespace {

// The reflected Castagnoli polynomial.
constexpr std::uint32_t kPolynomial = 0x82f63b78u;

// tables[k][b]: the CRC of byte b followed by k zero bytes, for slicing by 8.
using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables tables{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
    tables[0][b] = crc;
  }
  for (std::uint32_t b = 0; b < 256; ++b) {
    for (size_t k = 1; k < 8; ++k) {
      std::uint32_t previous = tables[k - 1][b];
      tables[k][b] = (previous >> 8) ^ tables[0][previous & 0xff];
    }
  }
  return tables;
}

constexpr Tables kTables = MakeTables();

inline std::uint64_t LoadLittleEndian64(const unsigned char* p) {
  std::uint64_t value;
  std::memcpy(&value, p, sizeof value);
  if constexpr (std::endian::native == std::endian::big) value = __builtin_bswap64(value);
  return value;
}

bool DetectHardware() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

}  // namespace

std::uint32_t ExtendPortable(std::uint32_t crc, std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  std::uint32_t l = ~crc;
  for (; n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0; --n, ++p) {
    l = kTables[0][(l ^ *p) & 0xff] ^ (l >> 8);
  }
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word = LoadLittleEndian64(p) ^ l;
    l = kTables[7][word & 0xff] ^ kTables[6][(word >> 8) & 0xff] ^ kTables[5][(word >> 16) & 0xff] ^
        kTables[4][(word >> 24) & 0xff] ^ kTables[3][(word >> 32) & 0xff] ^
        kTables[2][(word >> 40) & 0xff] ^ kTables[1][(word >> 48) & 0xff] ^ kTables[0][word >> 56];
  }
  for (; n > 0; --n, ++p) l = kTables[0][(l ^ *p) & 0xff] ^ (l >> 8);
  return ~l;
}

#if defined(__x86_64__)
namespace {

// The crc32 instruction takes three cycles but can start one each cycle, so the hardware path
// runs three CRCs side by side over consecutive stretches and then joins them. The CRC's state
// (before the final inversion) is linear: after a stretch X and then a stretch Y of kStretch
// bytes it is Shift(the state after X) ^ (the state after Y from zero), where Shift is the
// state's update by kStretch zero bytes, a linear map applied as four byte tables.
constexpr size_t kStretch = 1024;
using ShiftTables = std::array<std::array<std::uint32_t, 256>, 4>;

ShiftTables MakeShiftTables() {
  std::array<std::uint32_t, 32> bit_images{};
  for (int bit = 0; bit < 32; ++bit) {
    std::uint32_t state = 1u << bit;
    for (size_t i = 0; i < kStretch; ++i) state = kTables[0][state & 0xff] ^ (state >> 8);
    bit_images[bit] = state;
  }
  ShiftTables tables{};
  for (int k = 0; k < 4; ++k) {
    for (std::uint32_t b = 0; b < 256; ++b) {
      for (int bit = 0; bit < 8; ++bit) {
        if ((b >> bit) & 1) tables[k][b] ^= bit_images[8 * k + bit];
      }
    }
  }
  return tables;
}

inline std::uint32_t Shift(const ShiftTables& tables, std::uint32_t state) {
  return tables[0][state & 0xff] ^ tables[1][(state >> 8) & 0xff] ^
         tables[2][(state >> 16) & 0xff] ^ tables[3][state >> 24];
}

}  // namespace

__attribute__((target("sse4.2"))) std::uint32_t ExtendHardware(std::uint32_t crc,
                                                               std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  std::uint64_t l = ~crc;
  for (; n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0; --n, ++p) {
    l = _mm_crc32_u8(static_cast<std::uint32_t>(l), *p);
  }
  if (n >= 3 * kStretch) {
    static const ShiftTables shift = MakeShiftTables();
    for (; n >= 3 * kStretch; n -= 3 * kStretch, p += 3 * kStretch) {
      std::uint64_t a = l, b = 0, c = 0;
      for (size_t i = 0; i < kStretch; i += 8) {
        a = _mm_crc32_u64(a, LoadLittleEndian64(p + i));
        b = _mm_crc32_u64(b, LoadLittleEndian64(p + kStretch + i));
        c = _mm_crc32_u64(c, LoadLittleEndian64(p + 2 * kStretch + i));
      }
      l = Shift(shift, Shift(shift, static_cast<std::uint32_t>(a)) ^ static_cast<std::uint32_t>(b)) ^
          static_cast<std::uint32_t>(c);
    }
  }
  for (; n >= 8; n -= 8, p += 8) l = _mm_crc32_u64(l, LoadLittleEndian64(p));
  for (; n > 0; --n, ++p) l = _mm_crc32_u8(static_cast<std::uint32_t>(l), *p);
  return ~static_cast<std::uint32_t>(l);
}
#else
std::uint32_t ExtendHardware(std::uint32_t crc, std::string_view data) {
  return ExtendPortable(crc, data);
}
#endif

bool HardwareAvailable() {
  static const bool available = DetectHardware();
  return available;
}

std::uint32_t Extend(std::uint32_t crc, std::string_view data) {
  return HardwareAvailable() ? ExtendHardware(crc, data) : ExtendPortable(crc, data);
}

}  // namespace uplink::crc32c
