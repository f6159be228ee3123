#include "agent/inventory/report.h"

#include <limits>
#include <map>
#include <optional>

#include "common/json.h"
#include "common/quantity.h"

namespace uplink::agent::inventory {
namespace {

constexpr std::string_view kNvidiaGpu = "nvidia.com/gpu";
constexpr std::string_view kAmdGpu = "amd.com/gpu";
constexpr std::string_view kMigPrefix = "nvidia.com/mig-";

// The per-node bounds of protocol/inventory.h: the console refuses a whole report over any of
// them, so a node that exceeds one is reported with an error instead.
using protocol::kMaxGpuCount;
using protocol::kMaxInventoryTextBytes;
using protocol::kMaxNodeErrorBytes;
using protocol::kMaxNodeNameBytes;
using protocol::kMaxNodeUidBytes;
using protocol::kMaxResourcesPerNode;
using protocol::kMaxTaintsPerNode;
// Stands in for a missing name: the console requires a non-empty one.
constexpr std::string_view kNoName = "(no name)";

struct Counts {
  std::int64_t capacity = 0;
  std::int64_t allocatable = 0;
};

// Collects the first problem found in a node; that one is reported.
struct NodeReader {
  std::optional<std::string> error;
  void Fail(std::string message) {
    if (!error) error = std::move(message);
  }
};

// At most `max_bytes` of `text`, cut at a character boundary so the result stays valid UTF-8.
std::string Utf8Prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end));
}

const json::object* ObjectAt(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value != nullptr && value->is_object() ? &value->get_object() : nullptr;
}

// Reads the GPU resources of status.capacity or status.allocatable into `counts`.
void ReadResources(const json::object& status, std::string_view field,
                   std::map<std::string, Counts, std::less<>>& counts, NodeReader& reader) {
  const json::value* list = status.if_contains(field);
  if (list == nullptr || list->is_null()) return;
  if (!list->is_object()) {
    reader.Fail("status." + std::string(field) + " is not an object");
    return;
  }
  for (const auto& [name, value] : list->get_object()) {
    if (!IsGpuResource(name)) continue;
    if (name.size() > kMaxNodeNameBytes) {
      reader.Fail("status." + std::string(field) + " has a GPU resource name longer than " +
                  std::to_string(kMaxNodeNameBytes) + " bytes");
      continue;
    }
    std::string where = "status." + std::string(field) + "[" + std::string(name) + "]";
    if (!value.is_string()) {
      reader.Fail(where + ": is not a quantity string");
      continue;
    }
    auto quantity = Quantity::Parse(value.get_string());
    if (!quantity.ok()) {
      reader.Fail(where + ": " + quantity.status().message());
      continue;
    }
    auto count = quantity->WholeCount();
    if (!count.ok()) {
      reader.Fail(where + ": " + count.status().message());
      continue;
    }
    if (*count > kMaxGpuCount) {
      reader.Fail(where + ": " + std::to_string(*count) + " is more than the " +
                  std::to_string(kMaxGpuCount) + " a report can carry");
      continue;
    }
    Counts& entry = counts[std::string(name)];
    (field == "capacity" ? entry.capacity : entry.allocatable) = *count;
  }
}

// The main GPU resource: whole GPUs first (NVIDIA, then AMD), then the MIG profile with the
// most instances; a resource with zero capacity only when nothing has more.
std::string MainResource(const std::map<std::string, Counts, std::less<>>& counts) {
  for (std::string_view whole : {kNvidiaGpu, kAmdGpu}) {
    auto it = counts.find(whole);
    if (it != counts.end() && it->second.capacity > 0) return it->first;
  }
  std::string best;
  std::int64_t best_capacity = 0;
  for (const auto& [name, entry] : counts) {
    if (name.starts_with(kMigPrefix) && entry.capacity > best_capacity) {
      best = name;
      best_capacity = entry.capacity;
    }
  }
  if (!best.empty()) return best;
  for (std::string_view whole : {kNvidiaGpu, kAmdGpu}) {
    if (counts.contains(whole)) return std::string(whole);
  }
  return counts.empty() ? std::string() : counts.begin()->first;
}

