#include "mlflow_fixture_server.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "common/crypto.h"
#include "support/process.h"

namespace uplink::testing {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(UPLINK_FIXTURES_DIR) + "/mlflow";

net::Response MlflowError(int status, const std::string& code, const std::string& message) {
  return net::Response::Json(
      status, json::serialize(json::object{{"error_code", code}, {"message", message}}));
}

json::value ParseFile(const std::string& path) {
  auto parsed = ParseJson(ReadFileOrEmpty(path), JsonLimits{16 << 20, 64});
  if (!parsed.ok()) throw std::runtime_error(path + ": " + parsed.status().message());
  return *parsed;
}

json::array KeyValueList(const json::object& map) {
  json::array list;
  for (const auto& entry : map) {
    list.push_back(json::object{{"key", entry.key()}, {"value", entry.value()}});
  }
  return list;
}

// MLflow's page token: base64 of {"offset": N}.
std::string PageToken(size_t offset) {
  return Base64Encode(json::serialize(json::object{{"offset", offset}}));
}

std::optional<size_t> Offset(const std::string& token) {
  if (token.empty()) return 0;
  auto decoded = Base64Decode(token);
  if (!decoded.ok()) return std::nullopt;
  auto parsed = ParseJson(*decoded);
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  const json::value* offset = parsed->get_object().if_contains("offset");
  if (!offset || !offset->is_int64() || offset->get_int64() < 0) return std::nullopt;
  return static_cast<size_t>(offset->get_int64());
}

std::int64_t MaxResults(const json::value* value, std::int64_t fallback) {
  return value && value->is_int64() ? value->get_int64() : fallback;
}

}  // namespace

MlflowFixtureServer::MlflowFixtureServer(Options options) : options_(std::move(options)) {
  Load();
  for (const char* method : {"GET", "POST"}) {
    router_.Add(method, "/api/2.0/mlflow/{call}/{verb}",
                [this](const net::Request& request, const net::PathParams&) {
                  return Handle(request);
                });
  }
  net::ServerOptions server;
  server.tls = options_.tls;
  server.max_body_bytes = 1 << 20;
  auto started = net::HttpServer::Start(server, router_.AsHandler());
  if (!started.ok()) throw std::runtime_error(started.status().ToString());
  server_ = std::move(*started);
}

MlflowFixtureServer::~MlflowFixtureServer() { server_->Stop(); }

std::string MlflowFixtureServer::url() const {
  return std::string(options_.tls ? "https" : "http") + "://127.0.0.1:" +
         std::to_string(server_->port());
}

void MlflowFixtureServer::Load() {
  // 0: mltrace, as rest-derived's runs/search pages have it; each metric's history from the
  // FileStore it was derived from.
  experiments_.push_back(Experiment{"0", "Default"});
  for (int page = 1; page <= 6; ++page) {
    json::value body = ParseFile(kFixtures + "/rest-derived/mltrace__runs-search__exp0__max_results10__page" +
                                 std::to_string(page) + ".json");
    for (const json::value& item : body.at("runs").as_array()) {
      Run run;
      run.info = item.at("info").as_object();
      const json::object& data = item.at("data").as_object();
      // Empty lists are left out, as protobuf's JSON leaves them.
      run.params = ArrayAt(data, "params");
      run.tags = ArrayAt(data, "tags");
      std::string id(run.info.at("run_id").as_string());
      std::string metrics = kFixtures + "/mlruns-mltrace/0/" + id + "/metrics";
      if (fs::exists(metrics)) {
        for (const auto& file : fs::directory_iterator(metrics)) {
          std::istringstream lines(ReadFileOrEmpty(file.path().string()));
          Point point;
          while (lines >> point.timestamp >> point.value >> point.step) {
            run.metrics[file.path().filename().string()].push_back(point);
          }
        }
      }
      AddRun("0", std::move(run));
    }
  }
  // 1 and 2: runs exported from MLflow 2.3.2 servers, full histories.
  int next_id = 1;
  for (const char* name : {"basic", "src_tags"}) {
    std::string dir = kFixtures + "/mlflow-export-import/single/experiments/" + name;
    json::value experiment = ParseFile(dir + "/experiment.json");
    std::string id = std::to_string(next_id++);
    experiments_.push_back(Experiment{
        id, std::string(experiment.at("mlflow").at("experiment").at("name").as_string()) + " (" +
                name + ")"});
    for (const auto& entry : fs::directory_iterator(dir + "/runs")) {
      json::value exported = ParseFile(entry.path().string() + "/run.json");
      const json::object& mlflow = exported.at("mlflow").as_object();
      Run run;
      for (const auto& field : mlflow.at("info").as_object()) {
        if (!field.key().starts_with("_")) run.info[field.key()] = field.value();  // exporter's
      }
      run.info["experiment_id"] = id;
      run.params = KeyValueList(mlflow.at("params").as_object());
      run.tags = KeyValueList(mlflow.at("tags").as_object());
      for (const auto& metric : mlflow.at("metrics").as_object()) {
        for (const json::value& point : metric.value().as_array()) {
          run.metrics[std::string(metric.key())].push_back(
              Point{point.at("step").to_number<std::int64_t>(), point.at("value").to_number<double>(),
                    point.at("timestamp").to_number<std::int64_t>()});
        }
      }
      AddRun(id, std::move(run));
    }
  }
  // 3: an experiment whose metadata is damaged (not valid JSON upstream): the server lists it
  // but cannot search its runs.
  std::string broken = kFixtures + "/mlflow-export-import/bulk/experiments/2/experiment.json";
  auto parsed = ParseJson(ReadFileOrEmpty(broken));
  if (parsed.ok()) throw std::runtime_error(broken + " parses now: the fixture changed");
  experiments_.push_back(Experiment{std::to_string(next_id), "bulk-2", "active",
                                    "cannot read experiment: " + parsed.status().message()});
}

