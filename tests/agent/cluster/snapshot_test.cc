// The cluster role's plan and snapshots: plans from console replies (and hostile ones), the
// failing-pod listing, and whole cycles through the real runner against a stand-in kubectl
// that answers by its argv.
#include "agent/cluster/snapshot.h"

#include <gtest/gtest.h>

#include "common/json.h"
#include "kubectl/guard.h"
#include "protocol/upload.h"
#include "support/process.h"

namespace uplink::agent::cluster {
namespace {

// The snapshot as the record the role spools.
json::object Encoded(const protocol::ClusterSnapshot& snapshot) {
  return protocol::EncodeClusterSnapshot(snapshot);
}

json::value Parse(std::string_view text) {
  auto parsed = ParseJson(text);
  EXPECT_TRUE(parsed.ok()) << text;
  return parsed.ok() ? *parsed : json::value();
}

TEST(ClusterPlanTest, AReplyWithoutAPlanKeepsTheCurrentOne) {
  for (const char* reply : {R"({"acked_through": 3})", R"({"plan": null})", "[]", "7"}) {
    auto plan = protocol::DecodeClusterPlan(Parse(reply));
    ASSERT_TRUE(plan.ok()) << reply;
    EXPECT_FALSE(plan->has_value()) << reply;
  }
}

TEST(ClusterPlanTest, AFullPlanIsTakenWithItsCommandsInOrder) {
  auto plan = protocol::DecodeClusterPlan(Parse(R"({"plan": {"interval_seconds": 60,
      "commands": [{"name": "nodes", "argv": ["kubectl", "get", "nodes", "-o", "wide"]},
                   {"name": "pods/ml", "argv": ["kubectl", "get", "pods", "-n", "ml"]}],
      "failing_pod_logs": {"tail_lines": 20, "max_pods": 3}, "future_field": 1}})"));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->has_value());
  const ClusterPlan& p = **plan;
  EXPECT_EQ(p.interval, std::chrono::seconds(60));
  ASSERT_EQ(p.commands.size(), 2u);
  EXPECT_EQ(p.commands[1].name, "pods/ml");
  EXPECT_EQ(p.commands[1].argv, (std::vector<std::string>{"kubectl", "get", "pods", "-n", "ml"}));
  ASSERT_TRUE(p.failing_pod_logs.has_value());
  EXPECT_EQ(p.failing_pod_logs->tail_lines, 20);
  EXPECT_EQ(p.failing_pod_logs->max_pods, 3);
}

TEST(ClusterPlanTest, MalformedPlansAreRefusedNamingTheField) {
  const std::string many_args = [] {
    std::string argv = R"("kubectl")";
    for (int i = 0; i < 64; ++i) argv += R"(, "x")";
    return argv;
  }();
  const std::pair<std::string, std::string> cases[] = {
      {R"({"plan": []})", "plan must be an object"},
      {R"({"plan": {"interval_seconds": 5, "commands": []}})", "interval_seconds"},
      {R"({"plan": {"interval_seconds": 1e9, "commands": []}})", "interval_seconds"},
      {R"({"plan": {"interval_seconds": "30", "commands": []}})", "interval_seconds"},
      {R"({"plan": {}})", "plan.commands"},
      {R"({"plan": {"commands": {}}})", "plan.commands"},
      {R"({"plan": {"commands": [7]}})", "plan.commands[0]"},
      {R"({"plan": {"commands": [{"argv": ["kubectl"]}]}})", "plan.commands[0].name"},
      {R"({"plan": {"commands": [{"name": "a b", "argv": ["kubectl"]}]}})", ".name"},
      {R"({"plan": {"commands": [{"name": "x"}]}})", ".argv is missing"},
      {R"({"plan": {"commands": [{"name": "x", "argv": []}]}})", ".argv"},
      {R"({"plan": {"commands": [{"name": "x", "argv": ["sh", "-c", "id"]}]}})", "kubectl"},
      {R"({"plan": {"commands": [{"name": "x", "argv": ["kubectl", 1]}]}})", ".argv"},
      {R"({"plan": {"commands": [{"name": "x", "argv": [)" + many_args + "]}]}}", ".argv"},
      {R"({"plan": {"commands": [{"name": "x", "argv": ["kubectl", ")" +
           std::string(5000, 'a') + R"("]}]}})", ".argv"},
      {R"({"plan": {"commands": [], "failing_pod_logs": 3}})", "failing_pod_logs"},
      {R"({"plan": {"commands": [], "failing_pod_logs": {"tail_lines": 0}}})", "tail_lines"},
      {R"({"plan": {"commands": [], "failing_pod_logs": {"max_pods": 1000}}})", "max_pods"},
  };
  for (const auto& [reply, field] : cases) {
    auto plan = protocol::DecodeClusterPlan(Parse(reply));
    ASSERT_FALSE(plan.ok()) << reply.substr(0, 120);
    EXPECT_NE(plan.status().message().find(field), std::string::npos)
        << plan.status().message() << " for " << reply.substr(0, 120);
  }
  std::string too_many = R"({"plan": {"commands": [)";
  for (int i = 0; i < 65; ++i) {
    too_many += std::string(i ? "," : "") + R"({"name": "n", "argv": ["kubectl", "version"]})";
  }
  too_many += "]}}";
  EXPECT_FALSE(protocol::DecodeClusterPlan(Parse(too_many)).ok());
}

