#include "kubesim/table.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "common/files.h"
#include "common/labels.h"
#include "common/text.h"

namespace uplink::kubesim {
namespace {

struct Column {
  const char* name;
  const char* type;
  const char* format;
  int priority;
  const char* description;
};

const char* const kNameDoc =
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically.";
const char* const kAgeDoc =
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created.";

// The column definitions of kube-apiserver's printers (pkg/printers/internalversion), by kind.
const std::vector<Column>& ColumnsFor(const ResourceType& type) {
  static const std::map<std::string, std::vector<Column>, std::less<>> kColumns = {
      {"Node",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Status", "string", "", 0, "The status of the node"},
        {"Roles", "string", "", 0, "The roles of the node"},
        {"Age", "string", "", 0, kAgeDoc},
        {"Version", "string", "", 0, "Kubelet Version reported by the node."},
        {"Internal-IP", "string", "", 1, "List of addresses reachable to the node."},
        {"External-IP", "string", "", 1, "List of addresses reachable to the node."},
        {"OS-Image", "string", "", 1, "OS Image reported by the node from /etc/os-release."},
        {"Kernel-Version", "string", "", 1, "Kernel Version reported by the node."},
        {"Container-Runtime", "string", "", 1, "ContainerRuntime Version reported by the node."}}},
      {"Namespace",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Status", "string", "", 0, "The status of the namespace"},
        {"Age", "string", "", 0, kAgeDoc}}},
      {"ConfigMap",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Data", "string", "", 0, "Data contains the configuration data."},
        {"Age", "string", "", 0, kAgeDoc}}},
      {"Secret",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Type", "string", "", 0,
         "Used to facilitate programmatic handling of secret data. More info: "
         "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"},
        {"Data", "string", "", 0,
         "Data contains the secret data. Each key must consist of alphanumeric characters, '-', "
         "'_' or '.'. The serialized form of the secret data is a base64 encoded string, "
         "representing the arbitrary (possibly non-string) data value here. Described in "
         "https://tools.ietf.org/html/rfc4648#section-4"},
        {"Age", "string", "", 0, kAgeDoc}}},
      {"Pod",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Ready", "string", "", 0,
         "The aggregate readiness state of this pod for accepting traffic."},
        {"Status", "string", "", 0, "The aggregate status of the containers in this pod."},
        {"Restarts", "string", "", 0,
         "The number of times the containers in this pod have been restarted and when the last "
         "container in this pod has restarted."},
        {"Age", "string", "", 0, kAgeDoc},
        {"IP", "string", "", 1, "podIP address allocated to the pod."},
        {"Node", "string", "", 1, "NodeName indicates in which node this pod is scheduled."},
        {"Nominated Node", "string", "", 1,
         "nominatedNodeName is set only when this pod preempts other pods on the node."},
        {"Readiness Gates", "string", "", 1,
         "If specified, all readiness gates will be evaluated for pod readiness."}}},
      {"Event",
       {{"Last Seen", "string", "", 0,
         "The time at which the most recent occurrence of this event was recorded."},
        {"Type", "string", "", 0, "Type of this event (Normal, Warning)."},
        {"Reason", "string", "", 0,
         "This should be a short, machine understandable string that gives the reason for the "
         "transition into the object's current status."},
        {"Object", "string", "", 0, "The object that this event is about."},
        {"Subobject", "string", "", 1,
         "If referring to a piece of an object instead of an entire object, this string should "
         "contain a valid JSON/Go field access statement."},
        {"Source", "string", "", 1, "The component reporting this event."},
        {"Message", "string", "", 0,
         "A human-readable description of the status of this operation."},
        {"First Seen", "string", "", 1, "The time at which the event was first recorded."},
        {"Count", "string", "", 1, "The number of times this event has occurred."},
        {"Name", "string", "name", 1, kNameDoc}}},
      {"Service",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Type", "string", "", 0, "type determines how the Service is exposed."},
        {"Cluster-IP", "string", "", 0, "clusterIP is the IP address of the service."},
        {"External-IP", "string", "", 0,
         "externalIPs is a list of IP addresses for which nodes in the cluster will also accept "
         "traffic for this service."},
        {"Port(s)", "string", "", 0, "The list of ports that are exposed by this service."},
        {"Age", "string", "", 0, kAgeDoc},
        {"Selector", "string", "", 1,
         "Route service traffic to pods with label keys and values matching this selector."}}},
      {"ServiceAccount",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Secrets", "string", "", 0,
         "Secrets is a list of the secrets in the same namespace that pods running using this "
         "ServiceAccount are allowed to use."},
        {"Age", "string", "", 0, kAgeDoc}}},
      {"Deployment",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Ready", "string", "", 0, "Number of the pod with ready state"},
        {"Up-to-date", "string", "", 0,
         "Total number of non-terminated pods targeted by this deployment that have the desired "
         "template spec."},
        {"Available", "string", "", 0,
         "Total number of available pods (ready for at least minReadySeconds) targeted by this "
         "deployment."},
        {"Age", "string", "", 0, kAgeDoc},
        {"Containers", "string", "", 1, "Names of each container in the template."},
        {"Images", "string", "", 1, "Images referenced by each container in the template."},
        {"Selector", "string", "", 1, "Label selector for pods."}}},
      {"ReplicaSet",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Desired", "integer", "", 0, "Replicas is the number of desired replicas."},
        {"Current", "integer", "", 0, "Replicas is the most recently observed number of replicas."},
        {"Ready", "integer", "", 0,
         "readyReplicas is the number of pods targeted by this ReplicaSet with a Ready "
         "Condition."},
        {"Age", "string", "", 0, kAgeDoc},
        {"Containers", "string", "", 1, "Names of each container in the template."},
        {"Images", "string", "", 1, "Images referenced by each container in the template."},
        {"Selector", "string", "", 1, "Selector is a label query over pods."}}},
      {"StatefulSet",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Ready", "string", "", 0, "Number of the pod with ready state"},
        {"Age", "string", "", 0, kAgeDoc},
        {"Containers", "string", "", 1, "Names of each container in the template."},
        {"Images", "string", "", 1, "Images referenced by each container in the template."}}},
      {"Lease",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Holder", "string", "", 0,
         "holderIdentity contains the identity of the holder of a current lease."},
        {"Age", "string", "", 0, kAgeDoc}}},
      {"Role",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Created At", "date", "", 0, kAgeDoc}}},
      {"ClusterRole",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Created At", "date", "", 0, kAgeDoc}}},
      {"RoleBinding",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Role", "string", "", 0, "RoleRef references the Role or ClusterRole bound."},
        {"Age", "string", "", 0, kAgeDoc},
        {"Users", "string", "", 1, "Users in the roleBinding"},
        {"Groups", "string", "", 1, "Groups in the roleBinding"},
        {"ServiceAccounts", "string", "", 1, "ServiceAccounts in the roleBinding"}}},
      {"ClusterRoleBinding",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Role", "string", "", 0, "RoleRef references the ClusterRole bound."},
        {"Age", "string", "", 0, kAgeDoc},
        {"Users", "string", "", 1, "Users in the clusterRoleBinding"},
        {"Groups", "string", "", 1, "Groups in the clusterRoleBinding"},
        {"ServiceAccounts", "string", "", 1, "ServiceAccounts in the clusterRoleBinding"}}},
      {"ResourceQuota",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Age", "string", "", 0, kAgeDoc},
        {"Request", "string", "", 0, "Request represents a minimum amount of cpu/memory that a "
                                     "container may consume."},
        {"Limit", "string", "", 0, "Limits control the maximum amount of cpu/memory that a "
                                   "container may use independent of contention on the node."}}},
      {"LimitRange",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Created At", "date", "", 0, kAgeDoc}}},
      {"NetworkPolicy",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Pod-Selector", "string", "", 0,
         "podSelector selects the pods to which this NetworkPolicy object applies."},
        {"Age", "string", "", 0, kAgeDoc}}},
      {"PriorityClass",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Value", "integer", "", 0,
         "value represents the integer value of this priority class."},
        {"Global-Default", "boolean", "", 0,
         "globalDefault specifies whether this PriorityClass should be considered as the "
         "default priority for pods that do not have any priority class."},
        {"Age", "string", "", 0, kAgeDoc},
        {"PreemptionPolicy", "string", "", 0,
         "preemptionPolicy is the Policy for preempting pods with lower priority."}}},
      {"ValidatingAdmissionPolicy",
       {{"Name", "string", "name", 0, kNameDoc},
        {"Validations", "integer", "", 0, "Validations indicates the number of validation rules"},
        {"ParamKind", "string", "", 0, "ParamKind specifies the kind of resources used to "
                                       "parameterize this policy"},
        {"Age", "string", "", 0, kAgeDoc}}},
      {"ValidatingAdmissionPolicyBinding",
       {{"Name", "string", "name", 0, kNameDoc},
        {"PolicyName", "string", "", 0, "PolicyName indicates the policy definition which the "
                                        "policy binding binded to"},
        {"ParamRef", "string", "", 0, "ParamRef indicates the param resource which sets the "
                                      "configration param"},
        {"Age", "string", "", 0, kAgeDoc}}},
  };
  static const std::vector<Column> kDefault = {
      {"Name", "string", "name", 0, kNameDoc},
      {"Age", "string", "", 0, kAgeDoc},
  };
  auto it = kColumns.find(type.kind);
  return it == kColumns.end() ? kDefault : it->second;
}

