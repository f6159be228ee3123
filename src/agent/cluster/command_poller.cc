#include "agent/cluster/command_poller.h"

#include <algorithm>
#include <thread>

#include "agent/cluster/snapshot.h"
#include "common/json.h"
#include "common/thread_name.h"
#include "protocol/agent_api.h"

namespace uplink::agent::cluster {
namespace {

constexpr size_t kRememberedIds = 1024;

constexpr char kCommands[] = "uplink_agent_kubectl_commands_total";
constexpr char kPolls[] = "uplink_agent_command_polls_total";
constexpr char kRunning[] = "uplink_agent_kubectl_commands_running";
constexpr char kResultsDropped[] = "uplink_agent_command_results_dropped_total";

// The metric label of how a command ended: its error code, or ok or exit_nonzero.
std::string Outcome(const protocol::CommandResult& result) {
  if (!result.error_code.empty()) return result.error_code;
  return result.exit_code == 0 ? "ok" : "exit_nonzero";
}

}  // namespace

CommandPoller::CommandPoller(CommandPollerOptions options, ConsoleClient& poll_client,
                             ConsoleClient& result_client, KubectlRunner& runner,
                             const Clock& clock, metrics::Registry& registry)
    : options_(std::move(options)),
      poll_client_(poll_client),
      result_client_(result_client),
      runner_(runner),
      clock_(clock),
      metrics_(registry),
      backoff_(options_.backoff) {}

CommandPoller::~CommandPoller() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    threads_changed_.notify_all();
  }
  WaitForCommands();
}

void CommandPoller::JoinFinishedLocked() {
  for (const std::thread::id id : finished_) {
    auto thread = std::find_if(threads_.begin(), threads_.end(),
                               [&](const std::thread& t) { return t.get_id() == id; });
    if (thread == threads_.end()) continue;
    thread->join();
    threads_.erase(thread);
  }
  finished_.clear();
}

bool CommandPoller::MarkSeen(const std::string& id) {
  std::lock_guard lock(mutex_);
  if (!seen_.insert(id).second) return false;
  seen_order_.push_back(id);
  if (seen_order_.size() > kRememberedIds) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
  return true;
}

std::chrono::milliseconds CommandPoller::PollOnce() {
  size_t free_slots = 0;
  {
    std::unique_lock lock(mutex_);
    // Never ask for more than can start at once: a command waiting here for a slot would
    // spend its 60 s in this agent rather than in the console's queue.
    threads_changed_.wait(lock, [&] { return running_ < options_.max_concurrent || stopping_; });
    if (stopping_) return std::chrono::milliseconds(0);
    free_slots = options_.max_concurrent - running_;
  }
  const protocol::CommandPoll poll{
      options_.instance, options_.wait.count(),
      static_cast<std::int64_t>(
          std::min(free_slots, static_cast<size_t>(protocol::kMaxPollCommands)))};
  ConsoleReply reply =
      poll_client_.PostJson(protocol::kCommandPollPath, protocol::EncodeCommandPoll(poll));
  if (!reply.status.ok()) {
    const bool refused = reply.http_status >= 400 && reply.http_status < 500 &&
                         reply.http_status != 429;
    metrics_.Increment(kPolls, {{"result", refused ? "refused" : "failed"}});
    const std::string why = reply.error_code.empty() ? reply.status.ToString() : reply.error_code;
    {
      std::lock_guard lock(mutex_);
      refusal_ = refused ? why : "";
    }
    const auto delay = backoff_.NextDelay(reply.retry_after);
    log_.Warn("polling the console for commands failed",
              {{"http_status", reply.http_status},
               {"error", reply.status},
               {"retry_in_ms", static_cast<std::int64_t>(delay.count())}});
    return delay;
  }
  backoff_.Reset();
  {
    std::lock_guard lock(mutex_);
    refusal_.clear();
  }
  Result<protocol::PollReply> polled = protocol::DecodePollReply(reply.body);
  if (!polled.ok()) {
    metrics_.Increment(kPolls, {{"result", "bad_reply"}});
    log_.Warn("the console's poll reply is not usable", {{"error", polled.status()}});
    return backoff_.NextDelay();
  }
  std::vector<PolledCommand>& commands = polled->commands;
  metrics_.Increment(kPolls, {{"result", commands.empty() ? "empty" : "commands"}});
  for (PolledCommand& command : commands) {
    if (!MarkSeen(command.id)) {
      log_.Warn("the console handed out a command again; not running it twice",
                {{"id", command.id}});
      continue;
    }
    std::lock_guard lock(mutex_);
    ++running_;
    metrics_.Set(kRunning, static_cast<double>(running_));
    threads_.emplace_back([this, command = std::move(command)]() mutable {
      NameThisThread("command");
      Execute(std::move(command));
    });
  }
  return std::chrono::milliseconds(0);
}

