#include "console/api/connections_api.h"

#include <map>
#include <variant>

#include "common/crypto.h"
#include "console/api/cluster_plan.h"
#include "console/api/json_fields.h"
#include "console/auth/credentials.h"
#include "console/replies.h"
#include "protocol/agent_api.h"
#include "protocol/upload.h"

namespace uplink::console {
namespace {

constexpr const char* kConnections = "uplink_console_connections";
constexpr const char* kConnectionsLiveness = "uplink_console_connections_liveness";

constexpr size_t kIdBytes = 8;  // ids are 16 hex characters
constexpr size_t kMaxRawNameBytes = 1024;
constexpr size_t kMaxCodeBytes = 256;
constexpr std::int64_t kDefaultRecordPage = 100;
// 18 digits: the most a query has ever taken.
constexpr std::int64_t kMaxEpoch = 999'999'999'999'999'999;

// The token a connection gets: either minted and shown now, or, for a handover, a placeholder
// nobody knows plus the code that will mint the real one.
struct NewToken {
  std::string prefix;
  std::string hash;
  std::optional<Secret> token;
  std::optional<Handover> handover;
  std::optional<Secret> handover_code;
};

NewToken MintNewToken(const std::string& connection_id, bool handover, WallTime now,
                      std::chrono::minutes handover_lifetime) {
  // For a handover the placeholder's token is dropped here: its hash matches nothing anyone
  // can present.
  MintedCredential minted = MintCredential(protocol::kAgentTokenPrefix);
  NewToken out;
  out.hash = std::move(minted.token_hash);
  if (!handover) {
    out.prefix = std::move(minted.lookup_prefix);
    out.token = std::move(minted.token);
    return out;
  }
  MintedCredential code = MintCredential(protocol::kHandoverCodePrefix);
  out.prefix = PlaceholderTokenPrefix(code.lookup_prefix);
  Handover made;
  made.id = HexEncode(RandomBytes(kIdBytes));
  made.connection_id = connection_id;
  made.lookup_prefix = code.lookup_prefix;
  made.code_hash = code.token_hash;
  made.created_at = now;
  made.expires_at = now + handover_lifetime;
  out.handover = std::move(made);
  out.handover_code = std::move(code.token);
  return out;
}

// The reply's fields that carry the new credential.
json::object CredentialFields(const NewToken& minted) {
  if (minted.handover) {
    return json::object{{"handover_code", minted.handover_code->Reveal()},
                        {"handover_expires_at", FormatRfc3339(minted.handover->expires_at)}};
  }
  return json::object{{"token", minted.token->Reveal()}};
}

json::object TokenDetail(const NewToken& minted) {
  json::object detail{{"token_prefix", minted.prefix}, {"handover", minted.handover.has_value()}};
  if (minted.handover) {
    detail["handover_prefix"] = minted.handover->lookup_prefix;
    detail["handover_expires_at"] = FormatRfc3339(minted.handover->expires_at);
  }
  return detail;
}

// A code gone for good is 410 Gone; a deactivated owner's is 403, since it works again once
// the owner is reactivated.
int HandoverRefusalHttpStatus(HandoverRefusalReason reason) {
  switch (reason) {
    case HandoverRefusalReason::kRedeemed:
    case HandoverRefusalReason::kExpired:
    case HandoverRefusalReason::kSuperseded:
      return 410;
    case HandoverRefusalReason::kOwnerDeactivated:
      return 403;
  }
  return 410;
}

}  // namespace

ConnectionsApi::ConnectionsApi(const ApiContext& context) : ApiArea(context) {
  metrics_.DeclareGauge(kConnections, "Connections by token status, computed at scrape time.");
  metrics_.DeclareGauge(kConnectionsLiveness,
                        "Connections whose token works (neither revoked nor expired), by the "
                        "liveness of their agent, computed at scrape time.");
}

void ConnectionsApi::Register(Routes& routes) {
  routes.UserRoute(
      "POST", "/api/v1/connections", Access::kSensitive,
      [this](const net::Request& request, const net::PathParams&, const RequestContext& caller) {
        return CreateConnection(request, caller);
      });
  routes.UserRoute("GET", "/api/v1/connections", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams&,
                          const RequestContext& caller) { return ListConnections(caller); });
  routes.UserRoute(
      "GET", "/api/v1/connections/{id}", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return ShowConnection(params.at("id"), caller);
      });
  routes.UserRoute("POST", "/api/v1/connections/{id}/rotate", Access::kSensitive,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return RotateToken(params.at("id"), request, caller);
                   });
  routes.UserRoute("POST", "/api/v1/connections/{id}/revoke", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return RevokeConnection(params.at("id"), request, caller);
                   });
  routes.UserRoute("GET", "/api/v1/connections/{id}/records", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ListStreamRecords(params.at("id"), request, caller);
                   });
  routes.PublicRoute("POST", "/api/v1/handovers/redeem",
                     [this](const net::Request& request) { return RedeemHandover(request); });
}

