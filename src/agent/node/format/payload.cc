#include "agent/node/format/payload.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "agent/node/format/text_output.h"
#include "common/time.h"

namespace uplink::agent::node {
namespace {

// Writes JSON straight into a string, no document tree: this runs every cycle. Commas come
// from `need_comma_`, set after each value and cleared after an opening bracket or a key.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }

  void Key(std::string_view key) {
    Separate();
    AppendJsonString(out_, key, key.size());
    out_ += ':';
    need_comma_ = false;
  }

  void String(std::string_view key, std::string_view value, std::size_t max_bytes) {
    Key(key);
    AppendJsonString(out_, value, max_bytes);
    need_comma_ = true;
  }
  void Number(std::string_view key, std::uint64_t value) {
    Key(key);
    AppendJsonNumber(out_, value);
    need_comma_ = true;
  }
  void Number(std::string_view key, std::int64_t value) {
    Key(key);
    AppendJsonNumber(out_, value);
    need_comma_ = true;
  }
  // The protocol allows finite numbers only; anything else leaves the key out.
  void Number(std::string_view key, double value) {
    if (!std::isfinite(value)) return;
    Key(key);
    AppendJsonNumber(out_, value);
    need_comma_ = true;
  }
  void Bool(std::string_view key, bool value) {
    Key(key);
    out_ += value ? "true" : "false";
    need_comma_ = true;
  }
  template <typename T>
  void Optional(std::string_view key, const std::optional<T>& value) {
    if (!value) return;
    if constexpr (std::is_floating_point_v<T>) {
      Number(key, static_cast<double>(*value));
    } else {
      Number(key, static_cast<std::uint64_t>(*value));
    }
  }

 private:
  void Separate() {
    if (need_comma_) out_ += ',';
  }
  void Open(char bracket) {
    Separate();
    out_ += bracket;
    need_comma_ = false;
  }
  void Close(char bracket) {
    out_ += bracket;
    need_comma_ = true;
  }

  std::string& out_;
  bool need_comma_ = false;
};

std::uint64_t SectorsToBytes(std::uint64_t sectors) {
  constexpr std::uint64_t kSectorBytes = 512;  // whatever the device's own sector size
  return sectors > std::numeric_limits<std::uint64_t>::max() / kSectorBytes
             ? std::numeric_limits<std::uint64_t>::max()
             : sectors * kSectorBytes;
}

bool HasGap(const NodeSample& sample, Collector collector) {
  const std::string_view name = CollectorName(collector);
  return std::any_of(sample.gaps.begin(), sample.gaps.end(),
                     [&](const Gap& gap) { return gap.source == name; });
}

// Whether a vector section is written: asked for, and not empty because its source failed.
template <typename T>
bool WriteSection(const NodeSample& sample, Collector collector, const std::vector<T>& items) {
  return sample.collected.Has(collector) && (!items.empty() || !HasGap(sample, collector));
}

// Writes at most `cap` items; when some are left out, a gap says so.
template <typename T, typename WriteOne>
void WriteCapped(JsonWriter& json, std::string_view key, const std::vector<T>& items,
                 std::size_t cap, Collector collector, std::string_view noun,
                 std::vector<Gap>& truncations, WriteOne write_one) {
  json.Key(key);
  json.BeginArray();
  const std::size_t written = std::min(items.size(), cap);
  for (std::size_t i = 0; i < written; ++i) write_one(items[i]);
  json.EndArray();
  if (written < items.size()) {
    truncations.push_back({std::string(CollectorName(collector)), "",
                           std::to_string(items.size()) + " " + std::string(noun) +
                               "; the first " + std::to_string(cap) + " are sent",
                           0});
  }
}

void WriteGap(JsonWriter& json, const Gap& gap) {
  json.BeginObject();
  json.String("source", gap.source, protocol::kMaxSampleString);
  json.String("path", gap.path, protocol::kMaxSamplePath);
  json.String("error", gap.error, protocol::kMaxSampleString);
  json.Number("errno", static_cast<std::int64_t>(gap.errno_value));
  json.EndObject();
}

void WriteGpu(JsonWriter& json, const Gpu& gpu) {
  json.BeginObject();
  json.Number("index", static_cast<std::uint64_t>(gpu.index));
  json.String("uuid", gpu.uuid, protocol::kMaxSampleString);
  json.String("name", gpu.name, protocol::kMaxSampleString);
  json.Optional("utilization_percent", gpu.utilization_percent);
  json.Optional("memory_utilization_percent", gpu.memory_utilization_percent);
  json.Optional("memory_used_bytes", gpu.memory_used_bytes);
  json.Optional("memory_total_bytes", gpu.memory_total_bytes);
  json.Optional("temperature_celsius", gpu.temperature_celsius);
  json.Optional("power_watts", gpu.power_watts);
  json.Optional("power_limit_watts", gpu.power_limit_watts);
  json.Optional("sm_clock_mhz", gpu.sm_clock_mhz);
  json.Optional("memory_clock_mhz", gpu.memory_clock_mhz);
  json.Optional("ecc_corrected", gpu.ecc_corrected);
  json.Optional("ecc_uncorrected", gpu.ecc_uncorrected);
  json.Optional("throttle_reasons", gpu.throttle_reasons);
  json.Optional("pcie_generation", gpu.pcie_generation);
  json.Optional("pcie_width", gpu.pcie_width);
  if (gpu.mig_mode != MigMode::kUnsupported) {
    json.String("mig_mode", gpu.mig_mode == MigMode::kEnabled ? "enabled" : "disabled",
                protocol::kMaxSampleString);
    json.Number("mig_instances", static_cast<std::uint64_t>(gpu.mig_instances));
  }
  json.Optional("processes", gpu.process_count);
  json.EndObject();
}

}  // namespace

