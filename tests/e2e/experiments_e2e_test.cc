// End to end: `uplink-agent experiments` scanning a copy of real MLflow file stores and
// shipping to a real console through its spool. What the console shows matches the files;
// a scan with no changes sends nothing; one appended metric step sends only that step; a
// deleted run leaves the console; a scanner turned off reads nothing; a credential in a param
// never reaches the console.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/json.h"
#include "e2e/cluster.h"
#include "mlflow_fixture_server.h"
#include "support/process.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kMlfixRun = "6e6280f331a94bf388fa9d0de0ecee99";
constexpr const char* kSecret = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c";

class ExperimentsEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    d_.StartConsole();
    connection_ = d_.CreateConnection("experiments-e2e");
    token_file_ = d_.WriteToken(connection_.token);
    mlruns_ = d_.dir() + "/mlruns";
    fs::copy(std::string(UPLINK_FIXTURES_DIR) + "/mlflow/mlruns-mlfix", mlruns_,
             fs::copy_options::recursive);
    fs::copy(std::string(UPLINK_FIXTURES_DIR) + "/mlflow/mlruns-mltrace/0", mlruns_ + "/1",
             fs::copy_options::recursive);
    // The second experiment gets its own id and name (the copy came from experiment 0).
    testing::WriteFileOrDie(mlruns_ + "/1/meta.yaml",
                            "artifact_location: file:///tmp/mlruns/1\nexperiment_id: '1'\n"
                            "lifecycle_stage: active\nname: mltrace\n");
    // A credential someone logged as a param, and one under an innocent name.
    testing::WriteFileOrDie(mlruns_ + "/0/" + kMlfixRun + "/params/db_password", "hunter2-prod");
    testing::WriteFileOrDie(mlruns_ + "/0/" + kMlfixRun + "/params/endpoint", kSecret);
  }

  testing::CommandResult Scan(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {d_.bin("uplink-agent"), "experiments", "--once",
                                     "--mlflow-dir", mlruns_, "--console", d_.console_url(),
                                     "--token-file", token_file_, "--state-dir",
                                     d_.dir() + "/experiments-state"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::RunCommand(argv, 120s);
  }

  json::value Runs(const std::string& query = "") {
    return d_.ApiJson("GET", "/api/v1/connections/" + connection_.id + "/runs" + query);
  }

  json::value Run(const std::string& run_id) {
    return d_.ApiJson("GET", "/api/v1/connections/" + connection_.id + "/runs/" + run_id);
  }

  // records_stored of the experiments stream (0 when there is none).
  std::uint64_t RecordsStored() {
    json::value connection = d_.ApiJson("GET", "/api/v1/connections/" + connection_.id);
    for (const json::value& stream : connection.at("streams").as_array()) {
      if (stream.at("stream").as_string().starts_with("experiments/")) {
        return stream.at("records_stored").to_number<std::uint64_t>();
      }
    }
    return 0;
  }

  Deployment d_;
  Connection connection_;
  std::string token_file_;
  std::string mlruns_;
};

