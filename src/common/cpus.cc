#include "common/cpus.h"

#include <sched.h>

#include <algorithm>
#include <string>

#include "common/files.h"
#include "common/text.h"

namespace uplink {

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

int UsableCpus() {
  int cpus = 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = std::max(CPU_COUNT(&set), 1);
  // Inside a container the cgroup namespace makes its own cgroup the root.
  auto cpu_max = ReadFileBounded("/sys/fs/cgroup/cpu.max", 128);
  if (cpu_max.ok()) {
    if (std::optional<int> limit = ParseCgroupCpuMax(*cpu_max)) cpus = std::min(cpus, *limit);
  }
  return std::max(cpus, 1);
}

}  // namespace uplink