const json::object& Field(const json::object& object, std::string_view key) {
  static const json::object kEmpty;
  const json::value* value = object.if_contains(key);
  return value && value->is_object() ? value->get_object() : kEmpty;
}

const json::array& Items(const json::object& object, std::string_view key) {
  static const json::array kEmpty;
  const json::value* value = object.if_contains(key);
  return value && value->is_array() ? value->get_array() : kEmpty;
}

std::string Text(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value && value->is_string() ? std::string(value->get_string()) : std::string();
}

std::int64_t Integer(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value && value->is_int64() ? value->get_int64() : 0;
}

bool Boolean(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value && value->is_bool() && value->get_bool();
}

std::string Since(const std::string& timestamp, WallTime now) {
  Result<WallTime> time = ParseRfc3339(timestamp);
  if (!time.ok()) return "<unknown>";
  return HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - *time));
}

std::string Age(const json::object& metadata, WallTime now) {
  return Since(Text(metadata, "creationTimestamp"), now);
}

// As printNode: the Ready condition, then SchedulingDisabled when cordoned.
std::string NodeStatus(const json::object& node) {
  std::string status = "Unknown";
  for (const json::value& condition : Items(Field(node, "status"), "conditions")) {
    if (!condition.is_object() || Text(condition.get_object(), "type") != "Ready") continue;
    status = Text(condition.get_object(), "status") == "True" ? "Ready" : "NotReady";
  }
  if (Boolean(Field(node, "spec"), "unschedulable")) status += ",SchedulingDisabled";
  return status;
}

