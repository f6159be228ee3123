// An MLflow tracking server for tests (MLflow's own cannot be installed here): REST API 2.0's
// experiments/search, runs/search and metrics/get-history with MLflow's pagination (a base64
// {"offset": N} page token), its error bodies ({"error_code", "message"}), bearer or basic
// auth, optional TLS, and hooks that change the data between a scanner's passes.
//
// It serves the real data in tests/fixtures/mlflow: the 52 mltrace runs as rest-derived's
// runs/search pages describe them (histories from their metric files), the two runs exported
// from MLflow 2.3.2 servers (mlflow-export-import/single), and an experiment the server cannot
// read (mlflow-export-import/bulk/experiments/2/experiment.json is not valid JSON), whose
// runs/search answers 500 as a server with a damaged experiment would.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "net/router.h"
#include "net/server.h"

namespace uplink::testing {

class MlflowFixtureServer {
 public:
  struct Options {
    std::string bearer_token;  // required when set
    std::string basic_auth;    // "user:password", required when set
    std::optional<net::TlsServerConfig> tls;
  };

  explicit MlflowFixtureServer(Options options = {});
  ~MlflowFixtureServer();

  std::string url() const;

  // Hooks, for between passes.
  void AppendPoint(const std::string& run_id, const std::string& key, std::int64_t step,
                   double value, std::int64_t timestamp_ms);
  void SetStatus(const std::string& run_id, const std::string& status);
  void DeleteRun(const std::string& run_id);
  void DeleteExperiment(const std::string& experiment_id);
  // Requests per path ("/api/2.0/mlflow/metrics/get-history").
  int Requests(const std::string& path);
  std::vector<std::string> RunIds(const std::string& experiment_id);

 private:
  struct Point {
    std::int64_t step = 0;
    double value = 0;
    std::int64_t timestamp = 0;
  };
  struct Run {
    json::object info;
    json::array params;
    json::array tags;
    std::map<std::string, std::vector<Point>> metrics;
  };
  struct Experiment {
    std::string id;
    std::string name;
    std::string lifecycle_stage = "active";
    std::string unreadable;  // why the server cannot read it; empty when it can
    std::vector<std::string> run_ids;
  };

  void Load();
  void AddRun(const std::string& experiment_id, Run run);
  net::Response Handle(const net::Request& request);
  net::Response ExperimentsSearch(const json::object& body);
  net::Response RunsSearch(const json::object& body);
  net::Response GetHistory(const net::Request& request);
  json::object RunJson(const Run& run) const;

  Options options_;
  std::mutex mutex_;
  std::vector<Experiment> experiments_;
  std::map<std::string, Run> runs_;
  std::map<std::string, int> requests_;
  net::Router router_;
  std::unique_ptr<net::HttpServer> server_;
};

}  // namespace uplink::testing
