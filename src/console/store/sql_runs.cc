// SqlStore's experiment runs (docs/api.md, "Experiment runs"): upserts, points stored once
// each, deletions, problems, and the reads behind the runs API.

#include <algorithm>
#include <cmath>
#include <limits>

#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"

namespace uplink::console {
namespace {

constexpr int kMaxProblemsPerConnection = 1000;
constexpr int kMaxFacets = 200;

constexpr const char* kRunColumns =
    "r.run_id, r.source, r.experiment_id, r.experiment, r.name, r.user_name, r.status, "
    "r.offline, r.started_at, r.ended_at, r.exit_code, r.location, r.params, r.tags, r.summary, "
    "r.redacted, r.omitted, r.stream, r.first_seen_at, r.updated_at, "
    "(SELECT COUNT(*) FROM run_metrics m WHERE m.run = r.id)";

std::optional<WallTime> OptionalMillis(const auto& row, int column) {
  if (row.IsNull(column)) return std::nullopt;
  return FromUnixMillis(row.Int(column));
}

StoredRun RunFromRow(const auto& row) {
  StoredRun stored;
  ExperimentRun& run = stored.run;
  run.run_id = row.Text(0);
  run.source = row.Text(1);
  run.experiment_id = row.Text(2);
  run.experiment = row.Text(3);
  run.name = row.Text(4);
  run.user = row.Text(5);
  run.status = row.Text(6);
  run.offline = row.Int(7) != 0;
  if (row.Int(8) != 0) run.started_at = FromUnixMillis(row.Int(8));
  run.ended_at = OptionalMillis(row, 9);
  if (!row.IsNull(10)) run.exit_code = row.Int(10);
  run.location = row.Text(11);
  run.params_json = row.Text(12);
  run.tags_json = row.Text(13);
  run.summary_json = row.Text(14);
  run.redacted_json = row.Text(15);
  run.omitted = row.Int(16);
  stored.stream = row.Text(17);
  stored.first_seen_at = FromUnixMillis(row.Int(18));
  stored.updated_at = FromUnixMillis(row.Int(19));
  stored.metric_count = row.Int(20);
  return stored;
}

double ValueOf(const auto& row, int column) {
  return row.IsNull(column) ? std::numeric_limits<double>::quiet_NaN() : row.Double(column);
}

// (step, timestamp) order: the latest point of a metric is the greatest.
bool After(const RunPoint& a, std::int64_t step, std::int64_t timestamp) {
  return a.step > step || (a.step == step && a.timestamp_ms > timestamp);
}

}  // namespace

Result<std::optional<std::int64_t>> SqlStore::RunRowId(const std::string& connection_id,
                                                          const std::string& run_id,
                                                          const std::string& stream, WallTime now,
                                                          bool create) {
  std::optional<std::int64_t> id;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT id FROM runs WHERE connection_id = ? AND run_id = ?",
      [&](Statement& s) { s.Bind(connection_id).Bind(run_id); },
      [&](const Statement& row) { id = row.Int(0); }, "reading run"));
  if (id || !create) return id;
  // Points of a run whose upsert never arrived (the spool dropped it at its cap): kept under
  // a placeholder that the next upsert fills in.
  UPLINK_ASSIGN_OR_RETURN(
      std::int64_t created,
      InsertReturningId(
          "INSERT INTO runs (connection_id, run_id, source, experiment_id, experiment, name, "
          "user_name, status, offline, started_at, location, params, tags, summary, redacted, "
          "omitted, stream, first_seen_at, updated_at) VALUES (?, ?, '', '', '', '', '', "
          "'unknown', 0, 0, '', '{}', '{}', '{}', '[]', 0, ?, ?, ?) RETURNING id",
          [&](Statement& s) {
            s.Bind(connection_id).Bind(run_id).Bind(stream);
            s.Bind(ToUnixMillis(now)).Bind(ToUnixMillis(now));
          },
          "creating run"));
  return std::optional<std::int64_t>(created);
}

