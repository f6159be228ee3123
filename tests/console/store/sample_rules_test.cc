// The node sample retention and rollup rules on their own, without a database.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "console/store/rules/sample_rules.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// On a bucket boundary, so that bucket arithmetic below reads plainly.
const WallTime kNow = WallTime(seconds(1'700'000'100));
constexpr std::int64_t kNowSeconds = 1'700'000'100;

TEST(SampleRules, ASampleIsKeptFromTheRawRetentionToTheAllowedClockSkew) {
  SampleRetention retention;  // raw 48 h, skew 300 s
  EXPECT_EQ(ClassifySampleTime(kNow, kNow, retention), SampleTiming::kKeep);
  EXPECT_EQ(ClassifySampleTime(kNow - hours(48), kNow, retention), SampleTiming::kKeep);
  EXPECT_EQ(ClassifySampleTime(kNow - hours(48) - milliseconds(1), kNow, retention),
            SampleTiming::kTooOld);
  EXPECT_EQ(ClassifySampleTime(kNow + seconds(300), kNow, retention), SampleTiming::kKeep);
  EXPECT_EQ(ClassifySampleTime(kNow + seconds(300) + milliseconds(1), kNow, retention),
            SampleTiming::kInFuture);
}

TEST(SampleRules, TheLatestTwoFollowSamplesInWhateverOrderTheyArrive) {
  std::vector<std::int64_t> first = {1000};
  LatestSamples latest = FollowLatestSamples(first, std::nullopt, std::nullopt);
  EXPECT_TRUE(latest.replaces_latest);
  EXPECT_EQ(latest.previous_at, std::nullopt);

  std::vector<std::int64_t> newer = {2000, 3000};
  latest = FollowLatestSamples(newer, 1000, std::nullopt);
  EXPECT_TRUE(latest.replaces_latest);
  EXPECT_EQ(latest.previous_at, 2000);

  // A late sample between the previous and the latest becomes the previous, not the latest.
  std::vector<std::int64_t> late = {2500};
  latest = FollowLatestSamples(late, 3000, 2000);
  EXPECT_FALSE(latest.replaces_latest);
  EXPECT_EQ(latest.previous_at, 2500);

  // One older than both changes neither.
  std::vector<std::int64_t> old = {500};
  latest = FollowLatestSamples(old, 3000, 2500);
  EXPECT_FALSE(latest.replaces_latest);
  EXPECT_EQ(latest.previous_at, 2500);
}

TEST(SampleRules, BucketsAreCompleteOnlyAfterTheRollupDelay) {
  SampleRetention retention;  // delay 120 s, buckets of 300 s
  // kNow is on a boundary: the bucket that just ended is complete only 120 s later.
  EXPECT_EQ(RollupCompleteBefore(kNow, retention), kNowSeconds - 300);
  EXPECT_EQ(RollupCompleteBefore(kNow + seconds(119), retention), kNowSeconds - 300);
  EXPECT_EQ(RollupCompleteBefore(kNow + seconds(120), retention), kNowSeconds);
}

TEST(SampleRules, RollupChunksSkipSilentStretchesAndStayWithinTheBudget) {
  std::int64_t complete_before = kNowSeconds;
  std::int64_t rolled_through = kNowSeconds - 100 * 300;
  // The next sample is 50 buckets on: the 50 empty buckets are skipped, 12 are made.
  RollupChunk chunk =
      NextRollupChunk(rolled_through, (rolled_through + 50 * 300) * 1000 + 7, complete_before,
                      2000);
  EXPECT_EQ(chunk.start, rolled_through + 50 * 300);
  EXPECT_EQ(chunk.buckets, kRollupChunkBuckets);
  EXPECT_EQ(chunk.end, chunk.start + kRollupChunkBuckets * 300);
  // The budget bounds the chunk.
  chunk = NextRollupChunk(rolled_through, rolled_through * 1000, complete_before, 3);
  EXPECT_EQ(chunk.start, rolled_through);
  EXPECT_EQ(chunk.buckets, 3);
  // No sample since: the node is rolled through the complete buckets without work.
  chunk = NextRollupChunk(rolled_through, std::nullopt, complete_before, 2000);
  EXPECT_EQ(chunk.buckets, 0);
  EXPECT_EQ(chunk.end, complete_before);
  // Only incomplete buckets ahead: nothing yet.
  chunk = NextRollupChunk(rolled_through, (complete_before + 10) * 1000, complete_before, 2000);
  EXPECT_EQ(chunk.buckets, 0);
  EXPECT_EQ(chunk.end, complete_before);
}

}  // namespace
}  // namespace uplink::console
