// The store's side of node samples, on a real database of each engine: samples stored exactly
// once as series (not as records), in collection order whatever the arrival order, the latest
// two per node, rollups made and made again after a late sample, retention, the series cap,
// plans, and what one sample costs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commit_held_database.h"
#include "console/api/node_sample_figures.h"
#include "console/store/sql_store.h"
#include "node_sample_util.h"
#include "protocol/node_sample.h"
#include "store_database.h"
#include "test_util.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::CommitHeldDatabase;
using testing::SampleJson;
using testing::SampleSpec;
using testing::StoreEngine;

const WallTime kT0 = FromUnixSeconds(1'800'000'000);  // a multiple of 300
const std::string kTokenHash(64, 'a');
const std::string kConnectionId = "00000000000000c1";
const std::string kStream = "node/gpu-node-0001";
const std::string kSpool = "9f2c4e0a5b7d41c3a8e6f0b1c2d3e4f5";
constexpr SampleMetric kCpu[] = {SampleMetric::kCpuSeconds};
constexpr SampleMetric kGpuUtilization[] = {SampleMetric::kGpuUtilizationPercent};

AuditEvent Audit(const std::string& action) {
  AuditEvent event;
  event.at = kT0;
  event.actor_type = "user";
  event.actor_id = "u1";
  event.action = action;
  event.target_type = "connection";
  event.target_id = kConnectionId;
  event.owner_id = "u1";
  event.outcome = "ok";
  return event;
}

// The sample collected at kT0 + `offset`, with CPU time growing by 10 s a second.
SampleSpec At(seconds offset) {
  SampleSpec spec;
  spec.at = kT0 + offset;
  spec.cpu_user = 1000 + 10.0 * static_cast<double>(offset.count());
  spec.cpu_idle = 5000;
  return spec;
}

// An upload of `samples` as records first..first+n-1 of the node's stream.
UploadBatch SampleBatch(std::int64_t first, const std::vector<SampleSpec>& samples,
                        const std::string& stream = kStream) {
  UploadBatch batch;
  batch.agent_version = "0.1.0";
  batch.stream = stream;
  batch.spool_id = kSpool;
  batch.first_sequence = first;
  batch.last_sequence = first + static_cast<std::int64_t>(samples.size()) - 1;
  if (samples.empty()) batch.last_sequence = first;
  std::int64_t sequence = first;
  for (const SampleSpec& spec : samples) {
    json::object payload = SampleJson(spec);
    auto parsed = protocol::DecodeNodeSample(payload, "payload");
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    UploadRecord record;
    record.sequence = sequence++;
    record.appended_at = spec.at;
    record.payload_offset = batch.payloads.size();
    batch.payloads += ToJson(payload);
    record.payload_size = batch.payloads.size() - record.payload_offset;
    record.node_sample = batch.node_samples.size();
    batch.node_samples.push_back(FiguresOf(*parsed));
    batch.records.push_back(record);
  }
  return batch;
}

std::vector<SampleSpec> Every30s(seconds from, seconds to) {
  std::vector<SampleSpec> samples;
  for (seconds at = from; at < to; at += seconds(30)) samples.push_back(At(at));
  return samples;
}

class NodeStoreTest : public ::testing::TestWithParam<StoreEngine> {
 protected:
  void SetUp() override {
    database_.emplace(GetParam());
    auto opened = database_->OpenStore();
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    User user;
    user.id = "u1";
    user.email = "u1@example.com";
    user.role = Role::kAdmin;
    user.created_at = kT0;
    ASSERT_TRUE(store_->CreateUser(user, Audit("user.create")).ok());
    Connection c;
    c.id = kConnectionId;
    c.owner_id = "u1";
    c.agent_name = "agent";
    c.cluster_name = "cluster";
    c.token_prefix = "agt_00000000";
    c.token_hash = kTokenHash;
    c.created_at = kT0;
    c.expires_at = kT0 + hours(24 * 365);
    ASSERT_TRUE(store_->CreateConnection(c, Audit("connection.create")).ok());
  }

  UploadOutcome Accept(const UploadBatch& batch, WallTime now) {
    AuditEvent audit = Audit("stream.restart");
    auto outcome = store_->AcceptUpload(kConnectionId, kTokenHash, batch, now, retention_, audit);
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return outcome.value_or(UploadOutcome{});
  }

  // An upload that carries nothing, on its own stream: it runs retention.
  UploadOutcome Maintain(WallTime now) {
    UploadBatch batch = SampleBatch(++maintenance_sequence_, {}, "node/maintenance");
    return Accept(batch, now);
  }

  std::vector<RawPoint> CpuPoints(WallTime from, WallTime to) {
    auto series = store_->ReadSamplePoints(kConnectionId, testing::kSampleNode, kCpu, from, to);
    EXPECT_TRUE(series.ok()) << series.status().ToString();
    if (!series.ok() || series->empty()) return {};
    EXPECT_EQ(series->size(), 1u);
    return series->front().points;
  }

  SampleNodeState OnlyNode() {
    auto page = store_->ListSampleNodes(kConnectionId, "", 100);
    EXPECT_TRUE(page.ok() && page->nodes.size() == 1u && !page->more);
    return page.ok() && !page->nodes.empty() ? page->nodes.front() : SampleNodeState{};
  }

  std::int64_t Count(const std::string& sql) { return database_->Count(sql); }

  // The id of GPU `label`'s utilization series, or -1 when the node has none.
  std::int64_t GpuSeriesId(const std::string& label) {
    return Count("SELECT id FROM sample_series WHERE metric = 'gpu_utilization_percent' AND "
                 "label = '" + label + "'");
  }

  std::vector<RawPoint> GpuPoints(const std::string& label, WallTime from, WallTime to,
                                  SqlStore* store = nullptr) {
    if (store == nullptr) store = store_.get();
    auto series =
        store->ReadSamplePoints(kConnectionId, testing::kSampleNode, kGpuUtilization, from, to);
    EXPECT_TRUE(series.ok()) << series.status().ToString();
    if (!series.ok()) return {};
    for (const SeriesPoints& gpu : *series) {
      if (gpu.label == label) return gpu.points;
    }
    return {};
  }

  // From the fixture's first 30 minutes on (two GPUs), the node reports GPU 0 alone for four
  // hours, through `store`: retention (max_age 3 h) forgets GPU 1's series. The next
  // sequence is `sequence`.
  void ReportOneGpuForFourHours(SqlStore& store, std::int64_t& sequence) {
    for (hours hour{0}; hour < hours(4); ++hour) {
      std::vector<SampleSpec> samples =
          Every30s(minutes(30) + hour, minutes(30) + hour + hours(1));
      for (SampleSpec& spec : samples) spec.gpus = 1;
      auto outcome = store.AcceptUpload(kConnectionId, kTokenHash, SampleBatch(sequence, samples),
                                        samples.back().at + minutes(3), retention_,
                                        Audit("stream.restart"));
      ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
      sequence += static_cast<std::int64_t>(samples.size());
    }
  }

  // SQL that makes every write transaction that inserts a series fail when it commits (a
  // deferred check), and the SQL that undoes it.
  std::pair<std::string, std::string> FailCommitsThatAddSeries() const {
    if (GetParam() == StoreEngine::kSqlite) {
      return {"CREATE TABLE commit_guard_parent (id INTEGER PRIMARY KEY);"
              "CREATE TABLE commit_guard (parent INTEGER REFERENCES commit_guard_parent(id) "
              "DEFERRABLE INITIALLY DEFERRED);"
              "CREATE TRIGGER fail_commit AFTER INSERT ON sample_series "
              "BEGIN INSERT INTO commit_guard VALUES (-1); END;",
              "DROP TRIGGER fail_commit"};
    }
    return {"CREATE FUNCTION fail_commit() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused at commit by the test'; END $$;"
            "CREATE CONSTRAINT TRIGGER fail_commit AFTER INSERT ON sample_series "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_commit();",
            "DROP TRIGGER fail_commit ON sample_series"};
  }

  // SQL that makes every update of a stream fail (the last statement of an upload's body,
  // after its samples' series were inserted), and the SQL that undoes it.
  std::pair<std::string, std::string> FailStreamUpdates() const {
    if (GetParam() == StoreEngine::kSqlite) {
      return {"CREATE TRIGGER fail_stream_update BEFORE UPDATE ON streams "
              "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
              "DROP TRIGGER fail_stream_update"};
    }
    return {"CREATE FUNCTION fail_stream_update() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;"
            "CREATE TRIGGER fail_stream_update BEFORE UPDATE ON streams "
            "FOR EACH ROW EXECUTE FUNCTION fail_stream_update();",
            "DROP TRIGGER fail_stream_update ON streams"};
  }

  // An upload whose transaction `failure` makes fail after it inserted GPU 1's series: nothing
  // of it stays, and the same upload once `failure` is undone stores GPU 1 and reads back as
  // sent, whatever the store kept in memory from the failed one.
  void FailedSeriesLeaveNothing(const std::pair<std::string, std::string>& failure) {
    SampleSpec one_gpu = At(seconds(0));
    one_gpu.gpus = 1;
    EXPECT_EQ(Accept(SampleBatch(1, {one_gpu}), kT0 + minutes(1)).samples_stored, 1);
    SampleSpec two_gpus = At(seconds(30));
    two_gpus.gpu_utilization = 55;
    UploadBatch batch = SampleBatch(2, {two_gpus});

    database_->Exec(failure.first);
    auto refused = store_->AcceptUpload(kConnectionId, kTokenHash, batch, kT0 + minutes(1),
                                        retention_, Audit("stream.restart"));
    EXPECT_FALSE(refused.ok());
    EXPECT_EQ(GpuSeriesId("1"), -1);
    database_->Exec(failure.second);

    EXPECT_EQ(Accept(batch, kT0 + minutes(1)).samples_stored, 1);
    EXPECT_GT(GpuSeriesId("1"), 0);
    std::vector<RawPoint> gpu1 = GpuPoints("1", kT0, kT0 + hours(1));
    ASSERT_EQ(gpu1.size(), 1u);
    EXPECT_EQ(gpu1[0].at_ms, ToUnixSeconds(two_gpus.at) * 1000);
    EXPECT_EQ(gpu1[0].value, 55);
    EXPECT_EQ(GpuPoints("0", kT0, kT0 + hours(1)).size(), 2u);
  }

  std::optional<testing::TestDatabase> database_;
  std::unique_ptr<SqlStore> store_;
  RecordRetention retention_;
  std::int64_t maintenance_sequence_ = 0;
};

TEST_P(NodeStoreTest, SamplesAreKeptAsSeriesAndTheLatestPayloadNotAsRecords) {
  UploadOutcome outcome =
      Accept(SampleBatch(1, Every30s(seconds(0), seconds(90))), kT0 + minutes(2));
  EXPECT_EQ(outcome.stored, 3);
  EXPECT_EQ(outcome.samples_stored, 3);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM stream_records"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM samples"), 3);

  RecordQuery query;
  query.connection_id = kConnectionId;
  query.stream = kStream;
  auto page = store_->ListStreamRecords(query);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->records.empty());
  auto streams = store_->ListStreams(kConnectionId);
  ASSERT_TRUE(streams.ok() && streams->size() == 1u);
  EXPECT_EQ(streams->front().records_stored, 3);

  std::vector<RawPoint> points = CpuPoints(kT0, kT0 + hours(1));
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[2].at_ms, ToUnixSeconds(kT0 + seconds(60)) * 1000);
  EXPECT_EQ(points[2].value, 1600 + 5000);
  EXPECT_EQ(points[2].boot_time, testing::kSampleBootTime);

  SampleNodeState node = OnlyNode();
  EXPECT_EQ(node.node, testing::kSampleNode);
  EXPECT_EQ(node.latest_at, kT0 + seconds(60));
  EXPECT_EQ(node.latest_payload, ToJson(SampleJson(At(seconds(60)))));
  ASSERT_TRUE(node.previous_at.has_value());
  EXPECT_EQ(*node.previous_at, kT0 + seconds(30));
  bool found = false;
  for (const SampleValue& value : node.previous_values) {
    if (value.metric == SampleMetric::kCpuSeconds) found = value.value == 1300 + 5000;
  }
  EXPECT_TRUE(found);

  auto gpus = store_->ReadSamplePoints(kConnectionId, testing::kSampleNode, kGpuUtilization, kT0,
                                       kT0 + hours(1));
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[1].label, "1");
  EXPECT_EQ((*gpus)[1].points.size(), 3u);
}

