// The part of the NVML C API that the GPU collector calls, declared from NVIDIA's public NVML
// API reference (docs.nvidia.com/deploy/nvml-api). No NVIDIA header is used: the library is
// loaded at run time with dlopen, and NVML keeps its C ABI stable, adding a versioned symbol
// (nvmlInit_v2, nvmlDeviceGetCount_v2, ...) when a signature changes. Only the types and
// values the collector uses are here.
#pragma once

extern "C" {

typedef int nvmlReturn_t;
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

typedef struct nvmlDevice_st* nvmlDevice_t;

// Buffer sizes the reference gives for the string queries.
inline constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:18:00.0"
} nvmlPciInfo_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;     // percent of the sample period a kernel was running
  unsigned int memory;  // percent of the sample period device memory was read or written
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef int nvmlTemperatureSensors_t;
inline constexpr nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU = 0;

typedef int nvmlClockType_t;
inline constexpr nvmlClockType_t NVML_CLOCK_SM = 1;
inline constexpr nvmlClockType_t NVML_CLOCK_MEM = 2;

typedef int nvmlMemoryErrorType_t;
inline constexpr nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_CORRECTED = 0;
inline constexpr nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;

typedef int nvmlEccCounterType_t;
inline constexpr nvmlEccCounterType_t NVML_VOLATILE_ECC = 0;

inline constexpr unsigned int NVML_DEVICE_MIG_DISABLE = 0;
inline constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 1;

// Never allocated here: the process queries pass a zero count and no array, which NVML
// documents as the way to learn only how many processes there are.
typedef struct nvmlProcessInfo_st nvmlProcessInfo_t;

// Required: without these the library is unusable.
typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int* deviceCount);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index, nvmlDevice_t* device);

// Optional: a missing one leaves its figure absent.
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t result);
typedef nvmlReturn_t (*nvmlSystemGetDriverVersion_fn)(char* version, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetUUID_fn)(nvmlDevice_t device, char* uuid, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t device, char* name, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_v3_fn)(nvmlDevice_t device, nvmlPciInfo_t* pci);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t device,
                                                         nvmlUtilization_t* utilization);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t device, nvmlMemory_t* memory);
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t device,
                                                    nvmlTemperatureSensors_t sensor,
                                                    unsigned int* celsius);
typedef nvmlReturn_t (*nvmlDeviceGetPowerUsage_fn)(nvmlDevice_t device, unsigned int* milliwatts);
typedef nvmlReturn_t (*nvmlDeviceGetEnforcedPowerLimit_fn)(nvmlDevice_t device,
                                                           unsigned int* milliwatts);
typedef nvmlReturn_t (*nvmlDeviceGetClockInfo_fn)(nvmlDevice_t device, nvmlClockType_t type,
                                                  unsigned int* mhz);
typedef nvmlReturn_t (*nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t device,
                                                       nvmlMemoryErrorType_t error_type,
                                                       nvmlEccCounterType_t counter_type,
                                                       unsigned long long* count);
// nvmlDeviceGetCurrentClocksEventReasons (R535+) and the older
// nvmlDeviceGetCurrentClocksThrottleReasons it renames share this signature and bit mask.
typedef nvmlReturn_t (*nvmlDeviceGetCurrentClocksReasons_fn)(nvmlDevice_t device,
                                                             unsigned long long* reasons);
typedef nvmlReturn_t (*nvmlDeviceGetCurrPcieLinkGeneration_fn)(nvmlDevice_t device,
                                                               unsigned int* generation);
typedef nvmlReturn_t (*nvmlDeviceGetCurrPcieLinkWidth_fn)(nvmlDevice_t device, unsigned int* width);
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t device, unsigned int* current_mode,
                                                unsigned int* pending_mode);
typedef nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount_fn)(nvmlDevice_t device, unsigned int* count);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t device,
                                                               unsigned int index,
                                                               nvmlDevice_t* mig_device);
// nvmlDeviceGet{Compute,Graphics}RunningProcesses_v3 and their _v2 and unversioned forerunners:
// the process struct differs between versions, but a zero count with no array only asks
// for the count, so one signature serves them all.
typedef nvmlReturn_t (*nvmlDeviceGetRunningProcesses_fn)(nvmlDevice_t device,
                                                         unsigned int* info_count,
                                                         nvmlProcessInfo_t* infos);

}  // extern "C"
