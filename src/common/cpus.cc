#include "common/cpus.h"

#include <sched.h>

#include <algorithm>
#include <string>

#include "common/files.h"
#include "common/text.h"

namespace uplink {
namespace {

// The kernel's PATH_MAX.
constexpr size_t kMaxCgroupPathBytes = 4096;
// Of a cgroup nested deeper, only this many levels above it are read.
constexpr int kMaxCgroupDepth = 64;

}  // namespace

std::optional<int> ParseCgroupCpuMax(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view quota_text = text.substr(0, space);
  if (quota_text == "max") return std::nullopt;
  // Quotas and periods are microseconds; the kernel caps a period at one second.
  const std::optional<std::uint64_t> quota = ParseDecimal(quota_text, 1, 1ull << 40);
  const std::optional<std::uint64_t> period = ParseDecimal(text.substr(space + 1), 1, 1'000'000);
  if (!quota || !period) return std::nullopt;
  const std::uint64_t cpus = (*quota + *period - 1) / *period;
  return static_cast<int>(std::min<std::uint64_t>(cpus, 1 << 20));
}

std::optional<std::string> ParseProcSelfCgroup(std::string_view text,
                                               std::string_view v1_controller) {
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    // "ID:CONTROLLERS:PATH"; the path may itself hold colons.
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, first);
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    if (v1_controller.empty()) {
      if (id != "0" || !controllers.empty()) continue;
    } else {
      bool listed = false;
      for (std::string_view rest = controllers; !rest.empty() && !listed;) {
        const size_t comma = std::min(rest.find(','), rest.size());
        listed = rest.substr(0, comma) == v1_controller;
        rest.remove_prefix(std::min(comma + 1, rest.size()));
      }
      if (id == "0" || !listed) continue;
    }
    const std::string_view path = line.substr(second + 1);
    if (!path.starts_with('/') || path.size() > kMaxCgroupPathBytes) return std::nullopt;
    for (char c : path) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::nullopt;
    }
    for (std::string_view rest = path.substr(1); !rest.empty();) {
      const size_t slash = std::min(rest.find('/'), rest.size());
      const std::string_view component = rest.substr(0, slash);
      if (component == "." || component == "..") return std::nullopt;
      rest.remove_prefix(std::min(slash + 1, rest.size()));
    }
    return std::string(path);
  }
  return std::nullopt;
}

std::optional<int> CgroupCpuLimit(const std::string& mount, std::string_view cgroup_path,
                                  CgroupVersion version) {
  // One cgroup's limit: "max PERIOD" or "-1" for none.
  auto limit_at = [&](const std::string& dir) -> std::optional<int> {
    if (version == CgroupVersion::kV2) {
      auto cpu_max = ReadFileBounded(dir + "/cpu.max", 128);
      return cpu_max.ok() ? ParseCgroupCpuMax(*cpu_max) : std::nullopt;
    }
    auto quota = ReadFileBounded(dir + "/cpu.cfs_quota_us", 64);
    auto period = ReadFileBounded(dir + "/cpu.cfs_period_us", 64);
    if (!quota.ok() || !period.ok()) return std::nullopt;
    auto trimmed = [](std::string text) {
      while (!text.empty() && text.back() == '\n') text.pop_back();
      return text;
    };
    // v1 writes the two halves of v2's cpu.max to two files.
    const std::string quota_text = trimmed(*quota);
    if (quota_text == "-1" || quota_text.find(' ') != std::string::npos) return std::nullopt;
    return ParseCgroupCpuMax(quota_text + " " + trimmed(*period));
  };
  std::optional<int> tightest;
  std::string path(cgroup_path);
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (int depth = 0; depth <= kMaxCgroupDepth; ++depth) {
    if (std::optional<int> limit = limit_at(mount + path)) {
      tightest = std::min(tightest.value_or(*limit), *limit);
    }
    // The mount's root (the cgroup namespace's root inside a container) is the last one read.
    if (path.empty()) break;
    const size_t slash = path.rfind('/');
    path.resize(slash == std::string::npos ? 0 : slash);
  }
  return tightest;
}

int UsableCpus() {
  int cpus = 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = std::max(CPU_COUNT(&set), 1);
  auto self = ReadFileBounded("/proc/self/cgroup", 64 * 1024);
  const std::string self_text = self.ok() ? *self : "";
  // A hybrid host has both; the CPU controller is then v1's, so both are read.
  const std::optional<int> limits[] = {
      CgroupCpuLimit("/sys/fs/cgroup", ParseProcSelfCgroup(self_text).value_or("/")),
      CgroupCpuLimit("/sys/fs/cgroup/cpu", ParseProcSelfCgroup(self_text, "cpu").value_or("/"),
                     CgroupVersion::kV1)};
  for (const std::optional<int>& limit : limits) {
    if (limit) cpus = std::min(cpus, *limit);
  }
  return std::max(cpus, 1);
}

}  // namespace uplink
