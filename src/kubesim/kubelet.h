// The simulated cluster's scheduler and kubelets in one loop: pods created through the API are
// bound to a node that fits, started by the pod runtime after --pod-start-delay, and their
// status written as a kubelet writes it (phase, conditions, containerStatuses, restarts with
// back-off), until they succeed, fail, pass activeDeadlineSeconds (DeadlineExceeded) or are
// deleted (graceful: stopped, then removed). Pods loaded from files keep the status they were
// given and are never touched. The same loop keeps ResourceQuota statuses up to date, as the
// controller manager's quota controller does.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "common/time.h"
#include "kubesim/runtime.h"
#include "kubesim/store.h"

namespace uplink::kubesim {

struct KubeletOptions {
  // From binding to the containers starting: the image pull and sandbox of a real node.
  std::chrono::milliseconds pod_start_delay{1000};
  // How often the loop looks again when nothing in the store changed (exits, deadlines).
  std::chrono::milliseconds resync{100};
  // A crashed container's first restart delay, doubling up to five minutes.
  std::chrono::seconds crash_loop_backoff{10};
  // Runtime operations (start, stop, remove) in flight at once.
  int workers = 4;
};

class Kubelet {
 public:
  // `store`, `clock` and `runtime` must outlive this.
  Kubelet(ObjectStore& store, Clock& clock, PodRuntime& runtime, KubeletOptions options = {});
  ~Kubelet();
  Kubelet(const Kubelet&) = delete;
  Kubelet& operator=(const Kubelet&) = delete;

  // Runs the loop on a thread of its own.
  void Start();
  // Stops the loop, then every container it started, and frees their pods. Idempotent.
  void Stop();
  // One pass of the loop (what the thread does every resync), for tests.
  void SyncOnce();

  // A DELETE of a pod this kubelet runs: graceful (metadata.deletionTimestamp set, the pod
  // removed once its containers stopped within `grace`, by default its
  // terminationGracePeriodSeconds), or at once for a grace of 0. Nothing for a pod it does not
  // run (not bound, or loaded from a file): the caller deletes it plainly.
  std::optional<Result<json::object>> DeletePod(const std::string& namespace_name,
                                                const std::string& name,
                                                std::optional<std::int64_t> grace);

  // The runtime id of the running container an exec goes to (`container` may be empty for a
  // pod of one container). Errors as the API server words them: FailedPrecondition for a
  // completed pod or a container that is not running, InvalidArgument for a container the pod
  // does not have (or none named in a pod of several), NotFound for no such pod.
  Result<std::string> ExecContainer(const std::string& namespace_name, const std::string& pod,
                                    const std::string& container);

  PodRuntime& runtime() { return runtime_; }

 private:
  struct ContainerRecord;
  struct PodRecord;

  void Loop();
  void Sync(PodRecord& record, json::object& pod, std::vector<json::object>& pods,
            const std::vector<json::object>& nodes);
  void SyncBound(PodRecord& record, const json::object& pod, const std::vector<json::object>& pods,
                 const std::vector<json::object>& nodes);
  void Terminate(PodRecord& record, const json::object& pod);
  void ObserveExits(PodRecord& record, const json::object& pod);
  void StartContainers(PodRecord& record, const json::object& pod);
  void StopContainers(PodRecord& record, std::chrono::seconds grace);
  void Forget(PodRecord& record);
  json::object BuildStatus(PodRecord& record, const json::object& pod);
  std::string PodPhase(const PodRecord& record, const json::object& pod) const;
  void WriteStatus(PodRecord& record, json::object status);
  bool EgressDenied(const json::object& pod) const;
  // Records an Event about the pod, as the scheduler (`kubelet` false) or the node's kubelet
  // does; `container` names the container it is about, if any.
  void Emit(const PodRecord& record, bool kubelet, const std::string& type,
            const std::string& reason, const std::string& message,
            const std::string& container = "");
  std::string AllocatePodIp(const json::object& node);
  void Enqueue(std::function<void()> task);
  void Work();

  ObjectStore& store_;
  Clock& clock_;
  PodRuntime& runtime_;
  const KubeletOptions options_;

  std::mutex mutex_;  // guards records_ and what the workers report back
  std::map<std::string, PodRecord> records_;  // by pod uid
  std::map<std::string, int> next_ip_;        // by node name

  std::atomic<bool> stopping_{false};
  std::thread loop_;
  std::mutex queue_mutex_;
  std::condition_variable queue_ready_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> workers_;
  bool stopped_ = false;
};

}  // namespace uplink::kubesim
