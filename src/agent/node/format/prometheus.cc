#include "agent/node/format/prometheus.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "agent/node/format/text_output.h"
#include "common/metrics.h"

namespace uplink::agent::node {
namespace {

struct Label {
  std::string_view name;
  std::string_view value;
};

// A # HELP text with backslash and newline escaped.
void AppendHelpText(std::string& out, std::string_view help) {
  // Nearly every help text has neither, which two vectorized scans tell.
  if (help.find('\\') == std::string_view::npos && help.find('\n') == std::string_view::npos) {
    out += help;
    return;
  }
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

// One metric family: its # HELP and # TYPE lines come with its first sample, so a family
// without samples leaves no trace.
class Family {
 public:
  Family(std::string& out, std::string_view name, std::string_view help, std::string_view type)
      : out_(out), name_(name), help_(help), type_(type) {}

  void Add(std::initializer_list<Label> labels, double value) {
    if (!started_) {
      out_ += "# HELP ";
      out_ += name_;
      out_ += ' ';
      AppendHelpText(out_, help_);
      out_ += "\n# TYPE ";
      out_ += name_;
      out_ += ' ';
      out_ += type_;
      out_ += '\n';
      started_ = true;
    }
    out_ += name_;
    if (labels.size() > 0) {
      out_ += '{';
      bool first = true;
      for (const Label& label : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += label.name;
        out_ += "=\"";
        AppendLabelValue(out_, label.value);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    metrics::AppendGoFloat(out_, value);
    out_ += '\n';
  }

 private:
  std::string& out_;
  std::string_view name_, help_, type_;
  bool started_ = false;
};

constexpr std::string_view kGauge = "gauge";
constexpr std::string_view kCounter = "counter";

// Decimal text of a small number, for labels ("cpu", "gpu", "errno").
class Decimal {
 public:
  explicit Decimal(std::int64_t value) {
    length_ = static_cast<std::size_t>(std::to_chars(digits_, digits_ + sizeof digits_, value).ptr -
                                       digits_);
  }
  std::string_view view() const { return {digits_, length_}; }

 private:
  char digits_[24];
  std::size_t length_ = 0;
};

void RenderCpu(const NodeSample& sample, std::string& out) {
  const CpuStats& cpu = *sample.cpu;
  struct Mode {
    std::string_view name;
    double CpuTimes::*seconds;
  };
  static constexpr Mode kModes[] = {
      {"user", &CpuTimes::user},     {"nice", &CpuTimes::nice},   {"system", &CpuTimes::system},
      {"idle", &CpuTimes::idle},     {"iowait", &CpuTimes::iowait}, {"irq", &CpuTimes::irq},
      {"softirq", &CpuTimes::softirq}, {"steal", &CpuTimes::steal}};
  Family seconds(out, "node_cpu_seconds_total", "Seconds the CPUs spent in each mode.", kCounter);
  for (const PerCpuTimes& one : cpu.per_cpu) {
    const Decimal id(one.cpu);
    for (const Mode& mode : kModes) {
      seconds.Add({{"cpu", id.view()}, {"mode", mode.name}}, one.times.*mode.seconds);
    }
  }
  // Guest time is also counted in user and nice; node_exporter shows it apart as well.
  Family guest(out, "node_cpu_guest_seconds_total",
               "Seconds the CPUs spent in guests (VMs) for each mode.", kCounter);
  for (const PerCpuTimes& one : cpu.per_cpu) {
    const Decimal id(one.cpu);
    guest.Add({{"cpu", id.view()}, {"mode", "user"}}, one.times.guest);
    guest.Add({{"cpu", id.view()}, {"mode", "nice"}}, one.times.guest_nice);
  }
  Family(out, "node_context_switches_total", "Total number of context switches.", kCounter)
      .Add({}, static_cast<double>(cpu.context_switches));
  Family(out, "node_intr_total", "Total number of interrupts serviced.", kCounter)
      .Add({}, static_cast<double>(cpu.interrupts));
  Family(out, "node_forks_total", "Total number of forks.", kCounter)
      .Add({}, static_cast<double>(cpu.forks));
  Family(out, "node_procs_running", "Number of processes in runnable state.", kGauge)
      .Add({}, static_cast<double>(cpu.procs_running));
  Family(out, "node_procs_blocked", "Number of processes blocked waiting for I/O to complete.",
         kGauge)
      .Add({}, static_cast<double>(cpu.procs_blocked));
}

double UnixSeconds(WallTime t) {
  return static_cast<double>(
             std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count()) /
         1e9;
}

void RenderTimes(const NodeSample& sample, std::string& out) {
  std::optional<double> boot_time;
  if (sample.cpu && sample.cpu->boot_time > 0) {
    boot_time = static_cast<double>(sample.cpu->boot_time);
  } else if (sample.uptime_seconds && sample.collected_at != WallTime{}) {
    boot_time = UnixSeconds(sample.collected_at) - *sample.uptime_seconds;
  }
  if (boot_time) {
    Family(out, "node_boot_time_seconds", "Node boot time, in unixtime.", kGauge)
        .Add({}, *boot_time);
  }
  if (sample.collected_at != WallTime{}) {
    Family(out, "node_time_seconds", "System time in seconds since epoch (1970).", kGauge)
        .Add({}, UnixSeconds(sample.collected_at));
  }
}

bool IsMetricNameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == ':';
}

// Appends node_exporter's name for a meminfo line: "(x)" becomes "_x" (its regexp \((.*)\),
// from the first '(' to the last ')'), and lines in kB get "_bytes". False, with nothing
// appended, when the result is not a valid metric name, which no kernel's meminfo gives.
bool AppendMeminfoKey(const MeminfoField& field, std::string& keys) {
  const std::size_t begin = keys.size();
  std::string_view name = field.name;
  const std::size_t open = name.find('(');
  const std::size_t close = name.rfind(')');
  if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
    keys.append(name.substr(0, open)).append("_");
    keys.append(name.substr(open + 1, close - open - 1)).append(name.substr(close + 1));
  } else {
    keys.append(name);
  }
  if (field.in_bytes) keys += "_bytes";
  if (keys.size() == begin || !std::all_of(keys.begin() + static_cast<std::ptrdiff_t>(begin),
                                           keys.end(), IsMetricNameCharacter)) {
    keys.resize(begin);
    return false;
  }
  return true;
}

void RenderMemory(const Memory& memory, std::string& out) {
  // The keys side by side in one buffer rather than a string each.
  struct Span {
    std::uint32_t begin = 0, size = 0;  // size 0: the line is left out
  };
  std::string key_text;
  key_text.reserve(memory.fields.size() * 24);
  std::vector<Span> spans(memory.fields.size());
  for (std::size_t i = 0; i < memory.fields.size(); ++i) {
    const std::size_t begin = key_text.size();
    if (!AppendMeminfoKey(memory.fields[i], key_text)) continue;
    spans[i] = {static_cast<std::uint32_t>(begin),
                static_cast<std::uint32_t>(key_text.size() - begin)};
  }
  auto key = [&](std::size_t i) {
    return std::string_view(key_text).substr(spans[i].begin, spans[i].size);
  };
  // Two lines mangled to one name would be one series twice; the first stays. Distinct hashes
  // prove there is no such pair for far less than sorting the keys.
  std::vector<std::size_t> hashes;
  hashes.reserve(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].size != 0) hashes.push_back(std::hash<std::string_view>{}(key(i)));
  }
  std::sort(hashes.begin(), hashes.end());
  if (std::adjacent_find(hashes.begin(), hashes.end()) != hashes.end()) {
    std::vector<std::uint32_t> order(spans.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
    std::vector<bool> repeated(spans.size(), false);
    for (std::size_t i = 1; i < order.size(); ++i) {
      if (key(order[i]) == key(order[i - 1])) repeated[order[i]] = true;
    }
    for (std::size_t i = 0; i < spans.size(); ++i) {
      if (repeated[i]) spans[i].size = 0;
    }
  }
  constexpr std::string_view kNamePrefix = "node_memory_";
  constexpr std::string_view kHelpPrefix = "Memory information field ";
  std::string name(kNamePrefix), help(kHelpPrefix);
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].size == 0) continue;
    const std::string_view k = key(i);
    name.resize(kNamePrefix.size());
    name += k;
    help.resize(kHelpPrefix.size());
    help += k;
    help += '.';
    Family(out, name, help, k.ends_with("_total") ? kCounter : kGauge)
        .Add({}, static_cast<double>(memory.fields[i].value));
  }
}

