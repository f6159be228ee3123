#include "console/api/approvals_api.h"

#include <algorithm>

#include "common/crypto.h"
#include "common/text.h"
#include "common/thread_name.h"
#include "console/api/approvals.h"
#include "console/api/json_fields.h"
#include "console/replies.h"
#include "kubectl/guard.h"
#include "protocol/agent_api.h"

namespace uplink::console {
namespace {

constexpr const char* kKubectlApprovalsTotal = "uplink_console_kubectl_approvals_total";

constexpr size_t kIdBytes = 8;
constexpr std::chrono::seconds kSweepInterval{5};
constexpr size_t kMaxReasonBytes = 500;
constexpr std::int64_t kMaxApprovalPage = 500;

// Which credential asked, so that it can never approve its own request.
std::string CredentialKey(const RequestContext& caller) {
  return std::string(caller.credential_kind == CredentialKind::kSession ? "session:"
                                                                        : "api_key:") +
         caller.credential_id;
}

}  // namespace

ApprovalsApi::ApprovalsApi(const ApiContext& context, CommandBroker& commands,
                           CommandOutcomes& outcomes)
    : ApiArea(context), commands_(commands), outcomes_(outcomes) {
  metrics_.DeclareCounter(kKubectlApprovalsTotal,
                          "kubectl commands sent to approval by a rule (requested) and how "
                          "people decided them (approved, rejected).");
}

ApprovalsApi::~ApprovalsApi() { Stop(); }

void ApprovalsApi::Register(Routes& routes) {
  routes.UserRoute(
      "GET", "/api/v1/connections/{id}/approval-rules", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return ListApprovalRules(params.at("id"), caller);
      });
  routes.UserRoute("POST", "/api/v1/connections/{id}/approval-rules", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return AddApprovalRule(params.at("id"), request, caller);
                   });
  routes.UserRoute(
      "DELETE", "/api/v1/connections/{id}/approval-rules/{rule}", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return RemoveApprovalRule(params.at("id"), params.at("rule"), caller);
      });
  routes.UserRoute(
      "GET", "/api/v1/connections/{id}/commands/{command}", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return ShowCommand(params.at("id"), params.at("command"), caller);
      });
  routes.UserRoute("GET", "/api/v1/approvals", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) { return ListApprovals(request, caller); });
  routes.UserRoute("POST", "/api/v1/approvals/{command}/approve", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return DecideApproval(params.at("command"), request, caller, true);
                   });
  routes.UserRoute("POST", "/api/v1/approvals/{command}/reject", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return DecideApproval(params.at("command"), request, caller, false);
                   });
}

void ApprovalsApi::Start() {
  // A console that stopped took its queued commands along: what was approved but never
  // answered ends now, so that nothing stale runs later.
  EndApprovals(/*abandon_approved=*/true);
  sweeper_ = std::thread([this] {
    NameThisThread("approvals");
    SweeperLoop();
  });
}

