#include "console/api/kubectl_api.h"

#include <algorithm>
#include <random>

#include "common/files.h"
#include "common/gzip.h"
#include "common/text.h"
#include "console/api/api_objects.h"
#include "console/api/approvals.h"
#include "console/api/cluster_plan.h"
#include "console/api/json_fields.h"
#include "console/api/right_sizing.h"
#include "console/replies.h"
#include "kubectl/guard.h"
#include "protocol/agent_api.h"
#include "protocol/commands.h"
#include "protocol/plans.h"

namespace uplink::console {
namespace {

constexpr const char* kKubectlLateResultsTotal = "uplink_console_kubectl_late_results_total";
constexpr const char* kKubectlCommandsWaiting = "uplink_console_kubectl_commands_waiting";
constexpr const char* kKubectlPollsWaiting = "uplink_console_kubectl_polls_waiting";
constexpr const char* kKubectlPickupSeconds = "uplink_console_kubectl_pickup_seconds";
constexpr const char* kClusterSnapshotsStoredTotal =
    "uplink_console_cluster_snapshots_stored_total";

constexpr size_t kMaxArgs = 256;
constexpr size_t kMaxArgBytes = 4096;

// How long an idle poll is held: a whole number of seconds drawn evenly from the last fifth of
// the agent's `wait` (40-50 s for the default 50). Agents that polled together (every cluster
// reconnecting after a console restart) would otherwise be answered together and poll again
// together every `wait`, a burst of thousands of requests at once; drawn anew each time, their
// polls spread over the whole interval within a few rounds.
std::chrono::seconds PollHold(std::int64_t wait) {
  thread_local std::minstd_rand random{std::random_device{}()};
  std::uniform_int_distribution<std::int64_t> early(0, wait / 5);
  return std::chrono::seconds(wait - early(random));
}

// kubectl's own verbs: the only argv word of a refused command the audit log keeps, since
// anything else a user typed may be anything.
constexpr std::string_view kKubectlVerbs[] = {
    "annotate",  "api-resources", "api-versions", "apply",      "attach",   "auth",
    "autoscale", "certificate",   "cluster-info", "completion", "config",   "cordon",
    "cp",        "create",        "debug",        "delete",     "describe", "diff",
    "drain",     "edit",          "events",       "exec",       "explain",  "expose",
    "get",       "kustomize",     "label",        "logs",       "options",  "patch",
    "plugin",    "port-forward",  "proxy",        "replace",    "rollout",  "run",
    "scale",     "set",           "taint",        "top",        "uncordon", "version",
    "wait"};

// The first word after "kubectl" that is not a flag, when it is one of kubectl's verbs.
std::string_view AuditVerb(const std::vector<std::string>& argv) {
  if (argv.front() != "kubectl") return "";
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i].starts_with("-")) continue;
    for (std::string_view verb : kKubectlVerbs) {
      if (argv[i] == verb) return verb;
    }
    return "";
  }
  return "";
}

Result<std::vector<std::string>> ReadArgv(std::string_view body) {
  UPLINK_ASSIGN_OR_RETURN(json::object object, ReadJsonObject(body));
  FieldReader fields(object, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"argv"}));
  const json::value* argv = fields.Find("argv");
  if (!argv) {
    return InvalidArgumentError(
        "argv is required: the command as an array of strings, "
        "starting with \"kubectl\"");
  }
  if (!argv->is_array()) return InvalidArgumentError("argv must be an array of strings");
  const json::array& list = argv->get_array();
  if (list.empty() || list.size() > kMaxArgs) {
    return InvalidArgumentError("argv must hold 1 to " + std::to_string(kMaxArgs) + " strings");
  }
  std::vector<std::string> args;
  args.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    std::string item = "argv[" + std::to_string(i) + "]";
    if (!list[i].is_string()) return InvalidArgumentError(item + " must be a string");
    std::string_view arg = list[i].get_string();
    if (arg.size() > kMaxArgBytes) {
      return InvalidArgumentError(item + " is over " + std::to_string(kMaxArgBytes) + " bytes");
    }
    if (arg.find('\0') != std::string_view::npos) {
      return InvalidArgumentError(item + " must not contain NUL");
    }
    args.emplace_back(arg);
  }
  // Another program (helm, a shell) is not malformed: the guard refuses it as not read-only
  // kubectl, with the same text as every other refusal.
  return args;
}

}  // namespace