void RenderLoad(const Load& load, std::string& out) {
  Family(out, "node_load1", "1m load average.", kGauge).Add({}, load.load1);
  Family(out, "node_load5", "5m load average.", kGauge).Add({}, load.load5);
  Family(out, "node_load15", "15m load average.", kGauge).Add({}, load.load15);
}

void RenderPressure(const Pressure& pressure, std::string& out) {
  // node_exporter 1.5 shows no cpu "full" line.
  struct Stall {
    std::string_view name, help;
    const std::optional<PressureLine>& line;
  };
  const Stall stalls[] = {
      {"node_pressure_cpu_waiting_seconds_total",
       "Total time in seconds that processes have waited for CPU time", pressure.cpu_some},
      {"node_pressure_io_waiting_seconds_total",
       "Total time in seconds that processes have waited due to IO congestion", pressure.io_some},
      {"node_pressure_io_stalled_seconds_total",
       "Total time in seconds no process could make progress due to IO congestion",
       pressure.io_full},
      {"node_pressure_memory_waiting_seconds_total",
       "Total time in seconds that processes have waited for memory", pressure.memory_some},
      {"node_pressure_memory_stalled_seconds_total",
       "Total time in seconds no process could make progress due to memory congestion",
       pressure.memory_full}};
  for (const Stall& stall : stalls) {
    if (stall.line) Family(out, stall.name, stall.help, kCounter).Add({}, stall.line->total_seconds);
  }
}

