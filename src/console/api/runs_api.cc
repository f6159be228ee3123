#include "console/api/runs_api.h"

#include <cmath>

#include "common/crypto.h"
#include "common/text.h"
#include "console/api/json_fields.h"
#include "console/replies.h"
#include "protocol/experiments.h"

namespace uplink::console {
namespace {

constexpr const char* kRunItemsTotal = "uplink_console_run_items_total";

constexpr std::int64_t kDefaultRunPage = 100;
constexpr std::int64_t kDefaultHistoryPoints = 500;
constexpr std::int64_t kMaxHistoryPoints = 10'000;
constexpr size_t kMaxFilterBytes = 1024;
constexpr size_t kMaxMetricsAsked = 100;
constexpr int kProblemsShown = 50;

json::value Number(double value) {
  if (std::isnan(value)) return json::value("NaN");
  if (std::isinf(value)) return json::value(value > 0 ? "Infinity" : "-Infinity");
  return json::value(value);
}

json::value OptionalTime(const std::optional<WallTime>& time) {
  return time ? json::value(FormatRfc3339Millis(*time)) : json::value(nullptr);
}

// A JSON text the store holds (checked when it arrived); an empty object if it is not.
json::value Stored(const std::string& text, json::value fallback) {
  auto parsed = ParseJson(text, JsonLimits{1 << 20, 8});
  return parsed.ok() ? std::move(*parsed) : std::move(fallback);
}

json::object RunSummaryJson(const StoredRun& stored) {
  const ExperimentRun& run = stored.run;
  json::value duration = nullptr;
  if (run.started_at && run.ended_at && *run.ended_at >= *run.started_at) {
    duration = std::chrono::duration<double>(*run.ended_at - *run.started_at).count();
  }
  return json::object{{"run_id", run.run_id},
                      {"source", run.source},
                      {"experiment_id", run.experiment_id},
                      {"experiment", run.experiment},
                      {"name", run.name},
                      {"user", run.user},
                      {"status", run.status},
                      {"offline", run.offline},
                      {"started_at", OptionalTime(run.started_at)},
                      {"ended_at", OptionalTime(run.ended_at)},
                      {"duration_seconds", duration},
                      {"exit_code", run.exit_code ? json::value(*run.exit_code) : json::value(nullptr)},
                      {"metric_count", stored.metric_count},
                      {"location", run.location},
                      {"stream", stored.stream},
                      {"first_seen_at", FormatRfc3339Millis(stored.first_seen_at)},
                      {"updated_at", FormatRfc3339Millis(stored.updated_at)}};
}

json::array Counts(const std::vector<std::pair<std::string, std::int64_t>>& counts) {
  json::array out;
  for (const auto& [name, count] : counts) out.push_back(json::object{{"name", name}, {"runs", count}});
  return out;
}

// The paging position of a run in newest-first order, opaque to clients.
std::string PageToken(const StoredRun& run) {
  std::int64_t started = run.run.started_at
                             ? std::chrono::floor<std::chrono::milliseconds>(
                                   run.run.started_at->time_since_epoch())
                                   .count()
                             : 0;
  return Base64UrlEncode(std::to_string(started) + ":" + run.run.run_id);
}

Result<std::pair<std::int64_t, std::string>> ReadPageToken(const std::string& token) {
  Status bad = InvalidArgumentError("after must be a next_after value from an earlier page");
  auto decoded = Base64UrlDecode(token);
  if (!decoded.ok()) return bad;
  size_t colon = decoded->find(':');
  if (colon == std::string::npos || colon == 0) return bad;
  auto started = ParseQueryInt("after", decoded->substr(0, colon), 0, std::int64_t{1} << 52);
  if (!started.ok()) return bad;
  return std::pair{*started, decoded->substr(colon + 1)};
}

Result<WallTime> QueryTime(std::string_view name, const std::string& value) {
  auto time = value.size() <= 64 ? ParseRfc3339(value) : Result<WallTime>(InvalidArgumentError(""));
  if (!time.ok()) {
    return InvalidArgumentError(std::string(name) +
                                " must be an RFC 3339 time such as 2026-11-30T03:20:00Z");
  }
  return *time;
}

std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> parts;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    if (!part.empty()) parts.emplace_back(part);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return parts;
}

}  // namespace

RunsApi::RunsApi(const ApiContext& context) : ApiArea(context) {
  metrics_.DeclareCounter(kRunItemsTotal,
                          "Experiment run items stored, by kind: upserts, points (new ones), "
                          "duplicate_points (already stored), deleted, problems.");
}

void RunsApi::Register(Routes& routes) {
  routes.UserRoute(
      "GET", "/api/v1/connections/{id}/runs", Access::kAnyUser,
      [this](const net::Request& request, const net::PathParams& params,
             const RequestContext& caller) { return ListRuns(params.at("id"), request, caller); });
  routes.UserRoute("GET", "/api/v1/connections/{id}/runs/{run_id}", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ShowRun(params.at("id"), params.at("run_id"), request, caller);
                   });
}

