#include "console/store/series_id_cache.h"

#include <algorithm>
#include <utility>

namespace uplink::console {

namespace {

// The order of the list: by metric, then label.
std::pair<SampleMetric, std::string_view> Key(const NodeSeriesIds::Series& series) {
  return {series.metric, series.label};
}

bool Before(const NodeSeriesIds::Series& a, const NodeSeriesIds::Series& b) {
  return Key(a) < Key(b);
}

}  // namespace

void NodeSeriesIds::Assign(std::vector<Series> series, std::int64_t unknown_rows) {
  series_ = std::move(series);
  std::sort(series_.begin(), series_.end(), Before);
  unknown_rows_ = unknown_rows;
}

std::vector<NodeSeriesIds::Series>::const_iterator NodeSeriesIds::Position(
    SampleMetric metric, std::string_view label) const {
  const std::pair<SampleMetric, std::string_view> key(metric, label);
  return std::partition_point(series_.begin(), series_.end(),
                              [&](const Series& series) { return Key(series) < key; });
}

std::optional<std::int64_t> NodeSeriesIds::Find(SampleMetric metric,
                                                 std::string_view label) const {
  auto it = Position(metric, label);
  if (it == series_.end() || it->metric != metric || it->label != label) return std::nullopt;
  return it->id;
}

SeriesIdCache::SeriesIdCache() {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device()};
  random_.seed(seed);
}

NodeSeriesIds* SeriesIdCache::Find(std::int64_t node_id, std::int64_t version) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.version != version) return nullptr;
  return &it->second;
}

NodeSeriesIds& SeriesIdCache::Reset(std::int64_t node_id) {
  if (nodes_.size() >= kMaxNodes && !nodes_.contains(node_id)) nodes_.erase(nodes_.begin());
  NodeSeriesIds& entry = nodes_[node_id];
  entry = NodeSeriesIds{};
  return entry;
}

std::int64_t SeriesIdCache::NewVersion() { return static_cast<std::int64_t>(random_()); }

}  // namespace uplink::console