// The GPU model from the labels GPU Feature Discovery and the AMD node labeller set.
std::string Product(const std::string& resource, const json::object* labels) {
  if (labels == nullptr) return "";
  if (resource.starts_with(kMigPrefix)) {
    // GFD labels each MIG profile: nvidia.com/mig-1g.10gb.product=NVIDIA-H100-...-MIG-1g.10gb
    std::string mig_product = StringAt(*labels, resource + ".product");
    if (!mig_product.empty()) return mig_product;
  }
  if (resource == kAmdGpu) {
    for (std::string_view key : {"amd.com/gpu.product-name", "beta.amd.com/gpu.product-name"}) {
      std::string name = StringAt(*labels, key);
      if (!name.empty()) return name;
    }
    // Older labellers only give the PCI device id; say so rather than guess a model name.
    for (std::string_view key : {"amd.com/gpu.device-id", "beta.amd.com/gpu.device-id"}) {
      std::string id = StringAt(*labels, key);
      if (!id.empty()) return "amd.com/gpu.device-id=" + id;
    }
    return "";
  }
  return StringAt(*labels, "nvidia.com/gpu.product");
}

bool ReadReady(const json::object* status, NodeReader& reader) {
  if (status == nullptr) return false;
  const json::value* conditions = status->if_contains("conditions");
  if (conditions == nullptr || conditions->is_null()) return false;
  if (!conditions->is_array()) {
    reader.Fail("status.conditions is not a list");
    return false;
  }
  for (const json::value& condition : conditions->get_array()) {
    if (!condition.is_object()) continue;
    if (StringAt(condition.get_object(), "type") == "Ready") {
      return StringAt(condition.get_object(), "status") == "True";
    }
  }
  return false;
}

// The node's taints; none when they exceed the report's bounds (the node then has an error).
std::vector<protocol::Taint> ReadTaints(const json::object* spec, NodeReader& reader) {
  std::vector<protocol::Taint> taints;
  if (spec == nullptr) return taints;
  const json::value* list = spec->if_contains("taints");
  if (list == nullptr || list->is_null()) return taints;
  if (!list->is_array()) {
    reader.Fail("spec.taints is not a list");
    return taints;
  }
  if (list->get_array().size() > kMaxTaintsPerNode) {
    reader.Fail("spec.taints has " + std::to_string(list->get_array().size()) +
                " entries; a report carries at most " + std::to_string(kMaxTaintsPerNode));
    return taints;
  }
  for (const json::value& taint : list->get_array()) {
    if (!taint.is_object() || StringAt(taint.get_object(), "key").empty()) {
      reader.Fail("spec.taints has an entry without a key");
      continue;
    }
    const json::object& object = taint.get_object();
    protocol::Taint entry;
    for (auto [part, text] : {std::pair{"key", &entry.key}, std::pair{"value", &entry.value},
                              std::pair{"effect", &entry.effect}}) {
      *text = StringAt(object, part);
      if (text->size() > kMaxInventoryTextBytes) {
        reader.Fail("spec.taints has a " + std::string(part) + " longer than " +
                    std::to_string(kMaxInventoryTextBytes) + " bytes");
        return {};
      }
    }
    taints.push_back(std::move(entry));
  }
  return taints;
}

}  // namespace

bool IsGpuResource(std::string_view name) {
  return name == kNvidiaGpu || name == kAmdGpu ||
         (name.starts_with(kMigPrefix) && name.size() > kMigPrefix.size());
}

std::int64_t SaturatingAdd(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<std::int64_t>::max()
               : std::numeric_limits<std::int64_t>::min();
}