void ApprovalsApi::Stop() {
  {
    std::lock_guard lock(sweeper_mutex_);
    sweeper_stopping_ = true;
  }
  sweeper_wake_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

void ApprovalsApi::SweeperLoop() {
  std::unique_lock lock(sweeper_mutex_);
  while (!sweeper_wake_.wait_for(lock, kSweepInterval, [&] { return sweeper_stopping_; })) {
    lock.unlock();
    EndDueApprovals();
    lock.lock();
  }
}

void ApprovalsApi::EndDueApprovals() { EndApprovals(/*abandon_approved=*/false); }

void ApprovalsApi::EndApprovals(bool abandon_approved) {
  const WallTime now = clock_.Now();
  AuditEvent expired{.at = now,
                     .actor_type = "system",
                     .action = "kubectl.approval_expired",
                     .outcome = "ok"};
  AuditEvent abandoned = expired;
  abandoned.action = "kubectl.run";
  abandoned.outcome = "refused";
  auto ended = store_.EndApprovals(now, abandon_approved, expired, abandoned);
  if (!ended.ok()) {
    log_.Warn("ending expired approvals failed", {{"error", ended.status()}});
  } else if (*ended > 0) {
    log_.Info("approvals ended", {{"count", *ended}, {"at_start", abandon_approved}});
  }
}

net::Response ApprovalsApi::RequestApproval(const Connection& connection,
                                            const RequestContext& caller,
                                            const std::vector<std::string>& argv,
                                            const ApprovalRule& rule) {
  const WallTime now = clock_.Now();
  CommandApproval approval;
  approval.id = protocol::NewCommandId();
  approval.connection_id = connection.id;
  approval.owner_id = connection.owner_id;
  approval.argv = argv;
  approval.rule = rule;
  approval.requested_by = caller.user.id;
  approval.requested_by_label = caller.user.email;
  approval.requested_credential = CredentialKey(caller);
  approval.requested_at = now;
  approval.expires_at = now + options_.approval_lifetime;
  json::object detail{{"command_id", approval.id},
                      {"argv", ArgvJson(argv)},
                      {"rule", ApprovalJson(approval, now, false).at("rule")},
                      {"expires_at", FormatRfc3339(approval.expires_at)}};
  Status created = store_.CreateApproval(
      approval, options_.max_pending_approvals,
      CallerEvent(caller, now, "kubectl.approval_requested", "connection", connection.id,
                  connection.owner_id, detail));
  if (created.code() == StatusCode::kResourceExhausted) {
    outcomes_.Count("too_many_commands");
    return ErrorResponse(429, "too_many_commands", created.message());
  }
  if (!created.ok()) return Reply(created);
  outcomes_.Count("waiting_for_approval");
  metrics_.Increment(kKubectlApprovalsTotal, {{"decision", "requested"}});
  log_.Info("kubectl command waits for approval", {{"connection_id", connection.id},
                                                   {"command_id", approval.id},
                                                   {"rule_id", rule.id}});
  net::Response response = JsonResponse(202, ApprovalJson(approval, now, false));
  response.headers.Set("Location",
                       "/api/v1/connections/" + connection.id + "/commands/" + approval.id);
  return response;
}

Result<net::Response> ApprovalsApi::ListApprovalRules(const std::string& id,
                                                      const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(std::vector<ApprovalRule> rules, store_.ListApprovalRules(connection.id));
  json::array list;
  for (const ApprovalRule& rule : rules) list.push_back(ApprovalRuleJson(rule));
  return JsonResponse(200, {{"connection_id", connection.id}, {"rules", std::move(list)}});
}

Result<net::Response> ApprovalsApi::AddApprovalRule(const std::string& id,
                                                    const net::Request& request,
                                                    const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  UPLINK_ASSIGN_OR_RETURN(ApprovalRule rule, ParseApprovalRule(body));
  rule.id = HexEncode(RandomBytes(kIdBytes));
  rule.connection_id = connection.id;
  rule.created_at = clock_.Now();
  rule.created_by = caller.user.id;
  Status added = store_.AddApprovalRule(
      rule, CallerEvent(caller, rule.created_at, "connection.approval_rule_add", "connection",
                        connection.id, connection.owner_id, ApprovalRuleJson(rule)));
  if (added.code() == StatusCode::kAlreadyExists) return ConflictError(added.message());
  if (added.code() == StatusCode::kResourceExhausted) {
    return FailedPreconditionError(added.message());
  }
  UPLINK_RETURN_IF_ERROR(added);
  log_.Info("approval rule added", {{"connection_id", connection.id}, {"rule_id", rule.id}});
  return JsonResponse(201, ApprovalRuleJson(rule));
}

Result<net::Response> ApprovalsApi::RemoveApprovalRule(const std::string& id,
                                                       const std::string& rule_id,
                                                       const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(std::vector<ApprovalRule> rules, store_.ListApprovalRules(connection.id));
  auto rule = std::find_if(rules.begin(), rules.end(),
                           [&](const ApprovalRule& r) { return r.id == rule_id; });
  if (rule == rules.end()) {
    return NotFoundError("this connection has no approval rule with this id; list them with "
                         "GET /api/v1/connections/" +
                         connection.id + "/approval-rules");
  }
  UPLINK_RETURN_IF_ERROR(store_.RemoveApprovalRule(
      connection.id, rule->id,
      CallerEvent(caller, clock_.Now(), "connection.approval_rule_remove", "connection",
                  connection.id, connection.owner_id, ApprovalRuleJson(*rule))));
  log_.Info("approval rule removed", {{"connection_id", connection.id}, {"rule_id", rule->id}});
  return JsonResponse(200, ApprovalRuleJson(*rule));
}

Result<net::Response> ApprovalsApi::ListApprovals(const net::Request& request,
                                                  const RequestContext& caller) {
  ApprovalQuery query;
  for (const auto& [key, value] : request.QueryParams()) {
    if (key == "status") {
      if (value != "waiting_for_approval" && value != "all") {
        return InvalidArgumentError("status must be waiting_for_approval (the default) or all");
      }
      query.pending_only = value != "all";
    } else if (key == "connection_id") {
      query.connection_id = value;
    } else if (key == "limit") {
      UPLINK_ASSIGN_OR_RETURN(std::int64_t limit,
                              ParseQueryInt("limit", value, 1, kMaxApprovalPage));
      query.limit = static_cast<int>(limit);
    } else {
      return InvalidArgumentError("unknown query parameter \"" + OneLineExcerpt(key, 64) +
                                  "\"; this call takes status, connection_id and limit");
    }
  }
  // A member decides the commands on their own connections; an admin every one.
  if (!caller.is_admin()) query.owner_id = caller.user.id;
  UPLINK_ASSIGN_OR_RETURN(std::vector<CommandApproval> approvals, store_.ListApprovals(query));
  const WallTime now = clock_.Now();
  json::array list;
  for (const CommandApproval& approval : approvals) {
    // A pending one past its expiry is shown as expired until the sweep records it.
    if (query.pending_only && approval.expires_at <= now) continue;
    json::object item = ApprovalJson(approval, now, false);
    // The credential that asked cannot approve (below): a page can say so before a click.
    item["asked_by_you"] = approval.requested_credential == CredentialKey(caller);
    list.push_back(std::move(item));
  }
  return JsonResponse(200, {{"approvals", std::move(list)}});
}

Result<net::Response> ApprovalsApi::ShowCommand(const std::string& id,
                                                const std::string& command_id,
                                                const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
  auto approval = store_.GetApproval(command_id);
  if ((!approval.ok() && approval.status().code() == StatusCode::kNotFound) ||
      (approval.ok() && approval->connection_id != connection.id)) {
    return NotFoundError(
        "this connection has no command with this id waiting for approval or approved in the "
        "last 24 hours; a command that ran at once was answered by its POST");
  }
  UPLINK_RETURN_IF_ERROR(approval.status());
  return JsonResponse(200, ApprovalJson(*approval, clock_.Now(), true));
}

Result<net::Response> ApprovalsApi::DecideApproval(const std::string& command_id,
                                                   const net::Request& request,
                                                   const RequestContext& caller, bool approve) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"reason"}));
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> reason,
                          fields.String("reason", kMaxReasonBytes));
  if (reason && std::any_of(reason->begin(), reason->end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
      })) {
    return InvalidArgumentError("reason must be one line of text, without control characters");
  }
  Status unknown = NotFoundError("there is no command with this id waiting for your approval; "
                                 "list them with GET /api/v1/approvals");
  auto found = store_.GetApproval(command_id);
  if (!found.ok()) return found.status().code() == StatusCode::kNotFound ? unknown : found.status();
  // Only the owner of the connection or an admin sees it; for anyone else it does not exist.
  auto connection = OperatedConnection(found->connection_id, caller);
  if (!connection.ok()) {
    return connection.status().code() == StatusCode::kNotFound ? unknown : connection.status();
  }
  if (approve && found->requested_credential == CredentialKey(caller)) {
    return ErrorResponse(
        403, "own_request",
        "the credential that asked for this command cannot approve it, so that a script "
        "cannot approve what it asked for: approve it in the web console, as another user, "
        "or with another credential");
  }
  const WallTime now = clock_.Now();
  if (approve) {
    // Nothing runs that would be refused now: the scope may have narrowed, the connection
    // may have been revoked since the request. It stays waiting; reject it or let it expire.
    if (auto unavailable = UnavailableConnection(*connection, now)) {
      return ErrorResponse(409, "connection_unavailable",
                           std::string(unavailable->message) + "; reject the command instead");
    }
    auto command = kubectl::CheckKubectlArgv(found->argv);
    if (!command.ok()) {
      return ErrorResponse(403, "refused", kubectl::RefusalText(command.status().message()));
    }
    UPLINK_ASSIGN_OR_RETURN(NamespaceScope scope, store_.GetNamespaceScope(connection->id));
    if (Status in_scope = kubectl::CheckNamespaceScope(*command, scope); !in_scope.ok()) {
      return ErrorResponse(403, "namespace_not_allowed",
                           kubectl::RefusalText(in_scope.message() +
                                                " (the scope changed since the request); reject "
                                                "the command instead"));
    }
  }
  json::object detail{{"command_id", found->id},
                      {"argv", ArgvJson(found->argv)},
                      {"requested_by", found->requested_by_label},
                      {"requested_at", FormatRfc3339(found->requested_at)}};
  if (reason) detail["reason"] = *reason;
  auto decided = store_.DecideApproval(
      found->id, approve, reason.value_or(""),
      CallerEvent(caller, now, approve ? "kubectl.approve" : "kubectl.reject", "connection",
                  connection->id, connection->owner_id, detail));
  if (!decided.ok() && decided.status().code() == StatusCode::kFailedPrecondition) {
    return ErrorResponse(409, "not_waiting", decided.status().message());
  }
  UPLINK_RETURN_IF_ERROR(decided.status());
  metrics_.Increment(kKubectlApprovalsTotal, {{"decision", approve ? "approved" : "rejected"}});
  log_.Info(approve ? "kubectl command approved" : "kubectl command rejected",
            {{"connection_id", connection->id},
             {"command_id", found->id},
             {"user_id", caller.user.id}});
  if (approve) RunApproved(*connection, *decided);
  // What the approval is now: the command may have failed to queue.
  auto current = store_.GetApproval(found->id);
  UPLINK_RETURN_IF_ERROR(current.status());
  return JsonResponse(200, ApprovalJson(*current, clock_.Now(), false));
}