std::string NodeRoles(const json::object& metadata) {
  constexpr std::string_view kRolePrefix = "node-role.kubernetes.io/";
  std::set<std::string> roles;
  for (const auto& [key, value] : Field(metadata, "labels")) {
    if (key.starts_with(kRolePrefix) && key.size() > kRolePrefix.size()) {
      roles.insert(std::string(key.substr(kRolePrefix.size())));
    } else if (key == "kubernetes.io/role" && value.is_string() && !value.get_string().empty()) {
      roles.insert(std::string(value.get_string()));
    }
  }
  std::string joined;
  for (const std::string& role : roles) joined += (joined.empty() ? "" : ",") + role;
  return joined.empty() ? "<none>" : joined;
}

std::string NodeAddress(const json::object& node, std::string_view type) {
  for (const json::value& address : Items(Field(node, "status"), "addresses")) {
    if (address.is_object() && Text(address.get_object(), "type") == type) {
      return Text(address.get_object(), "address");
    }
  }
  return "<none>";
}

std::string OrUnknown(std::string text) { return text.empty() ? "<unknown>" : text; }
std::string OrNone(std::string text) { return text.empty() ? "<none>" : text; }

bool HasTrueCondition(const json::object& status, std::string_view type) {
  for (const json::value& condition : Items(status, "conditions")) {
    if (condition.is_object() && Text(condition.get_object(), "type") == type &&
        Text(condition.get_object(), "status") == "True") {
      return true;
    }
  }
  return false;
}

// The latest lastState.terminated.finishedAt of some container statuses.
void NoteLastRestart(const json::object& container_status, std::optional<WallTime>& latest) {
  const json::object& terminated = Field(Field(container_status, "lastState"), "terminated");
  Result<WallTime> finished = ParseRfc3339(Text(terminated, "finishedAt"));
  if (finished.ok() && (!latest || *latest < *finished)) latest = *finished;
}

std::string TerminatedReason(const json::object& terminated, std::string_view prefix) {
  std::string reason = Text(terminated, "reason");
  if (!reason.empty()) return std::string(prefix) + reason;
  if (Integer(terminated, "signal") != 0) {
    return std::string(prefix) + "Signal:" + std::to_string(Integer(terminated, "signal"));
  }
  return std::string(prefix) + "ExitCode:" + std::to_string(Integer(terminated, "exitCode"));
}