KubectlApi::KubectlApi(const ApiContext& context, CommandBroker& commands,
                       CommandOutcomes& outcomes, ApprovalsApi& approvals)
    : ApiArea(context), commands_(commands), outcomes_(outcomes), approvals_(approvals) {
  metrics_.DeclareCounter(kKubectlLateResultsTotal,
                          "Command results that arrived after the console gave the command up "
                          "(discarded).");
  metrics_.DeclareGauge(kKubectlCommandsWaiting,
                        "kubectl commands whose users wait: queued or taken by an agent.");
  metrics_.DeclareGauge(kKubectlPollsWaiting, "Agent polls held until a command is queued.");
  metrics_.DeclareCounter(kClusterSnapshotsStoredTotal,
                          "Cluster snapshots that became their connection's latest.");
}

void KubectlApi::Register(Routes& routes) {
  routes.AsyncUserRoute("POST", "/api/v1/connections/{id}/kubectl", Access::kAnyUser,
                        [this](const net::Request& request, const net::PathParams& params,
                               const RequestContext& caller, net::Reply reply) {
                          RunKubectl(params.at("id"), request, caller, std::move(reply));
                        });
  routes.UserRoute(
      "GET", "/api/v1/connections/{id}/namespaces", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return ShowNamespaces(params.at("id"), caller);
      });
  routes.UserRoute("PUT", "/api/v1/connections/{id}/namespaces", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return SetNamespaces(params.at("id"), request, caller);
                   });
  routes.UserRoute(
      "GET", "/api/v1/connections/{id}/right-sizing", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return ShowRightSizing(params.at("id"), caller);
      });
  routes.UserRoute(
      "GET", "/api/v1/connections/{id}/cluster", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return ShowClusterSnapshot(params.at("id"), caller);
      });
  // The cluster role's side (docs/protocol.md, "kubectl commands").
  routes.AsyncAgentRoute(
      "POST", std::string(protocol::kCommandPollPath),
      [this](const net::Request& request, const net::PathParams&, const Connection& connection,
             net::Reply reply) { PollCommands(request, connection, std::move(reply)); });
  routes.AsyncAgentRoute("POST", std::string(protocol::kCommandResultRoute),
                         [this](const net::Request& request, const net::PathParams& params,
                                const Connection& connection, net::Reply reply) {
                           reply(Reply(ReceiveCommandResult(params.at("id"), request, connection)));
                         });
}

std::string KubectlApi::Scrape() {
  CommandBroker::Stats stats = commands_.stats();
  metrics_.Set(kKubectlCommandsWaiting, static_cast<double>(stats.waiting_commands));
  metrics_.Set(kKubectlPollsWaiting, static_cast<double>(stats.waiting_polls));
  return commands_.pickup_latency().RenderText(
      kKubectlPickupSeconds, "Seconds from a kubectl command being queued to an agent taking it.");
}

void KubectlApi::CountSnapshots(const UploadOutcome& outcome) {
  if (outcome.snapshot_replaced) metrics_.Increment(kClusterSnapshotsStoredTotal);
}

