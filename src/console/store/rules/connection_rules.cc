#include "console/store/rules/connection_rules.h"

#include "common/crypto.h"
#include "common/json.h"

namespace uplink::console {

bool AgentTokenStillLive(const StoredAgentToken& stored, const std::string& token_hash,
                         WallTime at) {
  return stored.token_hash == token_hash && !stored.revoked && stored.expires_at > at &&
         !stored.owner_deactivated;
}

ClusterBinding DecideClusterBinding(const std::optional<std::string>& bound_cluster_uid,
                                    const std::string& cluster_uid) {
  if (!bound_cluster_uid) return ClusterBinding::kBind;
  return *bound_cluster_uid == cluster_uid ? ClusterBinding::kAlreadyBound
                                           : ClusterBinding::kMismatch;
}

std::string NodesDigest(std::span<const protocol::InventoryNode> nodes) {
  json::array encoded;
  encoded.reserve(nodes.size());
  for (const protocol::InventoryNode& node : nodes) {
    encoded.emplace_back(protocol::EncodeInventoryNode(node));
  }
  return Sha256Hex(ToJson(encoded));
}

}  // namespace uplink::console
