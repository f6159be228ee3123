#include "common/cpus.h"

#include <sched.h>

#include <algorithm>
#include <string>

#include "common/files.h"
#include "common/text.h"

namespace uplink {
namespace {

// The kernel's PATH_MAX; deeper cgroups than this many levels are not walked further up.
constexpr size_t kMaxCgroupPathBytes = 4096;
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

std::optional<std::string> ParseProcSelfCgroup(std::string_view text) {
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (!line.starts_with("0::")) continue;
    const std::string_view path = line.substr(3);
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

std::optional<int> CgroupCpuLimit(const std::string& mount, std::string_view cgroup_path) {
  std::optional<int> tightest;
  std::string path(cgroup_path);
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (int depth = 0; depth <= kMaxCgroupDepth; ++depth) {
    auto cpu_max = ReadFileBounded(mount + path + "/cpu.max", 128);
    if (cpu_max.ok()) {
      if (std::optional<int> limit = ParseCgroupCpuMax(*cpu_max)) {
        tightest = std::min(tightest.value_or(*limit), *limit);
      }
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
  std::string cgroup = "/";
  if (auto self = ReadFileBounded("/proc/self/cgroup", 64 * 1024); self.ok()) {
    cgroup = ParseProcSelfCgroup(*self).value_or("/");
  }
  if (std::optional<int> limit = CgroupCpuLimit("/sys/fs/cgroup", cgroup)) {
    cpus = std::min(cpus, *limit);
  }
  return std::max(cpus, 1);
}

}  // namespace uplink
