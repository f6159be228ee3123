// The store's side of spool uploads: streams, exactly-once delivery, loss accounting,
// restarts, retention and paging, on a real database of each engine.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <string>
#include <vector>

#include "common/json.h"
#include "console/store/sql_store.h"
#include "store_database.h"
#include "test_util.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::CommittedTransactions;
using testing::StoreEngine;

const WallTime kT0 = FromUnixSeconds(1'800'000'000);
const std::string kTokenHash(64, 'a');
const std::string kConnectionId = "00000000000000c1";
const std::string kStream = "node/gpu-node-0001";
const std::string kSpoolA = "9f2c4e0a5b7d41c3a8e6f0b1c2d3e4f5";
const std::string kSpoolB = "0123456789abcdef0123456789abcdef";

AuditEvent MakeAudit(const std::string& action, const std::string& target_id = kConnectionId) {
  AuditEvent event;
  event.at = kT0;
  event.actor_type = "user";
  event.actor_id = "u1";
  event.actor_label = "a@example.com";
  event.credential = "api_key";
  event.action = action;
  event.target_type = "connection";
  event.target_id = target_id;
  event.owner_id = "u1";
  event.outcome = "ok";
  return event;
}

// What the agent API passes with every upload: written only at a restart.
AuditEvent UploadAudit(const std::string& connection_id = kConnectionId) {
  AuditEvent event;
  event.at = kT0;
  event.actor_type = "agent";
  event.actor_id = connection_id;
  event.actor_label = "agt_00000000";
  event.credential = "agent_token";
  event.action = "stream.restart";
  event.target_type = "connection";
  event.target_id = connection_id;
  event.owner_id = "u1";
  event.source_address = "192.0.2.7";
  event.outcome = "ok";
  return event;
}

// A batch covering [first, last] with a record for each of `sequences`; each payload names
// its sequence.
UploadBatch MakeBatch(std::int64_t first, std::int64_t last,
                      const std::vector<std::int64_t>& sequences,
                      const std::string& spool_id = kSpoolA, const std::string& stream = kStream) {
  UploadBatch batch;
  batch.agent_version = "0.1.0";
  batch.agent_instance = "gpu-node-0001";
  batch.stream = stream;
  batch.spool_id = spool_id;
  batch.first_sequence = first;
  batch.last_sequence = last;
  for (std::int64_t sequence : sequences) {
    UploadRecord record;
    record.sequence = sequence;
    record.appended_at = kT0 + milliseconds(sequence * 1000 + 125);
    record.payload_offset = batch.payloads.size();
    batch.payloads += R"({"kind":"test_record","n":)" + std::to_string(sequence) + "}";
    record.payload_size = batch.payloads.size() - record.payload_offset;
    batch.records.push_back(record);
  }
  return batch;
}

std::vector<std::int64_t> Range(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> sequences;
  for (std::int64_t s = first; s <= last; ++s) sequences.push_back(s);
  return sequences;
}

class StreamStoreTest : public ::testing::TestWithParam<StoreEngine> {
 protected:
  // The test's engine: its parameter, unless a fixture is for one engine only.
  virtual StoreEngine Engine() const { return GetParam(); }

  void SetUp() override {
    database_.emplace(Engine());
    auto opened = database_->OpenStore();
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    for (const char* id : {"u1", "u2"}) {
      User user;
      user.id = id;
      user.email = std::string(id) + "@example.com";
      user.role = Role::kAdmin;
      user.created_at = kT0;
      ASSERT_TRUE(store_->CreateUser(user, MakeAudit("user.create", id)).ok());
    }
    CreateConnection(kConnectionId, "u1");
  }

  void CreateConnection(const std::string& id, const std::string& owner) {
    Connection c;
    c.id = id;
    c.owner_id = owner;
    c.agent_name = "agent";
    c.cluster_name = "cluster-" + id;
    c.token_prefix = "agt_" + id.substr(0, 8);
    c.token_hash = kTokenHash;
    c.created_at = kT0;
    c.expires_at = kT0 + hours(24 * 30);
    ASSERT_TRUE(store_->CreateConnection(c, MakeAudit("connection.create", id)).ok());
  }

  Result<UploadOutcome> Upload(const UploadBatch& batch, WallTime at = kT0,
                               const std::string& connection_id = kConnectionId,
                               const std::string& token_hash = kTokenHash) {
    return store_->AcceptUpload(connection_id, token_hash, batch, at, retention_,
                                UploadAudit(connection_id));
  }

  UploadOutcome UploadOk(const UploadBatch& batch, WallTime at = kT0) {
    auto outcome = Upload(batch, at);
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return outcome.value_or(UploadOutcome{});
  }

  StreamSummary OnlyStream(const std::string& connection_id = kConnectionId) {
    auto streams = store_->ListStreams(connection_id);
    EXPECT_TRUE(streams.ok() && streams->size() == 1u);
    return streams.ok() && streams->size() == 1u ? streams->front() : StreamSummary{};
  }

  std::vector<std::int64_t> StoredSequences(std::optional<std::int64_t> epoch = std::nullopt) {
    RecordQuery query{kConnectionId, kStream, epoch, 0, kMaxRecordPage};
    std::vector<std::int64_t> sequences;
    while (true) {
      auto page = store_->ListStreamRecords(query);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) return sequences;
      for (const StoredRecord& record : page->records) sequences.push_back(record.sequence);
      if (!page->more) return sequences;
      query.after_sequence = page->records.back().sequence;
    }
  }

  std::int64_t RecordRows() { return database_->Count("SELECT COUNT(*) FROM stream_records"); }
  std::int64_t AuditRows() { return database_->Count("SELECT COUNT(*) FROM audit_events"); }

  std::optional<testing::TestDatabase> database_;
  std::unique_ptr<SqlStore> store_;
  RecordRetention retention_;
};