std::string ConnectionsApi::Scrape() {
  auto connections = store_.ListConnectionLifecycles();
  if (!connections.ok()) {
    log_.Warn("counting connections for /metrics failed", {{"error", connections.status()}});
    return "";
  }
  std::map<ConnectionStatus, int> by_status;
  std::map<Liveness, int> by_liveness;
  WallTime now = clock_.Now();
  for (ConnectionLifecycle& c : *connections) {
    presence_.Overlay(c);
    ConnectionStatus status = ComputeStatus(c, now, options_.active_window);
    ++by_status[status];
    if (status != ConnectionStatus::kRevoked && status != ConnectionStatus::kExpired) {
      ++by_liveness[ComputeLiveness(c.last_seen_at, now, options_.thresholds)];
    }
  }
  for (ConnectionStatus status : kAllConnectionStatuses) {
    metrics_.Set(kConnections, by_status[status],
                 {{"status", std::string(ConnectionStatusName(status))}});
  }
  for (Liveness liveness : kAllLiveness) {
    metrics_.Set(kConnectionsLiveness, by_liveness[liveness],
                 {{"liveness", std::string(LivenessName(liveness))}});
  }
  return "";
}

Result<net::Response> ConnectionsApi::ConnectionReply(int http_status, const std::string& id,
                                                      json::object extra) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, store_.GetConnection(id));
  UPLINK_ASSIGN_OR_RETURN(ConnectionDetails details, ReadConnectionDetails(store_, id));
  presence_.Overlay(id, details.agents, kMaxAgentsShown);
  json::object body =
      ConnectionToJson(WithPresence(std::move(connection)), details, clock_.Now(), ViewOptions());
  // Extra fields are only ever a new credential.
  bool carries_secret = !extra.empty();
  for (auto& field : extra) body[field.key()] = std::move(field.value());
  net::Response response = JsonResponse(http_status, body);
  return carries_secret ? NoStore(std::move(response)) : response;
}

