// SqlStore's node samples (docs/api.md, "Node metrics"): storing an upload's samples,
// rolling them up into 5-minute buckets, pruning by age, and reading them back.
//
// A sample's points are one blob of (series id, value) pairs and a rollup row one blob of
// (series id, aggregate) entries. Numbers are packed: a whole number below 2^52 in magnitude
// (byte counts, temperatures, percentages) as a zigzag varint shifted left by one, anything
// else as the tag 1 followed by the 8 bytes of the double, little-endian.

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <tuple>

#include "common/text.h"
#include "console/store/rules/sample_rules.h"
#include "console/store/rules/upload_rules.h"
#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"

namespace uplink::console {
namespace {

constexpr double kMaxPackedInteger = 4503599627370496.0;  // 2^52

void PutVarint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

bool GetVarint(std::string_view& in, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    auto byte = static_cast<std::uint8_t>(in.front());
    in.remove_prefix(1);
    value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

void PutNumber(std::string& out, double value) {
  if (std::fabs(value) < kMaxPackedInteger && value == std::trunc(value)) {
    auto integer = static_cast<std::int64_t>(value);
    auto zigzag = (static_cast<std::uint64_t>(integer) << 1) ^
                  static_cast<std::uint64_t>(integer >> 63);
    PutVarint(out, zigzag << 1);
    return;
  }
  PutVarint(out, 1);
  auto bits = std::bit_cast<std::uint64_t>(value);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

bool GetNumber(std::string_view& in, double& value) {
  std::uint64_t head = 0;
  if (!GetVarint(in, head)) return false;
  if ((head & 1) == 0) {
    std::uint64_t zigzag = head >> 1;
    auto integer = static_cast<std::int64_t>(zigzag >> 1) ^ -static_cast<std::int64_t>(zigzag & 1);
    value = static_cast<double>(integer);
    return true;
  }
  if (head != 1 || in.size() < 8) return false;
  std::uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) {
    bits |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(in[i])) << (8 * i);
  }
  in.remove_prefix(8);
  value = std::bit_cast<double>(bits);
  return true;
}

Status Damaged(std::string_view what) {
  return DataLossError(std::string(what) + " is damaged in the database; restore a backup or "
                       "let retention remove it");
}

// Calls `visit(series_id, value)` for each point of a sample's blob.
template <typename Visit>
Status ForEachPoint(std::string_view blob, const Visit& visit) {
  while (!blob.empty()) {
    std::uint64_t series = 0;
    double value = 0;
    if (!GetVarint(blob, series) || !GetNumber(blob, value)) return Damaged("a sample");
    visit(static_cast<std::int64_t>(series), value);
  }
  return Status::Ok();
}

enum AggregateTag : std::uint64_t { kGaugeTag = 0, kCounterTag = 1 };

void PutAggregate(std::string& out, std::int64_t series, MetricKind kind,
                  const BucketAggregate& aggregate) {
  PutVarint(out, static_cast<std::uint64_t>(series));
  if (kind == MetricKind::kGauge) {
    PutVarint(out, kGaugeTag);
    PutVarint(out, static_cast<std::uint64_t>(aggregate.count));
    PutNumber(out, aggregate.min);
    PutNumber(out, aggregate.max);
    PutNumber(out, aggregate.sum);
    PutNumber(out, aggregate.last);
  } else {
    PutVarint(out, kCounterTag);
    PutVarint(out, static_cast<std::uint64_t>(aggregate.pairs));
    PutNumber(out, aggregate.increase);
    PutNumber(out, aggregate.seconds);
  }
}

template <typename Visit>
Status ForEachAggregate(std::string_view blob, const Visit& visit) {
  while (!blob.empty()) {
    std::uint64_t series = 0;
    std::uint64_t tag = 0;
    std::uint64_t count = 0;
    BucketAggregate aggregate;
    if (!GetVarint(blob, series) || !GetVarint(blob, tag) || !GetVarint(blob, count)) {
      return Damaged("a rollup");
    }
    bool read = false;
    if (tag == kGaugeTag) {
      aggregate.count = static_cast<std::int64_t>(count);
      read = GetNumber(blob, aggregate.min) && GetNumber(blob, aggregate.max) &&
             GetNumber(blob, aggregate.sum) && GetNumber(blob, aggregate.last);
    } else if (tag == kCounterTag) {
      aggregate.pairs = static_cast<std::int64_t>(count);
      read = GetNumber(blob, aggregate.increase) && GetNumber(blob, aggregate.seconds);
    }
    if (!read) return Damaged("a rollup");
    visit(static_cast<std::int64_t>(series), aggregate);
  }
  return Status::Ok();
}

std::string JoinCollectors(const std::vector<std::string>& collectors) {
  std::string joined;
  for (const std::string& name : collectors) {
    if (!joined.empty()) joined += ' ';
    joined += name;
  }
  return joined;
}

std::vector<std::string> SplitCollectors(std::string_view joined) {
  std::vector<std::string> names;
  while (!joined.empty()) {
    size_t space = joined.find(' ');
    std::string_view name = joined.substr(0, space);
    if (!name.empty()) names.emplace_back(name);
    if (space == std::string_view::npos) break;
    joined.remove_prefix(space + 1);
  }
  return names;
}

bool WantsMetric(std::span<const SampleMetric> metrics, SampleMetric metric) {
  return std::find(metrics.begin(), metrics.end(), metric) != metrics.end();
}

// Series in a stable order: by metric, then by label.
template <typename Series>
void SortSeries(std::vector<Series>& series) {
  std::sort(series.begin(), series.end(), [](const Series& a, const Series& b) {
    if (a.metric != b.metric) return a.metric < b.metric;
    return a.label < b.label;
  });
}

}  // namespace

NodePlan DefaultNodePlan() {
  NodePlan plan;
  plan.interval_seconds = kDefaultSampleInterval;
  for (std::string_view name : kNodeCollectors) plan.collectors.emplace_back(name);
  return plan;
}

// --- Plans ---------------------------------------------------------------------------------

Result<NodePlan> SqlStore::GetNodePlan(const std::string& connection_id) {
  return ReadOnLookup([&](sql::Database& database) -> Result<NodePlan> {
    NodePlan plan = DefaultNodePlan();
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT interval_seconds, collectors, updated_at FROM node_plans WHERE connection_id = ?",
        [&](Statement& s) { s.Bind(connection_id); },
        [&](const Statement& row) { plan = NodePlanFromRow(row, 0); }, "reading node plan"));
    return plan;
  });
}

