// SqlStore's connections area (connection_store.h): connections, tokens and handovers,
// inventory reports, the cluster binding, presence and agents.

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "common/json.h"
#include "common/text.h"
#include "console/store/rules/connection_rules.h"
#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"

namespace uplink::console {
namespace {

constexpr const char* kHandoverColumns =
    "id, connection_id, lookup_prefix, code_hash, created_at, expires_at, redeemed_at, "
    "superseded_at";

// Every connection query joins its owner, so that authenticating an agent is one query.
constexpr const char* kConnectionColumns =
    "c.id, c.owner_id, c.agent_name, c.cluster_name, c.token_prefix, c.token_hash, "
    "c.created_at, c.expires_at, c.revoked_at, c.last_report_at, c.cluster_uid, "
    "c.agent_version, c.selector, c.collected_at, c.node_count, c.nodes_ready, "
    "c.gpu_capacity, c.gpu_allocatable, c.gpus_ready, u.deactivated_at, "
    // Whether the owner lacks the two-factor sign-in the console requires: answered with the
    // row, so that the agent's cached row carries it (every write empties that cache).
    "(SELECT require_two_factor <> 0 FROM console_settings WHERE id = 1) AND NOT EXISTS "
    "(SELECT 1 FROM two_factor t WHERE t.user_id = c.owner_id AND t.enabled_at IS NOT NULL), "
    "c.last_seen_at";

Handover HandoverFromRow(const auto& row) {
  Handover handover;
  handover.id = row.Text(0);
  handover.connection_id = row.Text(1);
  handover.lookup_prefix = row.Text(2);
  handover.code_hash = row.Text(3);
  handover.created_at = row.Time(4);
  handover.expires_at = row.Time(5);
  handover.redeemed_at = row.OptionalTime(6);
  handover.superseded_at = row.OptionalTime(7);
  return handover;
}

Connection ConnectionFromRow(const auto& row) {
  Connection c;
  c.id = row.Text(0);
  c.owner_id = row.Text(1);
  c.agent_name = row.Text(2);
  c.cluster_name = row.Text(3);
  c.token_prefix = row.Text(4);
  c.token_hash = row.Text(5);
  c.created_at = row.Time(6);
  c.expires_at = row.Time(7);
  c.revoked_at = row.OptionalTime(8);
  c.last_report_at = row.OptionalTime(9);
  c.cluster_uid = row.OptionalText(10);
  c.agent_version = row.Text(11);
  c.selector = row.Text(12);
  c.collected_at = row.OptionalTime(13);
  c.totals = {row.Int(14), row.Int(15), row.Int(16), row.Int(17), row.Int(18)};
  c.owner_deactivated_at = row.OptionalTime(19);
  c.owner_needs_two_factor = row.Int(20) != 0;
  c.last_seen_at = row.OptionalTime(21);
  return c;
}

std::string ConnectionQuery(const char* tail) {
  return std::string("SELECT ") + kConnectionColumns +
         " FROM connections c JOIN users u ON u.id = c.owner_id " + tail;
}

}  // namespace

InventoryTotals ComputeTotals(const std::vector<Node>& nodes) {
  InventoryTotals totals;
  for (const Node& node : nodes) {
    ++totals.nodes;
    totals.gpu_capacity += node.gpu_capacity;
    totals.gpu_allocatable += node.gpu_allocatable;
    if (node.ready) {
      ++totals.nodes_ready;
      if (!node.unschedulable) totals.gpus_ready += node.gpu_allocatable;
    }
  }
  return totals;
}

// --- Connections and handovers -------------------------------------------------------------

Status SqlStore::InsertConnection(const Connection& c) {
  auto inserted = Change(
      "INSERT INTO connections (id, owner_id, agent_name, cluster_name, token_prefix, "
      "token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(c.id).Bind(c.owner_id).Bind(c.agent_name).Bind(c.cluster_name);
        s.Bind(c.token_prefix).Bind(c.token_hash).Bind(c.created_at).Bind(c.expires_at);
      },
      "creating connection");
  if (!inserted.ok()) {
    sql::Failure failure = db_->LastFailure();
    if (failure == sql::Failure::kUnique) {
      return ConflictError("a connection for cluster \"" + OneLineExcerpt(c.cluster_name, 63) +
                           "\" already exists; rotate its token, or revoke it first");
    }
    if (failure == sql::Failure::kForeignKey) {
      return NotFoundError("user " + c.owner_id + " does not exist");
    }
  }
  return inserted.status();
}