bool IsRestartableInitContainer(const json::object& spec, std::string_view name) {
  for (const json::value& container : Items(spec, "initContainers")) {
    if (container.is_object() && Text(container.get_object(), "name") == name) {
      return Text(container.get_object(), "restartPolicy") == "Always";
    }
  }
  return false;
}

// printPod: READY, STATUS and RESTARTS as kubectl shows them, from the container statuses.
json::array PodCells(const json::object& pod, WallTime now) {
  const json::object& metadata = Field(pod, "metadata");
  const json::object& spec = Field(pod, "spec");
  const json::object& status = Field(pod, "status");
  std::int64_t total = static_cast<std::int64_t>(Items(spec, "containers").size());
  for (const json::value& init : Items(spec, "initContainers")) {
    if (init.is_object() && Text(init.get_object(), "restartPolicy") == "Always") ++total;
  }
  std::int64_t ready = 0;
  std::int64_t restarts = 0;
  std::int64_t sidecar_restarts = 0;
  std::optional<WallTime> last_restart;
  std::optional<WallTime> last_sidecar_restart;
  std::string reason = Text(status, "phase");
  if (!Text(status, "reason").empty()) reason = Text(status, "reason");
  for (const json::value& condition : Items(status, "conditions")) {
    if (condition.is_object() && Text(condition.get_object(), "type") == "PodScheduled" &&
        Text(condition.get_object(), "reason") == "SchedulingGated") {
      reason = "SchedulingGated";
    }
  }
  const json::array& init_statuses = Items(status, "initContainerStatuses");
  bool initializing = false;
  for (size_t i = 0; i < init_statuses.size(); ++i) {
    if (!init_statuses[i].is_object()) continue;
    const json::object& container = init_statuses[i].get_object();
    bool sidecar = IsRestartableInitContainer(spec, Text(container, "name"));
    restarts += Integer(container, "restartCount");
    NoteLastRestart(container, last_restart);
    if (sidecar) {
      sidecar_restarts += Integer(container, "restartCount");
      NoteLastRestart(container, last_sidecar_restart);
    }
    const json::object& state = Field(container, "state");
    const json::object& terminated = Field(state, "terminated");
    const json::object& waiting = Field(state, "waiting");
    if (state.contains("terminated") && Integer(terminated, "exitCode") == 0) continue;
    if (sidecar && Boolean(container, "started")) {
      if (Boolean(container, "ready")) ++ready;
      continue;
    }
    if (state.contains("terminated")) {
      reason = TerminatedReason(terminated, "Init:");
    } else if (!Text(waiting, "reason").empty() && Text(waiting, "reason") != "PodInitializing") {
      reason = "Init:" + Text(waiting, "reason");
    } else {
      reason = "Init:" + std::to_string(i) + "/" +
               std::to_string(Items(spec, "initContainers").size());
    }
    initializing = true;
    break;
  }
  if (!initializing || HasTrueCondition(status, "Initialized")) {
    restarts = sidecar_restarts;
    last_restart = last_sidecar_restart;
    bool has_running = false;
    const json::array& statuses = Items(status, "containerStatuses");
    for (size_t i = statuses.size(); i-- > 0;) {
      if (!statuses[i].is_object()) continue;
      const json::object& container = statuses[i].get_object();
      restarts += Integer(container, "restartCount");
      NoteLastRestart(container, last_restart);
      const json::object& state = Field(container, "state");
      std::string waiting_reason = Text(Field(state, "waiting"), "reason");
      if (!waiting_reason.empty()) {
        reason = waiting_reason;
      } else if (state.contains("terminated")) {
        reason = TerminatedReason(Field(state, "terminated"), "");
      } else if (Boolean(container, "ready") && state.contains("running")) {
        has_running = true;
        ++ready;
      }
    }
    if (reason == "Completed" && has_running) {
      reason = HasTrueCondition(status, "Ready") ? "Running" : "NotReady";
    }
  }
  std::string phase = Text(status, "phase");
  if (metadata.contains("deletionTimestamp")) {
    if (Text(status, "reason") == "NodeLost") {
      reason = "Unknown";
    } else if (phase != "Succeeded" && phase != "Failed") {
      reason = "Terminating";
    }
  }
  std::string restart_text = std::to_string(restarts);
  if (restarts != 0 && last_restart) {
    auto since = std::chrono::duration_cast<std::chrono::seconds>(now - *last_restart);
    restart_text += " (" + HumanDuration(since) + " ago)";
  }
  std::string ip;
  const json::array& ips = Items(status, "podIPs");
  if (!ips.empty() && ips[0].is_object()) ip = Text(ips[0].get_object(), "ip");
  std::vector<std::string> gates;
  for (const json::value& gate : Items(spec, "readinessGates")) {
    if (gate.is_object()) gates.push_back(Text(gate.get_object(), "conditionType"));
  }
  std::string gate_text = "<none>";
  if (!gates.empty()) {
    std::int64_t true_gates = 0;
    for (const std::string& gate : gates) true_gates += HasTrueCondition(status, gate) ? 1 : 0;
    gate_text = std::to_string(true_gates) + "/" + std::to_string(gates.size());
  }
  return json::array{Text(metadata, "name"),
                     std::to_string(ready) + "/" + std::to_string(total),
                     reason,
                     restart_text,
                     Age(metadata, now),
                     OrNone(ip),
                     OrNone(Text(spec, "nodeName")),
                     OrNone(Text(status, "nominatedNodeName")),
                     gate_text};
}