TEST_P(NodeStoreTest, SamplesOfTwoNodesInOneUploadEachMoveTheirOwnNode) {
  // The first sample's node is read with the upload's token, the other on its own: both
  // must come out the same, for a new node and for one already known.
  auto of = [](const char* node, seconds offset) {
    SampleSpec spec = At(offset);
    spec.node = node;
    return spec;
  };
  EXPECT_EQ(Accept(SampleBatch(1, {of("node-b", seconds(0)), of("node-a", seconds(0)),
                                   of("node-a", seconds(30))}),
                   kT0 + minutes(1))
                .samples_stored,
            3);
  EXPECT_EQ(Accept(SampleBatch(4, {of("node-b", seconds(60)), of("node-a", seconds(60))}),
                   kT0 + minutes(2))
                .samples_stored,
            2);
  auto page = store_->ListSampleNodes(kConnectionId, "", 100);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->nodes.size(), 2u);
  for (const SampleNodeState& node : page->nodes) {
    EXPECT_EQ(node.latest_at, kT0 + seconds(60)) << node.node;
    ASSERT_TRUE(node.previous_at.has_value()) << node.node;
    EXPECT_EQ(*node.previous_at, node.node == "node-a" ? kT0 + seconds(30) : kT0) << node.node;
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM samples"), 5);
}