void KubectlApi::RunKubectl(const std::string& id, const net::Request& request,
                            const RequestContext& caller, net::Reply reply) {
  auto connection = OperatedConnection(id, caller);
  if (!connection.ok()) return reply(Reply(connection.status()));
  auto argv = ReadArgv(request.body);
  if (!argv.ok()) return reply(Reply(argv.status()));
  std::string_view verb = AuditVerb(*argv);
  if (auto unavailable = UnavailableConnection(*connection, clock_.Now())) {
    return reply(KubectlRefused(*connection, caller, unavailable->code, verb, unavailable->message,
                                ErrorResponse(409, unavailable->code, unavailable->message)));
  }

  auto command = kubectl::CheckKubectlArgv(*argv);
  if (!command.ok()) {
    if (command.status().code() != StatusCode::kPermissionDenied) {
      return reply(Reply(command.status()));
    }
    const std::string& reason = command.status().message();
    return reply(KubectlRefused(*connection, caller, "refused", verb, reason,
                                ErrorResponse(403, "refused", kubectl::RefusalText(reason))));
  }
  auto scope = store_.GetNamespaceScope(connection->id);
  if (!scope.ok()) return reply(Reply(scope.status()));
  if (Status in_scope = kubectl::CheckNamespaceScope(*command, *scope); !in_scope.ok()) {
    if (in_scope.code() != StatusCode::kPermissionDenied) return reply(Reply(in_scope));
    std::string_view code = scope->has_value() ? "namespace_not_allowed" : "namespaces_not_chosen";
    std::string reason = in_scope.message();
    if (!scope->has_value()) {
      reason += "; for example: uplink connections namespaces " + connection->cluster_name +
                " --set NS1,NS2 (or --all)";
    }
    return reply(KubectlRefused(*connection, caller, code, command->verb, in_scope.message(),
                                ErrorResponse(403, code, kubectl::RefusalText(reason))));
  }

  // A command that matches one of the connection's approval rules waits for a decision.
  auto rules = store_.ListApprovalRules(connection->id);
  if (!rules.ok()) return reply(Reply(rules.status()));
  if (const ApprovalRule* rule = FirstMatchingRule(*rules, *command)) {
    return reply(approvals_.RequestApproval(*connection, caller, *argv, *rule));
  }

  auto submitted = commands_.Submit(
      connection->id, *argv,
      [this, connection = *connection, caller, argv = *argv, reply](CommandEnd end) {
        reply(KubectlEnded(connection, caller, argv, std::move(end)));
      });
  if (!submitted.ok()) {
    const std::string& message = submitted.status().message();
    return reply(KubectlRefused(*connection, caller, "too_many_commands", command->verb, message,
                                ErrorResponse(429, "too_many_commands", message)));
  }
}

net::Response KubectlApi::KubectlRefused(const Connection& connection, const RequestContext& caller,
                                         std::string_view outcome, std::string_view verb,
                                         std::string_view reason, net::Response response) {
  outcomes_.Count(outcome);
  // The verb and the reason only: the rest of argv is whatever the user typed.
  json::object detail{
      {"refusal", outcome}, {"verb", verb}, {"reason", OneLineExcerpt(reason, 500)}};
  AuditEvent event = CallerEvent(caller, clock_.Now(), "kubectl.run", "connection", connection.id,
                                 connection.owner_id, detail);
  event.outcome = "refused";
  RecordRefusal(event);
  return response;
}

net::Response KubectlApi::KubectlEnded(const Connection& connection, const RequestContext& caller,
                                       const std::vector<std::string>& argv, CommandEnd end) {
  CommandOutcome outcome = outcomes_.OutcomeOf(end);
  AuditEvent event =
      outcomes_.EndedEvent(CallerEvent(caller, clock_.Now(), "kubectl.run", "connection",
                                       connection.id, connection.owner_id),
                           end.id, argv, end, outcome);
  if (Status appended = store_.AppendAudit(event); !appended.ok()) {
    log_.Error("recording a kubectl command in the audit log failed",
               {{"connection_id", connection.id}, {"error", appended}});
  }
  if (outcome.http_status != 200) {
    return ErrorResponse(outcome.http_status, outcome.error_code, outcome.message);
  }
  CommandResult& result = *end.result;
  return JsonResponse(200, {{"id", end.id},
                            {"exit_code", result.exit_code},
                            {"stdout", std::move(result.stdout_text)},
                            {"stderr", std::move(result.stderr_text)},
                            {"duration_ms", result.duration_ms}});
}

Result<net::Response> KubectlApi::ShowNamespaces(const std::string& id,
                                                 const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(NamespaceScope scope, store_.GetNamespaceScope(connection.id));
  return JsonResponse(
      200, {{"connection_id", connection.id}, {"namespaces", NamespaceScopeJson(scope)}});
}

