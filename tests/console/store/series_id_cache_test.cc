// The store's memory of node series ids on its own, without a database: lookups by metric and
// label in any order, the count the series cap reads, and entries used only at their version.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "console/store/series_id_cache.h"

namespace uplink::console {
namespace {

using Id = std::optional<std::int64_t>;

TEST(NodeSeriesIds, FindsEachSeriesByMetricAndLabelWhateverTheOrderItWasReadIn) {
  NodeSeriesIds node;
  node.Assign({{SampleMetric::kGpuPowerWatts, "1", 14},
               {SampleMetric::kCpuSeconds, "", 1},
               {SampleMetric::kGpuPowerWatts, "0", 13},
               {SampleMetric::kFilesystemSizeBytes, "/var/lib/kubelet", 7}},
              2);
  EXPECT_EQ(node.Find(SampleMetric::kCpuSeconds, ""), Id(1));
  EXPECT_EQ(node.Find(SampleMetric::kGpuPowerWatts, "0"), Id(13));
  EXPECT_EQ(node.Find(SampleMetric::kGpuPowerWatts, "1"), Id(14));
  EXPECT_EQ(node.Find(SampleMetric::kFilesystemSizeBytes, "/var/lib/kubelet"), Id(7));
  EXPECT_EQ(node.Find(SampleMetric::kGpuPowerWatts, "2"), std::nullopt);
  EXPECT_EQ(node.Find(SampleMetric::kFilesystemAvailBytes, "/var/lib/kubelet"), std::nullopt);
  EXPECT_EQ(node.Find(SampleMetric::kFilesystemSizeBytes, "/var/lib"), std::nullopt);
  // Rows of metrics a newer console stored count under the cap too.
  EXPECT_EQ(node.rows(), 6);
}

TEST(SeriesIdCache, AnEntryIsFoundOnlyAtTheVersionItWasFilledAt) {
  SeriesIdCache cache;
  EXPECT_EQ(cache.Find(7, 0), nullptr);
  NodeSeriesIds& entry = cache.Reset(7);
  entry.Assign({{SampleMetric::kLoad1, "", 3}}, 0);
  // Not yet filled: no version matches.
  EXPECT_EQ(cache.Find(7, 0), nullptr);
  entry.version = 42;
  ASSERT_NE(cache.Find(7, 42), nullptr);
  EXPECT_EQ(cache.Find(7, 42)->Find(SampleMetric::kLoad1, ""), Id(3));
  EXPECT_EQ(cache.Find(7, 43), nullptr);
  EXPECT_EQ(cache.Find(8, 42), nullptr);

  // Reset empties it.
  cache.Reset(7).version = 42;
  EXPECT_EQ(cache.Find(7, 42)->Find(SampleMetric::kLoad1, ""), std::nullopt);
  cache.Forget(7);
  EXPECT_EQ(cache.Find(7, 42), nullptr);
}

TEST(SeriesIdCache, NewVersionsDifferAndTheCacheStaysBounded) {
  SeriesIdCache cache;
  std::vector<std::int64_t> versions;
  for (int i = 0; i < 1000; ++i) versions.push_back(cache.NewVersion());
  std::sort(versions.begin(), versions.end());
  EXPECT_EQ(std::adjacent_find(versions.begin(), versions.end()), versions.end());

  for (std::int64_t node = 0; node < static_cast<std::int64_t>(SeriesIdCache::kMaxNodes) + 10;
       ++node) {
    cache.Reset(node).version = 1;
  }
  size_t kept = 0;
  for (std::int64_t node = 0; node < static_cast<std::int64_t>(SeriesIdCache::kMaxNodes) + 10;
       ++node) {
    kept += cache.Find(node, 1) != nullptr;
  }
  EXPECT_EQ(kept, SeriesIdCache::kMaxNodes);
  // The newest is always kept.
  EXPECT_NE(cache.Find(static_cast<std::int64_t>(SeriesIdCache::kMaxNodes) + 9, 1), nullptr);
}

}  // namespace
}  // namespace uplink::console
