// Parsers for the /proc files the node role reads: text in, the sample's structs out. Pure
// functions, so the fuzzer and the tests drive them without a /proc.
//
// The text is whatever the file held, hostile or not. A malformed line (too few fields, a
// field that is not a number, a number that overflows 64 bits, an embedded NUL, a duplicate)
// is skipped and reported, and the rest of the file still counts. A file is refused as a
// whole only when nothing usable is left (no "cpu" line in /proc/stat, an empty meminfo).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/node/sample.h"
#include "common/status.h"

namespace uplink::agent::node {

// A skipped line and why. Lines count from 1.
struct LineProblem {
  std::size_t line = 0;
  std::string reason;
};

// Only the first problems are kept, so a file of garbage cannot grow the list without bound;
// `skipped_lines` counts them all.
inline constexpr std::size_t kMaxLineProblems = 8;

template <typename T>
struct Parsed {
  T value;
  std::vector<LineProblem> problems;
  std::size_t skipped_lines = 0;
};

// Names longer than this are refused: interface names are at most 15 bytes and block device
// names 31, so a longer one is not the kernel's.
inline constexpr std::size_t kMaxDeviceName = 253;
// Mount points and mount sources are paths: PATH_MAX.
inline constexpr std::size_t kMaxMountPath = 4096;

// /proc/stat: the "cpu" and "cpuN" lines (ticks of USER_HZ = 100 turned into seconds), ctxt,
// the first field of intr, processes, procs_running, procs_blocked and btime. A CPU line needs
// user, nice, system and idle; the later modes are 0 on kernels that do not print them.
Result<Parsed<CpuStats>> ParseProcStat(std::string_view text);

// /proc/meminfo: every "Name: value [kB]" line, kB scaled to bytes.
Result<Parsed<Memory>> ParseMeminfo(std::string_view text);

// /proc/loadavg: the first three figures.
Result<Load> ParseLoadavg(std::string_view text);

// /proc/uptime: the first figure, seconds since boot.
Result<double> ParseUptime(std::string_view text);

// One /proc/pressure/<resource> file. "full" is absent from the cpu file before Linux 5.13.
struct PressureFile {
  std::optional<PressureLine> some, full;
};
// Lines of other kinds are ignored, so a newer kernel may add some.
Result<Parsed<PressureFile>> ParsePressure(std::string_view text);

// /proc/<pid>/net/dev: two header lines, then "name: 16 counters" per interface. The name
// ends at the last ':' of the line (names are printed right-aligned, and the counters never
// hold one). Counters past the 16th are ignored.
Result<Parsed<std::vector<NetDevice>>> ParseNetDev(std::string_view text);

// /proc/diskstats: "major minor name" and 11 counters, 15 from Linux 4.18 (discards) and 17
// from 5.5 (flushes). A line with fewer than 11 counters is skipped; extra counters of a
// newer kernel are ignored.
Result<Parsed<std::vector<DiskStats>>> ParseDiskstats(std::string_view text);

// One line of /proc/<pid>/mountinfo, with the kernel's escapes (\040 \011 \012 \134) undone.
struct Mount {
  std::string mount_point;
  std::string fstype;  // "ext4", "fuse.sshfs"
  std::string source;  // "/dev/nvme0n1p1", "tmpfs", "server:/export"
  bool readonly = false;  // "ro" among the mount's options or its superblock's
};
// Fields: mount id, parent id, major:minor, root, mount point, options, optional fields up
// to "-", then fstype, source and superblock options. Refused when no line is usable (every
// mount namespace has a root).
Result<Parsed<std::vector<Mount>>> ParseMountinfo(std::string_view text);

}  // namespace uplink::agent::node
