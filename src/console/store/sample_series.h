// The figures the console keeps from node samples (docs/protocol.md, "Node samples"), and the
// arithmetic on them shared by the store's 5-minute rollups and the API's series: bucketing,
// gauge aggregates and counter increases across resets.
//
// Counter rule (docs/api.md, "Node metrics"): between two consecutive points of a series,
//   - more than the largest gap apart: nothing is known about the interval (no increase, no
//     time covered), so an outage shows as a gap rather than as an average across it;
//   - the node rebooted (boot_time moved by more than kBootTimeTolerance): counters restarted
//     from zero, so the increase is the new value;
//   - the value went down without a reboot: these are host-wide sums (an interface or a disk
//     went away, or iowait stepped back, which the kernel allows), not a counter restarting
//     from zero, so the new value would be an absurd increase; the interval is unknown;
//   - otherwise the increase is the difference.
// A rate over any set of buckets is the sum of their increases over the sum of the seconds
// they cover, so rates from rollups equal rates from the raw points over the same buckets.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>

namespace uplink::console {

enum class SampleMetric : std::uint8_t {
  kCpuSeconds,            // counter: CPU time in every mode, summed over CPUs
  kCpuIdleSeconds,        // counter: idle + iowait
  kCpuCount,              // gauge
  kMemoryTotalBytes,      // gauge
  kMemoryAvailableBytes,  // gauge
  kLoad1,
  kLoad5,
  kLoad15,
  kNetworkReceiveBytes,   // counter, summed over the host's physical interfaces
  kNetworkTransmitBytes,  // counter
  kDiskReadBytes,         // counter, summed over whole disks
  kDiskWrittenBytes,      // counter
  kFilesystemSizeBytes,   // gauge, label "mountpoint"
  kFilesystemAvailBytes,  // gauge, label "mountpoint"
  kGpuUtilizationPercent, // gauge, label "gpu" (the index)
  kGpuMemoryUsedBytes,
  kGpuMemoryTotalBytes,
  kGpuTemperatureCelsius,
  kGpuPowerWatts,
};

inline constexpr SampleMetric kAllSampleMetrics[] = {
    SampleMetric::kCpuSeconds,          SampleMetric::kCpuIdleSeconds,
    SampleMetric::kCpuCount,            SampleMetric::kMemoryTotalBytes,
    SampleMetric::kMemoryAvailableBytes, SampleMetric::kLoad1,
    SampleMetric::kLoad5,               SampleMetric::kLoad15,
    SampleMetric::kNetworkReceiveBytes, SampleMetric::kNetworkTransmitBytes,
    SampleMetric::kDiskReadBytes,       SampleMetric::kDiskWrittenBytes,
    SampleMetric::kFilesystemSizeBytes, SampleMetric::kFilesystemAvailBytes,
    SampleMetric::kGpuUtilizationPercent, SampleMetric::kGpuMemoryUsedBytes,
    SampleMetric::kGpuMemoryTotalBytes, SampleMetric::kGpuTemperatureCelsius,
    SampleMetric::kGpuPowerWatts};

enum class MetricKind { kGauge, kCounter };

// The stored name ("cpu_seconds_total"); stable, since the store keeps it.
std::string_view SampleMetricName(SampleMetric metric);
std::optional<SampleMetric> SampleMetricFromName(std::string_view name);
MetricKind KindOf(SampleMetric metric);
// The key of the metric's one label ("gpu", "mountpoint"), or "" for a node-wide metric.
std::string_view LabelKey(SampleMetric metric);

// Rollup buckets: 5 minutes, aligned on the Unix epoch.
inline constexpr std::int64_t kRollupSeconds = 300;
// btime is computed by the kernel from the clock and the uptime, so it wobbles by a second or
// so (more after a clock step); a reboot moves it by at least the previous uptime.
inline constexpr std::int64_t kBootTimeTolerance = 60;
// Two points further apart than this many collection intervals give no rate.
inline constexpr std::int64_t kMaxGapIntervals = 5;

struct RawPoint {
  std::int64_t at_ms = 0;      // collected_at, Unix milliseconds
  double value = 0;
  std::int64_t boot_time = 0;  // Unix seconds; 0 when the sample did not say
};

// What one bucket holds of one series. Gauges use count..last; counters use pairs..seconds.
struct BucketAggregate {
  std::int64_t count = 0;  // points in the bucket
  double min = 0;
  double max = 0;
  double sum = 0;
  double last = 0;
  std::int64_t pairs = 0;  // consecutive point pairs ending in the bucket that gave an increase
  double increase = 0;     // their reset-adjusted increase
  double seconds = 0;      // the time they cover

  friend bool operator==(const BucketAggregate&, const BucketAggregate&) = default;
};

// The increase from `before` to `after` (consecutive points of one counter) by the rule above;
// nullopt when the interval is unknown. `max_gap_ms` bounds the distance between them.
std::optional<double> CounterIncrease(const RawPoint& before, const RawPoint& after,
                                      std::int64_t max_gap_ms);

// Adds `later` (a bucket's aggregate of the same series, for times after `into`'s) to `into`.
void Merge(BucketAggregate& into, const BucketAggregate& later);

// Start (Unix seconds) of the `bucket_seconds` bucket holding `at_ms`.
std::int64_t BucketStart(std::int64_t at_ms, std::int64_t bucket_seconds);

// Aggregates `points` (sorted by time, no two at the same time) into buckets of
// `bucket_seconds`, keyed by their start. Only buckets starting at or after
// `first_bucket_start` are returned; earlier points still serve as the point before for a
// counter's first pair. A counter's pair belongs to the bucket of its later point.
std::map<std::int64_t, BucketAggregate> AggregateBuckets(MetricKind kind,
                                                         std::span<const RawPoint> points,
                                                         std::int64_t bucket_seconds,
                                                         std::int64_t first_bucket_start,
                                                         std::int64_t max_gap_ms);

// increase / seconds, or nullopt when no time is covered.
std::optional<double> Rate(const BucketAggregate& aggregate);
// sum / count, or nullopt without points.
std::optional<double> Average(const BucketAggregate& aggregate);

}  // namespace uplink::console