json::array EventCells(const json::object& event, WallTime now) {
  const json::object& metadata = Field(event, "metadata");
  // Events of the events.k8s.io API have an eventTime instead of first and last timestamps.
  std::string first_timestamp = Text(event, "firstTimestamp");
  std::string first =
      Since(first_timestamp.empty() ? Text(event, "eventTime") : first_timestamp, now);
  std::string last_timestamp = Text(event, "lastTimestamp");
  std::string last = last_timestamp.empty() ? first : Since(last_timestamp, now);
  std::int64_t count = Integer(event, "count");
  const json::object& series = Field(event, "series");
  if (!series.empty()) {
    last = Since(Text(series, "lastObservedTime"), now);
    count = Integer(series, "count");
  } else if (count == 0) {
    count = 1;  // singleton events of the events.k8s.io API carry no count
  }
  const json::object& involved = Field(event, "involvedObject");
  std::string kind = AsciiLower(Text(involved, "kind"));
  std::string target = Text(involved, "name").empty() ? kind : kind + "/" + Text(involved, "name");
  const json::object& source = Field(event, "source");
  std::string component = Text(source, "component");
  if (component.empty()) component = Text(event, "reportingComponent");
  std::string instance = Text(source, "host");
  if (instance.empty()) instance = Text(event, "reportingInstance");
  std::string source_text = instance.empty() ? component : component + ", " + instance;
  std::string message(TrimWhitespace(Text(event, "message")));
  return json::array{last,
                     Text(event, "type"),
                     Text(event, "reason"),
                     target,
                     Text(involved, "fieldPath"),
                     source_text,
                     message,
                     first,
                     count,
                     Text(metadata, "name")};
}

// metav1.LabelSelectorAsSelector(...).String(): requirements sorted by key.
std::string SelectorText(const json::object& selector) {
  std::vector<std::string> terms;
  for (const auto& [key, value] : Field(selector, "matchLabels")) {
    if (value.is_string()) {
      terms.push_back(std::string(key) + "=" + std::string(value.get_string()));
    }
  }
  for (const json::value& expression : Items(selector, "matchExpressions")) {
    if (!expression.is_object()) continue;
    const json::object& requirement = expression.get_object();
    std::vector<std::string> values;
    for (const json::value& value : Items(requirement, "values")) {
      if (value.is_string()) values.emplace_back(value.get_string());
    }
    std::string key = Text(requirement, "key");
    std::string op = Text(requirement, "operator");
    if (op == "In") terms.push_back(key + " in (" + Join(values, ",") + ")");
    if (op == "NotIn") terms.push_back(key + " notin (" + Join(values, ",") + ")");
    if (op == "Exists") terms.push_back(key);
    if (op == "DoesNotExist") terms.push_back("!" + key);
  }
  Result<labels::Selector> parsed = labels::Selector::Parse(Join(terms, ","));
  return parsed.ok() ? parsed->ToString() : Join(terms, ",");
}

// layoutContainerCells: container names and images, comma-separated.
std::pair<std::string, std::string> ContainerCells(const json::object& workload) {
  std::vector<std::string> names;
  std::vector<std::string> images;
  const json::object& pod_spec = Field(Field(Field(workload, "spec"), "template"), "spec");
  for (const json::value& container : Items(pod_spec, "containers")) {
    if (!container.is_object()) continue;
    names.push_back(Text(container.get_object(), "name"));
    images.push_back(Text(container.get_object(), "image"));
  }
  return {Join(names, ","), Join(images, ",")};
}