TEST(FailingPodsTest, FailedPhasesAndFailingContainersAreFoundAndTheRestIgnored) {
  const std::string listing =
      "ml\ttrainer-0\tRunning\tmain,4,false,CrashLoopBackOff;sidecar,0,true,;\n"
      "ml\thealthy\tRunning\tmain,0,true,;\n"
      "ml\tstarting\tPending\tmain,0,false,ContainerCreating;\n"
      "batch\tjob-x\tFailed\tworker,0,false,;\n"
      "batch\tflaky\tRunning\tworker,2,false,;\n"
      "batch\trecovered\tRunning\tworker,2,true,;\n"
      "garbage line without tabs\n"
      "\t\t\t\n"
      "ns\tname\tRunning\tbroken-container-field;\n"
      "ns\tname\n";
  const std::vector<FailingPod> pods = ParseFailingPods(listing, 10);
  ASSERT_EQ(pods.size(), 3u);
  EXPECT_EQ(pods[0], (FailingPod{"ml", "trainer-0", "main", true}));
  EXPECT_EQ(pods[1], (FailingPod{"batch", "job-x", "worker", false}));  // its first container
  EXPECT_EQ(pods[2], (FailingPod{"batch", "flaky", "worker", true}));
  EXPECT_EQ(ParseFailingPods(listing, 1).size(), 1u);
  EXPECT_TRUE(ParseFailingPods(std::string(100000, '\t'), 5).empty());
  EXPECT_TRUE(ParseFailingPods("", 5).empty());
}

TEST(FailingPodsTest, TheQueryNamesItsScopeAndPassesTheGuard) {
  const auto all = FailingPodQuery(std::nullopt);
  EXPECT_NE(std::find(all.begin(), all.end(), "-A"), all.end());
  const auto one = FailingPodQuery(std::string("ml"));
  ASSERT_GE(one.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(one.begin(), one.begin() + 5),
            (std::vector<std::string>{"kubectl", "get", "pods", "-n", "ml"}));
  EXPECT_TRUE(kubectl::CheckKubectlArgv(all).ok());
  EXPECT_TRUE(kubectl::CheckKubectlArgv(one).ok());
}

