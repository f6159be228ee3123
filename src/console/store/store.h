// What the console keeps: users, their API keys, connections and the last inventory each
// connection reported.
//
// Store is an interface so that a PostgreSQL implementation can replace SQLite without
// touching callers. Credentials are never stored: only their SHA-256 hash and a short,
// non-secret lookup prefix.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace uplink::console {

struct User {
  std::string id;
  std::string email;
  bool is_admin = false;
  WallTime created_at;
};

struct ApiKey {
  std::string id;
  std::string user_id;
  std::string lookup_prefix;  // "uk_" + the first characters of the key; not secret
  std::string token_hash;     // lower-case hex SHA-256 of the whole key
  WallTime created_at;
};

struct GpuResource {
  std::string name;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", ...
  std::int64_t capacity = 0;
  std::int64_t allocatable = 0;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;
};

struct Node {
  std::string name;
  std::string uid;
  bool ready = false;
  bool unschedulable = false;
  std::string gpu_resource;
  std::int64_t gpu_capacity = 0;
  std::int64_t gpu_allocatable = 0;
  std::string gpu_product;
  std::vector<GpuResource> resources;
  std::vector<Taint> taints;
  std::optional<std::string> error;  // the agent could not read this node's data
};

// Sums kept with the connection and updated with each report, so totals are read without
// summing node rows. The API's connection list and single connection carry the nodes as well,
// read with ListNodes.
struct InventoryTotals {
  std::int64_t nodes = 0;
  std::int64_t nodes_ready = 0;
  std::int64_t gpu_capacity = 0;
  std::int64_t gpu_allocatable = 0;
  std::int64_t gpus_ready = 0;  // allocatable GPUs on ready, schedulable nodes
};

InventoryTotals ComputeTotals(const std::vector<Node>& nodes);

struct InventoryReport {
  std::string agent_version;
  std::string cluster_uid;
  std::string selector;
  std::optional<WallTime> collected_at;
  std::vector<Node> nodes;
};

struct Connection {
  std::string id;
  std::string owner_id;
  std::string agent_name;
  std::string cluster_name;
  std::string token_prefix;  // "agt_" + the first characters of the token; not secret
  std::string token_hash;
  WallTime created_at;
  WallTime expires_at;
  std::optional<WallTime> revoked_at;
  std::optional<WallTime> last_report_at;
  std::optional<std::string> cluster_uid;  // bound by the first accepted report
  std::string agent_version;
  std::string selector;
  std::optional<WallTime> collected_at;
  InventoryTotals totals;
};

class Store {
 public:
  virtual ~Store() = default;

  // A trivial query, for readiness.
  virtual Status Ping() = 0;

  virtual Status CreateUser(const User& user) = 0;
  virtual Result<User> GetUser(const std::string& id) = 0;
  virtual Result<std::int64_t> CountUsers() = 0;

  virtual Status CreateApiKey(const ApiKey& key) = 0;
  // Both or neither: `init` must never leave a user whose only key was lost.
  virtual Status CreateUserWithApiKey(const User& user, const ApiKey& key) = 0;
  // Every key with this lookup prefix (normally one; prefixes are not unique by design).
  virtual Result<std::vector<ApiKey>> FindApiKeysByPrefix(const std::string& prefix) = 0;

  // Conflict when the owner already has a connection that is not revoked with this
  // cluster_name.
  virtual Status CreateConnection(const Connection& connection) = 0;
  virtual Result<Connection> GetConnection(const std::string& id) = 0;
  virtual Result<std::vector<Connection>> ListConnections(const std::string& owner_id) = 0;
  virtual Result<std::vector<Connection>> ListAllConnections() = 0;
  virtual Result<std::vector<Connection>> FindConnectionsByTokenPrefix(
      const std::string& prefix) = 0;
  // Replaces the token (the old one stops matching at once) and its expiry.
  // Refused (FailedPrecondition) once the connection is revoked, whatever the caller read.
  virtual Status ReplaceToken(const std::string& id, const std::string& token_prefix,
                              const std::string& token_hash, WallTime expires_at) = 0;
  // Sets revoked_at unless already set.
  virtual Status RevokeConnection(const std::string& id, WallTime at) = 0;

  // In one transaction: checks that the token the report was authenticated with is still
  // the connection's live token (a rotate or revoke that lands while a large report is being
  // received must win: Unauthenticated, nothing written), binds cluster_uid on the first
  // report, refuses (Conflict, nothing written) a report from another cluster, replaces the
  // node list and records the time.
  virtual Status AcceptReport(const std::string& connection_id, const std::string& token_hash,
                              const InventoryReport& report, WallTime received_at) = 0;
  virtual Result<std::vector<Node>> ListNodes(const std::string& connection_id) = 0;
};

}  // namespace uplink::console
