// Node metrics (docs/api.md, "Node metrics"): the latest figures of a connection's nodes, one
// metric of one node over time, and the plan that tells the node role what to collect.
#include <algorithm>

#include "common/text.h"
#include "console/api/console_api.h"
#include "console/api/errors.h"
#include "console/api/node_metrics.h"

namespace uplink::console {
namespace {

constexpr std::int64_t kDefaultNodePage = 100;
constexpr std::int64_t kMinPlanInterval = 10;
constexpr std::int64_t kMaxPlanInterval = 3600;
constexpr size_t kMaxNodeNameBytes = 253;
constexpr size_t kMaxMetricBytes = 64;

// Kubernetes node names: DNS subdomains. Anything else cannot have samples (the stream
// name, node/<name>, allows only these characters), so it is answered 404 without a query.
bool IsPlausibleNodeName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNodeNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '.' || c == '_' || c == '-';
  });
}

json::object PlanJson(const std::string& connection_id, const NodePlan& plan) {
  json::array collectors;
  for (const std::string& name : plan.collectors) collectors.push_back(json::value(name));
  return json::object{{"connection_id", connection_id},
                      {"interval_seconds", plan.interval_seconds},
                      {"collectors", std::move(collectors)},
                      {"updated_at", plan.updated_at ? json::value(FormatRfc3339(*plan.updated_at))
                                                     : json::value(nullptr)}};
}

std::string CollectorNames() {
  std::string names;
  for (std::string_view name : kNodeCollectors) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

// The collectors of a PUT body: known names, each once, put in kNodeCollectors' order.
Result<std::vector<std::string>> ReadCollectors(const json::value& value) {
  if (!value.is_array()) return InvalidArgumentError("collectors must be an array of names");
  std::vector<bool> chosen(std::size(kNodeCollectors), false);
  for (const json::value& item : value.get_array()) {
    if (!item.is_string()) return InvalidArgumentError("collectors must hold names (strings)");
    std::string_view name = item.get_string();
    auto known = std::find(std::begin(kNodeCollectors), std::end(kNodeCollectors), name);
    if (known == std::end(kNodeCollectors)) {
      return InvalidArgumentError("collectors has \"" + OneLineExcerpt(name, 32) +
                                  "\", which is not a collector; they are " + CollectorNames());
    }
    size_t index = static_cast<size_t>(known - std::begin(kNodeCollectors));
    if (chosen[index]) {
      return InvalidArgumentError("collectors names \"" + std::string(name) + "\" twice");
    }
    chosen[index] = true;
  }
  std::vector<std::string> collectors;
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (chosen[i]) collectors.emplace_back(kNodeCollectors[i]);
  }
  return collectors;
}

}  // namespace

Result<Connection> ConsoleApi::PlanConnection(const std::string& id,
                                              const RequestContext& caller) {
  if (!caller.is_admin()) return OwnedConnection(id, caller);
  Status not_found = NotFoundError("there is no connection with this id; list them with "
                                   "GET /api/v1/connections");
  if (!IsPlausibleId(id)) return not_found;
  auto connection = store_.GetConnection(id);
  if (!connection.ok() && connection.status().code() == StatusCode::kNotFound) return not_found;
  return connection;
}

Result<net::Response> ConsoleApi::ListSampleNodes(const std::string& id,
                                                  const net::Request& request,
                                                  const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, caller));
  std::int64_t limit = kDefaultNodePage;
  std::string after;
  for (const auto& [key, value] : request.QueryParams()) {
    if (key == "limit") {
      UPLINK_ASSIGN_OR_RETURN(limit, ParseQueryInt("limit", value, 1, kMaxSampleNodePage));
    } else if (key == "after") {
      if (value.size() > kMaxNodeNameBytes) {
        return InvalidArgumentError("after must be a node name, as next_after gives it");
      }
      after = value;
    } else {
      return InvalidArgumentError("unknown query parameter \"" + key.substr(0, 64) +
                                  "\"; the node list takes limit and after");
    }
  }
  UPLINK_ASSIGN_OR_RETURN(NodePlan plan, store_.GetNodePlan(connection.id));
  UPLINK_ASSIGN_OR_RETURN(SampleNodePage page,
                          store_.ListSampleNodes(connection.id, after, static_cast<int>(limit)));
  WallTime now = clock_.Now();
  json::array nodes;
  for (const SampleNodeState& state : page.nodes) {
    nodes.push_back(NodeSummaryJson(state, now, plan.interval_seconds));
  }
  json::value next_after =
      page.more && !page.nodes.empty() ? json::value(page.nodes.back().node) : json::value(nullptr);
  return JsonResponse(200, {{"nodes", std::move(nodes)}, {"next_after", next_after}});
}

