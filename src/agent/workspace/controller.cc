#include "agent/workspace/controller.h"

#include <algorithm>

#include "agent/workspace/guards.h"
#include "agent/workspace/pod_spec.h"
#include "common/backoff.h"
#include "common/files.h"
#include "common/thread_name.h"
#include "net/http.h"
#include "protocol/workspace.h"

namespace uplink::agent::workspace {
namespace {

// How often a command's output goes to the console while it runs.
constexpr std::chrono::milliseconds kOutputInterval{250};
// Attempts at an exec session before the command is reported failed; a later attempt
// re-attaches to the same run (the marker), so retrying never runs it twice.
constexpr int kExecAttempts = 3;
constexpr size_t kRememberDoneCommands = 4096;
// The console may hold a sync for sync_wait; the request may take that long and more.
constexpr std::chrono::seconds kSyncSlack{15};

std::string PodsPath(const ExecutionConfig& config) {
  return "/api/v1/namespaces/" + net::PercentEncode(config.namespace_name) + "/pods";
}

}  // namespace

std::chrono::seconds SyncRequestTimeout(std::chrono::seconds wait) { return wait + kSyncSlack; }

// ---- KubePool ---------------------------------------------------------------------------------

Result<std::unique_ptr<KubePool>> KubePool::Create(const kube::KubeCredentials& credentials,
                                                   const kube::KubeClientOptions& options,
                                                   size_t size) {
  std::unique_ptr<KubePool> pool(new KubePool());
  for (size_t i = 0; i < std::max<size_t>(size, 1); ++i) {
    UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<kube::KubeClient> client,
                            kube::KubeClient::Create(credentials, options));
    pool->free_.push_back(client.get());
    pool->clients_.push_back(std::move(client));
  }
  return pool;
}

KubePool::Lease KubePool::Acquire() {
  std::unique_lock lock(mutex_);
  returned_.wait(lock, [&] { return !free_.empty(); });
  kube::KubeClient* client = free_.back();
  free_.pop_back();
  return Lease(*this, client);
}

void KubePool::Return(kube::KubeClient* client) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(client);
  }
  returned_.notify_one();
}

// ---- EventOutbox ------------------------------------------------------------------------------

bool EventOutbox::Add(WorkspaceEvent event) {
  std::lock_guard lock(mutex_);
  if (pending_keys_.contains(event.key) || delivered_.contains(event.key)) return false;
  if (pending_.size() >= kMaxPending) {
    pending_keys_.erase(pending_.front().key);
    pending_.pop_front();
  }
  pending_keys_.insert(event.key);
  pending_.push_back(std::move(event));
  ++added_;
  return true;
}

std::vector<WorkspaceEvent> EventOutbox::Peek(size_t max) const {
  std::lock_guard lock(mutex_);
  return std::vector<WorkspaceEvent>(pending_.begin(),
                                     pending_.begin() + std::min(max, pending_.size()));
}

void EventOutbox::Acknowledge(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  for (const std::string& key : keys) {
    if (!pending_keys_.erase(key)) continue;
    std::erase_if(pending_, [&](const WorkspaceEvent& event) { return event.key == key; });
    if (delivered_.insert(key).second) delivered_order_.push_back(key);
    if (delivered_order_.size() > kRememberDelivered) {
      delivered_.erase(delivered_order_.front());
      delivered_order_.pop_front();
    }
  }
}

size_t EventOutbox::pending() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

size_t EventOutbox::added() const {
  std::lock_guard lock(mutex_);
  return added_;
}

// ---- metrics ----------------------------------------------------------------------------------

void DeclareWorkspaceMetrics(metrics::Registry& registry) {
  registry.DeclareCounter("uplink_workspace_syncs_total", "Syncs with the console, by result.");
  registry.DeclareCounter("uplink_workspace_reconciles_total", "Reconciles, by result.");
  registry.DeclareCounter("uplink_workspace_pod_creations_total",
                          "Workspace pods created, by result (ok, refused, error).");
  registry.DeclareCounter("uplink_workspace_pod_deletions_total",
                          "Workspace pod deletions, by reason and result.");
  registry.DeclareCounter("uplink_workspace_commands_total", "Commands finished, by state.");
  registry.DeclareGauge("uplink_workspace_pods", "Workspace pods in the namespace, by phase.");
  registry.DeclareGauge("uplink_workspace_events_pending", "Events not yet acknowledged.");
  registry.DeclareGauge("uplink_workspace_commands_running", "Commands under way.");
  registry.DeclareGauge("uplink_workspace_draining", "1 while the namespace is drained.");
  registry.DeclareGauge("uplink_workspace_last_full_reconcile_timestamp_seconds",
                        "When a full reconcile (console and Kubernetes) last succeeded.");
}

