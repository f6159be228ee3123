// The W&B scanner over copies of real run folders (tests/fixtures/wandb) with their
// transaction logs: status from the run's own records and file ages, offline runs, config
// redaction, only new history rows, damaged and missing logs, deleted folders.
#include "agent/experiments/wandb_scanner.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/experiments/role.h"
#include "sent_records.h"
#include "support/process.h"
#include "wandb_log_writer.h"

namespace uplink::agent::experiments {
namespace {

namespace fs = std::filesystem;
using std::chrono::hours;
using std::chrono::minutes;

const std::string kWandb = std::string(UPLINK_FIXTURES_DIR) + "/wandb/";
constexpr const char* kOffline = "offline-run-20251014_143711-ouesdqxz";
constexpr const char* kNeurons = "run-20231119_053436-rwncsnve";

const json::object* RunNamed(const Sent& sent, const std::string& id) {
  for (const json::object& run : sent.runs) {
    if (run.at("run_id").as_string() == id) return &run;
  }
  return nullptr;
}

class Wandb : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.File("wandb");
    fs::create_directories(root_);
    for (const char* repo : {"cortex.t", "cortex.t-neurons", "rdt-agilex", "vpocc"}) {
      for (const auto& entry : fs::directory_iterator(kWandb + repo)) {
        fs::copy(entry.path(), root_ + "/" + entry.path().filename().string(),
                 fs::copy_options::recursive);
      }
    }
    DeclareExperimentsMetrics(registry_);
    // The clock stands a minute after the copies were made: every log is fresh.
    clock_.SetNow(WallTime(std::chrono::seconds(::time(nullptr))) + minutes(1));
    MakeRole();
  }

  void MakeRole() {
    std::vector<std::unique_ptr<Scanner>> scanners;
    scanners.push_back(std::make_unique<WandbScanner>(
        WandbScannerOptions{.root = root_, .stale_after = minutes(10)}));
    RoleOptions options;
    options.cursor_path = dir_.File("cursor");
    role_ = std::make_unique<ExperimentsRole>(options, std::move(scanners), sink_, nullptr,
                                              clock_, registry_);
    role_->LoadCursor();
  }

  Sent Cycle() {
    sink_.records.clear();
    CycleResult cycle = role_->RunCycle();
    EXPECT_TRUE(cycle.status.ok());
    EXPECT_TRUE(cycle.source_errors.empty());
    return Decode(sink_.records);
  }

  std::string Log(const std::string& folder) {
    for (const auto& entry : fs::directory_iterator(root_ + "/" + folder)) {
      if (entry.path().extension() == ".wandb") return entry.path().string();
    }
    return "";
  }

  // Appends records to the folder's log, framed as W&B's writer goes on with it.
  void AppendRecords(const std::string& folder, const std::vector<std::string>& records) {
    const std::string path = Log(folder);
    const std::string log = testing::ReadFileOrEmpty(path);
    testing::WandbLogWriter writer(log);
    for (const std::string& record : records) writer.Add(record);
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << writer.bytes().substr(log.size());
  }

  testing::TempDir dir_;
  std::string root_;
  FakeClock clock_;
  metrics::Registry registry_;
  ListSink sink_;
  std::unique_ptr<ExperimentsRole> role_;
};

TEST_F(Wandb, EveryRunFolderIsReportedWithItsStatusFromItsOwnRecords) {
  Sent sent = Cycle();
  // ptj50rnr, 7a61pdvg, rwncsnve, ouesdqxz, iisnbmud (a latest-run copy), jh3zgsu9.
  ASSERT_EQ(sent.runs.size(), 6u);
  const json::object* offline = RunNamed(sent, "ouesdqxz");
  ASSERT_NE(offline, nullptr);
  EXPECT_EQ(offline->at("offline"), true);
  EXPECT_EQ(offline->at("status"), "failed");  // exit code 255
  EXPECT_EQ(offline->at("exit_code").to_number<int>(), 255);
  EXPECT_EQ(offline->at("experiment"), "roboticDiffusionTransformer");
  EXPECT_EQ(offline->at("user"), "agilex");
  EXPECT_EQ(offline->at("started_at"), "2025-10-14T06:37:11.361Z");
  EXPECT_EQ(offline->at("ended_at"), "2025-10-14T06:37:22.361Z");  // start + runtime 11 s
  EXPECT_EQ(offline->at("params").at("train_batch_size"), "4");
  EXPECT_EQ(offline->at("params").at("learning_rate"), "0.0001");
  EXPECT_EQ(offline->at("params").at("hub_token"), "null");  // a secret's name, no secret
  EXPECT_EQ(offline->at("summary").at("loss").to_number<double>(), 2.120119094848633);
  EXPECT_EQ(sent.points.at("ouesdqxz/loss").size(), 6u);
  EXPECT_EQ(sent.points.at("ouesdqxz/lr").size(), 6u);
  EXPECT_EQ(sent.points.at("iisnbmud/loss").size(), 3u);

  const json::object* online = RunNamed(sent, "7a61pdvg");
  ASSERT_NE(online, nullptr);
  EXPECT_EQ(online->at("offline"), false);
  EXPECT_EQ(online->at("experiment"), "surcyf2/openai_qa");
  EXPECT_EQ(online->at("name"), "run1");
  // A log with a run record and nothing else, fresh: running, whatever any process says.
  const json::object* neurons = RunNamed(sent, "rwncsnve");
  ASSERT_NE(neurons, nullptr);
  EXPECT_EQ(neurons->at("status"), "running");
  EXPECT_FALSE(neurons->contains("ended_at"));
  EXPECT_TRUE(sent.problems.empty());

  EXPECT_EQ(Cycle().records, 0u);
  // Ten minutes without growth and no exit record: it crashed. Said once.
  clock_.Advance(minutes(11));
  Sent later = Cycle();
  ASSERT_EQ(later.runs.size(), 1u);
  EXPECT_EQ(later.runs[0].at("run_id"), "rwncsnve");
  EXPECT_EQ(later.runs[0].at("status"), "crashed");
  EXPECT_EQ(Cycle().records, 0u);
}

