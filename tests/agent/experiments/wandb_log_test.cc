// The W&B transaction log decoder: the real logs in tests/fixtures/wandb (what each holds was
// counted independently), resuming at record boundaries while a log grows, and hostile input:
// damaged checksums, impossible lengths and types, zeroed blocks, bad headers, and protobuf
// that lies about its lengths.
#include "agent/experiments/wandb_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/process.h"
#include "wandb_log_writer.h"

namespace uplink::agent::experiments {
namespace {

using testing::WandbLogWriter;

const std::string kWandb = std::string(UPLINK_FIXTURES_DIR) + "/wandb/";

std::string Fixture(const std::string& path) { return testing::ReadFileOrEmpty(kWandb + path); }

WandbLogEvents Decode(std::string_view data, std::int64_t start = 0) {
  auto events = DecodeWandbLog(data, start);
  EXPECT_TRUE(events.ok()) << events.status().ToString();
  return events.value_or(WandbLogEvents{});
}

TEST(WandbLog, RealLogsDecodeWholeWithTheirRecordsExitCodesAndRuns) {
  struct Case {
    std::string path;
    std::int64_t records;
    std::optional<std::int64_t> exit_code;
    std::string run_id;
    std::string project;
    bool ended;
  };
  const std::vector<Case> cases = {
      {"cortex.t/run-20231106_094646-ptj50rnr/run-ptj50rnr.wandb", 625, 1, "ptj50rnr", "openai_qa", true},
      {"cortex.t/run-20231031_202230-7a61pdvg/run-7a61pdvg.wandb", 1107, 1, "7a61pdvg", "openai_qa", false},
      {"rdt-agilex/offline-run-20251014_143711-ouesdqxz/run-ouesdqxz.wandb", 81, 255, "ouesdqxz",
       "roboticDiffusionTransformer", true},
      {"rdt-agilex/latest-run/run-iisnbmud.wandb", 72, 255, "iisnbmud", "roboticDiffusionTransformer", true},
      {"vpocc/run-20250820_124010-jh3zgsu9/run-jh3zgsu9.wandb", 28, 1, "jh3zgsu9", "vpocc", false},
      {"cortex.t-neurons/run-20231119_053436-rwncsnve/run-rwncsnve.wandb", 2, std::nullopt, "rwncsnve",
       "synthetic-images", false},
  };
  for (const Case& c : cases) {
    std::string data = Fixture(c.path);
    ASSERT_FALSE(data.empty()) << c.path;
    WandbLogEvents events = Decode(data);
    EXPECT_EQ(events.records, c.records) << c.path;
    EXPECT_EQ(events.damaged_chunks, 0) << c.path;
    EXPECT_EQ(events.damaged_records, 0) << c.path;
    EXPECT_EQ(events.next_offset, static_cast<std::int64_t>(data.size())) << c.path;
    EXPECT_EQ(events.exit_code, c.exit_code) << c.path;
    EXPECT_EQ(events.ended, c.ended) << c.path;
    ASSERT_TRUE(events.run.has_value()) << c.path;
    EXPECT_EQ(events.run->run_id, c.run_id);
    EXPECT_EQ(events.run->project, c.project);
  }
}

TEST(WandbLog, HistoryConfigAndSummaryOfAnOfflineRun) {
  WandbLogEvents events = Decode(Fixture("rdt-agilex/offline-run-20251014_143711-ouesdqxz/run-ouesdqxz.wandb"));
  ASSERT_EQ(events.history.size(), 6u);
  EXPECT_EQ(events.history[0].step, 1);
  ASSERT_EQ(events.history[0].numbers.size(), 2u);  // loss and lr; _runtime and _step are W&B's
  EXPECT_EQ(events.history[0].numbers[0].first, "loss");
  EXPECT_DOUBLE_EQ(events.history[0].numbers[0].second, 253.2695770263672);
  EXPECT_DOUBLE_EQ(*events.history[5].timestamp_s, 1760423841.3288212);
  EXPECT_EQ(events.history[5].step, 6);
  EXPECT_EQ(events.config_updates.size(), 49u);  // W&B's own _wandb, then 48 of the run's
  EXPECT_EQ(events.config_updates[1].key, "config_path");
  EXPECT_EQ(events.config_updates[1].value_json, "\"configs/base.yaml\"");
  EXPECT_EQ(events.run->start_time_ms, 1760423831361);
  EXPECT_EQ(events.runtime_s, 11);
  bool loss = false;
  for (const WandbItem& item : events.summary_updates) loss = loss || item.key == "loss";
  EXPECT_TRUE(loss);
}

TEST(WandbLog, AGrowingLogIsReadOnceInPiecesThatEndAtRecordBoundaries) {
  const std::string data = Fixture("cortex.t/run-20231106_094646-ptj50rnr/run-ptj50rnr.wandb");
  // The log as a reader would see it while it is written: cut at arbitrary sizes.
  std::int64_t offset = 0;
  std::int64_t records = 0;
  std::mt19937 random(7);
  size_t visible = 0;
  while (visible < data.size()) {
    visible = std::min(data.size(), visible + 1 + random() % 20'000);
    WandbLogEvents events = Decode(std::string_view(data).substr(offset, visible - offset), offset);
    EXPECT_GE(events.next_offset, offset);
    EXPECT_LE(events.next_offset, static_cast<std::int64_t>(visible));
    EXPECT_EQ(events.damaged_chunks, 0);
    records += events.records;
    offset = events.next_offset;
  }
  EXPECT_EQ(offset, static_cast<std::int64_t>(data.size()));
  EXPECT_EQ(records, 625);
}

TEST(WandbLog, RecordsSpanningBlocksAndTheWritersPaddingRoundTrip) {
  WandbLogWriter writer;
  std::vector<std::string> big;
  for (int i = 0; i < 40; ++i) {
    writer.Add(testing::HistoryRecord(i, 1700000000.0 + i,
                                      {{"loss", std::to_string(1.0 / (i + 1))},
                                       {"blob", "\"" + std::string(i * 997 % 90'000, 'x') + "\""}}));
  }
  WandbLogEvents events = Decode(writer.bytes());
  EXPECT_EQ(events.records, 40);
  EXPECT_EQ(events.damaged_chunks + events.damaged_records, 0);
  ASSERT_EQ(events.history.size(), 40u);
  EXPECT_EQ(events.history[39].step, 39);
  EXPECT_EQ(events.history[39].numbers.size(), 1u);  // the string is not a metric
}

TEST(WandbLog, ADamagedChunkLosesItsBlockAndTheDecoderGoesOn) {
  std::string data = Fixture("cortex.t/run-20231106_094646-ptj50rnr/run-ptj50rnr.wandb");
  const WandbLogEvents clean = Decode(data);
  data[40'000] ^= 0x5a;  // inside the second block
  WandbLogEvents damaged = Decode(data);
  EXPECT_EQ(damaged.damaged_chunks, 1);
  EXPECT_GE(damaged.damaged_records, 0);
  EXPECT_LT(damaged.records, clean.records);
  EXPECT_GT(damaged.records, clean.records - 200);  // only that block's records
  EXPECT_EQ(damaged.next_offset, static_cast<std::int64_t>(data.size()));
  EXPECT_EQ(damaged.exit_code, clean.exit_code);  // records after the damage are read
}

TEST(WandbLog, HostileFramingIsCountedNotTrusted) {
  WandbLogWriter writer;
  writer.Add(testing::ExitRecord(0, 5));
  std::string good = writer.bytes();
  // A length that runs past its block.
  std::string overflow = good;
  overflow[7 + 4] = static_cast<char>(0xff);
  overflow[7 + 5] = static_cast<char>(0x7f);
  WandbLogEvents events = Decode(overflow + std::string(40'000, '\0'));
  EXPECT_EQ(events.damaged_chunks, 1);
  EXPECT_FALSE(events.exit_code.has_value());
  // An unknown chunk type.
  std::string type = good;
  type[7 + 6] = 9;
  EXPECT_EQ(Decode(type).damaged_chunks, 1);
  // A zeroed rest of block, then a good record in the next block.
  std::string zeroed(":W&B\xe1\xbe\x00", 7);
  zeroed.append(WandbLogWriter::kBlock - 7, '\0');
  zeroed += good.substr(7);
  WandbLogEvents after_zeros = Decode(zeroed);
  EXPECT_EQ(after_zeros.exit_code, 0);
  EXPECT_EQ(after_zeros.damaged_chunks, 0);
  // LAST without FIRST.
  WandbLogWriter big;
  big.Add(std::string(50'000, 'z'));
  std::string orphan(":W&B\xe1\xbe\x00", 7);
  orphan.append(WandbLogWriter::kBlock - 7, '\0');
  orphan += big.bytes().substr(WandbLogWriter::kBlock);
  EXPECT_EQ(Decode(orphan).damaged_records, 1);
}

TEST(WandbLog, ProtobufThatLiesAboutLengthsIsADamagedRecord) {
  WandbLogWriter writer;
  std::string lying;
  testing::PutTag(lying, 2, 2);
  testing::PutVarint(lying, 1'000'000);  // a history of a million bytes in a few
  lying += "abc";
  writer.Add(lying);
  std::string group;
  testing::PutTag(group, 2, 3);  // a group: not in proto3
  writer.Add(group);
  std::string endless(11, static_cast<char>(0xff));  // a varint that never ends
  writer.Add(endless);
  std::string zero_field;
  testing::PutTag(zero_field, 0, 0);
  writer.Add(zero_field);
  writer.Add(testing::ExitRecord(-9, 1));  // a negative int32, ten bytes on the wire
  WandbLogEvents events = Decode(writer.bytes());
  EXPECT_EQ(events.records, 5);
  EXPECT_EQ(events.damaged_records, 4);
  EXPECT_EQ(events.exit_code, -9);
}

TEST(WandbLog, TheHeaderIsChecked) {
  EXPECT_FALSE(DecodeWandbLog(":W&", 0).ok());
  EXPECT_FALSE(DecodeWandbLog(std::string("LEVELDB"), 0).ok());
  EXPECT_FALSE(DecodeWandbLog(std::string(":W&B\xe1\xbf\x00", 7), 0).ok());
  auto version = DecodeWandbLog(std::string(":W&B\xe1\xbe\x01", 7), 0);
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("version 1"), std::string::npos);
  // Resuming past the header does not need it.
  EXPECT_TRUE(DecodeWandbLog("", 7).ok());
}

TEST(WandbLog, MutatedRealLogsNeverCrashOrRunPastTheirData) {
  const std::string original = Fixture("rdt-agilex/offline-run-20251014_143711-ouesdqxz/run-ouesdqxz.wandb");
  std::mt19937 random(19);
  for (int round = 0; round < 300; ++round) {
    std::string data = original;
    int flips = 1 + static_cast<int>(random() % 8);
    for (int i = 0; i < flips; ++i) {
      data[7 + random() % (data.size() - 7)] = static_cast<char>(random());
    }
    if (round % 3 == 0) data.resize(7 + random() % (data.size() - 7));
    auto events = DecodeWandbLog(data, 0);
    ASSERT_TRUE(events.ok());
    EXPECT_LE(events->next_offset, static_cast<std::int64_t>(data.size()));
    for (const WandbHistoryRow& row : events->history) {
      EXPECT_LE(row.end_offset, static_cast<std::int64_t>(data.size()));
    }
  }
}

TEST(WandbLog, NumbersAsW_BWritesThem) {
  EXPECT_EQ(WandbNumber("1.5"), 1.5);
  EXPECT_EQ(WandbNumber("-3"), -3);
  EXPECT_TRUE(std::isnan(*WandbNumber("NaN")));
  EXPECT_TRUE(std::isinf(*WandbNumber("-Infinity")));
  EXPECT_FALSE(WandbNumber("\"1.5\"").has_value());
  EXPECT_FALSE(WandbNumber("[1]").has_value());
  EXPECT_FALSE(WandbNumber("1.5x").has_value());
  EXPECT_FALSE(WandbNumber("").has_value());
}

}  // namespace
}  // namespace uplink::agent::experiments
