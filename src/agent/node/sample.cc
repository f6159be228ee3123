#include "agent/node/sample.h"

namespace uplink::agent::node {

std::string_view CollectorName(Collector c) {
  switch (c) {
    case Collector::kCpu: return "cpu";
    case Collector::kMemory: return "memory";
    case Collector::kLoad: return "load";
    case Collector::kUptime: return "uptime";
    case Collector::kPressure: return "pressure";
    case Collector::kNetwork: return "network";
    case Collector::kDisk: return "disk";
    case Collector::kFilesystem: return "filesystem";
    case Collector::kGpu: return "gpu";
  }
  return "unknown";
}

Result<Collector> ParseCollectorName(std::string_view name) {
  for (Collector c : kAllCollectors) {
    if (CollectorName(c) == name) return c;
  }
  return InvalidArgumentError("unknown collector '" + std::string(name) +
                              "'; known: cpu, memory, load, uptime, pressure, network, disk, "
                              "filesystem, gpu");
}

std::string_view GpuSourceName(GpuSource source) {
  switch (source) {
    case GpuSource::kNone: return "none";
    case GpuSource::kNvml: return "nvml";
    case GpuSource::kNvidiaSmi: return "nvidia-smi";
  }
  return "none";
}

}  // namespace uplink::agent::node
