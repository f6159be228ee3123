// The workspace controller (`uplink-agent workspace`, docs/architecture.md, "The workspace
// role"): keeps one bare Pod per reservation in the workload namespace as the console wants
// it, runs the console's commands in them, and deletes what is stopped, expired, finished or
// orphaned. Threads:
//
//   sync loop     POST /api/v1/agent/workspace/sync (a long poll while nothing moves), then a
//                 reconcile; on a console outage it keeps the last desired set, reconciles with
//                 it, keeps unsent events and sends them when the console is back.
//   expiry loop   on its own schedule, needing nothing from the console: deletes workspaces
//                 past their expiry annotation or finished, and pods that name no reservation.
//   commands      one thread per command under way (at most max_commands), each an exec
//                 session whose output streams to the console.
//
// Kubernetes calls of one reconcile run concurrently, each on a client of its own (KubePool).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/stop_signal.h"
#include "agent/workspace/command_runner.h"
#include "agent/workspace/config.h"
#include "agent/workspace/plan.h"
#include "common/metrics.h"
#include "common/time.h"
#include "kube/client.h"

namespace uplink::agent::workspace {

// The ConfigMap whose presence in the workload namespace means "draining": nothing is created
// and every workspace is deleted (`uplink-agent workspace drain`).
inline constexpr std::string_view kDrainMarker = "uplink-workspace-drain";

// Kubernetes clients, each with its own connection, lent one call at a time: concurrent
// calls, and never more connections than the pool holds.
class KubePool {
 public:
  static Result<std::unique_ptr<KubePool>> Create(const kube::KubeCredentials& credentials,
                                                  const kube::KubeClientOptions& options,
                                                  size_t size);

  class Lease {
   public:
    Lease(KubePool& pool, kube::KubeClient* client) : pool_(pool), client_(client) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_.Return(client_); }
    kube::KubeClient& operator*() const { return *client_; }
    kube::KubeClient* operator->() const { return client_; }

   private:
    KubePool& pool_;
    kube::KubeClient* client_;
  };
  // Waits for a free client.
  Lease Acquire();
  // The client exec sessions use, shared: Exec opens a connection of its own and leaves the
  // client's one alone, so sessions need not hold a lease for their whole length.
  kube::KubeClient& ForExec() { return *clients_.front(); }
  size_t size() const { return clients_.size(); }

 private:
  KubePool() = default;
  void Return(kube::KubeClient* client);

  std::vector<std::unique_ptr<kube::KubeClient>> clients_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<kube::KubeClient*> free_;
};

// Events waiting for the console: each key once; kept until acknowledged, resent after a
// failure, bounded (the oldest go first past the bound; the next reconcile derives the
// level-triggered ones again).
class EventOutbox {
 public:
  static constexpr size_t kMaxPending = 4096;
  static constexpr size_t kRememberDelivered = 16384;

  // False when the key is pending or was acknowledged already.
  bool Add(WorkspaceEvent event);
  std::vector<WorkspaceEvent> Peek(size_t max) const;
  void Acknowledge(const std::vector<std::string>& keys);
  size_t pending() const;
  // How many events were ever added: a change means something new to tell the console.
  size_t added() const;

 private:
  mutable std::mutex mutex_;
  std::deque<WorkspaceEvent> pending_;
  std::set<std::string> pending_keys_;
  std::set<std::string> delivered_;
  std::deque<std::string> delivered_order_;
  size_t added_ = 0;
};

struct ControllerOptions {
  std::string config_path;
  std::string instance;
  std::string release;  // the Helm release, shown by the console
  // How long the console may hold a sync while nothing moves (0-55 s).
  std::chrono::seconds sync_wait{20};
  // Between syncs while something moves (a pod starting, events to send, a command running).
  std::chrono::milliseconds busy_interval{500};
  // While a pod starts or is being deleted, how often the pods are listed between syncs: a
  // change is sent to the console at once, not a busy interval later.
  std::chrono::milliseconds pod_poll_interval{100};
  std::chrono::milliseconds expiry_interval{5'000};
  size_t max_commands = 16;
  // /readyz: a full reconcile (console sync and every Kubernetes call) succeeded this recently.
  std::chrono::seconds ready_within{90};
  // Told the pods after every listing that a reconcile made (the SSH tunnel learns which
  // workspaces run where); called with no lock held.
  std::function<void(const std::vector<ObservedPod>& pods)> pods_observed;
};

void DeclareWorkspaceMetrics(metrics::Registry& registry);

// The request timeout of the sync client for a long poll of `wait`.
std::chrono::seconds SyncRequestTimeout(std::chrono::seconds wait);

class WorkspaceController {
 public:
  // `sync` carries the sync long poll; `output` the commands' output (a connection each, so
  // that output does not wait behind a held poll).
  WorkspaceController(ControllerOptions options, ExecutionConfig config, KubePool& kube,
                      ConsoleClient& sync, ConsoleClient& output, Clock& clock,
                      metrics::Registry& registry);
  ~WorkspaceController();