Status SqlStore::StoreExperimentRecords(const std::string& connection_id,
                                           const UploadBatch& batch,
                                           const std::vector<const UploadRecord*>& records,
                                           WallTime now, UploadOutcome& outcome) {
  const std::int64_t now_ms = ToUnixMillis(now);
  for (const UploadRecord* record : records) {
    const ExperimentRecord& items = batch.experiment_records[*record->experiment_record];
    for (const ExperimentRun& run : items.runs) {
      UPLINK_RETURN_IF_ERROR(
          Change("INSERT INTO runs (connection_id, run_id, source, experiment_id, experiment, "
                 "name, user_name, status, offline, started_at, ended_at, exit_code, location, "
                 "params, tags, summary, redacted, omitted, stream, first_seen_at, updated_at) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                 "ON CONFLICT (connection_id, run_id) DO UPDATE SET source = excluded.source, "
                 "experiment_id = excluded.experiment_id, experiment = excluded.experiment, "
                 "name = excluded.name, user_name = excluded.user_name, "
                 "status = excluded.status, offline = excluded.offline, "
                 "started_at = excluded.started_at, ended_at = excluded.ended_at, "
                 "exit_code = excluded.exit_code, location = excluded.location, "
                 "params = excluded.params, tags = excluded.tags, summary = excluded.summary, "
                 "redacted = excluded.redacted, omitted = excluded.omitted, "
                 "stream = excluded.stream, updated_at = excluded.updated_at",
                 [&](Statement& s) {
                   s.Bind(connection_id).Bind(run.run_id).Bind(run.source);
                   s.Bind(run.experiment_id).Bind(run.experiment).Bind(run.name).Bind(run.user);
                   s.Bind(run.status).Bind(run.offline);
                   s.Bind(run.started_at ? ToUnixMillis(*run.started_at) : 0);
                   if (run.ended_at) {
                     s.Bind(ToUnixMillis(*run.ended_at));
                   } else {
                     s.BindNull();
                   }
                   s.Bind(run.exit_code).Bind(run.location);
                   s.BindUnowned(run.params_json).BindUnowned(run.tags_json);
                   s.BindUnowned(run.summary_json).BindUnowned(run.redacted_json);
                   s.Bind(run.omitted).Bind(batch.stream).Bind(now_ms).Bind(now_ms);
                 },
                 "storing run")
              .status());
      // The run reads now: what was reported about where it lives is over.
      if (!run.location.empty()) {
        UPLINK_RETURN_IF_ERROR(
            Change("DELETE FROM run_problems WHERE connection_id = ? AND source = ? AND "
                   "(location = ? OR substr(location, 1, length(?) + 1) = ? || '/')",
                   [&](Statement& s) {
                     s.Bind(connection_id).Bind(run.source).Bind(run.location);
                     s.Bind(run.location).Bind(run.location);
                   },
                   "clearing run problems")
                .status());
      }
      ++outcome.runs_upserted;
    }

    for (const RunSeries& series : items.series) {
      if (series.points.empty()) continue;
      UPLINK_ASSIGN_OR_RETURN(auto run_row,
                              RunRowId(connection_id, series.run_id, batch.stream, now, true));
      const RunPoint* newest = &series.points.front();
      for (const RunPoint& point : series.points) {
        if (After(point, newest->step, newest->timestamp_ms)) newest = &point;
      }
      std::optional<std::int64_t> metric_id;
      std::int64_t latest_step = 0;
      std::int64_t latest_timestamp = 0;
      UPLINK_RETURN_IF_ERROR(ForEachRow(
          "SELECT id, latest_step, latest_timestamp FROM run_metrics WHERE run = ? AND key = ?",
          [&](Statement& s) { s.Bind(*run_row).Bind(series.metric); },
          [&](const Statement& row) {
            metric_id = row.Int(0);
            latest_step = row.Int(1);
            latest_timestamp = row.Int(2);
          },
          "reading run metric"));
      if (!metric_id) {
        UPLINK_ASSIGN_OR_RETURN(
            metric_id,
            InsertReturningId("INSERT INTO run_metrics (run, key, latest_step, latest_value, "
                              "latest_timestamp, points) VALUES (?, ?, ?, ?, ?, 0) RETURNING id",
                              [&](Statement& s) {
                                s.Bind(*run_row).Bind(series.metric).Bind(newest->step);
                                if (std::isnan(newest->value)) {
                                  s.BindNull();
                                } else {
                                  s.BindDouble(newest->value);
                                }
                                s.Bind(newest->timestamp_ms);
                              },
                              "creating run metric"));
        latest_step = newest->step;
        latest_timestamp = newest->timestamp_ms;
      }
      UPLINK_ASSIGN_OR_RETURN(
          sql::Statement * insert_stmt,
          Prepare("INSERT INTO run_metric_points (metric, step, timestamp, value) "
                  "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"));
      std::int64_t stored = 0;
      for (const RunPoint& point : series.points) {
        Statement insert(insert_stmt);
        insert.Bind(*metric_id).Bind(point.step).Bind(point.timestamp_ms);
        if (std::isnan(point.value)) {
          insert.BindNull();
        } else {
          insert.BindDouble(point.value);
        }
        if (insert.Step() != Statement::kDone) return Error("storing run metric point");
        stored += insert.Changes();
      }
      outcome.run_points_stored += stored;
      outcome.run_points_duplicate += static_cast<std::int64_t>(series.points.size()) - stored;
      if (stored == 0) continue;
      bool newer = After(*newest, latest_step, latest_timestamp);
      UPLINK_RETURN_IF_ERROR(
          Change(newer ? "UPDATE run_metrics SET points = points + ?, latest_step = ?, "
                         "latest_value = ?, latest_timestamp = ? WHERE id = ?"
                       : "UPDATE run_metrics SET points = points + ? WHERE id = ?",
                 [&](Statement& s) {
                   s.Bind(stored);
                   if (newer) {
                     s.Bind(newest->step);
                     if (std::isnan(newest->value)) {
                       s.BindNull();
                     } else {
                       s.BindDouble(newest->value);
                     }
                     s.Bind(newest->timestamp_ms);
                   }
                   s.Bind(*metric_id);
                 },
                 "updating run metric")
              .status());
      UPLINK_RETURN_IF_ERROR(Change("UPDATE runs SET updated_at = ? WHERE id = ?",
                                    [&](Statement& s) { s.Bind(now_ms).Bind(*run_row); },
                                    "updating run")
                                 .status());
    }

    for (const std::string& run_id : items.deleted) {
      UPLINK_ASSIGN_OR_RETURN(
          int deleted,
          Change("DELETE FROM runs WHERE connection_id = ? AND run_id = ?",
                 [&](Statement& s) { s.Bind(connection_id).Bind(run_id); }, "deleting run"));
      outcome.runs_deleted += deleted;
    }

    for (const RunProblem& problem : items.problems) {
      UPLINK_RETURN_IF_ERROR(
          Change("INSERT INTO run_problems (connection_id, source, location, error, reported_at) "
                 "VALUES (?, ?, ?, ?, ?) ON CONFLICT (connection_id, source, location) DO UPDATE "
                 "SET error = excluded.error, reported_at = excluded.reported_at",
                 [&](Statement& s) {
                   s.Bind(connection_id).Bind(problem.source).Bind(problem.location);
                   s.Bind(problem.error).Bind(now_ms);
                 },
                 "storing run problem")
              .status());
      ++outcome.run_problems;
    }
    if (!items.problems.empty()) {
      UPLINK_RETURN_IF_ERROR(
          Change("DELETE FROM run_problems WHERE connection_id = ? AND id NOT IN (SELECT id FROM "
                 "run_problems WHERE connection_id = ? ORDER BY reported_at DESC, id DESC "
                 "LIMIT ?)",
                 [&](Statement& s) {
                   s.Bind(connection_id).Bind(connection_id);
                   s.Bind(static_cast<std::int64_t>(kMaxProblemsPerConnection));
                 },
                 "pruning run problems")
              .status());
    }
  }
  return Status::Ok();
}