std::int64_t DesiredReplicas(const json::object& workload) {
  const json::object& spec = Field(workload, "spec");
  return spec.contains("replicas") ? Integer(spec, "replicas") : 1;
}

std::string ServicePorts(const json::object& spec) {
  std::vector<std::string> ports;
  for (const json::value& entry : Items(spec, "ports")) {
    if (!entry.is_object()) continue;
    const json::object& port = entry.get_object();
    std::string protocol = Text(port, "protocol").empty() ? "TCP" : Text(port, "protocol");
    std::string text = std::to_string(Integer(port, "port"));
    if (Integer(port, "nodePort") > 0) text += ":" + std::to_string(Integer(port, "nodePort"));
    ports.push_back(text + "/" + protocol);
  }
  return ports.empty() ? "<none>" : Join(ports, ",");
}

std::string ServiceExternalIp(const json::object& service) {
  const json::object& spec = Field(service, "spec");
  std::string type = Text(spec, "type");
  std::vector<std::string> external;
  for (const json::value& ip : Items(spec, "externalIPs")) {
    if (ip.is_string()) external.emplace_back(ip.get_string());
  }
  if (type == "ExternalName") return Text(spec, "externalName");
  if (type == "LoadBalancer") {
    const json::object& load_balancer = Field(Field(service, "status"), "loadBalancer");
    for (const json::value& ingress : Items(load_balancer, "ingress")) {
      if (!ingress.is_object()) continue;
      std::string address = Text(ingress.get_object(), "ip");
      if (address.empty()) address = Text(ingress.get_object(), "hostname");
      if (!address.empty()) external.push_back(address);
    }
    return external.empty() ? "<pending>" : Join(external, ",");
  }
  return external.empty() ? "<none>" : Join(external, ",");
}

std::string StringMapText(const json::object& map) {
  std::vector<std::string> pairs;
  for (const auto& [key, value] : map) {
    if (value.is_string()) {
      pairs.push_back(std::string(key) + "=" + std::string(value.get_string()));
    }
  }
  std::sort(pairs.begin(), pairs.end());
  return pairs.empty() ? "<none>" : Join(pairs, ",");
}

// printResourceQuota: "resource: used/hard" pairs, limits.* in the Limit column.
json::array QuotaCells(const json::object& quota, WallTime now) {
  const json::object& status = Field(quota, "status");
  const json::object& hard = Field(status, "hard");
  const json::object& used = Field(status, "used");
  std::vector<std::string> names;
  for (const auto& [resource, value] : hard) names.emplace_back(resource);
  std::sort(names.begin(), names.end());
  std::vector<std::string> requests, limits;
  for (const std::string& resource : names) {
    std::string used_text = Text(used, resource);
    std::string entry = resource + ": " + (used_text.empty() ? "0" : used_text) + "/" +
                        Text(hard, resource);
    (resource.starts_with("limits.") ? limits : requests).push_back(entry);
  }
  const json::object& metadata = Field(quota, "metadata");
  return json::array{Text(metadata, "name"), Age(metadata, now), Join(requests, ", "),
                     Join(limits, ", ")};
}

json::array BindingCells(const json::object& binding, WallTime now) {
  const json::object& role_ref = Field(binding, "roleRef");
  std::vector<std::string> users, groups, service_accounts;
  for (const json::value& entry : Items(binding, "subjects")) {
    if (!entry.is_object()) continue;
    const json::object& subject = entry.get_object();
    std::string kind = Text(subject, "kind");
    std::string name = Text(subject, "name");
    if (kind == "User") users.push_back(name);
    if (kind == "Group") groups.push_back(name);
    if (kind == "ServiceAccount") {
      std::string namespace_name = Text(subject, "namespace");
      service_accounts.push_back(namespace_name.empty() ? name : namespace_name + "/" + name);
    }
  }
  const json::object& metadata = Field(binding, "metadata");
  return json::array{Text(metadata, "name"), Text(role_ref, "kind") + "/" + Text(role_ref, "name"),
                     Age(metadata, now), Join(users, ", "), Join(groups, ", "),
                     Join(service_accounts, ", ")};
}

