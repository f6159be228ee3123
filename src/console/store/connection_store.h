// The connections area of the console's store: connections and their tokens, the handover
// codes that deliver a token, the inventory each connection reported, which agents call,
// and what the owner chose for it (namespace scope, install commands).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "console/store/audit_store.h"
#include "console/store/rules/handover_rules.h"
#include "protocol/inventory.h"

namespace uplink::console {

// A one-time code that hands a connection's new token to a terminal. Redeeming it mints the
// token, so no token ever rests in the store, even encrypted.
struct Handover {
  std::string id;
  std::string connection_id;
  std::string lookup_prefix;  // "hoc_…"
  std::string code_hash;
  WallTime created_at;
  WallTime expires_at;
  std::optional<WallTime> redeemed_at;
  std::optional<WallTime> superseded_at;  // a later rotate or the revoke turned it off
};


// The inventory as the agent reports it (protocol/inventory.h).
using protocol::GpuResource;
using protocol::InventoryReport;
using protocol::Taint;
using Node = protocol::InventoryNode;

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
  std::optional<WallTime> last_report_at;  // the last accepted inventory report
  // The last accepted agent call of any role, as the store has it: the console notes calls in
  // memory (AgentPresence) and writes them down at most every 30 s.
  std::optional<WallTime> last_seen_at;
  std::optional<std::string> cluster_uid;  // bound by the first call that names its cluster
  std::string agent_version;
  std::string selector;
  std::optional<WallTime> collected_at;
  InventoryTotals totals;
  // Read with the connection (a join), so that authenticating an agent is one query.
  std::optional<WallTime> owner_deactivated_at;
  // The console requires two-factor sign-in and the owner has not set it up: the agent is
  // refused (403 owner_needs_two_factor). Read with the connection, like the above.
  bool owner_needs_two_factor = false;
};

using ConnectionRows = std::shared_ptr<const std::vector<Connection>>;

// What a connection's status and liveness are computed from (connection_view.h), without the
// rest of its row: all that a /metrics scrape reads of each connection.
struct ConnectionLifecycle {
  std::string id;
  WallTime expires_at;
  std::optional<WallTime> revoked_at;
  std::optional<WallTime> last_seen_at;  // as the store has it, like Connection's
};

// What redeeming a handover code came to: the connection with its new token, or the refusal.
using HandoverRedemption = std::variant<Connection, HandoverRefusal>;

// One running agent of a connection, as it last reported: the inventory Deployment, the
// cluster Deployment, each node of the DaemonSet.
struct AgentSeen {
  std::string role;      // "inventory", "cluster", "node", ...
  std::string instance;  // pod or node name; empty when the agent did not say
  std::string version;
  WallTime last_seen_at;
};

// What the console noted of agent calls since it last wrote them down (AgentPresence): when
// each connection's agents last called, and which agent made each call.
struct PresenceUpdate {
  std::vector<std::pair<std::string, WallTime>> connections;  // connection id, last call
  std::vector<std::pair<std::string, AgentSeen>> agents;       // connection id, agent
};


// The namespaces a connection's kubectl commands and cluster plan may read (docs/api.md,
// "Namespace scope"): none until its owner chooses; {"*"} for every namespace; otherwise
// DNS-1123 labels, sorted, each once (possibly none: cluster-scoped reads only).
using NamespaceScope = std::optional<std::vector<std::string>>;

// What a connection's install commands were last generated with (docs/api.md, "Install
// commands"): the chart's workloads, the GPU runtime class and the GPU node selector the
// user chose.
struct InstallPlan {
  bool kubernetes = true;         // the cluster Deployment and node DaemonSet besides inventory
  std::string gpu_runtime_class;  // "" when the node pods need none (no GPUs)
  std::string selector;           // a valid label selector, in canonical form
  WallTime updated_at;

  bool SameChoice(const InstallPlan& other) const {
    return kubernetes == other.kubernetes && gpu_runtime_class == other.gpu_runtime_class &&
           selector == other.selector;
  }
};

class ConnectionStore {
 public:
  virtual ~ConnectionStore() = default;

  // Conflict when the owner already has a connection that is not revoked with this
  // cluster_name.
  virtual Status CreateConnection(const Connection& connection, const AuditEvent& audit) = 0;
  // The connection and its first handover code, together (a connection whose token is to be
  // handed over is created with an unusable token hash that nobody knows).
  virtual Status CreateConnectionWithHandover(const Connection& connection,
                                              const Handover& handover,
                                              const AuditEvent& audit) = 0;
  virtual Result<Connection> GetConnection(const std::string& id) = 0;
  virtual Result<std::vector<Connection>> ListConnections(const std::string& owner_id) = 0;
  virtual Result<std::vector<Connection>> ListAllConnections() = 0;
  virtual Result<std::vector<ConnectionLifecycle>> ListConnectionLifecycles() = 0;
  // Shared and immutable, so that authenticating an agent from a cache copies nothing.
  virtual Result<ConnectionRows> FindConnectionsByTokenPrefix(const std::string& prefix) = 0;
  // Replaces the token (the old one stops matching at once) and its expiry, and, when
  // `handover` is given, records it (any earlier unredeemed handover of the connection stops
  // working). Refused (FailedPrecondition) once the connection is revoked, whatever the caller
  // read.
  virtual Status ReplaceToken(const std::string& id, const std::string& token_prefix,
                              const std::string& token_hash, WallTime expires_at,
                              const std::optional<Handover>& handover,
                              const AuditEvent& audit) = 0;
  // Sets revoked_at unless already set; unredeemed handovers stop working.
  virtual Status RevokeConnection(const std::string& id, WallTime at,
                                  const AuditEvent& audit) = 0;