std::string RenderPayload(const NodeSample& sample) {
  std::string out;
  out.reserve(4096);
  JsonWriter json(out);
  std::vector<Gap> truncations;
  json.BeginObject();
  json.String("kind", protocol::kNodeSampleKind, protocol::kMaxSampleString);
  json.Number("version", protocol::kNodeSampleVersion);
  json.String("node", sample.node, protocol::kMaxSampleString);
  json.String("collected_at", FormatRfc3339Millis(sample.collected_at), protocol::kMaxSampleString);

  if (sample.cpu) {
    const CpuStats& cpu = *sample.cpu;
    if (cpu.boot_time > 0) json.Number("boot_time", cpu.boot_time);
    json.Key("cpu");
    json.BeginObject();
    json.Number("count", static_cast<std::uint64_t>(cpu.per_cpu.size()));
    // The "cpu" line: the kernel's own sum over CPUs.
    json.Key("seconds");
    json.BeginObject();
    json.Number("user", cpu.total.user);
    json.Number("nice", cpu.total.nice);
    json.Number("system", cpu.total.system);
    json.Number("idle", cpu.total.idle);
    json.Number("iowait", cpu.total.iowait);
    json.Number("irq", cpu.total.irq);
    json.Number("softirq", cpu.total.softirq);
    json.Number("steal", cpu.total.steal);
    json.EndObject();
    json.EndObject();
  }

  if (sample.memory) {
    const Memory& memory = *sample.memory;
    json.Key("memory");
    json.BeginObject();
    json.Optional("total_bytes", memory.total_bytes);
    json.Optional("available_bytes", memory.available_bytes);
    json.Optional("free_bytes", memory.free_bytes);
    json.Optional("buffers_bytes", memory.buffers_bytes);
    json.Optional("cached_bytes", memory.cached_bytes);
    json.Optional("swap_total_bytes", memory.swap_total_bytes);
    json.Optional("swap_free_bytes", memory.swap_free_bytes);
    json.EndObject();
  }

  if (sample.load) {
    json.Key("load");
    json.BeginObject();
    json.Number("load1", sample.load->load1);
    json.Number("load5", sample.load->load5);
    json.Number("load15", sample.load->load15);
    json.EndObject();
  }

  if (sample.uptime_seconds) json.Number("uptime_seconds", *sample.uptime_seconds);

  if (sample.pressure) {
    const Pressure& pressure = *sample.pressure;
    const std::pair<std::string_view, const std::optional<PressureLine>*> lines[] = {
        {"cpu_some_seconds", &pressure.cpu_some},
        {"cpu_full_seconds", &pressure.cpu_full},
        {"memory_some_seconds", &pressure.memory_some},
        {"memory_full_seconds", &pressure.memory_full},
        {"io_some_seconds", &pressure.io_some},
        {"io_full_seconds", &pressure.io_full}};
    json.Key("pressure");
    json.BeginObject();
    for (const auto& [key, line] : lines) {
      if (*line) json.Number(key, (*line)->total_seconds);
    }
    json.EndObject();
  }

  if (WriteSection(sample, Collector::kNetwork, sample.network)) {
    WriteCapped(json, "network", sample.network, protocol::kMaxSampleInterfaces,
                Collector::kNetwork, "interfaces", truncations, [&](const NetDevice& device) {
                  json.BeginObject();
                  json.String("device", device.device, protocol::kMaxSampleString);
                  json.Number("receive_bytes", device.receive_bytes);
                  json.Number("transmit_bytes", device.transmit_bytes);
                  json.Number("receive_packets", device.receive_packets);
                  json.Number("transmit_packets", device.transmit_packets);
                  json.Number("receive_errs", device.receive_errs);
                  json.Number("transmit_errs", device.transmit_errs);
                  json.Number("receive_drop", device.receive_drop);
                  json.Number("transmit_drop", device.transmit_drop);
                  json.EndObject();
                });
  }

  if (WriteSection(sample, Collector::kDisk, sample.disks)) {
    WriteCapped(json, "disks", sample.disks, protocol::kMaxSampleDisks, Collector::kDisk, "disks",
                truncations, [&](const DiskStats& disk) {
                  json.BeginObject();
                  json.String("device", disk.device, protocol::kMaxSampleString);
                  json.Number("read_bytes", SectorsToBytes(disk.sectors_read));
                  json.Number("written_bytes", SectorsToBytes(disk.sectors_written));
                  json.Number("reads_completed", disk.reads_completed);
                  json.Number("writes_completed", disk.writes_completed);
                  json.Number("io_time_seconds", static_cast<double>(disk.io_ms) / 1000.0);
                  json.EndObject();
                });
  }

  if (WriteSection(sample, Collector::kFilesystem, sample.filesystems)) {
    WriteCapped(json, "filesystems", sample.filesystems, protocol::kMaxSampleFilesystems,
                Collector::kFilesystem, "filesystems", truncations, [&](const Filesystem& fs) {
                  json.BeginObject();
                  json.String("mountpoint", fs.mountpoint, protocol::kMaxSamplePath);
                  json.String("device", fs.device, protocol::kMaxSamplePath);
                  json.String("fstype", fs.fstype, protocol::kMaxSampleString);
                  if (!fs.error.empty()) {
                    json.String("error", fs.error, protocol::kMaxSampleString);
                  } else {
                    json.Number("size_bytes", fs.size_bytes);
                    json.Number("avail_bytes", fs.avail_bytes);
                    json.Number("free_bytes", fs.free_bytes);
                    json.Number("files", fs.files);
                    json.Number("files_free", fs.files_free);
                    json.Bool("readonly", fs.readonly);
                  }
                  json.EndObject();
                });
  }

  if (sample.gpus) {
    json.String("gpu_source", GpuSourceName(sample.gpus->source), protocol::kMaxSampleString);
    WriteCapped(json, "gpus", sample.gpus->gpus, protocol::kMaxSampleGpus, Collector::kGpu, "GPUs",
                truncations, [&](const Gpu& gpu) { WriteGpu(json, gpu); });
  }

  // The notes of what was left out go last and always fit: the sample's own gaps make room.
  std::size_t own = sample.gaps.size();
  if (own + truncations.size() > protocol::kMaxSampleGaps) {
    own = protocol::kMaxSampleGaps - truncations.size() - 1;
    truncations.push_back({sample.gaps[own].source, "",
                           std::to_string(sample.gaps.size() - own) +
                               " more gaps; the payload carries " +
                               std::to_string(protocol::kMaxSampleGaps),
                           0});
  }
  json.Key("gaps");
  json.BeginArray();
  for (std::size_t i = 0; i < own; ++i) WriteGap(json, sample.gaps[i]);
  for (const Gap& gap : truncations) WriteGap(json, gap);
  json.EndArray();
  json.EndObject();
  return out;
}

}  // namespace uplink::agent::node