Result<RunPage> SqlStore::ListRuns(const RunQuery& query) {
  std::string sql = std::string("SELECT ") + kRunColumns + " FROM runs r WHERE r.connection_id = ?";
  if (query.experiment) sql += " AND (r.experiment = ? OR r.experiment_id = ?)";
  if (query.status) sql += " AND r.status = ?";
  if (query.user) sql += " AND r.user_name = ?";
  if (query.started_after) sql += " AND r.started_at >= ?";
  if (query.started_before) sql += " AND r.started_at < ?";
  if (query.after) sql += " AND (r.started_at < ? OR (r.started_at = ? AND r.run_id > ?))";
  sql += " ORDER BY r.started_at DESC, r.run_id LIMIT ?";
  const int limit = std::clamp(query.limit, 1, kMaxRunPage);
  RunPage page;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(),
      [&](Statement& s) {
        s.Bind(query.connection_id);
        if (query.experiment) s.Bind(*query.experiment).Bind(*query.experiment);
        if (query.status) s.Bind(*query.status);
        if (query.user) s.Bind(*query.user);
        if (query.started_after) s.Bind(ToUnixMillis(*query.started_after));
        if (query.started_before) s.Bind(ToUnixMillis(*query.started_before));
        if (query.after) {
          s.Bind(query.after->first).Bind(query.after->first).Bind(query.after->second);
        }
        s.Bind(static_cast<std::int64_t>(limit) + 1);
      },
      [&](const Statement& row) { page.runs.push_back(RunFromRow(row)); }, "listing runs"));
  if (static_cast<int>(page.runs.size()) > limit) {
    page.runs.pop_back();
    page.more = true;
  }
  return page;
}

