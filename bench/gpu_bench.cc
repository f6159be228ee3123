// What one GPU read costs the node role, per collection cycle: NVML (the library loaded once,
// as the collector keeps it) beside the fallback's `nvidia-smi --query-gpu` and beside
// `nvidia-smi -q -x`, the full XML dump other agents parse, each a fresh process per read,
// measured in the same run on the same GPUs. Each figure is the median of its rounds, with
// the slowest round beside it. Prints "no NVIDIA GPU here" and exits 0 on a node without
// the NVIDIA driver.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "agent/node/gpu/nvidia_smi.h"
#include "agent/node/gpu/nvml_library.h"
#include "common/subprocess.h"

namespace {

using Clock = std::chrono::steady_clock;
using uplink::agent::node::NvidiaSmi;
using uplink::agent::node::NvmlCallObserver;
using uplink::agent::node::NvmlLibrary;
using uplink::FindProgram;
using uplink::ProcessOptions;
using uplink::RunProcess;

class NoWatchdog : public NvmlCallObserver {
 public:
  bool BeforeCall(const char*, std::optional<unsigned>) override { return true; }
  void AfterCall() override {}
};

// Median and slowest of `rounds` runs of `read`, in milliseconds; false if a run failed.
bool Measure(const char* what, int rounds, const std::function<bool()>& read) {
  std::vector<double> ms;
  for (int i = 0; i < rounds; ++i) {
    auto start = Clock::now();
    if (!read()) {
      std::printf("%-34s failed\n", what);
      return false;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%-34s median %9.2f ms   slowest %9.2f ms   (%d rounds)\n", what, ms[ms.size() / 2],
              ms.back(), rounds);
  return true;
}

}  // namespace

int main() {
  NoWatchdog observer;
  auto library = NvmlLibrary::Open(uplink::agent::node::kDefaultNvmlPath, observer);
  if (library.status().code() == uplink::StatusCode::kNotFound) {
    std::printf("no NVIDIA GPU here\n");
    return 0;
  }
  if (!library.ok()) {
    std::printf("NVML unusable: %s\n", library.status().message().c_str());
    return 1;
  }
  auto first = (*library)->Read(observer);
  if (!first.ok()) {
    std::printf("NVML read failed: %s\n", first.status().message().c_str());
    return 1;
  }
  std::printf("%zu GPU(s), driver %s\n", first->gpus.size(), first->driver_version.c_str());
  Measure("NVML read (all figures, all GPUs)", 50, [&] { return (*library)->Read(observer).ok(); });

  const char* path = std::getenv("PATH");
  auto smi = FindProgram("nvidia-smi", path != nullptr ? path : "");
  if (!smi) {
    std::printf("nvidia-smi is not on $PATH: NVML only\n");
    return 0;
  }
  NvidiaSmi query(*smi, std::chrono::seconds(30));
  Measure("nvidia-smi --query-gpu (fallback)", 10, [&] { return query.Read().ok(); });
  Measure("nvidia-smi -q -x", 5, [&] {
    auto run = RunProcess(ProcessOptions{.argv = {*smi, "-q", "-x"},
                                         .timeout = std::chrono::seconds(60),
                                         .max_output_bytes = 64 << 20});
    return run.ok() && run->exit_code == 0;
  });
  return 0;
}
