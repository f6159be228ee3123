// The node role: its plan from the console's reply, collections into the spool, /metrics
// text and readiness, over a fixture /proc tree and the in-memory file system.
#include "agent/node/role.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <thread>

#include "common/json.h"
#include "spool/fault_injection_fs.h"
#include "support/process.h"

namespace uplink::agent::node {
namespace {

using spool::testing::FsOp;
using spool::testing::MemoryFileSystem;

std::string Fixture(const std::string& name) {
  return std::string(UPLINK_SOURCE_DIR) + "/tests/fixtures/node/" + name + "/proc";
}

json::value Reply(std::string_view text) { return *ParseJson(text); }

TEST(PlanFromReply, TakesTheIntervalAndTheCollectorsItKnows) {
  auto plan = PlanFromReply(Reply(
      R"({"acked_through": 3, "plan": {"interval_seconds": 60,
          "collectors": ["cpu", "gpu", "quantum-flux"]}})"));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->has_value());
  EXPECT_EQ((*plan)->interval, std::chrono::seconds(60));
  CollectorSet expected;
  expected.Add(Collector::kCpu);
  expected.Add(Collector::kGpu);
  EXPECT_EQ((*plan)->collectors, expected);  // the unknown name is ignored
}

TEST(PlanFromReply, AReplyWithoutAPlanChangesNothing) {
  for (const char* reply : {R"({"acked_through": 3})", R"({"plan": null})", R"([1, 2])"}) {
    auto plan = PlanFromReply(Reply(reply));
    ASSERT_TRUE(plan.ok()) << reply;
    EXPECT_FALSE(plan->has_value()) << reply;
  }
}

TEST(PlanFromReply, RefusesAPlanOutOfItsBounds) {
  for (const char* reply :
       {R"({"plan": {"interval_seconds": 9}})", R"({"plan": {"interval_seconds": 3601}})",
        R"({"plan": {"interval_seconds": 30.5}})", R"({"plan": {"interval_seconds": "30"}})",
        R"({"plan": {"collectors": "cpu"}})", R"({"plan": {"collectors": [1]}})",
        R"({"plan": 30})"}) {
    EXPECT_EQ(PlanFromReply(Reply(reply)).status().code(), StatusCode::kInvalidArgument)
        << reply;
  }
}

TEST(ParseCollectorList, NamesEachCollectorAndRefusesUnknownOnes) {
  auto set = ParseCollectorList("cpu,memory,,gpu");
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->Has(Collector::kCpu) && set->Has(Collector::kMemory) &&
              set->Has(Collector::kGpu));
  EXPECT_FALSE(set->Has(Collector::kDisk));
  EXPECT_NE(ParseCollectorList("cpu,mem").status().message().find("unknown collector 'mem'"),
            std::string::npos);
  EXPECT_FALSE(ParseCollectorList("").ok());
}

class NodeRoleTest : public ::testing::Test {
 protected:
  NodeRoleTest() {
    DeclareNodeMetrics(registry);
    HostCollectorOptions options;
    options.host_proc = Fixture("real-capture");
    host = std::move(*HostCollector::Create(options));
    EXPECT_TRUE(fs.CreateDir("/var").ok());
  }

  std::unique_ptr<NodeRole> MakeRole(NodePlan plan = {}) {
    return std::make_unique<NodeRole>(NodeRoleOptions{.node_name = "gpu-node-7", .plan = plan},
                                      *host, nullptr, clock, registry);
  }

  std::unique_ptr<spool::Spool> OpenSpool() {
    auto opened = spool::Spool::Open(fs, "/var/spool", {}, clock);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return std::move(*opened);
  }

  metrics::Registry registry;
  FakeClock clock;
  MemoryFileSystem fs;
  std::unique_ptr<HostCollector> host;
};

TEST_F(NodeRoleTest, SpoolsEachCollectionAsANodeSamplePayload) {
  auto role = MakeRole();
  auto spool = OpenSpool();
  ASSERT_TRUE(role->CollectAndSpool(*spool).ok());
  clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(role->CollectAndSpool(*spool).ok());
  auto records = spool->Read(1 << 20, 10);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 2u);
  auto payload = ParseJson((*records)[1].payload);
  ASSERT_TRUE(payload.ok()) << (*records)[1].payload;
  const json::object& sample = payload->as_object();
  EXPECT_EQ(sample.at("kind"), "node_sample");
  EXPECT_EQ(sample.at("node"), "gpu-node-7");
  EXPECT_EQ(sample.at("collected_at").as_string(), FormatRfc3339Millis(clock.Now()));
  EXPECT_TRUE(sample.at("cpu").is_object());
  EXPECT_TRUE(sample.at("memory").is_object());
  EXPECT_EQ(registry.Get("uplink_agent_node_collections_total"), 2);
}

