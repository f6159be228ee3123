// The ids of each node's sample series, kept by SqlStore between uploads, so that storing a
// node sample whose series are all known reads none of them (issue 20: reading a node's ~60
// series rows on every upload was most of the store's CPU per upload).
//
// Why an entry can be trusted: the node's row in sample_nodes has a series_version, and every
// transaction that adds or deletes any of the node's series sets it to a fresh random value in
// the same transaction (sql_samples.cc). An entry records the version it was filled at and is
// used only while the row still has that version, read in the upload's own transaction. So
// whatever undid or changed the series is seen: a body rolled back to its savepoint after it
// added series, a group whose COMMIT failed, another replica's insert or retention on a shared
// PostgreSQL database. A random version rather than a counter, since a counter rolled back with
// the transaction would be given again to different series (and SQLite may give a rolled-back
// series id again too).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "console/store/sample_series.h"

namespace uplink::console {

// One node's series as its rows were at one series_version.
class NodeSeriesIds {
 public:
  struct Series {
    SampleMetric metric;
    std::string label;
    std::int64_t id;
  };

  // The node's series as read, in any order, and how many of its rows name metrics this
  // binary does not know (a newer console's): those are left alone but take places under the
  // node's cap.
  void Assign(std::vector<Series> series, std::int64_t unknown_rows);
  // The series' id, if the node has it.
  std::optional<std::int64_t> Find(SampleMetric metric, std::string_view label) const;
  // Every series row of the node, known metrics or not (what kMaxSeriesPerNode caps).
  std::int64_t rows() const { return static_cast<std::int64_t>(series_.size()) + unknown_rows_; }

  // The series_version the node's row has with exactly these series; none while series are
  // being added (until the new version is written) or once that failed.
  std::optional<std::int64_t> version;

 private:
  // Where the series is, or would go.
  std::vector<Series>::const_iterator Position(SampleMetric metric, std::string_view label) const;

  std::vector<Series> series_;  // sorted by metric, then label: found by binary search
  std::int64_t unknown_rows_ = 0;
};

// Not thread-safe: SqlStore uses it under its mutex, inside write transactions.
class SeriesIdCache {
 public:
  // Beyond this many nodes an arbitrary entry makes room (a node missing costs one read of
  // its series); about 3 KiB each for an 8-GPU node.
  static constexpr size_t kMaxNodes = 16'384;

  SeriesIdCache();

  // The node's entry, if it was filled at `version`.
  NodeSeriesIds* Find(std::int64_t node_id, std::int64_t version);
  // An empty entry for the node, replacing any it had; the caller fills it and sets its
  // version.
  NodeSeriesIds& Reset(std::int64_t node_id);
  void Forget(std::int64_t node_id) { nodes_.erase(node_id); }
  // A value for series_version that no earlier one repeats but by chance (2^-64).
  std::int64_t NewVersion();

 private:
  std::unordered_map<std::int64_t, NodeSeriesIds> nodes_;
  std::mt19937_64 random_;
};

}  // namespace uplink::console
