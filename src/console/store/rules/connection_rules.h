// The rules an agent's call meets before anything it sent is stored: whether the token it was
// authenticated with is still the connection's live token, and what its cluster does to the
// connection's binding (docs/security.md, "Cluster binding"). Plain functions over what the
// store read in the call's transaction, tested without a database.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "common/time.h"
#include "protocol/inventory.h"

namespace uplink::console {

// A connection's token as the store read it in the transaction.
struct StoredAgentToken {
  std::string token_hash;
  WallTime expires_at;
  bool revoked = false;
  bool owner_deactivated = false;
};

// Whether `token_hash`, checked when the call began, is still the live token at `at`: a
// rotate, revoke, expiry or deactivation that landed while a large body was being received
// wins. Both hashes come from the console, so a plain comparison leaks nothing.
bool AgentTokenStillLive(const StoredAgentToken& stored, const std::string& token_hash,
                         WallTime at);

enum class ClusterBinding {
  kAlreadyBound,  // bound to this cluster: nothing to write
  kBind,          // not bound yet: bind it to this cluster (audited "connection.bind")
  kMismatch,      // bound to another cluster: refused (audited "connection.cluster_mismatch")
};

ClusterBinding DecideClusterBinding(const std::optional<std::string>& bound_cluster_uid,
                                    const std::string& cluster_uid);

// The SHA-256 (hex) of a report's nodes, in order, as the protocol encodes them: equal
// digests mean the nodes' stored rows would be written again the same, so they are not.
// Built from the encoder so that a field added to a node is covered without a change here.
std::string NodesDigest(std::span<const protocol::InventoryNode> nodes);

}  // namespace uplink::console
