// SqlStore's kubectl data (docs/api.md, "kubectl"): each connection's namespace scope, its
// latest cluster snapshot and the last hour of its pods' usage.

#include <algorithm>

#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"

namespace uplink::console {
namespace {

// Namespace names (DNS-1123 labels) and "*" hold no comma.
std::string JoinNamespaces(const std::vector<std::string>& namespaces) {
  std::string joined;
  for (const std::string& name : namespaces) {
    if (!joined.empty()) joined += ',';
    joined += name;
  }
  return joined;
}

std::vector<std::string> SplitNamespaces(std::string_view joined) {
  std::vector<std::string> names;
  while (!joined.empty()) {
    size_t comma = joined.find(',');
    std::string_view name = joined.substr(0, comma);
    if (!name.empty()) names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    joined.remove_prefix(comma + 1);
  }
  return names;
}

}  // namespace

Result<NamespaceScope> SqlStore::GetNamespaceScope(const std::string& connection_id) {
  return ReadOnLookup([&](sql::Database& database) -> Result<NamespaceScope> {
    NamespaceScope scope;
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database, "SELECT namespaces FROM namespace_scopes WHERE connection_id = ?",
        [&](Statement& s) { s.Bind(connection_id); },
        [&](const Statement& row) { scope = NamespaceScopeFromRow(row, 0); },
        "reading namespace scope"));
    return scope;
  });
}

NamespaceScope SqlStore::NamespaceScopeFromRow(const Statement& row, int column) {
  if (row.IsNull(column)) return std::nullopt;
  return SplitNamespaces(row.Text(column));
}

Status SqlStore::WriteNamespaceScope(const std::string& connection_id,
                                        const std::vector<std::string>& namespaces, WallTime at) {
  auto written = Change(
      "INSERT INTO namespace_scopes (connection_id, namespaces, updated_at) "
      "VALUES (?, ?, ?) ON CONFLICT (connection_id) DO UPDATE SET "
      "namespaces = excluded.namespaces, updated_at = excluded.updated_at",
      [&](Statement& s) { s.Bind(connection_id).Bind(JoinNamespaces(namespaces)).Bind(at); },
      "setting namespace scope");
  if (!written.ok() && db_->LastFailure() == sql::Failure::kForeignKey) {
    return NotFoundError("connection " + connection_id + " does not exist");
  }
  return written.status();
}

Status SqlStore::SetNamespaceScope(const std::string& connection_id,
                                      const std::vector<std::string>& namespaces,
                                      const AuditEvent& audit) {
  return WriteTransaction(
      [&]() -> Status {
        UPLINK_RETURN_IF_ERROR(WriteNamespaceScope(connection_id, namespaces, audit.at));
        return InsertAudit(audit);
      },
      CredentialCache::kKeep);
}

Status SqlStore::CreateConnectionWithScope(const Connection& connection,
                                              const std::optional<Handover>& handover,
                                              const std::vector<std::string>& namespaces,
                                              const AuditEvent& audit) {
  if (handover && handover->connection_id != connection.id) {
    return InvalidArgumentError("the handover is for connection " + handover->connection_id +
                                ", not for the new connection " + connection.id);
  }
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertConnection(connection));
    if (handover) UPLINK_RETURN_IF_ERROR(InsertHandover(*handover));
    UPLINK_RETURN_IF_ERROR(WriteNamespaceScope(connection.id, namespaces, audit.at));
    return InsertAudit(audit);
  });
}

Result<std::optional<ClusterSnapshot>> SqlStore::GetClusterSnapshot(
    const std::string& connection_id) {
  std::optional<ClusterSnapshot> snapshot;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT stream, collected_at, received_at, payload FROM cluster_snapshots "
      "WHERE connection_id = ?",
      [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) {
        snapshot = ClusterSnapshot{row.Text(0), FromUnixMillis(row.Int(1)),
                                   FromUnixMillis(row.Int(2)), row.Text(3)};
      },
      "reading cluster snapshot"));
  return snapshot;
}