TEST_F(ExperimentsEndToEnd, ShipsRunsThenOnlyWhatChanged) {
  testing::CommandResult first = Scan();
  ASSERT_EQ(first.exit_code, 0) << first.err;

  json::value all = Runs("?limit=500");
  ASSERT_TRUE(all.is_object());
  EXPECT_EQ(all.at("runs").as_array().size(), 53u);  // 1 in mlfix, 52 in mltrace
  json::value mltrace = Runs("?experiment=mltrace&limit=500");
  EXPECT_EQ(mltrace.at("runs").as_array().size(), 52u);
  EXPECT_EQ(Runs("?status=running").at("runs").as_array().size(), 0u);

  json::value run = Run(kMlfixRun);
  ASSERT_TRUE(run.is_object());
  EXPECT_EQ(run.at("experiment"), "Default");
  EXPECT_EQ(run.at("user"), "konrad");
  EXPECT_EQ(run.at("status"), "finished");
  EXPECT_EQ(run.at("params").at("alpha"), "0.5");
  EXPECT_EQ(run.at("tags").at("mlflow.source.name"), "testmodel.py");
  // The latest metrics and the history, as in the files.
  bool saw_r2 = false;
  for (const json::value& metric : run.at("metrics").as_array()) {
    if (metric.at("key") == "r2") {
      saw_r2 = true;
      EXPECT_DOUBLE_EQ(metric.at("value").to_number<double>(), -0.05493814470533365);
      EXPECT_EQ(metric.at("timestamp_ms").to_number<std::int64_t>(), 1597955525801);
    }
  }
  EXPECT_TRUE(saw_r2) << json::serialize(run);
  json::value foo = Run("942806273db14de4aca645199ca294ed").at("history").at("foo");
  ASSERT_EQ(foo.as_array().size(), 2u);
  EXPECT_EQ(foo.at(1).at(1).to_number<double>(), 2);

  // Redacted before it left the agent: visible as redacted, and nowhere in the console's store.
  EXPECT_EQ(run.at("params").at("db_password"), "[redacted]");
  EXPECT_EQ(run.at("params").at("endpoint"), "[redacted]");
  std::string redacted = json::serialize(run.at("redacted"));
  EXPECT_NE(redacted.find("params.db_password"), std::string::npos) << redacted;
  d_.StopConsole();
  for (const auto& entry : fs::recursive_directory_iterator(d_.dir())) {
    if (!entry.is_regular_file()) continue;
    std::string path = entry.path().string();
    if (path.find("/mlruns/") != std::string::npos) continue;  // the scanned files themselves
    std::string content = testing::ReadFileOrEmpty(path);
    EXPECT_EQ(content.find("hunter2-prod"), std::string::npos) << path;
    EXPECT_EQ(content.find(kSecret), std::string::npos) << path;
  }
}

TEST_F(ExperimentsEndToEnd, SecondScanSendsNothingAndAnAppendedStepOnlyThatStep) {
  ASSERT_EQ(Scan().exit_code, 0);
  const std::uint64_t stored = RecordsStored();
  ASSERT_GT(stored, 0u);

  testing::CommandResult idle = Scan();
  ASSERT_EQ(idle.exit_code, 0) << idle.err;
  EXPECT_EQ(RecordsStored(), stored) << "an unchanged store must send nothing";
  EXPECT_EQ(idle.err.find("cycle spooled changes"), std::string::npos) << idle.err;

  // One more step of one metric.
  {
    std::ofstream metric(mlruns_ + "/0/" + kMlfixRun + "/metrics/r2", std::ios::app);
    metric << "1597955600000 0.5 1\n";
  }
  testing::CommandResult one = Scan();
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(RecordsStored(), stored + 1);
  EXPECT_NE(one.err.find("\"points\":1,"), std::string::npos) << one.err;
  EXPECT_NE(one.err.find("\"runs\":0,"), std::string::npos) << one.err;
  json::value run = Run(kMlfixRun);
  for (const json::value& metric : run.at("metrics").as_array()) {
    if (metric.at("key") == "r2") {
      EXPECT_EQ(metric.at("step").to_number<std::int64_t>(), 1);
      EXPECT_EQ(metric.at("points").to_number<std::int64_t>(), 2);
    }
  }
}

TEST_F(ExperimentsEndToEnd, DeletedRunsLeaveTheConsole) {
  ASSERT_EQ(Scan().exit_code, 0);
  ASSERT_TRUE(Run(kMlfixRun).is_object());
  // Deleted in MLflow: its meta.yaml says so (the folder stays until garbage collection).
  std::string meta = testing::ReadFileOrEmpty(mlruns_ + "/0/" + kMlfixRun + "/meta.yaml");
  meta.replace(meta.find("lifecycle_stage: active"), 23, "lifecycle_stage: deleted");
  testing::WriteFileOrDie(mlruns_ + "/0/" + kMlfixRun + "/meta.yaml", meta);
  // And a run whose folder is gone.
  fs::remove_all(mlruns_ + "/1/942806273db14de4aca645199ca294ed");
  ASSERT_EQ(Scan().exit_code, 0);
  net::Response gone = d_.Api("GET", "/api/v1/connections/" + connection_.id + "/runs/" + kMlfixRun);
  EXPECT_EQ(gone.status, 404) << gone.body;
  EXPECT_EQ(d_.Api("GET", "/api/v1/connections/" + connection_.id +
                              "/runs/942806273db14de4aca645199ca294ed")
                .status,
            404);
  EXPECT_EQ(Runs("?limit=500").at("runs").as_array().size(), 51u);
}

