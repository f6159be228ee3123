#include "console/api/workspace_agent_api.h"

#include "console/auth/credentials.h"
#include "console/replies.h"
#include "protocol/agent_api.h"
#include "protocol/credentials.h"
#include "protocol/workspace.h"

namespace uplink::console {
namespace {

constexpr std::string_view kCredentialKind = "execution_credential";

// An event by the controller of `offer`, known by its credential's `prefix`.
AuditEvent ControllerEvent(const Offer& offer, std::string_view prefix,
                           const std::string& source_address, WallTime at, std::string action,
                           std::string outcome) {
  AuditEvent event;
  event.at = at;
  event.actor_type = "agent";
  event.actor_id = offer.connection_id;
  event.actor_label = std::string(prefix);
  event.credential = std::string(kCredentialKind);
  event.action = std::move(action);
  event.owner_id = offer.owner_id;
  event.source_address = source_address;
  event.outcome = std::move(outcome);
  return event;
}

}  // namespace

WorkspaceAgentApi::WorkspaceAgentApi(const ApiContext& context, WorkspaceSignals& signals,
                                     ReservationsApi& reservations)
    : ApiArea(context), signals_(signals), reservations_(reservations) {}

void WorkspaceAgentApi::Register(Routes& routes) {
  routes.AsyncRoute("POST", std::string(protocol::kWorkspaceSyncPath),
                    [this](const net::Request& request, const net::PathParams&,
                           net::Reply reply) { Sync(request, std::move(reply)); });
  routes.Route("POST", std::string(protocol::kWorkspaceOutputRoute),
               [this](const net::Request& request, const net::PathParams& params) {
                 return Reply(Output(request, params.at("id")));
               });
}

net::Response WorkspaceAgentApi::Refuse(const net::Request& request, const Offer* matched,
                                        std::string_view lookup_prefix, std::string_view reason,
                                        const std::string& message) {
  const bool owner_refused = reason == "owner_deactivated";
  const bool is_failure = reason != "missing_token" && !owner_refused;
  if (auto limited = guard_.Refused({kCredentialKind, reason, request.remote_address,
                                     lookup_prefix, "", is_failure, matched != nullptr})) {
    return std::move(*limited);
  }
  if (matched) {
    AuditEvent event = ControllerEvent(*matched, lookup_prefix, request.remote_address,
                                       clock_.Now(), "offer.execution_refused", "refused");
    event.target_type = "offer";
    event.target_id = matched->id;
    event.detail = ToJson(json::object{{"reason", reason}});
    RecordRefusal(event);
  }
  if (owner_refused) return ErrorResponse(403, reason, message);
  return UnauthorizedResponse(reason, message);
}

std::variant<WorkspaceAgentApi::Caller, net::Response> WorkspaceAgentApi::Authenticate(
    const net::Request& request) {
  if (auto limited = guard_.CheckAddress(request.remote_address)) return std::move(*limited);
  std::optional<Secret> token = BearerToken(request);
  if (!token) {
    return Refuse(request, nullptr, "", "missing_token",
                  "send the offer's execution credential as \"Authorization: Bearer exe_...\"; "
                  "check that the controller's credential file is mounted");
  }
  const std::string invalid =
      "the credential is no offer's execution credential; create or rotate it on the offer "
      "(uplink offers execution) and put it in the controller's Secret";
  std::optional<std::string> prefix = LookupPrefix(*token, protocol::kExecutionCredentialPrefix);
  if (!prefix) return Refuse(request, nullptr, "", "invalid_token", invalid);
  auto candidates = store_.FindExecutionCredentialsByPrefix(*prefix);
  if (!candidates.ok()) return ErrorResponse(candidates.status());
  const ExecutionCredential* credential = nullptr;
  for (const ExecutionCredential& candidate : *candidates) {
    if (MatchesHash(*token, candidate.token_hash)) credential = &candidate;
  }
  if (credential == nullptr) return Refuse(request, nullptr, *prefix, "invalid_token", invalid);
  auto offer = store_.GetOffer(credential->offer_id);
  if (!offer.ok()) return ErrorResponse(offer.status());
  if (credential->revoked_at) {
    return Refuse(request, &*offer, *prefix, "revoked",
                  "this execution credential was revoked at " +
                      FormatRfc3339(*credential->revoked_at) +
                      "; put the offer's current credential in the controller's Secret");
  }
  auto owner = store_.GetUser(offer->owner_id);
  if (!owner.ok()) return ErrorResponse(owner.status());
  if (owner->deactivated_at) {
    return Refuse(request, &*offer, *prefix, "owner_deactivated",
                  "the owner of this offer was deactivated; an admin must reactivate them "
                  "before its workspaces can be managed");
  }
  // The cluster's identity is required: execution is bound to the cluster that was reviewed.
  std::optional<std::string_view> uid = request.headers.Get(protocol::kClusterUidHeader);
  if (!uid || !protocol::IsClusterUid(*uid)) {
    return ErrorResponse(400, "invalid_request",
                         std::string(protocol::kClusterUidHeader) +
                             " is required on workspace calls: the kube-system namespace's "
                             "metadata.uid, 1-128 printable ASCII characters without spaces");
  }
  auto connection = store_.GetConnection(offer->connection_id);
  if (!connection.ok()) return ErrorResponse(connection.status());
  if (connection->cluster_uid != *uid) {
    AuditEvent audit = ControllerEvent(*offer, *prefix, request.remote_address, clock_.Now(),
                                       "connection.bind", "ok");
    audit.target_type = "connection";
    audit.target_id = connection->id;
    audit.detail = ToJson(json::object{{"call", "workspace"}});
    Status bound = store_.BindExecutionCluster(offer->id, credential->token_hash,
                                               std::string(*uid), audit);
    if (bound.code() == StatusCode::kConflict) {
      log_.Warn("security: workspace call from another cluster refused",
                {{"event", "cluster_mismatch"},
                 {"offer_id", offer->id},
                 {"remote_address", request.remote_address}});
      return ErrorResponse(409, "cluster_mismatch",
                           "this offer's execution is bound to another cluster (a different "
                           "kube-system UID); install the controller in the reviewed cluster");
    }
    if (bound.code() == StatusCode::kUnauthenticated) {
      return UnauthorizedResponse("invalid_token", bound.message());
    }
    if (!bound.ok()) return ErrorResponse(bound);
  }
  return Caller{std::move(*offer), credential->token_hash};
}

Result<net::Response> WorkspaceAgentApi::SyncReply(const std::string& offer_id,
                                                   std::vector<std::string> acknowledged) {
  UPLINK_ASSIGN_OR_RETURN(Offer offer, store_.GetOffer(offer_id));
  UPLINK_ASSIGN_OR_RETURN(WorkspaceWork work,
                          store_.ReadWorkspaceWork(offer_id, protocol::kMaxSyncCommands));
  protocol::WorkspaceSyncReply reply;
  reply.acknowledged = std::move(acknowledged);
  reply.accepting = offer.execution_enabled && offer.state == OfferState::kQualified;
  reply.reservations = std::move(work.reservations);
  reply.commands = std::move(work.commands);
  return JsonResponse(200, protocol::EncodeWorkspaceSyncReply(reply));
}

void WorkspaceAgentApi::Sync(const net::Request& request, net::Reply reply) {
  auto authenticated = Authenticate(request);
  if (auto* refusal = std::get_if<net::Response>(&authenticated)) return reply(std::move(*refusal));
  const Caller& caller = std::get<Caller>(authenticated);
  auto answer = [&]() -> std::optional<Result<net::Response>> {
    std::string decompressed;
    auto decoded = AgentJsonBody(request, protocol::kMaxSyncRequestBytes, decompressed);
    if (auto* refusal = std::get_if<net::Response>(&decoded)) return std::move(*refusal);
    auto document = ParseJson(std::get<std::string_view>(decoded),
                              JsonLimits{protocol::kMaxSyncRequestBytes,
                                         protocol::kMaxWorkspaceBodyDepth});
    if (!document.ok()) return document.status();
    auto sync = protocol::DecodeWorkspaceSync(*document);
    if (!sync.ok()) return sync.status();
    const WallTime now = clock_.Now();
    presence_.Seen(caller.offer.connection_id,
                   AgentIdentity{protocol::kWorkspaceRole, sync->instance, sync->version}, now);
    reservations_.ExpireOverdue();
    const std::string key = "offer:" + caller.offer.id;
    const std::uint64_t generation = signals_.Generation(key);
    AuditEvent audit = ControllerEvent(caller.offer, sync->instance, request.remote_address, now,
                                       "", "ok");
    auto acknowledged = store_.ApplyWorkspaceSync(caller.offer.id, *sync, now, audit);
    if (!acknowledged.ok()) return acknowledged.status();
    // Level-triggered: a sync that reported nothing may wait for something to do.
    if (sync->wait_seconds == 0 || !sync->events.empty()) {
      return SyncReply(caller.offer.id, std::move(*acknowledged));
    }
    signals_.Wait(key, generation, clock_.SteadyNow() + std::chrono::seconds(sync->wait_seconds),
                  [this, offer_id = caller.offer.id, reply] {
                    reply(Reply(SyncReply(offer_id, {})));
                  });
    return std::nullopt;
  }();
  if (answer) reply(Reply(std::move(*answer)));
}

Result<net::Response> WorkspaceAgentApi::Output(const net::Request& request,
                                                const std::string& command_id) {
  auto authenticated = Authenticate(request);
  if (auto* refusal = std::get_if<net::Response>(&authenticated)) return std::move(*refusal);
  const Caller& caller = std::get<Caller>(authenticated);
  Status unknown = NotFoundError("this offer has no command " +
                                 std::string(protocol::IsWorkspaceCommandId(command_id)
                                                 ? command_id
                                                 : std::string("with that id")));
  if (!protocol::IsWorkspaceCommandId(command_id)) return unknown;
  std::string decompressed;
  auto decoded = AgentJsonBody(request, protocol::kMaxOutputRequestBytes, decompressed);
  if (auto* refusal = std::get_if<net::Response>(&decoded)) return std::move(*refusal);
  UPLINK_ASSIGN_OR_RETURN(json::value document,
                          ParseJson(std::get<std::string_view>(decoded),
                                    JsonLimits{protocol::kMaxOutputRequestBytes,
                                               protocol::kMaxWorkspaceBodyDepth}));
  UPLINK_ASSIGN_OR_RETURN(protocol::WorkspaceOutput output,
                          protocol::DecodeWorkspaceOutput(document));
  const WallTime now = clock_.Now();
  auto ack = store_.AppendCommandOutput(caller.offer.id, command_id, output, now);
  if (!ack.ok()) return ack.status().code() == StatusCode::kNotFound ? unknown : ack.status();
  presence_.Seen(caller.offer.connection_id, now);
  if (ack->gap) return JsonResponse(409, protocol::EncodeOutputGap(ack->have));
  signals_.Notify("command:" + command_id);
  return JsonResponse(200, protocol::EncodeWorkspaceOutputReply({ack->have, ack->final}));
}

}  // namespace uplink::console
