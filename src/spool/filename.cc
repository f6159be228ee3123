#include "spool/filename.h"

#include <cinttypes>
#include <cstdio>

namespace uplink::spool {
namespace {

constexpr char kSegmentSuffix[] = ".seg";
constexpr char kRecycledSuffix[] = ".rseg";
constexpr char kFreeSuffix[] = ".free";
constexpr size_t kNumberDigits = 20;

std::string NumberedName(std::uint64_t number, const char* suffix) {
  char name[kNumberDigits + sizeof kRecycledSuffix];
  std::snprintf(name, sizeof name, "%020" PRIu64 "%s", number, suffix);
  return name;
}

// "00000000000000000042<suffix>" -> 42.
std::optional<std::uint64_t> ParseNumberedName(std::string_view name, std::string_view suffix) {
  if (name.size() != kNumberDigits + suffix.size() || name.substr(kNumberDigits) != suffix) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  for (char c : name.substr(0, kNumberDigits)) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (value == 0) return std::nullopt;
  return value;
}

}  // namespace

std::string SegmentFileName(std::uint64_t first_sequence, bool recycled) {
  return NumberedName(first_sequence, recycled ? kRecycledSuffix : kSegmentSuffix);
}

std::string FreeFileName(std::uint64_t number) { return NumberedName(number, kFreeSuffix); }

std::optional<SegmentFile> ParseSegmentFileName(std::string_view name) {
  if (auto first = ParseNumberedName(name, kSegmentSuffix)) return SegmentFile{*first, false};
  if (auto first = ParseNumberedName(name, kRecycledSuffix)) return SegmentFile{*first, true};
  return std::nullopt;
}

std::optional<std::uint64_t> ParseFreeFileName(std::string_view name) {
  return ParseNumberedName(name, kFreeSuffix);
}

std::string ParentDir(const std::string& dir) {
  const size_t slash = dir.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return dir.substr(0, slash);
}

}  // namespace uplink::spool
