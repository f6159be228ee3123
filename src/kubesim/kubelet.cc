#include "kubesim/kubelet.h"

#include <algorithm>
#include <set>

#include "common/log.h"
#include "common/thread_name.h"
#include "kubesim/resource_admission.h"
#include "kubesim/scheduling.h"

namespace uplink::kubesim {
namespace {

const log::Logger kLog("kubesim.kubelet");

constexpr std::chrono::seconds kMaxBackoff{300};

std::int64_t IntAt(const json::object& object, std::string_view key, std::int64_t otherwise) {
  const json::value* value = object.if_contains(key);
  return value && value->is_int64() ? value->get_int64() : otherwise;
}

const ResourceType& Pods() { return *FindResource("", "v1", "pods"); }

// Go's time.Duration text for whole seconds: "10s", "1m20s", "5m0s".
std::string GoDuration(std::chrono::seconds duration) {
  std::int64_t seconds = duration.count();
  if (seconds < 60) return std::to_string(seconds) + "s";
  return std::to_string(seconds / 60) + "m" + std::to_string(seconds % 60) + "s";
}

// A pod the simulator created through the API and nobody has run yet: its status is what
// PrepareForCreate wrote, with no conditions.
bool Adoptable(const json::object& pod) {
  const json::object& status = ObjectAt(pod, "status");
  return StringAt(status, "phase") == "Pending" && !status.contains("conditions");
}

std::string NodeAddress(const json::object& node) {
  for (const json::value& address : ArrayAt(ObjectAt(node, "status"), "addresses")) {
    if (address.is_object() && StringAt(address.get_object(), "type") == "InternalIP") {
      return StringAt(address.get_object(), "address");
    }
  }
  return "";
}

// LabelSelector (matchLabels and matchExpressions) against a label map; empty selects all.
bool SelectorMatches(const json::object& selector, const json::object& labels) {
  for (const auto& [key, value] : ObjectAt(selector, "matchLabels")) {
    const json::value* label = labels.if_contains(key);
    if (!label || *label != value) return false;
  }
  for (const json::value& entry : ArrayAt(selector, "matchExpressions")) {
    if (!entry.is_object()) continue;
    const json::object& expression = entry.get_object();
    const json::value* label = labels.if_contains(StringAt(expression, "key"));
    std::string op = StringAt(expression, "operator");
    bool listed = false;
    for (const json::value& value : ArrayAt(expression, "values")) {
      if (label && *label == value) listed = true;
    }
    if ((op == "In" && !listed) || (op == "NotIn" && listed) || (op == "Exists" && !label) ||
        (op == "DoesNotExist" && label)) {
      return false;
    }
  }
  return true;
}

}  // namespace

struct Kubelet::ContainerRecord {
  enum class State { kCreating, kStarting, kRunning, kWaiting, kBackOff, kTerminated };
  std::string name;
  std::string image;
  std::string id;  // the runtime's, while it has one
  State state = State::kCreating;
  std::string waiting_reason;
  std::string waiting_message;
  WallTime started_at;
  int restarts = 0;
  json::object terminated;       // state.terminated once it ended
  json::object last_terminated;  // lastState.terminated after a restart
  SteadyTime next_start{};
  std::chrono::seconds backoff{0};
};

struct Kubelet::PodRecord {
  std::string uid;
  std::string namespace_name;
  std::string name;
  std::string node;
  bool admitted = false;  // the node's kubelet has taken the pod
  WallTime start_time;
  SteadyTime ready_at{};
  std::string host_ip;
  std::string pod_ip;
  std::vector<ContainerRecord> containers;
  std::string failed_reason;  // DeadlineExceeded, OutOfcpu, ...
  std::string failed_message;
  bool rejected = false;   // the node's kubelet refused it: nothing ever ran
  bool terminal = false;   // nothing starts again
  bool deleting = false;   // stopping for a graceful delete
  bool removing = false;   // the runtime is freeing the pod
  std::map<std::string, std::pair<std::string, std::string>> conditions;  // type -> status, since
  std::string unschedulable;  // the last FailedScheduling message
  std::string written;        // the status last written, as JSON
};

Kubelet::Kubelet(ObjectStore& store, Clock& clock, PodRuntime& runtime, KubeletOptions options)
    : store_(store), clock_(clock), runtime_(runtime), options_(options) {
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { Work(); });
  }
}