Result<net::Response> ConnectionsApi::CreateConnection(const net::Request& request,
                                                       const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(
      fields.OnlyFields({"agent_name", "cluster_name", "expires_at", "handover", "namespaces"}));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_agent,
                          fields.RequiredString("agent_name", kMaxRawNameBytes));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_cluster,
                          fields.RequiredString("cluster_name", kMaxRawNameBytes));
  UPLINK_ASSIGN_OR_RETURN(auto raw_expiry, fields.String("expires_at", 64));
  UPLINK_ASSIGN_OR_RETURN(auto handover, fields.Bool("handover"));
  // The namespace scope, chosen with the connection (docs/api.md, "Namespace scope").
  std::optional<std::vector<std::string>> namespaces;
  if (const json::value* value = fields.Find("namespaces"); value && !value->is_null()) {
    UPLINK_ASSIGN_OR_RETURN(namespaces, ParseNamespaceList(*value));
  }

  Connection connection;
  UPLINK_ASSIGN_OR_RETURN(connection.agent_name, ValidateName("agent_name", raw_agent));
  UPLINK_ASSIGN_OR_RETURN(connection.cluster_name, ValidateName("cluster_name", raw_cluster));
  WallTime now = clock_.Now();
  connection.expires_at = now + options_.default_token_lifetime;
  if (raw_expiry) {
    UPLINK_ASSIGN_OR_RETURN(connection.expires_at, ParseFutureTime("expires_at", *raw_expiry, now));
    if (connection.expires_at > now + options_.max_token_lifetime) {
      return InvalidArgumentError("expires_at may be at most " +
                                  std::to_string(options_.max_token_lifetime.count() / 24) +
                                  " days ahead; rotate the token before it expires instead");
    }
  }
  connection.id = HexEncode(RandomBytes(kIdBytes));
  connection.owner_id = caller.user.id;
  connection.created_at = now;
  NewToken minted =
      MintNewToken(connection.id, handover.value_or(false), now, options_.handover_lifetime);
  connection.token_prefix = minted.prefix;
  connection.token_hash = minted.hash;

  json::object detail = TokenDetail(minted);
  detail["agent_name"] = connection.agent_name;
  detail["cluster_name"] = connection.cluster_name;
  detail["expires_at"] = FormatRfc3339(connection.expires_at);
  if (namespaces) detail["namespaces"] = NamespaceScopeJson(namespaces);
  AuditEvent event = CallerEvent(caller, now, "connection.create", "connection", connection.id,
                                 caller.user.id, detail);
  Status created =
      namespaces ? store_.CreateConnectionWithScope(connection, minted.handover, *namespaces, event)
      : minted.handover ? store_.CreateConnectionWithHandover(connection, *minted.handover, event)
                        : store_.CreateConnection(connection, event);
  if (created.code() == StatusCode::kConflict || created.code() == StatusCode::kAlreadyExists) {
    return ConflictError("you already have a live connection for cluster_name \"" +
                         connection.cluster_name +
                         "\"; choose another name, or revoke that connection first");
  }
  UPLINK_RETURN_IF_ERROR(created);
  log_.Info("connection created", {{"connection_id", connection.id},
                                   {"user_id", caller.user.id},
                                   {"cluster_name", connection.cluster_name},
                                   {"token_prefix", connection.token_prefix},
                                   {"handover", minted.handover.has_value()}});
  json::object extra = CredentialFields(minted);
  extra["namespaces"] = NamespaceScopeJson(namespaces);
  return ConnectionReply(201, connection.id, std::move(extra));
}

Result<net::Response> ConnectionsApi::ListConnections(const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(std::vector<Connection> connections,
                          store_.ListConnections(caller.user.id));
  WallTime now = clock_.Now();
  json::array list;
  for (const Connection& connection : connections) {
    UPLINK_ASSIGN_OR_RETURN(ConnectionDetails details,
                            ReadConnectionDetails(store_, connection.id));
    presence_.Overlay(connection.id, details.agents, kMaxAgentsShown);
    list.push_back(ConnectionToJson(WithPresence(connection), details, now, ViewOptions()));
  }
  return JsonResponse(200, {{"connections", std::move(list)}});
}

Result<net::Response> ConnectionsApi::ShowConnection(const std::string& id,
                                                     const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, caller));
  return ConnectionReply(200, connection.id);
}

