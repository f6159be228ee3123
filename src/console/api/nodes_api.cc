#include "console/api/nodes_api.h"

#include <algorithm>

#include "common/text.h"
#include "console/api/json_fields.h"
#include "console/api/node_metrics.h"
#include "console/replies.h"
#include "protocol/plans.h"

namespace uplink::console {
namespace {

constexpr std::int64_t kDefaultNodePage = 100;
constexpr const char* kNodeSamplesStoredTotal = "uplink_console_node_samples_stored_total";
constexpr const char* kNodeSamplesRefusedTotal = "uplink_console_node_samples_refused_total";
constexpr const char* kNodeSampleValuesDroppedTotal =
    "uplink_console_node_sample_values_dropped_total";
constexpr const char* kNodeSamplesPrunedTotal = "uplink_console_node_samples_pruned_total";
constexpr const char* kNodeRollupsWrittenTotal = "uplink_console_node_rollups_written_total";
constexpr const char* kNodeRollupsPrunedTotal = "uplink_console_node_rollups_pruned_total";

constexpr std::int64_t kMinPlanInterval = protocol::kMinPlanInterval.count();
constexpr std::int64_t kMaxPlanInterval = protocol::kMaxPlanInterval.count();
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

NodesApi::NodesApi(const ApiContext& context) : ApiArea(context) {
  metrics_.DeclareCounter(kNodeSamplesStoredTotal, "Node samples whose figures were stored.");
  metrics_.DeclareCounter(kNodeSamplesRefusedTotal,
                          "Node samples refused (invalid: the upload was answered 422) or "
                          "acknowledged without keeping their figures (too_old, in_future, "
                          "same_time), by reason.");
  metrics_.DeclareCounter(kNodeSampleValuesDroppedTotal,
                          "Node sample values not stored because their node has too many "
                          "series.");
  metrics_.DeclareCounter(kNodeSamplesPrunedTotal, "Raw node samples deleted by retention.");
  metrics_.DeclareCounter(kNodeRollupsWrittenTotal,
                          "5-minute node sample rollups written (or rewritten after a late "
                          "sample).");
  metrics_.DeclareCounter(kNodeRollupsPrunedTotal, "Node sample rollups deleted by retention.");
}

void NodesApi::Register(Routes& routes) {
  routes.UserRoute("GET", "/api/v1/connections/{id}/nodes", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ListSampleNodes(params.at("id"), request, caller);
                   });
  routes.UserRoute("GET", "/api/v1/connections/{id}/nodes/{node}/series", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return NodeSeries(params.at("id"), params.at("node"), request, caller);
                   });
  routes.UserRoute(
      "GET", "/api/v1/connections/{id}/node-plan", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return ShowNodePlan(params.at("id"), caller);
      });
  routes.UserRoute("PUT", "/api/v1/connections/{id}/node-plan", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return SetNodePlan(params.at("id"), request, caller);
                   });
}

json::object NodesApi::UploadPlan(const NodePlan& plan) {
  return protocol::EncodeNodePlan(protocol::NodePlan{
      .interval = std::chrono::seconds(plan.interval_seconds), .collectors = plan.collectors});
}

void NodesApi::CountInvalidSample() {
  metrics_.Increment(kNodeSamplesRefusedTotal, {{"reason", "invalid"}});
}

Result<net::Response> NodesApi::ListSampleNodes(const std::string& id, const net::Request& request,
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

Result<net::Response> NodesApi::NodeSeries(const std::string& id, const std::string& node,
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

Result<net::Response> NodesApi::ShowNodePlan(const std::string& id, const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
  UPLINK_ASSIGN_OR_RETURN(NodePlan plan, store_.GetNodePlan(connection.id));
  return JsonResponse(200, PlanJson(connection.id, plan));
}

Result<net::Response> NodesApi::SetNodePlan(const std::string& id, const net::Request& request,
                                            const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OperatedConnection(id, caller));
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

void NodesApi::CountNodeSamples(const UploadOutcome& outcome, const Connection& connection,
                                const std::string& stream) {
  auto add = [&](const char* name, std::int64_t count, const metrics::Labels& labels = {}) {
    if (count > 0) metrics_.Increment(name, labels, static_cast<double>(count));
  };
  add(kNodeSamplesStoredTotal, outcome.samples_stored);
  add(kNodeSamplesRefusedTotal, outcome.samples_too_old, {{"reason", "too_old"}});
  add(kNodeSamplesRefusedTotal, outcome.samples_in_future, {{"reason", "in_future"}});
  add(kNodeSamplesRefusedTotal, outcome.samples_same_time, {{"reason", "same_time"}});
  add(kNodeSampleValuesDroppedTotal, outcome.sample_values_dropped);
  add(kNodeSamplesPrunedTotal, outcome.samples_pruned);
  add(kNodeRollupsWrittenTotal, outcome.rollups_written);
  add(kNodeRollupsPrunedTotal, outcome.rollups_pruned);
  if (outcome.samples_too_old > 0 || outcome.samples_in_future > 0) {
    // Acknowledged, so the agent does not send them again, but their figures are not kept.
    log_.Warn("node samples outside the kept time range were not stored",
              {{"connection_id", connection.id},
               {"stream", stream},
               {"too_old", outcome.samples_too_old},
               {"in_future", outcome.samples_in_future}});
  }
  if (outcome.sample_values_dropped > 0) {
    log_.Warn("node sample values dropped: the node has too many series",
              {{"connection_id", connection.id},
               {"stream", stream},
               {"dropped", outcome.sample_values_dropped}});
  }
}

}  // namespace uplink::console
