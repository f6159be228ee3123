// NVML loaded at run time: dlopen("libnvidia-ml.so.1"), every function looked up by name, so
// a node without the NVIDIA driver runs the same binary and simply has no GPUs.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/node/gpu/gpu_reading.h"
#include "agent/node/gpu/nvml_api.h"
#include "common/status.h"

namespace uplink::agent::node {

inline constexpr char kDefaultNvmlPath[] = "libnvidia-ml.so.1";

// Told before and after every NVML call, so that a watchdog on another thread can tell which
// call has not returned.
class NvmlCalls;

class NvmlCallObserver {
 public:
  virtual ~NvmlCallObserver() = default;
  // `gpu` is the index the call is about, nullopt for library-wide calls. Returning false
  // skips the call and ends the read: the watchdog has given up on it.
  virtual bool BeforeCall(const char* function, std::optional<unsigned> gpu) = 0;
  virtual void AfterCall() = 0;
};

class NvmlLibrary {
 public:
  // dlopens `path` (a bare name goes through the loader's search path), looks every function
  // up and calls nvmlInit_v2. NotFound when there is no such library: no NVIDIA driver, so no
  // GPUs, which is not an error. FailedPrecondition when the library is there but unusable: it
  // lacks nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2,
  // or nvmlInit_v2 failed (a driver whose kernel module is not loaded). Unavailable when the
  // observer abandoned the call.
  static Result<std::unique_ptr<NvmlLibrary>> Open(const std::string& path,
                                                   NvmlCallObserver& observer);
  // nvmlShutdown, then dlclose.
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // Reads every GPU (at most kMaxGpus). A call that fails or that this library lacks leaves
  // its figure absent; a GPU whose handle cannot be had is left out and named in
  // `problems`. An error when the GPUs cannot be counted, or Unavailable when the observer
  // abandoned the read.
  Result<GpuReading> Read(NvmlCallObserver& observer) const;

  // The optional functions this library lacks, for the log ("nvmlDeviceGetMigMode").
  const std::vector<std::string>& missing_functions() const { return missing_; }

 private:
  NvmlLibrary() = default;
  std::string ErrorText(nvmlReturn_t code) const;
  void ReadDevice(nvmlDevice_t device, unsigned index, NvmlCalls& calls, Gpu& gpu) const;
  void ReadMig(nvmlDevice_t device, unsigned index, NvmlCalls& calls, Gpu& gpu) const;
  void ReadProcessCount(nvmlDevice_t device, unsigned index, NvmlCalls& calls, Gpu& gpu) const;

  void* handle_ = nullptr;
  bool initialized_ = false;  // nvmlInit_v2 succeeded, so nvmlShutdown is owed
  std::vector<std::string> missing_;

  nvmlInit_v2_fn init_ = nullptr;
  nvmlShutdown_fn shutdown_ = nullptr;
  nvmlDeviceGetCount_v2_fn get_count_ = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn get_handle_ = nullptr;

  nvmlErrorString_fn error_string_ = nullptr;
  nvmlSystemGetDriverVersion_fn driver_version_ = nullptr;
  nvmlDeviceGetUUID_fn uuid_ = nullptr;
  nvmlDeviceGetName_fn name_ = nullptr;
  nvmlDeviceGetPciInfo_v3_fn pci_info_ = nullptr;
  nvmlDeviceGetUtilizationRates_fn utilization_ = nullptr;
  nvmlDeviceGetMemoryInfo_fn memory_ = nullptr;
  nvmlDeviceGetTemperature_fn temperature_ = nullptr;
  nvmlDeviceGetPowerUsage_fn power_ = nullptr;
  nvmlDeviceGetEnforcedPowerLimit_fn power_limit_ = nullptr;
  nvmlDeviceGetClockInfo_fn clock_ = nullptr;
  nvmlDeviceGetTotalEccErrors_fn ecc_ = nullptr;
  nvmlDeviceGetCurrentClocksReasons_fn clock_reasons_ = nullptr;
  const char* clock_reasons_name_ = nullptr;
  nvmlDeviceGetCurrPcieLinkGeneration_fn pcie_generation_ = nullptr;
  nvmlDeviceGetCurrPcieLinkWidth_fn pcie_width_ = nullptr;
  nvmlDeviceGetMigMode_fn mig_mode_ = nullptr;
  nvmlDeviceGetMaxMigDeviceCount_fn max_mig_devices_ = nullptr;
  nvmlDeviceGetMigDeviceHandleByIndex_fn mig_device_ = nullptr;
  nvmlDeviceGetRunningProcesses_fn compute_processes_ = nullptr;
  const char* compute_processes_name_ = nullptr;
  nvmlDeviceGetRunningProcesses_fn graphics_processes_ = nullptr;
  const char* graphics_processes_name_ = nullptr;
};

}  // namespace uplink::agent::node