NodePlan SqlStore::NodePlanFromRow(const Statement& row, int column) {
  if (row.IsNull(column)) return DefaultNodePlan();
  return NodePlan{.interval_seconds = row.Int(column),
                  .collectors = SplitCollectors(row.Text(column + 1)),
                  .updated_at = row.Time(column + 2)};
}

Status SqlStore::SetNodePlan(const std::string& connection_id, const NodePlan& plan,
                                const AuditEvent& audit) {
  return WriteTransaction(
      [&]() -> Status {
        auto written = Change(
            "INSERT INTO node_plans (connection_id, interval_seconds, collectors, updated_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (connection_id) DO UPDATE SET "
            "interval_seconds = excluded.interval_seconds, collectors = excluded.collectors, "
            "updated_at = excluded.updated_at",
            [&](Statement& s) {
              s.Bind(connection_id).Bind(plan.interval_seconds);
              s.Bind(JoinCollectors(plan.collectors)).Bind(audit.at);
            },
            "setting node plan");
        if (!written.ok() && db_->LastFailure() == sql::Failure::kForeignKey) {
          return NotFoundError("connection " + connection_id + " does not exist");
        }
        UPLINK_RETURN_IF_ERROR(written.status());
        return InsertAudit(audit);
      },
      CredentialCache::kKeep);
}

// --- Storing -------------------------------------------------------------------------------

Result<SqlStore::SeriesById> SqlStore::LoadSeries(sql::Database& database,
                                                   std::int64_t node_id) {
  SeriesById series;
  UPLINK_RETURN_IF_ERROR(ForEachRowOn(
      database, "SELECT id, metric, label FROM sample_series WHERE node_id = ?",
      [&](Statement& s) { s.Bind(node_id); },
      [&](const Statement& row) {
        // A metric a newer console stored is left alone.
        if (auto metric = SampleMetricFromName(row.Text(1))) {
          series.emplace(row.Int(0), SeriesName{*metric, row.Text(2)});
        }
      },
      "reading series"));
  return series;
}

Result<NodeSeriesIds*> SqlStore::SeriesIdsOf(std::int64_t node_id,
                                              std::int64_t series_version) {
  if (NodeSeriesIds* cached = series_ids_.Find(node_id, series_version)) return cached;
  NodeSeriesIds& entry = series_ids_.Reset(node_id);
  UPLINK_RETURN_IF_ERROR(ReadSeriesIds(node_id, entry));
  entry.version = series_version;
  return &entry;
}