TEST_P(NodeStoreTest, ABatchSentAgainAddsNoSample) {
  UploadBatch batch = SampleBatch(1, Every30s(seconds(0), seconds(120)));
  Accept(batch, kT0 + minutes(3));
  UploadOutcome again = Accept(batch, kT0 + minutes(4));
  EXPECT_EQ(again.duplicates, 4);
  EXPECT_EQ(again.samples_stored, 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM samples"), 4);
  EXPECT_EQ(CpuPoints(kT0, kT0 + hours(1)).size(), 4u);
  // Half of it again with one new record: only the new one is stored.
  UploadBatch overlap = SampleBatch(3, Every30s(seconds(60), seconds(150)));
  UploadOutcome mixed = Accept(overlap, kT0 + minutes(5));
  EXPECT_EQ(mixed.duplicates, 2);
  EXPECT_EQ(mixed.samples_stored, 1);
  EXPECT_EQ(CpuPoints(kT0, kT0 + hours(1)).size(), 5u);
}

TEST_P(NodeStoreTest, SamplesArriveInAnyOrderAndAreReadInCollectionOrder) {
  // Spooled while the console was down, shipped out of wall-clock order.
  Accept(SampleBatch(1, {At(seconds(90)), At(seconds(0)), At(seconds(60))}), kT0 + minutes(3));
  Accept(SampleBatch(4, {At(seconds(30))}), kT0 + minutes(3));
  std::vector<RawPoint> points = CpuPoints(kT0, kT0 + hours(1));
  ASSERT_EQ(points.size(), 4u);
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(points[i].at_ms, (ToUnixSeconds(kT0) + 30 * static_cast<std::int64_t>(i)) * 1000);
  }
  SampleNodeState node = OnlyNode();
  EXPECT_EQ(node.latest_at, kT0 + seconds(90));
  EXPECT_EQ(*node.previous_at, kT0 + seconds(60));
  // A late sample between the latest two becomes the previous one.
  Accept(SampleBatch(5, {At(seconds(75))}), kT0 + minutes(3));
  node = OnlyNode();
  EXPECT_EQ(node.latest_at, kT0 + seconds(90));
  EXPECT_EQ(*node.previous_at, kT0 + seconds(75));
  EXPECT_EQ(node.latest_payload, ToJson(SampleJson(At(seconds(90)))));
}

