// One collection of the node role: what the host's /proc, statvfs and the GPUs said at one
// moment, already parsed. The collectors fill it, the formats render it (Prometheus text with
// node_exporter's and dcgm-exporter's names, and the compact JSON payload shipped to the
// console, docs/protocol.md "Node samples"), and nothing else of the host is ever read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace uplink::agent::node {

// The sources one collection reads. The console's plan names them; all are on by default.
// Bit i is the i-th of protocol::kNodeCollectors, the names the plan uses.
enum class Collector : std::uint32_t {
  kCpu = 1u << 0,         // /proc/stat: CPU time by mode, context switches, forks, boot time
  kMemory = 1u << 1,      // /proc/meminfo
  kLoad = 1u << 2,        // /proc/loadavg
  kUptime = 1u << 3,      // /proc/uptime
  kPressure = 1u << 4,    // /proc/pressure/{cpu,memory,io}
  kNetwork = 1u << 5,     // /proc/1/net/dev (the host's network namespace)
  kDisk = 1u << 6,        // /proc/diskstats
  kFilesystem = 1u << 7,  // /proc/1/mountinfo + statvfs
  kGpu = 1u << 8,         // NVML, or nvidia-smi when NVML is unusable
};

class CollectorSet {
 public:
  constexpr CollectorSet() = default;
  static constexpr CollectorSet All() { return CollectorSet(0x1ff); }
  constexpr bool Has(Collector c) const { return (bits_ & static_cast<std::uint32_t>(c)) != 0; }
  constexpr void Add(Collector c) { bits_ |= static_cast<std::uint32_t>(c); }
  constexpr void Remove(Collector c) { bits_ &= ~static_cast<std::uint32_t>(c); }
  constexpr std::uint32_t bits() const { return bits_; }
  friend constexpr bool operator==(CollectorSet, CollectorSet) = default;

 private:
  constexpr explicit CollectorSet(std::uint32_t bits) : bits_(bits) {}
  std::uint32_t bits_ = 0;
};

// "cpu", "memory", "load", "uptime", "pressure", "network", "disk", "filesystem", "gpu".
std::string_view CollectorName(Collector c);
Result<Collector> ParseCollectorName(std::string_view name);
inline constexpr Collector kAllCollectors[] = {
    Collector::kCpu,     Collector::kMemory,  Collector::kLoad,
    Collector::kUptime,  Collector::kPressure, Collector::kNetwork,
    Collector::kDisk,    Collector::kFilesystem, Collector::kGpu};

// Seconds, as /proc/stat's USER_HZ ticks divided by 100 (the kernel's fixed USER_HZ).
struct CpuTimes {
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
         steal = 0, guest = 0, guest_nice = 0;
};

struct PerCpuTimes {
  int cpu = 0;  // N of "cpuN" (offline CPUs leave gaps)
  CpuTimes times;
};

struct CpuStats {
  CpuTimes total;                    // the "cpu" line
  std::vector<PerCpuTimes> per_cpu;  // the "cpuN" lines, in file order
  std::uint64_t context_switches = 0;  // ctxt
  std::uint64_t interrupts = 0;        // first field of intr
  std::uint64_t forks = 0;             // processes
  std::uint64_t procs_running = 0;
  std::uint64_t procs_blocked = 0;
  std::int64_t boot_time = 0;  // btime, Unix seconds; a change means the node rebooted
};

// One /proc/meminfo line. `name` as in the file ("MemTotal", "Active(anon)"); `value` in bytes
// when the line had a "kB" unit (then `in_bytes`), else the bare count (HugePages_Total).
struct MeminfoField {
  std::string name;
  std::uint64_t value = 0;
  bool in_bytes = false;
};

struct Memory {
  std::vector<MeminfoField> fields;  // every line, in file order
  // The fields the console charts; absent when the file lacks them (old kernels lack
  // MemAvailable).
  std::optional<std::uint64_t> total_bytes, free_bytes, available_bytes, buffers_bytes,
      cached_bytes, swap_total_bytes, swap_free_bytes;
};

struct Load {
  double load1 = 0, load5 = 0, load15 = 0;
};

// One line of /proc/pressure/<resource>: averages in percent, total stall time in seconds.
struct PressureLine {
  double avg10 = 0, avg60 = 0, avg300 = 0;
  double total_seconds = 0;  // the file's microseconds / 1e6
};

struct Pressure {
  std::optional<PressureLine> cpu_some, cpu_full, memory_some, memory_full, io_some, io_full;
};

