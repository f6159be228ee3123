// What users see of node samples (docs/api.md, "Node metrics"): the latest figures of each
// node, and one metric of one node over time. Pure: the routes (nodes_api.cc) read the store
// and hand the rows here.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"
#include "console/store/store.h"

namespace uplink::console {

// The metrics of GET /api/v1/connections/{id}/nodes/{node}/series.
enum class SeriesMetric {
  kCpuPercent,
  kMemoryUsedBytes,
  kMemoryAvailableBytes,
  kLoad1,
  kLoad5,
  kLoad15,
  kNetworkReceiveBytesPerSecond,
  kNetworkTransmitBytesPerSecond,
  kDiskReadBytesPerSecond,
  kDiskWrittenBytesPerSecond,
  kFilesystemAvailBytes,
  kGpuUtilizationPercent,
  kGpuMemoryUsedBytes,
  kGpuTemperatureCelsius,
  kGpuPowerWatts,
};

std::optional<SeriesMetric> SeriesMetricFromName(std::string_view name);
std::string_view SeriesMetricName(SeriesMetric metric);
// "percent", "bytes", "bytes_per_second", "tasks" (load averages), "celsius", "watts".
std::string_view SeriesMetricUnit(SeriesMetric metric);
// The stored series it is computed from.
std::span<const SampleMetric> SeriesSources(SeriesMetric metric);
// Every name, for messages: "cpu_percent, memory_used_bytes, ...".
std::string SeriesMetricNames();

inline constexpr std::int64_t kMinSeriesStep = 10;
inline constexpr std::int64_t kMaxSeriesStep = 86'400;
inline constexpr std::int64_t kMaxSeriesPoints = 1'000;
inline constexpr std::chrono::seconds kDefaultSeriesSpan{3600};
inline constexpr std::chrono::seconds kMaxSeriesSpan{kMaxSeriesPoints * kMaxSeriesStep};
inline constexpr size_t kMaxSeriesPerReply = 100;
// A node without a sample for this many collection intervals is stale.
inline constexpr std::int64_t kStaleIntervals = 3;

// `since` as an RFC 3339 time or a duration back from `now` ("1h", "30m", "7d"); it must be
// before `now` and at most kMaxSeriesSpan back.
Result<WallTime> ParseSince(std::string_view text, WallTime now);

// The step for a span when none is asked for: about 300 points, never finer than the
// collection interval, a round number of seconds.
std::int64_t DefaultStep(std::chrono::seconds span, std::int64_t interval_seconds);

// Per stored series (metric, label), its aggregates by bucket start.
using SeriesKey = std::pair<SampleMetric, std::string>;
using BucketedSeries = std::map<SeriesKey, std::map<std::int64_t, BucketAggregate>>;

// Merges `buckets` (aggregates of shorter, aligned buckets, in time order) into `into`'s
// buckets of `step` seconds.
void MergeInto(std::map<std::int64_t, BucketAggregate>& into,
               const std::map<std::int64_t, BucketAggregate>& buckets, std::int64_t step);

struct SeriesOutput {
  std::string label;  // the value of LabelKey(the source metric), or "" for node-wide ones
  std::vector<std::pair<std::int64_t, std::optional<double>>> points;  // bucket start, value
};

// One value per bucket from `first_bucket` to `last_bucket` (inclusive, `step` apart) for
// each label that has data: averages for gauges, rates for counters, the busy share of CPU
// time for cpu_percent, total minus available for memory_used_bytes. Labels in order
// (GPU indexes numerically).
std::vector<SeriesOutput> ComputeSeries(SeriesMetric metric, const BucketedSeries& series,
                                        std::int64_t first_bucket, std::int64_t last_bucket,
                                        std::int64_t step);

// A node of GET /api/v1/connections/{id}/nodes: its latest sample, with rates between it and
// the sample before.
json::object NodeSummaryJson(const SampleNodeState& state, WallTime now,
                             std::int64_t interval_seconds);

// A figure as JSON: a whole number as an integer (byte counts read better), null when absent.
json::value NumberJson(const std::optional<double>& value);

}  // namespace uplink::console
