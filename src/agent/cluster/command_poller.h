// The cluster role's side of console commands (docs/protocol.md, "kubectl commands"): one
// long-poll at a time asks the console for work, each command runs on its own thread through
// the KubectlRunner (guard first), and its result is posted back, retried until the console
// acknowledges it or 2 minutes pass. An id already run is never run again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "agent/cluster/kubectl_runner.h"
#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/stop_signal.h"
#include "common/backoff.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "protocol/commands.h"

namespace uplink::agent::cluster {

struct CommandPollerOptions {
  std::string instance;
  // How long the console may hold a poll (0 to protocol::kMaxPollWaitSeconds).
  std::chrono::seconds wait{protocol::kDefaultPollWaitSeconds};
  size_t max_concurrent = 4;
  std::chrono::milliseconds result_retry_budget{std::chrono::minutes(2)};
  BackoffOptions backoff;
};

using protocol::PolledCommand;

class CommandPoller {
 public:
  // `poll_client` must have a request timeout above `options.wait` (the console holds the
  // poll); `result_client` is used by the command threads, one post at a time. All must
  // outlive the poller.
  CommandPoller(CommandPollerOptions options, ConsoleClient& poll_client,
                ConsoleClient& result_client, KubectlRunner& runner, const Clock& clock,
                metrics::Registry& registry);
  ~CommandPoller();

  // Polls until `stop`; then the poll under way is cut short, running kubectl processes are
  // killed and each result gets one last post.
  void Run(StopSignal& stop);

  // One poll and the dispatch of what it brought; the back-off wait after a failure (zero
  // after a success). For tests.
  std::chrono::milliseconds PollOnce();
  // Waits until no command thread is left. For tests and Run.
  void WaitForCommands();

  // Not ready while polls fail with a refusal (401, 403, other 4xx).
  Readiness CheckReadiness() const;

 private:
  void Execute(PolledCommand command);
  void PostResult(const std::string& id, const protocol::CommandResult& result);
  bool MarkSeen(const std::string& id);  // false when the id was run before

  const CommandPollerOptions options_;
  ConsoleClient& poll_client_;
  ConsoleClient& result_client_;
  KubectlRunner& runner_;
  const Clock& clock_;
  metrics::Registry& metrics_;
  log::Logger log_{"commands"};
  Backoff backoff_;
  std::atomic<bool> stopping_{false};

  // Joins the command threads that have finished. Requires mutex_.
  void JoinFinishedLocked();

  std::mutex result_mutex_;  // one post at a time on result_client_

  mutable std::mutex mutex_;
  std::condition_variable threads_changed_;  // also signalled when stopping
  size_t running_ = 0;
  std::list<std::thread> threads_;
  std::vector<std::thread::id> finished_;  // threads past their last use of mutex_
  std::deque<std::string> seen_order_;
  std::unordered_set<std::string> seen_;
  std::string refusal_;  // why polls are refused, empty when they are not
};

void DeclareCommandMetrics(metrics::Registry& registry);

}  // namespace uplink::agent::cluster