Status SqlStore::InsertHandover(const Handover& h) {
  auto inserted = Change(
      "INSERT INTO handovers (id, connection_id, lookup_prefix, code_hash, created_at, "
      "expires_at, redeemed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(h.id).Bind(h.connection_id).Bind(h.lookup_prefix).Bind(h.code_hash);
        s.Bind(h.created_at).Bind(h.expires_at).Bind(h.redeemed_at);
      },
      "creating handover");
  if (!inserted.ok() && db_->LastFailure() == sql::Failure::kForeignKey) {
    return NotFoundError("connection " + h.connection_id + " does not exist");
  }
  return inserted.status();
}

Status SqlStore::SupersedePendingHandovers(const std::string& connection_id, WallTime at) {
  return Change(
             "UPDATE handovers SET superseded_at = ? WHERE connection_id = ? "
             "AND redeemed_at IS NULL AND superseded_at IS NULL",
             [&](Statement& s) { s.Bind(at).Bind(connection_id); }, "superseding handovers")
      .status();
}

Status SqlStore::CreateConnection(const Connection& connection, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertConnection(connection));
    return InsertAudit(audit);
  });
}

Status SqlStore::CreateConnectionWithHandover(const Connection& connection,
                                                 const Handover& handover,
                                                 const AuditEvent& audit) {
  if (handover.connection_id != connection.id) {
    return InvalidArgumentError("the handover is for connection " + handover.connection_id +
                                ", not for the new connection " + connection.id);
  }
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertConnection(connection));
    UPLINK_RETURN_IF_ERROR(InsertHandover(handover));
    return InsertAudit(audit);
  });
}

Result<std::vector<Connection>> SqlStore::QueryConnections(sql::Database& database,
                                                           std::string_view sql,
                                                           const std::string& key) {
  std::vector<Connection> connections;
  UPLINK_RETURN_IF_ERROR(ForEachRowOn(
      database, sql,
      [&](Statement& s) {
        if (!key.empty()) s.Bind(key);
      },
      [&](const Statement& row) { connections.push_back(ConnectionFromRow(row)); },
      "reading connections"));
  return connections;
}

Result<Connection> SqlStore::ReadConnection(sql::Database& database, const std::string& id) {
  static const std::string sql = ConnectionQuery("WHERE c.id = ?");
  UPLINK_ASSIGN_OR_RETURN(auto found, QueryConnections(database, sql.c_str(), id));
  if (found.empty()) return NotFoundError("connection " + id + " does not exist");
  return std::move(found.front());
}

Result<Connection> SqlStore::GetConnection(const std::string& id) {
  return ReadOnLookup([&](sql::Database& database) { return ReadConnection(database, id); });
}

Result<std::vector<Connection>> SqlStore::ListConnections(const std::string& owner_id) {
  static const std::string sql =
      ConnectionQuery("WHERE c.owner_id = ? ORDER BY c.created_at, c.rowid");
  return ReadOnLookup(
      [&](sql::Database& database) { return QueryConnections(database, sql.c_str(), owner_id); });
}

Result<std::vector<Connection>> SqlStore::ListAllConnections() {
  static const std::string sql = ConnectionQuery("ORDER BY c.created_at, c.rowid");
  return ReadOnLookup(
      [&](sql::Database& database) { return QueryConnections(database, sql.c_str(), ""); });
}

Result<std::vector<ConnectionLifecycle>> SqlStore::ListConnectionLifecycles() {
  // Read on each /metrics scrape: four columns of one table rather than whole rows with their
  // owner's join, on a lookup connection where the store has them, so that the writer, which
  // needs mutex_ for each upload, does not wait for the read.
  return ReadOnLookup([](sql::Database& database) -> Result<std::vector<ConnectionLifecycle>> {
    std::vector<ConnectionLifecycle> lifecycles;
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database, "SELECT id, expires_at, revoked_at, last_seen_at FROM connections",
        [](Statement&) {},
        [&](const Statement& row) {
          lifecycles.push_back(ConnectionLifecycle{row.Text(0), row.Time(1), row.OptionalTime(2),
                                                   row.OptionalTime(3)});
        },
        "reading connections"));
    return lifecycles;
  });
}