void RenderNetwork(const std::vector<NetDevice>& devices, std::string& out) {
  struct Statistic {
    std::string_view name, help;
    std::uint64_t NetDevice::*value;
  };
  static constexpr Statistic kStatistics[] = {
      {"node_network_receive_bytes_total", "Network device statistic receive_bytes.",
       &NetDevice::receive_bytes},
      {"node_network_receive_packets_total", "Network device statistic receive_packets.",
       &NetDevice::receive_packets},
      {"node_network_receive_errs_total", "Network device statistic receive_errs.",
       &NetDevice::receive_errs},
      {"node_network_receive_drop_total", "Network device statistic receive_drop.",
       &NetDevice::receive_drop},
      {"node_network_receive_fifo_total", "Network device statistic receive_fifo.",
       &NetDevice::receive_fifo},
      {"node_network_receive_frame_total", "Network device statistic receive_frame.",
       &NetDevice::receive_frame},
      {"node_network_receive_compressed_total", "Network device statistic receive_compressed.",
       &NetDevice::receive_compressed},
      {"node_network_receive_multicast_total", "Network device statistic receive_multicast.",
       &NetDevice::receive_multicast},
      {"node_network_transmit_bytes_total", "Network device statistic transmit_bytes.",
       &NetDevice::transmit_bytes},
      {"node_network_transmit_packets_total", "Network device statistic transmit_packets.",
       &NetDevice::transmit_packets},
      {"node_network_transmit_errs_total", "Network device statistic transmit_errs.",
       &NetDevice::transmit_errs},
      {"node_network_transmit_drop_total", "Network device statistic transmit_drop.",
       &NetDevice::transmit_drop},
      {"node_network_transmit_fifo_total", "Network device statistic transmit_fifo.",
       &NetDevice::transmit_fifo},
      {"node_network_transmit_colls_total", "Network device statistic transmit_colls.",
       &NetDevice::transmit_colls},
      {"node_network_transmit_carrier_total", "Network device statistic transmit_carrier.",
       &NetDevice::transmit_carrier},
      {"node_network_transmit_compressed_total", "Network device statistic transmit_compressed.",
       &NetDevice::transmit_compressed}};
  for (const Statistic& statistic : kStatistics) {
    Family family(out, statistic.name, statistic.help, kCounter);
    for (const NetDevice& device : devices) {
      family.Add({{"device", device.device}}, static_cast<double>(device.*statistic.value));
    }
  }
}

