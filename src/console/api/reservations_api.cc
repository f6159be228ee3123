#include "console/api/reservations_api.h"

#include <algorithm>

#include "common/text.h"
#include "console/api/json_fields.h"
#include "console/replies.h"
#include "protocol/ssh_public_key.h"
#include "protocol/workspace.h"

namespace uplink::console {
namespace {

constexpr std::int64_t kMinDurationSeconds = 60;
constexpr std::int64_t kDefaultCommandTimeoutSeconds = 300;
constexpr std::int64_t kMaxOutputWaitSeconds = 55;
// What one GET of a command returns of its output.
constexpr size_t kMaxOutputPage = 1 << 20;

json::value OptionalTime(const std::optional<WallTime>& at) {
  return at ? json::value(FormatRfc3339(*at)) : json::value(nullptr);
}

// The full view, for the owner and admins.
json::object ReservationJson(const Reservation& r, WallTime now) {
  json::array transitions;
  for (const ReservationTransition& t : r.transitions) {
    transitions.push_back(json::object{{"state", t.state},
                                       {"reason", t.reason},
                                       {"source", t.source},
                                       {"at", FormatRfc3339(t.at)}});
  }
  const bool active = IsActiveReservationState(r.state);
  return json::object{
      {"id", r.id},
      {"offer_id", r.offer_id},
      {"owner", r.owner_label},
      {"state", r.state},
      {"gpus", r.gpus},
      {"node", r.node},
      {"pod", r.pod},
      {"created_at", FormatRfc3339(r.created_at)},
      {"expires_at", FormatRfc3339(r.expires_at)},
      {"ended_at", OptionalTime(r.ended_at)},
      {"seconds_left",
       active ? std::max<std::int64_t>(0, ToUnixSeconds(r.expires_at) - ToUnixSeconds(now)) : 0},
      {"cpu_millis", r.cpu_millis},
      {"memory_bytes", r.memory_bytes},
      {"ephemeral_storage_bytes", r.ephemeral_storage_bytes},
      {"transfer", json::object{{"budget_bytes", r.transfer_budget_bytes},
                                {"used_bytes", r.transfer_used_bytes}}},
      {"transitions", std::move(transitions)}};
}

json::object SshGrantJson(const SshGrant& g, WallTime now) {
  return json::object{{"id", g.id},
                      {"reservation_id", g.reservation_id},
                      {"key_type", g.key_type},
                      {"public_key", g.public_key},
                      {"fingerprint", g.fingerprint},
                      {"comment", g.comment},
                      {"state", g.revoked_at ? "revoked" : g.LiveAt(now) ? "active" : "expired"},
                      {"created_at", FormatRfc3339(g.created_at)},
                      {"expires_at", FormatRfc3339(g.expires_at)},
                      {"revoked_at", OptionalTime(g.revoked_at)}};
}

// What the supplier sees of a reservation on their offer: its usage.
json::object UsageJson(const Reservation& r) {
  return json::object{{"id", r.id},
                      {"offer_id", r.offer_id},
                      {"state", r.state},
                      {"gpus", r.gpus},
                      {"node", r.node},
                      {"created_at", FormatRfc3339(r.created_at)},
                      {"expires_at", FormatRfc3339(r.expires_at)},
                      {"ended_at", OptionalTime(r.ended_at)},
                      {"usage_only", true}};
}

// `text` without a UTF-8 sequence cut short at its end (the rest comes with the next read).
std::string_view CompleteUtf8Prefix(std::string_view text) {
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto byte = static_cast<unsigned char>(text[text.size() - back]);
    if (byte < 0x80) break;
    if (byte >= 0xC0) {
      const size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2;
      return length > back ? text.substr(0, text.size() - back) : text;
    }
  }
  return text;
}

// Overflow-safe `per_gpu` × `gpus`, or InvalidArgument.
Result<std::int64_t> Total(std::int64_t per_gpu, std::int64_t gpus, std::int64_t max,
                           std::string_view what) {
  if (per_gpu > 0 && gpus > max / per_gpu) {
    return InvalidArgumentError(std::string(what) + " for that many GPUs is beyond what a pod "
                                "can request; ask for fewer");
  }
  return per_gpu * gpus;
}

}  // namespace