Kubelet::~Kubelet() { Stop(); }

void Kubelet::Start() {
  loop_ = std::thread([this] {
    NameThisThread("kubelet");
    Loop();
  });
}

void Kubelet::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (loop_.joinable()) loop_.join();
  {
    std::lock_guard lock(queue_mutex_);
    queue_.clear();
  }
  queue_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  // Nothing this simulator started outlives it.
  std::lock_guard lock(mutex_);
  for (auto& [uid, record] : records_) {
    for (ContainerRecord& container : record.containers) {
      if (!container.id.empty() && container.state == ContainerRecord::State::kRunning) {
        runtime_.Stop(container.id, std::chrono::seconds(0));
      }
    }
    if (!record.node.empty()) runtime_.RemovePod(uid);
  }
  records_.clear();
}

void Kubelet::Enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(queue_mutex_);
    if (stopping_) return;
    queue_.push_back(std::move(task));
  }
  queue_ready_.notify_one();
}

void Kubelet::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(queue_mutex_);
      queue_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void Kubelet::Loop() {
  std::int64_t seen = -1;
  while (!stopping_) {
    seen = store_.resource_version();
    SyncOnce();
    store_.WaitForChange(seen, options_.resync);
  }
}

void Kubelet::SyncOnce() {
  ListOptions all;
  Result<ListPage> pod_page = store_.List(Pods(), all);
  Result<ListPage> node_page = store_.List(*FindResource("", "v1", "nodes"), all);
  if (!pod_page.ok() || !node_page.ok()) return;
  std::vector<json::object>& pods = pod_page->items;
  std::lock_guard lock(mutex_);
  std::set<std::string> present;
  for (json::object& pod : pods) {
    std::string uid = StringAt(ObjectAt(pod, "metadata"), "uid");
    present.insert(uid);
    auto it = records_.find(uid);
    if (it == records_.end()) {
      if (!Adoptable(pod)) continue;
      PodRecord record;
      record.uid = uid;
      record.namespace_name = StringAt(ObjectAt(pod, "metadata"), "namespace");
      record.name = StringAt(ObjectAt(pod, "metadata"), "name");
      for (const json::value& container : ArrayAt(ObjectAt(pod, "spec"), "containers")) {
        if (!container.is_object()) continue;
        ContainerRecord entry;
        entry.name = StringAt(container.get_object(), "name");
        entry.image = StringAt(container.get_object(), "image");
        record.containers.push_back(std::move(entry));
      }
      it = records_.emplace(uid, std::move(record)).first;
    }
    Sync(it->second, pod, pods, node_page->items);
  }
  // Pods gone from the store (force-deleted, or with their namespace) take their containers.
  for (auto& [uid, record] : records_) {
    if (!present.count(uid) && !record.removing) Forget(record);
  }
  // The controller manager's part: what pods use, in their namespace's quota status.
  SyncQuotaStatuses(store_, clock_.Now());
}

void Kubelet::Sync(PodRecord& record, json::object& pod, std::vector<json::object>& pods,
                   const std::vector<json::object>& nodes) {
  if (record.removing) return;
  const json::object& metadata = ObjectAt(pod, "metadata");
  if (metadata.contains("deletionTimestamp")) {
    Terminate(record, pod);
    return;
  }
  const json::object& spec = ObjectAt(pod, "spec");
  if (record.node.empty()) record.node = StringAt(spec, "nodeName");
  if (record.node.empty()) {
    if (StringAt(spec, "schedulerName") != "default-scheduler") return;
    SchedulingResult result = Schedule(pod, nodes, pods);
    if (result.node.empty()) {
      if (record.unschedulable != result.message) {
        Emit(record, false, "Warning", "FailedScheduling", result.message);
      }
      record.unschedulable = result.message;
      WriteStatus(record, BuildStatus(record, pod));
      return;
    }
    json::value binding = json::object{{"spec", json::object{{"nodeName", result.node}}}};
    Result<json::object> bound = store_.MergePatch(Pods(), record.namespace_name, record.name, binding);
    if (!bound.ok()) return;
    record.node = result.node;
    record.unschedulable.clear();
    Emit(record, false, "Normal", "Scheduled",
         "Successfully assigned " + record.namespace_name + "/" + record.name + " to " +
             result.node);
    pod = std::move(*bound);  // later pods of this pass see the node taken
    return;
  }
  SyncBound(record, pod, pods, nodes);
}

