#include "agent/node/gpu/nvml_library.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/text.h"

namespace uplink::agent::node {

// Runs NVML calls through the observer, and remembers once it has abandoned the read so
// that every later call is skipped.
class NvmlCalls {
 public:
  explicit NvmlCalls(NvmlCallObserver& observer) : observer_(observer) {}

  template <typename Call>
  nvmlReturn_t Run(const char* function, std::optional<unsigned> gpu, Call&& call) {
    if (abandoned_ || !observer_.BeforeCall(function, gpu)) {
      abandoned_ = true;
      return NVML_ERROR_UNKNOWN;
    }
    nvmlReturn_t result = call();
    observer_.AfterCall();
    return result;
  }

  bool abandoned() const { return abandoned_; }

 private:
  NvmlCallObserver& observer_;
  bool abandoned_ = false;
};

namespace {

// The number of MIG device slots looked at on one GPU; NVML reports at most 7 today.
constexpr unsigned kMaxMigDevicesRead = 64;

Status Abandoned() { return UnavailableError("the NVML read was abandoned by the watchdog"); }

// NVML fills fixed buffers; a missing terminator must not make us read past them.
std::string FromBuffer(const char* buffer, size_t size) {
  return std::string(buffer, ::strnlen(buffer, size));
}

template <typename Fn>
Fn Lookup(void* handle, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(handle, name));
}

}  // namespace

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path,
                                                       NvmlCallObserver& observer) {
  struct stat st {};
  if (path.find('/') != std::string::npos && ::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return NotFoundError(path + " does not exist: no NVIDIA driver on this node");
  }
  NvmlCalls calls(observer);
  void* handle = nullptr;
  std::string load_error;
  calls.Run("dlopen", std::nullopt, [&] {
    ::dlerror();
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = ::dlerror();
      load_error = error != nullptr ? error : "unknown dlopen error";
    }
    return NVML_SUCCESS;
  });
  if (calls.abandoned()) return Abandoned();
  if (handle == nullptr) {
    // Only the library itself missing means no driver; a dependency of it that is missing
    // ("libfoo.so: cannot open shared object file: ...") is a broken install.
    if (load_error.starts_with(path + ": cannot open shared object file: No such file")) {
      return NotFoundError("cannot load " + path + ": no NVIDIA driver on this node");
    }
    return FailedPreconditionError("cannot load " + path + ": " + OneLineExcerpt(load_error));
  }
  std::unique_ptr<NvmlLibrary> library(new NvmlLibrary());
  library->handle_ = handle;

  library->init_ = Lookup<nvmlInit_v2_fn>(handle, "nvmlInit_v2");
  library->shutdown_ = Lookup<nvmlShutdown_fn>(handle, "nvmlShutdown");
  library->get_count_ = Lookup<nvmlDeviceGetCount_v2_fn>(handle, "nvmlDeviceGetCount_v2");
  library->get_handle_ =
      Lookup<nvmlDeviceGetHandleByIndex_v2_fn>(handle, "nvmlDeviceGetHandleByIndex_v2");
  std::string missing_required;
  auto require = [&](const void* function, const char* name) {
    if (function != nullptr) return;
    missing_required += missing_required.empty() ? "" : ", ";
    missing_required += name;
  };
  require(reinterpret_cast<const void*>(library->init_), "nvmlInit_v2");
  require(reinterpret_cast<const void*>(library->shutdown_), "nvmlShutdown");
  require(reinterpret_cast<const void*>(library->get_count_), "nvmlDeviceGetCount_v2");
  require(reinterpret_cast<const void*>(library->get_handle_), "nvmlDeviceGetHandleByIndex_v2");
  if (!missing_required.empty()) {
    return FailedPreconditionError(path + " lacks " + missing_required +
                                   " (a driver older than this agent supports?)");
  }

  auto optional = [&]<typename Fn>(Fn& slot, const char* name) {
    slot = Lookup<Fn>(handle, name);
    if (slot == nullptr) library->missing_.emplace_back(name);
  };
  // The first name found wins; `name_slot` says which one, for the watchdog's messages.
  auto first_of = [&]<typename Fn>(Fn& slot, const char*& name_slot,
                                   std::initializer_list<const char*> names) {
    for (const char* name : names) {
      slot = Lookup<Fn>(handle, name);
      if (slot != nullptr) {
        name_slot = name;
        return;
      }
    }
    library->missing_.emplace_back(*names.begin());
  };
  optional(library->error_string_, "nvmlErrorString");
  optional(library->driver_version_, "nvmlSystemGetDriverVersion");
  optional(library->uuid_, "nvmlDeviceGetUUID");
  optional(library->name_, "nvmlDeviceGetName");
  optional(library->pci_info_, "nvmlDeviceGetPciInfo_v3");
  optional(library->utilization_, "nvmlDeviceGetUtilizationRates");
  optional(library->memory_, "nvmlDeviceGetMemoryInfo");
  optional(library->temperature_, "nvmlDeviceGetTemperature");
  optional(library->power_, "nvmlDeviceGetPowerUsage");
  optional(library->power_limit_, "nvmlDeviceGetEnforcedPowerLimit");
  optional(library->clock_, "nvmlDeviceGetClockInfo");
  optional(library->ecc_, "nvmlDeviceGetTotalEccErrors");
  first_of(library->clock_reasons_, library->clock_reasons_name_,
           {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  optional(library->pcie_generation_, "nvmlDeviceGetCurrPcieLinkGeneration");
  optional(library->pcie_width_, "nvmlDeviceGetCurrPcieLinkWidth");
  optional(library->mig_mode_, "nvmlDeviceGetMigMode");
  optional(library->max_mig_devices_, "nvmlDeviceGetMaxMigDeviceCount");
  optional(library->mig_device_, "nvmlDeviceGetMigDeviceHandleByIndex");
  first_of(library->compute_processes_, library->compute_processes_name_,
           {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
            "nvmlDeviceGetComputeRunningProcesses"});
  first_of(library->graphics_processes_, library->graphics_processes_name_,
           {"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2",
            "nvmlDeviceGetGraphicsRunningProcesses"});

  nvmlReturn_t init = calls.Run("nvmlInit_v2", std::nullopt, [&] { return library->init_(); });
  if (calls.abandoned()) return Abandoned();
  if (init != NVML_SUCCESS) {
    return FailedPreconditionError("nvmlInit_v2 failed: " + library->ErrorText(init));
  }
  library->initialized_ = true;
  return library;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_) shutdown_();
  if (handle_ != nullptr) ::dlclose(handle_);
}