// ---- the controller ---------------------------------------------------------------------------

struct WorkspaceController::CommandTask {
  WorkspaceCommand command;
  std::string pod;
  std::string output;       // at most output_cap_bytes
  bool truncated = false;
  std::int64_t have = 0;    // bytes the console holds
  bool announced = false;   // "running" was posted
  bool forgotten = false;   // the console answered 404: nothing more to send
  SteadyTime last_post{};
};

WorkspaceController::WorkspaceController(ControllerOptions options, ExecutionConfig config,
                                         KubePool& kube, ConsoleClient& sync,
                                         ConsoleClient& output, Clock& clock,
                                         metrics::Registry& registry)
    : options_(std::move(options)),
      kube_(kube),
      sync_client_(sync),
      output_client_(output),
      clock_(clock),
      registry_(registry),
      config_(std::make_shared<const ExecutionConfig>(std::move(config))) {
  auto text = ReadFileBounded(options_.config_path, kMaxConfigBytes);
  if (text.ok()) config_text_ = std::move(text).value();
}

WorkspaceController::~WorkspaceController() { ReapCommandThreads(true); }

std::shared_ptr<const ExecutionConfig> WorkspaceController::config() const {
  std::lock_guard lock(config_mutex_);
  return config_;
}

void WorkspaceController::ReloadConfig() {
  auto text = ReadFileBounded(options_.config_path, kMaxConfigBytes);
  if (!text.ok()) return;  // mid-rotation; the current one stays
  {
    std::lock_guard lock(config_mutex_);
    if (*text == config_text_) return;
    config_text_ = *text;
  }
  auto parsed = ParseExecutionConfig(*text);
  Status checked = parsed.ok() ? [&] {
    auto lease = kube_.Acquire();
    return VerifyCluster(*lease, *parsed);
  }() : parsed.status();
  std::lock_guard lock(config_mutex_);
  if (!checked.ok()) {
    config_problem_ = checked.message();
    log_.Error("the changed execution configuration was not taken; the previous one stays",
               {{"error", checked}});
    return;
  }
  config_problem_.clear();
  config_ = std::make_shared<const ExecutionConfig>(std::move(parsed).value());
  log_.Info("execution configuration changed",
            {{"capacity_gpus", config_->capacity_gpus},
             {"nodes", static_cast<std::int64_t>(config_->nodes.size())},
             {"image", config_->workspace_image}});
}

Result<std::vector<ObservedPod>> WorkspaceController::ListPods() {
  auto lease = kube_.Acquire();
  UPLINK_ASSIGN_OR_RETURN(std::vector<json::value> items,
                          lease->ListObjects(PodsPath(*config()), kWorkspaceSelector));
  std::vector<ObservedPod> pods;
  pods.reserve(items.size());
  for (const json::value& item : items) {
    if (item.is_object()) pods.push_back(ObservePod(item.get_object()));
  }
  return pods;
}

void WorkspaceController::RefreshDraining() {
  auto lease = kube_.Acquire();
  auto marker = lease->GetObject("/api/v1/namespaces/" +
                                 net::PercentEncode(config()->namespace_name) + "/configmaps/" +
                                 std::string(kDrainMarker));
  bool draining = draining_;
  if (marker.ok()) {
    draining = true;
  } else if (marker.status().code() == StatusCode::kNotFound) {
    draining = false;
  }  // any other error: keep what was known
  if (draining != draining_.exchange(draining)) {
    log_.Warn(draining ? "the namespace is draining: no workspace is created, every one is deleted"
                       : "draining ended: workspaces are created again");
  }
  registry_.Set("uplink_workspace_draining", draining ? 1 : 0);
}