Result<net::Response> ConsoleApi::NodeSeries(const std::string& id, const std::string& node,
                                             const net::Request& request,
                                             const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, caller));
  Status unknown_node = NotFoundError("this connection has no samples from node \"" +
                                      OneLineExcerpt(node, kMaxNodeNameBytes) +
                                      "\"; GET /api/v1/connections/" + connection.id +
                                      "/nodes lists its nodes");
  if (!IsPlausibleNodeName(node)) return unknown_node;

  std::optional<SeriesMetric> metric;
  std::optional<std::string> since_text;
  std::optional<std::int64_t> asked_step;
  for (const auto& [key, value] : request.QueryParams()) {
    if (key == "metric") {
      metric = value.size() <= kMaxMetricBytes ? SeriesMetricFromName(value) : std::nullopt;
      if (!metric) {
        return InvalidArgumentError("metric \"" + OneLineExcerpt(value, kMaxMetricBytes) +
                                    "\" is not one of " + SeriesMetricNames());
      }
    } else if (key == "since") {
      since_text = value;
    } else if (key == "step") {
      UPLINK_ASSIGN_OR_RETURN(asked_step,
                              ParseQueryInt("step", value, kMinSeriesStep, kMaxSeriesStep));
    } else {
      return InvalidArgumentError("unknown query parameter \"" + key.substr(0, 64) +
                                  "\"; a series takes metric, since and step");
    }
  }
  if (!metric) return InvalidArgumentError("metric is required, one of " + SeriesMetricNames());

  WallTime now = clock_.Now();
  WallTime since = now - kDefaultSeriesSpan;
  if (since_text) {
    UPLINK_ASSIGN_OR_RETURN(since, ParseSince(*since_text, now));
  }
  auto span = std::chrono::ceil<std::chrono::seconds>(now - since);
  UPLINK_ASSIGN_OR_RETURN(NodePlan plan, store_.GetNodePlan(connection.id));
  std::int64_t step = asked_step.value_or(DefaultStep(span, plan.interval_seconds));
  std::int64_t min_step = (span.count() + kMaxSeriesPoints - 1) / kMaxSeriesPoints;
  if (step < min_step) {
    return InvalidArgumentError("step " + std::to_string(step) + " would give more than " +
                                std::to_string(kMaxSeriesPoints) + " points since " +
                                FormatRfc3339(since) + "; use a step of at least " +
                                std::to_string(min_step) + " seconds, or a later since");
  }
  // Raw points when they cover the whole range, else the 5-minute rollups (and the raw
  // points after the last complete one), whose buckets a step must be made of.
  bool raw = since >= now - options_.sample_raw_retention;
  if (!raw) step = (step + kRollupSeconds - 1) / kRollupSeconds * kRollupSeconds;
  std::int64_t max_gap_ms = kMaxGapIntervals * plan.interval_seconds * 1000;
  auto since_ms = std::chrono::floor<std::chrono::milliseconds>(since.time_since_epoch()).count();
  auto now_ms = std::chrono::floor<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::int64_t first_bucket = BucketStart(since_ms, step);
  std::int64_t last_bucket = BucketStart(now_ms, step);
  std::span<const SampleMetric> sources = SeriesSources(*metric);
  auto bucket_time = [](std::int64_t seconds) { return FromUnixSeconds(seconds); };
  WallTime end = now + std::chrono::milliseconds(1);

  BucketedSeries series;
  auto add_points = [&](const std::vector<SeriesPoints>& read, std::int64_t bucket_seconds,
                        std::int64_t from_bucket) {
    for (const SeriesPoints& points : read) {
      auto buckets = AggregateBuckets(KindOf(points.metric), points.points, bucket_seconds,
                                      from_bucket, max_gap_ms);
      MergeInto(series[{points.metric, points.label}], buckets, step);
    }
  };
  Status read = Status::Ok();
  if (raw) {
    auto points = store_.ReadSamplePoints(connection.id, node, sources,
                                          bucket_time(first_bucket) -
                                              std::chrono::milliseconds(max_gap_ms),
                                          end);
    read = points.status();
    if (points.ok()) add_points(*points, step, first_bucket);
  } else {
    auto rollups = store_.ReadSampleRollups(connection.id, node, sources, bucket_time(first_bucket),
                                            bucket_time(last_bucket + step));
    read = rollups.status();
    if (rollups.ok()) {
      for (const SeriesRollups& rolled : rollups->series) {
        std::map<std::int64_t, BucketAggregate> buckets(rolled.buckets.begin(),
                                                        rolled.buckets.end());
        std::erase_if(buckets, [&](const auto& entry) {
          return entry.first >= rollups->rolled_through;
        });
        MergeInto(series[{rolled.metric, rolled.label}], buckets, step);
      }
      // After the last complete rollup only the raw points say anything.
      std::int64_t tail = std::max(first_bucket, rollups->rolled_through);
      auto points = store_.ReadSamplePoints(
          connection.id, node, sources,
          bucket_time(tail) - std::chrono::milliseconds(max_gap_ms), end);
      read = points.status();
      if (points.ok()) add_points(*points, kRollupSeconds, tail);
    }
  }
  if (read.code() == StatusCode::kNotFound) return unknown_node;
  UPLINK_RETURN_IF_ERROR(read);

  std::vector<SeriesOutput> outputs =
      ComputeSeries(*metric, series, first_bucket, last_bucket, step);
  bool truncated = outputs.size() > kMaxSeriesPerReply;
  if (truncated) outputs.resize(kMaxSeriesPerReply);
  std::string_view label_key = LabelKey(sources.front());
  json::array list;
  for (const SeriesOutput& output : outputs) {
    json::object labels;
    if (!label_key.empty()) labels[label_key] = output.label;
    json::array points;
    for (const auto& [at, value] : output.points) {
      points.push_back(json::array{at, NumberJson(value)});
    }
    list.push_back(json::object{{"labels", std::move(labels)}, {"points", std::move(points)}});
  }
  return JsonResponse(200, {{"node", node},
                            {"metric", SeriesMetricName(*metric)},
                            {"unit", SeriesMetricUnit(*metric)},
                            {"step_seconds", step},
                            {"source", raw ? "raw" : "rollups"},
                            {"series", std::move(list)},
                            {"truncated", truncated}});
}