std::string NvmlLibrary::ErrorText(nvmlReturn_t code) const {
  const char* text = error_string_ != nullptr ? error_string_(code) : nullptr;
  if (text == nullptr || *text == '\0') return "NVML error " + std::to_string(code);
  return OneLineExcerpt(text, 120);
}

Result<GpuReading> NvmlLibrary::Read(NvmlCallObserver& observer) const {
  NvmlCalls calls(observer);
  GpuReading reading;
  if (driver_version_ != nullptr) {
    char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (calls.Run("nvmlSystemGetDriverVersion", std::nullopt,
                  [&] { return driver_version_(version, sizeof version); }) == NVML_SUCCESS) {
      reading.driver_version = FromBuffer(version, sizeof version);
    }
  }
  unsigned count = 0;
  nvmlReturn_t counted =
      calls.Run("nvmlDeviceGetCount_v2", std::nullopt, [&] { return get_count_(&count); });
  if (calls.abandoned()) return Abandoned();
  if (counted != NVML_SUCCESS) {
    return UnavailableError("nvmlDeviceGetCount_v2 failed: " + ErrorText(counted));
  }
  if (count > kMaxGpus) {
    reading.problems.push_back("NVML counts " + std::to_string(count) + " GPUs; only the first " +
                               std::to_string(kMaxGpus) + " are read");
    count = kMaxGpus;
  }
  for (unsigned index = 0; index < count; ++index) {
    nvmlDevice_t device = nullptr;
    nvmlReturn_t found = calls.Run("nvmlDeviceGetHandleByIndex_v2", index,
                                   [&] { return get_handle_(index, &device); });
    if (calls.abandoned()) return Abandoned();
    if (found != NVML_SUCCESS) {
      reading.problems.push_back("GPU " + std::to_string(index) +
                                 ": nvmlDeviceGetHandleByIndex_v2 failed: " + ErrorText(found));
      continue;
    }
    Gpu gpu;
    gpu.index = index;
    ReadDevice(device, index, calls, gpu);
    if (calls.abandoned()) return Abandoned();
    reading.gpus.push_back(std::move(gpu));
  }
  return reading;
}

