#include "agent/cluster/snapshot.h"

#include <algorithm>
#include <set>

#include "common/json.h"
#include "common/text.h"
#include "kubectl/guard.h"
#include "protocol/upload.h"

namespace uplink::agent::cluster {
namespace {

constexpr char kSnapshots[] = "uplink_agent_cluster_snapshots_total";
constexpr char kSnapshotSeconds[] = "uplink_agent_cluster_snapshot_seconds";
constexpr char kPlanCommands[] = "uplink_agent_cluster_plan_commands";

// Reasons a waiting container gives when it failed, rather than while it starts.
const std::set<std::string_view> kFailedWaitingReasons = {
    "CrashLoopBackOff", "Error", "RunContainerError", "CreateContainerError",
    "CreateContainerConfigError", "OOMKilled"};

// At most `max_bytes` of valid UTF-8 `text`, cut after the last whole line that fits, or
// between two characters when no line does.
std::string_view CutAtLine(std::string_view text, size_t max_bytes, bool* cut) {
  *cut = text.size() > max_bytes;
  if (!*cut) return text;
  std::string_view head = text.substr(0, max_bytes);
  const size_t newline = head.rfind('\n');
  if (newline != std::string_view::npos) return head.substr(0, newline + 1);
  size_t end = head.size();
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return head.substr(0, end);
}

std::vector<std::string_view> SplitOn(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos
                                                                     : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

// The namespaces the plan lists pods in: nullopt for all (-A), else the -n values, `default`
// for a command without one (as kubectl reads it: never widened to every namespace).
std::optional<std::vector<std::optional<std::string>>> PodNamespaces(const ClusterPlan& plan) {
  std::vector<std::optional<std::string>> namespaces;
  for (const PlanCommand& command : plan.commands) {
    Result<kubectl::KubectlCommand> parsed = kubectl::CheckKubectlArgv(command.argv);
    if (!parsed.ok() || parsed->verb != "get" ||
        std::find(parsed->resources.begin(), parsed->resources.end(), "pods") ==
            parsed->resources.end()) {
      continue;
    }
    if (parsed->all_namespaces) return std::nullopt;
    const std::optional<std::string> listed = parsed->namespace_name.value_or("default");
    if (std::find(namespaces.begin(), namespaces.end(), listed) == namespaces.end()) {
      namespaces.push_back(listed);
    }
  }
  return namespaces;
}

// Halves the longest output, at a line, until the encoded snapshot fits in one spool record.
void FitIntoRecord(protocol::ClusterSnapshot& snapshot) {
  while (json::serialize(protocol::EncodeClusterSnapshot(snapshot)).size() >
         protocol::kMaxPayloadBytes) {
    std::string* longest = nullptr;
    protocol::SnapshotResult* holder = nullptr;
    for (protocol::SnapshotResult& result : snapshot.results) {
      for (std::string* text : {&result.outcome.stdout_text, &result.outcome.stderr_text}) {
        if (longest == nullptr || text->size() > longest->size()) {
          longest = text;
          holder = &result;
        }
      }
    }
    if (longest == nullptr || longest->empty()) return;
    bool cut = false;
    *longest = std::string(CutAtLine(*longest, longest->size() / 2, &cut));
    holder->truncated = true;
  }
}

}  // namespace

ClusterPlan DefaultClusterPlan() {
  ClusterPlan plan;
  plan.commands = {{"nodes", {"kubectl", "get", "nodes", "-o", "wide"}},
                   {"namespaces", {"kubectl", "get", "namespaces"}},
                   {"top_nodes", {"kubectl", "top", "nodes"}}};
  return plan;
}

std::vector<std::string> FailingPodQuery(const std::optional<std::string>& namespace_name) {
  std::vector<std::string> argv = {"kubectl", "get", "pods"};
  if (namespace_name) {
    argv.insert(argv.end(), {"-n", *namespace_name});
  } else {
    argv.push_back("-A");
  }
  // namespace, name, phase, then per container: name, restart count, ready, waiting reason.
  argv.push_back(
      "-o=jsonpath={range .items[*]}{.metadata.namespace}{\"\\t\"}{.metadata.name}{\"\\t\"}"
      "{.status.phase}{\"\\t\"}{range .status.containerStatuses[*]}{.name}{\",\"}"
      "{.restartCount}{\",\"}{.ready}{\",\"}{.state.waiting.reason}{\";\"}{end}{\"\\n\"}{end}");
  return argv;
}

std::vector<FailingPod> ParseFailingPods(std::string_view output, size_t max_pods) {
  std::vector<FailingPod> pods;
  for (std::string_view line : SplitOn(output, '\n')) {
    if (pods.size() >= max_pods) break;
    const std::vector<std::string_view> fields = SplitOn(line, '\t');
    if (fields.size() != 4 || fields[0].empty() || fields[1].empty()) continue;
    FailingPod pod{std::string(fields[0]), std::string(fields[1]), "", false};
    bool failing = fields[2] == "Failed";
    for (std::string_view container : SplitOn(fields[3], ';')) {
      const std::vector<std::string_view> parts = SplitOn(container, ',');
      if (parts.size() != 4 || parts[0].empty()) continue;
      const bool restarted = !parts[1].empty() && parts[1] != "0";
      const bool waiting_failed = kFailedWaitingReasons.contains(parts[3]);
      if (waiting_failed || (restarted && parts[2] != "true")) {
        failing = true;
        pod.container = std::string(parts[0]);
        pod.restarted = restarted;
        break;
      }
    }
    if (failing && pod.container.empty()) {
      // A failed pod with no container to blame in particular: its first container's log.
      pod.container = std::string(SplitOn(fields[3], ',').front());
    }
    if (failing) pods.push_back(std::move(pod));
  }
  return pods;
}

std::string_view RunErrorCode(const Status& status) {
  switch (status.code()) {
    case StatusCode::kPermissionDenied: return protocol::kCommandRefused;
    case StatusCode::kDeadlineExceeded: return protocol::kCommandTimedOut;
    case StatusCode::kResourceExhausted: return protocol::kCommandOutputTooLarge;
    default: return protocol::kCommandFailed;
  }
}

protocol::CommandResult RunResult(const Result<KubectlRun>& run, std::int64_t failed_after_ms) {
  protocol::CommandResult result;
  if (run.ok() && run->exit_code < 0) {
    result.error_code = protocol::kCommandFailed;
    result.error_message = "kubectl was killed by signal " + std::to_string(-run->exit_code);
    result.duration_ms = run->duration_ms;
    return result;
  }
  if (run.ok()) {
    result.duration_ms = std::max<std::int64_t>(run->duration_ms, 0);
    std::string out = ValidUtf8(run->stdout_text);
    if (out.size() > protocol::kMaxCommandStdoutBytes) {
      // Invalid bytes grow into U+FFFD: the bound holds for what is sent.
      result.error_code = protocol::kCommandOutputTooLarge;
      result.error_message = "kubectl's output is over " +
                             std::to_string(protocol::kMaxCommandStdoutBytes >> 20) +
                             " MiB as text; narrow the command";
      return result;
    }
    result.exit_code = run->exit_code;
    result.stdout_text = std::move(out);
    result.stderr_text = ValidUtf8(run->stderr_text);
    return result;
  }
  const std::string message = run.status().code() == StatusCode::kPermissionDenied
                                  ? kubectl::RefusalText(run.status().message())
                                  : run.status().message();
  result.error_code = RunErrorCode(run.status());
  result.error_message = ValidUtf8(message);
  result.duration_ms = std::max<std::int64_t>(failed_after_ms, 0);
  return result;
}

SnapshotCollector::SnapshotCollector(KubectlRunner& runner, const Clock& clock,
                                     metrics::Registry& registry)
    : runner_(runner), clock_(clock), metrics_(registry) {}

protocol::SnapshotResult SnapshotCollector::RunOne(std::string_view name,
                                                   const std::vector<std::string>& argv,
                                                   const std::atomic<bool>* cancel) {
  const SteadyTime started = clock_.SteadyNow();
  Result<KubectlRun> run = runner_.Run(argv, cancel);
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
                           clock_.SteadyNow() - started)
                           .count();
  protocol::SnapshotResult result{std::string(name), argv, {}, false};
  if (run.ok()) {
    // A snapshot is a view: cut long output at a line, and say so. Made valid UTF-8 first,
    // so that the bound holds for what is sent.
    bool cut_out = false, cut_err = false;
    run->stdout_text = std::string(
        CutAtLine(ValidUtf8(run->stdout_text), kMaxSnapshotStdoutBytes, &cut_out));
    run->stderr_text = std::string(
        CutAtLine(ValidUtf8(run->stderr_text), kMaxSnapshotStderrBytes, &cut_err));
    result.outcome = RunResult(run, elapsed);
    result.truncated = cut_out || cut_err;
    return result;
  }
  log_.Warn("a planned kubectl command failed",
            {{"name", name}, {"code", RunErrorCode(run.status())}, {"error", run.status()}});
  result.outcome = RunResult(run, elapsed);
  return result;
}

void SnapshotCollector::AddFailingPodLogs(const ClusterPlan& plan,
                                          std::vector<protocol::SnapshotResult>& results,
                                          const std::atomic<bool>* cancel) {
  if (!plan.failing_pod_logs || plan.failing_pod_logs->max_pods == 0) return;
  // Only where the plan lists pods: the console builds that from the namespace scope.
  const auto namespaces = PodNamespaces(plan);
  std::vector<std::optional<std::string>> queries;
  if (namespaces) {
    queries = *namespaces;
  } else {
    queries.push_back(std::nullopt);
  }
  // The console takes at most protocol::kMaxSnapshotResults results.
  const size_t room = protocol::kMaxSnapshotResults > results.size()
                          ? protocol::kMaxSnapshotResults - results.size()
                          : 0;
  const size_t max_pods = std::min(static_cast<size_t>(plan.failing_pod_logs->max_pods), room);
  if (max_pods == 0) return;
  std::vector<FailingPod> failing;
  for (const std::optional<std::string>& namespace_name : queries) {
    if (failing.size() >= max_pods || (cancel != nullptr && *cancel)) break;
    Result<KubectlRun> listed = runner_.Run(FailingPodQuery(namespace_name), cancel);
    if (!listed.ok() || listed->exit_code != 0) {
      log_.Warn("could not look for failing pods",
                {{"namespace", namespace_name.value_or("*")},
                 {"error", listed.ok() ? OneLineExcerpt(listed->stderr_text) :
                                         listed.status().ToString()}});
      continue;
    }
    for (FailingPod& pod : ParseFailingPods(listed->stdout_text, max_pods - failing.size())) {
      failing.push_back(std::move(pod));
    }
  }
  for (const FailingPod& pod : failing) {
    if (cancel != nullptr && *cancel) break;
    std::vector<std::string> argv = {"kubectl", "logs", "-n", pod.namespace_name, pod.name};
    if (!pod.container.empty()) argv.insert(argv.end(), {"-c", pod.container});
    argv.push_back("--tail=" + std::to_string(plan.failing_pod_logs->tail_lines));
    if (pod.restarted) argv.push_back("--previous");
    std::string name = "logs/" + pod.namespace_name + "/" + pod.name;
    name.resize(std::min(name.size(), protocol::kMaxSnapshotNameBytes));
    results.push_back(RunOne(name, argv, cancel));
  }
}

protocol::ClusterSnapshot SnapshotCollector::Collect(const ClusterPlan& plan,
                                                     const std::atomic<bool>* cancel) {
  protocol::ClusterSnapshot snapshot;
  snapshot.collected_at = clock_.Now();
  for (const PlanCommand& command : plan.commands) {
    if (cancel != nullptr && *cancel) break;
    snapshot.results.push_back(RunOne(command.name, command.argv, cancel));
  }
  AddFailingPodLogs(plan, snapshot.results, cancel);
  FitIntoRecord(snapshot);
  const double seconds =
      std::chrono::duration<double>(clock_.Now() - snapshot.collected_at).count();
  metrics_.Increment(kSnapshots);
  metrics_.Set(kSnapshotSeconds, seconds);
  metrics_.Set(kPlanCommands, static_cast<double>(plan.commands.size()));
  return snapshot;
}

void DeclareClusterMetrics(metrics::Registry& registry) {
  registry.DeclareCounter(kSnapshots, "Cluster snapshots collected and spooled");
  registry.DeclareGauge(kSnapshotSeconds, "How long the last snapshot took to collect");
  registry.DeclareGauge(kPlanCommands, "Commands in the current collection plan");
}

}  // namespace uplink::agent::cluster