void MlflowFixtureServer::AddRun(const std::string& experiment_id, Run run) {
  std::string id(run.info.at("run_id").as_string());
  for (Experiment& experiment : experiments_) {
    if (experiment.id == experiment_id) experiment.run_ids.push_back(id);
  }
  runs_[id] = std::move(run);
}

json::object MlflowFixtureServer::RunJson(const Run& run) const {
  json::array latest;
  for (const auto& [key, points] : run.metrics) {
    if (points.empty()) continue;
    const Point* last = &points.front();
    for (const Point& point : points) {
      if (std::tie(point.step, point.timestamp, point.value) >
          std::tie(last->step, last->timestamp, last->value)) {
        last = &point;
      }
    }
    latest.push_back(json::object{
        {"key", key}, {"value", last->value}, {"timestamp", last->timestamp}, {"step", last->step}});
  }
  return json::object{{"info", run.info},
                      {"data", {{"metrics", latest}, {"params", run.params}, {"tags", run.tags}}},
                      {"inputs", json::object{}}};
}

net::Response MlflowFixtureServer::Handle(const net::Request& request) {
  std::lock_guard lock(mutex_);
  const std::string path = request.Path();
  ++requests_[path];
  if (!options_.bearer_token.empty() || !options_.basic_auth.empty()) {
    std::string expected = options_.bearer_token.empty()
                               ? "Basic " + Base64Encode(options_.basic_auth)
                               : "Bearer " + options_.bearer_token;
    auto presented = request.headers.Get("Authorization");
    if (!presented || *presented != expected) {
      return MlflowError(401, "UNAUTHENTICATED",
                         "You are not authenticated. Please see "
                         "https://www.mlflow.org/docs/latest/auth/index.html#authenticating-to-mlflow "
                         "on how to authenticate.");
    }
  }
  if (path == "/api/2.0/mlflow/metrics/get-history" && request.method == "GET") {
    return GetHistory(request);
  }
  if (request.method != "POST") {
    return MlflowError(405, "BAD_REQUEST", "method not allowed");
  }
  auto body = ParseJson(request.body);
  if (!body.ok() || !body->is_object()) {
    return MlflowError(400, "MALFORMED_REQUEST", "the request body is not a JSON object");
  }
  if (path == "/api/2.0/mlflow/experiments/search") return ExperimentsSearch(body->get_object());
  if (path == "/api/2.0/mlflow/runs/search") return RunsSearch(body->get_object());
  return MlflowError(404, "ENDPOINT_NOT_FOUND", "no such endpoint: " + path);
}

net::Response MlflowFixtureServer::ExperimentsSearch(const json::object& body) {
  std::string view = body.contains("view_type") ? std::string(body.at("view_type").as_string())
                                                : "ACTIVE_ONLY";
  json::array list;
  for (const Experiment& experiment : experiments_) {
    bool deleted = experiment.lifecycle_stage == "deleted";
    if ((view == "ACTIVE_ONLY" && deleted) || (view == "DELETED_ONLY" && !deleted)) continue;
    list.push_back(json::object{{"experiment_id", experiment.id},
                                {"name", experiment.name},
                                {"lifecycle_stage", experiment.lifecycle_stage}});
  }
  std::int64_t max = MaxResults(body.if_contains("max_results"), 1000);
  auto offset = Offset(body.contains("page_token") ? std::string(body.at("page_token").as_string()) : "");
  if (max < 1 || max > 50'000 || !offset) {
    return MlflowError(400, "INVALID_PARAMETER_VALUE", "invalid max_results or page_token");
  }
  json::array page;
  for (size_t i = *offset; i < list.size() && page.size() < static_cast<size_t>(max); ++i) {
    page.push_back(list[i]);
  }
  json::object reply{{"experiments", page}};
  if (*offset + page.size() < list.size()) reply["next_page_token"] = PageToken(*offset + page.size());
  return net::Response::Json(200, json::serialize(reply));
}

