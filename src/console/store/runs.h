// ML experiment runs as the console keeps them (docs/api.md, "Experiment runs"): what the
// experiments role's records carry (docs/protocol.md, "Experiment runs"), already checked,
// and the queries over them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"
#include "protocol/experiments.h"

namespace uplink::console {

// What the experiments role's records carry (protocol/experiments.h).
using protocol::ExperimentRecord;
using protocol::ExperimentRun;
using protocol::RunPoint;
using protocol::RunProblem;
using protocol::RunSeries;

// A run as listed: the upsert's fields, and what the console added.
struct StoredRun {
  ExperimentRun run;
  std::string stream;  // the agent stream it came from
  WallTime first_seen_at;
  WallTime updated_at;  // the last upsert or new point
  std::int64_t metric_count = 0;
};

struct RunMetric {
  std::string key;
  RunPoint latest;  // the point with the highest step (then the newest)
  std::int64_t points = 0;
};

struct RunQuery {
  std::string connection_id;
  std::optional<std::string> experiment;  // exact name or id
  std::optional<std::string> status;
  std::optional<std::string> user;
  std::optional<WallTime> started_after;
  std::optional<WallTime> started_before;
  // Paging: runs after this (started_at, run_id) position in newest-first order.
  std::optional<std::pair<std::int64_t, std::string>> after;
  int limit = 100;
};

inline constexpr int kMaxRunPage = 500;

struct RunPage {
  std::vector<StoredRun> runs;
  bool more = false;
};

// What the runs of a connection are spread over, for filters: names and run counts.
struct RunFacets {
  std::vector<std::pair<std::string, std::int64_t>> experiments;
  std::vector<std::pair<std::string, std::int64_t>> statuses;
  std::vector<std::pair<std::string, std::int64_t>> users;
};

// A metric's history, thinned to at most `max_points` (always with its first and last point).
struct RunHistory {
  std::string key;
  std::int64_t points = 0;  // stored, before thinning
  std::vector<RunPoint> history;
};

}  // namespace uplink::console
