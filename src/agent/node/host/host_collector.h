// The node role's host collectors: a fixed list of /proc files plus statvfs, parsed into a
// NodeSample. Nothing else of the host is read: no per-process file beyond pid 1's net/dev and
// mountinfo (the host's network and mount namespaces), never an environ or a cmdline.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "agent/node/host/exclude_pattern.h"
#include "agent/node/host/filesystems.h"
#include "agent/node/host/proc_file.h"
#include "agent/node/sample.h"
#include "common/status.h"

namespace uplink::agent::node {

struct HostCollectorOptions {
  // Where the host's /proc and / are mounted in the agent's container ("/host/proc", "/host").
  std::string host_proc = "/proc";
  std::string host_root = "/";
  // Per statvfs call; a mount that overruns it is skipped until its call returns.
  std::chrono::milliseconds statvfs_timeout{5000};
  std::size_t statvfs_workers = 4;
  // node_exporter 1.5's exclusions unless overridden; an empty pattern excludes nothing.
  std::string mount_points_exclude{kDefaultMountPointsExclude};
  std::string fs_types_exclude{kDefaultFsTypesExclude};
  std::string disk_devices_exclude{kDefaultDiskDevicesExclude};
  std::string net_devices_exclude{kDefaultNetDevicesExclude};
  StatvfsFunction statvfs = RealStatvfs();  // tests make mounts fail or hang through it
  // The longest a mount table is kept without a mount event (see StartFilesystems).
  std::chrono::milliseconds mount_table_max_age{60'000};
};

// Lives as long as the process: its /proc files stay open, its read buffer and the last mount
// table are reused every cycle, and its statvfs workers remember which mounts are stuck.
class HostCollector {
 public:
  // InvalidArgument when an exclusion pattern does not compile.
  static Result<std::unique_ptr<HostCollector>> Create(HostCollectorOptions options);

  // Reads the sources of the host collectors in `which` (kGpu is not one of them) into their
  // sections of `sample`, replacing what they held. Each source that cannot be read or parsed
  // leaves its section absent (or empty) and appends a Gap; lines skipped as malformed append
  // a Gap too (errno 0) while the rest of the file still counts. Without PSI (no
  // /proc/pressure, or psi=0) the pressure section is absent and one Gap says why.
  void Collect(CollectorSet which, NodeSample& sample);

  // Its stuck mounts are worth a health report.
  const FilesystemStatter& statter() const { return statter_; }

 private:
  HostCollector(HostCollectorOptions options, FilesystemSelector selector,
                ExcludePattern disk_devices, ExcludePattern net_devices);

  bool Read(Collector collector, ProcFile& file, std::size_t cap, std::vector<Gap>& gaps);
  void CollectCpu(NodeSample& sample);
  void CollectMemory(NodeSample& sample);
  void CollectLoad(NodeSample& sample);
  void CollectUptime(NodeSample& sample);
  void CollectPressure(NodeSample& sample);
  void CollectNetwork(NodeSample& sample);
  void CollectDisks(NodeSample& sample);
  // Reads the mount table and starts the statvfs calls of its filesystems; false, with the
  // gaps saying why, when there is nothing to call.
  bool StartFilesystems(std::vector<Filesystem>& filesystems, std::vector<Gap>& gaps);

  const HostCollectorOptions options_;
  const FilesystemSelector selector_;
  DeviceExclusion disk_devices_;
  DeviceExclusion net_devices_;
  FilesystemStatter statter_;
  // The fixed list, resolved once and kept open where that is safe (see ProcFile).
  ProcFile stat_, meminfo_, loadavg_, uptime_, net_dev_, diskstats_, mountinfo_;
  ProcFile pressure_[3];  // cpu, memory, io
  std::string buffer_;  // the file being parsed; keeps its capacity across cycles
  // What the last mountinfo text gave. The mount table seldom changes, so while the text is
  // the same the parse, the exclusion patterns and the dedup are not run again.
  struct MountTable {
    bool read = false;  // false until the first mountinfo was read
    std::chrono::steady_clock::time_point read_at;
    std::string text;
    std::vector<Gap> gaps;  // the parse's: a refusal, or skipped lines
    bool usable = false;    // the parse found mounts
    std::vector<Filesystem> selected;  // identity and `readonly`, figures unset
  } mount_table_;
};

}  // namespace uplink::agent::node
