// Reading /proc and /sys files: whole, bounded, and without stat (their sizes lie: most report
// 0 or 4096 whatever they hold).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

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

// One file read whole every cycle: into `out`, which is cleared first and keeps its capacity,
// so a buffer reused every cycle stops allocating once it is large enough. Reads cut short by
// signals are retried.
//
// On procfs the descriptor stays open between reads and each read starts at offset 0, where
// the kernel generates the file afresh: the same text as a new open, without the path lookup,
// open and close (most of what reading a small /proc file costs). Any other file (a test's
// fixture, a file replaced between cycles) is opened anew every time, and a failed read
// closes the descriptor, so the next read opens the path again.
class ProcFile {
 public:
  explicit ProcFile(std::string path) : path_(std::move(path)) {}
  ~ProcFile();
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  // Returns nullopt once the whole file is in `out`.
  [[nodiscard]] std::optional<ReadFailure> Read(std::size_t max_bytes, std::string& out);

  // For a mount table (/proc/PID/mountinfo): true when the kernel reports no mount event in
  // that namespace since the last Read (poll on the kept descriptor without POLLPRI, the way
  // libmount watches it). Generating the mount table is the dearest /proc read by far (about
  // 28 us where /proc/stat takes 7), and it seldom changes. A superblock change (a filesystem
  // the kernel turns read-only after an error) raises no event, so callers also read the
  // table again now and then. False when the table may have changed, and always for a file
  // that is not on procfs or whose last read failed: the caller then reads it again.
  bool MountTableUnchanged();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int kept_fd_ = -1;  // open only while the file is on procfs and reads of it work
};

}  // namespace uplink::agent::node