TEST_P(NodeStoreTest, SamplesOutsideTheKeptRangeOrAtATakenTimeAreAcknowledgedNotStored) {
  WallTime now = kT0 + hours(49);
  UploadOutcome outcome =
      Accept(SampleBatch(1, {At(seconds(0)), At(hours(49) + minutes(6)),
                             At(hours(48) + seconds(30))}),
             now);
  EXPECT_EQ(outcome.stored, 3);
  EXPECT_EQ(outcome.samples_too_old, 1);
  EXPECT_EQ(outcome.samples_in_future, 1);
  EXPECT_EQ(outcome.samples_stored, 1);
  SampleSpec twin = At(hours(48) + seconds(30));
  twin.cpu_user = 1;
  outcome = Accept(SampleBatch(4, {twin}), now);
  EXPECT_EQ(outcome.samples_same_time, 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM samples"), 1);
  EXPECT_EQ(CpuPoints(kT0, now).front().value, At(hours(48) + seconds(30)).cpu_user + 5000);
}

TEST_P(NodeStoreTest, RollupsAreMadeForCompleteBucketsAndAgreeWithTheRawPoints) {
  // Two hours with a reboot in the middle (CPU time starts again from zero, and was 300 s by
  // the first sample after it) and a 10-minute outage.
  std::vector<SampleSpec> samples = Every30s(seconds(0), hours(2));
  for (SampleSpec& spec : samples) {
    if (spec.at >= kT0 + hours(1)) {
      spec.boot_time += 3600;
      spec.cpu_idle = 0;
      spec.cpu_user = 300 + 10.0 * static_cast<double>(ToUnixSeconds(spec.at) -
                                                       ToUnixSeconds(kT0 + hours(1)));
    }
  }
  std::erase_if(samples, [](const SampleSpec& spec) {
    return spec.at > kT0 + minutes(80) && spec.at < kT0 + minutes(90);
  });
  WallTime now = kT0 + hours(2) + minutes(3);
  UploadOutcome outcome = Accept(SampleBatch(1, samples), now);
  EXPECT_EQ(outcome.samples_stored, static_cast<std::int64_t>(samples.size()));
  // Every complete bucket but the one inside the outage, which has nothing.
  EXPECT_EQ(outcome.rollups_written, 24 - 1);

  auto rollups = store_->ReadSampleRollups(kConnectionId, testing::kSampleNode, kCpu, kT0,
                                           kT0 + hours(3));
  ASSERT_TRUE(rollups.ok()) << rollups.status().ToString();
  EXPECT_EQ(rollups->rolled_through, ToUnixSeconds(kT0 + hours(2)));
  ASSERT_EQ(rollups->series.size(), 1u);
  auto raw_points = CpuPoints(kT0 - hours(1), kT0 + hours(3));
  auto raw = AggregateBuckets(MetricKind::kCounter, raw_points, kRollupSeconds,
                              ToUnixSeconds(kT0), kMaxGapIntervals * 30'000);
  std::int64_t compared = 0;
  for (const auto& [bucket, aggregate] : rollups->series.front().buckets) {
    ASSERT_TRUE(raw.contains(bucket)) << bucket;
    EXPECT_EQ(aggregate, raw.at(bucket)) << bucket;
    EXPECT_EQ(Rate(aggregate), 10) << bucket;
    ++compared;
  }
  // The buckets around the outage and the reboot rate right from the pairs they have.
  EXPECT_EQ(compared, 24 - 1);
}

TEST_P(NodeStoreTest, ALateSampleMakesItsBucketsRollupsAgain) {
  std::vector<SampleSpec> samples = Every30s(seconds(0), minutes(30));
  SampleSpec missing = samples[3];
  samples.erase(samples.begin() + 3);
  Accept(SampleBatch(1, samples), kT0 + minutes(33));
  auto before = store_->ReadSampleRollups(kConnectionId, testing::kSampleNode, kCpu, kT0,
                                          kT0 + hours(1));
  ASSERT_TRUE(before.ok());
  ASSERT_FALSE(before->series.front().buckets.empty());
  EXPECT_EQ(before->series.front().buckets.front().second.pairs, 8);

  // The missing sample arrives much later; the next run (a minute on) reworks its bucket.
  Accept(SampleBatch(100, {missing}), kT0 + minutes(40));
  auto rewound = store_->ReadSampleRollups(kConnectionId, testing::kSampleNode, kCpu, kT0,
                                           kT0 + hours(1));
  ASSERT_TRUE(rewound.ok());
  EXPECT_EQ(rewound->rolled_through, ToUnixSeconds(kT0 + minutes(35)));
  auto after = rewound->series.front().buckets.front().second;
  EXPECT_EQ(after.pairs, 9);
  EXPECT_EQ(Rate(after), 10);
}

TEST_P(NodeStoreTest, RawSamplesGoAfterTheirRetentionRollupsAfterTheirsThenTheNode) {
  retention_.samples.raw_max_age = hours(1);
  retention_.samples.max_age = hours(3);
  Accept(SampleBatch(1, Every30s(seconds(0), minutes(30))), kT0 + minutes(33));
  std::int64_t rollups = Count("SELECT COUNT(*) FROM sample_rollups");
  EXPECT_EQ(rollups, 6);

  UploadOutcome pruned = Maintain(kT0 + minutes(95));
  EXPECT_EQ(pruned.samples_pruned, 60);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM samples"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sample_rollups"), rollups);
  EXPECT_TRUE(CpuPoints(kT0, kT0 + hours(1)).empty());
  auto kept = store_->ReadSampleRollups(kConnectionId, testing::kSampleNode, kCpu, kT0,
                                        kT0 + hours(1));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->series.front().buckets.size(), 6u);
  // Without its previous sample the node still lists, without one.
  EXPECT_FALSE(OnlyNode().previous_at.has_value());

  UploadOutcome later = Maintain(kT0 + hours(3) + minutes(31));
  EXPECT_EQ(later.rollups_pruned, rollups);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sample_nodes WHERE node = 'gpu-node-0001'"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sample_series s JOIN sample_nodes n "
                            "ON n.id = s.node_id WHERE n.node = 'gpu-node-0001'"),
            0);
  EXPECT_TRUE(store_->ListSampleNodes(kConnectionId, "", 10)->nodes.empty());
}