TEST_F(NodeRoleTest, CollectsOnlyWhatThePlanAsksFor) {
  CollectorSet only_load;
  only_load.Add(Collector::kLoad);
  auto role = MakeRole(NodePlan{std::chrono::seconds(30), only_load});
  NodeSample sample = role->Collect();
  EXPECT_TRUE(sample.load.has_value());
  EXPECT_FALSE(sample.cpu.has_value());
  EXPECT_FALSE(sample.memory.has_value());
  EXPECT_TRUE(sample.disks.empty());
  // The console's plan takes over from the next collection.
  role->TakePlanFrom(Reply(R"({"plan": {"interval_seconds": 120, "collectors": ["memory"]}})"));
  EXPECT_EQ(role->plan().interval, std::chrono::seconds(120));
  EXPECT_EQ(registry.Get("uplink_agent_node_interval_seconds"), 120);
  sample = role->Collect();
  EXPECT_TRUE(sample.memory.has_value());
  EXPECT_FALSE(sample.load.has_value());
  // A malformed plan keeps the current one.
  role->TakePlanFrom(Reply(R"({"plan": {"interval_seconds": 1}})"));
  EXPECT_EQ(role->plan().interval, std::chrono::seconds(120));
}

TEST_F(NodeRoleTest, MetricsShowTheLatestCollectionUnderNodeExportersNames) {
  auto role = MakeRole();
  std::string text;
  role->AppendLatest(text);
  EXPECT_TRUE(text.empty());  // nothing collected yet
  (void)role->Collect();
  role->AppendLatest(text);
  EXPECT_NE(text.find("node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"}"), std::string::npos);
  EXPECT_NE(text.find("node_memory_MemTotal_bytes "), std::string::npos);
}

TEST_F(NodeRoleTest, ReadinessFollowsCollectionAndSpooling) {
  auto role = MakeRole();
  auto spool = OpenSpool();
  EXPECT_FALSE(role->CheckReadiness().ready);
  ASSERT_TRUE(role->CollectAndSpool(*spool).ok());
  EXPECT_TRUE(role->CheckReadiness().ready) << role->CheckReadiness().reason;

  // A full disk loses the sample, counts it and says so.
  fs.SetCapacity(fs.UsedBytes());
  EXPECT_FALSE(role->CollectAndSpool(*spool).ok());
  Readiness full = role->CheckReadiness();
  EXPECT_FALSE(full.ready);
  EXPECT_NE(full.reason.find("no space left on device"), std::string::npos) << full.reason;
  EXPECT_EQ(registry.Get("uplink_agent_node_spool_append_failures_total"), 1);
  fs.SetCapacity(std::nullopt);
  ASSERT_TRUE(role->CollectAndSpool(*spool).ok());
  EXPECT_TRUE(role->CheckReadiness().ready);

  // No sample spooled for longer than max(150 s, 2.5 intervals).
  clock.Advance(std::chrono::seconds(151));
  Readiness stale = role->CheckReadiness();
  EXPECT_FALSE(stale.ready);
  EXPECT_NE(stale.reason.find("no sample spooled for over 150 s"), std::string::npos);
}

TEST_F(NodeRoleTest, AHostWhoseProcCannotBeReadIsNotReadyAndSaysWhy) {
  HostCollectorOptions options;
  options.host_proc = "/nonexistent/proc";
  auto unreadable = std::move(*HostCollector::Create(options));
  NodeRole role(NodeRoleOptions{.node_name = "n"}, *unreadable, nullptr, clock, registry);
  NodeSample sample = role.Collect();
  EXPECT_FALSE(sample.cpu.has_value());
  EXPECT_FALSE(sample.gaps.empty());
  Readiness readiness = role.CheckReadiness();
  EXPECT_FALSE(readiness.ready);
  EXPECT_NE(readiness.reason.find("could not read cpu: /nonexistent/proc/stat"),
            std::string::npos)
      << readiness.reason;
}

TEST_F(NodeRoleTest, RunCollectsAtOnceAndStopsWhenAsked) {
  auto role = MakeRole();
  auto spool = OpenSpool();
  StopSignal stop;
  std::thread runner([&] { role->Run(*spool, stop); });
  ASSERT_TRUE(::uplink::testing::WaitFor([&] { return spool->Stats().last_sequence >= 1; }));
  stop.Stop();
  runner.join();
  EXPECT_EQ(spool->Stats().last_sequence, 1u);  // the next one was 30 s away
}

TEST_F(NodeRoleTest, ANewIntervalFromTheConsoleCountsFromTheLastCollection) {
  auto role = MakeRole();  // 30 s until the console says otherwise
  auto spool = OpenSpool();
  StopSignal stop;
  std::thread runner([&] { role->Run(*spool, stop); });
  ASSERT_TRUE(::uplink::testing::WaitFor([&] { return spool->Stats().last_sequence >= 1; }));
  role->TakePlanFrom(Reply(R"({"plan": {"interval_seconds": 10}})"));
  clock.Advance(std::chrono::seconds(10));
  // Due now under the new plan, though the old one had 20 s to go.
  EXPECT_TRUE(::uplink::testing::WaitFor([&] { return spool->Stats().last_sequence >= 2; }));
  stop.Stop();
  runner.join();
}

}  // namespace
}  // namespace uplink::agent::node
