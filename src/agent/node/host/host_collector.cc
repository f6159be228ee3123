#include "agent/node/host/host_collector.h"

#include <cerrno>
#include <utility>

#include "agent/node/host/proc_file.h"
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

void AddGap(NodeSample& sample, Collector collector, const std::string& path, std::string error,
            int errno_value) {
  sample.gaps.push_back(
      {std::string(CollectorName(collector)), path, std::move(error), errno_value});
}

template <typename T>
void ReportSkipped(NodeSample& sample, Collector collector, const std::string& path,
                   const Parsed<T>& parsed) {
  if (parsed.skipped_lines == 0) return;
  std::string error = "skipped " + std::to_string(parsed.skipped_lines) + " malformed line" +
                      (parsed.skipped_lines == 1 ? "" : "s");
  if (!parsed.problems.empty()) {
    error += "; line " + std::to_string(parsed.problems.front().line) + ": " +
             parsed.problems.front().reason;
  }
  AddGap(sample, collector, path, std::move(error), 0);
}

template <typename T>
void KeepIncluded(std::vector<T>& items, const ExcludePattern& exclude) {
  std::erase_if(items, [&](const T& item) { return exclude.Excludes(item.device); });
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
      stat_path_(Join(options_.host_proc, "stat")),
      meminfo_path_(Join(options_.host_proc, "meminfo")),
      loadavg_path_(Join(options_.host_proc, "loadavg")),
      uptime_path_(Join(options_.host_proc, "uptime")),
      net_dev_path_(Join(options_.host_proc, "1/net/dev")),
      diskstats_path_(Join(options_.host_proc, "diskstats")),
      mountinfo_path_(Join(options_.host_proc, "1/mountinfo")),
      pressure_paths_{Join(options_.host_proc, "pressure/cpu"),
                      Join(options_.host_proc, "pressure/memory"),
                      Join(options_.host_proc, "pressure/io")} {}

void HostCollector::Collect(CollectorSet which, NodeSample& sample) {
  if (which.Has(Collector::kCpu)) CollectCpu(sample);
  if (which.Has(Collector::kMemory)) CollectMemory(sample);
  if (which.Has(Collector::kLoad)) CollectLoad(sample);
  if (which.Has(Collector::kUptime)) CollectUptime(sample);
  if (which.Has(Collector::kPressure)) CollectPressure(sample);
  if (which.Has(Collector::kNetwork)) CollectNetwork(sample);
  if (which.Has(Collector::kDisk)) CollectDisks(sample);
  if (which.Has(Collector::kFilesystem)) CollectFilesystems(sample);
}

bool HostCollector::Read(Collector collector, const std::string& path, std::size_t cap,
                         NodeSample& sample) {
  auto failure = ReadProcFile(path, cap, buffer_);
  if (!failure) return true;
  AddGap(sample, collector, path, std::move(failure->error), failure->errno_value);
  return false;
}

void HostCollector::CollectCpu(NodeSample& sample) {
  sample.cpu.reset();
  if (!Read(Collector::kCpu, stat_path_, kLargeProcFileCap, sample)) return;
  auto parsed = ParseProcStat(buffer_);
  if (!parsed.ok()) {
    AddGap(sample, Collector::kCpu, stat_path_, parsed.status().message(), 0);
    return;
  }
  ReportSkipped(sample, Collector::kCpu, stat_path_, *parsed);
  sample.cpu = std::move(parsed->value);
}

void HostCollector::CollectMemory(NodeSample& sample) {
  sample.memory.reset();
  if (!Read(Collector::kMemory, meminfo_path_, kSmallProcFileCap, sample)) return;
  auto parsed = ParseMeminfo(buffer_);
  if (!parsed.ok()) {
    AddGap(sample, Collector::kMemory, meminfo_path_, parsed.status().message(), 0);
    return;
  }
  ReportSkipped(sample, Collector::kMemory, meminfo_path_, *parsed);
  sample.memory = std::move(parsed->value);
}

void HostCollector::CollectLoad(NodeSample& sample) {
  sample.load.reset();
  if (!Read(Collector::kLoad, loadavg_path_, kSmallProcFileCap, sample)) return;
  auto load = ParseLoadavg(buffer_);
  if (!load.ok()) {
    AddGap(sample, Collector::kLoad, loadavg_path_, load.status().message(), 0);
    return;
  }
  sample.load = *load;
}

void HostCollector::CollectUptime(NodeSample& sample) {
  sample.uptime_seconds.reset();
  if (!Read(Collector::kUptime, uptime_path_, kSmallProcFileCap, sample)) return;
  auto uptime = ParseUptime(buffer_);
  if (!uptime.ok()) {
    AddGap(sample, Collector::kUptime, uptime_path_, uptime.status().message(), 0);
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
  // In the order of pressure_paths_.
  static constexpr Resource kResources[] = {{&Pressure::cpu_some, &Pressure::cpu_full},
                                            {&Pressure::memory_some, &Pressure::memory_full},
                                            {&Pressure::io_some, &Pressure::io_full}};
  Pressure pressure;
  bool any = false;
  for (std::size_t i = 0; i < std::size(kResources); ++i) {
    const Resource& resource = kResources[i];
    const std::string& path = pressure_paths_[i];
    auto failure = ReadProcFile(path, kSmallProcFileCap, buffer_);
    if (failure) {
      const int errno_value = failure->errno_value;
      AddGap(sample, Collector::kPressure, path, std::move(failure->error), errno_value);
      // No PSI in this kernel (ENOENT) or switched off (psi=0: EOPNOTSUPP): one gap says so.
      if (errno_value == ENOENT || errno_value == EOPNOTSUPP) return;
      continue;
    }
    auto parsed = ParsePressure(buffer_);
    if (!parsed.ok()) {
      AddGap(sample, Collector::kPressure, path, parsed.status().message(), 0);
      continue;
    }
    ReportSkipped(sample, Collector::kPressure, path, *parsed);
    pressure.*resource.some = parsed->value.some;
    pressure.*resource.full = parsed->value.full;
    any = true;
  }
  if (any) sample.pressure = pressure;
}

void HostCollector::CollectNetwork(NodeSample& sample) {
  sample.network.clear();
  if (!Read(Collector::kNetwork, net_dev_path_, kLargeProcFileCap, sample)) return;
  auto parsed = ParseNetDev(buffer_);
  if (!parsed.ok()) {
    AddGap(sample, Collector::kNetwork, net_dev_path_, parsed.status().message(), 0);
    return;
  }
  ReportSkipped(sample, Collector::kNetwork, net_dev_path_, *parsed);
  KeepIncluded(parsed->value, net_devices_);
  sample.network = std::move(parsed->value);
}

void HostCollector::CollectDisks(NodeSample& sample) {
  sample.disks.clear();
  if (!Read(Collector::kDisk, diskstats_path_, kLargeProcFileCap, sample)) return;
  auto parsed = ParseDiskstats(buffer_);
  if (!parsed.ok()) {
    AddGap(sample, Collector::kDisk, diskstats_path_, parsed.status().message(), 0);
    return;
  }
  ReportSkipped(sample, Collector::kDisk, diskstats_path_, *parsed);
  KeepIncluded(parsed->value, disk_devices_);
  sample.disks = std::move(parsed->value);
}

void HostCollector::CollectFilesystems(NodeSample& sample) {
  sample.filesystems.clear();
  if (!Read(Collector::kFilesystem, mountinfo_path_, kLargeProcFileCap, sample)) return;
  auto parsed = ParseMountinfo(buffer_);
  if (!parsed.ok()) {
    AddGap(sample, Collector::kFilesystem, mountinfo_path_, parsed.status().message(), 0);
    return;
  }
  ReportSkipped(sample, Collector::kFilesystem, mountinfo_path_, *parsed);
  std::vector<Filesystem> filesystems = selector_.Select(parsed->value);
  statter_.StatAll(options_.host_root, filesystems, sample.gaps);
  sample.filesystems = std::move(filesystems);
}

}  // namespace uplink::agent::node
