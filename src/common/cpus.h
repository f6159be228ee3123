// How many CPUs this process may use: its affinity mask, bounded by a cgroup v2 CPU quota (a
// container's CPU limit), which std::thread::hardware_concurrency() ignores.
#pragma once

#include <optional>
#include <string_view>

namespace uplink {

// At least 1.
int UsableCpus();

// cgroup v2's cpu.max ("QUOTA PERIOD", or "max PERIOD" for no limit) as CPUs, rounded up;
// nullopt for no limit or for text that is not that.
std::optional<int> ParseCgroupCpuMax(std::string_view text);

}  // namespace uplink