Result<ConnectionRows> SqlStore::FindConnectionsByTokenPrefix(
    const std::string& prefix) {
  static const std::string sql = ConnectionQuery("WHERE c.token_prefix = ?");
  // Bounds the cache: prefixes are 48 random bits, so only well-formed tokens that match a
  // connection are kept, and there are far fewer live connections than this.
  constexpr size_t kMaxCachedPrefixes = 65536;
  if (AuthenticatesOnLookups()) {
    sql::ConnectionPool::Lease lookup = lookups_.Borrow();
    std::vector<Connection> found;
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        *lookup, sql, [&](Statement& s) { s.Bind(prefix); },
        [&](const Statement& row) { found.push_back(ConnectionFromRow(row)); },
        "reading connections"));
    return ConnectionRows(std::make_shared<const std::vector<Connection>>(std::move(found)));
  }
  auto cached = [&]() -> ConnectionRows {
    std::lock_guard cache(credential_cache_mutex_);
    auto found = connections_by_token_prefix_.find(prefix);
    return found == connections_by_token_prefix_.end() ? nullptr : found->second;
  };
  if (ConnectionRows hit = cached()) return hit;
  std::lock_guard lock(mutex_);
  if (ConnectionRows hit = cached()) return hit;  // read by another caller meanwhile
  UPLINK_ASSIGN_OR_RETURN(std::vector<Connection> found,
                          QueryConnections(*db_, sql.c_str(), prefix));
  auto connections = std::make_shared<const std::vector<Connection>>(std::move(found));
  if (caches_credentials_ && !connections->empty()) {
    std::lock_guard cache(credential_cache_mutex_);
    if (connections_by_token_prefix_.size() >= kMaxCachedPrefixes) {
      connections_by_token_prefix_.clear();
    }
    connections_by_token_prefix_.emplace(prefix, connections);
  }
  return ConnectionRows(std::move(connections));
}

Status SqlStore::ReplaceToken(const std::string& id, const std::string& token_prefix,
                                 const std::string& token_hash, WallTime expires_at,
                                 const std::optional<Handover>& handover,
                                 const AuditEvent& audit) {
  if (handover && handover->connection_id != id) {
    return InvalidArgumentError("the handover is for connection " + handover->connection_id +
                                ", not for connection " + id);
  }
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE connections SET token_prefix = ?, token_hash = ?, expires_at = ? "
               "WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) {
                 s.Bind(token_prefix).Bind(token_hash).Bind(expires_at).Bind(id);
               },
               "replacing token"));
    if (changed == 0) {
      // Either it does not exist or a revoke got there first; a revoked connection stays dead.
      UPLINK_RETURN_IF_ERROR(
          CheckExists("SELECT 1 FROM connections WHERE id = ?", id, "connection"));
      return FailedPreconditionError("this connection was revoked and cannot get a new token; "
                                     "create a new connection");
    }
    // An older code would otherwise mint a token over the one just made.
    UPLINK_RETURN_IF_ERROR(SupersedePendingHandovers(id, audit.at));
    if (handover) UPLINK_RETURN_IF_ERROR(InsertHandover(*handover));
    return InsertAudit(audit);
  });
}

Status SqlStore::RevokeConnection(const std::string& id, WallTime at,
                                     const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE connections SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) { s.Bind(at).Bind(id); }, "revoking connection"));
    if (changed == 0) {
      return CheckExists("SELECT 1 FROM connections WHERE id = ?", id, "connection");
    }
    UPLINK_RETURN_IF_ERROR(SupersedePendingHandovers(id, at));
    return InsertAudit(audit);
  });
}

Result<std::vector<Handover>> SqlStore::FindHandoversByPrefix(const std::string& prefix) {
  static const std::string sql = SelectFrom(kHandoverColumns, "handovers WHERE lookup_prefix = ?");
  std::vector<Handover> handovers;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(prefix); },
      [&](const Statement& row) { handovers.push_back(HandoverFromRow(row)); },
      "looking up handover"));
  return handovers;
}

Result<std::optional<Handover>> SqlStore::LatestHandover(const std::string& connection_id) {
  static const std::string sql =
      SelectFrom(kHandoverColumns,
                 "handovers WHERE connection_id = ? ORDER BY created_at DESC, rowid DESC LIMIT 1");
  std::optional<Handover> latest;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) { latest = HandoverFromRow(row); }, "reading handover"));
  return latest;
}