TEST_P(StreamStoreTest, AFirstUploadCreatesTheStreamAndCountsEverySequenceBeforeItAsLost) {
  std::int64_t audit_before = AuditRows();
  UploadBatch batch = MakeBatch(500, 502, {500, 501, 502});
  batch.losses = {{12, 49152}, {1, 100}, {2, 2048}};
  UploadOutcome outcome = UploadOk(batch, kT0 + seconds(5));
  EXPECT_TRUE(outcome.new_stream);
  EXPECT_FALSE(outcome.restarted);
  EXPECT_EQ(outcome.epoch, 0);
  EXPECT_EQ(outcome.stored, 3);
  EXPECT_EQ(outcome.duplicates, 0);
  EXPECT_EQ(outcome.lost, 499);
  EXPECT_EQ(outcome.acked_through, 502);

  StreamSummary stream = OnlyStream();
  EXPECT_EQ(stream.stream, kStream);
  EXPECT_EQ(stream.spool_id, kSpoolA);
  EXPECT_EQ(stream.epoch, 0);
  EXPECT_EQ(stream.acked_through, 502);
  EXPECT_EQ(stream.records_stored, 3);
  EXPECT_EQ(stream.duplicates_ignored, 0);
  EXPECT_EQ(stream.lost_records, 499);
  EXPECT_EQ(stream.agent_losses.dropped.records, 12);
  EXPECT_EQ(stream.agent_losses.dropped.bytes, 49152);
  EXPECT_EQ(stream.agent_losses.corrupt.records, 1);
  EXPECT_EQ(stream.agent_losses.corrupt.bytes, 100);
  EXPECT_EQ(stream.agent_losses.rejected.records, 2);
  EXPECT_EQ(stream.agent_losses.rejected.bytes, 2048);
  EXPECT_EQ(stream.first_upload_at, kT0 + seconds(5));
  EXPECT_EQ(stream.last_upload_at, kT0 + seconds(5));
  EXPECT_EQ(stream.agent_instance, "gpu-node-0001");
  EXPECT_EQ(stream.agent_version, "0.1.0");

  auto page = store_->ListStreamRecords({kConnectionId, kStream, std::nullopt, 0, 10});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->records.size(), 3u);
  EXPECT_FALSE(page->more);
  EXPECT_EQ(page->records[0].sequence, 500);
  // Milliseconds survive: agents send them.
  EXPECT_EQ(page->records[0].appended_at, kT0 + milliseconds(500'125));
  EXPECT_EQ(page->records[0].received_at, kT0 + seconds(5));
  EXPECT_EQ(page->records[2].payload, R"({"kind":"test_record","n":502})");
  // Uploads are data, not changes to credentials: no audit event.
  EXPECT_EQ(AuditRows(), audit_before);
}

TEST_P(StreamStoreTest, TheSameBatchTwiceIsStoredOnceAndCountedAsDuplicates) {
  UploadBatch batch = MakeBatch(1, 50, Range(1, 50));
  ASSERT_EQ(UploadOk(batch).stored, 50);
  UploadOutcome again = UploadOk(batch, kT0 + seconds(30));
  EXPECT_EQ(again.stored, 0);
  EXPECT_EQ(again.duplicates, 50);
  EXPECT_EQ(again.lost, 0);
  EXPECT_EQ(again.acked_through, 50);
  EXPECT_FALSE(again.new_stream);
  EXPECT_EQ(RecordRows(), 50);
  StreamSummary stream = OnlyStream();
  EXPECT_EQ(stream.records_stored, 50);
  EXPECT_EQ(stream.duplicates_ignored, 50);
  EXPECT_EQ(stream.lost_records, 0);
  EXPECT_EQ(stream.first_upload_at, kT0);
  EXPECT_EQ(stream.last_upload_at, kT0 + seconds(30));
}

TEST_P(StreamStoreTest, AnOverlappingBatchStoresOnlyWhatIsNew) {
  ASSERT_EQ(UploadOk(MakeBatch(1, 10, Range(1, 10))).stored, 10);
  UploadOutcome overlap = UploadOk(MakeBatch(6, 15, Range(6, 15)));
  EXPECT_EQ(overlap.duplicates, 5);
  EXPECT_EQ(overlap.stored, 5);
  EXPECT_EQ(overlap.lost, 0);
  EXPECT_EQ(overlap.acked_through, 15);
  EXPECT_EQ(StoredSequences(), Range(1, 15));
}

TEST_P(StreamStoreTest, GapsInsideABatchAndBetweenBatchesAreLost) {
  UploadOutcome gaps = UploadOk(MakeBatch(1, 10, {1, 2, 5, 10}));
  EXPECT_EQ(gaps.stored, 4);
  EXPECT_EQ(gaps.lost, 6);
  // The next batch starts after a hole (11-19) and covers a range with no records (21-25).
  UploadOutcome next = UploadOk(MakeBatch(20, 25, {20}));
  EXPECT_EQ(next.stored, 1);
  EXPECT_EQ(next.lost, 14);
  // A range that holds no record at all.
  UploadOutcome empty = UploadOk(MakeBatch(26, 30, {}));
  EXPECT_EQ(empty.stored, 0);
  EXPECT_EQ(empty.lost, 5);
  EXPECT_EQ(empty.acked_through, 30);
  EXPECT_EQ(OnlyStream().lost_records, 25);
  EXPECT_EQ(StoredSequences(), (std::vector<std::int64_t>{1, 2, 5, 10, 20}));
}

TEST_P(StreamStoreTest, AnOldBatchNeverMovesTheAcknowledgementBack) {
  ASSERT_TRUE(Upload(MakeBatch(1, 10, Range(1, 10))).ok());
  UploadOutcome old = UploadOk(MakeBatch(3, 5, Range(3, 5)));
  EXPECT_EQ(old.acked_through, 10);
  EXPECT_EQ(old.duplicates, 3);
  EXPECT_EQ(old.lost, 0);
  EXPECT_EQ(OnlyStream().acked_through, 10);
}

TEST_P(StreamStoreTest, ANewSpoolIdStartsANewEpochKeepsTheOldRecordsAndIsAudited) {
  UploadBatch first = MakeBatch(1, 20, Range(1, 20));
  first.losses.dropped = {7, 700};
  ASSERT_TRUE(Upload(first).ok());
  std::int64_t audit_before = AuditRows();

  // The new spool's sequences start again at 1 and collide with the old ones.
  UploadBatch restarted = MakeBatch(1, 5, {1, 2, 4, 5}, kSpoolB);
  restarted.losses.corrupt = {1, 64};
  UploadOutcome outcome = UploadOk(restarted, kT0 + minutes(1));
  EXPECT_TRUE(outcome.restarted);
  EXPECT_FALSE(outcome.new_stream);
  EXPECT_EQ(outcome.epoch, 1);
  EXPECT_EQ(outcome.stored, 4);
  EXPECT_EQ(outcome.duplicates, 0);
  EXPECT_EQ(outcome.lost, 1);
  EXPECT_EQ(outcome.acked_through, 5);

  StreamSummary stream = OnlyStream();
  EXPECT_EQ(stream.spool_id, kSpoolB);
  EXPECT_EQ(stream.epoch, 1);
  EXPECT_EQ(stream.acked_through, 5);
  EXPECT_EQ(stream.records_stored, 24);
  EXPECT_EQ(stream.lost_records, 1);
  // The agent's counters belong to its spool: the new one's replace the old ones.
  EXPECT_EQ(stream.agent_losses.dropped.records, 0);
  EXPECT_EQ(stream.agent_losses.corrupt.records, 1);
  EXPECT_EQ(stream.agent_losses.corrupt.bytes, 64);

  EXPECT_EQ(StoredSequences(), (std::vector<std::int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(StoredSequences(0), Range(1, 20));
  EXPECT_EQ(RecordRows(), 24);

  ASSERT_EQ(AuditRows(), audit_before + 1);
  auto events = store_->ListAudit({.action = std::string("stream.restart"), .limit = 10});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  const AuditEvent& event = events->front();
  EXPECT_EQ(event.actor_type, "agent");
  EXPECT_EQ(event.actor_id, kConnectionId);
  EXPECT_EQ(event.target_id, kConnectionId);
  EXPECT_EQ(event.owner_id, "u1");
  json::object detail = ParseJson(event.detail)->as_object();
  EXPECT_EQ(detail.at("stream").as_string(), kStream);
  EXPECT_EQ(detail.at("spool_id").as_string(), kSpoolB);
  EXPECT_EQ(detail.at("previous_spool_id").as_string(), kSpoolA);
  EXPECT_EQ(detail.at("previous_acked_through").as_int64(), 20);
  EXPECT_EQ(detail.at("epoch").as_int64(), 1);

  // The first spool coming back (two shippers on one stream, a restored backup) is refused:
  // taking it again would flip epochs on every upload and store its records twice.
  auto back = Upload(MakeBatch(21, 22, {21, 22}), kT0 + minutes(2));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kConflict);
  EXPECT_NE(back.status().message().find("was replaced"), std::string::npos)
      << back.status().message();
  EXPECT_EQ(StoredSequences(0), Range(1, 20));
  EXPECT_EQ(OnlyStream().epoch, 1);
  EXPECT_EQ(OnlyStream().spool_id, kSpoolB);
  // The current spool goes on as before.
  UploadOutcome next = UploadOk(MakeBatch(6, 6, {6}, kSpoolB), kT0 + minutes(3));
  EXPECT_FALSE(next.restarted);
  EXPECT_EQ(next.stored, 1);
}

TEST_P(StreamStoreTest, TheAgentsLossesKeepTheLargerOfStoredAndSent) {
  UploadBatch batch = MakeBatch(1, 1, {1});
  batch.losses = {{5, 500}, {2, 20}, {1, 10}};
  ASSERT_TRUE(Upload(batch).ok());
  // An upload that was built before a later one (a retry) carries smaller counters.
  batch = MakeBatch(2, 2, {2});
  batch.losses = {{3, 900}, {2, 20}, {0, 0}};
  ASSERT_TRUE(Upload(batch).ok());
  AgentLosses losses = OnlyStream().agent_losses;
  EXPECT_EQ(losses.dropped.records, 5);
  EXPECT_EQ(losses.dropped.bytes, 900);
  EXPECT_EQ(losses.corrupt.records, 2);
  EXPECT_EQ(losses.rejected.records, 1);
  EXPECT_EQ(losses.rejected.bytes, 10);
}

TEST_P(StreamStoreTest, StreamsAreSeparatePerConnectionAndPerName) {
  CreateConnection("00000000000000c2", "u2");
  ASSERT_TRUE(Upload(MakeBatch(1, 3, Range(1, 3))).ok());
  ASSERT_TRUE(Upload(MakeBatch(1, 2, Range(1, 2), kSpoolA, "cluster/main")).ok());
  auto other = Upload(MakeBatch(1, 9, Range(1, 9)), kT0, "00000000000000c2");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_TRUE(other->new_stream);
  EXPECT_EQ(other->stored, 9);

  auto mine = store_->ListStreams(kConnectionId);
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ(mine->at(0).stream, "cluster/main");  // by name
  EXPECT_EQ(mine->at(1).stream, kStream);
  EXPECT_EQ(mine->at(1).records_stored, 3);
  EXPECT_EQ(OnlyStream("00000000000000c2").records_stored, 9);
  EXPECT_TRUE(store_->ListStreams("no-such-connection")->empty());
}

TEST_P(StreamStoreTest, AnUploadWhoseTokenStoppedWorkingMeanwhileStoresNothing) {
  ASSERT_TRUE(Upload(MakeBatch(1, 2, Range(1, 2))).ok());
  ASSERT_TRUE(store_
                  ->ReplaceToken(kConnectionId, "agt_rotated1", std::string(64, 'b'),
                                 kT0 + hours(24), std::nullopt, MakeAudit("connection.rotate"))
                  .ok());
  auto late = Upload(MakeBatch(3, 9, Range(3, 9)), kT0 + seconds(1));
  EXPECT_EQ(late.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(late.status().message().find("nothing was stored"), std::string::npos);
  const std::string new_hash(64, 'b');
  ASSERT_TRUE(Upload(MakeBatch(3, 4, Range(3, 4)), kT0 + seconds(2), kConnectionId, new_hash).ok());

  ASSERT_TRUE(store_->SetUserDeactivated("u1", kT0 + seconds(3), MakeAudit("user.deactivate"))
                  .ok());
  EXPECT_EQ(Upload(MakeBatch(5, 6, Range(5, 6)), kT0 + seconds(4), kConnectionId, new_hash)
                .status()
                .code(),
            StatusCode::kUnauthenticated);
  ASSERT_TRUE(store_->SetUserDeactivated("u1", std::nullopt, MakeAudit("user.reactivate")).ok());

  // Expired by the time it is stored.
  EXPECT_EQ(Upload(MakeBatch(5, 6, Range(5, 6)), kT0 + hours(24 * 31), kConnectionId, new_hash)
                .status()
                .code(),
            StatusCode::kUnauthenticated);

  ASSERT_TRUE(
      store_->RevokeConnection(kConnectionId, kT0 + seconds(5), MakeAudit("connection.revoke"))
          .ok());
  EXPECT_EQ(Upload(MakeBatch(5, 6, Range(5, 6)), kT0 + seconds(6), kConnectionId, new_hash)
                .status()
                .code(),
            StatusCode::kUnauthenticated);

  StreamSummary stream = OnlyStream();
  EXPECT_EQ(stream.acked_through, 4);
  EXPECT_EQ(stream.records_stored, 4);
  EXPECT_EQ(RecordRows(), 4);
}

TEST_P(StreamStoreTest, AnUploadForAMissingConnectionIsNotFoundAndLeavesNoTransactionOpen) {
  EXPECT_EQ(Upload(MakeBatch(1, 1, {1}), kT0, "no-such-connection").status().code(),
            StatusCode::kNotFound);
  // A transaction left open would make this one fail.
  EXPECT_TRUE(Upload(MakeBatch(1, 1, {1})).ok());
  EXPECT_EQ(RecordRows(), 1);
}

// SQLite's credential cache (one server per file; PostgreSQL replicas cache nothing).
class SqliteStreamStoreTest : public StreamStoreTest {
 protected:
  StoreEngine Engine() const override { return StoreEngine::kSqlite; }
};

TEST_F(SqliteStreamStoreTest, UploadsKeepTheCachedTokenLookupsWhichStillSeeARevoke) {
  const std::string prefix = "agt_" + kConnectionId.substr(0, 8);
  auto before = store_->FindConnectionsByTokenPrefix(prefix);
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(Upload(MakeBatch(1, 5, Range(1, 5))).ok());
  ASSERT_TRUE(Upload(MakeBatch(1, 5, Range(1, 5), kSpoolB)).ok());  // a restart, too
  auto after = store_->FindConnectionsByTokenPrefix(prefix);
  ASSERT_TRUE(after.ok());
  // The same shared rows: the uploads did not empty the cache.
  EXPECT_EQ(before->get(), after->get());
  ASSERT_TRUE(
      store_->RevokeConnection(kConnectionId, kT0 + seconds(1), MakeAudit("connection.revoke"))
          .ok());
  EXPECT_TRUE((*store_->FindConnectionsByTokenPrefix(prefix))->at(0).revoked_at.has_value());
}

TEST_P(StreamStoreTest, RetentionDeletesOldRecordsAtMostOnceAMinuteAndBoundedPerRun) {
  retention_.max_age = hours(24 * 7);
  retention_.max_records_per_run = 4;
  ASSERT_EQ(UploadOk(MakeBatch(1, 10, Range(1, 10)), kT0).records_pruned, 0);
  ASSERT_EQ(UploadOk(MakeBatch(11, 12, Range(11, 12)), kT0 + hours(48)).records_pruned, 0);

  // Eight days on, the first ten are too old: at most four go per run.
  WallTime later = kT0 + hours(24 * 8);
  EXPECT_EQ(UploadOk(MakeBatch(13, 13, {13}), later).records_pruned, 4);
  // Less than a minute after that run: none.
  EXPECT_EQ(UploadOk(MakeBatch(14, 14, {14}), later + seconds(59)).records_pruned, 0);
  EXPECT_EQ(UploadOk(MakeBatch(15, 15, {15}), later + seconds(60)).records_pruned, 4);
  EXPECT_EQ(UploadOk(MakeBatch(16, 16, {16}), later + seconds(120)).records_pruned, 2);
  EXPECT_EQ(StoredSequences(), Range(11, 16));
  // The counts of what arrived are history, not current rows: retention leaves them.
  EXPECT_EQ(OnlyStream().records_stored, 16);

  // A clock that went back does not hold retention off until it catches up again.
  WallTime much_later = kT0 + hours(24 * 16);
  EXPECT_EQ(UploadOk(MakeBatch(17, 17, {17}), much_later).records_pruned, 4);
  EXPECT_EQ(UploadOk(MakeBatch(18, 18, {18}), much_later - seconds(1)).records_pruned, 2);
  EXPECT_EQ(StoredSequences(), Range(17, 18));
}

TEST_P(StreamStoreTest, RecordsArePagedInOrderByCountAndBySize) {
  ASSERT_TRUE(Upload(MakeBatch(1, 25, Range(1, 25))).ok());
  RecordQuery query{kConnectionId, kStream, std::nullopt, 0, 10};
  auto first = store_->ListStreamRecords(query);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->records.size(), 10u);
  EXPECT_TRUE(first->more);
  EXPECT_EQ(first->records.front().sequence, 1);
  EXPECT_EQ(first->records.back().sequence, 10);

  query.after_sequence = 20;
  auto last = store_->ListStreamRecords(query);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->records.size(), 5u);
  EXPECT_FALSE(last->more);
  EXPECT_EQ(last->records.front().sequence, 21);

  // Exactly as many as asked for left: no next page.
  query.after_sequence = 15;
  EXPECT_FALSE(store_->ListStreamRecords(query)->more);
  query.after_sequence = 25;
  EXPECT_TRUE(store_->ListStreamRecords(query)->records.empty());

  // The byte budget ends a page early but always returns at least one record.
  query.after_sequence = 0;
  query.max_payload_bytes = 1;
  auto one = store_->ListStreamRecords(query);
  ASSERT_EQ(one->records.size(), 1u);
  EXPECT_TRUE(one->more);
  query.max_payload_bytes = 3 * std::string(R"({"kind":"test_record","n":1})").size();
  EXPECT_EQ(store_->ListStreamRecords(query)->records.size(), 3u);

  // Limits are clamped.
  query.max_payload_bytes = 8 << 20;
  query.limit = 0;
  EXPECT_EQ(store_->ListStreamRecords(query)->records.size(), 1u);
  query.limit = 1'000'000;
  EXPECT_EQ(store_->ListStreamRecords(query)->records.size(), 25u);
}

TEST_P(StreamStoreTest, PagingAnUnknownStreamOrEpochSaysWhich) {
  ASSERT_TRUE(Upload(MakeBatch(1, 3, Range(1, 3))).ok());
  auto unknown = store_->ListStreamRecords({kConnectionId, "node/other", std::nullopt, 0, 10});
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("node/other"), std::string::npos);
  // Another connection's stream of the same name is not this one's.
  CreateConnection("00000000000000c2", "u2");
  EXPECT_EQ(store_->ListStreamRecords({"00000000000000c2", kStream, std::nullopt, 0, 10})
                .status()
                .code(),
            StatusCode::kNotFound);
  auto future = store_->ListStreamRecords({kConnectionId, kStream, 1, 0, 10});
  EXPECT_EQ(future.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(future.status().message().find("from 0 to 0"), std::string::npos);
  EXPECT_EQ(store_->ListStreamRecords({kConnectionId, kStream, -1, 0, 10}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->ListStreamRecords({kConnectionId, kStream, 0, 0, 10})->records.size(), 3u);
}

TEST_P(StreamStoreTest, PayloadsAndNamesRoundTripByteForByte) {
  UploadBatch batch = MakeBatch(1, 1, {});
  batch.agent_instance = "pod-\xc3\xa9\xe2\x9c\x93";
  UploadRecord record;
  record.sequence = 1;
  record.appended_at = kT0;
  batch.payloads =
      "{\"text\":\"\xf0\x9f\x98\x80 'quoted' \\\"x\\\" \\u0000 ; DROP TABLE streams;\"}";
  record.payload_size = batch.payloads.size();
  batch.records.push_back(record);
  ASSERT_TRUE(Upload(batch).ok());
  auto page = store_->ListStreamRecords({kConnectionId, kStream, std::nullopt, 0, 10});
  ASSERT_EQ(page->records.size(), 1u);
  EXPECT_EQ(page->records[0].payload, batch.payloads);
  EXPECT_EQ(OnlyStream().agent_instance, batch.agent_instance);
}

TEST_P(StreamStoreTest, ALargeBatchIsStoredInOneTransaction) {
  ASSERT_EQ(UploadOk(MakeBatch(1, 10'000, Range(1, 10'000))).stored, 10'000);
  EXPECT_EQ(RecordRows(), 10'000);
  EXPECT_EQ(UploadOk(MakeBatch(1, 10'000, Range(1, 10'000))).duplicates, 10'000);
  EXPECT_EQ(RecordRows(), 10'000);
}

TEST_P(StreamStoreTest, ConcurrentUploadsShareCommitsAndAFailingOneTakesNothingWithIt) {
  constexpr int kThreads = 8;
  constexpr int kUploads = 10;  // each; small enough that no checkpoint resets the log
  // SQLite's log shows the group commits; PostgreSQL commits them the same way, unseen.
  const bool sqlite = GetParam() == StoreEngine::kSqlite;
  const std::string wal = database_->sqlite_path() + "-wal";
  const std::int64_t commits_before = sqlite ? CommittedTransactions(wal) : 0;
  std::vector<std::vector<Status>> refusals(kThreads);
  std::vector<std::vector<std::int64_t>> stored(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string stream = "node/concurrent-" + std::to_string(t);
      for (++ready; ready < kThreads;) std::this_thread::yield();
      for (std::int64_t i = 1; i <= kUploads; ++i) {
        auto outcome = Upload(MakeBatch(i, i, {i}, kSpoolA, stream));
        stored[t].push_back(outcome.ok() ? outcome->stored : -1);
        // In between, an upload whose token was rotated away: refused, nothing of it kept.
        auto refused = Upload(MakeBatch(100 + i, 100 + i, {100 + i}, kSpoolB, stream), kT0,
                              kConnectionId, std::string(64, 'b'));
        refusals[t].push_back(refused.status());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(stored[t], std::vector<std::int64_t>(kUploads, 1)) << "thread " << t;
    for (const Status& status : refusals[t]) {
      EXPECT_EQ(status.code(), StatusCode::kUnauthenticated) << status.ToString();
    }
    RecordQuery query{kConnectionId, "node/concurrent-" + std::to_string(t), std::nullopt, 0,
                      kMaxRecordPage};
    auto page = store_->ListStreamRecords(query);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    std::vector<std::int64_t> sequences;
    for (const StoredRecord& record : page->records) sequences.push_back(record.sequence);
    EXPECT_EQ(sequences, Range(1, kUploads)) << "thread " << t;
  }
  EXPECT_EQ(RecordRows(), kThreads * kUploads);
  if (sqlite) {
    // Uploads that arrived while another group committed were committed together.
    const std::int64_t commits = CommittedTransactions(wal) - commits_before;
    EXPECT_GT(commits, 0);
    EXPECT_LT(commits, kThreads * kUploads);
  }
}

// Uploads handed to the store without waiting (AcceptUploadThen, as the HTTP handler does),
// collected by `done` from the store's writer thread.
class HandedUploads {
 public:
  StreamStore::UploadDone Done(size_t index) {
    return [this, index](Result<UploadOutcome> outcome) {
      std::lock_guard lock(mutex_);
      outcomes_.emplace(index, std::move(outcome));
      answered_.notify_all();
    };
  }
  // Waits for `count` answers; each upload's, by index.
  std::map<size_t, Result<UploadOutcome>> WaitFor(size_t count) {
    std::unique_lock lock(mutex_);
    EXPECT_TRUE(answered_.wait_for(lock, std::chrono::seconds(60),
                                   [&] { return outcomes_.size() >= count; }))
        << outcomes_.size() << " of " << count << " answered";
    return outcomes_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable answered_;
  std::map<size_t, Result<UploadOutcome>> outcomes_;
};

TEST_P(StreamStoreTest, UploadsHandedOverWithoutWaitingAreAnsweredOnceEachAndCommittedTogether) {
  constexpr size_t kUploads = 50;  // under the 64 writes of one group
  const bool sqlite = GetParam() == StoreEngine::kSqlite;
  const std::string wal = database_->sqlite_path() + "-wal";
  const std::int64_t commits_before = sqlite ? CommittedTransactions(wal) : 0;
  HandedUploads handed;
  std::promise<void> holding, release;
  std::shared_future<void> released = release.get_future().share();
  std::optional<Result<UploadOutcome>> written_from_done;
  // The first upload's answer holds the writer thread until the others are queued, so that
  // they make one group; meanwhile it writes from that thread, which must not wait for itself.
  store_->AcceptUploadThen(
      kConnectionId, kTokenHash,
      std::make_shared<UploadBatch>(MakeBatch(1, 1, {1}, kSpoolA, "node/first")), kT0,
      retention_, UploadAudit(), [&, done = handed.Done(0)](Result<UploadOutcome> outcome) {
        written_from_done = Upload(MakeBatch(1, 1, {1}, kSpoolA, "node/from-done"));
        holding.set_value();
        released.wait();
        done(std::move(outcome));
      });
  holding.get_future().wait();
  const std::int64_t round_trips_before = testing::WriterRoundTrips(*store_);
  for (size_t i = 1; i <= kUploads; ++i) {
    const auto sequence = static_cast<std::int64_t>(i);
    // One in the middle with a token rotated away: refused alone.
    const std::string token = i == kUploads / 2 ? std::string(64, 'b') : kTokenHash;
    store_->AcceptUploadThen(
        kConnectionId, token,
        std::make_shared<UploadBatch>(MakeBatch(sequence, sequence, {sequence})), kT0,
        retention_, UploadAudit(), handed.Done(i));
  }
  release.set_value();
  std::map<size_t, Result<UploadOutcome>> outcomes = handed.WaitFor(kUploads + 1);
  const std::int64_t round_trips = testing::WriterRoundTrips(*store_) - round_trips_before;

  ASSERT_EQ(outcomes.size(), kUploads + 1);
  ASSERT_TRUE(written_from_done.has_value());
  EXPECT_TRUE(written_from_done->ok()) << written_from_done->status().ToString();
  for (const auto& [index, outcome] : outcomes) {
    if (index == kUploads / 2) {
      EXPECT_EQ(outcome.status().code(), StatusCode::kUnauthenticated);
      continue;
    }
    ASSERT_TRUE(outcome.ok()) << index << ": " << outcome.status().ToString();
    EXPECT_EQ(outcome->stored, 1) << index;
    EXPECT_EQ(outcome->acked_through, index == 0 ? 1 : static_cast<std::int64_t>(index));
  }
  std::vector<std::int64_t> expected = Range(1, kUploads);
  expected.erase(expected.begin() + kUploads / 2 - 1);
  EXPECT_EQ(StoredSequences(), expected);
  EXPECT_EQ(RecordRows(), static_cast<std::int64_t>(kUploads - 1 + 2));
  if (sqlite) {
    // The first upload, the write from its answer, then the 50 in one commit.
    EXPECT_EQ(CommittedTransactions(wal) - commits_before, 3);
  } else {
    // One answer per write: each write's deferred statements go out with the next one's first
    // query (measured: 55; two per write before). Beyond those: BEGIN, the first one's new
    // stream row, the refused one's ROLLBACK TO, the last one's await, COMMIT.
    EXPECT_LE(round_trips, static_cast<std::int64_t>(kUploads) + 5);
  }
}

TEST_P(StreamStoreTest, RefusedWritesInAGroupUndoOnlyThemselvesWhereverTheyFall) {
  // One group: refusals first, twice in a row, between stored uploads and last, so that each
  // way of moving from one write to the next (a savepoint kept after a rollback, a release
  // with the next savepoint, the commit's release of the last) is taken.
  const std::vector<bool> refused = {true, false, true, true, false, false, true, false, true};
  HandedUploads handed;
  std::promise<void> holding, release;
  std::shared_future<void> released = release.get_future().share();
  store_->AcceptUploadThen(kConnectionId, kTokenHash,
                           std::make_shared<UploadBatch>(MakeBatch(1, 1, {1}, kSpoolA, "node/hold")),
                           kT0, retention_, UploadAudit(),
                           [&, done = handed.Done(0)](Result<UploadOutcome> outcome) {
                             holding.set_value();
                             released.wait();
                             done(std::move(outcome));
                           });
  holding.get_future().wait();
  std::vector<std::int64_t> expected;
  for (size_t i = 0; i < refused.size(); ++i) {
    const auto sequence = static_cast<std::int64_t>(i + 1);
    if (!refused[i]) expected.push_back(sequence);
    store_->AcceptUploadThen(
        kConnectionId, refused[i] ? std::string(64, 'b') : kTokenHash,
        std::make_shared<UploadBatch>(MakeBatch(sequence, sequence, {sequence})), kT0,
        retention_, UploadAudit(), handed.Done(i + 1));
  }
  release.set_value();
  std::map<size_t, Result<UploadOutcome>> outcomes = handed.WaitFor(refused.size() + 1);
  ASSERT_EQ(outcomes.size(), refused.size() + 1);
  for (size_t i = 0; i < refused.size(); ++i) {
    const Result<UploadOutcome>& outcome = outcomes.at(i + 1);
    if (refused[i]) {
      EXPECT_EQ(outcome.status().code(), StatusCode::kUnauthenticated) << i;
    } else {
      EXPECT_TRUE(outcome.ok()) << i << ": " << outcome.status().ToString();
    }
  }
  EXPECT_EQ(StoredSequences(), expected);
}

TEST_P(StreamStoreTest, AWriteWhoseDeferredUpdateFailsIsUndoneAloneAndInAGroup) {
  // The stream's update is deferred (sent without waiting on PostgreSQL): a trigger refuses
  // it for one agent version, so that its failure comes only after the write's body is done.
  UploadOk(MakeBatch(1, 1, {1}));
  if (GetParam() == StoreEngine::kSqlite) {
    database_->Exec(
        "CREATE TRIGGER refuse BEFORE UPDATE ON streams WHEN NEW.agent_version = 'refused' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
  } else {
    database_->Exec(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.agent_version = 'refused' THEN RAISE EXCEPTION 'refused by the test'; END IF; "
        "RETURN NEW; END $$; CREATE TRIGGER refuse BEFORE UPDATE ON streams FOR EACH ROW "
        "EXECUTE FUNCTION refuse()");
  }
  auto batch = [](std::int64_t sequence, bool refused) {
    UploadBatch b = MakeBatch(sequence, sequence, {sequence});
    if (refused) b.agent_version = "refused";
    return b;
  };
  // Alone in its transaction.
  auto alone = Upload(batch(2, true));
  EXPECT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("updating stream"), std::string::npos)
      << alone.status().ToString();
  EXPECT_NE(alone.status().message().find("refused by the test"), std::string::npos)
      << alone.status().ToString();
  UploadOk(batch(2, false));

  // In one group, between stored uploads and last.
  const std::vector<bool> refused = {false, true, false, true, true, false, true};
  HandedUploads handed;
  std::promise<void> holding, release;
  std::shared_future<void> released = release.get_future().share();
  store_->AcceptUploadThen(kConnectionId, kTokenHash,
                           std::make_shared<UploadBatch>(batch(3, false)), kT0, retention_,
                           UploadAudit(), [&, done = handed.Done(0)](Result<UploadOutcome> outcome) {
                             holding.set_value();
                             released.wait();
                             done(std::move(outcome));
                           });
  holding.get_future().wait();
  std::vector<std::int64_t> expected = {1, 2, 3};
  for (size_t i = 0; i < refused.size(); ++i) {
    const auto sequence = static_cast<std::int64_t>(i + 4);
    if (!refused[i]) expected.push_back(sequence);
    store_->AcceptUploadThen(kConnectionId, kTokenHash,
                             std::make_shared<UploadBatch>(batch(sequence, refused[i])), kT0,
                             retention_, UploadAudit(), handed.Done(i + 1));
  }
  release.set_value();
  std::map<size_t, Result<UploadOutcome>> outcomes = handed.WaitFor(refused.size() + 1);
  ASSERT_EQ(outcomes.size(), refused.size() + 1);
  EXPECT_TRUE(outcomes.at(0).ok()) << outcomes.at(0).status().ToString();
  for (size_t i = 0; i < refused.size(); ++i) {
    const Result<UploadOutcome>& outcome = outcomes.at(i + 1);
    if (refused[i]) {
      EXPECT_NE(outcome.status().message().find("refused by the test"), std::string::npos)
          << i << ": " << outcome.status().ToString();
    } else {
      EXPECT_TRUE(outcome.ok()) << i << ": " << outcome.status().ToString();
    }
  }
  EXPECT_EQ(StoredSequences(), expected);
  EXPECT_EQ(OnlyStream().acked_through, expected.back());
}

TEST_P(StreamStoreTest, AnAnswerThatThrowsLeavesTheWriterRunningAndTheOthersAnswered) {
  HandedUploads handed;
  std::promise<void> holding, release;
  std::shared_future<void> released = release.get_future().share();
  // The first answer holds the writer so that the next three make one group, whose middle
  // answer throws.
  store_->AcceptUploadThen(kConnectionId, kTokenHash,
                           std::make_shared<UploadBatch>(MakeBatch(1, 1, {1})), kT0, retention_,
                           UploadAudit(), [&, done = handed.Done(1)](Result<UploadOutcome> outcome) {
                             holding.set_value();
                             released.wait();
                             done(std::move(outcome));
                           });
  holding.get_future().wait();
  for (std::int64_t sequence = 2; sequence <= 4; ++sequence) {
    StreamStore::UploadDone done = handed.Done(static_cast<size_t>(sequence));
    if (sequence == 3) {
      done = [](Result<UploadOutcome>) { throw std::runtime_error("answer failed"); };
    }
    store_->AcceptUploadThen(kConnectionId, kTokenHash,
                             std::make_shared<UploadBatch>(MakeBatch(sequence, sequence, {sequence})),
                             kT0, retention_, UploadAudit(), std::move(done));
  }
  release.set_value();
  std::map<size_t, Result<UploadOutcome>> outcomes = handed.WaitFor(3);
  ASSERT_EQ(outcomes.size(), 3u);
  for (const auto& [index, outcome] : outcomes) {
    EXPECT_TRUE(outcome.ok()) << index << ": " << outcome.status().ToString();
  }
  // The write whose answer threw was committed with its group, and the writer takes more.
  auto after = Upload(MakeBatch(5, 5, {5}));
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(StoredSequences(), Range(1, 5));
}

TEST_P(StreamStoreTest, ClosingTheStoreRunsAndAnswersTheUploadsHandedToIt) {
  HandedUploads handed;
  constexpr size_t kUploads = 20;
  for (size_t i = 1; i <= kUploads; ++i) {
    const auto sequence = static_cast<std::int64_t>(i);
    store_->AcceptUploadThen(
        kConnectionId, kTokenHash,
        std::make_shared<UploadBatch>(MakeBatch(sequence, sequence, {sequence})), kT0,
        retention_, UploadAudit(), handed.Done(i));
  }
  store_.reset();
  std::map<size_t, Result<UploadOutcome>> outcomes = handed.WaitFor(0);
  ASSERT_EQ(outcomes.size(), kUploads);
  for (const auto& [index, outcome] : outcomes) {
    EXPECT_TRUE(outcome.ok()) << index << ": " << outcome.status().ToString();
  }
  auto reopened = database_->OpenStore();
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  store_ = std::move(reopened).value();
  EXPECT_EQ(StoredSequences(), Range(1, kUploads));
}

INSTANTIATE_TEST_SUITE_P(Engines, StreamStoreTest, testing::kStoreEngines,
                         testing::StoreEngineName);

}  // namespace
}  // namespace uplink::console
