// Node sample payloads for the console's tests (docs/protocol.md, "Node samples"), built from
// the few figures a test cares about.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/time.h"

namespace uplink::console::testing {

inline const std::string kSampleNode = "gpu-node-0001";
inline constexpr std::int64_t kSampleBootTime = 1'799'000'000;

struct SampleSpec {
  std::string node = kSampleNode;
  WallTime at = FromUnixSeconds(1'800'000'000);
  std::int64_t boot_time = kSampleBootTime;
  // CPU seconds: user (busy) and idle; the other modes stay 0.
  double cpu_user = 0;
  double cpu_idle = 0;
  std::int64_t memory_total = 1000;
  std::int64_t memory_available = 400;
  double load1 = 0.5;
  // eth0's counters; lo and a pod's veth carry other figures that must not count.
  std::int64_t receive_bytes = 0;
  std::int64_t transmit_bytes = 0;
  std::int64_t read_bytes = 0;
  std::int64_t written_bytes = 0;
  double gpu_utilization = 97;
  int gpus = 2;
};

inline json::object SampleJson(const SampleSpec& spec) {
  json::array gpus;
  for (int i = 0; i < spec.gpus; ++i) {
    gpus.push_back(json::object{{"index", i},
                                {"uuid", "GPU-" + std::to_string(i)},
                                {"name", "NVIDIA H100 80GB HBM3"},
                                {"utilization_percent", spec.gpu_utilization},
                                {"memory_used_bytes", 61203283968},
                                {"memory_total_bytes", 85520809984},
                                {"temperature_celsius", 60 + i},
                                {"power_watts", 512.5}});
  }
  auto interface = [](const char* device, std::int64_t receive, std::int64_t transmit) {
    return json::object{{"device", device}, {"receive_bytes", receive},
                        {"transmit_bytes", transmit}, {"receive_packets", 1},
                        {"transmit_packets", 1}, {"receive_errs", 0}, {"transmit_errs", 0},
                        {"receive_drop", 0}, {"transmit_drop", 0}};
  };
  return json::object{
      {"kind", "node_sample"},
      {"version", 1},
      {"node", spec.node},
      {"collected_at", FormatRfc3339Millis(spec.at)},
      {"boot_time", spec.boot_time},
      {"cpu", {{"count", 64},
               {"seconds", {{"user", spec.cpu_user}, {"nice", 0}, {"system", 0},
                            {"idle", spec.cpu_idle}, {"iowait", 0}, {"irq", 0},
                            {"softirq", 0}, {"steal", 0}}}}},
      {"memory", {{"total_bytes", spec.memory_total},
                  {"available_bytes", spec.memory_available},
                  {"free_bytes", 100}}},
      {"load", {{"load1", spec.load1}, {"load5", 0.41}, {"load15", 0.33}}},
      {"uptime_seconds", 123456.78},
      {"pressure", {{"cpu_some_seconds", 12.5}, {"io_full_seconds", 2.9}}},
      {"network", json::array{interface("lo", 999'999, 999'999),
                              interface("eth0", spec.receive_bytes, spec.transmit_bytes),
                              interface("veth1a2b3c", 777, 777)}},
      {"disks", json::array{{{"device", "nvme0n1"},
                             {"read_bytes", spec.read_bytes},
                             {"written_bytes", spec.written_bytes},
                             {"reads_completed", 1},
                             {"writes_completed", 2},
                             {"io_time_seconds", 0.5}}}},
      {"filesystems", json::array{{{"mountpoint", "/"}, {"device", "/dev/nvme0n1p1"},
                                   {"fstype", "ext4"}, {"size_bytes", 1000},
                                   {"avail_bytes", 500}, {"free_bytes", 600}, {"files", 100},
                                   {"files_free", 50}, {"readonly", false}},
                                  {{"mountpoint", "/mnt/nfs"}, {"device", "nfs:/export"},
                                   {"fstype", "nfs4"},
                                   {"error", "statvfs did not answer within 5 s"}}}},
      {"gpu_source", "nvml"},
      {"gpus", std::move(gpus)},
      {"gaps", json::array{{{"source", "pressure"},
                            {"path", "/host/proc/pressure/memory"},
                            {"error", "No such file or directory"},
                            {"errno", 2}}}}};
}

}  // namespace uplink::console::testing