Result<HandoverRedemption> SqlStore::RedeemHandover(const std::string& handover_id,
                                                       WallTime now,
                                                       const std::string& token_prefix,
                                                       const std::string& token_hash,
                                                       const AuditEvent& audit) {
  std::optional<Connection> redeemed;
  std::optional<HandoverRefusal> refusal;
  Status status = WriteTransaction([&]() -> Status {
    std::string connection_id;
    std::optional<HandoverState> state;
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT h.connection_id, h.expires_at, h.redeemed_at IS NOT NULL, "
        "h.superseded_at IS NOT NULL, c.revoked_at IS NOT NULL, u.deactivated_at IS NOT NULL "
        "FROM handovers h JOIN connections c ON c.id = h.connection_id "
        "JOIN users u ON u.id = c.owner_id WHERE h.id = ?",
        [&](Statement& s) { s.Bind(handover_id); },
        [&](const Statement& row) {
          connection_id = row.Text(0);
          state = HandoverState{row.Time(1), row.Int(2) != 0, row.Int(3) != 0, row.Int(4) != 0,
                                row.Int(5) != 0};
        },
        "reading handover"));
    if (!state) return NotFoundError("handover " + handover_id + " does not exist");

    refusal = JudgeHandoverRedemption(*state, now);
    if (refusal) {
      AuditEvent refused = audit;
      refused.action = "handover.refused";
      refused.outcome = "refused";
      refused.detail =
          ToJson(json::object{{"reason", HandoverRefusalCode(refusal->reason)}});
      return InsertAudit(refused);
    }

    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE handovers SET redeemed_at = ? WHERE id = ?",
               [&](Statement& s) { s.Bind(now).Bind(handover_id); }, "redeeming handover")
            .status());
    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE connections SET token_prefix = ?, token_hash = ? WHERE id = ?",
               [&](Statement& s) { s.Bind(token_prefix).Bind(token_hash).Bind(connection_id); },
               "installing the handed-over token")
            .status());
    UPLINK_RETURN_IF_ERROR(InsertAudit(audit));
    UPLINK_ASSIGN_OR_RETURN(redeemed, ReadConnection(*db_, connection_id));
    return Status::Ok();
  });
  if (!status.ok()) return status;
  if (refusal) return HandoverRedemption(std::move(*refusal));
  return HandoverRedemption(std::move(*redeemed));
}

// --- Reports -------------------------------------------------------------------------------

Status SqlStore::AcceptReport(const std::string& connection_id, const std::string& token_hash,
                              const InventoryReport& report, WallTime received_at,
                              const AuditEvent& audit) {
  const std::string nodes_digest = NodesDigest(report.nodes);
  Status refusal;
  Status status = WriteTransaction(
      [&] {
        return StoreReport(connection_id, token_hash, report, nodes_digest, received_at, audit,
                           refusal);
      },
      CredentialCache::kKeep);
  if (!status.ok()) return status;
  return refusal;
}

void SqlStore::AcceptReportThen(std::string connection_id, std::string token_hash,
                                std::shared_ptr<const InventoryReport> report,
                                WallTime received_at, AuditEvent audit,
                                std::function<void(Status)> done) {
  struct Report {
    std::string connection_id;
    std::string token_hash;
    std::shared_ptr<const InventoryReport> report;
    std::string nodes_digest;
    WallTime received_at;
    AuditEvent audit;
    Status refusal;
  };
  // The digest on the caller's thread: the writer's is the one every write waits for.
  std::string nodes_digest = NodesDigest(report->nodes);
  auto pending = std::make_shared<Report>(Report{std::move(connection_id), std::move(token_hash),
                                                 std::move(report), std::move(nodes_digest),
                                                 received_at, std::move(audit), Status::Ok()});
  WriteTransactionThen(
      [this, pending] {
        return StoreReport(pending->connection_id, pending->token_hash, *pending->report,
                           pending->nodes_digest, pending->received_at, pending->audit,
                           pending->refusal);
      },
      [pending, done = std::move(done)](Status status) {
        done(status.ok() ? pending->refusal : std::move(status));
      },
      CredentialCache::kKeep);
}

