#include "protocol/node_sample.h"

#include <cmath>
#include <set>
#include <span>

#include "common/json.h"
#include "common/text.h"
#include "protocol/agent_api.h"

namespace uplink::protocol {
namespace {

// Larger than any real figure (a petabyte is 10^15 bytes; ten years of 1,024 CPUs are
// 3*10^11 CPU-seconds), small enough that sums over every entry stay finite.
constexpr double kMaxSampleNumber = 1e18;
constexpr std::int64_t kMaxCpuCount = 1 << 20;
constexpr std::int64_t kMaxGpuIndex = 1 << 16;
constexpr std::int64_t kMaxBootTime = 253402300799;  // 9999-12-31T23:59:59Z
constexpr std::int64_t kMaxErrno = 4095;

constexpr std::string_view kCpuModes[] = {"user",   "nice", "system",  "idle",
                                          "iowait", "irq",  "softirq", "steal"};
constexpr std::string_view kInterfaceCounters[] = {"receive_packets", "transmit_packets",
                                                   "receive_errs",    "transmit_errs",
                                                   "receive_drop",    "transmit_drop"};
constexpr std::string_view kDiskCounters[] = {"reads_completed", "writes_completed"};
constexpr std::string_view kFilesystemCounts[] = {"free_bytes", "files", "files_free"};
constexpr std::string_view kGpuIntegers[] = {
    "sm_clock_mhz",    "memory_clock_mhz", "ecc_corrected", "ecc_uncorrected", "throttle_reasons",
    "pcie_generation", "pcie_width",       "mig_instances", "processes"};
constexpr std::string_view kGpuSources[] = {"nvml", "nvidia-smi", "none"};
// Loopback, and the interfaces of containers, bridges and overlays: their traffic is the
// physical interfaces' traffic again.
constexpr std::string_view kVirtualInterfacePrefixes[] = {
    "veth",   "cali",     "cilium", "lxc",          "cni",       "flannel",
    "docker", "br-",      "virbr",  "vxlan",        "genev",     "tunl",
    "weave",  "datapath", "kube-",  "nodelocaldns", "ovs-system"};

// One JSON object of the sample, with its path for messages.
class Fields {
 public:
  Fields(const json::object& object, std::string path) : object_(object), path_(std::move(path)) {}

  std::string Path(std::string_view key) const { return path_ + "." + std::string(key); }
  const std::string& path() const { return path_; }

  Status Invalid(std::string_view key, std::string_view what) const {
    return InvalidArgumentError(Path(key) + " " + std::string(what));
  }

  // A finite JSON number in [min, kMaxSampleNumber].
  Result<std::optional<double>> Number(std::string_view key, double min = 0) const {
    const json::value* value = object_.if_contains(key);
    if (!value) return std::optional<double>();
    std::optional<double> number;
    if (value->is_double()) number = value->get_double();
    if (value->is_int64()) number = static_cast<double>(value->get_int64());
    if (value->is_uint64()) number = static_cast<double>(value->get_uint64());
    if (!number || !std::isfinite(*number) || *number < min || *number > kMaxSampleNumber) {
      return Invalid(key, min == 0 ? "must be a number from 0 to 10^18"
                                   : "must be a number from -10^18 to 10^18");
    }
    return number;
  }

  // A whole JSON number from 0 to 2^64-1, as a double (counters, byte counts).
  Result<std::optional<double>> Count(std::string_view key) const {
    const json::value* value = object_.if_contains(key);
    if (!value) return std::optional<double>();
    if (value->is_uint64()) return std::optional(static_cast<double>(value->get_uint64()));
    if (value->is_int64() && value->get_int64() >= 0) {
      return std::optional(static_cast<double>(value->get_int64()));
    }
    return Invalid(key, "must be a whole number, 0 or more");
  }

  Result<double> RequiredCount(std::string_view key) const {
    UPLINK_ASSIGN_OR_RETURN(std::optional<double> count, Count(key));
    if (!count) return Invalid(key, "is required");
    return *count;
  }