ReservationsApi::ReservationsApi(const ApiContext& context, WorkspaceSignals& signals,
                                 SshRelay& ssh)
    : ApiArea(context), signals_(signals), ssh_(ssh) {}

void ReservationsApi::Register(Routes& routes) {
  routes.UserRoute("POST", "/api/v1/reservations", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) {
                     return CreateReservation(request, caller);
                   });
  routes.UserRoute("GET", "/api/v1/reservations", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) {
                     return ListReservations(request, caller);
                   });
  routes.UserRoute("GET", "/api/v1/reservations/{id}", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ShowReservation(params.at("id"), caller);
                   });
  routes.UserRoute("POST", "/api/v1/reservations/{id}/stop", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return StopReservation(params.at("id"), request, caller);
                   });
  routes.UserRoute("POST", "/api/v1/reservations/{id}/extend", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ExtendReservation(params.at("id"), request, caller);
                   });
  routes.UserRoute("POST", "/api/v1/reservations/{id}/commands", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return CreateCommand(params.at("id"), request, caller);
                   });
  routes.UserRoute("GET", "/api/v1/reservations/{id}/commands", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ListCommands(params.at("id"), caller);
                   });
  routes.UserRoute("POST", "/api/v1/reservations/{id}/ssh-grants", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return CreateSshGrant(params.at("id"), request, caller);
                   });
  routes.UserRoute("GET", "/api/v1/reservations/{id}/ssh-grants", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ListSshGrants(params.at("id"), caller);
                   });
  routes.UserRoute("DELETE", "/api/v1/reservations/{id}/ssh-grants/{grant_id}", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams& params,
                          const RequestContext& caller) {
                     return RevokeSshGrant(params.at("id"), params.at("grant_id"), caller);
                   });
  routes.AsyncUserRoute(
      "GET", "/api/v1/reservations/{id}/commands/{command_id}", Access::kAnyUser,
      [this](const net::Request& request, const net::PathParams& params,
             const RequestContext& caller, net::Reply reply) {
        ShowCommand(params.at("id"), params.at("command_id"), request, caller, std::move(reply));
      });
}

void ReservationsApi::ExpireOverdue() {
  AuditEvent audit;
  audit.at = clock_.Now();
  audit.actor_type = "system";
  audit.outcome = "ok";
  auto ended = store_.ExpireOverdueReservations(audit.at, options_.reservation_expiry_grace, audit);
  if (!ended.ok()) {
    log_.Warn("expiring overdue reservations failed", {{"error", ended.status()}});
  } else if (*ended > 0) {
    log_.Info("overdue reservations expired", {{"count", *ended}});
  }
}

Result<Reservation> ReservationsApi::OwnedReservation(const std::string& id,
                                                      const RequestContext& caller) {
  Status not_found = NotFoundError(
      "you have no reservation with this id; list yours with GET /api/v1/reservations");
  if (!protocol::IsReservationId(id)) return not_found;
  auto reservation = store_.GetReservation(id);
  if (!reservation.ok()) {
    return reservation.status().code() == StatusCode::kNotFound ? not_found
                                                                : reservation.status();
  }
  if (reservation->owner_id != caller.user.id && !caller.is_admin()) return not_found;
  return reservation;
}