TEST_P(NodeStoreTest, RetentionRunsAtMostOnceAMinuteAndIsBounded) {
  retention_.samples.raw_max_age = hours(1);
  retention_.samples.max_rows_per_run = 25;
  retention_.samples.max_rollup_buckets_per_run = 2;
  // The upload itself runs retention first: two of the six complete buckets.
  EXPECT_EQ(Accept(SampleBatch(1, Every30s(seconds(0), minutes(30))), kT0 + minutes(33))
                .rollups_written,
            2);
  EXPECT_EQ(Maintain(kT0 + minutes(33) + seconds(59)).rollups_written, 0);
  EXPECT_EQ(Maintain(kT0 + minutes(34)).rollups_written, 2);
  EXPECT_EQ(Maintain(kT0 + minutes(35)).rollups_written, 2);
  EXPECT_EQ(Maintain(kT0 + minutes(36)).rollups_written, 0);
  UploadOutcome prune = Maintain(kT0 + minutes(100));
  EXPECT_EQ(prune.samples_pruned, 25);
  EXPECT_EQ(Maintain(kT0 + minutes(101)).samples_pruned, 25);
  EXPECT_EQ(Maintain(kT0 + minutes(102)).samples_pruned, 10);
}

TEST_P(NodeStoreTest, ANodeKeepsAtMostItsSeriesCapAndCountsWhatItDrops) {
  auto many_filesystems = [](const std::string& prefix, WallTime at) {
    SampleSpec spec;
    spec.at = at;
    json::object payload = SampleJson(spec);
    json::array filesystems;
    for (int i = 0; i < 1024; ++i) {
      filesystems.push_back(json::object{{"mountpoint", prefix + std::to_string(i)},
                                         {"size_bytes", 10},
                                         {"avail_bytes", 5}});
    }
    payload["filesystems"] = std::move(filesystems);
    return payload;
  };
  UploadBatch batch;
  batch.agent_version = "0.1.0";
  batch.stream = kStream;
  batch.spool_id = kSpool;
  batch.first_sequence = 1;
  batch.last_sequence = 2;
  for (int i = 0; i < 2; ++i) {
    json::object payload = many_filesystems(i == 0 ? "/a" : "/b", kT0 + seconds(30 * i));
    UploadRecord record;
    record.sequence = i + 1;
    record.appended_at = kT0;
    record.payload_offset = batch.payloads.size();
    batch.payloads += ToJson(payload);
    record.payload_size = batch.payloads.size() - record.payload_offset;
    record.node_sample = batch.node_samples.size();
    batch.node_samples.push_back(FiguresOf(*protocol::DecodeNodeSample(payload, "payload")));
    batch.records.push_back(record);
  }
  UploadOutcome outcome = Accept(batch, kT0 + minutes(1));
  std::int64_t per_sample = static_cast<std::int64_t>(batch.node_samples[0].values.size());
  EXPECT_EQ(outcome.samples_stored, 2);
  // The second sample's 2,048 new series fit only up to the cap; its other values are
  // series the first one made.
  EXPECT_EQ(outcome.sample_values_dropped,
            2 * per_sample - kMaxSeriesPerNode - (per_sample - 2048));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sample_series"), kMaxSeriesPerNode);
}

// The store keeps each node's series ids between uploads (series_id_cache.h); these check
// that what it keeps never outlives the rows.
TEST_P(NodeStoreTest, ASeriesForgottenByRetentionAndSeenAgainGetsANewIdAndReadsBackRight) {
  retention_.samples.raw_max_age = hours(1);
  retention_.samples.max_age = hours(3);
  std::vector<SampleSpec> first = Every30s(seconds(0), minutes(30));
  Accept(SampleBatch(1, first), kT0 + minutes(33));
  const std::int64_t forgotten = GpuSeriesId("1");
  ASSERT_GT(forgotten, 0);
  std::int64_t sequence = static_cast<std::int64_t>(first.size()) + 1;
  ReportOneGpuForFourHours(*store_, sequence);
  ASSERT_EQ(GpuSeriesId("1"), -1);
  ASSERT_GT(GpuSeriesId("0"), 0);

  SampleSpec back = At(hours(4) + minutes(31));
  back.gpu_utilization = 42;
  EXPECT_EQ(Accept(SampleBatch(sequence, {back}), back.at + seconds(1)).samples_stored, 1);
  EXPECT_GT(GpuSeriesId("1"), forgotten);
  std::vector<RawPoint> gpu1 = GpuPoints("1", back.at - hours(1), back.at + seconds(1));
  ASSERT_EQ(gpu1.size(), 1u);
  EXPECT_EQ(gpu1[0].at_ms, ToUnixSeconds(back.at) * 1000);
  EXPECT_EQ(gpu1[0].value, 42);
}

TEST_P(NodeStoreTest, ANodeBackAfterASilenceLongerThanTheRetentionKeepsWhatItBrings) {
  // Its series were last seen by the rollup of its last bucket, 4 hours ago; the retention
  // pass this upload runs must not delete them under the sample it has just stored.
  retention_.samples.raw_max_age = hours(1);
  retention_.samples.max_age = hours(3);
  SampleSpec before = At(seconds(0));
  Accept(SampleBatch(1, {before}), before.at + seconds(1));
  SampleSpec back = At(hours(4));
  back.gpu_utilization = 42;
  UploadOutcome outcome = Accept(SampleBatch(2, {back}), back.at + seconds(1));
  EXPECT_EQ(outcome.samples_stored, 1);
  std::vector<RawPoint> gpu = GpuPoints("0", back.at - minutes(1), back.at + seconds(1));
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0].value, 42);
  EXPECT_EQ(CpuPoints(back.at - minutes(1), back.at + seconds(1)).size(), 1u);
}