Status SqlStore::ReadSeriesIds(std::int64_t node_id, NodeSeriesIds& entry) {
  std::vector<NodeSeriesIds::Series> series;
  std::int64_t unknown_rows = 0;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT id, metric, label FROM sample_series WHERE node_id = ?",
      [&](Statement& s) { s.Bind(node_id); },
      [&](const Statement& row) {
        if (auto metric = SampleMetricFromName(row.Text(1))) {
          series.push_back({*metric, std::string(row.Text(2)), row.Int(0)});
        } else {
          ++unknown_rows;
        }
      },
      "reading series"));
  entry.Assign(std::move(series), unknown_rows);
  return Status::Ok();
}

Status SqlStore::InsertSeries(std::int64_t node_id, std::span<const SampleValue* const> values,
                              std::int64_t now_seconds, NodeSeriesIds& series) {
  // The inserts are deferred and their ids read back with the node's series after them: on
  // PostgreSQL one round trip for all of them (a node's first sample brings about 60 series,
  // six statements of 32, 8 and 1 rows), where RETURNING would wait for each statement.
  for (std::span<const SampleValue* const> left = values; !left.empty();) {
    const size_t chunk = RowsPerStatement(left.size());
    const std::string sql = "INSERT INTO sample_series (node_id, metric, label, last_seen) VALUES " +
                            PlaceholderRows(chunk, 4);
    const std::span<const SampleValue* const> these = left.first(chunk);
    UPLINK_RETURN_IF_ERROR(Defer(
        sql,
        [&](Statement& s) {
          for (const SampleValue* value : these) {
            s.Bind(node_id).Bind(SampleMetricName(value->metric)).Bind(value->label);
            s.Bind(now_seconds);
          }
        },
        "creating series"));
    left = left.subspan(chunk);
  }
  UPLINK_RETURN_IF_ERROR(ReadSeriesIds(node_id, series));
  for (const SampleValue* value : values) {
    if (!series.Find(value->metric, value->label)) {
      return InternalError("creating series: " + std::string(SampleMetricName(value->metric)) +
                           " \"" + OneLineExcerpt(value->label, 64) + "\" of node " +
                           std::to_string(node_id) + " was inserted but not read back");
    }
  }
  return Status::Ok();
}

Result<std::int64_t> SqlStore::SampleNodeId(sql::Database& database,
                                            const std::string& connection_id,
                                            const std::string& node) {
  std::optional<std::int64_t> id;
  UPLINK_RETURN_IF_ERROR(ForEachRowOn(
      database, "SELECT id FROM sample_nodes WHERE connection_id = ? AND node = ?",
      [&](Statement& s) { s.Bind(connection_id).Bind(node); },
      [&](const Statement& row) { id = row.Int(0); }, "reading sample node"));
  if (!id) {
    return NotFoundError("connection " + connection_id + " has no samples from node \"" +
                         OneLineExcerpt(node, 253) + "\"");
  }
  return *id;
}