Result<net::Response> ReservationsApi::CreateReservation(const net::Request& request,
                                                         const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"offer_id", "gpus", "duration_seconds"}));
  UPLINK_ASSIGN_OR_RETURN(std::string offer_id, fields.RequiredString("offer_id", 64));
  auto offer = IsOfferId(offer_id) ? store_.GetOffer(offer_id)
                                   : Result<Offer>(NotFoundError("not an offer id"));
  if (!offer.ok()) {
    if (offer.status().code() != StatusCode::kNotFound) return offer.status();
    return NotFoundError("there is no offer " + OneLineExcerpt(offer_id, 64) +
                         "; list what can be reserved with GET /api/v1/offers?state=qualified");
  }
  UPLINK_ASSIGN_OR_RETURN(std::int64_t gpus, fields.RequiredInt("gpus", 1, offer->gpus));
  UPLINK_ASSIGN_OR_RETURN(
      std::int64_t duration,
      fields.RequiredInt("duration_seconds", kMinDurationSeconds, offer->max_lifetime_seconds));
  const WallTime now = clock_.Now();
  const WallTime expires_at = now + std::chrono::seconds(duration);
  if (offer->availability.from && now < *offer->availability.from) {
    return FailedPreconditionError("offer " + offer->id + " is available from " +
                                   FormatRfc3339(*offer->availability.from) + "; reserve then");
  }
  if (offer->availability.until && expires_at > *offer->availability.until) {
    return FailedPreconditionError("offer " + offer->id + " is available until " +
                                   FormatRfc3339(*offer->availability.until) +
                                   "; ask for a duration that ends by then");
  }
  ExpireOverdue();

  // Where it may go: approved nodes the inventory reports ready and schedulable.
  std::vector<PlacementCandidate> candidates;
  if (offer->review) {
    UPLINK_ASSIGN_OR_RETURN(std::vector<Node> nodes, store_.ListNodes(offer->connection_id));
    for (const Node& node : nodes) {
      const auto& approved = offer->review->approved_nodes;
      if (node.ready && !node.unschedulable &&
          std::find(approved.begin(), approved.end(), node.name) != approved.end()) {
        candidates.push_back({node.name, node.gpu_allocatable});
      }
    }
  }
  Reservation reservation;
  reservation.id = protocol::NewReservationId();
  reservation.offer_id = offer->id;
  reservation.owner_id = caller.user.id;
  reservation.gpus = gpus;
  reservation.created_at = now;
  reservation.expires_at = expires_at;
  if (offer->review) {
    UPLINK_ASSIGN_OR_RETURN(reservation.cpu_millis,
                            Total(offer->review->cpu_millis_per_gpu, gpus,
                                  protocol::kMaxWorkspaceCpuMillis, "CPU"));
    UPLINK_ASSIGN_OR_RETURN(reservation.memory_bytes,
                            Total(offer->review->memory_bytes_per_gpu, gpus,
                                  protocol::kMaxWorkspaceBytes, "memory"));
    UPLINK_ASSIGN_OR_RETURN(reservation.ephemeral_storage_bytes,
                            Total(offer->review->disk_bytes_per_gpu, gpus,
                                  protocol::kMaxWorkspaceBytes, "disk"));
    reservation.transfer_budget_bytes = offer->review->transfer_budget_bytes;
  }
  AuditEvent audit = CallerEvent(caller, now, "reservation.create", "reservation", reservation.id,
                                 caller.user.id,
                                 {{"offer_id", offer->id},
                                  {"gpus", gpus},
                                  {"expires_at", FormatRfc3339(expires_at)}});
  auto placed = store_.CreateReservation(reservation, candidates, audit);
  if (!placed.ok()) {
    if (placed.status().code() == StatusCode::kFailedPrecondition) {
      // The refusal is recorded: who asked for what, and why it could not be had.
      AuditEvent refused = audit;
      refused.outcome = "refused";
      refused.detail = ToJson(json::object{{"offer_id", offer->id},
                                           {"gpus", gpus},
                                           {"reason", placed.status().message()}});
      RecordRefusal(refused);
    }
    return placed.status();
  }
  log_.Info("reservation placed", {{"reservation_id", placed->id},
                                   {"offer_id", offer->id},
                                   {"node", placed->node},
                                   {"gpus", gpus}});
  signals_.Notify("offer:" + offer->id);
  return JsonResponse(201, ReservationJson(*placed, now));
}