TEST_P(NodeStoreTest, AnUploadRolledBackAfterCreatingSeriesLeavesNoIdBehind) {
  FailedSeriesLeaveNothing(FailStreamUpdates());
}

TEST_P(NodeStoreTest, ACommitThatFailsAfterCreatingSeriesLeavesNoIdBehind) {
  FailedSeriesLeaveNothing(FailCommitsThatAddSeries());
}

// Two stores on one database, as two replicas on PostgreSQL (or a restart beside a store
// still open): series one adds or forgets are seen by the other.
TEST_P(NodeStoreTest, SeriesAnotherStoreAddsOrForgetsAreSeen) {
  retention_.samples.raw_max_age = hours(1);
  retention_.samples.max_age = hours(3);
  auto other = database_->OpenStore();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto upload = [&](SqlStore& store, std::int64_t sequence, SampleSpec spec) {
    auto outcome = store.AcceptUpload(kConnectionId, kTokenHash, SampleBatch(sequence, {spec}),
                                      spec.at + seconds(1), retention_, Audit("stream.restart"));
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    return outcome.ok() ? outcome->samples_stored : 0;
  };
  SampleSpec one_gpu = At(seconds(0));
  one_gpu.gpus = 1;
  EXPECT_EQ(upload(*store_, 1, one_gpu), 1);
  EXPECT_EQ(upload(**other, 2, At(seconds(30))), 1);  // adds GPU 1
  SampleSpec both = At(seconds(60));
  both.gpu_utilization = 33;
  EXPECT_EQ(upload(*store_, 3, both), 1);
  std::vector<RawPoint> gpu1 = GpuPoints("1", kT0, kT0 + hours(1));
  ASSERT_EQ(gpu1.size(), 2u);
  EXPECT_EQ(gpu1[1].value, 33);

  // The other store's retention forgets GPU 1; this one still knew its id.
  std::vector<SampleSpec> rest = Every30s(seconds(90), minutes(30));
  Accept(SampleBatch(4, rest), kT0 + minutes(33));
  std::int64_t sequence = 4 + static_cast<std::int64_t>(rest.size());
  const std::int64_t forgotten = GpuSeriesId("1");
  ReportOneGpuForFourHours(**other, sequence);
  ASSERT_EQ(GpuSeriesId("1"), -1);
  SampleSpec back = At(hours(4) + minutes(31));
  back.gpu_utilization = 42;
  EXPECT_EQ(upload(*store_, sequence, back), 1);
  EXPECT_GT(GpuSeriesId("1"), forgotten);
  gpu1 = GpuPoints("1", back.at - hours(1), back.at + seconds(1), other->get());
  ASSERT_EQ(gpu1.size(), 1u);
  EXPECT_EQ(gpu1[0].value, 42);
}

// A page's read of series or of the node list runs beside the writer: it neither waits for a
// group's COMMIT (an fsync, a round trip) nor holds uploads back for its own length, and
// answers from committed samples only, in one snapshot.
TEST_P(NodeStoreTest, ReadingSamplesDoesNotWaitForTheWriterAndSeesCommittedSamplesOnly) {
  Accept(SampleBatch(1, Every30s(seconds(0), seconds(90))), kT0 + minutes(2));
  CommitHeldDatabase* held = nullptr;
  store_.reset();
  auto opened = testing::OpenStoreWithHeldCommits(*database_, held);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  store_ = std::move(opened).value();

  std::promise<void> reached;
  std::promise<void> release;
  held->HoldNextCommit(&reached, release.get_future().share());
  auto upload = std::async(std::launch::async, [&] {
    return store_->AcceptUpload(kConnectionId, kTokenHash, SampleBatch(4, {At(seconds(90))}),
                                kT0 + minutes(2), retention_, Audit("stream.restart"));
  });
  if (reached.get_future().wait_for(seconds(60)) != std::future_status::ready) {
    release.set_value();
    FAIL() << "the upload never reached its COMMIT";
  }
  auto reads = std::async(std::launch::async, [&] {
    return std::make_pair(CpuPoints(kT0, kT0 + hours(1)), OnlyNode());
  });
  // Not a timing bound: a read that waited for the writer would wait here for good.
  const bool answered = reads.wait_for(seconds(60)) == std::future_status::ready;
  release.set_value();
  EXPECT_TRUE(answered) << "reading samples waited for the write group's COMMIT";
  auto [points, node] = reads.get();
  EXPECT_EQ(points.size(), 3u);
  EXPECT_EQ(node.latest_at, kT0 + seconds(60));
  ASSERT_TRUE(upload.get().ok());
  EXPECT_EQ(CpuPoints(kT0, kT0 + hours(1)).size(), 4u);
  EXPECT_EQ(OnlyNode().latest_at, kT0 + seconds(90));
}