Status SqlStore::StoreNodeSamples(const std::string& connection_id, const UploadBatch& batch,
                                     const std::vector<const UploadRecord*>& records,
                                     WallTime now, const SampleRetention& retention,
                                     const std::optional<ReadAheadSampleNode>& read_ahead,
                                     UploadOutcome& outcome) {
  auto sample_of = [&](const UploadRecord* record) -> const NodeSampleFigures& {
    return batch.node_samples.at(*record->node_sample);
  };
  std::vector<const UploadRecord*> kept;
  kept.reserve(records.size());
  for (const UploadRecord* record : records) {
    switch (ClassifySampleTime(sample_of(record).collected_at, now, retention)) {
      case SampleTiming::kTooOld:
        ++outcome.samples_too_old;
        break;
      case SampleTiming::kInFuture:
        ++outcome.samples_in_future;
        break;
      case SampleTiming::kKeep:
        kept.push_back(record);
        break;
    }
  }
  // An upload's samples all come from the node its stream names, but nothing here relies on
  // it: they are grouped by node, each group in collection order (samples of one time in the
  // order sent: the first is kept).
  std::stable_sort(kept.begin(), kept.end(), [&](const UploadRecord* a, const UploadRecord* b) {
    const NodeSampleFigures& x = sample_of(a);
    const NodeSampleFigures& y = sample_of(b);
    return std::tie(x.node, x.collected_at) < std::tie(y.node, y.collected_at);
  });

  std::string points;
  std::vector<std::int64_t> inserted_at;  // in time order
  const std::int64_t now_seconds = ToUnixSeconds(now);
  for (auto group_begin = kept.begin(); group_begin != kept.end();) {
    const std::string& node = sample_of(*group_begin).node;
    auto group_end = std::find_if(group_begin, kept.end(), [&](const UploadRecord* record) {
      return sample_of(record).node != node;
    });
    std::span<const UploadRecord* const> group(group_begin, group_end);
    group_begin = group_end;
    const UploadRecord* newest = group.back();
    std::int64_t first_bucket = BucketStart(ToUnixMillis(sample_of(group.front()).collected_at),
                                            kRollupSeconds);

    SampleNodeRow row;
    bool found = false;
    if (read_ahead && read_ahead->node == node) {
      found = read_ahead->row.has_value();
      if (found) row = *read_ahead->row;
    } else {
      UPLINK_RETURN_IF_ERROR(ForEachRow(
          "SELECT id, latest_at, previous_at, rolled_through, series_version FROM sample_nodes "
          "WHERE connection_id = ? AND node = ?",
          [&](Statement& s) { s.Bind(connection_id).Bind(node); },
          [&](const Statement& r) {
            found = true;
            row.id = r.Int(0);
            row.latest_at = r.Int(1);
            if (!r.IsNull(2)) row.previous_at = r.Int(2);
            row.rolled_through = r.Int(3);
            row.series_version = r.Int(4);
          },
          "reading sample node"));
    }
    NodeSeriesIds* series = nullptr;
    if (found) {
      // A series' last_seen follows rollups, which come only once a bucket is complete: after
      // a silence near the retention, this upload's points would otherwise refer to series
      // that the retention pass deletes before their first rollup.
      if (row.latest_at && *row.latest_at < ToUnixMillis(now - retention.max_age / 2)) {
        UPLINK_RETURN_IF_ERROR(
            Change("UPDATE sample_series SET last_seen = ? WHERE node_id = ? AND last_seen < ?",
                   [&](Statement& s) { s.Bind(now_seconds).Bind(row.id).Bind(now_seconds); },
                   "marking a returning node's series seen")
                .status());
      }
      UPLINK_ASSIGN_OR_RETURN(series, SeriesIdsOf(row.id, row.series_version));
    } else {
      // A version of its own even before it has series: the row may take the id of a node
      // deleted before, whose ids this store may still hold.
      row.series_version = series_ids_.NewVersion();
      UPLINK_ASSIGN_OR_RETURN(
          row.id,
          InsertReturningId(
              "INSERT INTO sample_nodes (connection_id, node, latest_at, latest_boot_time, "
              "latest_payload, rolled_through, series_version) VALUES (?, ?, ?, ?, ?, ?, ?) "
              "RETURNING id",
              [&](Statement& s) {
                s.Bind(connection_id).Bind(node);
                s.Bind(ToUnixMillis(sample_of(newest).collected_at));
                s.Bind(sample_of(newest).boot_time).BindUnowned(batch.Payload(*newest));
                s.Bind(first_bucket).Bind(row.series_version);
              },
              "creating sample node"));
      row.rolled_through = first_bucket;
      series = &series_ids_.Reset(row.id);
      series->version = row.series_version;
    }

    static constexpr const char* kInsertSample =
        "INSERT INTO samples (node_id, at, boot_time, points) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (node_id, at) DO NOTHING";
    UPLINK_ASSIGN_OR_RETURN(sql::Statement * insert_stmt, Prepare(kInsertSample));
    // The group's new series first.
    std::vector<const SampleValue*> new_series;
    for (const UploadRecord* record : group) {
      for (const SampleValue& value : sample_of(record).values) {
        if (series->Find(value.metric, value.label)) continue;
        auto same = [&](const SampleValue* other) {
          return other->metric == value.metric && other->label == value.label;
        };
        if (std::any_of(new_series.begin(), new_series.end(), same)) continue;
        // Beyond the cap the value is dropped (and counted) below.
        if (series->rows() + static_cast<std::int64_t>(new_series.size()) >= kMaxSeriesPerNode) {
          continue;
        }
        new_series.push_back(&value);
      }
    }
    if (!new_series.empty()) {
      // The entry matches no row until the node's new series_version is written below.
      series->version.reset();
      UPLINK_RETURN_IF_ERROR(InsertSeries(row.id, new_series, now_seconds, *series));
    }
    inserted_at.clear();
    // A node's latest_at is the newest time any of its samples was stored at (this is the only
    // place samples are added, and latest_at only moves forward). So a sample newer than it,
    // and not at the time of the one before it in the group, cannot meet the ON CONFLICT: it
    // is stored for sure, and its insert is deferred rather than waited for. Others wait for
    // the change count, which says whether their time was taken.
    // With no sample stored yet every time is newer (the lowest time only takes the wait).
    const std::int64_t newest_stored = found && row.latest_at
                                           ? *row.latest_at
                                           : std::numeric_limits<std::int64_t>::min();
    std::optional<std::int64_t> previous_in_group;
    for (const UploadRecord* record : group) {
      const NodeSampleFigures& sample = sample_of(record);
      points.clear();
      for (const SampleValue& value : sample.values) {
        std::optional<std::int64_t> id = series->Find(value.metric, value.label);
        if (!id) {
          ++outcome.sample_values_dropped;
          continue;
        }
        PutVarint(points, static_cast<std::uint64_t>(*id));
        PutNumber(points, value.value);
      }
      const std::int64_t at_ms = ToUnixMillis(sample.collected_at);
      const bool time_free = at_ms > newest_stored && previous_in_group != at_ms;
      previous_in_group = at_ms;
      auto bind = [&](Statement& insert) {
        insert.Bind(row.id).Bind(at_ms).Bind(sample.boot_time).BindBlobUnowned(points);
      };
      if (time_free) {
        UPLINK_RETURN_IF_ERROR(Defer(kInsertSample, bind, "storing a node sample"));
      } else {
        Statement insert(insert_stmt);
        bind(insert);
        if (insert.Step() != Statement::kDone) return Error("storing a node sample");
        if (insert.Changes() == 0) {
          ++outcome.samples_same_time;
          continue;
        }
      }
      ++outcome.samples_stored;
      inserted_at.push_back(at_ms);
    }

    const bool series_added = !series->version.has_value();
    const std::int64_t series_version =
        series_added ? series_ids_.NewVersion() : row.series_version;
    if (inserted_at.empty()) {
      if (!series_added) continue;
      UPLINK_RETURN_IF_ERROR(
          Defer("UPDATE sample_nodes SET series_version = ? WHERE id = ?",
                [&](Statement& s) { s.Bind(series_version).Bind(row.id); },
                "updating sample node"));
      series->version = series_version;
      continue;
    }
    std::int64_t newest_at = inserted_at.back();
    LatestSamples latest = FollowLatestSamples(inserted_at, row.latest_at, row.previous_at);
    const std::optional<std::int64_t>& previous_at = latest.previous_at;
    std::int64_t rolled_through = std::min(row.rolled_through, first_bucket);
    if (latest.replaces_latest && found) {
      // `newest` is the newest of the group; it was stored unless its time was taken, in
      // which case the latest is already that time and does not move.
      UPLINK_RETURN_IF_ERROR(
          Defer("UPDATE sample_nodes SET latest_at = ?, latest_boot_time = ?, "
                "latest_payload = ?, previous_at = ?, rolled_through = ?, series_version = ? "
                "WHERE id = ?",
                [&](Statement& s) {
                  s.Bind(newest_at).Bind(sample_of(newest).boot_time);
                  s.BindUnowned(batch.Payload(*newest)).Bind(previous_at);
                  s.Bind(rolled_through).Bind(series_version).Bind(row.id);
                },
                "updating sample node"));
    } else {
      UPLINK_RETURN_IF_ERROR(
          Defer("UPDATE sample_nodes SET previous_at = ?, rolled_through = ?, "
                "series_version = ? WHERE id = ?",
                [&](Statement& s) {
                  s.Bind(previous_at).Bind(rolled_through).Bind(series_version).Bind(row.id);
                },
                "updating sample node"));
    }
    series->version = series_version;
  }
  return Status::Ok();
}

