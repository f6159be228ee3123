// The upload rules on their own, without a database: epochs, duplicates, losses, and when
// retention runs.
#include <gtest/gtest.h>

#include <chrono>

#include "console/store/rules/upload_rules.h"

namespace uplink::console {
namespace {

using std::chrono::seconds;

const WallTime kNow = WallTime(std::chrono::hours(24 * 20000));
const std::string kSpool = "0123456789abcdef0123456789abcdef";
const std::string kNewSpool = "fedcba9876543210fedcba9876543210";

// A batch of `sequences` (each a record) that says it goes up to `last`.
UploadBatch Batch(std::vector<std::int64_t> sequences, std::int64_t last,
                  const std::string& spool = kSpool) {
  UploadBatch batch;
  batch.stream = "node/gpu-node-0001";
  batch.spool_id = spool;
  batch.first_sequence = sequences.empty() ? last : sequences.front();
  batch.last_sequence = last;
  for (std::int64_t sequence : sequences) batch.records.push_back({.sequence = sequence});
  return batch;
}

StreamPosition Position(std::int64_t epoch, std::int64_t acked_through) {
  StreamPosition position;
  position.spool_id = kSpool;
  position.epoch = epoch;
  position.acked_through = acked_through;
  position.losses.dropped = {5, 500};
  position.losses.corrupt = {1, 10};
  return position;
}

TEST(UploadRules, AFirstUploadMakesTheStreamAtEpochZeroWithTheSentLosses) {
  UploadBatch batch = Batch({1, 2}, 2);
  batch.losses.dropped = {3, 30};
  auto placed = PlaceUpload(std::nullopt, batch, std::nullopt);
  ASSERT_TRUE(placed.ok());
  EXPECT_TRUE(placed->new_stream);
  EXPECT_FALSE(placed->restarted);
  EXPECT_EQ(placed->epoch, 0);
  EXPECT_EQ(placed->acked_through, 0);
  EXPECT_EQ(placed->losses.dropped.records, 3);
  EXPECT_FALSE(SpoolChanged(std::nullopt, kSpool));
}

TEST(UploadRules, TheSameSpoolContinuesItsEpochAndKeepsTheLargerLosses) {
  UploadBatch batch = Batch({8}, 8);
  batch.losses.dropped = {2, 900};  // fewer records, more bytes than stored
  batch.losses.rejected = {4, 40};
  auto placed = PlaceUpload(Position(3, 7), batch, std::nullopt);
  ASSERT_TRUE(placed.ok());
  EXPECT_FALSE(placed->new_stream);
  EXPECT_FALSE(placed->restarted);
  EXPECT_EQ(placed->epoch, 3);
  EXPECT_EQ(placed->acked_through, 7);
  EXPECT_EQ(placed->losses.dropped.records, 5);
  EXPECT_EQ(placed->losses.dropped.bytes, 900);
  EXPECT_EQ(placed->losses.corrupt.records, 1);
  EXPECT_EQ(placed->losses.rejected.records, 4);
}

TEST(UploadRules, ANewSpoolStartsTheNextEpochFromZeroWithOnlyItsOwnLosses) {
  UploadBatch batch = Batch({1}, 1, kNewSpool);
  EXPECT_TRUE(SpoolChanged(Position(3, 7), kNewSpool));
  auto placed = PlaceUpload(Position(3, 7), batch, std::nullopt);
  ASSERT_TRUE(placed.ok());
  EXPECT_TRUE(placed->restarted);
  EXPECT_EQ(placed->epoch, 4);
  EXPECT_EQ(placed->acked_through, 0);
  EXPECT_EQ(placed->losses.dropped.records, 0);
}

TEST(UploadRules, GoingBackToAnEarlierSpoolIsAConflictNamingBothSpools) {
  auto placed = PlaceUpload(Position(3, 7), Batch({1}, 1, kNewSpool), 1);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().code(), StatusCode::kConflict);
  EXPECT_NE(placed.status().message().find(kNewSpool), std::string::npos);
  EXPECT_NE(placed.status().message().find(kSpool), std::string::npos);
  EXPECT_NE(placed.status().message().find("--stream"), std::string::npos);
}

TEST(UploadRules, RecordsAtOrBelowAckedThroughAreDuplicatesAndGapsAreLostOnce) {
  // Acked through 5; 4 and 5 again, then 6, 8, 9 of up to 10: 7 and 10 never arrive.
  SequenceAccount account = AccountSequences(5, Batch({4, 5, 6, 8, 9}, 10));
  EXPECT_EQ(account.duplicates, 2);
  EXPECT_EQ(account.stored, 3);
  EXPECT_EQ(account.new_records, (std::vector<size_t>{2, 3, 4}));
  EXPECT_EQ(account.lost, 2);
  EXPECT_EQ(account.acked_through, 10);

  // The same batch again: all duplicates, nothing newly lost, nothing moves.
  SequenceAccount again = AccountSequences(10, Batch({4, 5, 6, 8, 9}, 10));
  EXPECT_EQ(again.duplicates, 5);
  EXPECT_EQ(again.stored, 0);
  EXPECT_EQ(again.lost, 0);
  EXPECT_EQ(again.acked_through, 10);
}

TEST(UploadRules, AckedThroughNeverMovesBack) {
  SequenceAccount account = AccountSequences(20, Batch({3}, 3));
  EXPECT_EQ(account.acked_through, 20);
  EXPECT_EQ(account.lost, 0);
  EXPECT_EQ(account.duplicates, 1);
  // An empty batch that only says how far the spool went counts the rest as lost.
  SequenceAccount skipped = AccountSequences(20, Batch({}, 25));
  EXPECT_EQ(skipped.lost, 5);
  EXPECT_EQ(skipped.acked_through, 25);
}

TEST(UploadRules, MaintenanceRunsOncePerIntervalAndAgainAfterTheClockWentBack) {
  EXPECT_TRUE(MaintenanceDue(std::nullopt, kNow, seconds(60)));
  EXPECT_FALSE(MaintenanceDue(kNow, kNow, seconds(60)));
  EXPECT_FALSE(MaintenanceDue(kNow, kNow + seconds(59), seconds(60)));
  EXPECT_TRUE(MaintenanceDue(kNow, kNow + seconds(60), seconds(60)));
  EXPECT_TRUE(MaintenanceDue(kNow, kNow - seconds(1), seconds(60)));
}

}  // namespace
}  // namespace uplink::console