// IMMEDIATE: two reports racing for the first binding must not both see it unset. A report
// changes nothing authentication reads (token, expiry, revocation, owner), so it keeps the
// credential cache, except for the first binding, which callers see on the connection.
Status SqlStore::StoreReport(const std::string& connection_id, const std::string& token_hash,
                             const InventoryReport& report, const std::string& nodes_digest,
                             WallTime received_at, const AuditEvent& audit, Status& refusal) {
  refusal = Status::Ok();  // afresh: the writer may run this again (WriteTransactionThen)
  // The token check (as CheckTokenLive), the digest of the last report's nodes and a draft
  // offer waiting for this inventory, in one query: a steady report's only wait for the
  // database; what it writes goes in the pipeline of the transaction's next wait.
  std::optional<StoredAgentToken> token;
  std::optional<std::string> bound;
  std::optional<std::string> stored_digest;
  std::optional<std::pair<std::string, std::string>> draft_offer;  // id, owner
  static const std::string sql =
      "SELECT " + std::string(kAgentTokenColumns) +
      ", c.cluster_uid, c.nodes_digest, o.id, o.owner_id "
      "FROM connections c JOIN users u ON u.id = c.owner_id "
      "LEFT JOIN offers o ON o.connection_id = c.id AND o.state = 'draft' WHERE c.id = ?";
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql, [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) {
        token = AgentTokenFromRow(row);
        bound = row.OptionalText(4);
        stored_digest = row.OptionalText(5);
        if (!row.IsNull(6)) draft_offer.emplace(row.Text(6), row.Text(7));
      },
      "reading connection"));
  UPLINK_RETURN_IF_ERROR(TokenStillLive(token, connection_id, token_hash, received_at, "report"));
  if (bound && *bound != report.cluster_uid) {
    // Commits only the refusal's audit event.
    refusal = RefuseClusterMismatch(audit, report.cluster_uid, *bound);
    return refusal.code() == StatusCode::kConflict ? Status::Ok() : refusal;
  }

  InventoryTotals totals = ComputeTotals(report.nodes);
  UPLINK_RETURN_IF_ERROR(
      Defer("UPDATE connections SET cluster_uid = ?, last_report_at = ?, "
            "last_seen_at = CASE WHEN last_seen_at > ? THEN last_seen_at ELSE ? END, "
            "agent_version = ?, "
            "selector = ?, collected_at = ?, node_count = ?, nodes_ready = ?, "
            "gpu_capacity = ?, gpu_allocatable = ?, gpus_ready = ?, nodes_digest = ? "
            "WHERE id = ?",
            [&](Statement& s) {
              s.Bind(report.cluster_uid).Bind(received_at).Bind(received_at);
              s.Bind(received_at).Bind(report.agent_version);
              s.Bind(report.selector).Bind(report.collected_at).Bind(totals.nodes);
              s.Bind(totals.nodes_ready).Bind(totals.gpu_capacity);
              s.Bind(totals.gpu_allocatable).Bind(totals.gpus_ready).Bind(nodes_digest);
              s.Bind(connection_id);
            },
            "updating connection"));
  if (!bound) {
    ForgetCachedCredentials();
    AuditEvent bind = audit;
    bind.action = "connection.bind";
    bind.outcome = "ok";
    bind.detail = ToJson(json::object{{"cluster_uid", report.cluster_uid}});
    UPLINK_RETURN_IF_ERROR(DeferAudit(bind));
  }
  const AgentSeen reporter{"inventory", report.agent_instance, report.agent_version, received_at};
  const std::pair<std::string_view, const AgentSeen*> reporter_row{connection_id, &reporter};
  UPLINK_RETURN_IF_ERROR(RecordAgents({&reporter_row, 1}));
  // An offer waiting for its cluster's inventory is connected now.
  if (draft_offer) {
    UPLINK_RETURN_IF_ERROR(
        MarkOfferConnected(connection_id, draft_offer->first, draft_offer->second, audit));
  }

  // The same nodes as the last report's (most reports): their rows stand.
  if (stored_digest == nodes_digest) return Status::Ok();
  // Nothing below waits for an answer (on PostgreSQL it all goes in one pipeline, however many
  // nodes the cluster has): a node's resources and taints find its row by its position.
  UPLINK_RETURN_IF_ERROR(Defer("DELETE FROM connection_nodes WHERE connection_id = ?",
                               [&](Statement& s) { s.Bind(connection_id); }, "replacing nodes"));
  std::int64_t position = 0;
  for (const Node& node : report.nodes) {
    UPLINK_RETURN_IF_ERROR(Defer(
        "INSERT INTO connection_nodes (connection_id, position, name, uid, ready, "
        "unschedulable, gpu_resource, gpu_capacity, gpu_allocatable, gpu_product, error) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [&](Statement& s) {
          s.Bind(connection_id).Bind(position).Bind(node.name).Bind(node.uid);
          s.Bind(node.ready).Bind(node.unschedulable).Bind(node.gpu_resource);
          s.Bind(node.gpu_capacity).Bind(node.gpu_allocatable).Bind(node.gpu_product);
          s.Bind(node.error);
        },
        "storing node " + node.name));
    // A position with no row would leave node_id NULL, which the schema refuses.
    for (const GpuResource& resource : node.resources) {
      UPLINK_RETURN_IF_ERROR(Defer(
          "INSERT INTO node_resources (node_id, name, capacity, allocatable) VALUES ("
          "(SELECT id FROM connection_nodes WHERE connection_id = ? AND position = ?), ?, ?, ?)",
          [&](Statement& s) {
            s.Bind(connection_id).Bind(position);
            s.Bind(resource.name).Bind(resource.capacity).Bind(resource.allocatable);
          },
          "storing resources of " + node.name));
    }
    for (const Taint& taint : node.taints) {
      UPLINK_RETURN_IF_ERROR(Defer(
          "INSERT INTO node_taints (node_id, key, value, effect) VALUES ("
          "(SELECT id FROM connection_nodes WHERE connection_id = ? AND position = ?), ?, ?, ?)",
          [&](Statement& s) {
            s.Bind(connection_id).Bind(position);
            s.Bind(taint.key).Bind(taint.value).Bind(taint.effect);
          },
          "storing taints of " + node.name));
    }
    ++position;
  }
  return Status::Ok();
}

