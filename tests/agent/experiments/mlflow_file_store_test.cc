// The MLflow file store scanner over copies of real mlruns/ folders (tests/fixtures/mlflow):
// what a first pass reports, that an unchanged store reports nothing, that appends, partial
// lines, deletions and broken files are handled as docs/experiments.md says.
#include "agent/experiments/mlflow_file_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/experiments/role.h"
#include "common/json.h"
#include "sent_records.h"
#include "support/process.h"

namespace uplink::agent::experiments {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMlfixRun = "6e6280f331a94bf388fa9d0de0ecee99";
constexpr const char* kTraceRun = "942806273db14de4aca645199ca294ed";

class MlflowFileStore : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.File("mlruns");
    fs::copy(std::string(UPLINK_FIXTURES_DIR) + "/mlflow/mlruns-mlfix", root_,
             fs::copy_options::recursive);
    fs::copy(std::string(UPLINK_FIXTURES_DIR) + "/mlflow/mlruns-mltrace/0", root_ + "/7",
             fs::copy_options::recursive);
    testing::WriteFileOrDie(root_ + "/7/meta.yaml",
                            "experiment_id: '7'\nlifecycle_stage: active\nname: mltrace\n");
    registry_ = std::make_unique<metrics::Registry>();
    DeclareExperimentsMetrics(*registry_);
    MakeRole();
  }

  void MakeRole(ScanLimits limits = {}) {
    std::vector<std::unique_ptr<Scanner>> scanners;
    scanners.push_back(std::make_unique<MlflowFileStoreScanner>(root_));
    RoleOptions options;
    options.cursor_path = dir_.File("cursor");
    options.limits = limits;
    role_ = std::make_unique<ExperimentsRole>(options, std::move(scanners), sink_, nullptr,
                                              SystemClock(), *registry_);
    role_->LoadCursor();
  }

  // One cycle; what it sent.
  Sent Cycle(CycleResult* result = nullptr) {
    sink_.records.clear();
    CycleResult cycle = role_->RunCycle();
    EXPECT_TRUE(cycle.status.ok()) << cycle.status.ToString();
    if (result) *result = cycle;
    return Decode(sink_.records);
  }

  std::string RunDir(const std::string& experiment, const std::string& run) {
    return root_ + "/" + experiment + "/" + run;
  }

  void Append(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::app);
    out << text;
  }

  testing::TempDir dir_;
  std::string root_;
  ListSink sink_;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<ExperimentsRole> role_;
};

TEST_F(MlflowFileStore, AFirstPassReportsEveryRunWithItsPointsAsInTheFiles) {
  Sent sent = Cycle();
  EXPECT_EQ(sent.runs.size(), 53u);
  EXPECT_TRUE(sent.problems.empty());
  // Every line of every metric file: mltrace's foo and zoo, mlfix's mae, r2 and rmse.
  EXPECT_EQ(CountPoints(sent), 82u);
  const json::object* mlfix = nullptr;
  for (const json::object& run : sent.runs) {
    if (run.at("run_id") == kMlfixRun) mlfix = &run;
  }
  ASSERT_NE(mlfix, nullptr);
  EXPECT_EQ(mlfix->at("source"), "mlflow");
  EXPECT_EQ(mlfix->at("experiment"), "Default");
  EXPECT_EQ(mlfix->at("experiment_id"), "0");
  EXPECT_EQ(mlfix->at("status"), "finished");
  EXPECT_EQ(mlfix->at("user"), "konrad");
  EXPECT_EQ(mlfix->at("started_at"), "2020-08-20T20:32:05.771Z");
  EXPECT_EQ(mlfix->at("ended_at"), "2020-08-20T20:32:05.819Z");
  EXPECT_EQ(mlfix->at("params").at("l1_ratio"), "0.5");
  EXPECT_EQ(mlfix->at("tags").at("mlflow.source.git.commit"),
            "f8db0b09fb5ca2c6ffcb6989e5cb910f7ed6cc83");
  const auto& foo = sent.points.at(std::string(kTraceRun) + "/foo");
  ASSERT_EQ(foo.size(), 2u);
  EXPECT_EQ(json::serialize(foo[0]), "[0,1,1643245834899]");
  EXPECT_EQ(json::serialize(foo[1]), "[0,2,1643245834900]");
}

