// Packs what the scanners report into spool records (docs/protocol.md, "Experiment runs").
//
// Every record carries many items of one kind, up to a size bound, so that a first scan of
// thousands of runs costs a few hundred durable appends rather than one per run and metric.
// A run's upsert always lands in a record before any record with its points.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/experiments/run_record.h"
#include "common/status.h"
#include "spool/spool.h"

namespace uplink::agent::experiments {

// Where records go: the spool, or a list (--once without a console, tests).
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // The record's sequence number once it is durable.
  virtual Result<std::uint64_t> Append(std::string_view payload) = 0;
};

class SpoolSink : public RecordSink {
 public:
  explicit SpoolSink(spool::Spool& spool) : spool_(spool) {}
  Result<std::uint64_t> Append(std::string_view payload) override { return spool_.Append(payload); }

 private:
  spool::Spool& spool_;
};

class ListSink : public RecordSink {
 public:
  Result<std::uint64_t> Append(std::string_view payload) override {
    records.emplace_back(payload);
    return records.size();
  }
  std::vector<std::string> records;
};

struct EmitterCounts {
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;
  std::uint64_t runs = 0;
  std::uint64_t points = 0;
  std::uint64_t deleted = 0;
  std::uint64_t problems = 0;
};

class Emitter {
 public:
  // Records are at most `max_record_bytes` (the console takes 1 MiB).
  Emitter(RecordSink& sink, size_t max_record_bytes = kDefaultMaxPointsRecordBytes);

  // Each queues an item; records are written when full and by Flush. The error is the
  // sink's (a full disk): what was queued is dropped, and the caller must not advance its
  // cursor past it.
  Status AddRun(const RunRecord& run);
  Status AddPoints(std::string_view run_id, std::string_view metric,
                   const std::vector<MetricPoint>& points);
  Status AddDeleted(std::string_view run_id);
  Status AddProblem(std::string_view source, std::string_view location, std::string_view error);
  Status Flush();

  // The sequence of the last record written (0: none yet).
  std::uint64_t last_sequence() const { return last_sequence_; }
  const EmitterCounts& counts() const { return counts_; }
  // The sink's first failure: after one, nothing queued may count as sent.
  const Status& status() const { return status_; }

 private:
  struct Buffer {
    std::string kind;   // "experiment_run", ...
    std::string field;  // the array's name: "runs", "series", "run_ids", "problems"
    std::string items;  // the array's items, comma separated
    size_t count = 0;
  };
  // Appends `item` to `buffer`, writing the buffer first when the item would not fit.
  Status Add(Buffer& buffer, std::string_view item);
  Status Write(Buffer& buffer);

  RecordSink& sink_;
  size_t max_record_bytes_;
  Buffer runs_{std::string(protocol::kExperimentRunKind), "runs", "", 0};
  Buffer points_{std::string(protocol::kMetricPointsKind), "series", "", 0};
  Buffer deleted_{std::string(protocol::kRunDeletedKind), "run_ids", "", 0};
  Buffer problems_{std::string(protocol::kScanProblemKind), "problems", "", 0};
  std::uint64_t last_sequence_ = 0;
  EmitterCounts counts_;
  Status status_;
};

}  // namespace uplink::agent::experiments
