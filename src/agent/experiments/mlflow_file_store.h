// The MLflow file store scanner: an `mlruns/` folder as `mlflow ui --backend-store-uri`
// reads it (docs/experiments.md).
//
//   <root>/<experiment id>/meta.yaml              the experiment (name, lifecycle_stage)
//   <root>/<experiment id>/<run id>/meta.yaml     the run (status, times, user, lifecycle_stage)
//   <root>/<experiment id>/<run id>/params/<key>  one value per file; keys may hold '/'
//   <root>/<experiment id>/<run id>/tags/<key>
//   <root>/<experiment id>/<run id>/metrics/<key> one "<timestamp ms> <value> <step>" per line
//   <root>/.trash/                                deleted experiments (skipped)
//
// Incremental: a run whose files have not changed (by size and modification time) costs a
// few lstat calls; a metric file is read from where the last pass stopped, and only whole
// lines are taken, so a line being written is read once it is complete. A settled run is
// watched through its folders and meta.yaml only. Deleted runs and experiments
// (lifecycle_stage: deleted, .trash, or gone) are reported deleted.
#pragma once

#include <string>

#include "agent/experiments/scan.h"
#include "common/log.h"

namespace uplink::agent::experiments {

// MLflow's RunStatus (1 RUNNING ... 5 KILLED, or its name) as a status the console knows;
// empty for anything else.
std::string MlflowStatus(std::string_view status);

struct MetricLines {
  std::vector<MetricPoint> points;
  size_t consumed = 0;     // bytes of whole lines; a last line without its newline waits
  size_t bad_lines = 0;    // lines that are not "<timestamp> <value> [<step>]", skipped
  std::string first_error; // the first of them, with its byte offset (from `base_offset`)
};

// Parses the whole lines of a metric file's text, read from `base_offset` of the file.
MetricLines ParseMetricLines(std::string_view text, std::int64_t base_offset = 0);

class MlflowFileStoreScanner : public Scanner {
 public:
  explicit MlflowFileStoreScanner(std::string root);
  std::string_view source() const override { return "mlflow"; }
  Status Scan(ScanPass& pass) override;

 private:
  struct Experiment {
    std::string dir;   // folder name
    std::string id;
    std::string name;
  };
  // Reads one run if it changed; problems are reported, not returned. The error is the
  // emitter's (the spool failed).
  Status ScanRun(ScanPass& pass, const Experiment& experiment, const std::string& run_dir,
                 std::set<std::string>& seen);
  Status ReadMetrics(ScanPass& pass, const std::string& key, const std::string& dir,
                     const std::string& run_id, RunState& state);

  std::string root_;
  log::Logger log_{"agent.experiments.mlflow"};
};

}  // namespace uplink::agent::experiments
