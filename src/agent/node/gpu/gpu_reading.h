// What one read of the GPUs produced, from NVML or from nvidia-smi, before the collector
// stamps it into a GpuReport.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "agent/node/sample.h"

namespace uplink::agent::node {

// The payload carries at most this many GPUs (docs/protocol.md, "Node samples").
inline constexpr unsigned kMaxGpus = 64;

struct GpuReading {
  std::string driver_version;
  std::vector<Gpu> gpus;
  // What was left out and why ("GPU 1: nvmlDeviceGetHandleByIndex_v2: GPU is lost"): a GPU
  // that could not be read, a row that could not be parsed. Empty when everything was read.
  std::vector<std::string> problems;
};

// "5 s", or "250 ms" when not whole seconds: how timeouts read in errors.
inline std::string DurationText(std::chrono::milliseconds duration) {
  if (duration.count() % 1000 == 0) return std::to_string(duration.count() / 1000) + " s";
  return std::to_string(duration.count()) + " ms";
}

}  // namespace uplink::agent::node