// --- Rollups and retention -----------------------------------------------------------------

Status SqlStore::MaintainSamples(WallTime now, std::chrono::seconds interval,
                                    const SampleRetention& retention, UploadOutcome& outcome) {
  if (!MaintenanceDue(last_sample_maintenance_, now, interval)) return Status::Ok();
  last_sample_maintenance_ = now;
  // Rollups first: raw samples go only once their buckets are rolled up.
  UPLINK_RETURN_IF_ERROR(RollUpSamples(now, retention, outcome));
  std::int64_t limit = retention.max_rows_per_run;
  UPLINK_ASSIGN_OR_RETURN(
      outcome.samples_pruned,
      Change("DELETE FROM samples WHERE id IN (SELECT s.id FROM samples s "
             "JOIN sample_nodes n ON n.id = s.node_id "
             "WHERE s.at < ? AND s.at < n.rolled_through * 1000 ORDER BY s.at LIMIT ?)",
             [&](Statement& s) { s.Bind(ToUnixMillis(now - retention.raw_max_age)).Bind(limit); },
             "deleting old samples"));
  std::int64_t oldest_seconds = ToUnixSeconds(now - retention.max_age);
  UPLINK_ASSIGN_OR_RETURN(
      outcome.rollups_pruned,
      Change("DELETE FROM sample_rollups WHERE id IN (SELECT id FROM sample_rollups "
             "WHERE bucket < ? ORDER BY bucket LIMIT ?)",
             [&](Statement& s) { s.Bind(oldest_seconds).Bind(limit); }, "deleting old rollups"));
  std::vector<std::int64_t> changed_nodes;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "DELETE FROM sample_series WHERE id IN (SELECT id FROM sample_series "
      "WHERE last_seen < ? ORDER BY last_seen LIMIT ?) RETURNING node_id",
      [&](Statement& s) { s.Bind(oldest_seconds).Bind(limit); },
      [&](const Statement& row) { changed_nodes.push_back(row.Int(0)); }, "deleting old series"));
  std::sort(changed_nodes.begin(), changed_nodes.end());
  changed_nodes.erase(std::unique(changed_nodes.begin(), changed_nodes.end()),
                      changed_nodes.end());
  for (std::int64_t node_id : changed_nodes) {
    series_ids_.Forget(node_id);
    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE sample_nodes SET series_version = ? WHERE id = ?",
               [&](Statement& s) { s.Bind(series_ids_.NewVersion()).Bind(node_id); },
               "recording forgotten series")
            .status());
  }
  // A node silent for the whole retention goes, with what is left of it.
  return ForEachRow(
      "DELETE FROM sample_nodes WHERE id IN (SELECT id FROM sample_nodes "
      "WHERE latest_at < ? ORDER BY latest_at LIMIT ?) RETURNING id",
      [&](Statement& s) { s.Bind(oldest_seconds * 1000).Bind(limit); },
      [&](const Statement& row) { series_ids_.Forget(row.Int(0)); }, "deleting silent nodes");
}