void RenderDisks(const std::vector<DiskStats>& disks, std::string& out) {
  // node_exporter's node_disk_info also has path, wwn, model, serial and revision from udev,
  // which the node role does not read; an absent label and an empty one are the same series.
  Family info(out, "node_disk_info", "Info of /sys/block/<block_device>.", kGauge);
  for (const DiskStats& disk : disks) {
    const Decimal major(disk.major), minor(disk.minor);
    info.Add({{"device", disk.device}, {"major", major.view()}, {"minor", minor.view()}}, 1);
  }
  constexpr double kSectorBytes = 512;  // diskstats counts 512-byte sectors on every device
  constexpr double kSecondsPerMs = 1.0 / 1000.0;
  struct Statistic {
    std::string_view name, help, type;
    std::optional<double> (*value)(const DiskStats&);
  };
  static constexpr Statistic kStatistics[] = {
      {"node_disk_reads_completed_total", "The total number of reads completed successfully.",
       kCounter, [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.reads_completed);
       }},
      {"node_disk_reads_merged_total", "The total number of reads merged.", kCounter,
       [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.reads_merged);
       }},
      {"node_disk_read_bytes_total", "The total number of bytes read successfully.", kCounter,
       [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.sectors_read) * kSectorBytes;
       }},
      {"node_disk_read_time_seconds_total", "The total number of seconds spent by all reads.",
       kCounter, [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.read_ms) * kSecondsPerMs;
       }},
      {"node_disk_writes_completed_total", "The total number of writes completed successfully.",
       kCounter, [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.writes_completed);
       }},
      {"node_disk_writes_merged_total", "The number of writes merged.", kCounter,
       [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.writes_merged);
       }},
      {"node_disk_written_bytes_total", "The total number of bytes written successfully.",
       kCounter, [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.sectors_written) * kSectorBytes;
       }},
      {"node_disk_write_time_seconds_total",
       "This is the total number of seconds spent by all writes.", kCounter,
       [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.write_ms) * kSecondsPerMs;
       }},
      {"node_disk_io_now", "The number of I/Os currently in progress.", kGauge,
       [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.io_in_progress);
       }},
      {"node_disk_io_time_seconds_total", "Total seconds spent doing I/Os.", kCounter,
       [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.io_ms) * kSecondsPerMs;
       }},
      {"node_disk_io_time_weighted_seconds_total", "The weighted # of seconds spent doing I/Os.",
       kCounter, [](const DiskStats& d) -> std::optional<double> {
         return static_cast<double>(d.weighted_io_ms) * kSecondsPerMs;
       }},
      {"node_disk_discards_completed_total",
       "The total number of discards completed successfully.", kCounter,
       [](const DiskStats& d) -> std::optional<double> {
         if (!d.discards_completed) return std::nullopt;
         return static_cast<double>(*d.discards_completed);
       }},
      {"node_disk_discards_merged_total", "The total number of discards merged.", kCounter,
       [](const DiskStats& d) -> std::optional<double> {
         if (!d.discards_merged) return std::nullopt;
         return static_cast<double>(*d.discards_merged);
       }},
      // Sectors, not bytes: node_exporter 1.5 leaves this one unscaled.
      {"node_disk_discarded_sectors_total", "The total number of sectors discarded successfully.",
       kCounter, [](const DiskStats& d) -> std::optional<double> {
         if (!d.sectors_discarded) return std::nullopt;
         return static_cast<double>(*d.sectors_discarded);
       }},
      {"node_disk_discard_time_seconds_total",
       "This is the total number of seconds spent by all discards.", kCounter,
       [](const DiskStats& d) -> std::optional<double> {
         if (!d.discard_ms) return std::nullopt;
         return static_cast<double>(*d.discard_ms) * kSecondsPerMs;
       }},
      {"node_disk_flush_requests_total", "The total number of flush requests completed successfully",
       kCounter, [](const DiskStats& d) -> std::optional<double> {
         if (!d.flushes_completed) return std::nullopt;
         return static_cast<double>(*d.flushes_completed);
       }},
      {"node_disk_flush_requests_time_seconds_total",
       "This is the total number of seconds spent by all flush requests.", kCounter,
       [](const DiskStats& d) -> std::optional<double> {
         if (!d.flush_ms) return std::nullopt;
         return static_cast<double>(*d.flush_ms) * kSecondsPerMs;
       }}};
  for (const Statistic& statistic : kStatistics) {
    Family family(out, statistic.name, statistic.help, statistic.type);
    for (const DiskStats& disk : disks) {
      if (auto value = statistic.value(disk)) family.Add({{"device", disk.device}}, *value);
    }
  }
}

