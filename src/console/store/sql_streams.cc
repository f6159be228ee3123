// SqlStore's streams area (stream_store.h): uploads, their epochs, duplicates and loss
// accounting, record retention, and the stream and record reads. What an upload's node
// samples, snapshots and experiment records become is in sql_samples.cc, sql_cluster.cc
// and sql_runs.cc.

#include <algorithm>
#include <string>

#include "common/json.h"
#include "common/text.h"
#include "console/store/rules/connection_rules.h"
#include "console/store/rules/upload_rules.h"
#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"

namespace uplink::console {
namespace {

constexpr const char* kStreamColumns =
    "stream, spool_id, epoch, acked_through, records_stored, duplicates_ignored, lost_records, "
    "dropped_records, dropped_bytes, corrupt_records, corrupt_bytes, rejected_records, "
    "rejected_bytes, first_upload_at, last_upload_at, agent_instance, agent_version";

StreamSummary StreamFromRow(const auto& row) {
  StreamSummary stream;
  stream.stream = row.Text(0);
  stream.spool_id = row.Text(1);
  stream.epoch = row.Int(2);
  stream.acked_through = row.Int(3);
  stream.records_stored = row.Int(4);
  stream.duplicates_ignored = row.Int(5);
  stream.lost_records = row.Int(6);
  stream.agent_losses = {{row.Int(7), row.Int(8)}, {row.Int(9), row.Int(10)},
                         {row.Int(11), row.Int(12)}};
  stream.first_upload_at = row.Time(13);
  stream.last_upload_at = row.Time(14);
  stream.agent_instance = row.Text(15);
  stream.agent_version = row.Text(16);
  return stream;
}

}  // namespace

// --- Uploads -------------------------------------------------------------------------------

Result<std::int64_t> SqlStore::PruneRecords(WallTime now, const RecordRetention& retention) {
  if (!MaintenanceDue(last_prune_, now, retention.interval)) return 0;
  last_prune_ = now;
  UPLINK_ASSIGN_OR_RETURN(
      int deleted,
      Change("DELETE FROM stream_records WHERE id IN (SELECT id FROM stream_records "
             "WHERE received_at < ? ORDER BY received_at LIMIT ?)",
             [&](Statement& s) {
               s.Bind(ToUnixMillis(now - retention.max_age)).Bind(retention.max_records_per_run);
             },
             "deleting old records"));
  return deleted;
}

Status SqlStore::RememberSpool(std::int64_t stream_id, const std::string& spool_id,
                                  std::int64_t epoch) {
  return Defer("INSERT INTO stream_spools (stream_id, spool_id, epoch) VALUES (?, ?, ?)",
               [&](Statement& s) { s.Bind(stream_id).Bind(spool_id).Bind(epoch); },
               "recording a stream's spool");
}

Result<UploadOutcome> SqlStore::AcceptUpload(const std::string& connection_id,
                                             const std::string& token_hash,
                                             const UploadBatch& batch, WallTime received_at,
                                             const RecordRetention& retention,
                                             const AuditEvent& audit) {
  UploadOutcome outcome;
  Status status = WriteTransaction(
      [&] {
        return StoreUpload(connection_id, token_hash, batch, received_at, retention, audit,
                           outcome);
      },
      CredentialCache::kKeep);
  if (!status.ok()) return status;
  return outcome;
}

void SqlStore::AcceptUploadThen(std::string connection_id, std::string token_hash,
                                std::shared_ptr<const UploadBatch> batch, WallTime received_at,
                                RecordRetention retention, AuditEvent audit, UploadDone done) {
  struct Upload {
    std::string connection_id;
    std::string token_hash;
    std::shared_ptr<const UploadBatch> batch;
    WallTime received_at;
    RecordRetention retention;
    AuditEvent audit;
    UploadOutcome outcome;
  };
  auto upload = std::make_shared<Upload>(Upload{std::move(connection_id), std::move(token_hash),
                                                std::move(batch), received_at,
                                                std::move(retention), std::move(audit), {}});
  WriteTransactionThen(
      [this, upload] {
        return StoreUpload(upload->connection_id, upload->token_hash, *upload->batch,
                           upload->received_at, upload->retention, upload->audit,
                           upload->outcome);
      },
      [upload, done = std::move(done)](Status status) {
        if (status.ok()) {
          done(upload->outcome);
        } else {
          done(std::move(status));
        }
      },
      CredentialCache::kKeep);
}

Status SqlStore::StoreUpload(const std::string& connection_id, const std::string& token_hash,
                             const UploadBatch& batch, WallTime received_at,
                             const RecordRetention& retention, const AuditEvent& audit,
                             UploadOutcome& outcome) {
  outcome = {};  // afresh: the writer may run this again (WriteTransactionThen)
  // The token check (as CheckTokenLive), the stream's position, the row of the node the
  // first node sample is of and the connection's plans for the reply in one query: three round
  // trips fewer per upload on PostgreSQL. The rows read stay as read until used: this write
  // holds the write lock.
  std::optional<StoredAgentToken> token;
  std::optional<StreamPosition> existing;
  std::int64_t stream_id = 0;
  std::optional<ReadAheadSampleNode> sample_node;
  if (!batch.node_samples.empty()) sample_node.emplace().node = batch.node_samples.front().node;
  static const std::string sql =
      "SELECT " + std::string(kAgentTokenColumns) +
      ", s.id, s.spool_id, s.epoch, s.acked_through, "
      "s.dropped_records, s.dropped_bytes, s.corrupt_records, s.corrupt_bytes, "
      "s.rejected_records, s.rejected_bytes, n.id, n.latest_at, n.previous_at, "
      "n.rolled_through, n.series_version, p.interval_seconds, p.collectors, p.updated_at, "
      "ns.namespaces FROM connections c JOIN users u ON u.id = c.owner_id "
      "LEFT JOIN streams s ON s.connection_id = c.id AND s.stream = ? "
      "LEFT JOIN sample_nodes n ON n.connection_id = c.id AND n.node = ? "
      "LEFT JOIN node_plans p ON p.connection_id = c.id "
      "LEFT JOIN namespace_scopes ns ON ns.connection_id = c.id WHERE c.id = ?";
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql,
      [&](Statement& s) {
        s.Bind(batch.stream);
        if (sample_node) {
          s.Bind(sample_node->node);
        } else {
          s.BindNull();
        }
        s.Bind(connection_id);
      },
      [&](const Statement& row) {
        token = AgentTokenFromRow(row);
        outcome.node_plan = NodePlanFromRow(row, 19);
        outcome.namespace_scope = NamespaceScopeFromRow(row, 22);
        if (sample_node && !row.IsNull(14)) {
          sample_node->row = SampleNodeRow{
              row.Int(14), row.Int(15),
              row.IsNull(16) ? std::nullopt : std::optional<std::int64_t>(row.Int(16)),
              row.Int(17), row.Int(18)};
        }
        if (row.IsNull(4)) return;
        stream_id = row.Int(4);
        existing = StreamPosition{row.Text(5),
                                  row.Int(6),
                                  row.Int(7),
                                  {{row.Int(8), row.Int(9)},
                                   {row.Int(10), row.Int(11)},
                                   {row.Int(12), row.Int(13)}}};
      },
      "reading connection, stream, sample node and plans"));
  UPLINK_RETURN_IF_ERROR(TokenStillLive(token, connection_id, token_hash, received_at, "upload"));
  std::optional<std::int64_t> spool_epoch;
  if (SpoolChanged(existing, batch.spool_id)) {
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT epoch FROM stream_spools WHERE stream_id = ? AND spool_id = ?",
        [&](Statement& s) { s.Bind(stream_id).Bind(batch.spool_id); },
        [&](const Statement& row) { spool_epoch = row.Int(0); }, "reading stream spools"));
  }
  UPLINK_ASSIGN_OR_RETURN(UploadPlacement placement,
                          PlaceUpload(existing, batch, spool_epoch));
  outcome.new_stream = placement.new_stream;
  outcome.restarted = placement.restarted;
  outcome.epoch = placement.epoch;
  if (placement.new_stream) {
    UPLINK_ASSIGN_OR_RETURN(
        stream_id,
        InsertReturningId(
            "INSERT INTO streams (connection_id, stream, spool_id, first_upload_at, "
            "last_upload_at, agent_instance, agent_version) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "RETURNING id",
            [&](Statement& s) {
              s.Bind(connection_id).Bind(batch.stream).Bind(batch.spool_id);
              s.Bind(received_at).Bind(received_at).Bind(batch.agent_instance);
              s.Bind(batch.agent_version);
            },
            "creating stream"));
    UPLINK_RETURN_IF_ERROR(RememberSpool(stream_id, batch.spool_id, 0));
  } else if (placement.restarted) {
    UPLINK_RETURN_IF_ERROR(RememberSpool(stream_id, batch.spool_id, placement.epoch));
    AuditEvent restart = audit;
    restart.action = "stream.restart";
    restart.outcome = "ok";
    restart.detail = ToJson(json::object{{"stream", batch.stream},
                                         {"spool_id", batch.spool_id},
                                         {"previous_spool_id", existing->spool_id},
                                         {"previous_acked_through", existing->acked_through},
                                         {"epoch", placement.epoch}});
    UPLINK_RETURN_IF_ERROR(InsertAudit(restart));
  }

  SequenceAccount account = AccountSequences(placement.acked_through, batch);
  outcome.stored = account.stored;
  outcome.duplicates = account.duplicates;
  outcome.lost = account.lost;
  outcome.acked_through = account.acked_through;
  const AgentLosses& losses = placement.losses;

  std::int64_t received_millis = ToUnixMillis(received_at);
  std::vector<const UploadRecord*> new_samples;
  std::vector<const UploadRecord*> new_snapshots;
  std::vector<const UploadRecord*> new_experiments;
  for (size_t index : account.new_records) {
    const UploadRecord& record = batch.records[index];
    if (record.node_sample) {
      new_samples.push_back(&record);
      continue;
    }
    if (record.cluster_snapshot_at) {
      new_snapshots.push_back(&record);
      continue;
    }
    if (record.experiment_record) {
      new_experiments.push_back(&record);
      continue;
    }
    // Waits for no answer: the sequences accounted above are new, so nothing should refuse it.
    UPLINK_RETURN_IF_ERROR(
        Defer("INSERT INTO stream_records (stream_id, epoch, sequence, appended_at, "
              "received_at, payload) VALUES (?, ?, ?, ?, ?, ?)",
              [&](Statement& s) {
                s.Bind(stream_id).Bind(outcome.epoch).Bind(record.sequence);
                s.Bind(ToUnixMillis(record.appended_at)).Bind(received_millis);
                s.BindUnowned(batch.Payload(record));
              },
              "storing record " + std::to_string(record.sequence)));
  }
  UPLINK_RETURN_IF_ERROR(StoreNodeSamples(connection_id, batch, new_samples, received_at,
                                          retention.samples, sample_node, outcome));
  UPLINK_RETURN_IF_ERROR(
      StoreClusterSnapshot(connection_id, batch, new_snapshots, received_at, outcome));
  UPLINK_RETURN_IF_ERROR(
      StoreExperimentRecords(connection_id, batch, new_experiments, received_at, outcome));

  UPLINK_RETURN_IF_ERROR(
      Defer("UPDATE streams SET spool_id = ?, epoch = ?, acked_through = ?, "
            "records_stored = records_stored + ?, "
            "duplicates_ignored = duplicates_ignored + ?, lost_records = lost_records + ?, "
            "dropped_records = ?, dropped_bytes = ?, corrupt_records = ?, corrupt_bytes = ?, "
            "rejected_records = ?, rejected_bytes = ?, last_upload_at = ?, "
            "agent_instance = ?, agent_version = ? WHERE id = ?",
            [&](Statement& s) {
              s.Bind(batch.spool_id).Bind(outcome.epoch).Bind(outcome.acked_through);
              s.Bind(outcome.stored).Bind(outcome.duplicates).Bind(outcome.lost);
              s.Bind(losses.dropped.records).Bind(losses.dropped.bytes);
              s.Bind(losses.corrupt.records).Bind(losses.corrupt.bytes);
              s.Bind(losses.rejected.records).Bind(losses.rejected.bytes);
              s.Bind(received_at).Bind(batch.agent_instance).Bind(batch.agent_version);
              s.Bind(stream_id);
            },
            "updating stream"));
  UPLINK_ASSIGN_OR_RETURN(outcome.records_pruned, PruneRecords(received_at, retention));
  return MaintainSamples(received_at, retention.interval, retention.samples, outcome);
}