Status SqlStore::RollUpSamples(WallTime now, const SampleRetention& retention,
                                  UploadOutcome& outcome) {
  // Buckets before this one are complete (a late sample reworks its bucket anyway).
  std::int64_t complete_before = RollupCompleteBefore(now, retention);
  struct Pending {
    std::int64_t node_id;
    std::int64_t rolled_through;
    std::int64_t interval_seconds;
  };
  std::vector<Pending> pending;
  std::int64_t budget = retention.max_rollup_buckets_per_run;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT n.id, n.rolled_through, COALESCE(p.interval_seconds, ?) FROM sample_nodes n "
      "LEFT JOIN node_plans p ON p.connection_id = n.connection_id "
      "WHERE n.rolled_through < ? ORDER BY n.rolled_through LIMIT ?",
      [&](Statement& s) { s.Bind(kDefaultSampleInterval).Bind(complete_before).Bind(budget); },
      [&](const Statement& row) { pending.push_back({row.Int(0), row.Int(1), row.Int(2)}); },
      "finding nodes to roll up"));

  for (const Pending& node : pending) {
    std::int64_t rolled_through = node.rolled_through;
    while (budget > 0 && rolled_through < complete_before) {
      // Skip stretches without samples (a node that was down) without visiting each bucket.
      std::optional<std::int64_t> next_at;
      UPLINK_RETURN_IF_ERROR(ForEachRow(
          "SELECT MIN(at) FROM samples WHERE node_id = ? AND at >= ?",
          [&](Statement& s) { s.Bind(node.node_id).Bind(rolled_through * 1000); },
          [&](const Statement& row) {
            if (!row.IsNull(0)) next_at = row.Int(0);
          },
          "finding the next sample"));
      RollupChunk chunk = NextRollupChunk(rolled_through, next_at, complete_before, budget);
      if (chunk.buckets > 0) {
        UPLINK_RETURN_IF_ERROR(RollUpNode(node.node_id, chunk.start, chunk.end,
                                          kMaxGapIntervals * node.interval_seconds * 1000,
                                          outcome));
        budget -= chunk.buckets;
      }
      rolled_through = chunk.end;
    }
    if (rolled_through == node.rolled_through) continue;
    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE sample_nodes SET rolled_through = ? WHERE id = ?",
               [&](Statement& s) { s.Bind(rolled_through).Bind(node.node_id); },
               "recording rollups")
            .status());
  }
  return Status::Ok();
}