void RenderFilesystems(const std::vector<Filesystem>& filesystems, std::string& out) {
  auto add = [&](Family& family, const Filesystem& fs, double value) {
    family.Add({{"device", fs.device}, {"fstype", fs.fstype}, {"mountpoint", fs.mountpoint}},
               value);
  };
  Family device_error(out, "node_filesystem_device_error",
                      "Whether an error occurred while getting statistics for the given device.",
                      kGauge);
  for (const Filesystem& fs : filesystems) add(device_error, fs, fs.error.empty() ? 0 : 1);
  struct Figure {
    std::string_view name, help;
    double (*value)(const Filesystem&);
  };
  static constexpr Figure kFigures[] = {
      {"node_filesystem_size_bytes", "Filesystem size in bytes.",
       [](const Filesystem& fs) { return static_cast<double>(fs.size_bytes); }},
      {"node_filesystem_free_bytes", "Filesystem free space in bytes.",
       [](const Filesystem& fs) { return static_cast<double>(fs.free_bytes); }},
      {"node_filesystem_avail_bytes", "Filesystem space available to non-root users in bytes.",
       [](const Filesystem& fs) { return static_cast<double>(fs.avail_bytes); }},
      {"node_filesystem_files", "Filesystem total file nodes.",
       [](const Filesystem& fs) { return static_cast<double>(fs.files); }},
      {"node_filesystem_files_free", "Filesystem total free file nodes.",
       [](const Filesystem& fs) { return static_cast<double>(fs.files_free); }},
      {"node_filesystem_readonly", "Filesystem read-only status.",
       [](const Filesystem& fs) { return fs.readonly ? 1.0 : 0.0; }}};
  // Like node_exporter, a filesystem that failed has device_error and nothing else.
  for (const Figure& figure : kFigures) {
    Family family(out, figure.name, figure.help, kGauge);
    for (const Filesystem& fs : filesystems) {
      if (fs.error.empty()) add(family, fs, figure.value(fs));
    }
  }
}

void RenderGpus(const GpuReport& report, std::string_view hostname, std::string& out) {
  struct Figure {
    std::string_view name, help, type;
    std::optional<double> (*value)(const Gpu&);
  };
  static constexpr Figure kFigures[] = {
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", kGauge,
       [](const Gpu& g) -> std::optional<double> { return g.sm_clock_mhz; }},
      {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", kGauge,
       [](const Gpu& g) -> std::optional<double> { return g.memory_clock_mhz; }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", kGauge,
       [](const Gpu& g) { return g.temperature_celsius; }},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", kGauge,
       [](const Gpu& g) { return g.power_watts; }},
      {"DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W).", kGauge,
       [](const Gpu& g) { return g.power_limit_watts; }},
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", kGauge,
       [](const Gpu& g) { return g.utilization_percent; }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", kGauge,
       [](const Gpu& g) { return g.memory_utilization_percent; }},
      // Whole MiB, as DCGM reports them.
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", kGauge,
       [](const Gpu& g) -> std::optional<double> {
         if (!g.memory_total_bytes || !g.memory_used_bytes ||
             *g.memory_used_bytes > *g.memory_total_bytes) {
           return std::nullopt;
         }
         return static_cast<double>((*g.memory_total_bytes - *g.memory_used_bytes) >> 20);
       }},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", kGauge,
       [](const Gpu& g) -> std::optional<double> {
         if (!g.memory_used_bytes) return std::nullopt;
         return static_cast<double>(*g.memory_used_bytes >> 20);
       }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
       kCounter, [](const Gpu& g) -> std::optional<double> { return g.ecc_corrected; }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
       kCounter, [](const Gpu& g) -> std::optional<double> { return g.ecc_uncorrected; }},
      {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
       "Current clock throttle reasons (bitmask of DCGM_CLOCKS_THROTTLE_REASON_*).", kGauge,
       [](const Gpu& g) -> std::optional<double> { return g.throttle_reasons; }},
      {"DCGM_FI_DEV_PCIE_LINK_GEN", "PCIe link generation.", kGauge,
       [](const Gpu& g) -> std::optional<double> { return g.pcie_generation; }},
      {"DCGM_FI_DEV_PCIE_LINK_WIDTH", "PCIe link width.", kGauge,
       [](const Gpu& g) -> std::optional<double> { return g.pcie_width; }}};
  for (const Figure& figure : kFigures) {
    Family family(out, figure.name, figure.help, figure.type);
    for (const Gpu& gpu : report.gpus) {
      const auto value = figure.value(gpu);
      if (!value) continue;
      const Decimal index(gpu.index);
      const std::string device = "nvidia" + std::string(index.view());
      if (gpu.pci_bus_id.empty()) {
        family.Add({{"gpu", index.view()},
                    {"UUID", gpu.uuid},
                    {"device", device},
                    {"modelName", gpu.name},
                    {"Hostname", hostname}},
                   *value);
      } else {
        family.Add({{"gpu", index.view()},
                    {"UUID", gpu.uuid},
                    {"pci_bus_id", gpu.pci_bus_id},
                    {"device", device},
                    {"modelName", gpu.name},
                    {"Hostname", hostname}},
                   *value);
      }
    }
  }
}