Result<std::vector<StreamSummary>> SqlStore::ListStreams(const std::string& connection_id) {
  static const std::string sql =
      SelectFrom(kStreamColumns, "streams WHERE connection_id = ? ORDER BY stream");
  std::vector<StreamSummary> streams;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) { streams.push_back(StreamFromRow(row)); }, "listing streams"));
  return streams;
}

Result<RecordPage> SqlStore::ListStreamRecords(const RecordQuery& query) {
  std::int64_t limit = std::clamp(query.limit, 1, kMaxRecordPage);
  return ReadSnapshotOnLookup([&](sql::Database& database) -> Result<RecordPage> {
    std::optional<std::pair<std::int64_t, std::int64_t>> stream;  // id, current epoch
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database, "SELECT id, epoch FROM streams WHERE connection_id = ? AND stream = ?",
        [&](Statement& s) { s.Bind(query.connection_id).Bind(query.stream); },
        [&](const Statement& row) { stream.emplace(row.Int(0), row.Int(1)); }, "reading stream"));
    if (!stream) {
      return NotFoundError("connection " + query.connection_id + " has no stream \"" +
                           OneLineExcerpt(query.stream, 253) + "\"");
    }
    RecordPage page;
    page.epoch = query.epoch.value_or(stream->second);
    if (page.epoch < 0 || page.epoch > stream->second) {
      return InvalidArgumentError("epoch must be from 0 to " + std::to_string(stream->second) +
                                  ", the stream's current epoch");
    }
    size_t payload_bytes = 0;
    // One row more than asked says whether there is a next page.
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT sequence, appended_at, received_at, payload FROM stream_records "
        "WHERE stream_id = ? AND epoch = ? AND sequence > ? ORDER BY sequence LIMIT ?",
        [&](Statement& s) {
          s.Bind(stream->first).Bind(page.epoch).Bind(query.after_sequence).Bind(limit + 1);
        },
        [&](const Statement& row) {
          if (page.more) return;
          if (static_cast<std::int64_t>(page.records.size()) == limit ||
              (!page.records.empty() && payload_bytes >= query.max_payload_bytes)) {
            page.more = true;
            return;
          }
          StoredRecord record{row.Int(0), FromUnixMillis(row.Int(1)), FromUnixMillis(row.Int(2)),
                              row.Text(3)};
          payload_bytes += record.payload.size();
          page.records.push_back(std::move(record));
        },
        "reading records"));
    return page;
  });
}

}  // namespace uplink::console