Result<net::Response> ReservationsApi::ListReservations(const net::Request& request,
                                                        const RequestContext& caller) {
  ExpireOverdue();
  std::optional<std::string> offer_id = request.Query("offer_id");
  const bool active_only = request.Query("active").value_or("") == "true";
  const WallTime now = clock_.Now();
  json::array list;
  if (offer_id) {
    // The offer's usage, for its supplier (the full view for admins).
    auto offer = IsOfferId(*offer_id) ? store_.GetOffer(*offer_id)
                                      : Result<Offer>(NotFoundError("not an offer id"));
    if (!offer.ok() || (offer->owner_id != caller.user.id && !caller.is_admin())) {
      return NotFoundError("you have no offer with this id; list yours with GET /api/v1/offers");
    }
    UPLINK_ASSIGN_OR_RETURN(std::vector<Reservation> reservations,
                            store_.ListReservations(ReservationQuery{
                                .offer_id = *offer_id, .active_only = active_only}));
    for (const Reservation& r : reservations) {
      list.push_back(caller.is_admin() ? ReservationJson(r, now) : UsageJson(r));
    }
    return JsonResponse(200, {{"reservations", std::move(list)}});
  }
  ReservationQuery query{.active_only = active_only};
  if (!caller.is_admin() || request.Query("all").value_or("") != "true") {
    query.owner_id = caller.user.id;
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<Reservation> reservations, store_.ListReservations(query));
  for (const Reservation& r : reservations) list.push_back(ReservationJson(r, now));
  return JsonResponse(200, {{"reservations", std::move(list)}});
}

Result<net::Response> ReservationsApi::ShowReservation(const std::string& id,
                                                       const RequestContext& caller) {
  ExpireOverdue();
  auto owned = OwnedReservation(id, caller);
  if (owned.ok()) return JsonResponse(200, ReservationJson(*owned, clock_.Now()));
  if (owned.status().code() != StatusCode::kNotFound || !protocol::IsReservationId(id)) {
    return owned.status();
  }
  // The supplier of its offer sees its usage.
  auto reservation = store_.GetReservation(id);
  if (reservation.ok()) {
    auto offer = store_.GetOffer(reservation->offer_id);
    if (offer.ok() && offer->owner_id == caller.user.id) {
      return JsonResponse(200, UsageJson(*reservation));
    }
  }
  return owned.status();
}

Result<net::Response> ReservationsApi::StopReservation(const std::string& id,
                                                       const net::Request& request,
                                                       const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Reservation reservation, OwnedReservation(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"reason"}));
  UPLINK_ASSIGN_OR_RETURN(auto reason, fields.String("reason", protocol::kMaxEventReasonBytes));
  const WallTime now = clock_.Now();
  UPLINK_ASSIGN_OR_RETURN(
      Reservation stopped,
      store_.StopReservation(id, reason.value_or("stopped by " + caller.user.email),
                             CallerEvent(caller, now, "reservation.stop", "reservation", id,
                                         reservation.owner_id)));
  ssh_.ReservationEnded(id);
  signals_.Notify("offer:" + reservation.offer_id);
  return JsonResponse(200, ReservationJson(stopped, now));
}

