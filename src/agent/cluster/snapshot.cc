#include "agent/cluster/snapshot.h"

#include <algorithm>
#include <set>

#include "common/text.h"
#include "kubectl/guard.h"

namespace uplink::agent::cluster {
namespace {

constexpr size_t kMaxNameBytes = 128;
constexpr std::int64_t kMaxTailLines = 1000;
constexpr std::int64_t kMaxFailingPods = 20;

constexpr char kSnapshots[] = "uplink_agent_cluster_snapshots_total";
constexpr char kSnapshotSeconds[] = "uplink_agent_cluster_snapshot_seconds";
constexpr char kPlanCommands[] = "uplink_agent_cluster_plan_commands";

// Reasons a waiting container gives when it failed, rather than while it starts.
const std::set<std::string_view> kFailedWaitingReasons = {
    "CrashLoopBackOff", "Error", "RunContainerError", "CreateContainerError",
    "CreateContainerConfigError", "OOMKilled"};

bool IsPlanName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '/' || c == '-';
  });
}

Result<std::vector<std::string>> ArgvFromJson(const json::value& value, const std::string& where) {
  const json::array* items = value.if_array();
  if (items == nullptr || items->empty() || items->size() > kubectl::kMaxArguments) {
    return InvalidArgumentError(where + " must be an array of 1-" +
                                std::to_string(kubectl::kMaxArguments) + " strings");
  }
  std::vector<std::string> argv;
  for (const json::value& item : *items) {
    const json::string* text = item.if_string();
    if (text == nullptr || text->size() > kubectl::kMaxArgumentBytes) {
      return InvalidArgumentError(where + " must hold strings of at most " +
                                  std::to_string(kubectl::kMaxArgumentBytes) + " bytes");
    }
    argv.emplace_back(*text);
  }
  if (argv.front() != "kubectl") return InvalidArgumentError(where + " must start with kubectl");
  return argv;
}

Result<std::int64_t> BoundedInteger(const json::object& object, std::string_view key,
                                    std::int64_t low, std::int64_t high, std::int64_t fallback,
                                    const std::string& where) {
  const json::value* value = object.if_contains(key);
  if (value == nullptr) return fallback;
  const std::int64_t* number = value->if_int64();
  if (number == nullptr || *number < low || *number > high) {
    return InvalidArgumentError(where + "." + std::string(key) + " must be an integer from " +
                                std::to_string(low) + " to " + std::to_string(high));
  }
  return *number;
}

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

// The namespaces the plan lists pods in: nullopt for all (-A), else the -n values.
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
    if (std::find(namespaces.begin(), namespaces.end(), parsed->namespace_name) ==
        namespaces.end()) {
      namespaces.push_back(parsed->namespace_name);
    }
  }
  return namespaces;
}