Result<RunFacets> SqlStore::ListRunFacets(const std::string& connection_id) {
  // One snapshot, so that the three groupings count the same runs.
  return ReadSnapshotOnLookup([&](sql::Database& database) -> Result<RunFacets> {
    RunFacets facets;
    auto group = [&](const char* sql, std::vector<std::pair<std::string, std::int64_t>>& out) {
      return ForEachRowOn(
          database, sql,
          [&](Statement& s) { s.Bind(connection_id).Bind(static_cast<std::int64_t>(kMaxFacets)); },
          [&](const Statement& row) { out.emplace_back(row.Text(0), row.Int(1)); },
          "reading run facets");
    };
    UPLINK_RETURN_IF_ERROR(
        group("SELECT experiment, COUNT(*) FROM runs WHERE connection_id = ? "
              "GROUP BY experiment ORDER BY experiment LIMIT ?",
              facets.experiments));
    UPLINK_RETURN_IF_ERROR(
        group("SELECT status, COUNT(*) FROM runs WHERE connection_id = ? "
              "GROUP BY status ORDER BY status LIMIT ?",
              facets.statuses));
    UPLINK_RETURN_IF_ERROR(
        group("SELECT user_name, COUNT(*) FROM runs WHERE connection_id = ? "
              "GROUP BY user_name ORDER BY user_name LIMIT ?",
              facets.users));
    return facets;
  });
}

Result<StoredRun> SqlStore::GetRun(const std::string& connection_id, const std::string& run_id) {
  static const std::string sql = std::string("SELECT ") + kRunColumns +
                                 " FROM runs r WHERE r.connection_id = ? AND r.run_id = ?";
  std::optional<StoredRun> run;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(connection_id).Bind(run_id); },
      [&](const Statement& row) { run = RunFromRow(row); }, "reading run"));
  if (!run) return NotFoundError("this connection has no run " + run_id);
  return std::move(*run);
}