Result<net::Response> ReservationsApi::ExtendReservation(const std::string& id,
                                                         const net::Request& request,
                                                         const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Reservation reservation, OwnedReservation(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"duration_seconds"}));
  UPLINK_ASSIGN_OR_RETURN(Offer offer, store_.GetOffer(reservation.offer_id));
  UPLINK_ASSIGN_OR_RETURN(
      std::int64_t more,
      fields.RequiredInt("duration_seconds", kMinDurationSeconds, offer.max_lifetime_seconds));
  const WallTime limit = reservation.created_at + std::chrono::seconds(offer.max_lifetime_seconds);
  const WallTime wanted = reservation.expires_at + std::chrono::seconds(more);
  if (wanted > limit) {
    return FailedPreconditionError(
        "the offer's maximum lifetime is " + std::to_string(offer.max_lifetime_seconds) +
        " s, so this reservation can run until " + FormatRfc3339(limit) + " at the latest: "
        "extend it by at most " +
        std::to_string(std::max<std::int64_t>(
            0, ToUnixSeconds(limit) - ToUnixSeconds(reservation.expires_at))) +
        " s");
  }
  const WallTime now = clock_.Now();
  UPLINK_ASSIGN_OR_RETURN(Reservation extended,
                          store_.ExtendReservation(
                              id, wanted,
                              CallerEvent(caller, now, "reservation.extend", "reservation", id,
                                          reservation.owner_id, {{"seconds", more}})));
  signals_.Notify("offer:" + reservation.offer_id);
  return JsonResponse(200, ReservationJson(extended, now));
}

Result<net::Response> ReservationsApi::CreateSshGrant(const std::string& id,
                                                      const net::Request& request,
                                                      const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Reservation reservation, OwnedReservation(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"public_key", "expires_at"}));
  UPLINK_ASSIGN_OR_RETURN(
      std::string text,
      fields.RequiredString("public_key", protocol::kMaxSshPublicKeyLineBytes + 2));
  UPLINK_ASSIGN_OR_RETURN(protocol::SshPublicKey key, protocol::ParseSshPublicKey(text));
  UPLINK_ASSIGN_OR_RETURN(auto expires_text, fields.String("expires_at", 64));
  const WallTime now = clock_.Now();
  // At most the reservation's end: a later expiry is cut to it (the reply says the one kept).
  WallTime expires_at = reservation.expires_at;
  if (expires_text) {
    UPLINK_ASSIGN_OR_RETURN(WallTime wanted, ParseFutureTime("expires_at", *expires_text, now));
    expires_at = std::min(wanted, reservation.expires_at);
  }
  SshGrant grant;
  grant.id = NewSshGrantId();
  grant.reservation_id = reservation.id;
  grant.key_type = key.type;
  grant.public_key = key.Authorized();
  grant.fingerprint = key.fingerprint;
  grant.comment = key.comment;
  grant.created_by = caller.user.id;
  grant.created_at = now;
  grant.expires_at = expires_at;
  UPLINK_RETURN_IF_ERROR(store_.CreateSshGrant(
      grant, CallerEvent(caller, now, "ssh_grant.create", "reservation", reservation.id,
                         reservation.owner_id,
                         {{"grant_id", grant.id},
                          {"key_type", grant.key_type},
                          {"fingerprint", grant.fingerprint},
                          {"expires_at", FormatRfc3339(expires_at)}})));
  log_.Info("ssh grant created", {{"reservation_id", reservation.id},
                                  {"grant_id", grant.id},
                                  {"fingerprint", grant.fingerprint}});
  signals_.Notify("offer:" + reservation.offer_id);
  ssh_.GrantsChanged(reservation.id);
  return JsonResponse(201, SshGrantJson(grant, now));
}

Result<net::Response> ReservationsApi::ListSshGrants(const std::string& id,
                                                     const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Reservation reservation, OwnedReservation(id, caller));
  UPLINK_ASSIGN_OR_RETURN(std::vector<SshGrant> grants, store_.ListSshGrants(reservation.id));
  const WallTime now = clock_.Now();
  json::array list;
  for (const SshGrant& grant : grants) list.push_back(SshGrantJson(grant, now));
  return JsonResponse(200, {{"ssh_grants", std::move(list)}});
}

