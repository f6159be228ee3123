#include "agent/node/host/host_collector.h"

#include <cerrno>
#include <utility>

#include "agent/node/host/proc_parsers.h"

namespace uplink::agent::node {
namespace {

std::string Join(const std::string& dir, std::string_view name) {
  std::string path = dir;
  while (!path.empty() && path.back() == '/') path.pop_back();
  path += '/';
  path += name;
  return path;
}

void AddGap(std::vector<Gap>& gaps, Collector collector, const std::string& path,
            std::string error, int errno_value) {
  gaps.push_back(
      {std::string(CollectorName(collector)), path, std::move(error), errno_value});
}

template <typename T>
void ReportSkipped(std::vector<Gap>& gaps, Collector collector, const std::string& path,
                   const Parsed<T>& parsed) {
  if (parsed.skipped_lines == 0) return;
  std::string error = "skipped " + std::to_string(parsed.skipped_lines) + " malformed line" +
                      (parsed.skipped_lines == 1 ? "" : "s");
  if (!parsed.problems.empty()) {
    error += "; line " + std::to_string(parsed.problems.front().line) + ": " +
             parsed.problems.front().reason;
  }
  AddGap(gaps, collector, path, std::move(error), 0);
}

}  // namespace

Result<std::unique_ptr<HostCollector>> HostCollector::Create(HostCollectorOptions options) {
  auto selector = FilesystemSelector::Create(options.mount_points_exclude, options.fs_types_exclude);
  if (!selector.ok()) return selector.status();
  auto disk_devices = ExcludePattern::Compile(options.disk_devices_exclude);
  if (!disk_devices.ok()) return disk_devices.status().WithContext("disk devices exclude");
  auto net_devices = ExcludePattern::Compile(options.net_devices_exclude);
  if (!net_devices.ok()) return net_devices.status().WithContext("network devices exclude");
  return std::unique_ptr<HostCollector>(
      new HostCollector(std::move(options), std::move(selector).value(),
                        std::move(disk_devices).value(), std::move(net_devices).value()));
}

HostCollector::HostCollector(HostCollectorOptions options, FilesystemSelector selector,
                             ExcludePattern disk_devices, ExcludePattern net_devices)
    : options_(std::move(options)),
      selector_(std::move(selector)),
      disk_devices_(std::move(disk_devices)),
      net_devices_(std::move(net_devices)),
      statter_(options_.statvfs, options_.statvfs_timeout, options_.statvfs_workers),
      stat_(Join(options_.host_proc, "stat")),
      meminfo_(Join(options_.host_proc, "meminfo")),
      loadavg_(Join(options_.host_proc, "loadavg")),
      uptime_(Join(options_.host_proc, "uptime")),
      net_dev_(Join(options_.host_proc, "1/net/dev")),
      diskstats_(Join(options_.host_proc, "diskstats")),
      mountinfo_(Join(options_.host_proc, "1/mountinfo")),
      pressure_{ProcFile(Join(options_.host_proc, "pressure/cpu")),
                ProcFile(Join(options_.host_proc, "pressure/memory")),
                ProcFile(Join(options_.host_proc, "pressure/io"))} {}

void HostCollector::Collect(CollectorSet which, NodeSample& sample) {
  // The statvfs calls run on the statter's workers while the other sources are read, so this
  // thread rarely waits for them. Their gaps still come last, in the collectors' order.
  std::vector<Gap> filesystem_gaps;
  const bool statting = which.Has(Collector::kFilesystem) &&
                        StartFilesystems(sample.filesystems, filesystem_gaps);
  if (which.Has(Collector::kCpu)) CollectCpu(sample);
  if (which.Has(Collector::kMemory)) CollectMemory(sample);
  if (which.Has(Collector::kLoad)) CollectLoad(sample);
  if (which.Has(Collector::kUptime)) CollectUptime(sample);
  if (which.Has(Collector::kPressure)) CollectPressure(sample);
  if (which.Has(Collector::kNetwork)) CollectNetwork(sample);
  if (which.Has(Collector::kDisk)) CollectDisks(sample);
  if (statting) statter_.Finish(sample.filesystems, filesystem_gaps);
  sample.gaps.insert(sample.gaps.end(), filesystem_gaps.begin(), filesystem_gaps.end());
}

bool HostCollector::Read(Collector collector, ProcFile& file, std::size_t cap,
                         std::vector<Gap>& gaps) {
  auto failure = file.Read(cap, buffer_);
  if (!failure) return true;
  AddGap(gaps, collector, file.path(), std::move(failure->error), failure->errno_value);
  return false;
}

void HostCollector::CollectCpu(NodeSample& sample) {
  sample.cpu.reset();
  if (!Read(Collector::kCpu, stat_, kLargeProcFileCap, sample.gaps)) return;
  auto parsed = ParseProcStat(buffer_);
  if (!parsed.ok()) {
    AddGap(sample.gaps, Collector::kCpu, stat_.path(), parsed.status().message(), 0);
    return;
  }
  ReportSkipped(sample.gaps, Collector::kCpu, stat_.path(), *parsed);
  sample.cpu = std::move(parsed->value);
}

void HostCollector::CollectMemory(NodeSample& sample) {
  sample.memory.reset();
  if (!Read(Collector::kMemory, meminfo_, kSmallProcFileCap, sample.gaps)) return;
  auto parsed = ParseMeminfo(buffer_);
  if (!parsed.ok()) {
    AddGap(sample.gaps, Collector::kMemory, meminfo_.path(), parsed.status().message(), 0);
    return;
  }
  ReportSkipped(sample.gaps, Collector::kMemory, meminfo_.path(), *parsed);
  sample.memory = std::move(parsed->value);
}

void HostCollector::CollectLoad(NodeSample& sample) {
  sample.load.reset();
  if (!Read(Collector::kLoad, loadavg_, kSmallProcFileCap, sample.gaps)) return;
  auto load = ParseLoadavg(buffer_);
  if (!load.ok()) {
    AddGap(sample.gaps, Collector::kLoad, loadavg_.path(), load.status().message(), 0);
    return;
  }
  sample.load = *load;
}

void HostCollector::CollectUptime(NodeSample& sample) {
  sample.uptime_seconds.reset();
  if (!Read(Collector::kUptime, uptime_, kSmallProcFileCap, sample.gaps)) return;
  auto uptime = ParseUptime(buffer_);
  if (!uptime.ok()) {
    AddGap(sample.gaps, Collector::kUptime, uptime_.path(), uptime.status().message(), 0);
    return;
  }
  sample.uptime_seconds = *uptime;
}

void HostCollector::CollectPressure(NodeSample& sample) {
  sample.pressure.reset();
  struct Resource {
    std::optional<PressureLine> Pressure::*some;
    std::optional<PressureLine> Pressure::*full;
  };
  // In the order of pressure_.
  static constexpr Resource kResources[] = {{&Pressure::cpu_some, &Pressure::cpu_full},
                                            {&Pressure::memory_some, &Pressure::memory_full},
                                            {&Pressure::io_some, &Pressure::io_full}};
  Pressure pressure;
  bool any = false;
  for (std::size_t i = 0; i < std::size(kResources); ++i) {
    const Resource& resource = kResources[i];
    const std::string& path = pressure_[i].path();
    auto failure = pressure_[i].Read(kSmallProcFileCap, buffer_);
    if (failure) {
      const int errno_value = failure->errno_value;
      AddGap(sample.gaps, Collector::kPressure, path, std::move(failure->error), errno_value);
      // No PSI in this kernel (ENOENT) or switched off (psi=0: EOPNOTSUPP): one gap says so.
      if (errno_value == ENOENT || errno_value == EOPNOTSUPP) return;
      continue;
    }
    auto parsed = ParsePressure(buffer_);
    if (!parsed.ok()) {
      AddGap(sample.gaps, Collector::kPressure, path, parsed.status().message(), 0);
      continue;
    }
    ReportSkipped(sample.gaps, Collector::kPressure, path, *parsed);
    pressure.*resource.some = parsed->value.some;
    pressure.*resource.full = parsed->value.full;
    any = true;
  }
  if (any) sample.pressure = pressure;
}

void HostCollector::CollectNetwork(NodeSample& sample) {
  sample.network.clear();
  if (!Read(Collector::kNetwork, net_dev_, kLargeProcFileCap, sample.gaps)) return;
  auto parsed = ParseNetDev(buffer_);
  if (!parsed.ok()) {
    AddGap(sample.gaps, Collector::kNetwork, net_dev_.path(), parsed.status().message(), 0);
    return;
  }
  ReportSkipped(sample.gaps, Collector::kNetwork, net_dev_.path(), *parsed);
  net_devices_.KeepIncluded(parsed->value);
  sample.network = std::move(parsed->value);
}

void HostCollector::CollectDisks(NodeSample& sample) {
  sample.disks.clear();
  if (!Read(Collector::kDisk, diskstats_, kLargeProcFileCap, sample.gaps)) return;
  auto parsed = ParseDiskstats(buffer_);
  if (!parsed.ok()) {
    AddGap(sample.gaps, Collector::kDisk, diskstats_.path(), parsed.status().message(), 0);
    return;
  }
  ReportSkipped(sample.gaps, Collector::kDisk, diskstats_.path(), *parsed);
  disk_devices_.KeepIncluded(parsed->value);
  sample.disks = std::move(parsed->value);
}

bool HostCollector::StartFilesystems(std::vector<Filesystem>& filesystems,
                                     std::vector<Gap>& gaps) {
  filesystems.clear();
  // The table is read again when the kernel reports a mount event, and at least every
  // mount_table_max_age: a superblock the kernel turns read-only after an error (ext4's
  // errors=remount-ro) or one reconfigured with fsconfig raises no event. It is parsed again
  // only when its text changed.
  const auto now = std::chrono::steady_clock::now();
  if (!mount_table_.read || now - mount_table_.read_at >= options_.mount_table_max_age ||
      !mountinfo_.MountTableUnchanged()) {
    if (!Read(Collector::kFilesystem, mountinfo_, kLargeProcFileCap, gaps)) return false;
    mount_table_.read_at = now;
    if (!mount_table_.read || mount_table_.text != buffer_) {
      mount_table_.read = true;
      mount_table_.text = buffer_;
      mount_table_.gaps.clear();
      mount_table_.selected.clear();
      mount_table_.usable = false;
      auto parsed = ParseMountinfo(buffer_);
      if (!parsed.ok()) {
        AddGap(mount_table_.gaps, Collector::kFilesystem, mountinfo_.path(),
               parsed.status().message(), 0);
      } else {
        ReportSkipped(mount_table_.gaps, Collector::kFilesystem, mountinfo_.path(), *parsed);
        mount_table_.selected = selector_.Select(parsed->value);
        mount_table_.usable = true;
      }
    }
  }
  gaps.insert(gaps.end(), mount_table_.gaps.begin(), mount_table_.gaps.end());
  if (!mount_table_.usable) return false;
  filesystems = mount_table_.selected;
  statter_.Start(options_.host_root, filesystems);
  return true;
}

}  // namespace uplink::agent::node