Result<net::Response> ConnectionsApi::RotateToken(const std::string& id,
                                                  const net::Request& request,
                                                  const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"handover", "renew"}));
  UPLINK_ASSIGN_OR_RETURN(auto handover, fields.Bool("handover"));
  UPLINK_ASSIGN_OR_RETURN(auto renew, fields.Bool("renew"));
  Status revoked = FailedPreconditionError(
      "this connection was revoked and cannot get a new token; create a new connection");
  if (connection.revoked_at) return revoked;
  WallTime now = clock_.Now();
  // A future expiry carries over (a rotation is not a renewal); renewing, or rotating an
  // expired token, gives the default lifetime from now (a new installation code: 90 days).
  bool fresh_lifetime = renew.value_or(false) || connection.expires_at <= now;
  WallTime expires_at =
      fresh_lifetime ? now + options_.default_token_lifetime : connection.expires_at;
  NewToken minted = MintNewToken(id, handover.value_or(false), now, options_.handover_lifetime);
  json::object detail = TokenDetail(minted);
  detail["old_token_prefix"] = connection.token_prefix;
  detail["renew"] = renew.value_or(false);
  detail["previous_expires_at"] = FormatRfc3339(connection.expires_at);
  detail["expires_at"] = FormatRfc3339(expires_at);
  Status replaced = store_.ReplaceToken(
      id, minted.prefix, minted.hash, expires_at, minted.handover,
      CallerEvent(caller, now, "connection.rotate", "connection", id, connection.owner_id, detail));
  // The store refuses a revoke that landed after the read above.
  if (replaced.code() == StatusCode::kFailedPrecondition) return revoked;
  UPLINK_RETURN_IF_ERROR(replaced);
  log_.Info("connection token rotated", {{"connection_id", id},
                                         {"user_id", caller.user.id},
                                         {"old_token_prefix", connection.token_prefix},
                                         {"token_prefix", minted.prefix},
                                         {"handover", minted.handover.has_value()},
                                         {"expires_at", FormatRfc3339(expires_at)}});
  return ConnectionReply(200, id, CredentialFields(minted));
}

Result<net::Response> ConnectionsApi::RevokeConnection(const std::string& id,
                                                       const net::Request& request,
                                                       const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  UPLINK_RETURN_IF_ERROR(FieldReader(body, "").OnlyFields({}));
  // Revoking twice is harmless and records nothing new.
  if (!connection.revoked_at) {
    WallTime now = clock_.Now();
    UPLINK_RETURN_IF_ERROR(store_.RevokeConnection(
        id, now,
        CallerEvent(caller, now, "connection.revoke", "connection", id, connection.owner_id,
                    {{"token_prefix", connection.token_prefix},
                     {"cluster_name", connection.cluster_name}})));
    log_.Info("connection revoked", {{"connection_id", id}, {"user_id", caller.user.id}});
  }
  return ConnectionReply(200, id);
}

Result<net::Response> ConnectionsApi::RedeemHandover(const net::Request& request) {
  if (auto limited = guard_.CheckAddress(request.remote_address)) return std::move(*limited);
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"code"}));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_code, fields.RequiredString("code", kMaxCodeBytes));
  Secret code(std::move(raw_code));

  auto refuse_unknown = [&](std::string_view lookup_prefix) {
    auto limited = guard_.Refused(
        {"handover_code", "invalid_token", request.remote_address, lookup_prefix, ""});
    if (limited) return std::move(*limited);
    return UnauthorizedResponse("invalid_token",
                                "the handover code is not valid; check that you copied all of "
                                "it, or rotate the connection's token to get a new one");
  };
  std::optional<std::string> prefix = LookupPrefix(code, protocol::kHandoverCodePrefix);
  if (!prefix) return refuse_unknown("");
  UPLINK_ASSIGN_OR_RETURN(std::vector<Handover> candidates, store_.FindHandoversByPrefix(*prefix));
  const Handover* handover = nullptr;
  for (const Handover& candidate : candidates) {
    if (MatchesHash(code, candidate.code_hash)) handover = &candidate;
  }
  if (!handover) return refuse_unknown(*prefix);
  UPLINK_ASSIGN_OR_RETURN(Connection connection, store_.GetConnection(handover->connection_id));

  WallTime now = clock_.Now();
  AuditEvent event;
  event.at = now;
  event.actor_type = "anonymous";
  event.actor_label = handover->lookup_prefix;
  event.credential = "handover_code";
  event.target_type = "connection";
  event.target_id = connection.id;
  event.owner_id = connection.owner_id;
  event.source_address = request.remote_address;
  auto refused = [&](std::string_view reason) {
    log_.Warn("handover refused", {{"reason", reason},
                                   {"connection_id", connection.id},
                                   {"handover_prefix", handover->lookup_prefix},
                                   {"remote_address", request.remote_address}});
  };

  MintedCredential token = MintCredential(protocol::kAgentTokenPrefix);
  event.action = "handover.redeem";
  event.outcome = "ok";
  event.detail = ToJson(json::object{{"token_prefix", token.lookup_prefix}});
  // The store decides, in one transaction, whether the code still works; when it does not it
  // records handover.refused itself.
  auto redemption =
      store_.RedeemHandover(handover->id, now, token.lookup_prefix, token.token_hash, event);
  if (!redemption.ok()) return redemption.status();
  if (const auto* refusal = std::get_if<HandoverRefusal>(&*redemption)) {
    std::string_view code = HandoverRefusalCode(refusal->reason);
    refused(code);
    return ErrorResponse(HandoverRefusalHttpStatus(refusal->reason), code, refusal->message);
  }
  const Connection* redeemed = &std::get<Connection>(*redemption);
  log_.Info("handover redeemed", {{"connection_id", connection.id},
                                  {"token_prefix", token.lookup_prefix},
                                  {"remote_address", request.remote_address}});
  // Only what installing the token needs: whoever holds a code is not thereby entitled to the
  // cluster's inventory or its security events.
  return NoStore(JsonResponse(200, {{"id", redeemed->id},
                                    {"agent_name", redeemed->agent_name},
                                    {"cluster_name", redeemed->cluster_name},
                                    {"token_prefix", redeemed->token_prefix},
                                    {"expires_at", FormatRfc3339(redeemed->expires_at)},
                                    {"token", token.token.Reveal()}}));
}