net::Response MlflowFixtureServer::RunsSearch(const json::object& body) {
  std::vector<const Run*> found;
  for (const json::value& id : ArrayAt(body, "experiment_ids")) {
    for (const Experiment& experiment : experiments_) {
      if (!id.is_string() || experiment.id != id.get_string()) continue;
      if (!experiment.unreadable.empty()) return MlflowError(500, "INTERNAL_ERROR", experiment.unreadable);
      for (const std::string& run_id : experiment.run_ids) {
        const Run& run = runs_.at(run_id);
        if (run.info.at("lifecycle_stage") == "active") found.push_back(&run);
      }
    }
  }
  // MLflow's default order: newest start first, then run id.
  std::sort(found.begin(), found.end(), [](const Run* a, const Run* b) {
    auto start = [](const Run* run) { return run->info.at("start_time").to_number<std::int64_t>(); };
    if (start(a) != start(b)) return start(a) > start(b);
    return a->info.at("run_id").as_string() < b->info.at("run_id").as_string();
  });
  std::int64_t max = MaxResults(body.if_contains("max_results"), 1000);
  auto offset = Offset(body.contains("page_token") ? std::string(body.at("page_token").as_string()) : "");
  if (max < 1 || max > 50'000 || !offset) {
    return MlflowError(400, "INVALID_PARAMETER_VALUE",
                       "Invalid value for parameter 'max_results' supplied.");
  }
  json::array page;
  for (size_t i = *offset; i < found.size() && page.size() < static_cast<size_t>(max); ++i) {
    page.push_back(RunJson(*found[i]));
  }
  json::object reply{{"runs", page}};
  if (*offset + page.size() < found.size()) reply["next_page_token"] = PageToken(*offset + page.size());
  return net::Response::Json(200, json::serialize(reply));
}

net::Response MlflowFixtureServer::GetHistory(const net::Request& request) {
  std::string run_id = request.Query("run_id").value_or("");
  std::string key = request.Query("metric_key").value_or("");
  auto run = runs_.find(run_id);
  if (run == runs_.end()) {
    return MlflowError(404, "RESOURCE_DOES_NOT_EXIST", "Run '" + run_id + "' not found");
  }
  std::int64_t max = 25'000;
  if (auto text = request.Query("max_results")) max = std::stoll(*text);
  auto offset = Offset(request.Query("page_token").value_or(""));
  if (max < 1 || !offset) return MlflowError(400, "INVALID_PARAMETER_VALUE", "invalid paging");
  json::array metrics;
  auto points = run->second.metrics.find(key);
  size_t total = points == run->second.metrics.end() ? 0 : points->second.size();
  for (size_t i = *offset; i < total && metrics.size() < static_cast<size_t>(max); ++i) {
    const Point& point = points->second[i];
    metrics.push_back(json::object{
        {"key", key}, {"value", point.value}, {"timestamp", point.timestamp}, {"step", point.step}});
  }
  json::object reply{{"metrics", metrics}};
  if (*offset + metrics.size() < total) reply["next_page_token"] = PageToken(*offset + metrics.size());
  return net::Response::Json(200, json::serialize(reply));
}

void MlflowFixtureServer::AppendPoint(const std::string& run_id, const std::string& key,
                                      std::int64_t step, double value, std::int64_t timestamp_ms) {
  std::lock_guard lock(mutex_);
  runs_.at(run_id).metrics[key].push_back(Point{step, value, timestamp_ms});
}

void MlflowFixtureServer::SetStatus(const std::string& run_id, const std::string& status) {
  std::lock_guard lock(mutex_);
  runs_.at(run_id).info["status"] = status;
}

void MlflowFixtureServer::DeleteRun(const std::string& run_id) {
  std::lock_guard lock(mutex_);
  runs_.at(run_id).info["lifecycle_stage"] = "deleted";
}

void MlflowFixtureServer::DeleteExperiment(const std::string& experiment_id) {
  std::lock_guard lock(mutex_);
  for (Experiment& experiment : experiments_) {
    if (experiment.id == experiment_id) experiment.lifecycle_stage = "deleted";
  }
}

int MlflowFixtureServer::Requests(const std::string& path) {
  std::lock_guard lock(mutex_);
  return requests_[path];
}

std::vector<std::string> MlflowFixtureServer::RunIds(const std::string& experiment_id) {
  std::lock_guard lock(mutex_);
  for (const Experiment& experiment : experiments_) {
    if (experiment.id == experiment_id) return experiment.run_ids;
  }
  return {};
}

}  // namespace uplink::testing
