// How many CPUs this process may use: its affinity mask, bounded by the CPU quotas of its
// cgroup and every cgroup above it (a container's or a pod's CPU limit), cgroup v2's or, on a
// node still on cgroup v1, v1's; std::thread::hardware_concurrency() ignores them.
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

// This process's cgroup path from /proc/self/cgroup: with `v1_controller` empty, cgroup v2's
// (the "0::/kubepods/pod1/ctr" line); else the cgroup v1 hierarchy's whose controller list
// holds it ("4:cpu,cpuacct:/kubepods/pod1/ctr" for "cpu"). nullopt without such a line or for
// a path that leaves the mount (a "/.." a process outside its cgroup namespace sees), is not
// absolute, or is not plain text.
std::optional<std::string> ParseProcSelfCgroup(std::string_view text,
                                               std::string_view v1_controller = "");

// Which files hold a CPU quota: cgroup v2's cpu.max, or cgroup v1's cpu.cfs_quota_us ("-1" for
// none) and cpu.cfs_period_us.
enum class CgroupVersion { kV1, kV2 };

// The tightest CPU quota of `cgroup_path` and of each cgroup above it, read under `mount`
// ("/sys/fs/cgroup" for v2, "/sys/fs/cgroup/cpu" for v1's CPU controller): a child without a
// limit does not lift its parent's. nullopt when none is set or readable.
std::optional<int> CgroupCpuLimit(const std::string& mount, std::string_view cgroup_path,
                                  CgroupVersion version = CgroupVersion::kV2);

}  // namespace uplink