Result<std::vector<RunMetric>> SqlStore::ListRunMetrics(const std::string& connection_id,
                                                        const std::string& run_id) {
  std::vector<RunMetric> metrics;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT m.key, m.latest_step, m.latest_value, m.latest_timestamp, m.points FROM "
      "run_metrics m JOIN runs r ON r.id = m.run WHERE r.connection_id = ? AND r.run_id = ? "
      "ORDER BY m.key",
      [&](Statement& s) { s.Bind(connection_id).Bind(run_id); },
      [&](const Statement& row) {
        metrics.push_back(RunMetric{row.Text(0), RunPoint{row.Int(1), ValueOf(row, 2), row.Int(3)},
                                    row.Int(4)});
      },
      "reading run metrics"));
  return metrics;
}

Result<std::vector<RunHistory>> SqlStore::ReadRunHistory(const std::string& connection_id,
                                                            const std::string& run_id,
                                                            const std::vector<std::string>& metrics,
                                                            size_t max_points) {
  return ReadSnapshotOnLookup([&](sql::Database& database) -> Result<std::vector<RunHistory>> {
    struct Metric {
      std::int64_t id;
      std::string key;
      std::int64_t points;
    };
    std::vector<Metric> chosen;
    UPLINK_RETURN_IF_ERROR(ForEachRowOn(
        database,
        "SELECT m.id, m.key, m.points FROM run_metrics m JOIN runs r ON r.id = m.run "
        "WHERE r.connection_id = ? AND r.run_id = ? ORDER BY m.key",
        [&](Statement& s) { s.Bind(connection_id).Bind(run_id); },
        [&](const Statement& row) {
          std::string key = row.Text(1);
          if (metrics.empty() || std::find(metrics.begin(), metrics.end(), key) != metrics.end()) {
            chosen.push_back(Metric{row.Int(0), std::move(key), row.Int(2)});
          }
        },
        "reading run metrics"));
    std::vector<RunHistory> histories;
    const std::int64_t cap = std::max<std::int64_t>(2, static_cast<std::int64_t>(max_points));
    for (const Metric& metric : chosen) {
      RunHistory history{metric.key, metric.points, {}};
      // Every stride-th point in (step, timestamp) order, and the last one.
      const std::int64_t stride = metric.points <= cap ? 1 : (metric.points + cap - 2) / (cap - 1);
      UPLINK_RETURN_IF_ERROR(ForEachRowOn(
          database,
          "SELECT step, timestamp, value FROM (SELECT step, timestamp, value, ROW_NUMBER() OVER "
          "(ORDER BY step, timestamp) AS n, COUNT(*) OVER () AS total FROM run_metric_points "
          "WHERE metric = ?) WHERE (n - 1) % ? = 0 OR n = total ORDER BY step, timestamp",
          [&](Statement& s) { s.Bind(metric.id).Bind(stride); },
          [&](const Statement& row) {
            history.history.push_back(RunPoint{row.Int(0), ValueOf(row, 2), row.Int(1)});
          },
          "reading run metric history"));
      histories.push_back(std::move(history));
    }
    return histories;
  });
}

Result<std::vector<RunProblem>> SqlStore::ListRunProblems(const std::string& connection_id,
                                                          int limit) {
  std::vector<RunProblem> problems;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      "SELECT source, location, error, reported_at FROM run_problems WHERE connection_id = ? "
      "ORDER BY reported_at DESC, id DESC LIMIT ?",
      [&](Statement& s) {
        s.Bind(connection_id).Bind(static_cast<std::int64_t>(std::clamp(limit, 1, 1000)));
      },
      [&](const Statement& row) {
        problems.push_back(
            RunProblem{row.Text(0), row.Text(1), row.Text(2), FromUnixMillis(row.Int(3))});
      },
      "reading run problems"));
  return problems;
}

}  // namespace uplink::console