  Result<std::optional<std::int64_t>> Integer(std::string_view key, std::int64_t min,
                                              std::int64_t max) const {
    const json::value* value = object_.if_contains(key);
    if (!value) return std::optional<std::int64_t>();
    bool in_range = value->is_int64() && value->get_int64() >= min && value->get_int64() <= max;
    if (!in_range) {
      return Invalid(
          key, "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max));
    }
    return std::optional(value->get_int64());
  }

  Result<std::optional<std::string>> String(std::string_view key, size_t max_bytes) const {
    const json::value* value = object_.if_contains(key);
    if (!value) return std::optional<std::string>();
    if (!value->is_string()) return Invalid(key, "must be a string");
    std::string_view text = value->get_string();
    if (text.size() > max_bytes) {
      return Invalid(key, "is " + std::to_string(text.size()) + " bytes long; the limit is " +
                              std::to_string(max_bytes));
    }
    if (text.find('\0') != std::string_view::npos) return Invalid(key, "must not contain NUL");
    return std::optional<std::string>(text);
  }

  Result<std::string> RequiredString(std::string_view key, size_t max_bytes) const {
    UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> text, String(key, max_bytes));
    if (!text) return Invalid(key, "is required");
    if (text->empty()) return Invalid(key, "must not be empty");
    return std::move(*text);
  }

  Result<std::optional<bool>> Bool(std::string_view key) const {
    const json::value* value = object_.if_contains(key);
    if (!value) return std::optional<bool>();
    if (!value->is_bool()) return Invalid(key, "must be true or false");
    return std::optional(value->get_bool());
  }

  // Null when absent.
  Result<const json::object*> Object(std::string_view key) const {
    const json::value* value = object_.if_contains(key);
    if (!value) return nullptr;
    if (!value->is_object()) return Invalid(key, "must be an object");
    return &value->get_object();
  }

  Result<const json::array*> Array(std::string_view key, size_t max_entries) const {
    const json::value* value = object_.if_contains(key);
    if (!value) return nullptr;
    if (!value->is_array()) return Invalid(key, "must be an array");
    const json::array& array = value->get_array();
    if (array.size() > max_entries) {
      return Invalid(key, "has " + std::to_string(array.size()) + " entries; the limit is " +
                              std::to_string(max_entries));
    }
    return &array;
  }

  // Every key of `keys` that is present must be a whole number, 0 or more.
  Status Counts(std::span<const std::string_view> keys) const {
    for (std::string_view key : keys) UPLINK_RETURN_IF_ERROR(Count(key).status());
    return Status::Ok();
  }

  // Every key ending in `suffix` ("memory.*_bytes"): a count, or a number when `counts` is
  // false.
  Status EverySuffixed(std::string_view suffix, bool counts) const {
    for (const auto& field : object_) {
      std::string_view key = field.key();
      if (!key.ends_with(suffix)) continue;
      UPLINK_RETURN_IF_ERROR(counts ? Count(key).status() : Number(key).status());
    }
    return Status::Ok();
  }