TEST_F(Wandb, NewHistoryRowsAreSentAloneAndAnExitRecordFinishesTheRun) {
  Cycle();
  Cycle();  // settles the finished runs
  AppendRecords(kNeurons, {testing::HistoryRecord(0, 1700372100.5, {{"acc", "0.5"}, {"text", "\"hi\""}}),
                           testing::HistoryRecord(1, 1700372101.5, {{"acc", "0.75"}})});
  Sent rows = Cycle();
  EXPECT_TRUE(rows.runs.empty());
  EXPECT_EQ(PointCounts(rows), (std::map<std::string, size_t>{{"rwncsnve/acc", 2}}));
  EXPECT_EQ(rows.points.at("rwncsnve/acc")[1].at(1).to_number<double>(), 0.75);
  EXPECT_EQ(rows.points.at("rwncsnve/acc")[1].at(2).to_number<std::int64_t>(), 1700372101500);

  AppendRecords(kNeurons, {testing::HistoryRecord(2, 1700372102.5, {{"acc", "0.8"}}),
                           testing::ExitRecord(0, 30)});
  Sent finished = Cycle();
  ASSERT_EQ(finished.runs.size(), 1u);
  EXPECT_EQ(finished.runs[0].at("status"), "finished");
  EXPECT_EQ(PointCounts(finished), (std::map<std::string, size_t>{{"rwncsnve/acc", 1}}));
  EXPECT_EQ(Cycle().records, 0u);

  // A finished, settled run that resumes (W&B's resume=True) goes on from where it was.
  Cycle();
  AppendRecords(kOffline, {testing::HistoryRecord(7, 1760423900.0, {{"loss", "1.5"}})});
  Sent resumed = Cycle();
  EXPECT_EQ(PointCounts(resumed), (std::map<std::string, size_t>{{"ouesdqxz/loss", 1}}));
}

TEST_F(Wandb, ASecretInTheConfigIsRedactedBeforeItLeaves) {
  AppendRecords(kNeurons, {testing::UpdatesRecord(5, {{"openai_api_key", "\"sk-proj-Abc123Def456Ghi789Jkl012\""},
                                                      {"endpoint", "\"https://bot:hunter2@api.example\""},
                                                      {"max_tokens", "512"}})});
  Sent sent = Cycle();
  const json::object* run = RunNamed(sent, "rwncsnve");
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->at("params").at("openai_api_key"), "[redacted]");
  EXPECT_EQ(run->at("params").at("endpoint"), "[redacted]");
  EXPECT_EQ(run->at("params").at("max_tokens"), "512");
  for (const std::string& record : sink_.records) {
    EXPECT_EQ(record.find("sk-proj"), std::string::npos);
    EXPECT_EQ(record.find("hunter2"), std::string::npos);
  }
  // Still redacted after a restart, from what the cursor saved.
  MakeRole();
  AppendRecords(kNeurons, {testing::HistoryRecord(0, 1700372100.5, {{"acc", "0.5"}})});
  Sent again = Cycle();
  EXPECT_TRUE(again.runs.empty());  // the run's item did not change
  EXPECT_EQ(again.points.size(), 1u);
}

TEST_F(Wandb, DamagedMissingAndForeignLogsAreReportedOnceAndTheRestIsRead) {
  // A flipped byte in the second block of a 300 KB log.
  std::string ptj = Log("run-20231106_094646-ptj50rnr");
  std::string bytes = testing::ReadFileOrEmpty(ptj);
  bytes[40'000] ^= 0x5a;
  testing::WriteFileOrDie(ptj, bytes);
  // A log that is not one, and a folder without one.
  testing::WriteFileOrDie(Log("run-20250820_124010-jh3zgsu9"), "this is not a W&B log at all");
  fs::remove(Log("run-20231031_202230-7a61pdvg"));
  Sent sent = Cycle();
  EXPECT_EQ(sent.runs.size(), 4u);  // ptj50rnr still, from its other blocks
  ASSERT_NE(RunNamed(sent, "ptj50rnr"), nullptr);
  EXPECT_EQ(RunNamed(sent, "ptj50rnr")->at("status"), "failed");
  ASSERT_EQ(sent.problems.size(), 3u);
  std::string problems;
  for (const json::object& problem : sent.problems) problems += json::serialize(problem) + "\n";
  EXPECT_NE(problems.find("damaged chunk"), std::string::npos) << problems;
  EXPECT_NE(problems.find("not a W&B transaction log"), std::string::npos) << problems;
  EXPECT_NE(problems.find("no transaction log"), std::string::npos) << problems;
  EXPECT_EQ(Cycle().records, 0u);
}

TEST_F(Wandb, ALatestRunLinkIsNotASecondRunAndADeletedFolderLeaves) {
  fs::remove_all(root_ + "/latest-run");
  ASSERT_EQ(::symlink(kOffline, (root_ + "/latest-run").c_str()), 0);
  Sent sent = Cycle();
  EXPECT_EQ(sent.runs.size(), 5u);
  fs::remove_all(root_ + "/" + kOffline);
  EXPECT_EQ(Cycle().deleted, std::vector<std::string>{"ouesdqxz"});
}

}  // namespace
}  // namespace uplink::agent::experiments