Result<net::Response> KubectlApi::SetNamespaces(const std::string& id, const net::Request& request,
                                                const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"namespaces"}));
  const json::value* value = fields.Find("namespaces");
  if (!value) {
    return InvalidArgumentError(
        "namespaces is required: a list of namespace names, or [\"*\"] for every namespace");
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<std::string> namespaces, ParseNamespaceList(*value));
  UPLINK_ASSIGN_OR_RETURN(NamespaceScope previous, store_.GetNamespaceScope(connection.id));
  NamespaceScope scope = namespaces;
  json::object detail{{"namespaces", NamespaceScopeJson(scope)},
                      {"previous_namespaces", NamespaceScopeJson(previous)}};
  UPLINK_RETURN_IF_ERROR(store_.SetNamespaceScope(
      connection.id, namespaces,
      CallerEvent(caller, clock_.Now(), "connection.namespaces", "connection", connection.id,
                  connection.owner_id, detail)));
  log_.Info("namespace scope set", {{"connection_id", connection.id},
                                    {"user_id", caller.user.id},
                                    {"namespaces", namespaces.size()}});
  return JsonResponse(
      200, {{"connection_id", connection.id}, {"namespaces", NamespaceScopeJson(scope)}});
}

namespace {

net::Response NoSnapshot() {
  return ErrorResponse(404, "no_snapshot",
                       "the cluster role has not sent a snapshot for this connection yet; it "
                       "sends one every 30 s once it runs (uplink-agent cluster)");
}

struct SnapshotResults {
  ClusterSnapshot snapshot;
  json::array results;  // as the agent sent them
};

// The connection's latest cluster snapshot with its results; nullopt before the first.
Result<std::optional<SnapshotResults>> LatestSnapshot(Store& store,
                                                      const std::string& connection_id) {
  UPLINK_ASSIGN_OR_RETURN(std::optional<ClusterSnapshot> snapshot,
                          store.GetClusterSnapshot(connection_id));
  if (!snapshot) return std::optional<SnapshotResults>();
  // Stored only after ParseClusterSnapshot accepted it.
  UPLINK_ASSIGN_OR_RETURN(
      json::value payload,
      ParseJson(snapshot->payload, JsonLimits{snapshot->payload.size() + 1, 64}));
  SnapshotResults latest{std::move(*snapshot), {}};
  if (json::value* results = payload.as_object().if_contains("results")) {
    latest.results = std::move(results->as_array());
  }
  return std::optional(std::move(latest));
}

}  // namespace

Result<net::Response> KubectlApi::ShowClusterSnapshot(const std::string& id,
                                                      const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(std::optional<SnapshotResults> latest,
                          LatestSnapshot(store_, connection.id));
  if (!latest) return NoSnapshot();
  const ClusterSnapshot& snapshot = latest->snapshot;
  return JsonResponse(200, {{"connection_id", connection.id},
                            {"stream", snapshot.stream},
                            {"collected_at", FormatRfc3339Millis(snapshot.collected_at)},
                            {"received_at", FormatRfc3339Millis(snapshot.received_at)},
                            {"results", std::move(latest->results)}});
}

Result<net::Response> KubectlApi::ShowRightSizing(const std::string& id,
                                                  const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(std::optional<SnapshotResults> latest,
                          LatestSnapshot(store_, connection.id));
  if (!latest) return NoSnapshot();
  std::vector<PodResources> pods;
  bool read_specs = false;
  for (const json::value& result : latest->results) {
    const json::object& object = result.as_object();
    const json::value* name = object.if_contains("name");
    const json::value* out = object.if_contains("stdout");
    if (!name || !name->is_string() || !out || !out->is_string()) continue;
    std::string_view text = name->get_string();
    if (text != kPodResourcesResult && !text.starts_with(std::string(kPodResourcesResult) + "/")) {
      continue;
    }
    read_specs = true;
    for (PodResources& pod : ParsePodResources(out->get_string())) pods.push_back(std::move(pod));
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<PodUsageSummary> usage,
                          store_.SummarizePodUsage(connection.id, clock_.Now() - kPodUsageWindow));
  json::object reply = RightSizingJson(pods, usage, RightSizingThresholds{});
  reply["connection_id"] = connection.id;
  reply["collected_at"] = FormatRfc3339Millis(latest->snapshot.collected_at);
  if (!read_specs) {
    reply["note"] =
        "the latest snapshot holds no pod requests and limits: namespaces are not chosen yet "
        "(uplink connections namespaces), or the agent predates pod right-sizing";
  }
  return JsonResponse(200, reply);
}