 private:
  const json::object& object_;
  std::string path_;
};

// Entry `index` of the array at `path` as an object.
Result<Fields> Entry(const json::array& array, size_t index, const std::string& path) {
  std::string entry = path + "[" + std::to_string(index) + "]";
  if (!array[index].is_object()) return InvalidArgumentError(entry + " must be an object");
  return Fields(array[index].get_object(), std::move(entry));
}

Status ReadCpu(const Fields& sample, NodeSample& out) {
  UPLINK_ASSIGN_OR_RETURN(const json::object* cpu, sample.Object("cpu"));
  if (!cpu) return Status::Ok();
  Fields fields(*cpu, sample.Path("cpu"));
  UPLINK_ASSIGN_OR_RETURN(out.cpu_count, fields.Integer("count", 0, kMaxCpuCount));
  UPLINK_ASSIGN_OR_RETURN(const json::object* seconds, fields.Object("seconds"));
  if (!seconds) return Status::Ok();
  Fields modes(*seconds, fields.Path("seconds"));
  double total = 0;
  double idle = 0;
  for (std::string_view mode : kCpuModes) {
    UPLINK_ASSIGN_OR_RETURN(std::optional<double> value, modes.Number(mode));
    total += value.value_or(0);
    if (mode == "idle" || mode == "iowait") idle += value.value_or(0);
  }
  out.cpu_seconds = total;
  out.cpu_idle_seconds = idle;
  return Status::Ok();
}

Status ReadMemoryLoadUptimePressure(const Fields& sample, NodeSample& out) {
  UPLINK_ASSIGN_OR_RETURN(const json::object* memory, sample.Object("memory"));
  if (memory) {
    Fields fields(*memory, sample.Path("memory"));
    UPLINK_RETURN_IF_ERROR(fields.EverySuffixed("_bytes", true));
    UPLINK_ASSIGN_OR_RETURN(out.memory_total_bytes, fields.Count("total_bytes"));
    UPLINK_ASSIGN_OR_RETURN(out.memory_available_bytes, fields.Count("available_bytes"));
  }
  UPLINK_ASSIGN_OR_RETURN(const json::object* load, sample.Object("load"));
  if (load) {
    Fields fields(*load, sample.Path("load"));
    UPLINK_ASSIGN_OR_RETURN(out.load1, fields.Number("load1"));
    UPLINK_ASSIGN_OR_RETURN(out.load5, fields.Number("load5"));
    UPLINK_ASSIGN_OR_RETURN(out.load15, fields.Number("load15"));
  }
  UPLINK_RETURN_IF_ERROR(sample.Number("uptime_seconds").status());
  UPLINK_ASSIGN_OR_RETURN(const json::object* pressure, sample.Object("pressure"));
  if (pressure) {
    Fields fields(*pressure, sample.Path("pressure"));
    UPLINK_RETURN_IF_ERROR(fields.EverySuffixed("_seconds", false));
  }
  return Status::Ok();
}

Status ReadNetworkAndDisks(const Fields& sample, NodeSample& out) {
  UPLINK_ASSIGN_OR_RETURN(const json::array* network,
                          sample.Array("network", kMaxSampleInterfaces));
  if (network) {
    double received = 0;
    double transmitted = 0;
    for (size_t i = 0; i < network->size(); ++i) {
      UPLINK_ASSIGN_OR_RETURN(Fields entry, Entry(*network, i, sample.Path("network")));
      UPLINK_ASSIGN_OR_RETURN(std::string device, entry.RequiredString("device", kMaxSampleString));
      UPLINK_ASSIGN_OR_RETURN(double receive_bytes, entry.RequiredCount("receive_bytes"));
      UPLINK_ASSIGN_OR_RETURN(double transmit_bytes, entry.RequiredCount("transmit_bytes"));
      UPLINK_RETURN_IF_ERROR(entry.Counts(kInterfaceCounters));
      if (!IsHostInterface(device)) continue;
      received += receive_bytes;
      transmitted += transmit_bytes;
    }
    out.network_receive_bytes = received;
    out.network_transmit_bytes = transmitted;
  }
  UPLINK_ASSIGN_OR_RETURN(const json::array* disks, sample.Array("disks", kMaxSampleDisks));
  if (disks) {
    double read = 0;
    double written = 0;
    for (size_t i = 0; i < disks->size(); ++i) {
      UPLINK_ASSIGN_OR_RETURN(Fields entry, Entry(*disks, i, sample.Path("disks")));
      UPLINK_RETURN_IF_ERROR(entry.RequiredString("device", kMaxSampleString).status());
      UPLINK_ASSIGN_OR_RETURN(double read_bytes, entry.RequiredCount("read_bytes"));
      UPLINK_ASSIGN_OR_RETURN(double written_bytes, entry.RequiredCount("written_bytes"));
      UPLINK_RETURN_IF_ERROR(entry.Counts(kDiskCounters));
      UPLINK_RETURN_IF_ERROR(entry.Number("io_time_seconds").status());
      read += read_bytes;
      written += written_bytes;
    }
    out.disk_read_bytes = read;
    out.disk_written_bytes = written;
  }
  return Status::Ok();
}

Status ReadFilesystems(const Fields& sample, NodeSample& out) {
  UPLINK_ASSIGN_OR_RETURN(const json::array* filesystems,
                          sample.Array("filesystems", kMaxSampleFilesystems));
  if (!filesystems) return Status::Ok();
  for (size_t i = 0; i < filesystems->size(); ++i) {
    UPLINK_ASSIGN_OR_RETURN(Fields entry, Entry(*filesystems, i, sample.Path("filesystems")));
    SampleFilesystem fs;
    UPLINK_ASSIGN_OR_RETURN(fs.mountpoint, entry.RequiredString("mountpoint", kMaxSamplePath));
    UPLINK_ASSIGN_OR_RETURN(auto device, entry.String("device", kMaxSamplePath));
    UPLINK_ASSIGN_OR_RETURN(auto fstype, entry.String("fstype", kMaxSampleString));
    UPLINK_ASSIGN_OR_RETURN(auto error, entry.String("error", kMaxSampleString));
    fs.device = device.value_or("");
    fs.fstype = fstype.value_or("");
    fs.error = error.value_or("");
    UPLINK_ASSIGN_OR_RETURN(fs.readonly, entry.Bool("readonly"));
    UPLINK_ASSIGN_OR_RETURN(fs.size_bytes, entry.Count("size_bytes"));
    UPLINK_ASSIGN_OR_RETURN(fs.avail_bytes, entry.Count("avail_bytes"));
    UPLINK_RETURN_IF_ERROR(entry.Counts(kFilesystemCounts));
    if (fs.error.empty() && (!fs.size_bytes || !fs.avail_bytes)) {
      return entry.Invalid(fs.size_bytes ? "avail_bytes" : "size_bytes",
                           "is required unless the entry has an error");
    }
    out.filesystems.push_back(std::move(fs));
  }
  return Status::Ok();
}

Status ReadGpus(const Fields& sample, NodeSample& out) {
  UPLINK_ASSIGN_OR_RETURN(auto source, sample.String("gpu_source", kMaxSampleString));
  if (source) {
    bool known = false;
    for (std::string_view name : kGpuSources) known = known || *source == name;
    if (!known) return sample.Invalid("gpu_source", "must be \"nvml\", \"nvidia-smi\" or \"none\"");
    out.gpu_source = *source;
  }
  UPLINK_ASSIGN_OR_RETURN(const json::array* gpus, sample.Array("gpus", kMaxSampleGpus));
  if (!gpus) return Status::Ok();
  std::set<std::int64_t> indexes;
  for (size_t i = 0; i < gpus->size(); ++i) {
    UPLINK_ASSIGN_OR_RETURN(Fields entry, Entry(*gpus, i, sample.Path("gpus")));
    SampleGpu gpu;
    UPLINK_ASSIGN_OR_RETURN(auto index, entry.Integer("index", 0, kMaxGpuIndex));
    if (!index) return entry.Invalid("index", "is required");
    if (!indexes.insert(*index).second) {
      return entry.Invalid("index", "is " + std::to_string(*index) +
                                        ", the index of an earlier GPU; each GPU has its own");
    }
    gpu.index = *index;
    UPLINK_ASSIGN_OR_RETURN(auto uuid, entry.String("uuid", kMaxSampleString));
    UPLINK_ASSIGN_OR_RETURN(auto name, entry.String("name", kMaxSampleString));
    gpu.uuid = uuid.value_or("");
    gpu.name = name.value_or("");
    UPLINK_ASSIGN_OR_RETURN(gpu.utilization_percent, entry.Number("utilization_percent"));
    UPLINK_ASSIGN_OR_RETURN(auto memory_utilization, entry.Number("memory_utilization_percent"));
    for (auto [key, percent] : {std::pair{"utilization_percent", gpu.utilization_percent},
                                std::pair{"memory_utilization_percent", memory_utilization}}) {
      if (percent && *percent > 100) return entry.Invalid(key, "must be from 0 to 100");
    }
    UPLINK_ASSIGN_OR_RETURN(gpu.memory_used_bytes, entry.Count("memory_used_bytes"));
    UPLINK_ASSIGN_OR_RETURN(gpu.memory_total_bytes, entry.Count("memory_total_bytes"));
    UPLINK_ASSIGN_OR_RETURN(gpu.temperature_celsius,
                            entry.Number("temperature_celsius", -kMaxSampleNumber));
    UPLINK_ASSIGN_OR_RETURN(gpu.power_watts, entry.Number("power_watts"));
    UPLINK_RETURN_IF_ERROR(entry.Number("power_limit_watts").status());
    UPLINK_RETURN_IF_ERROR(entry.Counts(kGpuIntegers));
    UPLINK_RETURN_IF_ERROR(entry.String("mig_mode", kMaxSampleString).status());
    out.gpus.push_back(std::move(gpu));
  }
  return Status::Ok();
}

Status ReadGaps(const Fields& sample, NodeSample& out) {
  UPLINK_ASSIGN_OR_RETURN(const json::array* gaps, sample.Array("gaps", kMaxSampleGaps));
  if (!gaps) return Status::Ok();
  for (size_t i = 0; i < gaps->size(); ++i) {
    UPLINK_ASSIGN_OR_RETURN(Fields entry, Entry(*gaps, i, sample.Path("gaps")));
    SampleGap gap;
    UPLINK_ASSIGN_OR_RETURN(gap.source, entry.RequiredString("source", kMaxSampleString));
    UPLINK_ASSIGN_OR_RETURN(auto path, entry.String("path", kMaxSamplePath));
    gap.path = path.value_or("");
    UPLINK_ASSIGN_OR_RETURN(auto error, entry.String("error", kMaxSampleString));
    if (!error) return entry.Invalid("error", "is required");
    gap.error = std::move(*error);
    UPLINK_ASSIGN_OR_RETURN(auto errno_value, entry.Integer("errno", 0, kMaxErrno));
    gap.errno_value = errno_value.value_or(0);
    out.gaps.push_back(std::move(gap));
  }
  return Status::Ok();
}

}  // namespace

bool IsNodeSamplePayload(const json::object& payload) {
  const json::value* kind = payload.if_contains("kind");
  return kind && kind->is_string() && kind->get_string() == kNodeSampleKind;
}

Result<NodeSample> DecodeNodeSample(const json::object& payload, std::string_view path) {
  Fields sample(payload, std::string(path));
  const json::value* version = payload.if_contains("version");
  if (!version) return sample.Invalid("version", "is required");
  if (!version->is_int64() || version->get_int64() != kNodeSampleVersion) {
    return sample.Invalid("version", "is " + OneLineExcerpt(ToJson(*version), 32) +
                                         "; this console reads node_sample version " +
                                         std::to_string(kNodeSampleVersion) +
                                         " (upgrade the console for a newer agent)");
  }
  NodeSample out;
  UPLINK_ASSIGN_OR_RETURN(out.node, sample.RequiredString("node", kMaxSampleString));
  UPLINK_ASSIGN_OR_RETURN(auto collected_at, sample.String("collected_at", kMaxTimeBytes));
  if (!collected_at) return sample.Invalid("collected_at", "is required");
  auto time = ParseRfc3339(*collected_at);
  if (!time.ok()) {
    return sample.Invalid("collected_at",
                          "must be an RFC 3339 time such as \"2026-11-30T03:20:00.125Z\"");
  }
  out.collected_at = *time;
  UPLINK_ASSIGN_OR_RETURN(auto boot_time, sample.Integer("boot_time", 0, kMaxBootTime));
  out.boot_time = boot_time.value_or(0);
  UPLINK_RETURN_IF_ERROR(ReadCpu(sample, out));
  UPLINK_RETURN_IF_ERROR(ReadMemoryLoadUptimePressure(sample, out));
  UPLINK_RETURN_IF_ERROR(ReadNetworkAndDisks(sample, out));
  UPLINK_RETURN_IF_ERROR(ReadFilesystems(sample, out));
  UPLINK_RETURN_IF_ERROR(ReadGpus(sample, out));
  UPLINK_RETURN_IF_ERROR(ReadGaps(sample, out));
  return out;
}

bool IsHostInterface(std::string_view device) {
  if (device == "lo") return false;
  for (std::string_view prefix : kVirtualInterfacePrefixes) {
    if (device.starts_with(prefix)) return false;
  }
  return true;
}

}  // namespace uplink::protocol
