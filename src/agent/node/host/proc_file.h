// Reading /proc and /sys files: whole, bounded, and without stat (their sizes lie: most report
// 0 or 4096 whatever they hold).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace uplink::agent::node {

// Caps on what one file may hold. /proc/stat grows with the CPU and interrupt counts (its
// "intr" line alone is tens of KiB on large machines); the rest are a few KiB.
inline constexpr std::size_t kLargeProcFileCap = 4u << 20;
inline constexpr std::size_t kSmallProcFileCap = 64u << 10;

// Why a file could not be read, as a Gap records it.
struct ReadFailure {
  int errno_value = 0;  // 0 when the file held more than its cap
  std::string error;    // strerror's text, or "holds more than the 65536-byte cap"
};

// Reads the whole of `path` into `out`, which is cleared first and keeps its capacity, so a
// buffer reused every cycle stops allocating once it is large enough. Retries reads cut short
// by signals. Returns nullopt once the file is read.
[[nodiscard]] std::optional<ReadFailure> ReadProcFile(const std::string& path,
                                                      std::size_t max_bytes, std::string& out);

}  // namespace uplink::agent::node