Status SqlStore::StoreClusterSnapshot(const std::string& connection_id, const UploadBatch& batch,
                                         const std::vector<const UploadRecord*>& records,
                                         WallTime now, UploadOutcome& outcome) {
  outcome.snapshots_received = static_cast<std::int64_t>(records.size());
  if (!records.empty()) UPLINK_RETURN_IF_ERROR(StorePodUsage(connection_id, batch, records, now));
  const UploadRecord* newest = nullptr;
  for (const UploadRecord* record : records) {
    // Ties go to the later record: it was appended after the other.
    if (!newest || *record->cluster_snapshot_at >= *newest->cluster_snapshot_at) newest = record;
  }
  if (!newest) return Status::Ok();
  UPLINK_ASSIGN_OR_RETURN(
      int changed,
      Change(
          "INSERT INTO cluster_snapshots (connection_id, stream, collected_at, received_at, "
          "payload) VALUES (?, ?, ?, ?, ?) ON CONFLICT (connection_id) DO UPDATE SET "
          "stream = excluded.stream, collected_at = excluded.collected_at, "
          "received_at = excluded.received_at, payload = excluded.payload "
          "WHERE excluded.collected_at >= cluster_snapshots.collected_at",
          [&](Statement& s) {
            s.Bind(connection_id).Bind(batch.stream);
            s.Bind(ToUnixMillis(*newest->cluster_snapshot_at)).Bind(ToUnixMillis(now));
            s.BindUnowned(batch.Payload(*newest));
          },
          "storing cluster snapshot"));
  outcome.snapshot_replaced = changed > 0;
  return Status::Ok();
}

Status SqlStore::StorePodUsage(const std::string& connection_id, const UploadBatch& batch,
                                  const std::vector<const UploadRecord*>& records, WallTime now) {
  // A little more than the window, so that a summary read right after an upload whose
  // snapshots are a few seconds older than the console's clock still sees a full hour.
  constexpr std::chrono::minutes kMargin{10};
  const std::int64_t oldest_kept = ToUnixMillis(now - kPodUsageWindow - kMargin);
  UPLINK_RETURN_IF_ERROR(Change(
      "DELETE FROM pod_usage WHERE connection_id = ? AND collected_at < ?",
      [&](Statement& s) { s.Bind(connection_id).Bind(oldest_kept); }, "pruning pod usage")
                             .status());
  for (const PodUsage& usage : batch.pod_usage) {
    const bool stored = std::any_of(records.begin(), records.end(), [&](const UploadRecord* r) {
      return r->sequence == usage.sequence;
    });
    const std::int64_t collected_at = ToUnixMillis(usage.collected_at);
    if (!stored || collected_at < oldest_kept) continue;
    // A snapshot sent again after a lost reply has the same time: the first one stays.
    UPLINK_RETURN_IF_ERROR(Change(
        "INSERT INTO pod_usage (connection_id, collected_at, namespace, pod, cpu_millicores, "
        "memory_bytes) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [&](Statement& s) {
          s.Bind(connection_id).Bind(collected_at).Bind(usage.namespace_name).Bind(usage.pod);
          s.Bind(usage.cpu_millicores).Bind(usage.memory_bytes);
        },
        "storing pod usage")
                               .status());
  }
  return Status::Ok();
}

Result<std::vector<PodUsageSummary>> SqlStore::SummarizePodUsage(const std::string& connection_id,
                                                                 WallTime since) {
  std::vector<PodUsageSummary> summaries;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT namespace, pod, COUNT(*), CAST(ROUND(AVG(cpu_millicores)) AS BIGINT), "
      "MAX(cpu_millicores), CAST(ROUND(AVG(memory_bytes)) AS BIGINT), MAX(memory_bytes) "
      "FROM pod_usage WHERE connection_id = ? AND collected_at >= ? "
      "GROUP BY namespace, pod ORDER BY namespace, pod",
      [&](Statement& s) { s.Bind(connection_id).Bind(ToUnixMillis(since)); },
      [&](const Statement& row) {
        summaries.push_back(PodUsageSummary{row.Text(0), row.Text(1), row.Int(2), row.Int(3),
                                            row.Int(4), row.Int(5), row.Int(6)});
      },
      "summarizing pod usage"));
  return summaries;
}

}  // namespace uplink::console