void Kubelet::SyncBound(PodRecord& record, const json::object& pod,
                        const std::vector<json::object>& pods,
                        const std::vector<json::object>& nodes) {
  const json::object* node = nullptr;
  for (const json::object& candidate : nodes) {
    if (StringAt(ObjectAt(candidate, "metadata"), "name") == record.node) node = &candidate;
  }
  if (!node) return;  // no kubelet runs there: the pod stays Pending, as on a real cluster
  const WallTime now = clock_.Now();
  const SteadyTime steady = clock_.SteadyNow();
  if (!record.admitted) {
    record.admitted = true;
    record.start_time = now;
    record.host_ip = NodeAddress(*node);
    if (std::optional<Rejection> rejected = AdmitOnNode(pod, *node, pods)) {
      record.terminal = true;
      record.rejected = true;
      record.failed_reason = rejected->reason;
      record.failed_message = rejected->message;
      Emit(record, true, "Warning", rejected->reason, rejected->message);
    } else {
      record.ready_at = steady + options_.pod_start_delay;
      record.pod_ip = AllocatePodIp(*node);
    }
  }
  const json::object& spec = ObjectAt(pod, "spec");
  std::int64_t deadline = IntAt(spec, "activeDeadlineSeconds", 0);
  if (!record.terminal && deadline > 0 && now >= record.start_time + std::chrono::seconds(deadline)) {
    record.terminal = true;
    record.failed_reason = "DeadlineExceeded";
    record.failed_message = "Pod was active on the node longer than the specified deadline";
    Emit(record, true, "Warning", record.failed_reason, record.failed_message);
    StopContainers(record, std::chrono::seconds(IntAt(spec, "terminationGracePeriodSeconds", 30)));
  }
  ObserveExits(record, pod);
  if (!record.terminal && steady >= record.ready_at) StartContainers(record, pod);
  WriteStatus(record, BuildStatus(record, pod));
}

void Kubelet::ObserveExits(PodRecord& record, const json::object& pod) {
  using State = ContainerRecord::State;
  const std::string policy = StringAt(ObjectAt(pod, "spec"), "restartPolicy");
  for (ContainerRecord& container : record.containers) {
    if (container.state != State::kRunning || container.id.empty()) continue;
    std::optional<ContainerExit> exit = runtime_.Exited(container.id);
    if (!exit) continue;
    json::object terminated{{"exitCode", exit->exit_code},
                            {"reason", exit->reason},
                            {"startedAt", FormatRfc3339(container.started_at)},
                            {"finishedAt", FormatRfc3339(exit->finished_at)},
                            {"containerID", runtime_.ContainerId(container.id)}};
    bool restart = !record.terminal && !record.deleting &&
                   (policy == "Always" || (policy == "OnFailure" && exit->exit_code != 0));
    if (!restart) {
      container.state = State::kTerminated;
      container.terminated = std::move(terminated);
      continue;
    }
    container.last_terminated = std::move(terminated);
    ++container.restarts;
    container.backoff = container.backoff.count() == 0
                            ? options_.crash_loop_backoff
                            : std::min(container.backoff * 2, kMaxBackoff);
    container.next_start = clock_.SteadyNow() + container.backoff;
    container.state = State::kBackOff;
    container.waiting_reason = "CrashLoopBackOff";
    Emit(record, true, "Warning", "BackOff",
         "Back-off restarting failed container " + container.name + " in pod " + record.name +
             "_" + record.namespace_name + "(" + record.uid + ")",
         container.name);
    container.waiting_message = "back-off " + GoDuration(container.backoff) +
                                " restarting failed container=" + container.name + " pod=" +
                                record.name + "_" + record.namespace_name + "(" + record.uid + ")";
  }
}