void RenderCollectorHealth(const NodeSample& sample, std::string& out) {
  Family up(out, "uplink_node_collector_up",
            "Whether the collector read every source it reads (0: see "
            "uplink_node_scrape_error_info).",
            kGauge);
  for (Collector collector : kAllCollectors) {
    if (!sample.collected.Has(collector)) continue;
    const std::string_view name = CollectorName(collector);
    const bool failed = std::any_of(sample.gaps.begin(), sample.gaps.end(),
                                    [&](const Gap& gap) { return gap.source == name; });
    up.Add({{"collector", name}}, failed ? 0 : 1);
  }
  // Identical gaps would be one series twice; the first stays.
  const std::vector<Gap>& gaps = sample.gaps;
  auto identity = [&](std::uint32_t i) {
    return std::tie(gaps[i].source, gaps[i].path, gaps[i].errno_value, gaps[i].error);
  };
  std::vector<std::uint32_t> order(gaps.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return identity(a) < identity(b); });
  std::vector<bool> repeated(gaps.size(), false);
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (identity(order[i]) == identity(order[i - 1])) repeated[order[i]] = true;
  }
  Family errors(out, "uplink_node_scrape_error_info",
                "A source the node role could not read or parse in this collection.", kGauge);
  for (std::size_t i = 0; i < gaps.size(); ++i) {
    if (repeated[i]) continue;
    const Decimal errno_text(gaps[i].errno_value);
    errors.Add({{"source", gaps[i].source},
                {"path", gaps[i].path},
                {"errno", errno_text.view()},
                {"error", gaps[i].error}},
               1);
  }
}

// About what the text of `sample` takes, so `out` grows once rather than doubling its way
// there (copying what it holds each time). Series run about 80 bytes, # HELP and # TYPE lines
// about 100 a family.
std::size_t EstimatedBytes(const NodeSample& sample) {
  constexpr std::size_t kSeries = 80, kFamily = 100;
  std::size_t bytes = 40 * kFamily;  // CPU, load, pressure, health and the like
  if (sample.cpu) bytes += sample.cpu->per_cpu.size() * 10 * kSeries;
  if (sample.memory) bytes += sample.memory->fields.size() * (kSeries + kFamily);
  bytes += (sample.network.size() * 16 + sample.disks.size() * 18) * kSeries;
  bytes += sample.filesystems.size() * 7 * 2 * kSeries;  // three labels each
  if (sample.gpus) bytes += sample.gpus->gpus.size() * 14 * 2 * kSeries;
  bytes += sample.gaps.size() * 2 * kSeries;
  return bytes;
}

}  // namespace

void RenderPrometheus(const NodeSample& sample, std::string& out) {
  out.reserve(out.size() + EstimatedBytes(sample));
  if (sample.cpu) RenderCpu(sample, out);
  RenderTimes(sample, out);
  if (sample.memory) RenderMemory(*sample.memory, out);
  if (sample.load) RenderLoad(*sample.load, out);
  if (sample.pressure) RenderPressure(*sample.pressure, out);
  RenderNetwork(sample.network, out);
  RenderDisks(sample.disks, out);
  RenderFilesystems(sample.filesystems, out);
  if (sample.gpus) RenderGpus(*sample.gpus, sample.node, out);
  RenderCollectorHealth(sample, out);
}

}  // namespace uplink::agent::node