Result<net::Response> ConnectionsApi::ListStreamRecords(const std::string& id,
                                                        const net::Request& request,
                                                        const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, caller));
  RecordQuery query;
  query.connection_id = connection.id;
  std::int64_t limit = kDefaultRecordPage;
  std::optional<std::string> stream;
  for (const auto& [key, value] : request.QueryParams()) {
    if (key == "stream") {
      stream = value;
    } else if (key == "after") {
      UPLINK_ASSIGN_OR_RETURN(query.after_sequence,
                              ParseQueryInt("after", value, 0, protocol::kMaxSequence));
    } else if (key == "limit") {
      UPLINK_ASSIGN_OR_RETURN(limit, ParseQueryInt("limit", value, 1, kMaxRecordPage));
    } else if (key == "epoch") {
      UPLINK_ASSIGN_OR_RETURN(query.epoch, ParseQueryInt("epoch", value, 0, kMaxEpoch));
    } else {
      return InvalidArgumentError("unknown query parameter \"" + key.substr(0, 64) +
                                  "\"; records take stream, after, limit and epoch");
    }
  }
  if (!stream) {
    return InvalidArgumentError("stream is required: the name of one of the connection's "
                                "streams, as GET /api/v1/connections/{id} lists them");
  }
  if (!protocol::IsStreamName(*stream)) {
    return InvalidArgumentError("stream must be 1-253 characters of A-Z, a-z, 0-9, '.', '_', "
                                "'/' and '-', such as \"node/gpu-node-0001\"");
  }
  query.stream = *stream;
  query.limit = static_cast<int>(limit);
  auto page = store_.ListStreamRecords(query);
  if (page.status().code() == StatusCode::kNotFound) {
    return NotFoundError("this connection has no stream \"" + *stream +
                         "\"; GET /api/v1/connections/" + connection.id + " lists its streams");
  }
  UPLINK_RETURN_IF_ERROR(page.status());

  // Written out by hand so that each stored payload, a JSON object's compact text, is copied
  // into the reply as it is rather than parsed and serialized again.
  std::string body = "{\"stream\":" + ToJson(json::value(*stream)) +
                     ",\"epoch\":" + std::to_string(page->epoch) + ",\"records\":[";
  for (const StoredRecord& record : page->records) {
    if (&record != &page->records.front()) body += ',';
    body += "{\"sequence\":";
    body += std::to_string(record.sequence);
    body += ",\"appended_at\":\"";
    body += FormatRfc3339Millis(record.appended_at);
    body += "\",\"received_at\":\"";
    body += FormatRfc3339Millis(record.received_at);
    body += "\",\"payload\":";
    body += record.payload;
    body += '}';
  }
  body += "],\"next_after\":";
  body += page->more ? std::to_string(page->records.back().sequence) : "null";
  body += '}';
  return net::Response::Json(200, std::move(body));
}

}  // namespace uplink::console
