#include "console/api/node_sample_figures.h"

#include <set>
#include <string_view>

namespace uplink::console {

NodeSampleFigures FiguresOf(const protocol::NodeSample& sample) {
  NodeSampleFigures figures;
  figures.node = sample.node;
  figures.collected_at = sample.collected_at;
  figures.boot_time = sample.boot_time;
  auto add = [&](SampleMetric metric, const std::optional<double>& value, std::string label = "") {
    if (value) figures.values.push_back({metric, std::move(label), *value});
  };
  add(SampleMetric::kCpuSeconds, sample.cpu_seconds);
  add(SampleMetric::kCpuIdleSeconds, sample.cpu_idle_seconds);
  if (sample.cpu_count) {
    add(SampleMetric::kCpuCount, static_cast<double>(*sample.cpu_count));
  }
  add(SampleMetric::kMemoryTotalBytes, sample.memory_total_bytes);
  add(SampleMetric::kMemoryAvailableBytes, sample.memory_available_bytes);
  add(SampleMetric::kLoad1, sample.load1);
  add(SampleMetric::kLoad5, sample.load5);
  add(SampleMetric::kLoad15, sample.load15);
  add(SampleMetric::kNetworkReceiveBytes, sample.network_receive_bytes);
  add(SampleMetric::kNetworkTransmitBytes, sample.network_transmit_bytes);
  add(SampleMetric::kDiskReadBytes, sample.disk_read_bytes);
  add(SampleMetric::kDiskWrittenBytes, sample.disk_written_bytes);
  // A mount point listed twice (stacked mounts) keeps its first entry.
  std::set<std::string_view> mountpoints;
  for (const protocol::SampleFilesystem& fs : sample.filesystems) {
    if (!fs.error.empty() || !mountpoints.insert(fs.mountpoint).second) continue;
    add(SampleMetric::kFilesystemSizeBytes, fs.size_bytes, fs.mountpoint);
    add(SampleMetric::kFilesystemAvailBytes, fs.avail_bytes, fs.mountpoint);
  }
  for (const protocol::SampleGpu& gpu : sample.gpus) {
    std::string label = std::to_string(gpu.index);
    add(SampleMetric::kGpuUtilizationPercent, gpu.utilization_percent, label);
    add(SampleMetric::kGpuMemoryUsedBytes, gpu.memory_used_bytes, label);
    add(SampleMetric::kGpuMemoryTotalBytes, gpu.memory_total_bytes, label);
    add(SampleMetric::kGpuTemperatureCelsius, gpu.temperature_celsius, label);
    add(SampleMetric::kGpuPowerWatts, gpu.power_watts, label);
  }
  return figures;
}

}  // namespace uplink::console
