// The rules of node sample retention and rollups (docs/api.md, "Node metrics"): which samples
// an upload keeps, which the node's latest two are, and how far each maintenance run rolls
// up. The arithmetic of the rollups themselves is sample_series.h's. Plain functions over
// what the store read, so that every store keeps and rolls up alike and the rules are tested
// without a database.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "common/time.h"
#include "console/store/stream_store.h"

namespace uplink::console {

// Buckets rolled up for one node in one go: bounds what is read into memory at once.
inline constexpr std::int64_t kRollupChunkBuckets = 12;

enum class SampleTiming {
  kKeep,
  kTooOld,    // collected before the raw retention: it would be pruned at once
  kInFuture,  // collected further ahead of the console's clock than max_clock_skew
};

SampleTiming ClassifySampleTime(WallTime collected_at, WallTime now,
                                const SampleRetention& retention);

// A node's latest two sample times (milliseconds) once an upload's samples are stored.
struct LatestSamples {
  bool replaces_latest = false;       // the newest stored now is later than the node's latest
  std::optional<std::int64_t> previous_at;  // the second latest distinct time, if any
};

// `stored_at`: the times of the samples this upload stored, in time order, not empty;
// `latest_at` and `previous_at`: the node's before it. Samples may arrive in any order.
LatestSamples FollowLatestSamples(std::span<const std::int64_t> stored_at,
                                  std::optional<std::int64_t> latest_at,
                                  std::optional<std::int64_t> previous_at);

// Buckets (Unix seconds) starting before this are complete at `now`, and may be rolled up.
std::int64_t RollupCompleteBefore(WallTime now, const SampleRetention& retention);

// The next chunk of buckets of a node to roll up: [start, end), `buckets` of them.
struct RollupChunk {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t buckets = 0;  // 0: nothing to roll up; the node is rolled through `end`
};

// `rolled_through`: the node's first bucket not rolled up; `next_sample_ms`: its first sample
// at or after it, if any (a stretch without samples is skipped, not visited bucket by
// bucket); `budget`: buckets this run may still make, more than 0.
RollupChunk NextRollupChunk(std::int64_t rolled_through, std::optional<std::int64_t> next_sample_ms,
                            std::int64_t complete_before, std::int64_t budget);

}  // namespace uplink::console