void NvmlLibrary::ReadDevice(nvmlDevice_t device, unsigned index, NvmlCalls& calls,
                             Gpu& gpu) const {
  // Runs `call` when the library has `function`; true when it succeeded.
  auto read = [&](const void* function, const char* name, auto&& call) {
    return function != nullptr && calls.Run(name, index, call) == NVML_SUCCESS;
  };
  auto fn = [](auto* function) { return reinterpret_cast<const void*>(function); };

  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (read(fn(uuid_), "nvmlDeviceGetUUID", [&] { return uuid_(device, uuid, sizeof uuid); })) {
    gpu.uuid = FromBuffer(uuid, sizeof uuid);
  }
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (read(fn(name_), "nvmlDeviceGetName", [&] { return name_(device, name, sizeof name); })) {
    gpu.name = FromBuffer(name, sizeof name);
  }
  nvmlPciInfo_t pci{};
  if (read(fn(pci_info_), "nvmlDeviceGetPciInfo_v3", [&] { return pci_info_(device, &pci); })) {
    gpu.pci_bus_id = FromBuffer(pci.busId, sizeof pci.busId);
  }
  nvmlUtilization_t utilization{};
  if (read(fn(utilization_), "nvmlDeviceGetUtilizationRates",
           [&] { return utilization_(device, &utilization); })) {
    gpu.utilization_percent = utilization.gpu;
    gpu.memory_utilization_percent = utilization.memory;
  }
  nvmlMemory_t memory{};
  if (read(fn(memory_), "nvmlDeviceGetMemoryInfo", [&] { return memory_(device, &memory); })) {
    gpu.memory_used_bytes = memory.used;
    gpu.memory_total_bytes = memory.total;
  }
  unsigned value = 0;
  if (read(fn(temperature_), "nvmlDeviceGetTemperature",
           [&] { return temperature_(device, NVML_TEMPERATURE_GPU, &value); })) {
    gpu.temperature_celsius = value;
  }
  if (read(fn(power_), "nvmlDeviceGetPowerUsage", [&] { return power_(device, &value); })) {
    gpu.power_watts = value / 1000.0;
  }
  if (read(fn(power_limit_), "nvmlDeviceGetEnforcedPowerLimit",
           [&] { return power_limit_(device, &value); })) {
    gpu.power_limit_watts = value / 1000.0;
  }
  if (read(fn(clock_), "nvmlDeviceGetClockInfo",
           [&] { return clock_(device, NVML_CLOCK_SM, &value); })) {
    gpu.sm_clock_mhz = value;
  }
  if (read(fn(clock_), "nvmlDeviceGetClockInfo",
           [&] { return clock_(device, NVML_CLOCK_MEM, &value); })) {
    gpu.memory_clock_mhz = value;
  }
  unsigned long long count = 0;
  if (read(fn(ecc_), "nvmlDeviceGetTotalEccErrors", [&] {
        return ecc_(device, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &count);
      })) {
    gpu.ecc_corrected = count;
  }
  if (read(fn(ecc_), "nvmlDeviceGetTotalEccErrors", [&] {
        return ecc_(device, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &count);
      })) {
    gpu.ecc_uncorrected = count;
  }
  unsigned long long reasons = 0;
  if (read(fn(clock_reasons_), clock_reasons_name_,
           [&] { return clock_reasons_(device, &reasons); })) {
    gpu.throttle_reasons = reasons;
  }
  if (read(fn(pcie_generation_), "nvmlDeviceGetCurrPcieLinkGeneration",
           [&] { return pcie_generation_(device, &value); })) {
    gpu.pcie_generation = value;
  }
  if (read(fn(pcie_width_), "nvmlDeviceGetCurrPcieLinkWidth",
           [&] { return pcie_width_(device, &value); })) {
    gpu.pcie_width = value;
  }
  ReadMig(device, index, calls, gpu);
  ReadProcessCount(device, index, calls, gpu);
}

