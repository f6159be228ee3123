#include "console/store/sample_series.h"

#include <algorithm>
#include <cstdlib>

namespace uplink::console {

std::string_view SampleMetricName(SampleMetric metric) {
  switch (metric) {
    case SampleMetric::kCpuSeconds: return "cpu_seconds_total";
    case SampleMetric::kCpuIdleSeconds: return "cpu_idle_seconds_total";
    case SampleMetric::kCpuCount: return "cpu_count";
    case SampleMetric::kMemoryTotalBytes: return "memory_total_bytes";
    case SampleMetric::kMemoryAvailableBytes: return "memory_available_bytes";
    case SampleMetric::kLoad1: return "load1";
    case SampleMetric::kLoad5: return "load5";
    case SampleMetric::kLoad15: return "load15";
    case SampleMetric::kNetworkReceiveBytes: return "network_receive_bytes_total";
    case SampleMetric::kNetworkTransmitBytes: return "network_transmit_bytes_total";
    case SampleMetric::kDiskReadBytes: return "disk_read_bytes_total";
    case SampleMetric::kDiskWrittenBytes: return "disk_written_bytes_total";
    case SampleMetric::kFilesystemSizeBytes: return "filesystem_size_bytes";
    case SampleMetric::kFilesystemAvailBytes: return "filesystem_avail_bytes";
    case SampleMetric::kGpuUtilizationPercent: return "gpu_utilization_percent";
    case SampleMetric::kGpuMemoryUsedBytes: return "gpu_memory_used_bytes";
    case SampleMetric::kGpuMemoryTotalBytes: return "gpu_memory_total_bytes";
    case SampleMetric::kGpuTemperatureCelsius: return "gpu_temperature_celsius";
    case SampleMetric::kGpuPowerWatts: return "gpu_power_watts";
  }
  return "unknown";
}

std::optional<SampleMetric> SampleMetricFromName(std::string_view name) {
  for (SampleMetric metric : kAllSampleMetrics) {
    if (SampleMetricName(metric) == name) return metric;
  }
  return std::nullopt;
}

MetricKind KindOf(SampleMetric metric) {
  switch (metric) {
    case SampleMetric::kCpuSeconds:
    case SampleMetric::kCpuIdleSeconds:
    case SampleMetric::kNetworkReceiveBytes:
    case SampleMetric::kNetworkTransmitBytes:
    case SampleMetric::kDiskReadBytes:
    case SampleMetric::kDiskWrittenBytes:
      return MetricKind::kCounter;
    default:
      return MetricKind::kGauge;
  }
}

std::string_view LabelKey(SampleMetric metric) {
  switch (metric) {
    case SampleMetric::kFilesystemSizeBytes:
    case SampleMetric::kFilesystemAvailBytes:
      return "mountpoint";
    case SampleMetric::kGpuUtilizationPercent:
    case SampleMetric::kGpuMemoryUsedBytes:
    case SampleMetric::kGpuMemoryTotalBytes:
    case SampleMetric::kGpuTemperatureCelsius:
    case SampleMetric::kGpuPowerWatts:
      return "gpu";
    default:
      return "";
  }
}

std::optional<double> CounterIncrease(const RawPoint& before, const RawPoint& after,
                                      std::int64_t max_gap_ms) {
  if (after.at_ms <= before.at_ms || after.at_ms - before.at_ms > max_gap_ms) return std::nullopt;
  bool rebooted = before.boot_time != 0 && after.boot_time != 0 &&
                  std::llabs(after.boot_time - before.boot_time) > kBootTimeTolerance;
  if (rebooted) return after.value;
  if (after.value < before.value) return std::nullopt;
  return after.value - before.value;
}

void Merge(BucketAggregate& into, const BucketAggregate& later) {
  if (later.count > 0) {
    if (into.count == 0) {
      into.min = later.min;
      into.max = later.max;
    } else {
      into.min = std::min(into.min, later.min);
      into.max = std::max(into.max, later.max);
    }
    into.count += later.count;
    into.sum += later.sum;
    into.last = later.last;
  }
  into.pairs += later.pairs;
  into.increase += later.increase;
  into.seconds += later.seconds;
}

std::int64_t BucketStart(std::int64_t at_ms, std::int64_t bucket_seconds) {
  std::int64_t bucket_ms = bucket_seconds * 1000;
  // Floor division, so that times before 1970 (never sent, but possible) still bucket right.
  std::int64_t quotient = at_ms / bucket_ms;
  if (at_ms % bucket_ms < 0) --quotient;
  return quotient * bucket_seconds;
}

std::map<std::int64_t, BucketAggregate> AggregateBuckets(MetricKind kind,
                                                         std::span<const RawPoint> points,
                                                         std::int64_t bucket_seconds,
                                                         std::int64_t first_bucket_start,
                                                         std::int64_t max_gap_ms) {
  std::map<std::int64_t, BucketAggregate> buckets;
  for (size_t i = 0; i < points.size(); ++i) {
    const RawPoint& point = points[i];
    std::int64_t start = BucketStart(point.at_ms, bucket_seconds);
    if (start < first_bucket_start) continue;
    BucketAggregate& bucket = buckets[start];
    if (kind == MetricKind::kGauge) {
      BucketAggregate one;
      one.count = 1;
      one.min = one.max = one.sum = one.last = point.value;
      Merge(bucket, one);
      continue;
    }
    if (i == 0) continue;
    std::optional<double> increase = CounterIncrease(points[i - 1], point, max_gap_ms);
    if (!increase) continue;
    ++bucket.pairs;
    bucket.increase += *increase;
    bucket.seconds += static_cast<double>(point.at_ms - points[i - 1].at_ms) / 1000.0;
  }
  // A counter bucket whose only point had no usable pair says nothing.
  std::erase_if(buckets, [](const auto& entry) {
    return entry.second.count == 0 && entry.second.pairs == 0;
  });
  return buckets;
}

std::optional<double> Rate(const BucketAggregate& aggregate) {
  if (aggregate.seconds <= 0) return std::nullopt;
  return aggregate.increase / aggregate.seconds;
}

std::optional<double> Average(const BucketAggregate& aggregate) {
  if (aggregate.count <= 0) return std::nullopt;
  return aggregate.sum / static_cast<double>(aggregate.count);
}

}  // namespace uplink::console