TEST_F(MlflowFileStore, AnUnchangedStoreSendsNothingEvenAfterARestart) {
  Cycle();
  Sent second = Cycle();
  EXPECT_EQ(second.records, 0u);
  MakeRole();  // a new process: the cursor comes from the file
  Sent after_restart = Cycle();
  EXPECT_EQ(after_restart.records, 0u);
}

TEST_F(MlflowFileStore, AnAppendedStepIsSentAloneAndAPartialLineWhenItIsComplete) {
  Cycle();
  Cycle();  // settles what the first sent: appends to settled runs must still be seen
  const std::string metric = RunDir("0", kMlfixRun) + "/metrics/rmse";
  Append(metric, "1597955600000 0.2");  // a line still being written
  Sent partial = Cycle();
  EXPECT_EQ(partial.records, 0u);
  Append(metric, "4 3\n");
  Sent complete = Cycle();
  EXPECT_TRUE(complete.runs.empty());
  ASSERT_EQ(complete.points.size(), 1u);
  const auto& points = complete.points.at(std::string(kMlfixRun) + "/rmse");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].at(0).to_number<std::int64_t>(), 3);
  EXPECT_EQ(points[0].at(1).to_number<double>(), 0.24);
  EXPECT_EQ(points[0].at(2).to_number<std::int64_t>(), 1597955600000);
  EXPECT_EQ(Cycle().records, 0u);
}

TEST_F(MlflowFileStore, ANewMetricAndAChangedStatusAreSent) {
  Cycle();
  const std::string run = RunDir("7", kTraceRun);
  testing::WriteFileOrDie(run + "/metrics/accuracy", "1643245900000 0.9 10\n");
  std::string meta = testing::ReadFileOrEmpty(run + "/meta.yaml");
  meta.replace(meta.find("status: 3"), 9, "status: 4");
  testing::WriteFileOrDie(run + "/meta.yaml", meta);
  Sent sent = Cycle();
  ASSERT_EQ(sent.runs.size(), 1u);
  EXPECT_EQ(sent.runs[0].at("status"), "failed");
  EXPECT_EQ(sent.points.at(std::string(kTraceRun) + "/accuracy").size(), 1u);
  // The run's other metrics were not sent again.
  EXPECT_EQ(sent.points.count(std::string(kTraceRun) + "/foo"), 0u);
}

TEST_F(MlflowFileStore, DeletedRunsAndExperimentsAreReportedOnce) {
  Cycle();
  std::string meta = testing::ReadFileOrEmpty(RunDir("0", kMlfixRun) + "/meta.yaml");
  meta.replace(meta.find("lifecycle_stage: active"), 23, "lifecycle_stage: deleted");
  testing::WriteFileOrDie(RunDir("0", kMlfixRun) + "/meta.yaml", meta);
  fs::remove_all(RunDir("7", kTraceRun));
  Sent sent = Cycle();
  std::sort(sent.deleted.begin(), sent.deleted.end());
  EXPECT_EQ(sent.deleted, (std::vector<std::string>{kMlfixRun, kTraceRun}));
  EXPECT_EQ(Cycle().records, 0u);
  // An experiment moved to .trash takes its 51 remaining runs along.
  fs::create_directories(root_ + "/.trash");
  fs::rename(root_ + "/7", root_ + "/.trash/7");
  EXPECT_EQ(Cycle().deleted.size(), 51u);
}