void ApprovalsApi::RunApproved(const Connection& connection, const CommandApproval& approval) {
  // The run is the requester's, as a command that needed no approval would be.
  AuditEvent run{.actor_type = "user",
                 .actor_id = approval.requested_by,
                 .actor_label = approval.requested_by_label,
                 .credential = approval.requested_credential.substr(
                     0, approval.requested_credential.find(':')),
                 .action = "kubectl.run",
                 .target_type = "connection",
                 .target_id = connection.id,
                 .owner_id = connection.owner_id,
                 .outcome = "ok"};
  auto record = [this, id = approval.id](const ApprovalResult& result, const AuditEvent& event) {
    if (Status finished = store_.FinishApproval(id, result, event); !finished.ok()) {
      log_.Error("recording an approved command's end failed",
                 {{"command_id", id}, {"error", finished}});
    }
  };
  auto queued =
      commands_.Submit(connection.id, approval.argv,
                       [this, run, record, id = approval.id, argv = approval.argv](CommandEnd end) {
                         CommandOutcome outcome = outcomes_.OutcomeOf(end);
                         AuditEvent event = run;
                         event.at = clock_.Now();
                         event = outcomes_.EndedEvent(std::move(event), id, argv, end, outcome);
                         ApprovalResult result;
                         if (outcome.http_status == 200) {
                           result.exit_code = end.result->exit_code;
                           result.stdout_text = std::move(end.result->stdout_text);
                           result.stderr_text = std::move(end.result->stderr_text);
                         } else {
                           result.error_code = outcome.outcome;
                           result.error_message = outcome.message;
                         }
                         if (end.result) result.duration_ms = end.result->duration_ms;
                         record(result, event);
                       });
  if (!queued.ok()) {
    // The connection's queue is full: the approval ends as failed rather than waiting on.
    outcomes_.Count("too_many_commands");
    AuditEvent event = run;
    event.at = clock_.Now();
    event.outcome = "refused";
    event.detail = ToJson(json::object{{"command_id", approval.id},
                                       {"argv", ArgvJson(approval.argv)},
                                       {"error", "too_many_commands"}});
    record(ApprovalResult{.error_code = "too_many_commands", .error_message = queued.status().message()},
           event);
  }
}

}  // namespace uplink::console