Result<net::Response> RunsApi::ListRuns(const std::string& id, const net::Request& request,
                                        const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, caller));
  RunQuery query;
  query.connection_id = connection.id;
  std::int64_t limit = kDefaultRunPage;
  for (const auto& [key, value] : request.QueryParams()) {
    if (value.size() > kMaxFilterBytes) {
      return InvalidArgumentError(key.substr(0, 64) + " is longer than " +
                                  std::to_string(kMaxFilterBytes) + " bytes");
    }
    if (key == "experiment") {
      query.experiment = value;
    } else if (key == "status") {
      if (!protocol::IsRunStatus(value)) {
        return InvalidArgumentError("status must be one of running, scheduled, finished, failed, "
                                    "killed, crashed, unknown");
      }
      query.status = value;
    } else if (key == "user") {
      query.user = value;
    } else if (key == "started_after") {
      UPLINK_ASSIGN_OR_RETURN(query.started_after, QueryTime(key, value));
    } else if (key == "started_before") {
      UPLINK_ASSIGN_OR_RETURN(query.started_before, QueryTime(key, value));
    } else if (key == "limit") {
      UPLINK_ASSIGN_OR_RETURN(limit, ParseQueryInt("limit", value, 1, kMaxRunPage));
    } else if (key == "after") {
      UPLINK_ASSIGN_OR_RETURN(query.after, ReadPageToken(value));
    } else {
      return InvalidArgumentError("unknown query parameter \"" + OneLineExcerpt(key, 64) +
                                  "\"; the run list takes experiment, status, user, "
                                  "started_after, started_before, limit and after");
    }
  }
  query.limit = static_cast<int>(limit);
  UPLINK_ASSIGN_OR_RETURN(RunPage page, store_.ListRuns(query));
  UPLINK_ASSIGN_OR_RETURN(RunFacets facets, store_.ListRunFacets(connection.id));
  UPLINK_ASSIGN_OR_RETURN(std::vector<RunProblem> problems,
                          store_.ListRunProblems(connection.id, kProblemsShown));
  json::array runs;
  for (const StoredRun& run : page.runs) runs.push_back(RunSummaryJson(run));
  json::array problem_list;
  for (const RunProblem& problem : problems) {
    problem_list.push_back(json::object{{"source", problem.source},
                                        {"location", problem.location},
                                        {"error", problem.error},
                                        {"reported_at", FormatRfc3339Millis(problem.reported_at)}});
  }
  json::value next_after =
      page.more && !page.runs.empty() ? json::value(PageToken(page.runs.back())) : json::value(nullptr);
  return JsonResponse(200, {{"runs", std::move(runs)},
                            {"next_after", next_after},
                            {"experiments", Counts(facets.experiments)},
                            {"statuses", Counts(facets.statuses)},
                            {"users", Counts(facets.users)},
                            {"problems", std::move(problem_list)}});
}

Result<net::Response> RunsApi::ShowRun(const std::string& id, const std::string& run_id,
                                       const net::Request& request, const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, caller));
  bool history = true;
  std::vector<std::string> metrics;
  std::int64_t points = kDefaultHistoryPoints;
  for (const auto& [key, value] : request.QueryParams()) {
    if (key == "history") {
      if (value != "true" && value != "false") {
        return InvalidArgumentError("history must be true or false");
      }
      history = value == "true";
    } else if (key == "metrics") {
      metrics = SplitCommas(value);
      if (metrics.size() > kMaxMetricsAsked) {
        return InvalidArgumentError("metrics names more than " + std::to_string(kMaxMetricsAsked) +
                                    " metrics");
      }
    } else if (key == "points") {
      UPLINK_ASSIGN_OR_RETURN(points, ParseQueryInt("points", value, 2, kMaxHistoryPoints));
    } else {
      return InvalidArgumentError("unknown query parameter \"" + OneLineExcerpt(key, 64) +
                                  "\"; a run takes history, metrics and points");
    }
  }
  if (run_id.empty() || run_id.size() > protocol::kMaxRunIdBytes) {
    return NotFoundError("this connection has no such run");
  }
  auto run = store_.GetRun(connection.id, run_id);
  if (!run.ok()) {
    if (run.status().code() != StatusCode::kNotFound) return run.status();
    return NotFoundError("this connection has no run \"" + OneLineExcerpt(run_id, 64) +
                         "\"; GET /api/v1/connections/" + connection.id + "/runs lists its runs");
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<RunMetric> latest,
                          store_.ListRunMetrics(connection.id, run_id));
  json::object body = RunSummaryJson(*run);
  body["params"] = Stored(run->run.params_json, json::object{});
  body["tags"] = Stored(run->run.tags_json, json::object{});
  body["summary"] = Stored(run->run.summary_json, json::object{});
  body["redacted"] = Stored(run->run.redacted_json, json::array{});
  body["omitted"] = run->run.omitted;
  json::array metric_list;
  for (const RunMetric& metric : latest) {
    metric_list.push_back(json::object{{"key", metric.key},
                                       {"step", metric.latest.step},
                                       {"value", Number(metric.latest.value)},
                                       {"timestamp_ms", metric.latest.timestamp_ms},
                                       {"points", metric.points}});
  }
  body["metrics"] = std::move(metric_list);
  if (history) {
    UPLINK_ASSIGN_OR_RETURN(
        std::vector<RunHistory> histories,
        store_.ReadRunHistory(connection.id, run_id, metrics, static_cast<size_t>(points)));
    json::object by_metric;
    for (const RunHistory& one : histories) {
      json::array list;
      list.reserve(one.history.size());
      for (const RunPoint& point : one.history) {
        list.push_back(json::array{point.step, Number(point.value), point.timestamp_ms});
      }
      by_metric[one.key] = std::move(list);
    }
    body["history"] = std::move(by_metric);
  }
  return JsonResponse(200, body);
}

void RunsApi::CountRunItems(const UploadOutcome& outcome) {
  for (auto [kind, count] : {std::pair{"upserts", outcome.runs_upserted},
                             std::pair{"points", outcome.run_points_stored},
                             std::pair{"duplicate_points", outcome.run_points_duplicate},
                             std::pair{"deleted", outcome.runs_deleted},
                             std::pair{"problems", outcome.run_problems}}) {
    if (count > 0) metrics_.Increment(kRunItemsTotal, {{"kind", kind}}, static_cast<double>(count));
  }
}

}  // namespace uplink::console
