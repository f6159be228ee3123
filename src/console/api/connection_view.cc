#include "console/api/connection_view.h"

namespace uplink::console {
namespace {

json::value OptionalTime(const std::optional<WallTime>& t) {
  return t ? json::value(FormatRfc3339(*t)) : json::value(nullptr);
}

json::object NodeToJson(const Node& node) {
  json::object resources;
  for (const GpuResource& resource : node.resources) {
    resources[resource.name] =
        json::object{{"capacity", resource.capacity}, {"allocatable", resource.allocatable}};
  }
  json::array taints;
  for (const Taint& taint : node.taints) {
    taints.push_back(
        json::object{{"key", taint.key}, {"value", taint.value}, {"effect", taint.effect}});
  }
  json::object out{{"name", node.name},
                   {"uid", node.uid},
                   {"ready", node.ready},
                   {"unschedulable", node.unschedulable},
                   {"gpu_capacity", node.gpu_capacity},
                   {"gpu_allocatable", node.gpu_allocatable},
                   {"gpu_resource", node.gpu_resource},
                   {"gpu_product", node.gpu_product},
                   {"resources", std::move(resources)},
                   {"taints", std::move(taints)}};
  if (node.error) out["error"] = *node.error;
  return out;
}

}  // namespace

std::string_view ConnectionStatusName(ConnectionStatus status) {
  switch (status) {
    case ConnectionStatus::kNever: return "never";
    case ConnectionStatus::kActive: return "active";
    case ConnectionStatus::kStale: return "stale";
    case ConnectionStatus::kOffline: return "offline";
    case ConnectionStatus::kExpired: return "expired";
    case ConnectionStatus::kRevoked: return "revoked";
  }
  return "never";
}

ConnectionStatus ComputeStatus(const Connection& connection, WallTime now,
                               const StatusThresholds& thresholds) {
  if (connection.revoked_at) return ConnectionStatus::kRevoked;
  if (now >= connection.expires_at) return ConnectionStatus::kExpired;
  if (!connection.last_report_at) return ConnectionStatus::kNever;
  auto silence = now - *connection.last_report_at;
  if (silence >= thresholds.offline_after) return ConnectionStatus::kOffline;
  if (silence >= thresholds.stale_after) return ConnectionStatus::kStale;
  return ConnectionStatus::kActive;
}

json::object ConnectionToJson(const Connection& connection, ConnectionStatus status,
                              const std::vector<Node>* nodes) {
  const InventoryTotals& totals = connection.totals;
  json::object out{
      {"id", connection.id},
      {"agent_name", connection.agent_name},
      {"cluster_name", connection.cluster_name},
      {"status", ConnectionStatusName(status)},
      {"token_prefix", connection.token_prefix},
      {"created_at", FormatRfc3339(connection.created_at)},
      {"expires_at", FormatRfc3339(connection.expires_at)},
      {"revoked_at", OptionalTime(connection.revoked_at)},
      {"last_report_at", OptionalTime(connection.last_report_at)},
      {"cluster_uid", connection.cluster_uid ? json::value(*connection.cluster_uid)
                                             : json::value(nullptr)},
      {"agent_version", connection.agent_version},
      {"selector", connection.selector},
      {"collected_at", OptionalTime(connection.collected_at)},
      {"totals", json::object{{"nodes", totals.nodes},
                              {"nodes_ready", totals.nodes_ready},
                              {"gpu_capacity", totals.gpu_capacity},
                              {"gpu_allocatable", totals.gpu_allocatable},
                              {"gpus_ready", totals.gpus_ready}}}};
  if (nodes) {
    json::array list;
    list.reserve(nodes->size());
    for (const Node& node : *nodes) list.push_back(NodeToJson(node));
    out["nodes"] = std::move(list);
  }
  return out;
}

}  // namespace uplink::console
