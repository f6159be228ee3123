// The Weights & Biases scanner: the run folders in a `wandb/` folder (docs/experiments.md).
//
//   <root>/run-YYYYMMDD_HHMMSS-<id>/           an online run
//   <root>/offline-run-YYYYMMDD_HHMMSS-<id>/   an offline run (reported as such)
//   <root>/latest-run                          a link to the newest (skipped), or a copy of it
//   <run>/run-<id>.wandb                       the transaction log (wandb_log.h)
//   <run>/files/wandb-metadata.json            host, user, start
//   <run>/files/config.yaml                    the config, as W&B writes it at the end
//   <run>/files/wandb-summary.json             the summary
//
// The log is read from where the last pass stopped; its run record, config and summary
// records are merged into what was saved of the run, and its history rows become points.
// The status comes from the run's own records and file ages, never from a process: finished
// or failed by the exit record's code, running while the log has grown within `stale_after`,
// crashed once it has not.
#pragma once

#include <chrono>
#include <string>

#include "agent/experiments/scan.h"
#include "common/log.h"

namespace uplink::agent::experiments {

struct WandbScannerOptions {
  std::string root;
  // A log without an exit record that has not grown for this long belongs to a run that died.
  std::chrono::seconds stale_after{600};
};

class WandbScanner : public Scanner {
 public:
  explicit WandbScanner(WandbScannerOptions options);
  std::string_view source() const override { return "wandb"; }
  Status Scan(ScanPass& pass) override;

 private:
  struct RunFolder {
    std::string dir;      // folder name
    std::string run_id;
    std::string log;      // transaction log file name; empty when there is none
  };
  Status ScanRun(ScanPass& pass, const RunFolder& folder);

  WandbScannerOptions options_;
  log::Logger log_{"agent.experiments.wandb"};
};

}  // namespace uplink::agent::experiments