json::array Cells(const ResourceType& type, const json::object& object, WallTime now) {
  const json::object& metadata = Field(object, "metadata");
  const json::object& spec = Field(object, "spec");
  const json::object& status = Field(object, "status");
  std::string name = Text(metadata, "name");
  const std::string& kind = type.kind;
  if (kind == "Node") {
    const json::object& info = Field(status, "nodeInfo");
    return json::array{name,
                       NodeStatus(object),
                       NodeRoles(metadata),
                       Age(metadata, now),
                       Text(info, "kubeletVersion"),
                       NodeAddress(object, "InternalIP"),
                       NodeAddress(object, "ExternalIP"),
                       OrUnknown(Text(info, "osImage")),
                       OrUnknown(Text(info, "kernelVersion")),
                       OrUnknown(Text(info, "containerRuntimeVersion"))};
  }
  if (kind == "Namespace") return json::array{name, Text(status, "phase"), Age(metadata, now)};
  if (kind == "ConfigMap") {
    std::int64_t entries = static_cast<std::int64_t>(Field(object, "data").size() +
                                                     Field(object, "binaryData").size());
    return json::array{name, entries, Age(metadata, now)};
  }
  if (kind == "Secret") {
    // printSecret: the number of keys, never their values.
    return json::array{name, Text(object, "type"),
                       static_cast<std::int64_t>(Field(object, "data").size()), Age(metadata, now)};
  }
  if (kind == "Pod") return PodCells(object, now);
  if (kind == "Event") return EventCells(object, now);
  if (kind == "Service") {
    const json::array& cluster_ips = Items(spec, "clusterIPs");
    std::string cluster_ip = !cluster_ips.empty() && cluster_ips[0].is_string()
                                 ? std::string(cluster_ips[0].get_string())
                                 : OrNone(Text(spec, "clusterIP"));
    return json::array{name, Text(spec, "type"), cluster_ip, ServiceExternalIp(object),
                       ServicePorts(spec), Age(metadata, now),
                       StringMapText(Field(spec, "selector"))};
  }
  if (kind == "ServiceAccount") {
    return json::array{name, static_cast<std::int64_t>(Items(object, "secrets").size()),
                       Age(metadata, now)};
  }
  if (kind == "Deployment") {
    auto [containers, images] = ContainerCells(object);
    return json::array{name,
                       std::to_string(Integer(status, "readyReplicas")) + "/" +
                           std::to_string(DesiredReplicas(object)),
                       Integer(status, "updatedReplicas"),
                       Integer(status, "availableReplicas"),
                       Age(metadata, now),
                       containers,
                       images,
                       SelectorText(Field(spec, "selector"))};
  }
  if (kind == "ReplicaSet") {
    auto [containers, images] = ContainerCells(object);
    return json::array{name,
                       DesiredReplicas(object),
                       Integer(status, "replicas"),
                       Integer(status, "readyReplicas"),
                       Age(metadata, now),
                       containers,
                       images,
                       SelectorText(Field(spec, "selector"))};
  }
  if (kind == "StatefulSet") {
    auto [containers, images] = ContainerCells(object);
    return json::array{name,
                       std::to_string(Integer(status, "readyReplicas")) + "/" +
                           std::to_string(DesiredReplicas(object)),
                       Age(metadata, now), containers, images};
  }
  if (kind == "Lease") return json::array{name, Text(spec, "holderIdentity"), Age(metadata, now)};
  if (kind == "Role" || kind == "ClusterRole") {
    return json::array{name, Text(metadata, "creationTimestamp")};
  }
  if (kind == "RoleBinding" || kind == "ClusterRoleBinding") return BindingCells(object, now);
  if (kind == "ResourceQuota") return QuotaCells(object, now);
  if (kind == "LimitRange") return json::array{name, Text(metadata, "creationTimestamp")};
  if (kind == "NetworkPolicy") {
    std::string selector = SelectorText(Field(spec, "podSelector"));
    return json::array{name, selector.empty() ? "<none>" : selector, Age(metadata, now)};
  }
  if (kind == "PriorityClass") {
    return json::array{name, Integer(object, "value"), Boolean(object, "globalDefault"),
                       Age(metadata, now), Text(object, "preemptionPolicy")};
  }
  if (kind == "ValidatingAdmissionPolicy") {
    const json::object& param = Field(spec, "paramKind");
    std::string param_kind = param.empty() ? "<unset>"
                                           : Text(param, "apiVersion") + "/" + Text(param, "kind");
    return json::array{name, static_cast<std::int64_t>(Items(spec, "validations").size()),
                       param_kind, Age(metadata, now)};
  }
  if (kind == "ValidatingAdmissionPolicyBinding") {
    const json::object& param = Field(spec, "paramRef");
    std::string param_ref = "<unset>";
    if (!param.empty()) {
      std::string ns = Text(param, "namespace");
      param_ref = ns.empty() ? Text(param, "name") : ns + "/" + Text(param, "name");
    }
    return json::array{name, Text(spec, "policyName"), param_ref, Age(metadata, now)};
  }
  return json::array{name, Age(metadata, now)};
}

}  // namespace