Result<std::optional<std::string>> SqlStore::CheckTokenLive(
    const std::string& connection_id, const std::string& token_hash, WallTime at,
    std::string_view what) {
  std::optional<StoredAgentToken> stored;
  std::optional<std::string> bound;
  static const std::string sql = "SELECT " + std::string(kAgentTokenColumns) +
                                 ", c.cluster_uid FROM connections c "
                                 "JOIN users u ON u.id = c.owner_id WHERE c.id = ?";
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql, [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) {
        stored = AgentTokenFromRow(row);
        bound = row.OptionalText(4);
      },
      "reading connection"));
  UPLINK_RETURN_IF_ERROR(TokenStillLive(stored, connection_id, token_hash, at, what));
  return bound;
}

StoredAgentToken SqlStore::AgentTokenFromRow(const Statement& row) {
  return StoredAgentToken{row.Text(0), row.Time(1), row.Int(2) != 0, row.Int(3) != 0};
}

Status SqlStore::TokenStillLive(const std::optional<StoredAgentToken>& stored,
                                const std::string& connection_id, const std::string& token_hash,
                                WallTime at, std::string_view what) {
  if (!stored) return NotFoundError("connection " + connection_id + " does not exist");
  if (!AgentTokenStillLive(*stored, token_hash, at)) {
    return UnauthenticatedError("the connection's token was rotated, revoked or expired, or its "
                                "owner deactivated, while this " + std::string(what) +
                                " was being received; nothing was stored");
  }
  return Status::Ok();
}

Status SqlStore::RefuseClusterMismatch(const AuditEvent& audit, const std::string& cluster_uid,
                                          const std::string& bound) {
  AuditEvent mismatch = audit;
  mismatch.action = "connection.cluster_mismatch";
  mismatch.outcome = "refused";
  json::object detail;
  if (auto given = ParseJson(audit.detail.empty() ? "{}" : audit.detail);
      given.ok() && given->is_object()) {
    detail = std::move(given->get_object());
  }
  detail["cluster_uid"] = cluster_uid;
  detail["bound_cluster_uid"] = bound;
  mismatch.detail = ToJson(detail);
  UPLINK_RETURN_IF_ERROR(InsertAudit(mismatch));
  // The bound UID stays out of the message: the sender may not own that cluster. The
  // connection's owner reads it in the audit log.
  return ConflictError("this connection's token is bound to another cluster (a different "
                       "kube-system UID); create a separate connection for each cluster");
}

// --- Presence, cluster binding, agents and nodes ---------------------------------------------