class SnapshotTest : public ::testing::Test {
 protected:
  // A stand-in kubectl answering by its arguments, as the real one would for this cluster.
  SnapshotTest() {
    uplink::testing::WriteFileOrDie(dir_.File("kubeconfig"), "apiVersion: v1\nkind: Config\n");
    uplink::testing::WriteFileOrDie(
        dir_.File("kubectl"),
        "#!/bin/sh\n"
        "case \"$*\" in\n"
        "  *'get nodes'*) echo 'NAME STATUS'; echo 'gpu-1 Ready' ;;\n"
        "  *'get pods -A -o=jsonpath'*)\n"
        "    printf 'ml\\ttrainer-0\\tRunning\\tmain,3,false,CrashLoopBackOff;\\n' ;;\n"
        "  *'get pods'*) echo 'NAMESPACE NAME READY'; printf 'ml trainer-0 0/1\\n' ;;\n"
        "  *'logs -n ml trainer-0 -c main --tail=50 --previous'*) echo 'Traceback: boom' ;;\n"
        "  *'top nodes'*) echo 'error: Metrics API not available' >&2; exit 1 ;;\n"
        "  *'get events'*) /usr/bin/head -c 300000 /dev/zero | /usr/bin/tr '\\0' 'x' |"
        " /usr/bin/fold -w 100 ;;\n"
        "  *) echo \"unexpected: $*\" >&2; exit 2 ;;\n"
        "esac\n",
        0755);
    auto runner = KubectlRunner::Create({.kubectl_path = dir_.File("kubectl"),
                                         .kubeconfig_path = dir_.File("kubeconfig"),
                                         .cache_dir = dir_.File("cache")});
    EXPECT_TRUE(runner.ok()) << runner.status().ToString();
    runner_ = std::move(runner).value();
  }

  uplink::testing::TempDir dir_;
  std::unique_ptr<KubectlRunner> runner_;
  metrics::Registry registry_;
  FakeClock clock_;
};

const json::object* ResultNamed(const json::object& snapshot, std::string_view name) {
  for (const json::value& result : snapshot.at("results").as_array()) {
    if (result.at("name").as_string() == name) return &result.as_object();
  }
  return nullptr;
}

TEST_F(SnapshotTest, ACycleRunsEveryPlannedCommandAndTheLogsOfFailingPods) {
  DeclareClusterMetrics(registry_);
  SnapshotCollector collector(*runner_, clock_, registry_);
  ClusterPlan plan;
  plan.commands = {{"nodes", {"kubectl", "get", "nodes"}},
                   {"pods", {"kubectl", "get", "pods", "-A"}},
                   {"top_nodes", {"kubectl", "top", "nodes"}},
                   {"secrets", {"kubectl", "get", "secrets", "-A"}},
                   {"events", {"kubectl", "get", "events", "-A"}}};
  plan.failing_pod_logs = FailingPodLogs{};
  const json::object snapshot = Encoded(collector.Collect(plan));
  EXPECT_EQ(snapshot.at("kind").as_string(), "cluster_snapshot");
  EXPECT_TRUE(ParseRfc3339(snapshot.at("collected_at").as_string()).ok());
  ASSERT_EQ(snapshot.at("results").as_array().size(), 6u);

  const json::object* nodes = ResultNamed(snapshot, "nodes");
  ASSERT_NE(nodes, nullptr);
  EXPECT_EQ(nodes->at("exit_code").as_int64(), 0);
  EXPECT_NE(nodes->at("stdout").as_string().find("gpu-1 Ready"), json::string::npos);
  EXPECT_EQ(nodes->at("argv").as_array().size(), 3u);

  const json::object* top = ResultNamed(snapshot, "top_nodes");
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(top->at("exit_code").as_int64(), 1);
  EXPECT_NE(top->at("stderr").as_string().find("Metrics API"), json::string::npos);

  // The guard refuses on the agent too: no process ran, the refusal is in the snapshot.
  const json::object* secrets = ResultNamed(snapshot, "secrets");
  ASSERT_NE(secrets, nullptr);
  EXPECT_EQ(secrets->at("error").at("code").as_string(), "refused");
  EXPECT_EQ(secrets->at("error").at("message").as_string().find(
                "This cluster is connected through the in-cluster uplink agent, which is "
                "read-only.\n"),
            0u);

  // Long output is cut at a line and marked, never sent whole.
  const json::object* events = ResultNamed(snapshot, "events");
  ASSERT_NE(events, nullptr);
  const std::string_view out = events->at("stdout").as_string();
  EXPECT_LE(out.size(), kMaxSnapshotStdoutBytes);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_TRUE(events->at("truncated").as_bool());

  const json::object* logs = ResultNamed(snapshot, "logs/ml/trainer-0");
  ASSERT_NE(logs, nullptr);
  EXPECT_EQ(logs->at("stdout").as_string(), "Traceback: boom\n");
  EXPECT_EQ(registry_.Get("uplink_agent_cluster_snapshots_total"), 1);
}