void Kubelet::StartContainers(PodRecord& record, const json::object& pod) {
  using State = ContainerRecord::State;
  const SteadyTime steady = clock_.SteadyNow();
  const bool egress_denied = EgressDenied(pod);
  for (size_t i = 0; i < record.containers.size(); ++i) {
    ContainerRecord& container = record.containers[i];
    bool due = container.state == State::kCreating ||
               ((container.state == State::kBackOff || container.state == State::kWaiting) &&
                steady >= container.next_start);
    if (!due) continue;
    const json::object* spec = nullptr;
    for (const json::value& entry : ArrayAt(ObjectAt(pod, "spec"), "containers")) {
      if (entry.is_object() && StringAt(entry.get_object(), "name") == container.name) {
        spec = &entry.get_object();
      }
    }
    if (!spec) continue;
    ContainerStart start{pod, *spec, egress_denied};
    if (container.state == State::kCreating) container.waiting_reason = "ContainerCreating";
    container.state = State::kStarting;
    std::string uid = record.uid;
    Enqueue([this, uid, i, start = std::move(start)] {
      Result<std::string> started = runtime_.Start(start);
      std::unique_lock lock(mutex_);
      auto it = records_.find(uid);
      bool wanted = it != records_.end() && !it->second.terminal && !it->second.deleting &&
                    !it->second.removing;
      if (!wanted) {
        // The pod ended or went while its container started: stop it again.
        if (it != records_.end()) {
          ContainerRecord& container = it->second.containers[i];
          container.state = State::kTerminated;
          container.terminated = json::object{{"exitCode", 137},
                                              {"reason", "Error"},
                                              {"startedAt", FormatRfc3339(clock_.Now())},
                                              {"finishedAt", FormatRfc3339(clock_.Now())}};
          if (started.ok()) container.id = *started;
        }
        lock.unlock();
        if (started.ok()) runtime_.Stop(*started, std::chrono::seconds(0));
        return;
      }
      ContainerRecord& container = it->second.containers[i];
      if (started.ok()) {
        container.id = *started;
        container.state = State::kRunning;
        container.started_at = clock_.Now();
        container.waiting_reason.clear();
        container.waiting_message.clear();
        Emit(it->second, true, "Normal", "Pulled",
             "Container image \"" + container.image + "\" already present on machine",
             container.name);
        Emit(it->second, true, "Normal", "Created", "Created container: " + container.name,
             container.name);
        Emit(it->second, true, "Normal", "Started", "Started container " + container.name,
             container.name);
        return;
      }
      const Status& error = started.status();
      kLog.Info("container did not start", {{"pod", it->second.namespace_name + "/" + it->second.name},
                                            {"container", container.name},
                                            {"error", error.message()}});
      Emit(it->second, true, "Warning", "Failed", "Error: " + error.message(), container.name);
      container.backoff = container.backoff.count() == 0
                              ? options_.crash_loop_backoff
                              : std::min(container.backoff * 2, kMaxBackoff);
      container.next_start = clock_.SteadyNow() + container.backoff;
      if (error.code() == StatusCode::kFailedPrecondition) {
        container.state = State::kWaiting;
        container.waiting_reason = "CreateContainerConfigError";
        container.waiting_message = error.message();
      } else if (error.code() == StatusCode::kUnavailable) {
        container.state = State::kWaiting;
        container.waiting_reason = "ErrImagePull";
        container.waiting_message = error.message();
      } else {
        container.state = State::kTerminated;
        container.terminated = json::object{{"exitCode", 128},
                                            {"reason", "StartError"},
                                            {"message", error.message()},
                                            {"startedAt", FormatRfc3339(WallTime())},
                                            {"finishedAt", FormatRfc3339(clock_.Now())}};
      }
    });
  }
}

void Kubelet::StopContainers(PodRecord& record, std::chrono::seconds grace) {
  for (ContainerRecord& container : record.containers) {
    if (container.state != ContainerRecord::State::kRunning || container.id.empty()) continue;
    Emit(record, true, "Normal", "Killing", "Stopping container " + container.name,
         container.name);
    std::string id = container.id;
    Enqueue([this, id, grace] { runtime_.Stop(id, grace); });
  }
}

void Kubelet::Terminate(PodRecord& record, const json::object& pod) {
  using State = ContainerRecord::State;
  if (!record.deleting) {
    record.deleting = true;
    std::int64_t grace = IntAt(ObjectAt(pod, "metadata"), "deletionGracePeriodSeconds", 30);
    StopContainers(record, std::chrono::seconds(grace));
  }
  ObserveExits(record, pod);
  bool busy = std::any_of(record.containers.begin(), record.containers.end(),
                          [](const ContainerRecord& c) {
                            return c.state == State::kRunning || c.state == State::kStarting;
                          });
  if (busy) return;
  // Every container stopped: free the pod, then confirm the delete.
  record.removing = true;
  Enqueue([this, uid = record.uid, ns = record.namespace_name, name = record.name,
           bound = !record.node.empty()] {
    if (bound) runtime_.RemovePod(uid);
    store_.RemoveIfUid(Pods(), ns, name, uid);
    std::lock_guard lock(mutex_);
    records_.erase(uid);
  });
}

