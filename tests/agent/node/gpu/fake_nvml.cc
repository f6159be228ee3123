// A stand-in for libnvidia-ml.so.1, built by the tests under that very file name and loaded
// by the collector through the real dlopen path. It implements the NVML functions the
// collector calls, with values from a config file named by $FAKE_NVML_CONFIG, read at each
// nvmlInit_v2. One "key=value" per line:
//
//   driver_version=550.54.15      gpu_count=2          init_error=9        count_error=15
//   gpu0.uuid=GPU-...  gpu0.name=...  gpu0.bus_id=00000000:18:00.0
//   gpu0.util_gpu=97   gpu0.util_mem=41   gpu0.mem_total=<bytes>  gpu0.mem_used=<bytes>
//   gpu0.temp=63  gpu0.power_mw=512300  gpu0.power_limit_mw=700000
//   gpu0.sm_clock=1980  gpu0.mem_clock=2619  gpu0.ecc_corrected=3  gpu0.ecc_uncorrected=1
//   gpu0.clock_reasons=4  gpu0.pcie_gen=5  gpu0.pcie_width=16
//   gpu0.mig_mode=1  gpu0.mig_slots=7  gpu0.mig_devices=0,2,5
//   gpu0.compute_procs=2  gpu0.graphics_procs=1
//   error.nvmlDeviceGetTemperature=3          (every GPU)   gpu1.error.<function>=15  (one)
//   hang.function=nvmlDeviceGetPowerUsage  hang.gpu=0  hang.arm_file=<path>
//   hang.entered_file=<path>  hang.release_file=<path>  hang.left_file=<path>
//
// A figure without a key answers NVML_ERROR_NOT_SUPPORTED. A hang blocks the named call
// (on hang.gpu only, if given; only while hang.arm_file exists, if given) until
// hang.release_file exists, creating hang.entered_file on the way in and hang.left_file on
// the way out. fake_nvml_calls("<function>") tells the tests how often a function was called,
// fake_nvml_sessions() how many initialisations are not yet shut down.
//
// Built three times: in full, with FAKE_NVML_LEGACY (a pre-R535, pre-MIG library: no
// nvmlDeviceGetCurrentClocksEventReasons, no _v3 process queries, no MIG functions), and
// with FAKE_NVML_NO_COUNT (no nvmlDeviceGetCount_v2, which makes it unusable).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/node/gpu/nvml_api.h"

struct nvmlDevice_st {
  int gpu;
  int mig_slot;  // -1 for the GPU itself
};

namespace {

constexpr int kMaxGpus = 64;
constexpr int kMaxMigSlots = 8;

struct Config {
  std::map<std::string, std::string> values;