  // Until `stop`: the sync loop here, the expiry loop and command threads beside it.
  void Run(StopSignal& stop);

  // One pass of the expiry loop (also what Run's expiry thread does). Ok when every deletion
  // it tried succeeded.
  Status ExpireOnce();

  Readiness CheckReadiness() const;

 private:
  struct CommandTask;

  std::shared_ptr<const ExecutionConfig> config() const;
  // Re-reads the configuration file; a changed one that parses and whose guards hold
  // replaces the current one.
  void ReloadConfig();
  bool SyncOnce(bool busy);
  // Lists the pods, plans and applies. `fresh`: the desired set came from a sync just now.
  Status Reconcile(bool fresh);
  Result<std::vector<ObservedPod>> ListPods();
  void RefreshDraining();
  // Runs `work` on up to kube_.size() threads at once; ok when every call was.
  Status ApplyConcurrently(std::vector<std::function<Status()>> work);
  Status CreatePod(const ExecutionConfig& config, const DesiredReservation& reservation);
  Status DeletePod(const ExecutionConfig& config, const PodDeletion& deletion);
  void DispatchCommands(const std::vector<WorkspaceCommand>& commands);
  // Runs (or re-attaches to) the command and delivers its end; true once the console has it.
  bool RunCommand(std::shared_ptr<CommandTask> task);
  // Posts what `task` has not sent yet (and, when `outcome`, its end); false when the console
  // could not take it now.
  bool PostOutput(CommandTask& task, const CommandOutcome* outcome);
  void ReapCommandThreads(bool all);
  bool Busy() const;
  // A pod starting or being deleted (including one whose deletion was accepted but that the
  // last list still showed).
  bool PodsInMotion() const;
  bool PodsInMotionLocked() const;
  // Up to the busy interval: lists the pods every pod_poll_interval while some are in motion,
  // and ends early when that makes an event for the console.
  void WaitWhileBusy(StopSignal& stop);

  const ControllerOptions options_;
  KubePool& kube_;
  ConsoleClient& sync_client_;
  ConsoleClient& output_client_;
  Clock& clock_;
  metrics::Registry& registry_;
  log::Logger log_{"agent.workspace"};

  mutable std::mutex config_mutex_;
  std::shared_ptr<const ExecutionConfig> config_;
  std::string config_text_;
  std::string config_problem_;  // why a changed configuration was not taken

  EventOutbox outbox_;
  std::mutex reconcile_mutex_;  // one reconcile at a time

  mutable std::mutex state_mutex_;
  std::vector<DesiredReservation> desired_;
  bool accepting_ = true;
  std::atomic<bool> draining_{false};
  std::set<std::string> unlisted_before_;
  std::set<std::string> ended_;
  std::vector<ObservedPod> observed_;
  // Pods whose deletion Kubernetes accepted and that a list has not yet shown gone: they keep
  // the pod polling on, so that `completed` goes out as soon as a stopped pod is gone.
  std::set<std::string> awaiting_gone_;
  size_t waiting_for_capacity_ = 0;
  std::optional<SteadyTime> last_full_reconcile_;
  std::string last_problem_;

  std::mutex commands_mutex_;
  std::set<std::string> commands_in_flight_;
  // Commands whose final output the console took: a reply written before it did hands them
  // out once more, and they need not even be re-attached.
  std::set<std::string> commands_done_;
  std::deque<std::string> commands_done_order_;
  std::vector<std::pair<std::shared_ptr<std::atomic<bool>>, std::thread>> command_threads_;
  ExecSessions sessions_;
  StopSignal* stop_ = nullptr;
};

}  // namespace uplink::agent::workspace