Status WorkspaceController::ApplyConcurrently(std::vector<std::function<Status()>> work) {
  if (work.empty()) return Status::Ok();
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  Status first_failure;
  size_t failures = 0;
  auto worker = [&] {
    for (size_t i = next++; i < work.size(); i = next++) {
      // Each call on its own: one failing deletion never keeps the others from happening.
      Status done = work[i]();
      if (!done.ok()) {
        std::lock_guard lock(failure_mutex);
        if (failures++ == 0) first_failure = done;
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t width = std::min(work.size(), kube_.size());
  for (size_t i = 1; i < width; ++i) threads.emplace_back(worker);
  worker();
  for (std::thread& thread : threads) thread.join();
  if (failures == 0) return Status::Ok();
  return first_failure.WithContext(std::to_string(failures) + " of " +
                                   std::to_string(work.size()) + " Kubernetes calls failed");
}

Status WorkspaceController::CreatePod(const ExecutionConfig& config,
                                      const DesiredReservation& reservation) {
  const WallTime now = clock_.Now();
  auto pod = BuildWorkspacePod(config, reservation, now);
  auto refuse = [&](const std::string& reason) {
    outbox_.Add(MakeEvent(reservation.id, protocol::kReservationFailed, reason, now,
                          PodNameFor(reservation.id), reservation.node));
    std::lock_guard lock(state_mutex_);
    ended_.insert(reservation.id);
  };
  if (!pod.ok()) {
    registry_.Increment("uplink_workspace_pod_creations_total", {{"result", "refused"}});
    log_.Warn("not creating a workspace", {{"reservation", reservation.id}, {"error", pod.status()}});
    refuse(pod.status().message());
    return Status::Ok();
  }
  auto lease = kube_.Acquire();
  auto created = lease->CreateObject(PodsPath(config), *pod);
  if (created.ok() || created.status().code() == StatusCode::kAlreadyExists) {
    registry_.Increment("uplink_workspace_pod_creations_total", {{"result", "ok"}});
    log_.Info("workspace pod created", {{"reservation", reservation.id},
                                        {"pod", PodNameFor(reservation.id)},
                                        {"node", reservation.node},
                                        {"gpus", reservation.gpus}});
    outbox_.Add(MakeEvent(reservation.id, protocol::kReservationProvisioning, "pod created", now,
                          PodNameFor(reservation.id), reservation.node));
    return Status::Ok();
  }
  const StatusCode code = created.status().code();
  if (code == StatusCode::kPermissionDenied || code == StatusCode::kInvalidArgument) {
    // Admission refused it (quota, limits, Pod Security, the admission policy): as it is, it
    // never will be admitted; the user is told why.
    registry_.Increment("uplink_workspace_pod_creations_total", {{"result", "refused"}});
    log_.Warn("Kubernetes refused a workspace pod",
              {{"reservation", reservation.id}, {"error", created.status()}});
    refuse("Kubernetes refused the workspace pod: " + created.status().message());
    return Status::Ok();
  }
  registry_.Increment("uplink_workspace_pod_creations_total", {{"result", "error"}});
  return created.status().WithContext("creating the workspace of " + reservation.id);
}

Status WorkspaceController::DeletePod(const ExecutionConfig& config, const PodDeletion& deletion) {
  auto lease = kube_.Acquire();
  Status deleted = lease->DeleteObject(PodsPath(config) + "/" + net::PercentEncode(deletion.pod),
                                       kTerminationGraceSeconds);
  const std::string reason(DeleteReasonName(deletion.reason));
  if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) {
    registry_.Increment("uplink_workspace_pod_deletions_total",
                        {{"reason", reason}, {"result", "error"}});
    log_.Warn("could not delete a workspace pod; the next pass tries again",
              {{"pod", deletion.pod}, {"reason", reason}, {"error", deleted}});
    return deleted.WithContext("deleting " + deletion.pod);
  }
  registry_.Increment("uplink_workspace_pod_deletions_total", {{"reason", reason}, {"result", "ok"}});
  log_.Info("workspace pod deleted", {{"pod", deletion.pod},
                                      {"reservation", deletion.reservation_id},
                                      {"reason", reason},
                                      {"detail", deletion.detail}});
  if (std::optional<WorkspaceEvent> event = EventAfterDeletion(deletion, clock_.Now())) {
    outbox_.Add(std::move(*event));
  }
  std::lock_guard lock(state_mutex_);
  awaiting_gone_.insert(deletion.pod);
  if (!deletion.reservation_id.empty()) ended_.insert(deletion.reservation_id);
  return Status::Ok();
}

Status WorkspaceController::Reconcile(bool fresh) {
  std::lock_guard reconciling(reconcile_mutex_);
  const std::shared_ptr<const ExecutionConfig> config = this->config();
  RefreshDraining();
  auto pods = ListPods();
  if (!pods.ok()) {
    registry_.Increment("uplink_workspace_reconciles_total", {{"result", "error"}});
    return pods.status().WithContext("listing the workspace pods");
  }
  PlanInput input;
  {
    std::lock_guard lock(state_mutex_);
    std::set<std::string> listed;
    for (const ObservedPod& pod : *pods) {
      listed.insert(pod.name);
      if (pod.Finished() && !pod.reservation_id.empty()) ended_.insert(pod.reservation_id);
    }
    std::erase_if(awaiting_gone_, [&](const std::string& pod) { return !listed.contains(pod); });
    input = PlanInput{.desired = desired_,
                      .desired_fresh = fresh,
                      .unlisted_before = unlisted_before_,
                      .accepting = accepting_,
                      .draining = draining_,
                      .ended = ended_,
                      .pods = *pods,
                      .now = clock_.Now()};
  }
  ReconcilePlan plan = PlanReconcile(*config, input);
  for (WorkspaceEvent& event : plan.events) outbox_.Add(std::move(event));
  std::vector<std::function<Status()>> work;
  for (const DesiredReservation& reservation : plan.create) {
    work.push_back([this, config, reservation] { return CreatePod(*config, reservation); });
  }
  for (const PodDeletion& deletion : plan.remove) {
    work.push_back([this, config, deletion] { return DeletePod(*config, deletion); });
  }
  Status applied = ApplyConcurrently(std::move(work));

  std::map<std::string, std::int64_t> phases{{"Pending", 0}, {"Running", 0}, {"Succeeded", 0},
                                             {"Failed", 0}};
  for (const ObservedPod& pod : *pods) ++phases[pod.phase.empty() ? "Unknown" : pod.phase];
  for (const auto& [phase, count] : phases) {
    registry_.Set("uplink_workspace_pods", static_cast<double>(count), {{"phase", phase}});
  }
  registry_.Set("uplink_workspace_events_pending", static_cast<double>(outbox_.pending()));
  registry_.Increment("uplink_workspace_reconciles_total",
                      {{"result", applied.ok() ? "ok" : "error"}});
  if (options_.pods_observed) options_.pods_observed(*pods);
  std::lock_guard lock(state_mutex_);
  if (fresh) unlisted_before_ = std::move(plan.unlisted_now);
  observed_ = std::move(pods).value();
  waiting_for_capacity_ = plan.waiting_for_capacity.size();
  return applied;
}

Status WorkspaceController::ExpireOnce() {
  const std::shared_ptr<const ExecutionConfig> config = this->config();
  RefreshDraining();
  auto pods = ListPods();
  if (!pods.ok()) {
    log_.Warn("expiry loop: could not list the workspace pods", {{"error", pods.status()}});
    return pods.status();
  }
  std::vector<PodDeletion> deletions = PlanLocalExpiry(*pods, clock_.Now());
  if (draining_) {
    for (const ObservedPod& pod : *pods) {
      bool planned = std::any_of(deletions.begin(), deletions.end(),
                                 [&](const PodDeletion& d) { return d.pod == pod.name; });
      if (!pod.deleting && !planned) {
        deletions.push_back({pod.name, pod.reservation_id, DeleteReason::kDraining,
                             "the namespace is draining"});
      }
    }
  }
  std::vector<std::function<Status()>> work;
  for (const PodDeletion& deletion : deletions) {
    work.push_back([this, config, deletion] { return DeletePod(*config, deletion); });
  }
  return ApplyConcurrently(std::move(work));
}

bool WorkspaceController::Busy() const {
  if (outbox_.pending() > 0) return true;
  std::lock_guard lock(state_mutex_);
  return waiting_for_capacity_ > 0 || PodsInMotionLocked();
}

bool WorkspaceController::PodsInMotion() const {
  std::lock_guard lock(state_mutex_);
  return PodsInMotionLocked();
}

bool WorkspaceController::PodsInMotionLocked() const {
  return !awaiting_gone_.empty() ||
         std::any_of(observed_.begin(), observed_.end(), [](const ObservedPod& pod) {
           return pod.phase == "Pending" || pod.deleting;
         });
}

void WorkspaceController::WaitWhileBusy(StopSignal& stop) {
  const SteadyTime until = clock_.SteadyNow() + options_.busy_interval;
  const size_t added = outbox_.added();
  for (SteadyTime now = clock_.SteadyNow(); now < until; now = clock_.SteadyNow()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
    if (!stop.WaitFor(std::min(options_.pod_poll_interval, left))) return;
    if (!PodsInMotion()) continue;
    // Kubernetes only, with the desired set of the sync just made.
    (void)Reconcile(false);
    if (outbox_.added() != added) return;
  }
}

bool WorkspaceController::SyncOnce(bool busy) {
  const std::shared_ptr<const ExecutionConfig> config = this->config();
  protocol::WorkspaceSync sync{.instance = options_.instance,
                               .version = UPLINK_VERSION,
                               .release = options_.release,
                               .namespace_name = config->namespace_name,
                               .draining = draining_,
                               .wait_seconds = busy ? 0 : options_.sync_wait.count(),
                               .events = outbox_.Peek(protocol::kMaxSyncEvents)};
  {
    std::lock_guard lock(state_mutex_);
    for (const ObservedPod& pod : observed_) {
      if (sync.workspaces.size() >= protocol::kMaxSyncWorkspaces) break;
      if (!protocol::IsReservationId(pod.reservation_id)) continue;
      sync.workspaces.push_back({pod.reservation_id, pod.name,
                                 pod.phase.empty() ? "Unknown" : pod.phase, pod.node});
    }
  }
  ConsoleReply reply = sync_client_.PostJson(protocol::kWorkspaceSyncPath,
                                             protocol::EncodeWorkspaceSync(sync));
  Result<protocol::WorkspaceSyncReply> decoded =
      reply.status.ok() ? protocol::DecodeWorkspaceSyncReply(reply.body)
                        : Result<protocol::WorkspaceSyncReply>(reply.status);
  if (!decoded.ok()) {
    registry_.Increment("uplink_workspace_syncs_total", {{"result", "error"}});
    std::lock_guard lock(state_mutex_);
    last_problem_ = "console sync failed: " + decoded.status().message();
    log_.Warn("console sync failed; the last desired set stays and unsent events wait",
              {{"error", decoded.status()},
               {"events_pending", static_cast<std::int64_t>(outbox_.pending())}});
    return false;
  }
  registry_.Increment("uplink_workspace_syncs_total", {{"result", "ok"}});
  outbox_.Acknowledge(decoded->acknowledged);
  {
    std::lock_guard lock(state_mutex_);
    desired_ = decoded->reservations;
    if (accepting_ != decoded->accepting) {
      log_.Warn(decoded->accepting ? "the console accepts reservations again"
                                   : "execution is disabled in the console: no new workspaces");
    }
    accepting_ = decoded->accepting;
    // What the console no longer lists cannot come back as running: forget it.
    std::set<std::string> listed;
    for (const DesiredReservation& r : desired_) listed.insert(r.id);
    std::erase_if(ended_, [&](const std::string& id) { return !listed.contains(id); });
  }
  Status reconciled = Reconcile(true);
  DispatchCommands(decoded->commands);
  std::lock_guard lock(state_mutex_);
  if (reconciled.ok()) {
    last_full_reconcile_ = clock_.SteadyNow();
    last_problem_.clear();
    registry_.Set("uplink_workspace_last_full_reconcile_timestamp_seconds",
                  static_cast<double>(ToUnixSeconds(clock_.Now())));
  } else {
    last_problem_ = reconciled.message();
    log_.Warn("reconcile incomplete; the next pass tries again", {{"error", reconciled}});
  }
  return true;
}

void WorkspaceController::DispatchCommands(const std::vector<WorkspaceCommand>& commands) {
  for (const WorkspaceCommand& command : commands) {
    {
      std::lock_guard lock(commands_mutex_);
      if (commands_in_flight_.contains(command.id) || commands_done_.contains(command.id) ||
          commands_in_flight_.size() >= options_.max_commands) {
        continue;
      }
    }
    auto task = std::make_shared<CommandTask>();
    task->command = command;
    if (command.problem.empty()) {
      std::lock_guard lock(state_mutex_);
      auto pod = std::find_if(observed_.begin(), observed_.end(), [&](const ObservedPod& p) {
        return p.reservation_id == command.reservation_id && p.phase == "Running" && !p.deleting;
      });
      // Not running (yet): the console hands the command out again with the next sync.
      if (pod == observed_.end()) continue;
      task->pod = pod->name;
      if (pod->expires_at) {
        // Never past the reservation's end: a command cannot outlive its workspace.
        std::int64_t left =
            std::chrono::ceil<std::chrono::seconds>(*pod->expires_at - clock_.Now()).count();
        task->command.timeout_seconds = std::clamp<std::int64_t>(left, 1, task->command.timeout_seconds);
      }
    }
    auto finished = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard lock(commands_mutex_);
    commands_in_flight_.insert(command.id);
    registry_.Set("uplink_workspace_commands_running", static_cast<double>(commands_in_flight_.size()));
    command_threads_.emplace_back(finished, std::thread([this, task, finished] {
      const bool delivered = RunCommand(task);
      {
        std::lock_guard lock(commands_mutex_);
        commands_in_flight_.erase(task->command.id);
        if (delivered && commands_done_.insert(task->command.id).second) {
          commands_done_order_.push_back(task->command.id);
          if (commands_done_order_.size() > kRememberDoneCommands) {
            commands_done_.erase(commands_done_order_.front());
            commands_done_order_.pop_front();
          }
        }
        registry_.Set("uplink_workspace_commands_running",
                      static_cast<double>(commands_in_flight_.size()));
      }
      *finished = true;
    }));
  }
}

bool WorkspaceController::PostOutput(CommandTask& task, const CommandOutcome* outcome) {
  while (!task.forgotten) {
    const size_t from = std::min<size_t>(static_cast<size_t>(task.have), task.output.size());
    const std::string_view rest = std::string_view(task.output).substr(from);
    const bool nothing_new = rest.empty() && static_cast<size_t>(task.have) >= task.output.size();
    if (outcome == nullptr && nothing_new && task.announced) return true;
    const std::string_view chunk = rest.substr(0, protocol::kMaxOutputChunkBytes);
    const bool last = chunk.size() == rest.size();
    protocol::WorkspaceOutput output{.offset = static_cast<std::int64_t>(from),
                                     .data = std::string(chunk),
                                     .state = std::string(protocol::kCommandRunning)};
    if (outcome != nullptr && last) {
      output.state = outcome->state;
      output.exit_code = outcome->exit_code;
      output.truncated = task.truncated;
      output.message = outcome->message.substr(0, protocol::kMaxOutputMessageBytes);
    }
    ConsoleReply reply = output_client_.PostJson(protocol::WorkspaceOutputPath(task.command.id),
                                                 protocol::EncodeWorkspaceOutput(output));
    if (reply.http_status == 404) {
      log_.Warn("the console no longer knows a command; its output is dropped",
                {{"command", task.command.id}});
      task.forgotten = true;
      return true;
    }
    if (reply.http_status == 409) {
      if (std::optional<std::int64_t> have = protocol::DecodeOutputGap(reply.error_json)) {
        task.have = *have;
        continue;
      }
    }
    if (!reply.status.ok()) return false;
    auto accepted = protocol::DecodeWorkspaceOutputReply(reply.body);
    if (!accepted.ok()) return false;
    task.announced = true;
    task.have = std::max<std::int64_t>(accepted->have, static_cast<std::int64_t>(from + chunk.size()));
    if (accepted->final || (last && output.state != protocol::kCommandRunning)) return true;
    if (last && outcome == nullptr) return true;
  }
  return true;
}

bool WorkspaceController::RunCommand(std::shared_ptr<CommandTask> task) {
  const std::shared_ptr<const ExecutionConfig> config = this->config();
  const WorkspaceCommand& command = task->command;
  CommandOutcome outcome{.state = "failed", .message = command.problem};
  if (command.problem.empty()) {
    log_.Info("running a command", {{"command", command.id},
                                    {"reservation", command.reservation_id},
                                    {"pod", task->pod},
                                    {"kind", command.kind},
                                    {"timeout_s", command.timeout_seconds}});
    (void)PostOutput(*task, nullptr);  // "running" at once
    const size_t cap = static_cast<size_t>(std::max<std::int64_t>(command.output_cap_bytes, 0));
    OutputSink sink = [&](std::string_view chunk) {
      size_t room = cap - std::min(cap, task->output.size());
      if (chunk.size() > room) task->truncated = true;
      task->output.append(chunk.substr(0, room));
      if (clock_.SteadyNow() - task->last_post >= kOutputInterval) {
        task->last_post = clock_.SteadyNow();
        (void)PostOutput(*task, nullptr);
      }
    };
    Status last_error;
    bool finished = false;
    for (int attempt = 0; attempt < kExecAttempts && !finished; ++attempt) {
      if (attempt > 0 && !stop_->WaitFor(std::chrono::seconds(attempt))) return false;
      // A re-attached session replays the output from its start.
      task->output.clear();
      task->truncated = false;
      auto ran = RunCommandInPod(kube_.ForExec(), config->namespace_name, task->pod,
                                 kContainerName, command, sink, sessions_);
      if (ran.ok()) {
        outcome = std::move(ran).value();
        finished = true;
      } else {
        last_error = ran.status();
        if (stop_->stopped()) return false;  // handed out again after the restart
        log_.Warn("exec session failed; attaching again", {{"command", command.id},
                                                           {"attempt", attempt + 1},
                                                           {"error", last_error}});
      }
    }
    if (!finished) {
      outcome = CommandOutcome{.state = "failed",
                               .message = "the workspace could not be reached: " +
                                          last_error.message()};
    }
  }
  registry_.Increment("uplink_workspace_commands_total", {{"state", outcome.state}});
  log_.Info("command finished", {{"command", command.id},
                                 {"state", outcome.state},
                                 {"exit_code", static_cast<std::int64_t>(outcome.exit_code.value_or(-1))},
                                 {"output_bytes", static_cast<std::int64_t>(task->output.size())},
                                 {"truncated", task->truncated}});
  Backoff backoff(BackoffOptions{.base = std::chrono::seconds(1), .cap = std::chrono::seconds(30)});
  while (!PostOutput(*task, &outcome)) {
    // The console is away: the result waits here (and, were the controller to restart, in
    // the workspace, from which a re-delivery reads it back).
    if (!stop_->WaitFor(backoff.NextDelay())) return false;
  }
  return true;
}

void WorkspaceController::ReapCommandThreads(bool all) {
  std::vector<std::thread> done;
  {
    std::lock_guard lock(commands_mutex_);
    for (auto it = command_threads_.begin(); it != command_threads_.end();) {
      if (all || *it->first) {
        done.push_back(std::move(it->second));
        it = command_threads_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (std::thread& thread : done) thread.join();
}

Readiness WorkspaceController::CheckReadiness() const {
  std::lock_guard lock(state_mutex_);
  if (!last_full_reconcile_) {
    return Readiness{false, "no full reconcile yet" +
                                (last_problem_.empty() ? "" : ": " + last_problem_)};
  }
  auto since = std::chrono::duration_cast<std::chrono::seconds>(clock_.SteadyNow() -
                                                                *last_full_reconcile_);
  if (since > options_.ready_within) {
    return Readiness{false, "the last full reconcile was " + std::to_string(since.count()) +
                                " s ago" + (last_problem_.empty() ? "" : ": " + last_problem_)};
  }
  return Readiness{true, ""};
}

void WorkspaceController::Run(StopSignal& stop) {
  stop_ = &stop;
  std::thread expiry([&] {
    NameThisThread("expiry");
    do {
      (void)ExpireOnce();
    } while (stop.WaitFor(options_.expiry_interval));
  });
  // Stopping ends a held poll, the output posts and the exec sessions at once; the commands go
  // on in their workspaces and are re-attached after a restart.
  std::thread stop_watch([&] {
    while (stop.WaitFor(std::chrono::hours(1))) {
    }
    sessions_.AbortAll();
    sync_client_.Abort();
    output_client_.Abort();
  });
  Backoff backoff(BackoffOptions{.base = std::chrono::seconds(1), .cap = std::chrono::seconds(30)});
  while (!stop.stopped()) {
    ReloadConfig();
    ReapCommandThreads(false);
    const size_t added = outbox_.added();
    if (SyncOnce(Busy())) {
      backoff.Reset();
      // The reconcile after the sync made events (pods created, running, deleted): they go to
      // the console now rather than a busy interval later. Each key is made once, so this
      // ends.
      if (outbox_.added() != added) continue;
      if (Busy()) WaitWhileBusy(stop);
      continue;
    }
    if (stop.stopped()) break;
    // The console is unreachable: keep the workspaces it last wanted as they should be.
    Status reconciled = Reconcile(false);
    if (!reconciled.ok()) log_.Warn("reconcile incomplete", {{"error", reconciled}});
    stop.WaitFor(backoff.NextDelay());
  }
  stop_watch.join();
  expiry.join();
  ReapCommandThreads(true);
}

}  // namespace uplink::agent::workspace
