// The fallback when NVML is unusable: `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`
// run through RunProcess (no shell, bounded output, a hard timeout), and its CSV parsed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/node/gpu/gpu_reading.h"
#include "common/status.h"
#include "common/subprocess.h"  // RunProcess runs it; FindProgram finds it

namespace uplink::agent::node {

// The --query-gpu fields read, named as `nvidia-smi --help-query-gpu` lists them.
enum class SmiField {
  kIndex,                 // index (the only field a row cannot do without)
  kUuid,                  // uuid
  kName,                  // name
  kPciBusId,              // pci.bus_id
  kDriverVersion,         // driver_version
  kUtilizationGpu,        // utilization.gpu, %
  kUtilizationMemory,     // utilization.memory, %
  kMemoryUsed,            // memory.used, MiB
  kMemoryTotal,           // memory.total, MiB
  kTemperature,           // temperature.gpu, °C
  kPowerDraw,             // power.draw, W
  kPowerLimit,            // enforced.power.limit, W (what NVML's enforced limit reports)
  kSmClock,               // clocks.current.sm, MHz
  kMemoryClock,           // clocks.current.memory, MHz
  kEccCorrected,          // ecc.errors.corrected.volatile.total
  kEccUncorrected,        // ecc.errors.uncorrected.volatile.total
  kClockEventReasons,     // clocks_event_reasons.active: R535 and later
  kClockThrottleReasons,  // clocks_throttle_reasons.active: its name before R535
  kPcieGeneration,        // pcie.link.gen.current
  kPcieWidth,             // pcie.link.width.current
  kMigMode,               // mig.mode.current: R450 and later
};

std::string_view SmiFieldName(SmiField field);

// Every field, with the R535 name for the clock reasons.
std::vector<SmiField> DefaultSmiFields();

// argv for querying `fields` (program first).
std::vector<std::string> NvidiaSmiArguments(const std::string& program,
                                            const std::vector<SmiField>& fields);

// Parses the output of that query: one row per GPU, values in `fields` order. A value
// nvidia-smi has none for ("[N/A]", "[Not Supported]", "N/A", any "[...]") leaves the figure
// absent; MiB become bytes. A row that cannot be parsed (wrong number of values, no index)
// is left out and named in `problems`, as is a value that is not what its field holds; at
// most kMaxGpus rows and 1,024 lines are looked at. InvalidArgument when there were lines but
// not one of them was a GPU.
Result<GpuReading> ParseNvidiaSmiCsv(std::string_view output, const std::vector<SmiField>& fields);

// The field this nvidia-smi named in `Field "X" is not a valid field to query.`, when X is
// one of `fields`.
std::optional<SmiField> RejectedSmiField(std::string_view output,
                                         const std::vector<SmiField>& fields);

// Reads the GPUs with nvidia-smi. Keeps the field list between reads: a field this
// nvidia-smi rejects is dropped (the clock reasons fall back to their pre-R535 name) and the
// query is run again, so an old driver costs one extra run once.
class NvidiaSmi {
 public:
  static constexpr size_t kMaxOutputBytes = 1 << 20;

  NvidiaSmi(std::string program, std::chrono::milliseconds timeout);

  Result<GpuReading> Read(const std::atomic<bool>* cancel = nullptr);

  const std::string& program() const { return program_; }
  const std::vector<SmiField>& fields() const { return fields_; }

 private:
  std::string program_;
  std::chrono::milliseconds timeout_;
  std::vector<SmiField> fields_;
};

}  // namespace uplink::agent::node