TEST_F(ExperimentsEndToEnd, AScannerTurnedOffScansNothing) {
  testing::CommandResult off = Scan({"--enable-mlflow=false"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(RecordsStored(), 0u);
  EXPECT_EQ(Runs().at("runs").as_array().size(), 0u);
  EXPECT_NE(off.err.find("MLflow scanner is turned off"), std::string::npos) << off.err;
  // Turned back on, the same folder is read.
  ASSERT_EQ(Scan().exit_code, 0);
  EXPECT_GT(RecordsStored(), 0u);
}

TEST_F(ExperimentsEndToEnd, ALostSpoolStartsOverAndTheConsoleStoresEachPointOnce) {
  ASSERT_EQ(Scan().exit_code, 0);
  const json::value before = Run(kMlfixRun);
  // The state volume came back without its spool (an emptyDir lost with the pod, say), but
  // with its cursor: the cursor belongs to the old spool, so everything is sent again.
  fs::remove_all(d_.dir() + "/experiments-state/spool");
  testing::CommandResult again = Scan();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("starting over"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("\"runs\":53"), std::string::npos) << again.err;
  const json::value after = Run(kMlfixRun);
  EXPECT_EQ(json::serialize(after.at("metrics")), json::serialize(before.at("metrics")));
  EXPECT_EQ(Runs("?limit=500").at("runs").as_array().size(), 53u);
}

TEST_F(ExperimentsEndToEnd, TheRoleRunsShipsAndPicksUpChangesUntilStopped) {
  const int health_port = testing::FreePort();
  testing::ChildProcess agent(
      {d_.bin("uplink-agent"), "experiments", "--mlflow-dir", mlruns_, "--console",
       d_.console_url(), "--token-file", token_file_, "--state-dir", d_.dir() + "/running-state",
       "--interval", "10s", "--listen", "127.0.0.1:" + std::to_string(health_port)},
      d_.dir());
  ASSERT_TRUE(testing::WaitFor([&] { return Runs("?limit=500").at("runs").as_array().size() == 53; },
                               60s))
      << agent.Stderr();
  ASSERT_TRUE(testing::WaitFor([&] { return d_.AgentProbe(health_port, "/readyz") == 200; }, 60s))
      << agent.Stderr();
  {
    std::ofstream metric(mlruns_ + "/0/" + kMlfixRun + "/metrics/mae", std::ios::app);
    metric << "1597955700000 0.125 7\n";
  }
  auto latest_mae_step = [&] {
    const json::value run = Run(kMlfixRun);
    for (const json::value& metric : run.at("metrics").as_array()) {
      if (metric.at("key") == "mae") return metric.at("step").to_number<std::int64_t>();
    }
    return std::int64_t{-1};
  };
  EXPECT_TRUE(testing::WaitFor([&] { return latest_mae_step() == 7; }, 60s)) << agent.Stderr();
  EXPECT_EQ(agent.Stop(20s), 0) << agent.Stderr();
}

TEST_F(ExperimentsEndToEnd, ATrackingServerIsScannedOverItsRestApiWithItsToken) {
  testing::MlflowFixtureServer mlflow({.bearer_token = "mlflow-e2e-token"});
  testing::WriteFileOrDie(d_.dir() + "/mlflow-token", "mlflow-e2e-token\n");
  auto scan = [&] {
    return testing::RunCommand(
        {d_.bin("uplink-agent"), "experiments", "--once", "--mlflow-uri", mlflow.url(),
         "--mlflow-token-file", d_.dir() + "/mlflow-token", "--console", d_.console_url(),
         "--token-file", token_file_, "--state-dir", d_.dir() + "/rest-state"},
        120s);
  };
  testing::CommandResult first = scan();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.err.find("mlflow-e2e-token"), std::string::npos);
  json::value all = Runs("?limit=500");
  EXPECT_EQ(all.at("runs").as_array().size(), 54u);
  // The experiment the server cannot read is shown as a problem.
  ASSERT_EQ(all.at("problems").as_array().size(), 1u);
  EXPECT_NE(json::serialize(all.at("problems")).find("INTERNAL_ERROR"), std::string::npos);
  const std::uint64_t stored = RecordsStored();

  mlflow.AppendPoint("942806273db14de4aca645199ca294ed", "foo", 1, 3.5, 1643245900000);
  ASSERT_EQ(scan().exit_code, 0);
  EXPECT_EQ(RecordsStored(), stored + 1);
  json::value foo = Run("942806273db14de4aca645199ca294ed").at("history").at("foo");
  EXPECT_EQ(foo.as_array().size(), 3u);
}

TEST_F(ExperimentsEndToEnd, WandbRunsAreShippedAndItsScannerCanBeTurnedOff) {
  const std::string wandb = d_.dir() + "/wandb";
  fs::create_directories(wandb);
  for (const char* repo : {"rdt-agilex", "cortex.t"}) {
    for (const auto& entry :
         fs::directory_iterator(std::string(UPLINK_FIXTURES_DIR) + "/wandb/" + repo)) {
      fs::copy(entry.path(), wandb + "/" + entry.path().filename().string(),
               fs::copy_options::recursive);
    }
  }
  testing::CommandResult off = Scan({"--wandb-dir", wandb, "--enable-wandb=false"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(Runs("?limit=500").at("runs").as_array().size(), 53u);  // MLflow's only

  testing::CommandResult on = Scan({"--wandb-dir", wandb});
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_EQ(Runs("?limit=500").at("runs").as_array().size(), 57u);
  json::value offline = Run("ouesdqxz");
  ASSERT_TRUE(offline.is_object());
  EXPECT_EQ(offline.at("source"), "wandb");
  EXPECT_EQ(offline.at("offline"), true);
  EXPECT_EQ(offline.at("status"), "failed");
  EXPECT_EQ(offline.at("exit_code").to_number<int>(), 255);
  EXPECT_EQ(offline.at("history").at("loss").as_array().size(), 6u);
  EXPECT_EQ(Runs("?experiment=surcyf2/openai_qa").at("runs").as_array().size(), 2u);
}

TEST_F(ExperimentsEndToEnd, TheCliListsAndShowsRuns) {
  ASSERT_EQ(Scan().exit_code, 0);
  const std::map<std::string, std::string> env = {{"UPLINK_API_KEY", d_.admin_key()}};
  testing::CommandResult list =
      d_.Uplink({"runs", "list", "experiments-e2e", "--experiment", "Default"}, env);
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("RUN"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find(kMlfixRun), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("finished"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("942806273db14de4aca645199ca294ed"), std::string::npos) << list.out;

  testing::CommandResult show = d_.Uplink({"runs", "show", "experiments-e2e", kMlfixRun}, env);
  ASSERT_EQ(show.exit_code, 0) << show.err;
  for (const char* expected : {"konrad", "Params:", "alpha", "db_password", "[redacted]",
                               "Metrics (latest):", "rmse", "0.2490137943429832",
                               "redacted:"}) {
    EXPECT_NE(show.out.find(expected), std::string::npos) << expected << "\n" << show.out;
  }
  testing::CommandResult json =
      d_.Uplink({"runs", "show", "experiments-e2e", kMlfixRun, "--output", "json"}, env);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"history\""), std::string::npos);

  testing::CommandResult missing = d_.Uplink({"runs", "show", "experiments-e2e", "nope"}, env);
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no run"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace uplink::e2e
