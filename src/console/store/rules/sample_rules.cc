#include "console/store/rules/sample_rules.h"

#include <algorithm>
#include <functional>
#include <vector>

namespace uplink::console {
namespace {

std::int64_t Millis(WallTime t) {
  return std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

SampleTiming ClassifySampleTime(WallTime collected_at, WallTime now,
                                const SampleRetention& retention) {
  std::int64_t at_ms = Millis(collected_at);
  if (at_ms < Millis(now - retention.raw_max_age)) return SampleTiming::kTooOld;
  if (at_ms > Millis(now + retention.max_clock_skew)) return SampleTiming::kInFuture;
  return SampleTiming::kKeep;
}

LatestSamples FollowLatestSamples(std::span<const std::int64_t> stored_at,
                                  std::optional<std::int64_t> latest_at,
                                  std::optional<std::int64_t> previous_at) {
  std::vector<std::int64_t> times(stored_at.begin(), stored_at.end());
  if (latest_at) times.push_back(*latest_at);
  if (previous_at) times.push_back(*previous_at);
  std::sort(times.begin(), times.end(), std::greater<>());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  LatestSamples latest;
  latest.replaces_latest = !latest_at || stored_at.back() > *latest_at;
  if (times.size() > 1) latest.previous_at = times[1];
  return latest;
}

std::int64_t RollupCompleteBefore(WallTime now, const SampleRetention& retention) {
  return BucketStart(Millis(now - retention.rollup_delay), kRollupSeconds);
}

RollupChunk NextRollupChunk(std::int64_t rolled_through, std::optional<std::int64_t> next_sample_ms,
                            std::int64_t complete_before, std::int64_t budget) {
  RollupChunk chunk;
  chunk.start = next_sample_ms
                    ? std::max(rolled_through, BucketStart(*next_sample_ms, kRollupSeconds))
                    : complete_before;
  chunk.start = std::min(chunk.start, complete_before);
  chunk.buckets = std::min({(complete_before - chunk.start) / kRollupSeconds,
                            kRollupChunkBuckets, budget});
  chunk.end = chunk.start + chunk.buckets * kRollupSeconds;
  return chunk;
}

}  // namespace uplink::console