void Kubelet::Forget(PodRecord& record) {
  record.removing = true;
  std::vector<std::string> running;
  for (const ContainerRecord& container : record.containers) {
    if (!container.id.empty() && container.state == ContainerRecord::State::kRunning) {
      running.push_back(container.id);
    }
  }
  Enqueue([this, uid = record.uid, running, bound = !record.node.empty()] {
    for (const std::string& id : running) runtime_.Stop(id, std::chrono::seconds(0));
    if (bound) runtime_.RemovePod(uid);
    std::lock_guard lock(mutex_);
    records_.erase(uid);
  });
}

std::string Kubelet::PodPhase(const PodRecord& record, const json::object& pod) const {
  using State = ContainerRecord::State;
  if (!record.failed_reason.empty()) return "Failed";
  if (!record.admitted) return "Pending";
  int running = 0, waiting = 0, stopped = 0, succeeded = 0;
  for (const ContainerRecord& container : record.containers) {
    switch (container.state) {
      case State::kRunning: ++running; break;
      case State::kTerminated:
        ++stopped;
        if (IntAt(container.terminated, "exitCode", -1) == 0) ++succeeded;
        break;
      case State::kBackOff: ++stopped; break;
      default:
        if (!container.last_terminated.empty()) {
          ++stopped;
        } else {
          ++waiting;
        }
    }
  }
  if (waiting > 0) return "Pending";
  if (running > 0) return "Running";
  if (stopped == 0) return "Pending";
  std::string policy = StringAt(ObjectAt(pod, "spec"), "restartPolicy");
  if (policy == "Always") return "Running";
  if (stopped == succeeded) return "Succeeded";
  if (policy == "Never") return "Failed";
  return "Running";
}

