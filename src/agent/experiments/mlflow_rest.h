// The MLflow tracking server scanner (REST API 2.0, docs/experiments.md).
//
// Each pass lists the active experiments (experiments/search) and each experiment's active
// runs (runs/search, one experiment per search so that one the server cannot read does not
// hide the others), page by page. A run whose status, end time, params, tags or latest
// metrics (runs/search returns each metric's latest point) did not move since the last pass
// is skipped without a request; for one that moved, only the metrics whose latest point is
// past the run's per-metric step cursor are fetched (metrics/get-history), and only the
// points past it are sent. Runs and experiments that are no longer listed are reported
// deleted, unless the listing failed.
//
// Credentials (a bearer token or "user:password" for basic auth) are read from a file before
// every pass, so a rotated Secret takes effect without a restart, and are never logged. They
// are refused over plain http to anything but a loopback address.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "agent/experiments/scan.h"
#include "common/json_fwd.h"
#include "common/log.h"
#include "common/secret.h"
#include "net/client.h"

namespace uplink::agent::experiments {

struct MlflowRestOptions {
  std::string base_url;         // http(s)://host[:port][/prefix]
  std::string token_file;       // bearer token; empty: none
  std::string basic_auth_file;  // "user:password"; empty: none
  std::string ca_file;          // private CA for https; empty: the system store
  int page_size = 1000;         // max_results of each search
  std::chrono::milliseconds request_timeout{30'000};
  size_t max_response_bytes = 64 << 20;
};

// Checks the options (URL, credentials over plain http); InvalidArgument saying what to do.
Status ValidateMlflowRestOptions(const MlflowRestOptions& options);

class MlflowRestScanner : public Scanner {
 public:
  static Result<std::unique_ptr<MlflowRestScanner>> Create(MlflowRestOptions options);
  std::string_view source() const override { return "mlflow"; }
  Status Scan(ScanPass& pass) override;

 private:
  MlflowRestScanner(MlflowRestOptions options, std::unique_ptr<net::HttpClient> http);

  // POST (with a JSON body) or GET (with a query); the parsed reply, or an error that names
  // the call and MLflow's error_code and message.
  Result<json::object> Call(std::string_view method, std::string_view path,
                            const std::string& body_or_query);
  // The run's new points of `metric` (past `cursor`), from metrics/get-history.
  Result<std::vector<MetricPoint>> NewPoints(const std::string& run_id, const std::string& metric,
                                            MetricCursor& cursor);
  Status ScanRun(ScanPass& pass, const json::object& run, const std::string& experiment_name,
                 std::set<std::string>& seen);

  MlflowRestOptions options_;
  std::unique_ptr<net::HttpClient> http_;
  Secret authorization_;  // the header of this pass, read from the file
  int last_http_status_ = 0;  // of the last call; 0 when no reply came
  log::Logger log_{"agent.experiments.mlflow"};
};

}  // namespace uplink::agent::experiments