Result<net::Response> ConsoleApi::ShowNodePlan(const std::string& id,
                                               const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, PlanConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(NodePlan plan, store_.GetNodePlan(connection.id));
  return JsonResponse(200, PlanJson(connection.id, plan));
}

Result<net::Response> ConsoleApi::SetNodePlan(const std::string& id, const net::Request& request,
                                              const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, PlanConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"interval_seconds", "collectors"}));
  // A field left out takes its default: the body is the whole plan.
  NodePlan plan = DefaultNodePlan();
  if (fields.Find("interval_seconds")) {
    UPLINK_ASSIGN_OR_RETURN(plan.interval_seconds,
                            fields.RequiredInt("interval_seconds", kMinPlanInterval,
                                               kMaxPlanInterval));
  }
  if (const json::value* collectors = fields.Find("collectors")) {
    UPLINK_ASSIGN_OR_RETURN(plan.collectors, ReadCollectors(*collectors));
  }
  UPLINK_ASSIGN_OR_RETURN(NodePlan previous, store_.GetNodePlan(connection.id));
  WallTime now = clock_.Now();
  auto names = [](const NodePlan& p) {
    json::array list;
    for (const std::string& name : p.collectors) list.push_back(json::value(name));
    return list;
  };
  json::object detail{{"interval_seconds", plan.interval_seconds},
                      {"collectors", names(plan)},
                      {"previous_interval_seconds", previous.interval_seconds},
                      {"previous_collectors", names(previous)}};
  UPLINK_RETURN_IF_ERROR(store_.SetNodePlan(
      connection.id, plan,
      CallerEvent(caller, now, "connection.node_plan", "connection", connection.id,
                  connection.owner_id, detail)));
  log_.Info("node plan set", {{"connection_id", connection.id},
                              {"user_id", caller.user.id},
                              {"interval_seconds", plan.interval_seconds}});
  plan.updated_at = now;
  return JsonResponse(200, PlanJson(connection.id, plan));
}

}  // namespace uplink::console
