// The MLflow tracking server scanner against the fixture server (mlflow_fixture_server.h):
// pagination, only new points, deletions, auth, TLS, and an experiment the server cannot read.
#include "agent/experiments/mlflow_rest.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "agent/experiments/role.h"
#include "common/json.h"
#include "mlflow_fixture_server.h"
#include "net/certs.h"
#include "sent_records.h"
#include "support/process.h"

namespace uplink::agent::experiments {
namespace {

using testing::MlflowFixtureServer;

constexpr const char* kTraceRun = "942806273db14de4aca645199ca294ed";
constexpr const char* kHistory = "/api/2.0/mlflow/metrics/get-history";
constexpr const char* kRunsSearch = "/api/2.0/mlflow/runs/search";

class MlflowRest : public ::testing::Test {
 protected:
  void SetUp() override { DeclareExperimentsMetrics(registry_); }

  void Use(MlflowFixtureServer& server, MlflowRestOptions options = {}) {
    options.base_url = server.url();
    if (options.page_size == 1000) options.page_size = 10;  // make the server page
    auto scanner = MlflowRestScanner::Create(options);
    ASSERT_TRUE(scanner.ok()) << scanner.status().ToString();
    std::vector<std::unique_ptr<Scanner>> scanners;
    scanners.push_back(std::move(*scanner));
    RoleOptions role;
    role.cursor_path = dir_.File("cursor");
    role_ = std::make_unique<ExperimentsRole>(role, std::move(scanners), sink_, nullptr,
                                              SystemClock(), registry_);
    role_->LoadCursor();
  }

  Sent Cycle(CycleResult* result = nullptr) {
    sink_.records.clear();
    CycleResult cycle = role_->RunCycle();
    EXPECT_TRUE(cycle.status.ok());
    if (result) *result = cycle;
    return Decode(sink_.records);
  }

