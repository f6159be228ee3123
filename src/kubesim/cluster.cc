#include "kubesim/cluster.h"

#include <algorithm>
#include <cstdio>

#include "common/crypto.h"
#include "common/yaml.h"
#include "kubesim/embedded_data.h"
#include "kubesim/logs.h"
#include "kubesim/store.h"

namespace uplink::kubesim {
namespace {

constexpr int kMaxNodes = 5000;
constexpr int kMaxGpusPerNode = 16;

std::string Numbered(std::string_view prefix, int index) {
  char suffix[16];
  std::snprintf(suffix, sizeof(suffix), "%04d", index);
  return std::string(prefix) + suffix;
}

std::string InternalIp(int index) {
  return "10.0." + std::to_string(index / 250) + "." + std::to_string(index % 250 + 2);
}

json::object Condition(std::string type, std::string status, std::string reason,
                       std::string message, const std::string& when) {
  return json::object{{"type", type},           {"status", status},
                      {"reason", reason},       {"message", message},
                      {"lastHeartbeatTime", when}, {"lastTransitionTime", when}};
}

// What every node shares: the metadata and status a kubelet on Ubuntu 22.04 reports.
json::object BaseNode(const std::string& name, int address_index, int cpus, std::int64_t memory_gib,
                      const ClusterShape& shape, WallTime created) {
  std::string when = FormatRfc3339(created);
  json::object labels{{"beta.kubernetes.io/arch", "amd64"},
                      {"beta.kubernetes.io/os", "linux"},
                      {"kubernetes.io/arch", "amd64"},
                      {"kubernetes.io/hostname", name},
                      {"kubernetes.io/os", "linux"}};
  json::object metadata{
      {"name", name},
      {"creationTimestamp", when},
      {"labels", labels},
      {"annotations",
       json::object{{"node.alpha.kubernetes.io/ttl", "0"},
                    {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}}}};
  std::string cidr = "10.244." + std::to_string(address_index % 256) + ".0/24";
  json::object spec{{"podCIDR", cidr}, {"podCIDRs", json::array{cidr}},
                    {"providerID", "kubesim://" + name}};
  std::int64_t memory_ki = memory_gib * 1024 * 1024;
  json::object capacity{{"cpu", std::to_string(cpus)},
                        {"ephemeral-storage", "1885863312Ki"},
                        {"hugepages-1Gi", "0"},
                        {"hugepages-2Mi", "0"},
                        {"memory", std::to_string(memory_ki) + "Ki"},
                        {"pods", "110"}};
  // The kubelet reserves some CPU, memory and disk for the system.
  json::object allocatable = capacity;
  allocatable["cpu"] = std::to_string(cpus * 1000 - 500) + "m";
  allocatable["memory"] = std::to_string(memory_ki - 2 * 1024 * 1024) + "Ki";
  allocatable["ephemeral-storage"] = "1738010106197";
  json::array conditions{
      Condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available", when),
      Condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure",
                when),
      Condition("PIDPressure", "False", "KubeletHasSufficientPID",
                "kubelet has sufficient PID available", when),
      Condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", when)};
  json::object node_info{{"architecture", "amd64"},
                         {"bootID", NewUuid()},
                         {"containerRuntimeVersion", "containerd://1.7.27"},
                         {"kernelVersion", "5.15.0-134-generic"},
                         {"kubeProxyVersion", shape.server_version},
                         {"kubeletVersion", shape.server_version},
                         {"machineID", HexEncode(RandomBytes(16))},
                         {"operatingSystem", "linux"},
                         {"osImage", "Ubuntu 22.04.5 LTS"},
                         {"systemUUID", NewUuid()}};
  json::object status{
      {"addresses", json::array{json::object{{"type", "InternalIP"}, {"address", InternalIp(address_index)}},
                                json::object{{"type", "Hostname"}, {"address", name}}}},
      {"capacity", capacity},
      {"allocatable", allocatable},
      {"conditions", conditions},
      {"daemonEndpoints", json::object{{"kubeletEndpoint", json::object{{"Port", 10250}}}}},
      {"nodeInfo", node_info}};
  return json::object{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", metadata},
                      {"spec", spec},       {"status", status}};
}

// Labels GPU Feature Discovery and the gpu-operator put on an H100 80GB HBM3 node (taken
// from the real label map in fixtures/kubernetes/nvidia-cloud-native-docs).
void AddGpuLabels(json::object& labels, int gpus, WallTime created) {
  const std::pair<const char*, std::string> kLabels[] = {
      {"feature.node.kubernetes.io/pci-10de.present", "true"},
      {"feature.node.kubernetes.io/system-os_release.ID", "ubuntu"},
      {"feature.node.kubernetes.io/system-os_release.VERSION_ID", "22.04"},
      {"node.kubernetes.io/instance-type", "gpu-h100-x" + std::to_string(gpus)},
      {"beta.kubernetes.io/instance-type", "gpu-h100-x" + std::to_string(gpus)},
      {"nvidia.com/cuda.driver-version.full", "550.54.15"},
      {"nvidia.com/cuda.driver-version.major", "550"},
      {"nvidia.com/cuda.driver-version.minor", "54"},
      {"nvidia.com/cuda.driver-version.revision", "15"},
      {"nvidia.com/cuda.driver.major", "550"},
      {"nvidia.com/cuda.driver.minor", "54"},
      {"nvidia.com/cuda.driver.rev", "15"},
      {"nvidia.com/cuda.runtime-version.full", "12.4"},
      {"nvidia.com/cuda.runtime-version.major", "12"},
      {"nvidia.com/cuda.runtime-version.minor", "4"},
      {"nvidia.com/cuda.runtime.major", "12"},
      {"nvidia.com/cuda.runtime.minor", "4"},
      {"nvidia.com/gfd.timestamp", std::to_string(ToUnixSeconds(created))},
      {"nvidia.com/gpu-driver-upgrade-state", "upgrade-done"},
      {"nvidia.com/gpu.compute.major", "9"},
      {"nvidia.com/gpu.compute.minor", "0"},
      {"nvidia.com/gpu.count", std::to_string(gpus)},
      {"nvidia.com/gpu.deploy.container-toolkit", "true"},
      {"nvidia.com/gpu.deploy.dcgm", "true"},
      {"nvidia.com/gpu.deploy.dcgm-exporter", "true"},
      {"nvidia.com/gpu.deploy.device-plugin", "true"},
      {"nvidia.com/gpu.deploy.driver", "true"},
      {"nvidia.com/gpu.deploy.gpu-feature-discovery", "true"},
      {"nvidia.com/gpu.deploy.mig-manager", "true"},
      {"nvidia.com/gpu.deploy.node-status-exporter", "true"},
      {"nvidia.com/gpu.deploy.operator-validator", "true"},
      {"nvidia.com/gpu.family", "hopper"},
      {"nvidia.com/gpu.machine", "PowerEdge-XE9680"},
      {"nvidia.com/gpu.memory", "81559"},
      {"nvidia.com/gpu.mode", "compute"},
      {"nvidia.com/gpu.present", "true"},
      {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
      {"nvidia.com/gpu.replicas", "1"},
      {"nvidia.com/gpu.sharing-strategy", "none"},
      {"nvidia.com/mig.capable", "true"},
      {"nvidia.com/mig.config", "all-disabled"},
      {"nvidia.com/mig.config.state", "success"},
      {"nvidia.com/mig.strategy", "single"},
      {"nvidia.com/mps.capable", "false"},
  };
  for (const auto& [key, value] : kLabels) labels[key] = value;
}

json::object& Object(json::object& parent, std::string_view key) {
  return parent.at(key).as_object();
}

}  // namespace

Status ValidateClusterShape(const ClusterShape& shape) {
  if (shape.gpu_nodes < 0 || shape.gpu_nodes > kMaxNodes) {
    return InvalidArgumentError("--nodes must be between 0 and " + std::to_string(kMaxNodes));
  }
  if (shape.gpus_per_node < 1 || shape.gpus_per_node > kMaxGpusPerNode) {
    return InvalidArgumentError("--gpus-per-node must be between 1 and " +
                                std::to_string(kMaxGpusPerNode));
  }
  if (shape.cpu_nodes < 0 || shape.cpu_nodes > kMaxNodes) {
    return InvalidArgumentError("--cpu-nodes must be between 0 and " + std::to_string(kMaxNodes));
  }
  return ParseServerVersion(shape.server_version).status();
}

std::vector<json::object> GenerateNodes(const ClusterShape& shape, WallTime created) {
  std::vector<json::object> nodes;
  for (int i = 1; i <= shape.gpu_nodes; ++i) {
    json::object node = BaseNode(Numbered("gpu-node-", i), i, 24 * shape.gpus_per_node,
                                 256 * shape.gpus_per_node, shape, created);
    json::object& metadata = Object(node, "metadata");
    AddGpuLabels(Object(metadata, "labels"), shape.gpus_per_node, created);
    Object(metadata, "annotations")["nvidia.com/gpu-driver-upgrade-enabled"] = "true";
    json::object& status = Object(node, "status");
    std::string gpus = std::to_string(shape.gpus_per_node);
    Object(status, "capacity")["nvidia.com/gpu"] = gpus;
    Object(status, "allocatable")["nvidia.com/gpu"] = gpus;
    nodes.push_back(std::move(node));
  }
  for (int i = 1; i <= shape.cpu_nodes; ++i) {
    json::object node =
        BaseNode(Numbered("cpu-node-", i), shape.gpu_nodes + i, 16, 64, shape, created);
    json::object& labels = Object(Object(node, "metadata"), "labels");
    labels["node.kubernetes.io/instance-type"] = "cpu-16x64";
    labels["beta.kubernetes.io/instance-type"] = "cpu-16x64";
    if (i == 1) {
      labels["node-role.kubernetes.io/control-plane"] = "";
      labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "";
      Object(node, "spec")["taints"] = json::array{json::object{
          {"key", "node-role.kubernetes.io/control-plane"}, {"effect", "NoSchedule"}}};
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

std::vector<json::object> DefaultNamespaces() {
  std::vector<json::object> namespaces;
  for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease", "uplink-system"}) {
    namespaces.push_back(json::object{{"apiVersion", "v1"},
                                      {"kind", "Namespace"},
                                      {"metadata", json::object{{"name", name}}},
                                      {"spec", json::object{{"finalizers", json::array{"kubernetes"}}}},
                                      {"status", json::object{{"phase", "Active"}}}});
  }
  return namespaces;
}

json::object NodeLease(const json::object& node, WallTime now) {
  const json::object& metadata = node.at("metadata").as_object();
  std::string name(metadata.at("name").as_string());
  const json::value* uid = metadata.if_contains("uid");
  json::object owner{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", name}};
  if (uid && uid->is_string()) owner["uid"] = *uid;
  std::string renewed = FormatRfc3339Micro(now);
  return json::object{
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata", json::object{{"name", name},
                                {"namespace", "kube-node-lease"},
                                {"ownerReferences", json::array{owner}}}},
      {"spec", json::object{{"holderIdentity", name},
                            {"leaseDurationSeconds", 40},
                            {"renewTime", renewed}}}};
}

std::vector<json::object> BuiltInPriorityClasses() {
  auto priority_class = [](std::string name, std::int64_t value, std::string description) {
    return json::object{{"apiVersion", "scheduling.k8s.io/v1"},
                        {"kind", "PriorityClass"},
                        {"metadata", json::object{{"name", std::move(name)}}},
                        {"value", value},
                        {"globalDefault", false},
                        {"preemptionPolicy", "PreemptLowerPriority"},
                        {"description", std::move(description)}};
  };
  return {priority_class("system-cluster-critical", 2000000000,
                         "Used for system critical pods that must run in the cluster, but can be "
                         "moved to another node if necessary."),
          priority_class("system-node-critical", 2000001000,
                         "Used for system critical pods that must not be moved from their "
                         "current node.")};
}

Result<std::vector<json::object>> BootstrapRbacObjects() {
  return ParseObjects(EmbeddedDataFile("bootstrap-rbac.yaml"));
}

namespace {

// Fields that hold a metav1.Time or MicroTime in the objects the workloads carry.
bool IsTimeField(std::string_view key) {
  static constexpr std::string_view kKeys[] = {
      "creationTimestamp", "deletionTimestamp", "startTime",     "startedAt",
      "finishedAt",        "lastTransitionTime", "lastProbeTime", "lastUpdateTime",
      "lastHeartbeatTime", "firstTimestamp",     "lastTimestamp", "eventTime",
      "renewTime",         "acquireTime",        "lastObservedTime", "timeAdded"};
  return std::find(std::begin(kKeys), std::end(kKeys), key) != std::end(kKeys);
}

// The metav1.MicroTime fields among them (Lease and Event).
bool IsMicroTimeField(std::string_view key) {
  return key == "renewTime" || key == "acquireTime" || key == "eventTime";
}

void ShiftValue(json::value& value, std::chrono::seconds shift, int depth) {
  if (depth > 64) return;
  if (value.is_object()) {
    for (auto& [key, child] : value.get_object()) {
      if (child.is_string() && IsTimeField(key)) {
        std::string_view text = child.get_string();
        Result<WallTime> time = ParseRfc3339(text);
        if (!time.ok()) continue;
        // MicroTime values have exactly six fraction digits (kubectl parses them with that
        // fixed layout); Time values are whole seconds, or keep the fraction they came with.
        if (IsMicroTimeField(key)) {
          child = FormatRfc3339Micro(*time + shift);
        } else {
          bool fractional = text.find('.') != std::string_view::npos;
          child = fractional ? FormatRfc3339Nano(*time + shift) : FormatRfc3339(*time + shift);
        }
      } else {
        ShiftValue(child, shift, depth + 1);
      }
    }
  } else if (value.is_array()) {
    for (json::value& child : value.get_array()) ShiftValue(child, shift, depth + 1);
  }
}

}  // namespace

void ShiftTimes(json::object& object, std::chrono::seconds shift) {
  json::value* log = object.if_contains("log");
  const json::value* kind = object.if_contains("kind");
  if (log && log->is_string() && kind && kind->is_string() &&
      kind->get_string() == kContainerLogKind) {
    std::string_view text = log->get_string();
    std::string shifted;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(start, end - start);
      start = end + 1;
      size_t space = line.find(' ');
      Result<WallTime> time = ParseRfc3339(line.substr(0, space));
      if (time.ok()) {
        shifted += FormatRfc3339Nano(*time + shift);
        if (space != std::string_view::npos) shifted += line.substr(space);
      } else {
        shifted += line;
      }
      shifted += '\n';
    }
    *log = shifted;
  }
  json::value whole(std::move(object));
  ShiftValue(whole, shift, 0);
  object = std::move(whole.as_object());
}

Result<std::vector<json::object>> WorkloadObjects(WallTime now) {
  UPLINK_ASSIGN_OR_RETURN(std::vector<json::object> objects,
                          ParseObjects(EmbeddedDataFile("workloads.yaml")));
  UPLINK_ASSIGN_OR_RETURN(WallTime epoch, ParseRfc3339(kWorkloadsEpoch));
  auto shift = std::chrono::duration_cast<std::chrono::seconds>(now - epoch);
  for (json::object& object : objects) ShiftTimes(object, shift);
  return objects;
}

Result<std::vector<json::object>> ParseObjects(std::string_view text) {
  std::vector<json::value> documents;
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    // JSON files (kubectl -o json output, often tab-indented) are not always valid YAML.
    UPLINK_ASSIGN_OR_RETURN(json::value document, ParseJson(text, JsonLimits{64 << 20, 64}));
    documents.push_back(std::move(document));
  } else {
    UPLINK_ASSIGN_OR_RETURN(documents, ParseYamlDocuments(text));
  }
  std::vector<json::object> objects;
  for (size_t d = 0; d < documents.size(); ++d) {
    std::string where = "document " + std::to_string(d + 1);
    if (!documents[d].is_object()) return InvalidArgumentError(where + " is not an object");
    json::object& document = documents[d].as_object();
    const json::value* kind = document.if_contains("kind");
    std::string kind_text = kind && kind->is_string() ? std::string(kind->get_string()) : "";
    const json::value* items = document.if_contains("items");
    if (!kind_text.ends_with("List")) {
      if (kind_text.empty()) return InvalidArgumentError(where + " has no kind");
      objects.push_back(std::move(document));
      continue;
    }
    if (!items || !items->is_array()) {
      return InvalidArgumentError(where + " is a " + kind_text + " without an items array");
    }
    // Items of a typed list (NodeList) may leave out their kind; a plain List must not.
    std::string item_kind = kind_text == "List" ? "" : kind_text.substr(0, kind_text.size() - 4);
    const json::value* api_version = document.if_contains("apiVersion");
    for (size_t i = 0; i < items->get_array().size(); ++i) {
      const json::value& item = items->get_array()[i];
      std::string item_where = where + " item " + std::to_string(i + 1);
      if (!item.is_object()) return InvalidArgumentError(item_where + " is not an object");
      json::object object = item.get_object();
      if (!object.contains("kind")) {
        if (item_kind.empty()) return InvalidArgumentError(item_where + " has no kind");
        object["kind"] = item_kind;
        if (api_version) object["apiVersion"] = *api_version;
      }
      objects.push_back(std::move(object));
    }
  }
  return objects;
}

Result<VersionParts> ParseServerVersion(std::string_view version) {
  auto invalid = [&] {
    return InvalidArgumentError("server version \"" + std::string(version.substr(0, 64)) +
                                "\" is not of the form vMAJOR.MINOR.PATCH (e.g. v1.32.4)");
  };
  if (!version.starts_with('v')) return invalid();
  VersionParts parts;
  std::string* field = &parts.major;
  int dots = 0;
  std::string patch;
  for (size_t i = 1; i < version.size(); ++i) {
    char c = version[i];
    if (c == '-' || c == '+') break;  // pre-release or build suffix: "v1.31.6+rke2r1"
    if (c == '.') {
      if (field->empty() || ++dots > 2) return invalid();
      field = dots == 1 ? &parts.minor : &patch;
    } else if (c >= '0' && c <= '9' && field->size() < 6) {
      *field += c;
    } else {
      return invalid();
    }
  }
  if (dots != 2 || patch.empty()) return invalid();
  return parts;
}

}  // namespace uplink::kubesim