Status SqlStore::RollUpNode(std::int64_t node_id, std::int64_t start, std::int64_t end,
                               std::int64_t max_gap_ms, UploadOutcome& outcome) {
  UPLINK_ASSIGN_OR_RETURN(SeriesById series, LoadSeries(*db_, node_id));
  std::map<std::int64_t, std::vector<RawPoint>> points;  // by series id
  Status decoded = Status::Ok();
  // From one largest gap before the first bucket: its counters' first pairs need the point
  // before.
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT at, boot_time, points FROM samples WHERE node_id = ? AND at >= ? AND at < ? "
      "ORDER BY at",
      [&](Statement& s) { s.Bind(node_id).Bind(start * 1000 - max_gap_ms).Bind(end * 1000); },
      [&](const Statement& row) {
        if (!decoded.ok()) return;
        std::int64_t at = row.Int(0);
        std::int64_t boot_time = row.Int(1);
        decoded = ForEachPoint(row.Blob(2), [&](std::int64_t id, double value) {
          if (series.contains(id)) points[id].push_back({at, value, boot_time});
        });
      },
      "reading samples to roll up"));
  UPLINK_RETURN_IF_ERROR(decoded);

  std::map<std::int64_t, std::string> rows;  // bucket start -> packed aggregates
  std::vector<std::int64_t> seen;
  for (const auto& [id, list] : points) {
    MetricKind kind = KindOf(series.at(id).metric);
    auto buckets = AggregateBuckets(kind, list, kRollupSeconds, start, max_gap_ms);
    for (const auto& [bucket, aggregate] : buckets) {
      if (bucket < end) PutAggregate(rows[bucket], id, kind, aggregate);
    }
    if (!list.empty() && list.back().at_ms >= start * 1000) seen.push_back(id);
  }
  // Made again from scratch: a late sample may have changed any of these buckets.
  UPLINK_RETURN_IF_ERROR(
      Change("DELETE FROM sample_rollups WHERE node_id = ? AND bucket >= ? AND bucket < ?",
             [&](Statement& s) { s.Bind(node_id).Bind(start).Bind(end); },
             "replacing rollups")
          .status());
  for (const auto& row : rows) {
    UPLINK_RETURN_IF_ERROR(
        Change("INSERT INTO sample_rollups (node_id, bucket, aggregates) VALUES (?, ?, ?)",
               [&](Statement& s) { s.Bind(node_id).Bind(row.first).BindBlobUnowned(row.second); },
               "writing rollup")
            .status());
    ++outcome.rollups_written;
  }
  if (seen.size() == series.size()) {
    // Every series of the node that this binary knows (the usual case): one statement rather
    // than one per series. A newer console's metrics are left to it, as below.
    static const std::string every_known = [] {
      std::string sql = "UPDATE sample_series SET last_seen = ? WHERE node_id = ? AND "
                        "last_seen < ? AND metric IN (";
      for (SampleMetric metric : kAllSampleMetrics) {
        if (metric != kAllSampleMetrics[0]) sql += ", ";
        sql += '\'';
        sql += SampleMetricName(metric);
        sql += '\'';
      }
      return sql + ")";
    }();
    return Change(every_known, [&](Statement& s) { s.Bind(end).Bind(node_id).Bind(end); },
                  "recording the node's series")
        .status();
  }
  for (std::int64_t id : seen) {
    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE sample_series SET last_seen = ? WHERE id = ? AND last_seen < ?",
               [&](Statement& s) { s.Bind(end).Bind(id).Bind(end); }, "recording a series")
            .status());
  }
  return Status::Ok();
}

// --- Reading -------------------------------------------------------------------------------

Result<SampleNodePage> SqlStore::ListSampleNodes(const std::string& connection_id,
                                                    const std::string& after_node, int limit) {
  std::int64_t page_size = std::clamp(limit, 1, kMaxSampleNodePage);
  return ReadSnapshotOnLookup([&](sql::Database& database) -> Result<SampleNodePage> {
    SampleNodePage page;
    std::vector<SampleNodeState>& nodes = page.nodes;
    std::vector<std::int64_t> ids;
    std::vector<std::optional<std::int64_t>> previous;
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT id, node, latest_at, latest_boot_time, latest_payload, previous_at "
        "FROM sample_nodes WHERE connection_id = ? AND node > ? ORDER BY node LIMIT ?",
        // One row more than asked says whether there is a next page.
        [&](Statement& s) { s.Bind(connection_id).Bind(after_node).Bind(page_size + 1); },
        [&](const Statement& row) {
          if (static_cast<std::int64_t>(nodes.size()) == page_size) {
            page.more = true;
            return;
          }
          SampleNodeState state;
          state.node = row.Text(1);
          state.latest_at = FromUnixMillis(row.Int(2));
          state.latest_boot_time = row.Int(3);
          state.latest_payload = row.Text(4);
          ids.push_back(row.Int(0));
          previous.push_back(row.IsNull(5) ? std::nullopt : std::optional(row.Int(5)));
          nodes.push_back(std::move(state));
        },
        "listing sample nodes"));
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!previous[i]) continue;
      UPLINK_ASSIGN_OR_RETURN(SeriesById series, LoadSeries(database, ids[i]));
      Status decoded = Status::Ok();
      UPLINK_RETURN_IF_ERROR(ForEachRowOn(
          database, "SELECT boot_time, points FROM samples WHERE node_id = ? AND at = ?",
          [&](Statement& s) { s.Bind(ids[i]).Bind(*previous[i]); },
          [&](const Statement& row) {
            SampleNodeState& state = nodes[i];
            state.previous_at = FromUnixMillis(*previous[i]);
            state.previous_boot_time = row.Int(0);
            decoded = ForEachPoint(row.Blob(1), [&](std::int64_t id, double value) {
              auto it = series.find(id);
              if (it != series.end()) {
                state.previous_values.push_back({it->second.metric, it->second.label, value});
              }
            });
          },
          "reading the previous sample"));
      UPLINK_RETURN_IF_ERROR(decoded);
    }
    return page;
  });
}