  testing::TempDir dir_;
  metrics::Registry registry_;
  ListSink sink_;
  std::unique_ptr<ExperimentsRole> role_;
};

TEST_F(MlflowRest, AFirstPassPagesThroughEveryRunAndAnIdleOneAsksForNoHistory) {
  MlflowFixtureServer server;
  Use(server);
  Sent first = Cycle();
  EXPECT_EQ(first.runs.size(), 54u);  // 52 mltrace runs and 2 exported ones
  EXPECT_EQ(server.Requests(kRunsSearch), 6 + 1 + 1 + 1);  // 52 runs in pages of 10, 3 more experiments
  // Every point of every history, each fetched once.
  EXPECT_EQ(first.points.at(std::string(kTraceRun) + "/foo").size(), 2u);
  EXPECT_EQ(first.points.at("eb66c160957d4a28b11d3f1b968df9cd/rmse").size(), 1u);
  EXPECT_EQ(CountPoints(first), 79u + 6u);
  const int histories = server.Requests(kHistory);
  EXPECT_EQ(histories, 52);  // 23 mltrace runs with 2 metrics, 2 exported runs with 3
  // The experiment the server cannot read is reported, once, with MLflow's error.
  ASSERT_EQ(first.problems.size(), 1u);
  std::string problem = json::serialize(first.problems[0]);
  EXPECT_NE(problem.find("INTERNAL_ERROR"), std::string::npos) << problem;
  EXPECT_NE(problem.find("cannot read experiment"), std::string::npos) << problem;

  Sent idle = Cycle();
  EXPECT_EQ(idle.records, 0u);
  EXPECT_EQ(server.Requests(kHistory), histories);
}

TEST_F(MlflowRest, OnlyTheAppendedPointAndTheChangedStatusAreSent) {
  MlflowFixtureServer server;
  Use(server);
  Cycle();
  Cycle();  // settles the finished runs: their cursors must still work
  const int histories = server.Requests(kHistory);
  server.AppendPoint(kTraceRun, "foo", 1, 3.5, 1643245900000);
  Sent appended = Cycle();
  EXPECT_TRUE(appended.runs.empty());
  EXPECT_EQ(PointCounts(appended), (std::map<std::string, size_t>{{std::string(kTraceRun) + "/foo", 1}}));
  EXPECT_EQ(server.Requests(kHistory), histories + 1);

  server.SetStatus(kTraceRun, "KILLED");
  Sent status = Cycle();
  ASSERT_EQ(status.runs.size(), 1u);
  EXPECT_EQ(status.runs[0].at("status"), "killed");
  EXPECT_TRUE(status.points.empty());
}

TEST_F(MlflowRest, DeletedRunsAndExperimentsLeaveButNotWhileAnExperimentCannotBeListed) {
  MlflowFixtureServer server;
  Use(server);
  Cycle();
  server.DeleteRun(kTraceRun);
  // Experiment 3 cannot be listed: nothing may be deleted on a partial listing.
  EXPECT_TRUE(Cycle().deleted.empty());
  server.DeleteExperiment("3");
  Sent sent = Cycle();
  EXPECT_EQ(sent.deleted, std::vector<std::string>{kTraceRun});
  server.DeleteExperiment("1");
  EXPECT_EQ(Cycle().deleted, std::vector<std::string>{"eb66c160957d4a28b11d3f1b968df9cd"});
}

TEST_F(MlflowRest, BearerAndBasicAuthFromFilesAndARefusalDeletesNothing) {
  MlflowFixtureServer server({.bearer_token = "mlflow-token-1"});
  testing::WriteFileOrDie(dir_.File("token"), "mlflow-token-1\n");
  Use(server, MlflowRestOptions{.token_file = dir_.File("token")});
  EXPECT_EQ(Cycle().runs.size(), 54u);
  // A wrong token (a rotation not yet rolled out): the pass fails and keeps every run.
  testing::WriteFileOrDie(dir_.File("token"), "stale-token");
  CycleResult result;
  Sent refused = Cycle(&result);
  EXPECT_TRUE(refused.deleted.empty());
  ASSERT_EQ(result.source_errors.size(), 1u);
  EXPECT_NE(result.source_errors[0].message().find("UNAUTHENTICATED"), std::string::npos)
      << result.source_errors[0].ToString();
  EXPECT_EQ(result.source_errors[0].message().find("stale-token"), std::string::npos);

  std::filesystem::remove(dir_.File("cursor"));  // a new deployment
  MlflowFixtureServer basic({.basic_auth = "scanner:p4ss"});
  testing::WriteFileOrDie(dir_.File("basic"), "scanner:p4ss");
  Use(basic, MlflowRestOptions{.basic_auth_file = dir_.File("basic")});
  EXPECT_EQ(Cycle().runs.size(), 54u);
}

TEST_F(MlflowRest, TlsWithAPrivateCa) {
  auto ca = net::CreateCertificateAuthority("mlflow test CA", 1);
  auto leaf = net::IssueServerCertificate(*ca, {"127.0.0.1"}, 1);
  MlflowFixtureServer server({.tls = net::TlsServerConfig{leaf->cert_pem, leaf->key_pem}});
  testing::WriteFileOrDie(dir_.File("ca.pem"), ca->cert_pem);
  Use(server, MlflowRestOptions{.ca_file = dir_.File("ca.pem")});
  EXPECT_EQ(Cycle().runs.size(), 54u);
  // Without the CA the certificate is not trusted.
  Use(server);
  CycleResult result;
  Cycle(&result);
  EXPECT_EQ(result.source_errors.size(), 1u);
}

TEST(MlflowRestOptions, CredentialsNeverCrossPlainHttpToARemoteHost) {
  EXPECT_TRUE(ValidateMlflowRestOptions({.base_url = "http://mlflow.ml.svc:5000"}).ok());
  EXPECT_TRUE(ValidateMlflowRestOptions({.base_url = "http://127.0.0.1:5000", .token_file = "t"}).ok());
  Status remote = ValidateMlflowRestOptions({.base_url = "http://mlflow.ml.svc:5000", .token_file = "t"});
  EXPECT_FALSE(remote.ok());
  EXPECT_NE(remote.message().find("https"), std::string::npos);
  EXPECT_TRUE(ValidateMlflowRestOptions({.base_url = "https://mlflow.example", .basic_auth_file = "b"}).ok());
  Status userinfo = ValidateMlflowRestOptions({.base_url = "https://u:secret@mlflow.example"});
  EXPECT_FALSE(userinfo.ok());
  EXPECT_EQ(userinfo.message().find("secret"), std::string::npos);
  EXPECT_FALSE(ValidateMlflowRestOptions(
                   {.base_url = "https://m", .token_file = "t", .basic_auth_file = "b"})
                   .ok());
}

}  // namespace
}  // namespace uplink::agent::experiments
