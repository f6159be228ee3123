// The names of the files in a spool directory (LevelDB's db/filename.h). Anything else found
// there (temporary files, editor backups, directories) is not the spool's and is left alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace uplink::spool {

constexpr char kStateFileName[] = "STATE";
constexpr char kLockFileName[] = "LOCK";

// "<20-digit first sequence>.seg", or ".rseg" for a segment written into a recycled file
// (its previous records follow the new ones).
std::string SegmentFileName(std::uint64_t first_sequence, bool recycled);

// "<20-digit number>.free": a consumed segment's file kept for reuse, still named by its old
// first sequence.
std::string FreeFileName(std::uint64_t number);

struct SegmentFile {
  std::uint64_t first = 0;
  bool recycled = false;
};

// What SegmentFileName and FreeFileName make, read back; nullopt for anything else (LOCK,
// STATE, another length, a non-digit, a number of 0 or one that overflows).
std::optional<SegmentFile> ParseSegmentFileName(std::string_view name);
std::optional<std::uint64_t> ParseFreeFileName(std::string_view name);

// The directory that holds `dir` ("." for a relative name without a slash).
std::string ParentDir(const std::string& dir);

}  // namespace uplink::spool