json::object Kubelet::BuildStatus(PodRecord& record, const json::object& pod) {
  using State = ContainerRecord::State;
  const std::string now = FormatRfc3339(clock_.Now());
  json::array conditions;
  auto condition = [&](const std::string& type, bool value, const std::string& reason = "",
                       const std::string& message = "") {
    std::string status = value ? "True" : "False";
    auto& [last_status, since] = record.conditions[type];
    if (last_status != status) {
      last_status = status;
      since = now;
    }
    json::object entry{{"type", type}, {"status", status}, {"lastProbeTime", nullptr},
                       {"lastTransitionTime", since}};
    if (!reason.empty()) entry["reason"] = reason;
    if (!message.empty()) entry["message"] = message;
    conditions.push_back(std::move(entry));
  };
  json::object status{{"qosClass", StringAt(ObjectAt(pod, "status"), "qosClass")}};
  if (record.node.empty()) {
    status["phase"] = "Pending";
    condition("PodScheduled", false, "Unschedulable", record.unschedulable);
    status["conditions"] = std::move(conditions);
    return status;
  }
  const std::string phase = PodPhase(record, pod);
  if (record.rejected) {
    // A rejected pod is only its verdict.
    status["phase"] = phase;
    status["reason"] = record.failed_reason;
    status["message"] = record.failed_message;
    status["startTime"] = FormatRfc3339(record.start_time);
    return status;
  }
  const bool completed = phase == "Succeeded" || phase == "Failed";
  const bool sandbox = record.admitted && clock_.SteadyNow() >= record.ready_at && !completed;
  std::vector<std::string> unready;
  for (const ContainerRecord& container : record.containers) {
    if (container.state != State::kRunning) unready.push_back(container.name);
  }
  std::string unready_text = "containers with unready status: [";
  for (size_t i = 0; i < unready.size(); ++i) unready_text += (i ? " " : "") + unready[i];
  unready_text += "]";
  std::string done_reason = phase == "Succeeded" ? "PodCompleted" : "PodFailed";
  condition("PodReadyToStartContainers", sandbox);
  condition("Initialized", true, phase == "Succeeded" ? "PodCompleted" : "");
  if (completed) {
    condition("Ready", false, done_reason);
    condition("ContainersReady", false, done_reason);
  } else {
    condition("Ready", unready.empty(), unready.empty() ? "" : "ContainersNotReady",
              unready.empty() ? "" : unready_text);
    condition("ContainersReady", unready.empty(), unready.empty() ? "" : "ContainersNotReady",
              unready.empty() ? "" : unready_text);
  }
  condition("PodScheduled", true);
  status["phase"] = phase;
  status["conditions"] = std::move(conditions);
  if (!record.failed_reason.empty()) {
    status["reason"] = record.failed_reason;
    status["message"] = record.failed_message;
  }
  if (!record.host_ip.empty()) {
    status["hostIP"] = record.host_ip;
    status["hostIPs"] = json::array{json::object{{"ip", record.host_ip}}};
  }
  if (!record.pod_ip.empty()) {
    status["podIP"] = record.pod_ip;
    status["podIPs"] = json::array{json::object{{"ip", record.pod_ip}}};
  }
  if (record.admitted) status["startTime"] = FormatRfc3339(record.start_time);
  json::array statuses;
  for (const ContainerRecord& container : record.containers) {
    json::object state;
    bool running = container.state == State::kRunning;
    if (running) {
      state["running"] = json::object{{"startedAt", FormatRfc3339(container.started_at)}};
    } else if (container.state == State::kTerminated) {
      state["terminated"] = container.terminated;
    } else {
      json::object waiting{{"reason", container.waiting_reason.empty() ? "ContainerCreating"
                                                                        : container.waiting_reason}};
      if (!container.waiting_message.empty()) waiting["message"] = container.waiting_message;
      state["waiting"] = std::move(waiting);
    }
    json::object entry{{"name", container.name},
                       {"image", container.image},
                       {"imageID", container.id.empty() ? "" : runtime_.ImageId(container.image)},
                       {"ready", running},
                       {"restartCount", container.restarts},
                       {"started", running},
                       {"state", std::move(state)},
                       {"lastState", container.last_terminated.empty()
                                         ? json::object()
                                         : json::object{{"terminated", container.last_terminated}}}};
    if (!container.id.empty()) entry["containerID"] = runtime_.ContainerId(container.id);
    statuses.push_back(std::move(entry));
  }
  status["containerStatuses"] = std::move(statuses);
  return status;
}

void Kubelet::WriteStatus(PodRecord& record, json::object status) {
  std::string text = ToJson(status);
  if (text == record.written) return;
  Result<json::object> written = store_.ReplaceStatus(Pods(), record.namespace_name, record.name,
                                                      std::move(status), record.uid);
  if (written.ok()) record.written = std::move(text);
}