Result<net::Response> ReservationsApi::RevokeSshGrant(const std::string& id,
                                                      const std::string& grant_id,
                                                      const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Reservation reservation, OwnedReservation(id, caller));
  if (!IsSshGrantId(grant_id)) {
    return NotFoundError("reservation " + reservation.id + " has no SSH grant " +
                         OneLineExcerpt(grant_id, 64) + "; list them with GET /api/v1/"
                         "reservations/" + reservation.id + "/ssh-grants");
  }
  const WallTime now = clock_.Now();
  UPLINK_ASSIGN_OR_RETURN(
      SshGrant revoked,
      store_.RevokeSshGrant(reservation.id, grant_id, caller.user.id,
                            CallerEvent(caller, now, "ssh_grant.revoke", "reservation",
                                        reservation.id, reservation.owner_id,
                                        {{"grant_id", grant_id}})));
  signals_.Notify("offer:" + reservation.offer_id);
  ssh_.GrantsChanged(reservation.id);
  return JsonResponse(200, SshGrantJson(revoked, now));
}

Result<net::Response> ReservationsApi::CreateCommand(const std::string& id,
                                                     const net::Request& request,
                                                     const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Reservation reservation, OwnedReservation(id, caller));
  json::object body;
  if (!request.body.empty()) {
    UPLINK_ASSIGN_OR_RETURN(json::value parsed,
                            ParseJson(request.body, JsonLimits{kMaxCommandRequestBytes, 4}));
    if (!parsed.is_object()) return InvalidArgumentError("the request body must be a JSON object");
    body = std::move(parsed.get_object());
  }
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"kind", "code", "timeout_s"}));
  WorkspaceCommandRecord command;
  UPLINK_ASSIGN_OR_RETURN(command.kind, fields.RequiredString("kind", 16));
  if (command.kind != protocol::kShellKind && command.kind != protocol::kPythonKind) {
    return InvalidArgumentError("kind must be shell or python");
  }
  UPLINK_ASSIGN_OR_RETURN(command.code,
                          fields.RequiredString("code", protocol::kMaxWorkspaceCodeBytes));
  if (command.code.empty()) return InvalidArgumentError("code must not be empty");
  std::int64_t timeout = kDefaultCommandTimeoutSeconds;
  if (fields.Find("timeout_s")) {
    UPLINK_ASSIGN_OR_RETURN(timeout, fields.RequiredInt("timeout_s", 1,
                                                        protocol::kMaxWorkspaceCommandTimeoutSeconds));
  }
  const WallTime now = clock_.Now();
  // A command cannot outlive its workspace.
  const std::int64_t left = ToUnixSeconds(reservation.expires_at) - ToUnixSeconds(now);
  if (left < 1) {
    return FailedPreconditionError("reservation " + id +
                                   " has no time left; extend it to run more");
  }
  command.id = protocol::NewWorkspaceCommandId();
  command.reservation_id = id;
  command.timeout_seconds = std::min(timeout, left);
  command.output_cap_bytes = options_.workspace_output_cap_bytes;
  command.created_by = caller.user.id;
  command.created_at = now;
  UPLINK_RETURN_IF_ERROR(store_.CreateWorkspaceCommand(
      command, CallerEvent(caller, now, "reservation.command", "reservation", id,
                           reservation.owner_id,
                           {{"command_id", command.id},
                            {"kind", command.kind},
                            {"code_bytes", static_cast<std::int64_t>(command.code.size())},
                            {"timeout_s", command.timeout_seconds}})));
  signals_.Notify("offer:" + reservation.offer_id);
  return JsonResponse(201, {{"id", command.id},
                            {"state", protocol::kCommandQueued},
                            {"timeout_s", command.timeout_seconds},
                            {"timeout_bounded", command.timeout_seconds < timeout},
                            {"output_cap_bytes", command.output_cap_bytes}});
}

