#include "agent/experiments/mlflow_rest.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "agent/experiments/mlflow_file_store.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"
#include "common/secret.h"
#include "common/text.h"
#include "net/server.h"
#include "protocol/agent_api.h"

namespace uplink::agent::experiments {
namespace {

constexpr std::string_view kKeyPrefix = "mlflow-rest:";
constexpr size_t kMaxCredentialBytes = 4096;
constexpr int kMaxPages = 10'000;  // a server that keeps handing out page tokens stops here

// An int64 as MLflow writes it: a JSON number, or a string (protobuf's JSON form).
std::optional<std::int64_t> Int64(const json::value* value) {
  if (value == nullptr) return std::nullopt;
  if (value->is_int64()) return value->get_int64();
  if (value->is_uint64()) return static_cast<std::int64_t>(value->get_uint64());
  if (value->is_double()) return static_cast<std::int64_t>(value->get_double());
  if (value->is_string()) {
    std::string_view text = value->get_string();
    std::int64_t out = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec == std::errc() && end == text.data() + text.size()) return out;
  }
  return std::nullopt;
}

// A double as protobuf's JSON writes it: a number, or "NaN", "Infinity", "-Infinity".
std::optional<double> Double(const json::value* value) {
  if (value == nullptr) return std::nullopt;
  if (value->is_number()) return value->to_number<double>();
  if (value->is_string()) {
    std::string_view text = value->get_string();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

std::string Text(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value && value->is_string() ? std::string(value->get_string()) : "";
}

// [{"key": k, "value": v}, ...] as a map.
StringMap KeyValues(const json::object& data, std::string_view field) {
  StringMap entries;
  for (const json::value& item : ArrayAt(data, field)) {
    if (!item.is_object()) continue;
    entries.emplace_back(Text(item.get_object(), "key"), Text(item.get_object(), "value"));
  }
  return entries;
}

// The next page's token; an error for a server that hands out the same token again (it would
// make the pass loop).
Result<std::string> NextPageToken(const json::object& reply, const std::string& previous,
                                  std::string_view call) {
  std::string token = Text(reply, "next_page_token");
  if (!token.empty() && token == previous) {
    return InvalidArgumentError("MLflow " + std::string(call) +
                                " answered the same next_page_token twice; stopping");
  }
  return token;
}

// (step, timestamp) past the cursor: a step logged later, or the same step logged again.
bool Past(std::int64_t step, std::int64_t timestamp, const MetricCursor& cursor, bool fresh) {
  if (fresh) return true;
  return step > cursor.position || (step == cursor.position && timestamp > cursor.timestamp_ms);
}

}  // namespace

Status ValidateMlflowRestOptions(const MlflowRestOptions& options) {
  // The URL is never quoted back: it may carry a credential.
  auto parsed = net::ParseBaseUrl(options.base_url);
  if (!parsed.ok()) {
    return InvalidArgumentError("--mlflow-uri is not a valid URL: " + parsed.status().message() +
                                "; use http(s)://HOST[:PORT][/PATH] without user:password@ "
                                "(put credentials in --mlflow-token-file or "
                                "--mlflow-basic-auth-file)");
  }
  if (!options.token_file.empty() && !options.basic_auth_file.empty()) {
    return InvalidArgumentError("--mlflow-token-file and --mlflow-basic-auth-file both given: "
                                "MLflow takes one credential; choose one");
  }
  bool credential = !options.token_file.empty() || !options.basic_auth_file.empty();
  if (credential && parsed->scheme == "http" && !net::IsLoopbackHost(parsed->host)) {
    return InvalidArgumentError(
        "--mlflow-uri is plain http to a remote host: the MLflow credential would cross the "
        "network unencrypted; use https (with --mlflow-ca-file for a private CA)");
  }
  if (options.page_size < 1 || options.page_size > 50'000) {
    return InvalidArgumentError("the MLflow page size must be from 1 to 50000");
  }
  return Status::Ok();
}

Result<std::unique_ptr<MlflowRestScanner>> MlflowRestScanner::Create(MlflowRestOptions options) {
  UPLINK_RETURN_IF_ERROR(ValidateMlflowRestOptions(options));
  net::ClientOptions client;
  client.base_url = options.base_url;
  client.ca_file = options.ca_file;
  client.request_timeout = options.request_timeout;
  client.max_response_bytes = options.max_response_bytes;
  client.user_agent = protocol::AgentUserAgent(UPLINK_VERSION, "experiments");
  UPLINK_ASSIGN_OR_RETURN(auto http, net::HttpClient::Create(std::move(client)));
  return std::unique_ptr<MlflowRestScanner>(
      new MlflowRestScanner(std::move(options), std::move(http)));
}

MlflowRestScanner::MlflowRestScanner(MlflowRestOptions options,
                                     std::unique_ptr<net::HttpClient> http)
    : options_(std::move(options)), http_(std::move(http)) {}

Result<json::object> MlflowRestScanner::Call(std::string_view method, std::string_view path,
                                             const std::string& body_or_query) {
  net::Request request;
  request.method = std::string(method);
  request.target = std::string(path);
  if (method == "GET") {
    request.target += body_or_query;
  } else {
    request.headers.Set("Content-Type", "application/json");
    request.body = body_or_query;
  }
  if (!authorization_.empty()) request.headers.Set("Authorization", authorization_.Reveal());
  last_http_status_ = 0;
  auto response = http_->Send(std::move(request));
  if (!response.ok()) {
    return response.status().WithContext("MLflow " + std::string(path));
  }
  last_http_status_ = response->status;
  auto body = ParseJson(response->body, JsonLimits{options_.max_response_bytes, 64});
  if (response->status >= 300) {
    // MLflow's errors: {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "..."}.
    std::string what = "MLflow " + std::string(path) + " answered " +
                       std::to_string(response->status);
    if (body.ok() && body->is_object()) {
      std::string code = Text(body->get_object(), "error_code");
      std::string message = Text(body->get_object(), "message");
      if (!code.empty()) what += " " + OneLineExcerpt(code, 64);
      if (!message.empty()) what += ": " + OneLineExcerpt(message, 300);
    }
    if (response->status == 401 || response->status == 403) {
      what += " (check --mlflow-token-file or --mlflow-basic-auth-file)";
    }
    return Status(net::StatusCodeForHttpStatus(response->status), what);
  }
  if (!body.ok() || !body->is_object()) {
    return InvalidArgumentError("MLflow " + std::string(path) +
                                " answered with something that is not a JSON object" +
                                (body.ok() ? "" : ": " + body.status().message()));
  }
  return std::move(body->get_object());
}

Result<std::vector<MetricPoint>> MlflowRestScanner::NewPoints(const std::string& run_id,
                                                             const std::string& metric,
                                                             MetricCursor& cursor) {
  const bool fresh = cursor.position == 0 && cursor.timestamp_ms == 0;
  std::vector<MetricPoint> points;
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    std::string query = "?run_id=" + net::PercentEncode(run_id) +
                        "&metric_key=" + net::PercentEncode(metric) +
                        "&max_results=" + std::to_string(options_.page_size * 25);
    if (!token.empty()) query += "&page_token=" + net::PercentEncode(token);
    UPLINK_ASSIGN_OR_RETURN(json::object reply,
                            Call("GET", "/api/2.0/mlflow/metrics/get-history", query));
    for (const json::value& item : ArrayAt(reply, "metrics")) {
      if (!item.is_object()) continue;
      const json::object& point = item.get_object();
      auto step = Int64(point.if_contains("step"));
      auto timestamp = Int64(point.if_contains("timestamp"));
      auto value = Double(point.if_contains("value"));
      if (!timestamp || !value) continue;
      if (Past(step.value_or(0), *timestamp, cursor, fresh)) {
        points.push_back(MetricPoint{step.value_or(0), *value, *timestamp});
      }
    }
    UPLINK_ASSIGN_OR_RETURN(token, NextPageToken(reply, token, "metrics/get-history"));
    if (token.empty()) break;
  }
  for (const MetricPoint& point : points) {
    if (point.step > cursor.position ||
        (point.step == cursor.position && point.timestamp_ms > cursor.timestamp_ms)) {
      cursor = MetricCursor{point.step, point.timestamp_ms};
    }
  }
  return points;
}

Status MlflowRestScanner::Scan(ScanPass& pass) {
  // The credential of this pass, re-read so that a rotated Secret is used at once.
  authorization_ = Secret();
  if (!options_.token_file.empty() || !options_.basic_auth_file.empty()) {
    const std::string& file = options_.token_file.empty() ? options_.basic_auth_file
                                                          : options_.token_file;
    auto content = ReadFileBounded(file, kMaxCredentialBytes);
    if (!content.ok()) return content.status().WithContext("reading the MLflow credential file");
    Secret credential{std::string(TrimWhitespace(*content))};
    std::fill(content->begin(), content->end(), '\0');
    if (credential.empty()) return FailedPreconditionError("the MLflow credential file " + file + " is empty");
    authorization_ = Secret(options_.token_file.empty()
                                ? "Basic " + Base64Encode(credential.Reveal())
                                : "Bearer " + credential.Reveal());
  }

  // Every active experiment, page by page.
  std::vector<std::pair<std::string, std::string>> experiments;  // id, name
  std::string token;
  for (int page = 0; page < kMaxPages; ++page) {
    json::object request{{"max_results", options_.page_size}, {"view_type", "ACTIVE_ONLY"}};
    if (!token.empty()) request["page_token"] = token;
    UPLINK_ASSIGN_OR_RETURN(json::object reply, Call("POST", "/api/2.0/mlflow/experiments/search",
                                                     json::serialize(request)));
    for (const json::value& item : ArrayAt(reply, "experiments")) {
      if (!item.is_object()) continue;
      const json::object& experiment = item.get_object();
      if (Text(experiment, "lifecycle_stage") == "deleted") continue;
      std::string id = Text(experiment, "experiment_id");
      if (!id.empty()) experiments.emplace_back(id, Text(experiment, "name"));
    }
    UPLINK_ASSIGN_OR_RETURN(token, NextPageToken(reply, token, "experiments/search"));
    if (token.empty()) break;
  }

  std::set<std::string> seen;
  std::set<std::string> problem_keys;
  bool complete_listing = true;
  for (const auto& [experiment_id, name] : experiments) {
    token.clear();
    std::set<std::string> listed;
    Status listing = Status::Ok();
    for (int page = 0; page < kMaxPages; ++page) {
      json::object request{{"experiment_ids", json::array{json::value(experiment_id)}},
                           {"max_results", options_.page_size},
                           {"run_view_type", "ACTIVE_ONLY"}};
      if (!token.empty()) request["page_token"] = token;
      auto reply = Call("POST", "/api/2.0/mlflow/runs/search", json::serialize(request));
      if (!reply.ok()) {
        listing = reply.status();
        break;
      }
      for (const json::value& run : ArrayAt(*reply, "runs")) {
        if (!run.is_object()) continue;
        UPLINK_RETURN_IF_ERROR(ScanRun(pass, run.get_object(), name, listed));
      }
      auto next = NextPageToken(*reply, token, "runs/search");
      if (!next.ok()) {
        listing = next.status();
        break;
      }
      token = std::move(*next);
      if (token.empty()) break;
    }
    seen.insert(listed.begin(), listed.end());
    if (!listing.ok()) {
      if (last_http_status_ == 0 || last_http_status_ == 401 || last_http_status_ == 403) {
        return listing;  // the server as a whole: nothing is known, nothing is deleted
      }
      // One experiment the server cannot list: reported once; the pass goes on, but deletes
      // nothing, since that experiment's runs were not seen.
      complete_listing = false;
      const std::string key = std::string(kKeyPrefix) + "experiment/" + experiment_id;
      problem_keys.insert(key);
      UPLINK_RETURN_IF_ERROR(ReportProblem(pass, key, Fingerprint(listing.message()), source(),
                                           "experiment " + experiment_id + " (" + name + ")",
                                           listing, log_));
    }
  }
  if (!complete_listing) {
    // Forget only problems that are over; every run stays.
    for (auto it = pass.cursor.runs().lower_bound(std::string(kKeyPrefix) + "experiment/");
         it != pass.cursor.runs().end() &&
         it->first.starts_with(std::string(kKeyPrefix) + "experiment/");) {
      it = problem_keys.count(it->first) ? std::next(it) : pass.cursor.runs().erase(it);
    }
    return Status::Ok();
  }
  return ForgetMissing(pass, kKeyPrefix, seen);
}

Status MlflowRestScanner::ScanRun(ScanPass& pass, const json::object& run,
                                  const std::string& experiment_name,
                                  std::set<std::string>& seen) {
  const json::object& info = ObjectAt(run, "info");
  const json::object& data = ObjectAt(run, "data");
  std::string run_id = Text(info, "run_id");
  if (run_id.empty()) run_id = Text(info, "run_uuid");
  if (run_id.empty() || run_id.size() > 256) return Status::Ok();  // nothing to name it by
  const std::string key = std::string(kKeyPrefix) + run_id;
  seen.insert(key);

  // Everything of the run that can move, as one fingerprint: unchanged, nothing to do.
  std::string latest;
  for (const json::value& item : ArrayAt(data, "metrics")) {
    if (!item.is_object()) continue;
    const json::object& metric = item.get_object();
    latest += Text(metric, "key") + "\n" + std::to_string(Int64(metric.if_contains("step")).value_or(0)) +
              "\n" + std::to_string(Int64(metric.if_contains("timestamp")).value_or(0)) + "\n";
  }
  const std::uint64_t signature =
      Fingerprint(latest, Fingerprint(json::serialize(info), Fingerprint(json::serialize(
                                                                     json::object{{"p", ArrayAt(data, "params")},
                                                                                  {"t", ArrayAt(data, "tags")}}))));
  if (Unchanged(pass, key, signature) || !TakeRun(pass)) return Status::Ok();

  RunRecord record;
  record.source = "mlflow";
  record.run_id = run_id;
  record.experiment_id = Text(info, "experiment_id");
  record.experiment = experiment_name;
  record.status = MlflowStatus(Text(info, "status"));
  if (record.status.empty()) {
    return ReportProblem(pass, key, signature, source(), "run " + run_id,
                         InvalidArgumentError("the run has an unknown status \"" +
                                              OneLineExcerpt(Text(info, "status"), 32) + "\""),
                         log_);
  }
  record.started_at_ms = Int64(info.if_contains("start_time"));
  if (record.started_at_ms && *record.started_at_ms <= 0) record.started_at_ms.reset();
  record.ended_at_ms = Int64(info.if_contains("end_time"));
  if (record.ended_at_ms && *record.ended_at_ms <= 0) record.ended_at_ms.reset();
  record.user = Text(info, "user_id");
  record.params = KeyValues(data, "params");
  record.tags = KeyValues(data, "tags");
  record.name = Text(info, "run_name");
  for (const auto& [tag, value] : record.tags) {
    if (tag == "mlflow.runName" && record.name.empty()) record.name = value;
    if (tag == "mlflow.user" && record.user.empty()) record.user = value;
  }
  record.location = "experiments/" + record.experiment_id + "/runs/" + run_id;
  NormalizeRun(record);

  RunState& state = pass.cursor.runs()[key];
  UPLINK_RETURN_IF_ERROR(UpsertIfChanged(pass, key, state, record).status());
  if (state.settled) {
    RestoreSettledMetrics(state, [&](auto&& restore) {
      for (const json::value& item : ArrayAt(data, "metrics")) {
        if (item.is_object()) restore(Text(item.get_object(), "key"));
      }
    });
  }
  state.terminal = IsTerminalStatus(record.status);

  bool complete = true;
  for (const json::value& item : ArrayAt(data, "metrics")) {
    if (!item.is_object()) continue;
    const json::object& metric = item.get_object();
    std::string name = Text(metric, "key");
    if (name.empty()) continue;
    auto step = Int64(metric.if_contains("step")).value_or(0);
    auto timestamp = Int64(metric.if_contains("timestamp")).value_or(0);
    auto cursor = state.metrics.find(name);
    bool fresh = cursor == state.metrics.end();
    if (!fresh && !Past(step, timestamp, cursor->second, false)) continue;
    MetricCursor moved = fresh ? MetricCursor{} : cursor->second;
    auto points = NewPoints(run_id, name, moved);
    if (!points.ok()) {
      // Tried again next pass: the run's signature is not recorded.
      log_.Warn("cannot read a metric's history; trying again next cycle",
                {{"run_id", run_id}, {"metric", name}, {"error", points.status()}});
      complete = false;
      continue;
    }
    UPLINK_RETURN_IF_ERROR(pass.emitter.AddPoints(run_id, name, *points));
    if (!points->empty()) pass.touched.insert(key);
    state.metrics[name] = moved;
  }
  state.signature = complete ? signature : 0;
  return Status::Ok();
}

}  // namespace uplink::agent::experiments