Result<std::vector<SeriesPoints>> SqlStore::ReadSamplePoints(
    const std::string& connection_id, const std::string& node,
    std::span<const SampleMetric> metrics, WallTime from, WallTime to) {
  return ReadSnapshotOnLookup([&](sql::Database& database) -> Result<std::vector<SeriesPoints>> {
    UPLINK_ASSIGN_OR_RETURN(std::int64_t node_id, SampleNodeId(database, connection_id, node));
    UPLINK_ASSIGN_OR_RETURN(SeriesById series, LoadSeries(database, node_id));
    std::unordered_map<std::int64_t, size_t> index;
    std::vector<SeriesPoints> result;
    for (const auto& [id, name] : series) {
      if (!WantsMetric(metrics, name.metric)) continue;
      index.emplace(id, result.size());
      result.push_back({name.metric, name.label, {}});
    }
    Status decoded = Status::Ok();
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT at, boot_time, points FROM samples WHERE node_id = ? AND at >= ? AND at < ? "
        "ORDER BY at",
        [&](Statement& s) { s.Bind(node_id).Bind(ToUnixMillis(from)).Bind(ToUnixMillis(to)); },
        [&](const Statement& row) {
          if (!decoded.ok()) return;
          std::int64_t at = row.Int(0);
          std::int64_t boot_time = row.Int(1);
          decoded = ForEachPoint(row.Blob(2), [&](std::int64_t id, double value) {
            auto it = index.find(id);
            if (it != index.end()) result[it->second].points.push_back({at, value, boot_time});
          });
        },
        "reading samples"));
    UPLINK_RETURN_IF_ERROR(decoded);
    SortSeries(result);
    return result;
  });
}

Result<RollupRead> SqlStore::ReadSampleRollups(const std::string& connection_id,
                                                  const std::string& node,
                                                  std::span<const SampleMetric> metrics,
                                                  WallTime from, WallTime to) {
  return ReadSnapshotOnLookup([&](sql::Database& database) -> Result<RollupRead> {
    UPLINK_ASSIGN_OR_RETURN(std::int64_t node_id, SampleNodeId(database, connection_id, node));
    RollupRead read;
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database, "SELECT rolled_through FROM sample_nodes WHERE id = ?",
        [&](Statement& s) { s.Bind(node_id); },
        [&](const Statement& row) { read.rolled_through = row.Int(0); }, "reading rollup state"));
    UPLINK_ASSIGN_OR_RETURN(SeriesById series, LoadSeries(database, node_id));
    std::unordered_map<std::int64_t, size_t> index;
    for (const auto& [id, name] : series) {
      if (!WantsMetric(metrics, name.metric)) continue;
      index.emplace(id, read.series.size());
      read.series.push_back({name.metric, name.label, {}});
    }
    Status decoded = Status::Ok();
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT bucket, aggregates FROM sample_rollups WHERE node_id = ? AND bucket >= ? "
        "AND bucket < ? ORDER BY bucket",
        [&](Statement& s) {
          s.Bind(node_id).Bind(ToUnixSeconds(from)).Bind(ToUnixSeconds(to));
        },
        [&](const Statement& row) {
          if (!decoded.ok()) return;
          std::int64_t bucket = row.Int(0);
          decoded = ForEachAggregate(row.Blob(1), [&](std::int64_t id,
                                                      const BucketAggregate& aggregate) {
            auto it = index.find(id);
            if (it != index.end()) read.series[it->second].buckets.emplace_back(bucket, aggregate);
          });
        },
        "reading rollups"));
    UPLINK_RETURN_IF_ERROR(decoded);
    SortSeries(read.series);
    return read;
  });
}

}  // namespace uplink::console