void NvmlLibrary::ReadMig(nvmlDevice_t device, unsigned index, NvmlCalls& calls, Gpu& gpu) const {
  if (mig_mode_ == nullptr) return;
  unsigned current = 0, pending = 0;
  if (calls.Run("nvmlDeviceGetMigMode", index,
                [&] { return mig_mode_(device, &current, &pending); }) != NVML_SUCCESS) {
    return;  // GPUs before Ampere answer "not supported"
  }
  gpu.mig_mode = current == NVML_DEVICE_MIG_ENABLE ? MigMode::kEnabled : MigMode::kDisabled;
  if (gpu.mig_mode != MigMode::kEnabled || max_mig_devices_ == nullptr || mig_device_ == nullptr) {
    return;
  }
  unsigned slots = 0;
  if (calls.Run("nvmlDeviceGetMaxMigDeviceCount", index,
                [&] { return max_mig_devices_(device, &slots); }) != NVML_SUCCESS) {
    return;
  }
  // Slots without a MIG device answer NOT_FOUND; only real handles are instances.
  for (unsigned slot = 0; slot < std::min(slots, kMaxMigDevicesRead); ++slot) {
    nvmlDevice_t mig = nullptr;
    if (calls.Run("nvmlDeviceGetMigDeviceHandleByIndex", index,
                  [&] { return mig_device_(device, slot, &mig); }) == NVML_SUCCESS &&
        mig != nullptr) {
      ++gpu.mig_instances;
    }
  }
}

void NvmlLibrary::ReadProcessCount(nvmlDevice_t device, unsigned index, NvmlCalls& calls,
                                   Gpu& gpu) const {
  enum class Outcome { kCounted, kNotSupported, kFailed };
  // A zero count with no array asks only how many: SUCCESS means none, INSUFFICIENT_SIZE
  // sets the count. Names and pids are never read.
  auto count = [&](nvmlDeviceGetRunningProcesses_fn function, const char* name,
                   unsigned& processes) {
    if (function == nullptr) return Outcome::kNotSupported;
    unsigned found = 0;
    nvmlReturn_t result = calls.Run(name, index, [&] { return function(device, &found, nullptr); });
    if (result == NVML_SUCCESS) {
      processes = 0;
      return Outcome::kCounted;
    }
    if (result == NVML_ERROR_INSUFFICIENT_SIZE) {
      processes = found;
      return Outcome::kCounted;
    }
    return result == NVML_ERROR_NOT_SUPPORTED ? Outcome::kNotSupported : Outcome::kFailed;
  };
  unsigned compute = 0, graphics = 0;
  Outcome compute_outcome = count(compute_processes_, compute_processes_name_, compute);
  Outcome graphics_outcome = count(graphics_processes_, graphics_processes_name_, graphics);
  // A compute-only GPU does not support graphics contexts: it has none. A failed query
  // leaves the sum unknown.
  if (compute_outcome == Outcome::kFailed || graphics_outcome == Outcome::kFailed) return;
  if (compute_outcome == Outcome::kNotSupported && graphics_outcome == Outcome::kNotSupported) {
    return;
  }
  gpu.process_count = compute + graphics;
}

}  // namespace uplink::agent::node