void CommandPoller::Execute(PolledCommand command) {
  const SteadyTime started = clock_.SteadyNow();
  Result<KubectlRun> run = command.argv.empty()
                               ? Result<KubectlRun>(PermissionDeniedError(
                                     "the command's argv is not a list of strings"))
                               : runner_.Run(command.argv, &stopping_);
  if (!run.ok() && run.status().code() == StatusCode::kUnavailable && stopping_) {
    run = UnavailableError("the agent is stopping; the command was cut short");
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
                           clock_.SteadyNow() - started)
                           .count();
  const protocol::CommandResult result = RunResult(run, elapsed);
  const std::string outcome = Outcome(result);
  metrics_.Increment(kCommands, {{"outcome", outcome}});
  // The verb only: arguments are the user's input and may name anything.
  log_.Info("ran a console command",
            {{"id", command.id},
             {"verb", command.argv.size() > 1 ? command.argv[1] : ""},
             {"outcome", outcome},
             {"duration_ms", static_cast<std::int64_t>(elapsed)}});
  PostResult(command.id, result);
  std::lock_guard lock(mutex_);
  --running_;
  metrics_.Set(kRunning, static_cast<double>(running_));
  finished_.push_back(std::this_thread::get_id());
  threads_changed_.notify_all();
}

void CommandPoller::PostResult(const std::string& id, const protocol::CommandResult& result) {
  const std::string path = protocol::CommandResultPath(id);
  const json::value body = protocol::EncodeCommandResult(result);
  const WallTime deadline = clock_.Now() + options_.result_retry_budget;
  Backoff backoff(options_.backoff);
  while (true) {
    ConsoleReply reply;
    {
      std::lock_guard lock(result_mutex_);
      reply = result_client_.PostJson(path, body, Compression::kAlways);
    }
    if (reply.status.ok()) return;
    const bool permanent = reply.http_status >= 400 && reply.http_status < 500 &&
                           reply.http_status != 408 && reply.http_status != 429;
    const auto delay = backoff.NextDelay(reply.retry_after);
    if (permanent || stopping_ || clock_.Now() + delay > deadline) {
      metrics_.Increment(kResultsDropped);
      log_.Warn("dropping a command's result the console did not take",
                {{"id", id}, {"http_status", reply.http_status}, {"error", reply.status}});
      return;
    }
    std::unique_lock lock(mutex_);
    threads_changed_.wait_for(lock, delay, [&] { return stopping_.load(); });
  }
}

void CommandPoller::WaitForCommands() {
  std::unique_lock lock(mutex_);
  threads_changed_.wait(lock, [&] { return running_ == 0; });
  JoinFinishedLocked();
}

void CommandPoller::Run(StopSignal& stop) {
  std::thread stopper([&] {
    while (stop.WaitFor(std::chrono::hours(1))) {
    }
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      threads_changed_.notify_all();
    }
    poll_client_.Abort();  // the held poll would otherwise keep the agent up to 50 s
  });
  while (!stop.stopped()) {
    const auto delay = PollOnce();
    {
      // Join finished command threads as we go, so they do not pile up.
      std::lock_guard lock(mutex_);
      JoinFinishedLocked();
    }
    if (delay.count() > 0 && !stop.WaitFor(delay)) break;
  }
  stopper.join();
  WaitForCommands();
}

Readiness CommandPoller::CheckReadiness() const {
  std::lock_guard lock(mutex_);
  if (!refusal_.empty()) return {false, "command polls refused: " + refusal_};
  return {true, ""};
}

void DeclareCommandMetrics(metrics::Registry& registry) {
  registry.DeclareCounter(kCommands, "Console kubectl commands run, by outcome");
  registry.DeclareCounter(kPolls, "Polls of the console for commands, by result");
  registry.DeclareGauge(kRunning, "Console kubectl commands running now");
  registry.DeclareCounter(kResultsDropped,
                          "Command results dropped after the console did not take them");
}

}  // namespace uplink::agent::cluster