TEST_P(NodeStoreTest, SeriesOfMetricsANewerConsoleStoredTakePlacesUnderTheCapAndAreLeftAlone) {
  EXPECT_EQ(Accept(SampleBatch(1, {At(seconds(0))}), kT0 + minutes(1)).samples_stored, 1);
  const std::int64_t known = Count("SELECT COUNT(*) FROM sample_series");
  const std::int64_t newer = kMaxSeriesPerNode - known - 1;
  // Written as a newer console would: its series, and the node's series_version moved.
  std::string sql = "INSERT INTO sample_series (node_id, metric, label, last_seen) VALUES ";
  const std::string node_id = std::to_string(Count("SELECT id FROM sample_nodes"));
  for (std::int64_t i = 0; i < newer; ++i) {
    if (i > 0) sql += ", ";
    sql += "(" + node_id + ", 'a_newer_metric', '" + std::to_string(i) + "', " +
           std::to_string(ToUnixSeconds(kT0)) + ")";
  }
  database_->Exec(sql + "; UPDATE sample_nodes SET series_version = series_version + 1");

  // A third GPU: five new series, and one place left.
  SampleSpec three_gpus = At(seconds(30));
  three_gpus.gpus = 3;
  UploadOutcome outcome = Accept(SampleBatch(2, {three_gpus}), kT0 + minutes(1));
  EXPECT_EQ(outcome.samples_stored, 1);
  EXPECT_EQ(outcome.sample_values_dropped, 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sample_series"), kMaxSeriesPerNode);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sample_series WHERE metric = 'a_newer_metric'"), newer);
  auto read = store_->ReadSamplePoints(kConnectionId, testing::kSampleNode, kAllSampleMetrics,
                                       kT0, kT0 + hours(1));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(static_cast<std::int64_t>(read->size()), known + 1);
}

TEST_P(NodeStoreTest, PlansDefaultToEveryCollectorEvery30sAndAreSetWithTheirAuditEvent) {
  auto plan = store_->GetNodePlan(kConnectionId);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->interval_seconds, 30);
  EXPECT_EQ(plan->collectors.size(), std::size(kNodeCollectors));
  EXPECT_FALSE(plan->updated_at);

  NodePlan set;
  set.interval_seconds = 60;
  set.collectors = {"cpu", "gpu"};
  AuditEvent audit = Audit("connection.node_plan");
  audit.at = kT0 + hours(1);
  ASSERT_TRUE(store_->SetNodePlan(kConnectionId, set, audit).ok());
  plan = store_->GetNodePlan(kConnectionId);
  EXPECT_EQ(plan->interval_seconds, 60);
  EXPECT_EQ(plan->collectors, (std::vector<std::string>{"cpu", "gpu"}));
  EXPECT_EQ(plan->updated_at, kT0 + hours(1));
  set.collectors.clear();
  ASSERT_TRUE(store_->SetNodePlan(kConnectionId, set, audit).ok());
  EXPECT_TRUE(store_->GetNodePlan(kConnectionId)->collectors.empty());
  EXPECT_EQ(
      Count("SELECT COUNT(*) FROM audit_events WHERE action = 'connection.node_plan'"),
      2);
  EXPECT_EQ(store_->SetNodePlan("00000000000000ff", set, audit).code(), StatusCode::kNotFound);
}

// The upload's reply carries both plans as its transaction read them, with no query after.
TEST_P(NodeStoreTest, AnUploadReadsTheConnectionsPlansForItsReply) {
  UploadOutcome outcome = Accept(SampleBatch(1, {{"gpu-node-1", kT0}}), kT0 + seconds(1));
  EXPECT_EQ(outcome.node_plan.interval_seconds, 30);
  EXPECT_EQ(outcome.node_plan.collectors.size(), std::size(kNodeCollectors));
  EXPECT_FALSE(outcome.node_plan.updated_at);
  EXPECT_FALSE(outcome.namespace_scope);

  NodePlan set;
  set.interval_seconds = 60;
  set.collectors = {"gpu"};
  AuditEvent audit = Audit("connection.node_plan");
  audit.at = kT0 + minutes(1);
  ASSERT_TRUE(store_->SetNodePlan(kConnectionId, set, audit).ok());
  ASSERT_TRUE(store_->SetNamespaceScope(kConnectionId, {"ml", "team-a"},
                                        Audit("connection.namespace_scope"))
                  .ok());
  outcome = Accept(SampleBatch(2, {{"gpu-node-1", kT0 + seconds(30)}}), kT0 + minutes(2));
  EXPECT_EQ(outcome.node_plan.interval_seconds, 60);
  EXPECT_EQ(outcome.node_plan.collectors, (std::vector<std::string>{"gpu"}));
  EXPECT_EQ(outcome.node_plan.updated_at, kT0 + minutes(1));
  EXPECT_EQ(outcome.namespace_scope, (std::vector<std::string>{"ml", "team-a"}));

  // A batch that stores nothing new still reads them.
  ASSERT_TRUE(store_->SetNamespaceScope(kConnectionId, {}, Audit("connection.namespace_scope"))
                  .ok());
  outcome = Accept(SampleBatch(2, {{"gpu-node-1", kT0 + seconds(30)}}), kT0 + minutes(3));
  EXPECT_EQ(outcome.stored, 0);
  EXPECT_EQ(outcome.namespace_scope, std::vector<std::string>{});
}