// One /proc/net/dev row; names as node_exporter's node_network_* families.
struct NetDevice {
  std::string device;
  std::uint64_t receive_bytes = 0, receive_packets = 0, receive_errs = 0, receive_drop = 0,
                receive_fifo = 0, receive_frame = 0, receive_compressed = 0,
                receive_multicast = 0;
  std::uint64_t transmit_bytes = 0, transmit_packets = 0, transmit_errs = 0, transmit_drop = 0,
                transmit_fifo = 0, transmit_colls = 0, transmit_carrier = 0,
                transmit_compressed = 0;
};

// One /proc/diskstats row (Documentation/admin-guide/iostats.rst). Sectors are 512 bytes
// whatever the device's sector size; times are milliseconds.
struct DiskStats {
  std::uint32_t major = 0, minor = 0;
  std::string device;
  std::uint64_t reads_completed = 0, reads_merged = 0, sectors_read = 0, read_ms = 0;
  std::uint64_t writes_completed = 0, writes_merged = 0, sectors_written = 0, write_ms = 0;
  std::uint64_t io_in_progress = 0, io_ms = 0, weighted_io_ms = 0;
  // Kernel 4.18+ (fields 15-18) and 5.5+ (fields 19-20).
  std::optional<std::uint64_t> discards_completed, discards_merged, sectors_discarded,
      discard_ms;
  std::optional<std::uint64_t> flushes_completed, flush_ms;
};

// One mount from /proc/1/mountinfo with its statvfs figures. A mount whose statvfs failed or
// timed out keeps its identity and carries `error` (node_exporter's device_error = 1).
struct Filesystem {
  std::string device, mountpoint, fstype;
  bool readonly = false;
  std::uint64_t size_bytes = 0, free_bytes = 0, avail_bytes = 0, files = 0, files_free = 0;
  std::string error;  // empty when the figures are valid
};

enum class MigMode { kUnsupported, kDisabled, kEnabled };

// One GPU. Every figure is optional: a GPU that does not support a query (or returned an
// error for it) leaves it absent instead of inventing a zero.
struct Gpu {
  unsigned index = 0;
  std::string uuid, name, pci_bus_id;
  std::optional<double> utilization_percent, memory_utilization_percent;
  std::optional<std::uint64_t> memory_used_bytes, memory_total_bytes;
  std::optional<double> temperature_celsius, power_watts, power_limit_watts;
  std::optional<unsigned> sm_clock_mhz, memory_clock_mhz;
  std::optional<std::uint64_t> ecc_corrected, ecc_uncorrected;  // volatile totals
  std::optional<std::uint64_t> throttle_reasons;  // NVML's clocks-throttle-reason bit mask
  std::optional<unsigned> pcie_generation, pcie_width;  // current link
  MigMode mig_mode = MigMode::kUnsupported;
  unsigned mig_instances = 0;
  std::optional<unsigned> process_count;  // compute + graphics processes
};

enum class GpuSource { kNone, kNvml, kNvidiaSmi };
std::string_view GpuSourceName(GpuSource source);  // "none", "nvml", "nvidia-smi"

struct GpuReport {
  GpuSource source = GpuSource::kNone;  // kNone: no NVML and no nvidia-smi: no GPUs here
  std::string driver_version;
  std::vector<Gpu> gpus;
  WallTime read_at{};  // when the GPU data was read (it is cached between fixed-interval reads)
  bool healthy = true;  // false after a hung or failing read; `error` says which
  std::string error;
};

// A source that could not be read: a gap is never silent.
struct Gap {
  std::string source;  // collector name: "pressure", "filesystem", "gpu", ...
  std::string path;    // what was read, as configured ("/host/proc/pressure/cpu"), or empty
  std::string error;   // "No such file or directory", "statvfs timed out after 5 s"
  int errno_value = 0;  // 0 when the failure was not an errno (timeout, parse error)
};

struct NodeSample {
  std::string node;  // the Kubernetes node name
  WallTime collected_at{};
  CollectorSet collected;  // what this collection was asked to read
  std::optional<CpuStats> cpu;
  std::optional<Memory> memory;
  std::optional<Load> load;
  std::optional<double> uptime_seconds;
  std::optional<Pressure> pressure;  // absent where the kernel has no PSI
  std::vector<NetDevice> network;
  std::vector<DiskStats> disks;
  std::vector<Filesystem> filesystems;
  std::optional<GpuReport> gpus;
  std::vector<Gap> gaps;
};

}  // namespace uplink::agent::node