protocol::InventoryNode DescribeNode(const json::value& node) {
  protocol::InventoryNode entry;
  if (!node.is_object()) {
    entry.name = kNoName;
    entry.error = "the node is not a JSON object";
    return entry;
  }
  NodeReader reader;
  const json::object& object = node.get_object();
  const json::object* metadata = ObjectAt(object, "metadata");
  const json::object* spec = ObjectAt(object, "spec");
  const json::object* status = ObjectAt(object, "status");
  const json::object* labels = metadata != nullptr ? ObjectAt(*metadata, "labels") : nullptr;
  entry.name = metadata != nullptr ? StringAt(*metadata, "name") : "";
  entry.uid = metadata != nullptr ? StringAt(*metadata, "uid") : "";
  if (entry.name.empty()) {
    reader.Fail("metadata.name is missing");
    entry.name = kNoName;
  } else if (entry.name.size() > kMaxNodeNameBytes) {
    // Cut so the entry is still accepted; the error says the name is not the whole one.
    reader.Fail("metadata.name is longer than " + std::to_string(kMaxNodeNameBytes) +
                " bytes; the name shown is cut");
    entry.name = Utf8Prefix(entry.name, kMaxNodeNameBytes);
  }
  if (entry.uid.size() > kMaxNodeUidBytes) {
    reader.Fail("metadata.uid is longer than " + std::to_string(kMaxNodeUidBytes) + " bytes");
    entry.uid.clear();
  }

  entry.ready = ReadReady(status, reader);
  if (spec != nullptr) {
    const json::value* unschedulable = spec->if_contains("unschedulable");
    if (unschedulable != nullptr && unschedulable->is_bool()) {
      entry.unschedulable = unschedulable->get_bool();
    } else if (unschedulable != nullptr && !unschedulable->is_null()) {
      reader.Fail("spec.unschedulable is not true or false");
    }
  }
  entry.taints = ReadTaints(spec, reader);

  std::map<std::string, Counts, std::less<>> counts;
  if (status != nullptr) {
    ReadResources(*status, "capacity", counts, reader);
    ReadResources(*status, "allocatable", counts, reader);
  }
  if (counts.size() > kMaxResourcesPerNode) {
    reader.Fail("the node has " + std::to_string(counts.size()) +
                " GPU resources; a report carries at most " + std::to_string(kMaxResourcesPerNode));
  }
  if (reader.error) {
    entry.error = Utf8Prefix(*reader.error, kMaxNodeErrorBytes);
    return entry;
  }
  for (const auto& [name, count] : counts) {
    entry.resources.push_back(protocol::GpuResource{name, count.capacity, count.allocatable});
  }
  std::string main = MainResource(counts);
  if (!main.empty()) {
    entry.gpu_capacity = counts[main].capacity;
    entry.gpu_allocatable = counts[main].allocatable;
  }
  entry.gpu_product = Utf8Prefix(Product(main, labels), kMaxInventoryTextBytes);
  entry.gpu_resource = std::move(main);
  return entry;
}

void ReportBuilder::Add(const json::value& node) {
  protocol::InventoryNode entry = DescribeNode(node);
  ++summary_.nodes;
  if (entry.error) {
    ++summary_.nodes_with_errors;
  } else {
    summary_.gpus = SaturatingAdd(summary_.gpus, entry.gpu_capacity);
  }
  entries_.push_back(std::move(entry));
}

void ReportBuilder::Clear() {
  entries_.clear();
  summary_ = ReportSummary{};
}

Report ReportBuilder::Finish(std::string_view cluster_uid, std::string_view selector,
                             WallTime collected_at) && {
  Report report;
  report.summary = summary_;
  report.message.agent_version = UPLINK_VERSION;
  report.message.cluster_uid = std::string(cluster_uid);
  report.message.selector = std::string(selector);
  report.message.collected_at = collected_at;
  report.message.nodes = std::move(entries_);
  return report;
}

Report BuildReport(std::string_view cluster_uid, std::string_view selector, WallTime collected_at,
                   const std::vector<json::value>& nodes) {
  ReportBuilder builder;
  for (const json::value& node : nodes) builder.Add(node);
  return std::move(builder).Finish(cluster_uid, selector, collected_at);
}

}  // namespace uplink::agent::inventory