Status SqlStore::RecordPresence(const PresenceUpdate& update) {
  if (update.connections.empty() && update.agents.empty()) return Status::Ok();
  // One row per connection and per agent, the latest sighting of each, in key order: a
  // statement may not change a row twice (PostgreSQL refuses it in an upsert), and replicas
  // flushing the same connections lock their rows in the same order.
  std::map<std::string_view, WallTime> connections;
  for (const auto& [id, at] : update.connections) {
    auto [it, added] = connections.emplace(id, at);
    if (!added) it->second = std::max(it->second, at);
  }
  using AgentKey = std::tuple<std::string_view, std::string_view, std::string_view>;
  std::map<AgentKey, const AgentSeen*> agents;
  for (const auto& [id, agent] : update.agents) {
    auto [it, added] = agents.emplace(AgentKey(id, agent.role, agent.instance), &agent);
    if (!added && it->second->last_seen_at < agent.last_seen_at) it->second = &agent;
  }
  std::vector<std::pair<std::string_view, WallTime>> connection_rows(connections.begin(),
                                                                     connections.end());
  std::vector<std::pair<std::string_view, const AgentSeen*>> agent_rows;
  agent_rows.reserve(agents.size());
  for (const auto& [key, agent] : agents) agent_rows.emplace_back(std::get<0>(key), agent);
  return WriteTransaction([&]() -> Status {
    std::span<const std::pair<std::string_view, WallTime>> left = connection_rows;
    while (!left.empty()) {
      const size_t rows = RowsPerStatement(left.size());
      UPLINK_RETURN_IF_ERROR(
          Defer("UPDATE connections SET last_seen_at = seen.column2 FROM (VALUES " +
                    PlaceholderRows(rows, 2) +
                    ") AS seen WHERE connections.id = seen.column1 AND "
                    "(connections.last_seen_at IS NULL OR connections.last_seen_at < "
                    "seen.column2)",
                [&](Statement& s) {
                  for (const auto& [id, at] : left.first(rows)) s.BindUnowned(id).Bind(at);
                },
                "recording when agents called"));
      left = left.subspan(rows);
    }
    return RecordAgents(agent_rows);
  }, CredentialCache::kKeep);
}

Status SqlStore::RecordAgents(
    std::span<const std::pair<std::string_view, const AgentSeen*>> agents) {
  // A connection deleted meanwhile has no agents to record: skipped, not an error. An older
  // sighting (a flush retried after a newer one) moves nothing back. The WHERE is SQLite's
  // way to read an upsert after a join.
  while (!agents.empty()) {
    const size_t rows = RowsPerStatement(agents.size());
    UPLINK_RETURN_IF_ERROR(
        Defer("INSERT INTO connection_agents (connection_id, role, instance, version, "
              "last_seen_at) SELECT connections.id, seen.column2, seen.column3, seen.column4, "
              "seen.column5 FROM (VALUES " +
                  PlaceholderRows(rows, 5) +
                  ") AS seen JOIN connections ON connections.id = seen.column1 WHERE true "
                  "ON CONFLICT (connection_id, role, instance) DO UPDATE SET "
                  "version = CASE WHEN excluded.last_seen_at >= connection_agents.last_seen_at "
                  "THEN excluded.version ELSE connection_agents.version END, "
                  "last_seen_at = CASE WHEN excluded.last_seen_at > "
                  "connection_agents.last_seen_at THEN excluded.last_seen_at "
                  "ELSE connection_agents.last_seen_at END",
              [&](Statement& s) {
                for (const auto& [connection_id, agent] : agents.first(rows)) {
                  s.BindUnowned(connection_id).BindUnowned(agent->role);
                  s.BindUnowned(agent->instance).BindUnowned(agent->version);
                  s.Bind(agent->last_seen_at);
                }
              },
              "recording an agent"));
    agents = agents.subspan(rows);
  }
  return Status::Ok();
}

Status SqlStore::BindCluster(const std::string& connection_id, const std::string& token_hash,
                                const std::string& cluster_uid, const AuditEvent& audit) {
  Status refusal;
  Status status = WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> bound,
                            CheckTokenLive(connection_id, token_hash, audit.at, "call"));
    return BindOrRefuse(connection_id, bound, cluster_uid, audit,
                        json::object{{"cluster_uid", cluster_uid}}, refusal);
  }, CredentialCache::kKeep);
  if (!status.ok()) return status;
  return refusal;
}