// Halves the longest output, at a line, until the results fit in one spool record with room
// for the envelope.
void FitIntoRecord(json::array& results) {
  constexpr size_t kEnvelopeBytes = 256;
  while (json::serialize(results).size() + kEnvelopeBytes > kMaxSnapshotBytes) {
    json::string* longest = nullptr;
    json::object* holder = nullptr;
    for (json::value& result : results) {
      for (const char* stream : {"stdout", "stderr"}) {
        json::value* text = result.as_object().if_contains(stream);
        if (text != nullptr && text->is_string() &&
            (longest == nullptr || text->get_string().size() > longest->size())) {
          longest = &text->get_string();
          holder = &result.as_object();
        }
      }
    }
    if (longest == nullptr || longest->empty()) return;
    bool cut = false;
    *longest = json::string(CutAtLine(*longest, longest->size() / 2, &cut));
    (*holder)["truncated"] = true;
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

Result<std::optional<ClusterPlan>> ClusterPlanFromReply(const json::value& reply) {
  const json::object* body = reply.if_object();
  if (body == nullptr) return std::optional<ClusterPlan>();
  const json::value* plan_value = body->if_contains("plan");
  if (plan_value == nullptr || plan_value->is_null()) return std::optional<ClusterPlan>();
  const json::object* plan = plan_value->if_object();
  if (plan == nullptr) return InvalidArgumentError("plan must be an object");
  ClusterPlan out;
  UPLINK_ASSIGN_OR_RETURN(
      const std::int64_t interval,
      BoundedInteger(*plan, "interval_seconds", kMinInterval.count(), kMaxInterval.count(),
                     kDefaultInterval.count(), "plan"));
  out.interval = std::chrono::seconds(interval);
  const json::value* commands = plan->if_contains("commands");
  const json::array* entries = commands == nullptr ? nullptr : commands->if_array();
  if (entries == nullptr || entries->size() > kMaxPlanCommands) {
    return InvalidArgumentError("plan.commands must be an array of at most " +
                                std::to_string(kMaxPlanCommands) + " entries");
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string where = "plan.commands[" + std::to_string(i) + "]";
    const json::object* entry = (*entries)[i].if_object();
    if (entry == nullptr) return InvalidArgumentError(where + " must be an object");
    const json::value* name = entry->if_contains("name");
    const json::value* argv = entry->if_contains("argv");
    if (name == nullptr || !name->is_string() || !IsPlanName(name->get_string())) {
      return InvalidArgumentError(where + ".name must be 1-128 characters of [A-Za-z0-9._/-]");
    }
    if (argv == nullptr) return InvalidArgumentError(where + ".argv is missing");
    UPLINK_ASSIGN_OR_RETURN(std::vector<std::string> args, ArgvFromJson(*argv, where + ".argv"));
    out.commands.push_back(PlanCommand{std::string(name->get_string()), std::move(args)});
  }
  if (const json::value* logs = plan->if_contains("failing_pod_logs"); logs && !logs->is_null()) {
    const json::object* object = logs->if_object();
    if (object == nullptr) return InvalidArgumentError("plan.failing_pod_logs must be an object");
    FailingPodLogs wanted;
    UPLINK_ASSIGN_OR_RETURN(const std::int64_t tail,
                            BoundedInteger(*object, "tail_lines", 1, kMaxTailLines,
                                           wanted.tail_lines, "plan.failing_pod_logs"));
    UPLINK_ASSIGN_OR_RETURN(const std::int64_t pods,
                            BoundedInteger(*object, "max_pods", 0, kMaxFailingPods,
                                           wanted.max_pods, "plan.failing_pod_logs"));
    wanted.tail_lines = static_cast<int>(tail);
    wanted.max_pods = static_cast<int>(pods);
    out.failing_pod_logs = wanted;
  }
  return std::optional<ClusterPlan>(std::move(out));
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
    case StatusCode::kPermissionDenied: return "refused";
    case StatusCode::kDeadlineExceeded: return "timeout";
    case StatusCode::kResourceExhausted: return "output_too_large";
    default: return "failed";
  }
}

json::object RunResultJson(const Result<KubectlRun>& run, std::int64_t failed_after_ms) {
  if (run.ok() && run->exit_code < 0) {
    return json::object{
        {"error", json::object{{"code", "failed"},
                               {"message", "kubectl was killed by signal " +
                                               std::to_string(-run->exit_code)}}},
        {"duration_ms", run->duration_ms}};
  }
  if (run.ok()) {
    std::string out = ValidUtf8(run->stdout_text);
    if (out.size() > kMaxResultOutputBytes) {
      // Invalid bytes grow into U+FFFD: the bound holds for what is sent.
      return json::object{
          {"error", json::object{{"code", "output_too_large"},
                                 {"message", "kubectl's output is over " +
                                                 std::to_string(kMaxResultOutputBytes >> 20) +
                                                 " MiB as text; narrow the command"}}},
          {"duration_ms", std::max<std::int64_t>(run->duration_ms, 0)}};
    }
    return json::object{{"exit_code", run->exit_code},
                        {"stdout", std::move(out)},
                        {"stderr", ValidUtf8(run->stderr_text)},
                        {"duration_ms", std::max<std::int64_t>(run->duration_ms, 0)}};
  }
  {
    const std::string message = run.status().code() == StatusCode::kPermissionDenied
                                    ? kubectl::RefusalText(run.status().message())
                                    : run.status().message();
    return json::object{
        {"error", json::object{{"code", RunErrorCode(run.status())},
                               {"message", ValidUtf8(message)}}},
        {"duration_ms", std::max<std::int64_t>(failed_after_ms, 0)}};
  }
}

SnapshotCollector::SnapshotCollector(KubectlRunner& runner, const Clock& clock,
                                     metrics::Registry& registry)
    : runner_(runner), clock_(clock), metrics_(registry) {}

json::object SnapshotCollector::RunOne(std::string_view name,
                                       const std::vector<std::string>& argv,
                                       const std::atomic<bool>* cancel) {
  const SteadyTime started = clock_.SteadyNow();
  Result<KubectlRun> run = runner_.Run(argv, cancel);
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
                           clock_.SteadyNow() - started)
                           .count();
  if (run.ok()) {
    // A snapshot is a view: cut long output at a line, and say so. Made valid UTF-8 first,
    // so that the bound holds for what is sent.
    bool cut_out = false, cut_err = false;
    run->stdout_text = std::string(
        CutAtLine(ValidUtf8(run->stdout_text), kMaxSnapshotStdoutBytes, &cut_out));
    run->stderr_text = std::string(
        CutAtLine(ValidUtf8(run->stderr_text), kMaxSnapshotStderrBytes, &cut_err));
    json::object result = RunResultJson(run, elapsed);
    if (cut_out || cut_err) result["truncated"] = true;
    json::array args(argv.begin(), argv.end());
    result.emplace("name", name);
    result.emplace("argv", std::move(args));
    return result;
  }
  log_.Warn("a planned kubectl command failed",
            {{"name", name}, {"code", RunErrorCode(run.status())}, {"error", run.status()}});
  json::object result = RunResultJson(run, elapsed);
  result.emplace("name", name);
  result.emplace("argv", json::array(argv.begin(), argv.end()));
  return result;
}

