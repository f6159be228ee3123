// The payload of a node sample record (docs/protocol.md, "Node samples"): the node role renders
// it (agent/node/format/payload.h) within the bounds below, the console reads it strictly: a
// known field of the wrong type or out of its bounds refuses the sample (the upload answers
// 422 invalid_record naming its sequence); unknown fields are ignored, so that a newer agent
// can add figures before the console charts them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::protocol {

inline constexpr std::string_view kNodeSampleKind = "node_sample";
inline constexpr std::int64_t kNodeSampleVersion = 1;
inline constexpr size_t kMaxSampleInterfaces = 1024;
inline constexpr size_t kMaxSampleDisks = 1024;
inline constexpr size_t kMaxSampleFilesystems = 1024;
inline constexpr size_t kMaxSampleGpus = 64;
inline constexpr size_t kMaxSampleGaps = 256;
inline constexpr size_t kMaxSampleString = 253;
inline constexpr size_t kMaxSamplePath = 4096;

struct SampleFilesystem {
  std::string mountpoint;
  std::string device;
  std::string fstype;
  std::optional<double> size_bytes;
  std::optional<double> avail_bytes;
  std::optional<bool> readonly;
  std::string error;  // statvfs failed or hung: no figures
};

struct SampleGpu {
  std::int64_t index = 0;
  std::string uuid;
  std::string name;
  std::optional<double> utilization_percent;
  std::optional<double> memory_used_bytes;
  std::optional<double> memory_total_bytes;
  std::optional<double> temperature_celsius;
  std::optional<double> power_watts;
};

struct SampleGap {
  std::string source;
  std::string path;
  std::string error;
  std::int64_t errno_value = 0;
};

// What the console reads of a sample: the figures it charts, and what the node list shows.
struct NodeSample {
  std::string node;
  WallTime collected_at;
  std::int64_t boot_time = 0;  // 0: absent
  std::optional<std::int64_t> cpu_count;
  std::optional<double> cpu_seconds;       // every mode, summed
  std::optional<double> cpu_idle_seconds;  // idle + iowait
  std::optional<double> memory_total_bytes;
  std::optional<double> memory_available_bytes;
  std::optional<double> load1, load5, load15;
  // Sums over the interfaces that carry the host's traffic (IsHostInterface) and over the
  // disks; absent when the sample has no "network" or "disks".
  std::optional<double> network_receive_bytes;
  std::optional<double> network_transmit_bytes;
  std::optional<double> disk_read_bytes;
  std::optional<double> disk_written_bytes;
  std::vector<SampleFilesystem> filesystems;
  std::string gpu_source;  // empty when absent
  std::vector<SampleGpu> gpus;
  std::vector<SampleGap> gaps;
};

// True when `payload` is an object whose "kind" is "node_sample".
bool IsNodeSamplePayload(const json::object& payload);

// Reads a node sample payload. Errors are InvalidArgument and name the field by its path
// under `path` ("records[3].payload.cpu.seconds.user must be a number, 0 or more").
Result<NodeSample> DecodeNodeSample(const json::object& payload, std::string_view path);

// False for loopback and the virtual interfaces of containers and overlays (veth, bridges,
// tunnels): their traffic is the physical interfaces' traffic again, and they come and go
// with pods, which would make the sum step back.
bool IsHostInterface(std::string_view device);

}  // namespace uplink::protocol
