#include "kubesim/resource_metrics.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>

#include "common/quantity.h"

namespace uplink::kubesim {
namespace {

// What the kubelet, container runtime and system daemons use on every node.
constexpr std::int64_t kNodeOverheadMillicores = 350;
constexpr std::int64_t kNodeOverheadBytes = std::int64_t{2} << 30;
// A container that requests nothing still uses a little.
constexpr std::int64_t kIdleContainerMillicores = 2;
constexpr std::int64_t kIdleContainerBytes = std::int64_t{24} << 20;

// FNV-1a: the same share for the same names on every run and every build.
std::uint32_t StableHash(std::string_view text) {
  std::uint32_t hash = 2166136261u;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

// A resource quantity in thousandths; 0 when absent or not exact.
std::int64_t MilliValueOf(const json::object& resources, std::string_view name) {
  const json::value* value = resources.if_contains(name);
  if (!value || !value->is_string()) return 0;
  Result<Quantity> quantity = Quantity::Parse(value->get_string());
  if (!quantity.ok()) return 0;
  Result<std::int64_t> milli = quantity->MilliValue();
  return milli.ok() && *milli > 0 ? *milli : 0;
}

struct Usage {
  std::int64_t millicores = 0;
  std::int64_t bytes = 0;
};

// The percentages a pod's `kubesim.uplink.dev/usage` annotation sets ("cpu=12,memory=97":
// percent of each container's request, or of its limit without one); nullopt where unset.
struct UsageOverride {
  std::optional<std::int64_t> cpu_percent;
  std::optional<std::int64_t> memory_percent;
};

UsageOverride UsageAnnotation(const json::object& pod) {
  UsageOverride override;
  const std::string annotation =
      StringAt(ObjectAt(ObjectAt(pod, "metadata"), "annotations"), kUsageAnnotation);
  std::string_view text = annotation;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    size_t equals = item.find('=');
    if (equals != std::string_view::npos) {
      std::string_view value = item.substr(equals + 1);
      std::int64_t percent = 0;
      bool digits = !value.empty() && value.size() <= 4;
      for (char c : value) {
        digits = digits && c >= '0' && c <= '9';
        if (digits) percent = percent * 10 + (c - '0');
      }
      if (digits && item.substr(0, equals) == "cpu") override.cpu_percent = percent;
      if (digits && item.substr(0, equals) == "memory") override.memory_percent = percent;
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return override;
}

// Usage drifts within +-10% over a 10-minute period, each container at its own phase, so
// that an hour of samples has an average below its peak as real workloads do.
std::int64_t Drift(std::int64_t value, std::uint32_t hash, WallTime now) {
  constexpr double kPeriodSeconds = 600;
  const double seconds = std::chrono::duration<double>(now.time_since_epoch()).count();
  const double phase = static_cast<double>(hash % 628) / 100;
  const double factor = 1 + 0.1 * std::sin(2 * M_PI * seconds / kPeriodSeconds + phase);
  return static_cast<std::int64_t>(static_cast<double>(value) * factor);
}

Usage ContainerUsage(const std::string& pod_key, const json::object& container,
                     const UsageOverride& override, WallTime now) {
  const json::object& resources = ObjectAt(container, "resources");
  const json::object& requests = ObjectAt(resources, "requests");
  const json::object& limits = ObjectAt(resources, "limits");
  auto wanted = [&](std::string_view name) {
    std::int64_t request = MilliValueOf(requests, name);
    return request > 0 ? request : MilliValueOf(limits, name);
  };
  bool gpu = wanted("nvidia.com/gpu") > 0;
  std::uint32_t hash = StableHash(pod_key + "/" + StringAt(container, "name"));
  // Percent of the request in use: GPU work keeps its CPUs busy, the rest idles more.
  std::int64_t cpu_percent = override.cpu_percent.value_or(gpu ? 70 + hash % 25 : 15 + hash % 45);
  std::int64_t memory_percent =
      override.memory_percent.value_or(gpu ? 75 + (hash >> 8) % 20 : 35 + (hash >> 8) % 40);
  Usage usage;
  std::int64_t cpu = wanted("cpu");
  usage.millicores = cpu > 0 ? std::max<std::int64_t>(1, cpu / 100 * cpu_percent)
                             : kIdleContainerMillicores + hash % 5;
  std::int64_t memory_bytes = wanted("memory") / 1000;
  usage.bytes = memory_bytes > 0 ? memory_bytes / 100 * memory_percent
                                 : kIdleContainerBytes + (hash % 16) * (1 << 20);
  usage.millicores = std::max<std::int64_t>(usage.millicores > 0 ? 1 : 0,
                                            Drift(usage.millicores, hash, now));
  // Memory moves less than CPU: a quarter of the drift.
  usage.bytes += (Drift(usage.bytes, hash >> 4, now) - usage.bytes) / 4;
  return usage;
}

// metrics-server's forms: CPU in nanocores ("254000000n"), memory in KiB ("2412Ki").
// Written as text so that no request, however large, overflows the conversion.
json::object UsageObject(const Usage& usage) {
  std::string cpu = usage.millicores == 0 ? "0" : std::to_string(usage.millicores) + "000000n";
  return json::object{{"cpu", cpu}, {"memory", std::to_string(usage.bytes / 1024) + "Ki"}};
}

std::int64_t AddSaturating(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

json::object Labels(const json::object& object) {
  return ObjectAt(ObjectAt(object, "metadata"), "labels");
}

bool IsRunning(const json::object& pod) {
  return StringAt(ObjectAt(pod, "status"), "phase") == "Running" &&
         !StringAt(ObjectAt(pod, "spec"), "nodeName").empty();
}

// The containers of a Running pod that have a process to measure: those whose status says
// running, or all of them when the pod carries no container statuses.
std::vector<const json::object*> MeasuredContainers(const json::object& pod) {
  const json::array& statuses = ArrayAt(ObjectAt(pod, "status"), "containerStatuses");
  std::vector<const json::object*> containers;
  for (const json::value& container : ArrayAt(ObjectAt(pod, "spec"), "containers")) {
    if (!container.is_object()) continue;
    std::string name = StringAt(container.get_object(), "name");
    bool running = statuses.empty();
    for (const json::value& status : statuses) {
      if (status.is_object() && StringAt(status.get_object(), "name") == name) {
        running = ObjectAt(status.get_object(), "state").contains("running");
      }
    }
    if (running) containers.push_back(&container.get_object());
  }
  return containers;
}

std::vector<json::object> ListStored(const ObjectStore& store, std::string_view plural,
                                     const std::optional<std::string>& namespace_name) {
  ListOptions options;
  options.namespace_name = namespace_name;
  Result<ListPage> page = store.List(*FindResource("", "v1", plural), options);
  return page.ok() ? std::move(page->items) : std::vector<json::object>();
}

}  // namespace

std::vector<json::object> PodMetricsItems(const ObjectStore& store,
                                          const std::optional<std::string>& namespace_name,
                                          WallTime now) {
  std::string timestamp = FormatRfc3339(now);
  std::vector<json::object> items;
  for (const json::object& pod : ListStored(store, "pods", namespace_name)) {
    if (!IsRunning(pod)) continue;
    const json::object& metadata = ObjectAt(pod, "metadata");
    std::string key = StringAt(metadata, "namespace") + "/" + StringAt(metadata, "name");
    std::vector<const json::object*> measured = MeasuredContainers(pod);
    // metrics-server has nothing for a pod none of whose containers is running.
    if (measured.empty()) continue;
    json::array containers;
    const UsageOverride override = UsageAnnotation(pod);
    for (const json::object* container : measured) {
      containers.push_back(
          json::object{{"name", StringAt(*container, "name")},
                       {"usage", UsageObject(ContainerUsage(key, *container, override, now))}});
    }
    items.push_back(json::object{
        {"kind", "PodMetrics"},
        {"apiVersion", "metrics.k8s.io/v1beta1"},
        {"metadata", json::object{{"name", StringAt(metadata, "name")},
                                  {"namespace", StringAt(metadata, "namespace")},
                                  {"creationTimestamp", timestamp},
                                  {"labels", Labels(pod)}}},
        {"timestamp", timestamp},
        {"window", "30s"},
        {"containers", std::move(containers)}});
  }
  return items;
}

std::vector<json::object> NodeMetricsItems(const ObjectStore& store, WallTime now) {
  std::map<std::string, Usage> by_node;
  for (const json::object& pod : ListStored(store, "pods", std::nullopt)) {
    if (!IsRunning(pod)) continue;
    const json::object& metadata = ObjectAt(pod, "metadata");
    std::string key = StringAt(metadata, "namespace") + "/" + StringAt(metadata, "name");
    Usage& node = by_node[StringAt(ObjectAt(pod, "spec"), "nodeName")];
    const UsageOverride override = UsageAnnotation(pod);
    for (const json::object* container : MeasuredContainers(pod)) {
      Usage usage = ContainerUsage(key, *container, override, now);
      node.millicores = AddSaturating(node.millicores, usage.millicores);
      node.bytes = AddSaturating(node.bytes, usage.bytes);
    }
  }
  std::string timestamp = FormatRfc3339(now);
  std::vector<json::object> items;
  for (const json::object& node : ListStored(store, "nodes", std::nullopt)) {
    std::string name = StringAt(ObjectAt(node, "metadata"), "name");
    Usage usage = by_node[name];
    usage.millicores =
        AddSaturating(usage.millicores, kNodeOverheadMillicores + StableHash(name) % 100);
    usage.bytes = AddSaturating(usage.bytes, kNodeOverheadBytes);
    items.push_back(json::object{
        {"kind", "NodeMetrics"},
        {"apiVersion", "metrics.k8s.io/v1beta1"},
        {"metadata", json::object{{"name", name},
                                  {"creationTimestamp", timestamp},
                                  {"labels", Labels(node)}}},
        {"timestamp", timestamp},
        {"window", "30s"},
        {"usage", UsageObject(usage)}});
  }
  return items;
}

}  // namespace uplink::kubesim
