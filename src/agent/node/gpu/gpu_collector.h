// The node role's GPU collector: reads every GPU on a fixed interval on its own thread and
// keeps the latest GpuReport, so a collection never waits for the driver.
//
// NVML first, loaded with dlopen; a node without libnvidia-ml.so.1 has no GPUs (source
// "none", healthy). When NVML is unusable (a function it needs is missing, nvmlInit_v2
// fails, the GPUs cannot be counted) or hung, `nvidia-smi --query-gpu` is the fallback.
//
// The watchdog: NVML calls run on a thread of their own, each with a deadline. A call that
// does not return within `call_timeout` marks the collector unhealthy ("NVML call
// nvmlDeviceGetPowerUsage on GPU 0 did not return within 5 s"), keeps the last good figures
// with their old read_at, and leaves that call behind: no other NVML call starts until it
// returns, so there is never more than one stuck thread, and reads go to nvidia-smi
// meanwhile. When it does return, NVML is read again from the next cycle.
//
// Destruction waits at most `call_timeout` for an NVML call in flight and never for one the
// watchdog has given up on: that thread is detached, so the process can exit while a driver
// call hangs. The detached thread still owns the library and shuts NVML down if the call
// ever returns; until then the library stays loaded, since unloading code a thread is
// running would crash the process.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/node/gpu/nvidia_smi.h"
#include "agent/node/gpu/nvml_library.h"
#include "agent/node/sample.h"

namespace uplink::agent::node {

struct GpuCollectorOptions {
  std::chrono::milliseconds interval = std::chrono::seconds(30);
  // How long one NVML call may take before the watchdog gives up on it.
  std::chrono::milliseconds call_timeout = std::chrono::seconds(5);
  std::string nvml_path = kDefaultNvmlPath;
  // A path, or a name looked up in $PATH (as it was when the collector started); empty: no
  // fallback.
  std::string nvidia_smi_path = "nvidia-smi";
  // nvidia-smi is killed (SIGKILL) when it runs longer than this.
  std::chrono::milliseconds smi_timeout = std::chrono::seconds(10);
};

class NvmlWorker;

class GpuCollector {
 public:
  // Starts the collector thread; the first read starts at once.
  explicit GpuCollector(GpuCollectorOptions options);
  ~GpuCollector();
  GpuCollector(const GpuCollector&) = delete;
  GpuCollector& operator=(const GpuCollector&) = delete;

  // The latest report, copied; never touches NVML. Before the first read ends it says so
  // (source none, healthy false, "GPU data not read yet").
  //
  // healthy is false while NVML is hung, when this cycle read nothing (the figures are the
  // last good ones, with their read_at), or when a GPU or an nvidia-smi row was left out.
  // `error` says why; it is also set, with healthy true, when NVML is unusable and the
  // figures came from nvidia-smi.
  GpuReport Latest() const;

  // Read cycles ended since the start.
  std::uint64_t cycles() const;
  // Waits until `count` read cycles have ended since the start; false on timeout.
  bool WaitForCycles(std::uint64_t count, std::chrono::milliseconds timeout) const;

 private:
  // What one attempt to read NVML gave: a reading or why not, or a hang.
  struct NvmlAttempt {
    std::optional<Result<GpuReading>> outcome;
    std::string hang;         // set when NVML is hung
    bool newly_hung = false;  // the watchdog fired during this attempt
  };

  void Run();
  void Cycle();
  NvmlAttempt ReadNvmlWithWatchdog();
  void Publish(GpuSource source, GpuReading reading, const std::string& note, bool degraded);
  void PublishStale(const std::string& error);
  void PublishNoGpus();
  void LogChange(const std::string& error);

  const GpuCollectorOptions options_;
  const std::string path_env_;  // $PATH when the collector started

  // Collector thread only.
  std::optional<NvidiaSmi> smi_;
  bool nvml_hung_ = false;
  std::string hang_message_;
  std::string last_logged_error_;

  std::shared_ptr<NvmlWorker> worker_;
  std::thread worker_thread_;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  GpuReport report_;
  std::uint64_t cycles_ = 0;
  std::atomic<bool> stopping_ = false;

  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace uplink::agent::node
