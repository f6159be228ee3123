// SqliteStore's kubectl data (docs/api.md, "kubectl"): each connection's namespace scope and
// its latest cluster snapshot.
#include <sqlite3.h>

#include "console/store/sqlite_statement.h"
#include "console/store/sqlite_store.h"

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

Result<NamespaceScope> SqliteStore::GetNamespaceScope(const std::string& connection_id) {
  std::lock_guard lock(mutex_);
  NamespaceScope scope;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT namespaces FROM namespace_scopes WHERE connection_id = ?",
      [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) { scope = SplitNamespaces(row.Text(0)); },
      "reading namespace scope"));
  return scope;
}

Status SqliteStore::SetNamespaceScope(const std::string& connection_id,
                                      const std::vector<std::string>& namespaces,
                                      const AuditEvent& audit) {
  return WriteTransaction(
      [&]() -> Status {
        auto written = Change(
            "INSERT INTO namespace_scopes (connection_id, namespaces, updated_at) "
            "VALUES (?, ?, ?) ON CONFLICT (connection_id) DO UPDATE SET "
            "namespaces = excluded.namespaces, updated_at = excluded.updated_at",
            [&](Statement& s) {
              s.Bind(connection_id).Bind(JoinNamespaces(namespaces)).Bind(audit.at);
            },
            "setting namespace scope");
        if (!written.ok() && sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_FOREIGNKEY) {
          return NotFoundError("connection " + connection_id + " does not exist");
        }
        UPLINK_RETURN_IF_ERROR(written.status());
        return InsertAudit(audit);
      },
      CredentialCache::kKeep);
}

Result<std::optional<ClusterSnapshot>> SqliteStore::GetClusterSnapshot(
    const std::string& connection_id) {
  std::lock_guard lock(mutex_);
  std::optional<ClusterSnapshot> snapshot;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
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

Status SqliteStore::StoreClusterSnapshot(const std::string& connection_id, const UploadBatch& batch,
                                         const std::vector<const UploadRecord*>& records,
                                         WallTime now, UploadOutcome& outcome) {
  outcome.snapshots_received = static_cast<std::int64_t>(records.size());
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

}  // namespace uplink::console
