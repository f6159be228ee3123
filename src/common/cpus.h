// How many CPUs this process may use: its affinity mask, bounded by the cgroup v2 CPU quotas
// of its cgroup and every cgroup above it (a container's or a pod's CPU limit), which
// std::thread::hardware_concurrency() ignores.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace uplink {

// At least 1.
int UsableCpus();

// cgroup v2's cpu.max ("QUOTA PERIOD", or "max PERIOD" for no limit) as CPUs, rounded up;
// nullopt for no limit or for text that is not that.
std::optional<int> ParseCgroupCpuMax(std::string_view text);

// This process's cgroup v2 path from /proc/self/cgroup (its "0::/kubepods/pod1/ctr" line);
// nullopt without one (cgroup v1 only) or for a path that leaves the mount (a "/.." a process
// outside its cgroup namespace sees), is not absolute, or is not plain text.
std::optional<std::string> ParseProcSelfCgroup(std::string_view text);

// The tightest cpu.max quota of `cgroup_path` and of each cgroup above it, read under `mount`
// ("/sys/fs/cgroup"): a child's "max" does not lift its parent's limit. nullopt when none is
// set or readable.
std::optional<int> CgroupCpuLimit(const std::string& mount, std::string_view cgroup_path);

}  // namespace uplink
