#include "console/remote_write/node_series.h"

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/time.h"

namespace uplink::console::remote_write {
namespace {

std::optional<double> NumberAt(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  if (value == nullptr || !value->is_number()) return std::nullopt;
  return value->to_number<double>();
}

// Writes series with the origin's labels and the sample's time.
class SeriesWriter {
 public:
  SeriesWriter(WriteRequestBuilder& out, std::string_view node, const SampleOrigin& origin,
               std::int64_t at_ms)
      : out_(out),
        base_{{"job", "uplink"},
              {"instance", node},
              {"cluster", origin.cluster_name},
              {"uplink_connection", origin.connection_id}},
        at_ms_(at_ms) {}

  void Add(std::string_view name, std::optional<double> value,
           std::initializer_list<Label> labels = {}) {
    if (!value) return;
    labels_.assign(std::begin(base_), std::end(base_));
    labels_.insert(labels_.end(), labels.begin(), labels.end());
    out_.Add(name, labels_, *value, at_ms_);
    ++count_;
  }

  size_t count() const { return count_; }

 private:
  WriteRequestBuilder& out_;
  const Label base_[4];
  const std::int64_t at_ms_;
  std::vector<Label> labels_;
  size_t count_ = 0;
};

// The node's totals: the payload carries the kernel's sum over CPUs by mode, not each CPU
// (docs/protocol.md), so node_cpu_seconds_total has `mode` and no `cpu` label; the count of
// CPUs is its own series.
void AddCpu(SeriesWriter& series, const json::object& cpu) {
  const json::object& seconds = ObjectAt(cpu, "seconds");
  for (std::string_view mode :
       {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}) {
    series.Add("node_cpu_seconds_total", NumberAt(seconds, mode), {{"mode", mode}});
  }
  series.Add("uplink_node_cpus", NumberAt(cpu, "count"));
}

void AddMemory(SeriesWriter& series, const json::object& memory) {
  static constexpr std::pair<std::string_view, std::string_view> kFields[] = {
      {"total_bytes", "node_memory_MemTotal_bytes"},
      {"available_bytes", "node_memory_MemAvailable_bytes"},
      {"free_bytes", "node_memory_MemFree_bytes"},
      {"buffers_bytes", "node_memory_Buffers_bytes"},
      {"cached_bytes", "node_memory_Cached_bytes"},
      {"swap_total_bytes", "node_memory_SwapTotal_bytes"},
      {"swap_free_bytes", "node_memory_SwapFree_bytes"}};
  for (const auto& [key, name] : kFields) series.Add(name, NumberAt(memory, key));
}

void AddPressure(SeriesWriter& series, const json::object& pressure) {
  // node_exporter 1.5 shows no cpu "full" line.
  static constexpr std::pair<std::string_view, std::string_view> kFields[] = {
      {"cpu_some_seconds", "node_pressure_cpu_waiting_seconds_total"},
      {"io_some_seconds", "node_pressure_io_waiting_seconds_total"},
      {"io_full_seconds", "node_pressure_io_stalled_seconds_total"},
      {"memory_some_seconds", "node_pressure_memory_waiting_seconds_total"},
      {"memory_full_seconds", "node_pressure_memory_stalled_seconds_total"}};
  for (const auto& [key, name] : kFields) series.Add(name, NumberAt(pressure, key));
}

void AddNetwork(SeriesWriter& series, const json::array& devices) {
  static constexpr std::pair<std::string_view, std::string_view> kFields[] = {
      {"receive_bytes", "node_network_receive_bytes_total"},
      {"transmit_bytes", "node_network_transmit_bytes_total"},
      {"receive_packets", "node_network_receive_packets_total"},
      {"transmit_packets", "node_network_transmit_packets_total"},
      {"receive_errs", "node_network_receive_errs_total"},
      {"transmit_errs", "node_network_transmit_errs_total"},
      {"receive_drop", "node_network_receive_drop_total"},
      {"transmit_drop", "node_network_transmit_drop_total"}};
  for (const json::value& entry : devices) {
    if (!entry.is_object()) continue;
    const json::object& device = entry.get_object();
    const std::string name = StringAt(device, "device");
    for (const auto& [key, metric] : kFields) {
      series.Add(metric, NumberAt(device, key), {{"device", name}});
    }
  }
}

void AddDisks(SeriesWriter& series, const json::array& disks) {
  static constexpr std::pair<std::string_view, std::string_view> kFields[] = {
      {"read_bytes", "node_disk_read_bytes_total"},
      {"written_bytes", "node_disk_written_bytes_total"},
      {"reads_completed", "node_disk_reads_completed_total"},
      {"writes_completed", "node_disk_writes_completed_total"},
      {"io_time_seconds", "node_disk_io_time_seconds_total"}};
  for (const json::value& entry : disks) {
    if (!entry.is_object()) continue;
    const json::object& disk = entry.get_object();
    const std::string name = StringAt(disk, "device");
    for (const auto& [key, metric] : kFields) {
      series.Add(metric, NumberAt(disk, key), {{"device", name}});
    }
  }
}

void AddFilesystems(SeriesWriter& series, const json::array& filesystems) {
  static constexpr std::pair<std::string_view, std::string_view> kFields[] = {
      {"size_bytes", "node_filesystem_size_bytes"},
      {"free_bytes", "node_filesystem_free_bytes"},
      {"avail_bytes", "node_filesystem_avail_bytes"},
      {"files", "node_filesystem_files"},
      {"files_free", "node_filesystem_files_free"}};
  for (const json::value& entry : filesystems) {
    if (!entry.is_object()) continue;
    const json::object& fs = entry.get_object();
    const std::string device = StringAt(fs, "device");
    const std::string fstype = StringAt(fs, "fstype");
    const std::string mountpoint = StringAt(fs, "mountpoint");
    const std::initializer_list<Label> labels = {
        {"device", device}, {"fstype", fstype}, {"mountpoint", mountpoint}};
    // Like node_exporter, a filesystem whose statvfs failed has device_error and nothing else.
    const bool failed = fs.contains("error");
    series.Add("node_filesystem_device_error", failed ? 1 : 0, labels);
    if (failed) continue;
    for (const auto& [key, metric] : kFields) series.Add(metric, NumberAt(fs, key), labels);
    if (const json::value* readonly = fs.if_contains("readonly"); readonly && readonly->is_bool()) {
      series.Add("node_filesystem_readonly", readonly->get_bool() ? 1 : 0, labels);
    }
  }
}

void AddGpus(SeriesWriter& series, const json::array& gpus, std::string_view node) {
  static constexpr std::pair<std::string_view, std::string_view> kFields[] = {
      {"sm_clock_mhz", "DCGM_FI_DEV_SM_CLOCK"},
      {"memory_clock_mhz", "DCGM_FI_DEV_MEM_CLOCK"},
      {"temperature_celsius", "DCGM_FI_DEV_GPU_TEMP"},
      {"power_watts", "DCGM_FI_DEV_POWER_USAGE"},
      {"power_limit_watts", "DCGM_FI_DEV_POWER_MGMT_LIMIT"},
      {"utilization_percent", "DCGM_FI_DEV_GPU_UTIL"},
      {"memory_utilization_percent", "DCGM_FI_DEV_MEM_COPY_UTIL"},
      {"ecc_corrected", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"},
      {"ecc_uncorrected", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"},
      {"throttle_reasons", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"},
      {"pcie_generation", "DCGM_FI_DEV_PCIE_LINK_GEN"},
      {"pcie_width", "DCGM_FI_DEV_PCIE_LINK_WIDTH"}};
  constexpr double kMiB = 1 << 20;
  for (const json::value& entry : gpus) {
    if (!entry.is_object()) continue;
    const json::object& gpu = entry.get_object();
    const std::optional<double> index = NumberAt(gpu, "index");
    if (!index) continue;
    const std::string gpu_label = std::to_string(static_cast<std::int64_t>(*index));
    const std::string device = "nvidia" + gpu_label;
    const std::string uuid = StringAt(gpu, "uuid");
    const std::string model = StringAt(gpu, "name");
    const std::initializer_list<Label> labels = {{"gpu", gpu_label},
                                                 {"UUID", uuid},
                                                 {"device", device},
                                                 {"modelName", model},
                                                 {"Hostname", node}};
    for (const auto& [key, metric] : kFields) series.Add(metric, NumberAt(gpu, key), labels);
    // Framebuffer figures in whole MiB, as DCGM reports them.
    const std::optional<double> used = NumberAt(gpu, "memory_used_bytes");
    const std::optional<double> total = NumberAt(gpu, "memory_total_bytes");
    if (used) series.Add("DCGM_FI_DEV_FB_USED", std::floor(*used / kMiB), labels);
    if (used && total && *used <= *total) {
      series.Add("DCGM_FI_DEV_FB_FREE", std::floor((*total - *used) / kMiB), labels);
    }
  }
}

}  // namespace

Result<size_t> AppendNodeSampleSeries(const json::object& payload, const SampleOrigin& origin,
                                      WriteRequestBuilder& out) {
  const std::string node = StringAt(payload, "node");
  if (node.empty()) return InvalidArgumentError("the node sample names no node");
  auto collected_at = ParseRfc3339(StringAt(payload, "collected_at"));
  if (!collected_at.ok()) {
    return InvalidArgumentError("the node sample's collected_at is not an RFC 3339 time");
  }
  const std::int64_t at_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(collected_at->time_since_epoch())
          .count();
  SeriesWriter series(out, node, origin, at_ms);

  // Only the node's name is known of what node_exporter's uname collector reports; dashboards
  // list their nodes from this series.
  series.Add("node_uname_info", 1, {{"nodename", node}});
  if (const json::value* cpu = payload.if_contains("cpu"); cpu && cpu->is_object()) {
    AddCpu(series, cpu->get_object());
  }
  // node_exporter's boot time, from the uptime when /proc/stat's btime is absent.
  std::optional<double> boot_time = NumberAt(payload, "boot_time");
  const double collected_seconds = static_cast<double>(at_ms) / 1000;
  if (!boot_time) {
    if (auto uptime = NumberAt(payload, "uptime_seconds")) boot_time = collected_seconds - *uptime;
  }
  series.Add("node_boot_time_seconds", boot_time);
  series.Add("node_time_seconds", collected_seconds);
  AddMemory(series, ObjectAt(payload, "memory"));
  const json::object& load = ObjectAt(payload, "load");
  series.Add("node_load1", NumberAt(load, "load1"));
  series.Add("node_load5", NumberAt(load, "load5"));
  series.Add("node_load15", NumberAt(load, "load15"));
  AddPressure(series, ObjectAt(payload, "pressure"));
  AddNetwork(series, ArrayAt(payload, "network"));
  AddDisks(series, ArrayAt(payload, "disks"));
  AddFilesystems(series, ArrayAt(payload, "filesystems"));
  AddGpus(series, ArrayAt(payload, "gpus"), node);
  return series.count();
}

}  // namespace uplink::console::remote_write