  std::optional<std::string> Get(const std::string& key) const {
    auto it = values.find(key);
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
  std::optional<unsigned long long> Number(const std::string& key) const {
    auto value = Get(key);
    if (!value) return std::nullopt;
    return std::strtoull(value->c_str(), nullptr, 0);
  }
  std::optional<unsigned long long> GpuNumber(int gpu, const std::string& key) const {
    return Number("gpu" + std::to_string(gpu) + "." + key);
  }
};

std::mutex g_mutex;
std::shared_ptr<const Config> g_config = std::make_shared<Config>();
std::map<std::string, unsigned> g_calls;
int g_sessions = 0;  // successful nvmlInit_v2 calls not yet matched by nvmlShutdown
nvmlDevice_st g_devices[kMaxGpus];
nvmlDevice_st g_mig_devices[kMaxGpus][kMaxMigSlots];

std::shared_ptr<const Config> Current() {
  std::lock_guard lock(g_mutex);
  return g_config;
}

bool Exists(const std::string& path) { return !path.empty() && ::access(path.c_str(), F_OK) == 0; }

void Touch(const std::string& path) {
  if (path.empty()) return;
  std::ofstream(path).put('\n');
}

// Counts the call, hangs when told to, and says which error to return, if any.
std::optional<nvmlReturn_t> Enter(const char* function, int gpu) {
  {
    std::lock_guard lock(g_mutex);
    ++g_calls[function];
  }
  std::shared_ptr<const Config> config = Current();
  if (config->Get("hang.function") == function) {
    auto hang_gpu = config->Number("hang.gpu");
    std::string arm = config->Get("hang.arm_file").value_or("");
    if ((!hang_gpu || static_cast<int>(*hang_gpu) == gpu) && (arm.empty() || Exists(arm))) {
      std::string release = config->Get("hang.release_file").value_or("");
      Touch(config->Get("hang.entered_file").value_or(""));
      while (!Exists(release)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      Touch(config->Get("hang.left_file").value_or(""));
    }
  }
  std::string name = function;
  if (auto error = config->Number("gpu" + std::to_string(gpu) + ".error." + name)) {
    return static_cast<nvmlReturn_t>(*error);
  }
  if (auto error = config->Number("error." + name)) return static_cast<nvmlReturn_t>(*error);
  return std::nullopt;
}

int GpuOf(nvmlDevice_t device) {
  for (int i = 0; i < kMaxGpus; ++i) {
    if (device == &g_devices[i]) return i;
  }
  return -1;
}

nvmlReturn_t Figure(int gpu, const char* key, unsigned* out) {
  auto value = Current()->GpuNumber(gpu, key);
  if (!value) return NVML_ERROR_NOT_SUPPORTED;
  *out = static_cast<unsigned>(*value);
  return NVML_SUCCESS;
}

nvmlReturn_t Figure64(int gpu, const char* key, unsigned long long* out) {
  auto value = Current()->GpuNumber(gpu, key);
  if (!value) return NVML_ERROR_NOT_SUPPORTED;
  *out = *value;
  return NVML_SUCCESS;
}

nvmlReturn_t CopyString(const std::optional<std::string>& value, char* buffer, unsigned length) {
  if (!value) return NVML_ERROR_NOT_SUPPORTED;
  if (buffer == nullptr || length < value->size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buffer, value->c_str(), value->size() + 1);
  return NVML_SUCCESS;
}

constexpr nvmlReturn_t kInvalidArgument = 2;

// The common prologue of a per-GPU function: the handle must be one of ours.
#define FAKE_DEVICE_CALL(name, device)                    \
  int gpu = GpuOf(device);                                \
  if (auto injected = Enter(name, gpu)) return *injected; \
  if (gpu < 0) return kInvalidArgument

nvmlReturn_t RunningProcesses(const char* name, const char* key, nvmlDevice_t device,
                              unsigned* count, nvmlProcessInfo_t* infos) {
  FAKE_DEVICE_CALL(name, device);
  if (count == nullptr) return kInvalidArgument;
  auto processes = Current()->GpuNumber(gpu, key);
  if (!processes) return NVML_ERROR_NOT_SUPPORTED;
  if (*processes == 0) {
    *count = 0;
    return NVML_SUCCESS;
  }
  // The collector only ever counts; an array is not something this fake fills.
  if (infos != nullptr || *count < *processes) {
    *count = static_cast<unsigned>(*processes);
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  return kInvalidArgument;
}

}  // namespace

extern "C" {

int fake_nvml_sessions() {
  std::lock_guard lock(g_mutex);
  return g_sessions;
}

unsigned fake_nvml_calls(const char* function) {
  std::lock_guard lock(g_mutex);
  auto it = g_calls.find(function);
  return it == g_calls.end() ? 0 : it->second;
}

nvmlReturn_t nvmlInit_v2(void) {
  auto config = std::make_shared<Config>();
  if (const char* path = std::getenv("FAKE_NVML_CONFIG")) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      size_t equals = line.find('=');
      if (equals != std::string::npos)
        config->values[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  static std::once_flag handles_made;
  std::call_once(handles_made, [] {
    for (int i = 0; i < kMaxGpus; ++i) {
      g_devices[i] = {i, -1};
      for (int slot = 0; slot < kMaxMigSlots; ++slot) g_mig_devices[i][slot] = {i, slot};
    }
  });
  {
    std::lock_guard lock(g_mutex);
    g_config = config;
  }
  if (auto injected = Enter("nvmlInit_v2", -1)) return *injected;
  if (auto error = config->Number("init_error")) return static_cast<nvmlReturn_t>(*error);
  std::lock_guard lock(g_mutex);
  ++g_sessions;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  if (auto injected = Enter("nvmlShutdown", -1)) return *injected;
  std::lock_guard lock(g_mutex);
  --g_sessions;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case 2: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (auto injected = Enter("nvmlSystemGetDriverVersion", -1)) return *injected;
  return CopyString(Current()->Get("driver_version"), version, length);
}

#ifndef FAKE_NVML_NO_COUNT
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (auto injected = Enter("nvmlDeviceGetCount_v2", -1)) return *injected;
  auto config = Current();
  if (auto error = config->Number("count_error")) return static_cast<nvmlReturn_t>(*error);
  *count = static_cast<unsigned>(config->Number("gpu_count").value_or(0));
  return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (auto injected = Enter("nvmlDeviceGetHandleByIndex_v2", static_cast<int>(index))) {
    return *injected;
  }
  if (index >= Current()->Number("gpu_count").value_or(0) || index >= kMaxGpus) {
    return kInvalidArgument;
  }
  *device = &g_devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FAKE_DEVICE_CALL("nvmlDeviceGetUUID", device);
  return CopyString(Current()->Get("gpu" + std::to_string(gpu) + ".uuid"), uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  FAKE_DEVICE_CALL("nvmlDeviceGetName", device);
  return CopyString(Current()->Get("gpu" + std::to_string(gpu) + ".name"), name, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPciInfo_v3", device);
  auto bus_id = Current()->Get("gpu" + std::to_string(gpu) + ".bus_id");
  if (!bus_id) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "legacy");
  std::snprintf(pci->busId, sizeof pci->busId, "%s", bus_id->c_str());
  pci->pciDeviceId = 0x233010DE;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  FAKE_DEVICE_CALL("nvmlDeviceGetUtilizationRates", device);
  nvmlReturn_t result = Figure(gpu, "util_gpu", &utilization->gpu);
  if (result != NVML_SUCCESS) return result;
  return Figure(gpu, "util_mem", &utilization->memory);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FAKE_DEVICE_CALL("nvmlDeviceGetMemoryInfo", device);
  nvmlReturn_t result = Figure64(gpu, "mem_total", &memory->total);
  if (result != NVML_SUCCESS) return result;
  result = Figure64(gpu, "mem_used", &memory->used);
  memory->free = memory->total - memory->used;
  return result;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                      unsigned int* celsius) {
  FAKE_DEVICE_CALL("nvmlDeviceGetTemperature", device);
  if (sensor != NVML_TEMPERATURE_GPU) return kInvalidArgument;
  return Figure(gpu, "temp", celsius);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPowerUsage", device);
  return Figure(gpu, "power_mw", milliwatts);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* milliwatts) {
  FAKE_DEVICE_CALL("nvmlDeviceGetEnforcedPowerLimit", device);
  return Figure(gpu, "power_limit_mw", milliwatts);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  FAKE_DEVICE_CALL("nvmlDeviceGetClockInfo", device);
  if (type == NVML_CLOCK_SM) return Figure(gpu, "sm_clock", mhz);
  if (type == NVML_CLOCK_MEM) return Figure(gpu, "mem_clock", mhz);
  return Figure(gpu, "graphics_clock", mhz);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t error_type,
                                         nvmlEccCounterType_t counter_type,
                                         unsigned long long* count) {
  FAKE_DEVICE_CALL("nvmlDeviceGetTotalEccErrors", device);
  // Aggregate counts differ from volatile ones so that a mix-up shows.
  std::string key = counter_type == NVML_VOLATILE_ECC ? "ecc_" : "ecc_aggregate_";
  key += error_type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? "corrected" : "uncorrected";
  return Figure64(gpu, key.c_str(), count);
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* reasons) {
  FAKE_DEVICE_CALL("nvmlDeviceGetCurrentClocksEventReasons", device);
  return Figure64(gpu, "clock_reasons", reasons);
}
#endif

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long* reasons) {
  FAKE_DEVICE_CALL("nvmlDeviceGetCurrentClocksThrottleReasons", device);
  return Figure64(gpu, "clock_reasons", reasons);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* generation) {
  FAKE_DEVICE_CALL("nvmlDeviceGetCurrPcieLinkGeneration", device);
  return Figure(gpu, "pcie_gen", generation);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* width) {
  FAKE_DEVICE_CALL("nvmlDeviceGetCurrPcieLinkWidth", device);
  return Figure(gpu, "pcie_width", width);
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current_mode,
                                  unsigned int* pending_mode) {
  FAKE_DEVICE_CALL("nvmlDeviceGetMigMode", device);
  nvmlReturn_t result = Figure(gpu, "mig_mode", current_mode);
  if (result == NVML_SUCCESS) *pending_mode = *current_mode;
  return result;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  FAKE_DEVICE_CALL("nvmlDeviceGetMaxMigDeviceCount", device);
  return Figure(gpu, "mig_slots", count);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* mig_device) {
  FAKE_DEVICE_CALL("nvmlDeviceGetMigDeviceHandleByIndex", device);
  auto slots = Current()->GpuNumber(gpu, "mig_slots").value_or(0);
  if (index >= slots || index >= kMaxMigSlots) return kInvalidArgument;
  std::string present =
      "," + Current()->Get("gpu" + std::to_string(gpu) + ".mig_devices").value_or("") + ",";
  if (present.find("," + std::to_string(index) + ",") == std::string::npos) {
    return NVML_ERROR_NOT_FOUND;
  }
  *mig_device = &g_mig_devices[gpu][index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return RunningProcesses("nvmlDeviceGetComputeRunningProcesses_v3", "compute_procs", device, count,
                          infos);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                      nvmlProcessInfo_t* infos) {
  return RunningProcesses("nvmlDeviceGetGraphicsRunningProcesses_v3", "graphics_procs", device,
                          count, infos);
}
#endif

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return RunningProcesses("nvmlDeviceGetComputeRunningProcesses_v2", "compute_procs", device, count,
                          infos);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                      nvmlProcessInfo_t* infos) {
  return RunningProcesses("nvmlDeviceGetGraphicsRunningProcesses_v2", "graphics_procs", device,
                          count, infos);
}

}  // extern "C"