// Across a network every round trip the writer waits for delays every write behind it: a
// node's first upload (its stream, node row and 8-GPU series, whose ids come back) waits for a
// fixed few, however many series it creates, and the next ones for fewer.
TEST_P(NodeStoreTest, AnUploadWaitsForAFewRoundTripsHoweverManySeriesItCreates) {
  auto eight_gpus = [](const std::string& node, WallTime at) {
    SampleSpec spec;
    spec.node = node;
    spec.at = at;
    spec.gpus = 8;
    return spec;
  };
  // Another node first: each statement is prepared once per connection, a round trip of its
  // own that later uploads do not pay.
  Accept(SampleBatch(1, {eight_gpus("gpu-node-1", kT0)}, "node/gpu-node-1"), kT0);
  Accept(SampleBatch(2, {eight_gpus("gpu-node-1", kT0 + seconds(30))}, "node/gpu-node-1"),
         kT0 + seconds(30));
  if (GetParam() == StoreEngine::kSqlite) {
    EXPECT_EQ(testing::WriterRoundTrips(*store_), -1);  // no server, no round trips
    return;
  }
  std::int64_t before = testing::WriterRoundTrips(*store_);
  UploadOutcome first =
      Accept(SampleBatch(1, {eight_gpus("gpu-node-2", kT0)}, "node/gpu-node-2"), kT0);
  const std::int64_t first_contact = testing::WriterRoundTrips(*store_) - before;
  EXPECT_EQ(first.samples_stored, 1);
  EXPECT_GT(Count("SELECT COUNT(*) FROM sample_series s JOIN sample_nodes n ON n.id = "
                  "s.node_id WHERE n.node = 'gpu-node-2'"),
            40);
  // BEGIN; token and stream; the new stream; the node row; the series, then their ids; the
  // sample, the node's and stream's updates and COMMIT.
  EXPECT_LE(first_contact, 6);

  before = testing::WriterRoundTrips(*store_);
  UploadOutcome next = Accept(
      SampleBatch(2, {eight_gpus("gpu-node-2", kT0 + seconds(30))}, "node/gpu-node-2"),
      kT0 + seconds(30));
  EXPECT_EQ(next.samples_stored, 1);
  // BEGIN; token, stream and node row; the rest with COMMIT.
  EXPECT_LE(testing::WriterRoundTrips(*store_) - before, 3);
  // And the ids read back after the inserts are each series' own.
  auto gpus = store_->ReadSamplePoints(kConnectionId, "gpu-node-2", kGpuUtilization, kT0,
                                       kT0 + minutes(1));
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 8u);
  for (const SeriesPoints& gpu : *gpus) EXPECT_EQ(gpu.points.size(), 2u) << gpu.label;
}

TEST_P(NodeStoreTest, AnUnknownNodeIsNotFound) {
  EXPECT_EQ(
      store_->ReadSamplePoints(kConnectionId, "nope", kCpu, kT0, kT0 + hours(1)).status().code(),
      StatusCode::kNotFound);
  EXPECT_EQ(
      store_->ReadSampleRollups(kConnectionId, "nope", kCpu, kT0, kT0 + hours(1)).status().code(),
      StatusCode::kNotFound);
}

// Not a benchmark and no threshold on time: it prints what one sample costs, and bounds the
// bytes, which do not depend on the machine.
TEST_P(NodeStoreTest, OneSampleCostsLittleTimeAndSpace) {
  constexpr int kSamples = 2880;  // a day at 30 s
  constexpr int kPerUpload = 120;
  std::int64_t bytes_before = database_->SizeBytes();
  // An 8-GPU node: 54 figures a sample.
  auto eight_gpus = [](std::vector<SampleSpec> samples) {
    for (SampleSpec& spec : samples) spec.gpus = 8;
    return samples;
  };
  std::vector<UploadBatch> batches;
  for (int i = 0; i < kSamples; i += kPerUpload) {
    batches.push_back(SampleBatch(
        i + 1, eight_gpus(Every30s(seconds(30 * i), seconds(30 * (i + kPerUpload))))));
  }
  // Rollups are made apart, below, so that the insert time is the samples' alone.
  retention_.samples.max_rollup_buckets_per_run = 0;
  auto started = std::chrono::steady_clock::now();
  WallTime now = kT0 + hours(25);
  for (const UploadBatch& batch : batches) {
    ASSERT_EQ(Accept(batch, now).samples_stored, kPerUpload);
  }
  double batched_us = std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - started).count() / kSamples;

  // The agent's steady state: one sample per upload, each its own transaction (synced).
  constexpr int kSingles = 100;
  started = std::chrono::steady_clock::now();
  for (int i = 0; i < kSingles; ++i) {
    ASSERT_EQ(Accept(SampleBatch(kSamples + 1 + i, eight_gpus({At(seconds(30 * (kSamples + i)))})),
                     now)
                  .samples_stored,
              1);
  }
  double single_us = std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - started).count() / kSingles;
  std::int64_t raw_bytes = database_->SizeBytes() - bytes_before;
  double bytes_per_sample = static_cast<double>(raw_bytes) / (kSamples + kSingles);

  // A day of rollups for the node: 288 rows.
  retention_.samples.max_rollup_buckets_per_run = 2'000;
  std::int64_t bytes_raw = database_->SizeBytes();
  UploadOutcome rolled = Maintain(now + hours(1) + minutes(3));
  EXPECT_GE(rolled.rollups_written, 288);
  double rollup_bytes = static_cast<double>(database_->SizeBytes() - bytes_raw) /
                        static_cast<double>(rolled.rollups_written);
  std::printf("node samples: %.0f us per sample in uploads of %d, %.0f us per single-sample "
              "upload (synced); %.0f database bytes per raw sample (%zu figures), %.0f per "
              "5-minute rollup\n",
              batched_us, kPerUpload, single_us, bytes_per_sample,
              batches[0].node_samples[0].values.size(), rollup_bytes);
  RecordProperty("node_sample_insert_us", static_cast<int>(batched_us));
  RecordProperty("node_sample_bytes", static_cast<int>(bytes_per_sample));
  EXPECT_LT(bytes_per_sample, 1024);
  EXPECT_LT(rollup_bytes, 2048);
}

INSTANTIATE_TEST_SUITE_P(Engines, NodeStoreTest, testing::kStoreEngines, testing::StoreEngineName);

}  // namespace
}  // namespace uplink::console
