#include "console/api/connection_view.h"

#include <algorithm>

#include "console/api/api_objects.h"
#include "console/api/install_plan.h"
#include "console/auth/credentials.h"
#include "protocol/inventory.h"

namespace uplink::console {
namespace {

json::object LossJson(const LossCount& loss) {
  return json::object{{"records", loss.records}, {"bytes", loss.bytes}};
}

json::object StreamToJson(const StreamSummary& stream) {
  const AgentLosses& losses = stream.agent_losses;
  return json::object{{"stream", stream.stream},
                      {"spool_id", stream.spool_id},
                      {"acked_through", stream.acked_through},
                      {"records_stored", stream.records_stored},
                      {"duplicates_ignored", stream.duplicates_ignored},
                      {"lost_records", stream.lost_records},
                      {"agent_losses", json::object{{"dropped", LossJson(losses.dropped)},
                                                    {"corrupt", LossJson(losses.corrupt)},
                                                    {"rejected", LossJson(losses.rejected)}}},
                      {"restarts", stream.epoch},
                      {"first_upload_at", FormatRfc3339(stream.first_upload_at)},
                      {"last_upload_at", FormatRfc3339(stream.last_upload_at)},
                      {"agent_instance", stream.agent_instance},
                      {"agent_version", stream.agent_version}};
}

json::value HandoverToJson(const std::optional<Handover>& handover, const Connection& connection,
                           WallTime now) {
  if (!handover) return nullptr;
  return json::object{
      {"status", HandoverStatusName(ComputeHandoverStatus(*handover, connection, now))},
      {"created_at", FormatRfc3339(handover->created_at)},
      {"expires_at", FormatRfc3339(handover->expires_at)},
      {"redeemed_at", OptionalTimeJson(handover->redeemed_at)}};
}

json::value ExpiresInDaysJson(const Connection& connection, WallTime now) {
  std::optional<std::int64_t> days = ExpiresInDays(connection, now);
  return days ? json::value(*days) : json::value(nullptr);
}

}  // namespace

std::string_view ConnectionStatusName(ConnectionStatus status) {
  switch (status) {
    case ConnectionStatus::kNever: return "never";
    case ConnectionStatus::kActive: return "active";
    case ConnectionStatus::kStale: return "stale";
    case ConnectionStatus::kExpired: return "expired";
    case ConnectionStatus::kRevoked: return "revoked";
  }
  return "never";
}

std::string_view LivenessName(Liveness liveness) {
  switch (liveness) {
    case Liveness::kWaiting: return "waiting";
    case Liveness::kConnected: return "connected";
    case Liveness::kStale: return "stale";
    case Liveness::kOffline: return "offline";
  }
  return "offline";
}

std::string_view HandoverStatusName(HandoverStatus status) {
  switch (status) {
    case HandoverStatus::kPending: return "pending";
    case HandoverStatus::kRedeemed: return "redeemed";
    case HandoverStatus::kExpired: return "expired";
    case HandoverStatus::kSuperseded: return "superseded";
  }
  return "superseded";
}

namespace {

// Connection and ConnectionLifecycle carry the same three fields the status comes from.
ConnectionStatus StatusOf(const auto& connection, WallTime now,
                          std::chrono::milliseconds active_window) {
  if (connection.revoked_at) return ConnectionStatus::kRevoked;
  if (now >= connection.expires_at) return ConnectionStatus::kExpired;
  if (!connection.last_seen_at) return ConnectionStatus::kNever;
  if (now - *connection.last_seen_at >= active_window) return ConnectionStatus::kStale;
  return ConnectionStatus::kActive;
}

}  // namespace

ConnectionStatus ComputeStatus(const Connection& connection, WallTime now,
                               std::chrono::milliseconds active_window) {
  return StatusOf(connection, now, active_window);
}

ConnectionStatus ComputeStatus(const ConnectionLifecycle& lifecycle, WallTime now,
                               std::chrono::milliseconds active_window) {
  return StatusOf(lifecycle, now, active_window);
}

Liveness ComputeLiveness(const Connection& connection, WallTime now,
                         const StatusThresholds& thresholds) {
  return ComputeLiveness(connection.last_seen_at, now, thresholds);
}

Liveness ComputeLiveness(std::optional<WallTime> last_seen_at, WallTime now,
                         const StatusThresholds& thresholds) {
  if (!last_seen_at) return Liveness::kWaiting;
  auto silence = now - *last_seen_at;
  if (silence >= thresholds.offline_after) return Liveness::kOffline;
  if (silence >= thresholds.stale_after) return Liveness::kStale;
  return Liveness::kConnected;
}

std::optional<std::int64_t> ExpiresInDays(const Connection& connection, WallTime now) {
  if (connection.revoked_at || now >= connection.expires_at) return std::nullopt;
  auto left = connection.expires_at - now;
  if (left > kExpiryWarning) return std::nullopt;
  return std::chrono::ceil<std::chrono::days>(left).count();
}

std::string PlaceholderTokenPrefix(std::string_view handover_lookup_prefix) {
  std::string_view random = handover_lookup_prefix.substr(
      std::min(handover_lookup_prefix.size(), protocol::kHandoverCodePrefix.size()));
  return std::string(protocol::kAgentTokenPrefix) + std::string(random);
}

HandoverStatus ComputeHandoverStatus(const Handover& handover, const Connection& connection,
                                     WallTime now) {
  if (handover.redeemed_at) return HandoverStatus::kRedeemed;
  if (handover.superseded_at || connection.revoked_at) return HandoverStatus::kSuperseded;
  if (now >= handover.expires_at) return HandoverStatus::kExpired;
  return HandoverStatus::kPending;
}

Result<ConnectionDetails> ReadConnectionDetails(Store& store, const std::string& connection_id) {
  ConnectionDetails details;
  UPLINK_ASSIGN_OR_RETURN(details.nodes, store.ListNodes(connection_id));
  UPLINK_ASSIGN_OR_RETURN(details.agents, store.ListAgents(connection_id, kMaxAgentsShown));
  UPLINK_ASSIGN_OR_RETURN(details.handover, store.LatestHandover(connection_id));
  AuditQuery security;
  security.target_id = connection_id;
  security.action = std::string(kClusterMismatchAction);
  security.limit = kMaxSecurityEventsShown;
  UPLINK_ASSIGN_OR_RETURN(details.security_events, store.ListAudit(security));
  UPLINK_ASSIGN_OR_RETURN(details.streams, store.ListStreams(connection_id));
  UPLINK_ASSIGN_OR_RETURN(details.install_plan, store.GetInstallPlan(connection_id));
  return details;
}

json::object ConnectionToJson(const Connection& connection, const ConnectionDetails& details,
                              WallTime now, const ConnectionViewOptions& options) {
  const InventoryTotals& totals = connection.totals;
  json::array agents;
  for (const AgentSeen& agent : details.agents) {
    agents.push_back(json::object{{"role", agent.role},
                                  {"instance", agent.instance},
                                  {"version", agent.version},
                                  {"last_seen_at", FormatRfc3339(agent.last_seen_at)},
                                  {"liveness", LivenessName(ComputeLiveness(
                                                   agent.last_seen_at, now, options.thresholds))}});
  }
  json::array security_events;
  for (const AuditEvent& event : details.security_events) {
    security_events.push_back(json::object{{"at", FormatRfc3339(event.at)},
                                           {"action", event.action},
                                           {"source_address", event.source_address},
                                           {"detail", DetailJson(event.detail)}});
  }
  json::array nodes;
  nodes.reserve(details.nodes.size());
  for (const Node& node : details.nodes) nodes.push_back(protocol::EncodeInventoryNode(node));
  json::array streams;
  streams.reserve(details.streams.size());
  for (const StreamSummary& stream : details.streams) streams.push_back(StreamToJson(stream));
  return json::object{
      {"id", connection.id},
      {"agent_name", connection.agent_name},
      {"cluster_name", connection.cluster_name},
      {"status", ConnectionStatusName(ComputeStatus(connection, now, options.active_window))},
      {"liveness", LivenessName(ComputeLiveness(connection, now, options.thresholds))},
      {"token_prefix", connection.token_prefix},
      {"created_at", FormatRfc3339(connection.created_at)},
      {"expires_at", FormatRfc3339(connection.expires_at)},
      {"revoked_at", OptionalTimeJson(connection.revoked_at)},
      {"expires_in_days", ExpiresInDaysJson(connection, now)},
      {"last_seen_at", OptionalTimeJson(connection.last_seen_at)},
      {"last_report_at", OptionalTimeJson(connection.last_report_at)},
      {"collected_at", OptionalTimeJson(connection.collected_at)},
      {"cluster_uid",
       connection.cluster_uid ? json::value(*connection.cluster_uid) : json::value(nullptr)},
      {"agent_version", connection.agent_version},
      {"selector", connection.selector},
      {"owner_needs_two_factor", connection.owner_needs_two_factor},
      // The install's choice, beside the selector the agent reports (`selector`).
      {"install", details.install_plan ? json::value(InstallPlanJson(*details.install_plan))
                                       : json::value(nullptr)},
      {"agents", std::move(agents)},
      {"handover", HandoverToJson(details.handover, connection, now)},
      {"security_events", std::move(security_events)},
      {"nodes", std::move(nodes)},
      {"streams", std::move(streams)},
      {"totals", json::object{{"nodes", totals.nodes},
                              {"nodes_ready", totals.nodes_ready},
                              {"gpu_capacity", totals.gpu_capacity},
                              {"gpu_allocatable", totals.gpu_allocatable},
                              {"gpus_ready", totals.gpus_ready}}}};
}

}  // namespace uplink::console