Result<net::Response> ReservationsApi::ListCommands(const std::string& id,
                                                    const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Reservation reservation, OwnedReservation(id, caller));
  UPLINK_ASSIGN_OR_RETURN(std::vector<WorkspaceCommandRecord> commands,
                          store_.ListWorkspaceCommands(reservation.id, 100));
  json::array list;
  for (const WorkspaceCommandRecord& c : commands) {
    list.push_back(json::object{{"id", c.id},
                                {"kind", c.kind},
                                {"state", c.state},
                                {"exit_code", c.exit_code ? json::value(*c.exit_code)
                                                          : json::value(nullptr)},
                                {"output_bytes", c.output_bytes},
                                {"truncated", c.truncated},
                                {"code", OneLineExcerpt(c.code, 200)},
                                {"created_at", FormatRfc3339(c.created_at)},
                                {"finished_at", OptionalTime(c.finished_at)}});
  }
  return JsonResponse(200, {{"commands", std::move(list)}});
}

Result<net::Response> ReservationsApi::CommandReply(const WorkspaceCommandRecord& command,
                                                    std::int64_t offset) {
  std::string output;
  if (offset < command.output_bytes) {
    UPLINK_ASSIGN_OR_RETURN(output, store_.ReadCommandOutput(command.id, offset, kMaxOutputPage));
  }
  const bool final = protocol::IsFinalCommandState(command.state);
  const bool more_stored = offset + static_cast<std::int64_t>(output.size()) < command.output_bytes;
  // Cut a sequence split across reads; the next read starts with it whole.
  std::string_view shown = (final && !more_stored) ? std::string_view(output)
                                                   : CompleteUtf8Prefix(output);
  return JsonResponse(
      200, {{"id", command.id},
            {"reservation_id", command.reservation_id},
            {"kind", command.kind},
            {"state", command.state},
            {"exit_code", command.exit_code ? json::value(*command.exit_code)
                                            : json::value(nullptr)},
            {"output", ValidUtf8(shown)},
            {"offset", offset},
            {"next_offset", offset + static_cast<std::int64_t>(shown.size())},
            {"output_bytes", command.output_bytes},
            {"truncated", command.truncated},
            {"output_cap_bytes", command.output_cap_bytes},
            {"timeout_s", command.timeout_seconds},
            {"message", command.message},
            {"created_at", FormatRfc3339(command.created_at)},
            {"started_at", OptionalTime(command.started_at)},
            {"finished_at", OptionalTime(command.finished_at)}});
}

void ReservationsApi::ShowCommand(const std::string& id, const std::string& command_id,
                                  const net::Request& request, const RequestContext& caller,
                                  net::Reply reply) {
  auto answer = [&]() -> std::optional<Result<net::Response>> {
    auto reservation = OwnedReservation(id, caller);
    if (!reservation.ok()) return reservation.status();
    Status not_found = NotFoundError("reservation " + id + " has no command with this id");
    if (!protocol::IsWorkspaceCommandId(command_id)) return not_found;
    std::int64_t offset = 0, wait = 0;
    for (auto [key, target, max] :
         {std::tuple{"offset", &offset, protocol::kMaxOutputCapBytes},
          std::tuple{"wait", &wait, kMaxOutputWaitSeconds}}) {
      if (auto text = request.Query(key)) {
        auto number = ParseQueryInt(key, *text, 0, max);
        if (!number.ok()) return number.status();
        *target = *number;
      }
    }
    const std::string key = "command:" + command_id;
    const std::uint64_t generation = signals_.Generation(key);
    auto command = store_.GetWorkspaceCommand(command_id);
    if (!command.ok() || command->reservation_id != id) {
      return command.ok() || command.status().code() == StatusCode::kNotFound ? not_found
                                                                              : command.status();
    }
    if (wait == 0 || command->output_bytes > offset ||
        protocol::IsFinalCommandState(command->state)) {
      return CommandReply(*command, offset);
    }
    signals_.Wait(key, generation, clock_.SteadyNow() + std::chrono::seconds(wait),
                  [this, command_id, offset, reply] {
                    auto now = store_.GetWorkspaceCommand(command_id);
                    reply(Reply(now.ok() ? CommandReply(*now, offset)
                                         : Result<net::Response>(now.status())));
                  });
    return std::nullopt;
  }();
  if (answer) reply(Reply(std::move(*answer)));
}

}  // namespace uplink::console