  virtual Result<std::vector<Handover>> FindHandoversByPrefix(const std::string& prefix) = 0;
  // The newest handover of the connection, if any.
  virtual Result<std::optional<Handover>> LatestHandover(const std::string& connection_id) = 0;
  // In one transaction: refuses a handover by JudgeHandoverRedemption (rules/handover_rules.h),
  // reading its state in the transaction so that a rotate, revoke or deactivation landing
  // meanwhile wins; otherwise marks it redeemed and installs the minted token (the expiry
  // stays), writing `audit`, and returns the connection as it now is. A refusal is a value,
  // not an error: it writes nothing but `audit` with action "handover.refused", outcome
  // "refused" and detail {"reason": HandoverRefusalCode(reason)}, so the caller does not
  // record it again. NotFound when there is no such handover.
  virtual Result<HandoverRedemption> RedeemHandover(const std::string& handover_id,
                                                    WallTime now,
                                                    const std::string& token_prefix,
                                                    const std::string& token_hash,
                                                    const AuditEvent& audit) = 0;

  // In one transaction: checks that the token the report was authenticated with is still
  // the connection's live token (a rotate or revoke that lands while a large report is being
  // received must win: Unauthenticated, nothing written), binds cluster_uid on the first
  // report (writing `audit` with action "connection.bind"), refuses (Conflict, nothing
  // written but `audit` with action "connection.cluster_mismatch" and outcome "refused")
  // a report from another cluster, replaces the node list, records the time and the agent
  // (role "inventory", report.agent_instance).
  virtual Status AcceptReport(const std::string& connection_id, const std::string& token_hash,
                              const InventoryReport& report, WallTime received_at,
                              const AuditEvent& audit) = 0;
  // AcceptReport without waiting for it (the HTTP handler of reports): `done` gets what
  // AcceptReport would return, once, on a thread of the store's, after the report is durable
  // or refused. `done` must be short and must not throw.
  virtual void AcceptReportThen(std::string connection_id, std::string token_hash,
                                std::shared_ptr<const InventoryReport> report,
                                WallTime received_at, AuditEvent audit,
                                std::function<void(Status)> done) = 0;
  virtual Result<std::vector<Node>> ListNodes(const std::string& connection_id) = 0;

  // Liveness and the cluster binding on every agent call (docs/api.md, "Liveness").
  // In one transaction, moves each connection's last_seen_at and each agent's last_seen_at
  // forward (never back), adding agents not seen before. Writes no audit event: a call is not
  // a change anyone made. Connections that no longer exist are skipped.
  virtual Status RecordPresence(const PresenceUpdate& update) = 0;
  // In one transaction: checks the token as AcceptReport does (Unauthenticated, nothing
  // written); binds an unbound connection to `cluster_uid`, writing `audit` (action
  // "connection.bind"); does nothing for a connection already bound to it; refuses (Conflict,
  // nothing written but `audit` with action "connection.cluster_mismatch", outcome "refused"
  // and detail {"cluster_uid", "bound_cluster_uid"} plus what `audit.detail` held) a
  // connection bound to another cluster.
  virtual Status BindCluster(const std::string& connection_id, const std::string& token_hash,
                             const std::string& cluster_uid, const AuditEvent& audit) = 0;

  // The agents of a connection, most recently seen first, at most `limit`.
  virtual Result<std::vector<AgentSeen>> ListAgents(const std::string& connection_id,
                                                    int limit) = 0;

  // The namespaces its kubectl commands may read (docs/api.md, "kubectl").
  virtual Result<NamespaceScope> GetNamespaceScope(const std::string& connection_id) = 0;
  // Replaces the scope, writing `audit`. NotFound when the connection does not exist.
  virtual Status SetNamespaceScope(const std::string& connection_id,
                                   const std::vector<std::string>& namespaces,
                                   const AuditEvent& audit) = 0;
  // As CreateConnection, or CreateConnectionWithHandover when `handover` is given, with the
  // namespace scope chosen at creation: one transaction, one audit event.
  virtual Status CreateConnectionWithScope(const Connection& connection,
                                           const std::optional<Handover>& handover,
                                           const std::vector<std::string>& namespaces,
                                           const AuditEvent& audit) = 0;

  // Install commands (docs/api.md): the connection's plan, if commands were ever generated.
  virtual Result<std::optional<InstallPlan>> GetInstallPlan(const std::string& connection_id) = 0;
  // Replaces the plan, writing `audit`. NotFound when the connection does not exist.
  virtual Status SetInstallPlan(const std::string& connection_id, const InstallPlan& plan,
                                const AuditEvent& audit) = 0;
};

}  // namespace uplink::console