TEST_F(SnapshotTest, ASnapshotOfManyLongOutputsStillFitsOneRecord) {
  DeclareClusterMetrics(registry_);
  SnapshotCollector collector(*runner_, clock_, registry_);
  ClusterPlan plan;
  for (int i = 0; i < 12; ++i) {
    plan.commands.push_back({"events/ns" + std::to_string(i),
                             {"kubectl", "get", "events", "-n", "ns" + std::to_string(i)}});
  }
  const json::object snapshot = Encoded(collector.Collect(plan));
  EXPECT_LE(json::serialize(snapshot).size(), protocol::kMaxPayloadBytes);
  ASSERT_EQ(snapshot.at("results").as_array().size(), 12u);
  for (const json::value& result : snapshot.at("results").as_array()) {
    EXPECT_TRUE(result.at("truncated").as_bool());
    const std::string_view out = result.at("stdout").as_string();
    EXPECT_GT(out.size(), 10'000u);  // every one keeps a share, none is emptied for the rest
    EXPECT_EQ(out.back(), '\n');
  }
}

TEST(RunResultJsonTest, AKubectlKilledByASignalIsAFailureNotANegativeExitCode) {
  KubectlRun run;
  run.exit_code = -9;
  const json::object result = protocol::EncodeCommandResult(RunResult(run, 0));
  EXPECT_EQ(result.at("error").at("code").as_string(), "failed");
  EXPECT_NE(result.at("error").at("message").as_string().find("signal 9"), json::string::npos);
  EXPECT_FALSE(result.contains("exit_code"));
}

TEST_F(SnapshotTest, WithoutPodListingsInThePlanNoPodIsLookedAt) {
  DeclareClusterMetrics(registry_);
  SnapshotCollector collector(*runner_, clock_, registry_);
  ClusterPlan plan = DefaultClusterPlan();
  plan.failing_pod_logs = FailingPodLogs{};
  const json::object snapshot = Encoded(collector.Collect(plan));
  for (const json::value& result : snapshot.at("results").as_array()) {
    EXPECT_FALSE(result.at("name").as_string().starts_with("logs/"));
  }
}

// A plan's `get pods` without -n lists `default`, as kubectl reads it: failing pods are looked
// for there, not in every namespace (the stand-in answers only -A with ml's failing pod).
TEST_F(SnapshotTest, FailingPodsAreLookedForInThePlansNamespacesOnly) {
  DeclareClusterMetrics(registry_);
  SnapshotCollector collector(*runner_, clock_, registry_);
  ClusterPlan plan;
  plan.commands = {{"pods", {"kubectl", "get", "pods"}}};
  plan.failing_pod_logs = FailingPodLogs{};
  const json::object snapshot = Encoded(collector.Collect(plan));
  ASSERT_NE(ResultNamed(snapshot, "pods"), nullptr);
  EXPECT_EQ(ResultNamed(snapshot, "logs/ml/trainer-0"), nullptr)
      << "the query was widened to every namespace";

  plan.commands = {{"pods", {"kubectl", "get", "pods", "-A"}}};
  EXPECT_NE(ResultNamed(Encoded(collector.Collect(plan)), "logs/ml/trainer-0"), nullptr);
}

TEST_F(SnapshotTest, ACancelledCycleStopsBeforeTheNextCommand) {
  DeclareClusterMetrics(registry_);
  SnapshotCollector collector(*runner_, clock_, registry_);
  std::atomic<bool> cancel{true};
  const json::object snapshot = Encoded(collector.Collect(DefaultClusterPlan(), &cancel));
  EXPECT_TRUE(snapshot.at("results").as_array().empty());
}

TEST(RunResultJsonTest, OutputThatIsNotUtf8StillMakesValidJson) {
  KubectlRun run;
  run.exit_code = 0;
  run.stdout_text = std::string("ok \xff\xfe bytes\0", 13);
  json::object result = protocol::EncodeCommandResult(RunResult(run, 0));
  const std::string text = json::serialize(result);
  EXPECT_TRUE(ParseJson(text).ok()) << text;
}

}  // namespace
}  // namespace uplink::agent::cluster