Status SqlStore::BindOrRefuse(const std::string& connection_id,
                                 const std::optional<std::string>& bound,
                                 const std::string& cluster_uid, const AuditEvent& audit,
                                 const json::object& bind_detail, Status& refusal) {
  switch (DecideClusterBinding(bound, cluster_uid)) {
    case ClusterBinding::kAlreadyBound:
      return Status::Ok();
    case ClusterBinding::kMismatch:
      // Commits only the refusal's audit event.
      refusal = RefuseClusterMismatch(audit, cluster_uid, *bound);
      return refusal.code() == StatusCode::kConflict ? Status::Ok() : refusal;
    case ClusterBinding::kBind:
      break;
  }
  UPLINK_RETURN_IF_ERROR(Defer("UPDATE connections SET cluster_uid = ? WHERE id = ?",
                               [&](Statement& s) { s.Bind(cluster_uid).Bind(connection_id); },
                               "binding the connection to its cluster"));
  // Authentication hands out the connection row: the next call must see the binding.
  ForgetCachedCredentials();
  AuditEvent bind = audit;
  bind.action = "connection.bind";
  bind.outcome = "ok";
  bind.detail = ToJson(bind_detail);
  return DeferAudit(bind);
}

Result<std::vector<AgentSeen>> SqlStore::ListAgents(const std::string& connection_id, int limit) {
  std::vector<AgentSeen> agents;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT role, instance, version, last_seen_at FROM connection_agents "
      "WHERE connection_id = ? ORDER BY last_seen_at DESC, rowid DESC LIMIT ?",
      [&](Statement& s) {
        s.Bind(connection_id).Bind(static_cast<std::int64_t>(std::max(limit, 0)));
      },
      [&](const Statement& row) {
        agents.push_back({row.Text(0), row.Text(1), row.Text(2), row.Time(3)});
      },
      "listing agents"));
  return agents;
}

Result<std::vector<Node>> SqlStore::ListNodes(const std::string& connection_id) {
  // One snapshot across the three reads, so a report landing in between cannot mix lists.
  return ReadSnapshotOnLookup([&](sql::Database& database) -> Result<std::vector<Node>> {
    std::vector<Node> nodes;
    std::unordered_map<std::int64_t, size_t> index_by_id;
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT id, name, uid, ready, unschedulable, gpu_resource, gpu_capacity, "
        "gpu_allocatable, gpu_product, error FROM connection_nodes "
        "WHERE connection_id = ? ORDER BY position",
        [&](Statement& s) { s.Bind(connection_id); },
        [&](const Statement& row) {
          Node node;
          node.name = row.Text(1);
          node.uid = row.Text(2);
          node.ready = row.Int(3) != 0;
          node.unschedulable = row.Int(4) != 0;
          node.gpu_resource = row.Text(5);
          node.gpu_capacity = row.Int(6);
          node.gpu_allocatable = row.Int(7);
          node.gpu_product = row.Text(8);
          node.error = row.OptionalText(9);
          index_by_id.emplace(row.Int(0), nodes.size());
          nodes.push_back(std::move(node));
        },
        "reading nodes"));
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT r.node_id, r.name, r.capacity, r.allocatable FROM node_resources r "
        "JOIN connection_nodes n ON n.id = r.node_id WHERE n.connection_id = ? "
        "ORDER BY r.rowid",
        [&](Statement& s) { s.Bind(connection_id); },
        [&](const Statement& row) {
          auto it = index_by_id.find(row.Int(0));
          if (it == index_by_id.end()) return;
          nodes[it->second].resources.push_back({row.Text(1), row.Int(2), row.Int(3)});
        },
        "reading node resources"));
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT t.node_id, t.key, t.value, t.effect FROM node_taints t "
        "JOIN connection_nodes n ON n.id = t.node_id WHERE n.connection_id = ? "
        "ORDER BY t.rowid",
        [&](Statement& s) { s.Bind(connection_id); },
        [&](const Statement& row) {
          auto it = index_by_id.find(row.Int(0));
          if (it == index_by_id.end()) return;
          nodes[it->second].taints.push_back({row.Text(1), row.Text(2), row.Text(3)});
        },
        "reading node taints"));
    return nodes;
  });
}

}  // namespace uplink::console