void SnapshotCollector::AddFailingPodLogs(const ClusterPlan& plan, json::array& results,
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
  // The console takes at most kMaxSnapshotResults results.
  const size_t room = kMaxSnapshotResults > results.size() ? kMaxSnapshotResults - results.size() : 0;
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
    name.resize(std::min(name.size(), kMaxResultNameBytes));
    results.push_back(RunOne(name, argv, cancel));
  }
}

json::object SnapshotCollector::Collect(const ClusterPlan& plan, const std::atomic<bool>* cancel) {
  const WallTime started = clock_.Now();
  json::array results;
  for (const PlanCommand& command : plan.commands) {
    if (cancel != nullptr && *cancel) break;
    results.push_back(RunOne(command.name, command.argv, cancel));
  }
  AddFailingPodLogs(plan, results, cancel);
  FitIntoRecord(results);
  const double seconds =
      std::chrono::duration<double>(clock_.Now() - started).count();
  metrics_.Increment(kSnapshots);
  metrics_.Set(kSnapshotSeconds, seconds);
  metrics_.Set(kPlanCommands, static_cast<double>(plan.commands.size()));
  return json::object{{"kind", "cluster_snapshot"},
                      {"collected_at", FormatRfc3339(started)},
                      {"results", std::move(results)}};
}

void DeclareClusterMetrics(metrics::Registry& registry) {
  registry.DeclareCounter(kSnapshots, "Cluster snapshots collected and spooled");
  registry.DeclareGauge(kSnapshotSeconds, "How long the last snapshot took to collect");
  registry.DeclareGauge(kPlanCommands, "Commands in the current collection plan");
}

}  // namespace uplink::agent::cluster