void KubectlApi::PollCommands(const net::Request& request, const Connection& connection,
                              net::Reply reply) {
  if (!request.body.empty() && !IsJsonContentType(request.headers.Get("Content-Type"))) {
    return reply(ErrorResponse(415, "unsupported_media_type",
                               "send the body as JSON with Content-Type: application/json"));
  }
  auto body = ReadJsonObject(request.body);
  if (!body.ok()) return reply(Reply(body.status()));
  auto poll = protocol::DecodeCommandPoll(*body);
  if (!poll.ok()) return reply(Reply(poll.status()));
  // Accepted when it arrives: an idle agent is held up to `wait` and polls again at once.
  presence_.Seen(
      connection.id,
      AgentIdentity{"cluster", poll->agent_instance,
                    protocol::AgentVersionFromUserAgent(request.headers.Get("User-Agent"))},
      clock_.Now());
  commands_.Poll(
      connection.id, poll->agent_instance, static_cast<size_t>(poll->max_commands),
      PollHold(poll->wait_seconds),
      [reply, expires_at = connection.expires_at](std::vector<PendingCommand> taken) {
        protocol::PollReply answer{.commands = {}, .expires_at = expires_at};
        for (PendingCommand& command : taken) {
          answer.commands.push_back(protocol::PolledCommand{
              std::move(command.id), std::move(command.argv), protocol::kCommandTimeoutSeconds});
        }
        reply(JsonResponse(200, protocol::EncodePollReply(answer)));
      });
}

Result<net::Response> KubectlApi::ReceiveCommandResult(const std::string& command_id,
                                                       const net::Request& request,
                                                       const Connection& connection) {
  if (!protocol::IsCommandId(command_id)) {
    return ErrorResponse(404, "unknown_command",
                         "there is no command with this id; drop the result");
  }
  CommandResult result;
  {
    std::string decompressed;
    auto decoded = AgentJsonBody(request, protocol::kMaxCommandResultBytes, decompressed);
    if (auto* refusal = std::get_if<net::Response>(&decoded)) return std::move(*refusal);
    const std::string_view body = std::get<std::string_view>(decoded);
    UPLINK_ASSIGN_OR_RETURN(json::value document,
                            ParseJson(body, JsonLimits{protocol::kMaxCommandResultBytes,
                                                       protocol::kMaxCommandResultDepth}));
    UPLINK_ASSIGN_OR_RETURN(result, protocol::DecodeCommandResult(document));
  }
  auto delivered = commands_.Deliver(connection.id, command_id, std::move(result));
  if (!delivered.ok()) {
    if (delivered.status().code() == StatusCode::kNotFound) {
      return ErrorResponse(404, "unknown_command", delivered.status().message());
    }
    return delivered.status();
  }
  presence_.Seen(connection.id, clock_.Now());
  if (*delivered == CommandBroker::Delivery::kDiscarded) {
    metrics_.Increment(kKubectlLateResultsTotal);
    log_.Info("late command result discarded",
              {{"connection_id", connection.id}, {"command_id", command_id}});
    return JsonResponse(200, {{"status", "discarded"}});
  }
  return JsonResponse(200, {{"status", "stored"}});
}

json::object KubectlApi::UploadPlan(const NamespaceScope& scope) {
  return protocol::EncodeClusterPlan(ClusterPlanFor(scope));
}

}  // namespace uplink::console