std::string HumanDuration(std::chrono::seconds age) {
  std::int64_t seconds = age.count();
  // Clocks a second or so apart still read as "now".
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return std::to_string(seconds) + "s";
  std::int64_t minutes = seconds / 60;
  if (minutes < 10) {
    std::int64_t rest = seconds % 60;
    return std::to_string(minutes) + "m" + (rest ? std::to_string(rest) + "s" : "");
  }
  if (minutes < 180) return std::to_string(minutes) + "m";
  std::int64_t hours = minutes / 60;
  if (hours < 8) {
    std::int64_t rest = minutes % 60;
    return std::to_string(hours) + "h" + (rest ? std::to_string(rest) + "m" : "");
  }
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) {
    std::int64_t rest = hours % 24;
    return std::to_string(hours / 24) + "d" + (rest ? std::to_string(rest) + "h" : "");
  }
  if (hours < 24 * 365 * 2) return std::to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) {
    std::int64_t rest = (hours / 24) % 365;
    return std::to_string(hours / 24 / 365) + "y" + (rest ? std::to_string(rest) + "d" : "");
  }
  return std::to_string(hours / 24 / 365) + "y";
}

Result<IncludeObject> ParseIncludeObject(std::string_view text) {
  if (text.empty() || text == "Metadata") return IncludeObject::kMetadata;
  if (text == "None") return IncludeObject::kNone;
  if (text == "Object") return IncludeObject::kObject;
  return InvalidArgumentError("includeObject must be None, Metadata or Object, not \"" +
                              std::string(text.substr(0, 32)) + "\"");
}

bool AcceptsTable(std::string_view accept) {
  size_t start = 0;
  while (start <= accept.size()) {
    size_t comma = accept.find(',', start);
    if (comma == std::string_view::npos) comma = accept.size();
    std::string_view media = accept.substr(start, comma - start);
    bool as_table = false, v1 = false, meta_group = false;
    size_t param = 0;
    while ((param = media.find(';', param)) != std::string_view::npos) {
      size_t end = media.find(';', param + 1);
      std::string_view pair = media.substr(param + 1, end == std::string_view::npos ? end : end - param - 1);
      while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
      while (!pair.empty() && pair.back() == ' ') pair.remove_suffix(1);
      as_table |= pair == "as=Table";
      v1 |= pair == "v=v1";
      meta_group |= pair == "g=meta.k8s.io";
      param += 1;
    }
    if (as_table && v1 && meta_group) return true;
    start = comma + 1;
  }
  return false;
}

json::object BuildTable(const ResourceType& type, const std::vector<json::object>& objects,
                        json::object list_metadata, IncludeObject include, WallTime now) {
  json::array columns;
  for (const Column& column : ColumnsFor(type)) {
    columns.push_back(json::object{{"name", column.name},
                                   {"type", column.type},
                                   {"format", column.format},
                                   {"description", column.description},
                                   {"priority", column.priority}});
  }
  json::array rows;
  for (const json::object& object : objects) {
    json::object row{{"cells", Cells(type, object, now)}};
    if (include == IncludeObject::kObject) {
      row["object"] = object;
    } else if (include == IncludeObject::kMetadata) {
      // PartialObjectMetadata: what `--show-labels` and `-L` read.
      row["object"] = json::object{{"kind", "PartialObjectMetadata"},
                                   {"apiVersion", "meta.k8s.io/v1"},
                                   {"metadata", Field(object, "metadata")}};
    }
    rows.push_back(std::move(row));
  }
  return json::object{{"kind", "Table"},
                      {"apiVersion", "meta.k8s.io/v1"},
                      {"metadata", std::move(list_metadata)},
                      {"columnDefinitions", std::move(columns)},
                      {"rows", std::move(rows)}};
}

}  // namespace uplink::kubesim