void Kubelet::Emit(const PodRecord& record, bool kubelet, const std::string& type,
                   const std::string& reason, const std::string& message,
                   const std::string& container) {
  const std::string now = FormatRfc3339(clock_.Now());
  json::object involved{{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", record.name},
                        {"namespace", record.namespace_name}, {"uid", record.uid}};
  if (!container.empty()) involved["fieldPath"] = "spec.containers{" + container + "}";
  json::object event{{"apiVersion", "v1"},
                     {"kind", "Event"},
                     {"metadata", json::object{{"name", GeneratedName(record.name + ".")}}},
                     {"involvedObject", std::move(involved)},
                     {"reason", reason},
                     {"message", message},
                     {"type", type}};
  if (kubelet) {
    // The kubelet's events: a source and counted timestamps.
    event["source"] = json::object{{"component", "kubelet"}, {"host", record.node}};
    event["firstTimestamp"] = now;
    event["lastTimestamp"] = now;
    event["count"] = 1;
    event["reportingComponent"] = "kubelet";
    event["reportingInstance"] = record.node;
  } else {
    // The scheduler's: events.k8s.io style, an eventTime and an action.
    event["eventTime"] = FormatRfc3339Micro(clock_.Now());
    event["firstTimestamp"] = nullptr;
    event["lastTimestamp"] = nullptr;
    event["source"] = json::object();
    event["reportingComponent"] = "default-scheduler";
    event["reportingInstance"] = "default-scheduler";
    event["action"] = reason == "Scheduled" ? "Binding" : "Scheduling";
  }
  (void)store_.Create(*FindResource("", "v1", "events"), record.namespace_name, std::move(event));
}

bool Kubelet::EgressDenied(const json::object& pod) const {
  const json::object& metadata = ObjectAt(pod, "metadata");
  ListOptions options;
  options.namespace_name = StringAt(metadata, "namespace");
  Result<ListPage> page = store_.List(*FindResource("networking.k8s.io", "v1", "networkpolicies"),
                                      options);
  if (!page.ok()) return false;
  bool denied = false;
  for (const json::object& policy : page->items) {
    const json::object& spec = ObjectAt(policy, "spec");
    if (!SelectorMatches(ObjectAt(spec, "podSelector"), ObjectAt(metadata, "labels"))) continue;
    const json::array& types = ArrayAt(spec, "policyTypes");
    bool egress = std::any_of(types.begin(), types.end(),
                              [](const json::value& t) { return t == json::value("Egress"); });
    if (!egress) continue;
    // Any allowed egress is more than no network can honour: the pod keeps its network.
    if (!ArrayAt(spec, "egress").empty()) return false;
    denied = true;
  }
  return denied;
}

std::string Kubelet::AllocatePodIp(const json::object& node) {
  // The node's pod CIDR is a /24 such as 10.244.3.0/24.
  std::string cidr = StringAt(ObjectAt(node, "spec"), "podCIDR");
  std::string base = cidr.substr(0, cidr.rfind('.'));
  if (base.empty()) base = "10.244.0";
  int& next = next_ip_[StringAt(ObjectAt(node, "metadata"), "name")];
  next = next % 250 + 1;
  return base + "." + std::to_string(next + 1);
}

std::optional<Result<json::object>> Kubelet::DeletePod(const std::string& namespace_name,
                                                       const std::string& name,
                                                       std::optional<std::int64_t> grace) {
  Result<json::object> pod = store_.Get(Pods(), namespace_name, name);
  if (!pod.ok()) return std::nullopt;
  std::string uid = StringAt(ObjectAt(*pod, "metadata"), "uid");
  {
    std::lock_guard lock(mutex_);
    auto it = records_.find(uid);
    if (it == records_.end() || it->second.node.empty()) return std::nullopt;
  }
  std::int64_t seconds = grace.value_or(IntAt(ObjectAt(*pod, "spec"), "terminationGracePeriodSeconds", 30));
  if (seconds <= 0) return store_.Delete(Pods(), namespace_name, name);
  return store_.MarkDeleting(Pods(), namespace_name, name, seconds);
}

Result<std::string> Kubelet::ExecContainer(const std::string& namespace_name,
                                           const std::string& pod_name,
                                           const std::string& container) {
  UPLINK_ASSIGN_OR_RETURN(json::object pod, store_.Get(Pods(), namespace_name, pod_name));
  std::string phase = StringAt(ObjectAt(pod, "status"), "phase");
  if (phase == "Succeeded" || phase == "Failed") {
    return FailedPreconditionError("cannot exec into a container in a completed pod; current "
                                   "phase is " + phase);
  }
  std::vector<std::string> names;
  for (const json::value& entry : ArrayAt(ObjectAt(pod, "spec"), "containers")) {
    if (entry.is_object()) names.push_back(StringAt(entry.get_object(), "name"));
  }
  std::string wanted = container;
  if (wanted.empty()) {
    if (names.size() != 1) {
      std::string choices;
      for (const std::string& name : names) choices += (choices.empty() ? "" : " ") + name;
      return InvalidArgumentError("a container name must be specified for pod " + pod_name +
                                  ", choose one of: [" + choices + "]");
    }
    wanted = names.front();
  }
  if (std::find(names.begin(), names.end(), wanted) == names.end()) {
    return InvalidArgumentError("container " + wanted + " is not valid for pod " + pod_name);
  }
  std::lock_guard lock(mutex_);
  auto it = records_.find(StringAt(ObjectAt(pod, "metadata"), "uid"));
  if (it != records_.end()) {
    for (const ContainerRecord& record : it->second.containers) {
      if (record.name == wanted && record.state == ContainerRecord::State::kRunning) {
        return record.id;
      }
    }
  }
  return FailedPreconditionError("unable to upgrade connection: container not found (\"" +
                                 wanted + "\")");
}

}  // namespace uplink::kubesim