TEST_F(MlflowFileStore, ABrokenRunIsReportedOnceAndNeverStopsTheScan) {
  const std::string broken = RunDir("7", kTraceRun) + "/meta.yaml";
  testing::WriteFileOrDie(broken, "run_id: [unclosed\nstatus: 3\n");
  Append(RunDir("0", kMlfixRun) + "/metrics/r2", "not a number line\n1597955600001 0.7 2\n");
  Sent first = Cycle();
  EXPECT_EQ(first.runs.size(), 52u);  // every other run
  ASSERT_EQ(first.problems.size(), 2u);
  std::string problems = json::serialize(json::value(json::array(first.problems.begin(), first.problems.end())));
  EXPECT_NE(problems.find(std::string(kTraceRun) + "/meta.yaml"), std::string::npos) << problems;
  EXPECT_NE(problems.find("1 malformed line(s) skipped"), std::string::npos) << problems;
  // The good line after the bad one was taken.
  EXPECT_EQ(first.points.at(std::string(kMlfixRun) + "/r2").size(), 2u);
  EXPECT_EQ(Cycle().records, 0u);  // reported once, not every cycle
  // Mended, the run is read.
  fs::copy_file(std::string(UPLINK_FIXTURES_DIR) + "/mlflow/mlruns-mltrace/0/" + kTraceRun +
                    "/meta.yaml",
                broken, fs::copy_options::overwrite_existing);
  Sent mended = Cycle();
  ASSERT_EQ(mended.runs.size(), 1u);
  EXPECT_EQ(mended.runs[0].at("run_id"), kTraceRun);
}

TEST_F(MlflowFileStore, WorkPerCycleIsBoundedAndTheRestFollows) {
  MakeRole(ScanLimits{.max_runs_per_cycle = 10});
  size_t runs = 0;
  int cycles = 0;
  CycleResult result;
  do {
    runs += Cycle(&result).runs.size();
    ++cycles;
  } while (result.more && cycles < 20);
  EXPECT_EQ(runs, 53u);
  EXPECT_EQ(cycles, 6);
  EXPECT_FALSE(result.more);
}

TEST_F(MlflowFileStore, ALinkedFileIsNotFollowed) {
  const std::string outside = dir_.File("outside-secret");
  testing::WriteFileOrDie(outside, "1 2 3\n");
  ASSERT_EQ(::symlink(outside.c_str(), (RunDir("0", kMlfixRun) + "/metrics/linked").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (RunDir("0", kMlfixRun) + "/params/linked").c_str()), 0);
  Sent sent = Cycle();
  EXPECT_EQ(sent.points.count(std::string(kMlfixRun) + "/linked"), 0u);
  for (const json::object& run : sent.runs) {
    EXPECT_FALSE(run.at("params").as_object().contains("linked"));
  }
}

TEST_F(MlflowFileStore, AMissingFolderIsAnErrorThatDeletesNothing) {
  Cycle();
  fs::rename(root_, root_ + ".away");
  CycleResult result;
  Sent sent = Cycle(&result);
  EXPECT_EQ(sent.deleted.size(), 0u);
  ASSERT_EQ(result.source_errors.size(), 1u);
  EXPECT_FALSE(role_->CheckReadiness().ready);
  fs::rename(root_ + ".away", root_);
  EXPECT_EQ(Cycle().records, 0u);
  EXPECT_TRUE(role_->CheckReadiness().ready);
}

TEST(MetricLines, WholeLinesNonFiniteValuesAndOldTwoFieldLines) {
  MetricLines lines = ParseMetricLines("1 nan 0\n2 inf 1\n3 -inf 2\n4 0.5\n5 1e400 3\n6 0.1 4", 100);
  ASSERT_EQ(lines.points.size(), 5u);
  EXPECT_TRUE(std::isnan(lines.points[0].value));
  EXPECT_TRUE(std::isinf(lines.points[1].value) && lines.points[1].value > 0);
  EXPECT_TRUE(std::isinf(lines.points[2].value) && lines.points[2].value < 0);
  EXPECT_EQ(lines.points[3].step, 0);  // MLflow before 1.0 wrote no step
  EXPECT_TRUE(std::isinf(lines.points[4].value));
  EXPECT_EQ(lines.consumed, 41u);  // the last line has no newline yet
  MetricLines bad = ParseMetricLines("1 2 3\nx y z\n4 5 6 7\n8 9 10\n", 1000);
  EXPECT_EQ(bad.points.size(), 2u);
  EXPECT_EQ(bad.bad_lines, 2u);
  EXPECT_NE(bad.first_error.find("byte 1006"), std::string::npos) << bad.first_error;
}

}  // namespace
}  // namespace uplink::agent::experiments
