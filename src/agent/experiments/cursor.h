// What the experiments role has already sent, per run, in one small file (`cursor` in the
// state directory), written atomically (cursor.cc describes its lines).
//
// A run that is terminal and whose last record the console acknowledged (the spool consumed
// it) is settled: its metric names and saved metadata are dropped and each metric kept as a
// hash of its name and its cursor (24 bytes), so that a step appended to a finished run, or
// a metric added to it, is still found and sent alone. A run that disappears from
// the scanned places is reported deleted and forgotten. The file names the spool it belongs
// to: with another spool (the old one was lost) the cursor starts over, and everything is
// sent again (the console stores each point once).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace uplink::agent::experiments {

struct MetricCursor {
  // File store: bytes of the metric file already read. REST: the highest step sent.
  std::int64_t position = 0;
  // REST: the newest timestamp sent at `position`, for points logged again at the same step.
  std::int64_t timestamp_ms = 0;
  friend bool operator==(const MetricCursor&, const MetricCursor&) = default;
};

struct RunState {
  std::string run_id;
  std::uint64_t sent_fingerprint = 0;  // of the last upsert spooled for the run
  std::uint64_t signature = 0;         // of the run's sources as last read: same, nothing to read
  // Unsettled runs: of what is watched one file at a time (a file store's tags).
  std::uint64_t detail_signature = 0;
  std::uint64_t last_sequence = 0;     // spool sequence of the run's last record
  bool terminal = false;
  bool settled = false;
  bool problem_reported = false;  // a problem was reported for the current signature
  std::int64_t log_offset = 0;    // W&B: bytes of the transaction log decoded
  std::string saved_run;          // W&B: the last upsert's item, to apply new records to
  std::map<std::string, MetricCursor, std::less<>> metrics;
  // Settled runs: each metric's name hash (MetricNameHash) and cursor, in name order.
  struct SettledMetric {
    std::uint64_t name_hash = 0;
    MetricCursor cursor;
    friend bool operator==(const SettledMetric&, const SettledMetric&) = default;
  };
  std::vector<SettledMetric> settled_positions;
  friend bool operator==(const RunState&, const RunState&) = default;
};

// The hash a settled run keeps of a metric's name.
std::uint64_t MetricNameHash(std::string_view name);

class Cursor {
 public:
  // The cursor in `path`; an empty one when the file does not exist. A file that cannot be
  // read or parsed is an error the caller logs before starting over.
  static Result<Cursor> Load(const std::string& path);
  // Writes the file atomically (temporary file, fsync, rename).
  Status Save(const std::string& path) const;

  std::map<std::string, RunState, std::less<>>& runs() { return runs_; }
  const std::map<std::string, RunState, std::less<>>& runs() const { return runs_; }
  const std::string& spool_id() const { return spool_id_; }
  void set_spool_id(std::string id) { spool_id_ = std::move(id); }

  // Settles the terminal runs whose last record is at or below `consumed_through`; how many.
  size_t Settle(std::uint64_t consumed_through);

  std::string Serialize() const;

 private:
  std::string spool_id_;
  std::map<std::string, RunState, std::less<>> runs_;
};

}  // namespace uplink::agent::experiments
