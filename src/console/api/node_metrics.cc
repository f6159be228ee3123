#include "console/api/node_metrics.h"

#include <algorithm>
#include <cmath>

#include "common/flags.h"
#include "common/json.h"
#include "console/api/node_sample_figures.h"
#include "protocol/node_sample.h"

namespace uplink::console {

using protocol::NodeSample;
using protocol::SampleFilesystem;
using protocol::SampleGap;
using protocol::SampleGpu;

namespace {

struct SeriesMetricInfo {
  SeriesMetric metric;
  std::string_view name;
  std::string_view unit;
  std::span<const SampleMetric> sources;
};

constexpr SampleMetric kCpuSources[] = {SampleMetric::kCpuSeconds, SampleMetric::kCpuIdleSeconds};
constexpr SampleMetric kMemoryUsedSources[] = {SampleMetric::kMemoryTotalBytes,
                                               SampleMetric::kMemoryAvailableBytes};
constexpr SampleMetric kMemoryAvailableSources[] = {SampleMetric::kMemoryAvailableBytes};
constexpr SampleMetric kLoad1Sources[] = {SampleMetric::kLoad1};
constexpr SampleMetric kLoad5Sources[] = {SampleMetric::kLoad5};
constexpr SampleMetric kLoad15Sources[] = {SampleMetric::kLoad15};
constexpr SampleMetric kReceiveSources[] = {SampleMetric::kNetworkReceiveBytes};
constexpr SampleMetric kTransmitSources[] = {SampleMetric::kNetworkTransmitBytes};
constexpr SampleMetric kDiskReadSources[] = {SampleMetric::kDiskReadBytes};
constexpr SampleMetric kDiskWrittenSources[] = {SampleMetric::kDiskWrittenBytes};
constexpr SampleMetric kFilesystemSources[] = {SampleMetric::kFilesystemAvailBytes};
constexpr SampleMetric kGpuUtilizationSources[] = {SampleMetric::kGpuUtilizationPercent};
constexpr SampleMetric kGpuMemorySources[] = {SampleMetric::kGpuMemoryUsedBytes};
constexpr SampleMetric kGpuTemperatureSources[] = {SampleMetric::kGpuTemperatureCelsius};
constexpr SampleMetric kGpuPowerSources[] = {SampleMetric::kGpuPowerWatts};

constexpr SeriesMetricInfo kSeriesMetrics[] = {
    {SeriesMetric::kCpuPercent, "cpu_percent", "percent", kCpuSources},
    {SeriesMetric::kMemoryUsedBytes, "memory_used_bytes", "bytes", kMemoryUsedSources},
    {SeriesMetric::kMemoryAvailableBytes, "memory_available_bytes", "bytes",
     kMemoryAvailableSources},
    {SeriesMetric::kLoad1, "load1", "tasks", kLoad1Sources},
    {SeriesMetric::kLoad5, "load5", "tasks", kLoad5Sources},
    {SeriesMetric::kLoad15, "load15", "tasks", kLoad15Sources},
    {SeriesMetric::kNetworkReceiveBytesPerSecond, "network_receive_bytes_per_second",
     "bytes_per_second", kReceiveSources},
    {SeriesMetric::kNetworkTransmitBytesPerSecond, "network_transmit_bytes_per_second",
     "bytes_per_second", kTransmitSources},
    {SeriesMetric::kDiskReadBytesPerSecond, "disk_read_bytes_per_second", "bytes_per_second",
     kDiskReadSources},
    {SeriesMetric::kDiskWrittenBytesPerSecond, "disk_written_bytes_per_second",
     "bytes_per_second", kDiskWrittenSources},
    {SeriesMetric::kFilesystemAvailBytes, "filesystem_avail_bytes", "bytes", kFilesystemSources},
    {SeriesMetric::kGpuUtilizationPercent, "gpu_utilization_percent", "percent",
     kGpuUtilizationSources},
    {SeriesMetric::kGpuMemoryUsedBytes, "gpu_memory_used_bytes", "bytes", kGpuMemorySources},
    {SeriesMetric::kGpuTemperatureCelsius, "gpu_temperature_celsius", "celsius",
     kGpuTemperatureSources},
    {SeriesMetric::kGpuPowerWatts, "gpu_power_watts", "watts", kGpuPowerSources},
};

const SeriesMetricInfo& Info(SeriesMetric metric) {
  for (const SeriesMetricInfo& info : kSeriesMetrics) {
    if (info.metric == metric) return info;
  }
  return kSeriesMetrics[0];
}

constexpr std::int64_t kStepChoices[] = {10,   15,   30,    60,    120,   300,   600,  900,
                                         1800, 3600, 7200, 10800, 21600, 43200, 86400};
constexpr std::int64_t kDefaultSeriesPoints = 300;

// Labels in the order people expect: GPU indexes as numbers, mount points as text.
bool IsWholeNumber(const std::string& text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool LabelBefore(const std::string& a, const std::string& b) {
  if (a.size() != b.size() && IsWholeNumber(a) && IsWholeNumber(b)) return a.size() < b.size();
  return a < b;
}

// The busy share of CPU time, in percent, from the rates of all and of idle CPU time.
std::optional<double> CpuPercent(const std::optional<double>& total_rate,
                                 const std::optional<double>& idle_rate) {
  if (!total_rate || !idle_rate || *total_rate <= 0) return std::nullopt;
  return std::clamp(100.0 * (1.0 - *idle_rate / *total_rate), 0.0, 100.0);
}

const BucketAggregate* Find(const BucketedSeries& series, SampleMetric metric,
                            const std::string& label, std::int64_t bucket) {
  auto it = series.find({metric, label});
  if (it == series.end()) return nullptr;
  auto at = it->second.find(bucket);
  return at == it->second.end() ? nullptr : &at->second;
}

std::optional<double> AverageOf(const BucketAggregate* aggregate) {
  return aggregate ? Average(*aggregate) : std::nullopt;
}

std::optional<double> RateOf(const BucketAggregate* aggregate) {
  return aggregate ? Rate(*aggregate) : std::nullopt;
}

std::int64_t UnixMillis(WallTime t) {
  return std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

json::value TextOrNull(const std::string& text) {
  return text.empty() ? json::value(nullptr) : json::value(text);
}

}  // namespace

std::optional<SeriesMetric> SeriesMetricFromName(std::string_view name) {
  for (const SeriesMetricInfo& info : kSeriesMetrics) {
    if (info.name == name) return info.metric;
  }
  return std::nullopt;
}

std::string_view SeriesMetricName(SeriesMetric metric) { return Info(metric).name; }
std::string_view SeriesMetricUnit(SeriesMetric metric) { return Info(metric).unit; }
std::span<const SampleMetric> SeriesSources(SeriesMetric metric) { return Info(metric).sources; }

std::string SeriesMetricNames() {
  std::string names;
  for (const SeriesMetricInfo& info : kSeriesMetrics) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

Result<WallTime> ParseSince(std::string_view text, WallTime now) {
  constexpr size_t kMaxSinceBytes = 64;
  Status bad = InvalidArgumentError(
      "since must be an RFC 3339 time such as 2026-11-30T03:20:00Z, or a duration back from "
      "now such as 90s, 30m, 1h or 7d");
  if (text.empty() || text.size() > kMaxSinceBytes) return bad;
  WallTime since;
  if (text.find('T') != std::string_view::npos || text.find('-') != std::string_view::npos) {
    auto time = ParseRfc3339(text);
    if (!time.ok()) return bad;
    since = *time;
  } else {
    auto duration = ParseDuration(text);
    if (!duration.ok()) return bad;
    since = now - *duration;
  }
  if (since >= now) return InvalidArgumentError("since must be in the past");
  if (now - since > kMaxSeriesSpan) {
    return InvalidArgumentError("since may be at most " +
                                std::to_string(kMaxSeriesSpan.count() / 86'400) +
                                " days back");
  }
  return since;
}

std::int64_t DefaultStep(std::chrono::seconds span, std::int64_t interval_seconds) {
  std::int64_t wanted = std::max(interval_seconds,
                                 (span.count() + kDefaultSeriesPoints - 1) / kDefaultSeriesPoints);
  for (std::int64_t step : kStepChoices) {
    if (step >= wanted) return step;
  }
  return kMaxSeriesStep;
}

void MergeInto(std::map<std::int64_t, BucketAggregate>& into,
               const std::map<std::int64_t, BucketAggregate>& buckets, std::int64_t step) {
  for (const auto& [start, aggregate] : buckets) {
    Merge(into[BucketStart(start * 1000, step)], aggregate);
  }
}

std::vector<SeriesOutput> ComputeSeries(SeriesMetric metric, const BucketedSeries& series,
                                        std::int64_t first_bucket, std::int64_t last_bucket,
                                        std::int64_t step) {
  std::span<const SampleMetric> sources = SeriesSources(metric);
  std::vector<std::string> labels;
  for (const auto& [key, buckets] : series) {
    bool used = std::find(sources.begin(), sources.end(), key.first) != sources.end();
    if (used && !buckets.empty() &&
        std::find(labels.begin(), labels.end(), key.second) == labels.end()) {
      labels.push_back(key.second);
    }
  }
  std::sort(labels.begin(), labels.end(), LabelBefore);

  std::vector<SeriesOutput> outputs;
  for (const std::string& label : labels) {
    SeriesOutput output;
    output.label = label;
    for (std::int64_t bucket = first_bucket; bucket <= last_bucket; bucket += step) {
      std::optional<double> value;
      switch (metric) {
        case SeriesMetric::kCpuPercent:
          value = CpuPercent(RateOf(Find(series, SampleMetric::kCpuSeconds, label, bucket)),
                             RateOf(Find(series, SampleMetric::kCpuIdleSeconds, label, bucket)));
          break;
        case SeriesMetric::kMemoryUsedBytes: {
          auto total = AverageOf(Find(series, SampleMetric::kMemoryTotalBytes, label, bucket));
          auto available =
              AverageOf(Find(series, SampleMetric::kMemoryAvailableBytes, label, bucket));
          if (total && available) value = std::max(0.0, *total - *available);
          break;
        }
        case SeriesMetric::kNetworkReceiveBytesPerSecond:
        case SeriesMetric::kNetworkTransmitBytesPerSecond:
        case SeriesMetric::kDiskReadBytesPerSecond:
        case SeriesMetric::kDiskWrittenBytesPerSecond:
          value = RateOf(Find(series, sources.front(), label, bucket));
          break;
        default:
          value = AverageOf(Find(series, sources.front(), label, bucket));
          break;
      }
      output.points.emplace_back(bucket, value);
    }
    outputs.push_back(std::move(output));
  }
  return outputs;
}

json::value NumberJson(const std::optional<double>& value) {
  if (!value || !std::isfinite(*value)) return nullptr;
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (std::fabs(*value) < kExact && *value == std::trunc(*value)) {
    return static_cast<std::int64_t>(*value);
  }
  return *value;
}

json::object NodeSummaryJson(const SampleNodeState& state, WallTime now,
                             std::int64_t interval_seconds) {
  json::object node{{"node", state.node},
                    {"last_sample_at", FormatRfc3339Millis(state.latest_at)},
                    {"stale", now - state.latest_at >
                                  std::chrono::seconds(kStaleIntervals * interval_seconds)}};
  // The payload passed this same parser when it was stored, so it reads again; should a
  // later console be stricter, the node is still listed, with its figures null.
  std::optional<NodeSample> latest;
  if (auto document = ParseJson(state.latest_payload); document.ok() && document->is_object()) {
    if (auto parsed = protocol::DecodeNodeSample(document->get_object(), "payload"); parsed.ok()) {
      latest = std::move(parsed).value();
    }
  }
  NodeSample sample = latest.value_or(NodeSample{});
  NodeSampleFigures figures = FiguresOf(sample);
  auto latest_value = [&](SampleMetric metric) -> std::optional<double> {
    for (const SampleValue& value : figures.values) {
      if (value.metric == metric && value.label.empty()) return value.value;
    }
    return std::nullopt;
  };
  // The increase of a node-wide counter per second between the previous sample and the
  // latest, by the rule of sample_series.h.
  std::int64_t max_gap_ms = kMaxGapIntervals * interval_seconds * 1000;
  auto increase_between = [&](SampleMetric metric) -> std::optional<std::pair<double, double>> {
    std::optional<double> now_value = latest_value(metric);
    if (!state.previous_at || !now_value) return std::nullopt;
    for (const SampleValue& value : state.previous_values) {
      if (value.metric != metric || !value.label.empty()) continue;
      RawPoint before{UnixMillis(*state.previous_at), value.value,
                      state.previous_boot_time};
      RawPoint after{UnixMillis(state.latest_at), *now_value, state.latest_boot_time};
      auto increase = CounterIncrease(before, after, max_gap_ms);
      if (!increase) return std::nullopt;
      return std::pair{*increase, static_cast<double>(after.at_ms - before.at_ms) / 1000.0};
    }
    return std::nullopt;
  };
  auto per_second = [&](SampleMetric metric) -> std::optional<double> {
    auto increase = increase_between(metric);
    if (!increase || increase->second <= 0) return std::nullopt;
    return increase->first / increase->second;
  };

  node["boot_time"] = sample.boot_time > 0 ? json::value(sample.boot_time) : json::value(nullptr);
  node["cpu_count"] = NumberJson(latest_value(SampleMetric::kCpuCount));
  node["cpu_percent"] = NumberJson(
      CpuPercent(per_second(SampleMetric::kCpuSeconds), per_second(SampleMetric::kCpuIdleSeconds)));
  std::optional<double> total = latest_value(SampleMetric::kMemoryTotalBytes);
  std::optional<double> available = latest_value(SampleMetric::kMemoryAvailableBytes);
  node["memory_total_bytes"] = NumberJson(total);
  node["memory_available_bytes"] = NumberJson(available);
  std::optional<double> used_percent;
  if (total && available && *total > 0) {
    used_percent = std::clamp(100.0 * (*total - *available) / *total, 0.0, 100.0);
  }
  node["memory_used_percent"] = NumberJson(used_percent);
  node["load1"] = NumberJson(sample.load1);
  node["load5"] = NumberJson(sample.load5);
  node["load15"] = NumberJson(sample.load15);
  node["network_receive_bytes_per_second"] =
      NumberJson(per_second(SampleMetric::kNetworkReceiveBytes));
  node["network_transmit_bytes_per_second"] =
      NumberJson(per_second(SampleMetric::kNetworkTransmitBytes));
  node["disk_read_bytes_per_second"] = NumberJson(per_second(SampleMetric::kDiskReadBytes));
  node["disk_written_bytes_per_second"] = NumberJson(per_second(SampleMetric::kDiskWrittenBytes));

  json::array filesystems;
  for (const SampleFilesystem& fs : sample.filesystems) {
    filesystems.push_back(json::object{{"mountpoint", fs.mountpoint},
                                       {"device", fs.device},
                                       {"fstype", fs.fstype},
                                       {"size_bytes", NumberJson(fs.size_bytes)},
                                       {"avail_bytes", NumberJson(fs.avail_bytes)},
                                       {"readonly", fs.readonly ? json::value(*fs.readonly)
                                                                : json::value(nullptr)},
                                       {"error", TextOrNull(fs.error)}});
  }
  node["filesystems"] = std::move(filesystems);
  node["gpu_source"] = TextOrNull(sample.gpu_source);
  json::array gpus;
  for (const SampleGpu& gpu : sample.gpus) {
    gpus.push_back(json::object{{"index", gpu.index},
                                {"uuid", TextOrNull(gpu.uuid)},
                                {"name", TextOrNull(gpu.name)},
                                {"utilization_percent", NumberJson(gpu.utilization_percent)},
                                {"memory_used_bytes", NumberJson(gpu.memory_used_bytes)},
                                {"memory_total_bytes", NumberJson(gpu.memory_total_bytes)},
                                {"temperature_celsius", NumberJson(gpu.temperature_celsius)},
                                {"power_watts", NumberJson(gpu.power_watts)}});
  }
  node["gpus"] = std::move(gpus);
  json::array gaps;
  for (const SampleGap& gap : sample.gaps) {
    gaps.push_back(json::object{{"source", gap.source},
                                {"path", gap.path},
                                {"error", gap.error},
                                {"errno", gap.errno_value}});
  }
  node["gaps"] = std::move(gaps);
  return node;
}

}  // namespace uplink::console
