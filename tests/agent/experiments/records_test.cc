// Redaction, the run and series items, the emitter's packing and the cursor file.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "agent/experiments/cursor.h"
#include "agent/experiments/emitter.h"
#include "agent/experiments/redaction.h"
#include "agent/experiments/run_record.h"
#include "common/json.h"
#include "support/process.h"

namespace uplink::agent::experiments {
namespace {

TEST(Redaction, KeysThatNameSecretsAreRedactedUnlessTheValueCannotBeOne) {
  for (const char* key : {"password", "db_password", "DB_PASSWORD", "HF_TOKEN", "hub_token",
                          "apiKey", "api_key", "openai-api-key", "Authorization",
                          "aws_secret_access_key", "awsAccessKeyId", "client_secret",
                          "wandb.credentials", "private_key", "session_cookie"}) {
    EXPECT_TRUE(MustRedact(key, "s3cr3t-value")) << key;
  }
  // ML params that only look similar, and secret names whose value cannot hold a secret.
  for (const char* key : {"max_tokens", "tokenizer", "tokenizer_name", "num_tokens",
                          "key_frames", "monkey", "secretary_count", "passes"}) {
    EXPECT_FALSE(MustRedact(key, "bert-base-uncased")) << key;
  }
  for (const char* value : {"null", "None", "", "true", "False", "0", "1e-08", "-1"}) {
    EXPECT_FALSE(MustRedact("pad_token_id", value)) << value;
    EXPECT_FALSE(MustRedact("hub_token", value)) << value;
  }
}

TEST(Redaction, ValuesThatLookLikeCredentialsAreRedactedWhateverTheKey) {
  for (const char* value :
       {"sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "hf_abcdefghijklmnopqrstuvwxyz0123456789",
        "ghp_0123456789abcdefghijklmnopqrstuvwxyz", "github_pat_11ABCDEFG0123456789abcdefghijkl",
        "glpat-abcdefghij0123456789", "xoxb-1234567890-abcdefghijklmn", "AKIAIOSFODNN7EXAMPLE",
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        "agt_Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eA",
        "exe_Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eA",  // a workspace execution credential
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        "postgresql://trainer:hunter2@db.internal:5432/runs", "Bearer abcdefghijklmnop",
        "\"Basic dXNlcjpwYXNzd29yZA==\"",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n-----END RSA PRIVATE KEY-----"}) {
    EXPECT_TRUE(MustRedact("endpoint", value)) << value;
  }
  for (const char* value : {"f8db0b09fb5ca2c6ffcb6989e5cb910f7ed6cc83",  // a git commit
                            "https://github.com/BitAPAI/cortex.t", "s3://bucket/path",
                            "postgresql://db.internal:5432/runs", "sk-short", "0.0001",
                            "/home/agilex/models/google/t5-v1_1-xxl", "user@example.com"}) {
    EXPECT_FALSE(MustRedact("endpoint", value)) << value;
  }
}

TEST(RunRecord, NormalizeRedactsBoundsAndSaysWhat) {
  RunRecord run;
  run.source = "mlflow";
  run.run_id = "r1";
  run.status = "running";
  run.params = {{"lr", "0.01"}, {"db_password", "hunter2"}, {std::string(300, 'k'), "x"},
                {"long", std::string(10'000, 'v')}};
  run.tags = {{"mlflow.note", "Bearer abcdefghijklmnopqrstuv"}};
  run.summary = {{"loss", 0.5}, {"api_key", 3.0}};
  NormalizeRun(run);
  json::value item = *ParseJson(RunItem(run));
  EXPECT_EQ(item.at("params").at("lr"), "0.01");
  EXPECT_EQ(item.at("params").at("db_password"), "[redacted]");
  EXPECT_EQ(item.at("params").at("long").as_string().size(), kMaxValueBytes);
  EXPECT_EQ(item.at("tags").at("mlflow.note"), "[redacted]");
  EXPECT_FALSE(item.at("params").as_object().contains(std::string(300, 'k')));
  EXPECT_EQ(item.at("summary").at("loss").to_number<double>(), 0.5);
  EXPECT_FALSE(item.at("summary").as_object().contains("api_key"));
  EXPECT_EQ(json::serialize(item.at("redacted")), R"(["params.db_password","tags.mlflow.note"])");
  EXPECT_EQ(item.at("omitted").to_number<int>(), 2);  // the long key and the secret summary
}

TEST(RunRecord, AHugeRunIsCutToFitOneRecord) {
  RunRecord run;
  run.run_id = "r1";
  for (int i = 0; i < 400; ++i) run.tags.emplace_back("tag" + std::to_string(i), std::string(6000, 'x'));
  NormalizeRun(run);
  EXPECT_LT(RunItem(run).size(), kMaxRunPayloadBytes);
  EXPECT_GT(run.omitted, 0u);
}

TEST(RunRecord, SeriesItemsCarryEveryPointWithinTheBoundAndNonFiniteValuesAsStrings) {
  std::vector<MetricPoint> points;
  for (int i = 0; i < 5000; ++i) points.push_back({i, i * 0.5, 1'700'000'000'000 + i});
  points[10].value = std::numeric_limits<double>::quiet_NaN();
  points[11].value = std::numeric_limits<double>::infinity();
  points[12].value = -std::numeric_limits<double>::infinity();
  std::vector<std::string> items = SeriesItems("run", "loss", points, 8 << 10);
  ASSERT_GT(items.size(), 1u);
  size_t total = 0;
  for (const std::string& item : items) {
    EXPECT_LE(item.size(), 8u << 10);
    json::value parsed = *ParseJson(item);
    EXPECT_EQ(parsed.at("metric"), "loss");
    for (const json::value& point : parsed.at("points").as_array()) {
      std::int64_t step = point.at(0).to_number<std::int64_t>();
      EXPECT_EQ(step, static_cast<std::int64_t>(total));
      if (step == 10) {
        EXPECT_EQ(point.at(1), "NaN");
      }
      if (step == 11) {
        EXPECT_EQ(point.at(1), "Infinity");
      }
      if (step == 12) {
        EXPECT_EQ(point.at(1), "-Infinity");
      }
      if (step == 4999) {
        EXPECT_EQ(point.at(1).to_number<double>(), 2499.5);
      }
      ++total;
    }
  }
  EXPECT_EQ(total, points.size());
}

TEST(Emitter, PacksItemsIntoBoundedRecordsWithEachRunBeforeItsPoints) {
  ListSink sink;
  Emitter emitter(sink, 4096);
  for (int r = 0; r < 20; ++r) {
    RunRecord run;
    run.run_id = "run-" + std::to_string(r);
    run.status = "finished";
    ASSERT_TRUE(emitter.AddRun(run).ok());
    std::vector<MetricPoint> points(50, MetricPoint{1, 2.0, 3});
    ASSERT_TRUE(emitter.AddPoints(run.run_id, "loss", points).ok());
  }
  ASSERT_TRUE(emitter.AddDeleted("gone").ok());
  ASSERT_TRUE(emitter.Flush().ok());
  std::set<std::string> upserted;
  size_t points = 0;
  for (const std::string& record : sink.records) {
    EXPECT_LE(record.size(), 4096u);
    json::value parsed = *ParseJson(record);
    EXPECT_EQ(parsed.at("version").to_number<int>(), 1);
    std::string kind(parsed.at("kind").as_string());
    if (kind == "experiment_run") {
      for (const json::value& run : parsed.at("runs").as_array()) {
        upserted.insert(std::string(run.at("run_id").as_string()));
      }
    } else if (kind == "metric_points") {
      for (const json::value& series : parsed.at("series").as_array()) {
        EXPECT_TRUE(upserted.count(std::string(series.at("run_id").as_string())))
            << "points before their run's upsert";
        points += series.at("points").as_array().size();
      }
    } else {
      EXPECT_EQ(kind, "run_deleted");
    }
  }
  EXPECT_EQ(upserted.size(), 20u);
  EXPECT_EQ(points, 1000u);
  EXPECT_EQ(emitter.counts().records, sink.records.size());
  EXPECT_LT(sink.records.size(), 20u);  // packed, not one per run
}

class FailingSink : public RecordSink {
 public:
  Result<std::uint64_t> Append(std::string_view) override {
    return IOError("no space left on device");
  }
};

TEST(Emitter, ASinkFailureSticks) {
  FailingSink sink;
  Emitter emitter(sink, 4096);
  ASSERT_TRUE(emitter.AddDeleted("a").ok());  // queued only
  EXPECT_FALSE(emitter.Flush().ok());
  EXPECT_FALSE(emitter.status().ok());
  EXPECT_NE(emitter.status().message().find("no space left"), std::string::npos);
  EXPECT_FALSE(emitter.AddDeleted("b").ok() && emitter.Flush().ok());
}

TEST(Cursor, SavesLoadsAndSettlesToOnePositionPerMetric) {
  testing::TempDir dir;
  Cursor cursor;
  cursor.set_spool_id("0123456789abcdef0123456789abcdef");
  RunState& running = cursor.runs()["mlflow-dir:0/a"];
  running.run_id = "a";
  running.sent_fingerprint = 0xffffffffffffffffull;
  running.signature = 42;
  running.last_sequence = 7;
  running.metrics["loss"] = {120, 0};
  running.metrics["acc"] = {80, 0};
  running.metrics["train/100% top 1"] = {7, 1700000000123};  // a key with a space and a %
  running.saved_run = R"({"run_id":"a","params":{"x":"y z"}})";
  RunState& finished = cursor.runs()["mlflow-dir:0/b"];
  finished = running;
  finished.run_id = "b";
  finished.terminal = true;
  finished.last_sequence = 9;
  ASSERT_TRUE(cursor.Save(dir.File("cursor")).ok());
  auto loaded = Cursor::Load(dir.File("cursor"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->runs(), cursor.runs());
  EXPECT_EQ(loaded->spool_id(), cursor.spool_id());

  // Not yet acknowledged: nothing settles. Then only the terminal run does.
  EXPECT_EQ(loaded->Settle(8), 0u);
  EXPECT_EQ(loaded->Settle(9), 1u);
  const RunState& settled = loaded->runs().at("mlflow-dir:0/b");
  EXPECT_TRUE(settled.settled);
  EXPECT_TRUE(settled.metrics.empty());
  // acc, then loss: name order.
  EXPECT_EQ(settled.settled_positions,
            (std::vector<RunState::SettledMetric>{{MetricNameHash("acc"), {80, 0}},
                                                  {MetricNameHash("loss"), {120, 0}},
                                                  {MetricNameHash("train/100% top 1"), {7, 1700000000123}}}));
  EXPECT_TRUE(settled.saved_run.empty());
  EXPECT_FALSE(loaded->runs().at("mlflow-dir:0/a").settled);
  ASSERT_TRUE(loaded->Save(dir.File("cursor")).ok());
  EXPECT_EQ(Cursor::Load(dir.File("cursor"))->runs(), loaded->runs());
}

TEST(Cursor, AMissingFileIsAnEmptyCursorAndADamagedOneAnError) {
  testing::TempDir dir;
  auto missing = Cursor::Load(dir.File("cursor"));
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->runs().empty());
  // A file cut off mid-line (a write the rename never published, copied by hand), a bad
  // number, a metric without its run, another file, another version.
  for (const char* text : {"uplink-experiments-cursor 2 =ab\nR =k =a 1 2 3 4 0 0\nM =loss 12",
                           "uplink-experiments-cursor 2 =ab\nR =k =a 1 2 3 four 0 0\n",
                           "uplink-experiments-cursor 2 =ab\nM =loss 1 2\n",
                           "{\"version\":1,\"runs\":{}}\n"}) {
    testing::WriteFileOrDie(dir.File("cursor"), text);
    auto damaged = Cursor::Load(dir.File("cursor"));
    ASSERT_FALSE(damaged.ok()) << text;
    EXPECT_NE(damaged.status().message().find("damaged"), std::string::npos) << text;
  }
  testing::WriteFileOrDie(dir.File("cursor"), "uplink-experiments-cursor 9 =ab\n");
  auto newer = Cursor::Load(dir.File("cursor"));
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("unknown version"), std::string::npos);
}

}  // namespace
}  // namespace uplink::agent::experiments
