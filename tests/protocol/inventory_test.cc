// Contract tests of POST /api/v1/agent/inventory (protocol/inventory.h): the inventory role's
// report of real clusters' nodes, and of nodes at and past every bound, as the console reads
// it; the console's reply as the role reads it.
#include "protocol/inventory.h"

#include <gtest/gtest.h>

#include "agent/inventory/report.h"
#include "common/json.h"
#include "support/fake_http.h"

namespace uplink::protocol {
namespace {

// The report as the console parses it off the wire.
Result<InventoryReport> OverTheWire(const InventoryReport& report) {
  auto parsed = ParseJson(json::serialize(EncodeInventoryReport(report)),
                          JsonLimits{kMaxReportBytes, kMaxReportDepth});
  if (!parsed.ok()) return parsed.status();
  return DecodeInventoryReport(*parsed);
}

void ExpectSameNodes(const InventoryReport& sent, const InventoryReport& read) {
  ASSERT_EQ(read.nodes.size(), sent.nodes.size());
  for (size_t i = 0; i < sent.nodes.size(); ++i) {
    const InventoryNode& a = sent.nodes[i];
    const InventoryNode& b = read.nodes[i];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.uid, a.uid);
    EXPECT_EQ(b.ready, a.ready);
    EXPECT_EQ(b.unschedulable, a.unschedulable);
    EXPECT_EQ(b.gpu_resource, a.gpu_resource);
    EXPECT_EQ(b.gpu_capacity, a.gpu_capacity);
    EXPECT_EQ(b.gpu_allocatable, a.gpu_allocatable);
    EXPECT_EQ(b.gpu_product, a.gpu_product);
    EXPECT_EQ(b.error, a.error);
    ASSERT_EQ(b.resources.size(), a.resources.size()) << a.name;
    for (size_t r = 0; r < a.resources.size(); ++r) {
      EXPECT_EQ(b.resources[r].name, a.resources[r].name);
      EXPECT_EQ(b.resources[r].capacity, a.resources[r].capacity);
      EXPECT_EQ(b.resources[r].allocatable, a.resources[r].allocatable);
    }
    ASSERT_EQ(b.taints.size(), a.taints.size()) << a.name;
    for (size_t t = 0; t < a.taints.size(); ++t) {
      EXPECT_EQ(b.taints[t].key, a.taints[t].key);
      EXPECT_EQ(b.taints[t].value, a.taints[t].value);
      EXPECT_EQ(b.taints[t].effect, a.taints[t].effect);
    }
  }
}

TEST(InventoryContract, RealClustersNodesReachTheConsoleAsTheAgentDescribedThem) {
  for (const char* fixture :
       {"edgexr-gpu-node-a16-vgpu-nodelist.json", "sonobuoy-kind-v1.20/core_v1_nodes.json"}) {
    auto list = ParseJson(testing::Fixture(fixture), JsonLimits{.max_bytes = 8 << 20});
    ASSERT_TRUE(list.ok()) << fixture;
    agent::inventory::ReportBuilder builder;
    for (const json::value& node : list->at("items").as_array()) builder.Add(node);
    agent::inventory::Report report = std::move(builder).Finish(
        "5f0c7a8e-kube-system", "nvidia.com/gpu.present=true", FromUnixSeconds(1'800'000'000));
    report.message.agent_instance = "uplink-agent-inventory-7d9f8c-x2v4q";
    auto read = OverTheWire(report.message);
    ASSERT_TRUE(read.ok()) << fixture << ": " << read.status().ToString();
    EXPECT_EQ(read->agent_version, UPLINK_VERSION);
    EXPECT_EQ(read->agent_instance, "uplink-agent-inventory-7d9f8c-x2v4q");
    EXPECT_EQ(read->cluster_uid, "5f0c7a8e-kube-system");
    EXPECT_EQ(read->selector, "nvidia.com/gpu.present=true");
    EXPECT_EQ(read->collected_at, FromUnixSeconds(1'800'000'000));
    ExpectSameNodes(report.message, *read);
  }
}

// A node object with `labels`, `capacity` and `taints` as Kubernetes would serve it.
json::value NodeObject(std::string name, json::object capacity, json::array taints,
                       json::object labels = {}) {
  return json::object{
      {"metadata",
       json::object{{"name", std::move(name)}, {"uid", "u-1"}, {"labels", std::move(labels)}}},
      {"spec", json::object{{"taints", std::move(taints)}}},
      {"status", json::object{{"capacity", capacity}, {"allocatable", capacity}}}};
}

TEST(InventoryContract, NodesAtAndPastEveryBoundAreStillAReportTheConsoleTakes) {
  json::array many_taints;
  for (int i = 0; i < 65; ++i) {
    many_taints.push_back(json::object{{"key", "k" + std::to_string(i)}, {"effect", "NoSchedule"}});
  }
  json::array taints_at_bound(many_taints.begin(), many_taints.begin() + 64);
  json::object many_migs;
  for (int i = 0; i < 65; ++i) many_migs["nvidia.com/mig-" + std::to_string(i) + "g.10gb"] = "1";
  json::object long_taint_value{
      {"key", "k"}, {"value", std::string(300, 'v')}, {"effect", "NoSchedule"}};
  std::vector<json::value> nodes = {
      NodeObject("taints-at-bound", {{"nvidia.com/gpu", "8"}}, taints_at_bound),
      NodeObject("too-many-taints", {{"nvidia.com/gpu", "8"}}, many_taints),
      NodeObject("too-many-migs", many_migs, {}),
      NodeObject(std::string(300, 'n') + "\xc3\xa9", {{"nvidia.com/gpu", "8"}}, {}),
      NodeObject("gpus-past-bound", {{"nvidia.com/gpu", "2000000"}}, {}),
      NodeObject("not-a-quantity", {{"amd.com/gpu", "eight"}}, {}),
      NodeObject("long-taint", {{"nvidia.com/gpu", "1"}}, json::array{long_taint_value}),
      NodeObject("long-product", {{"nvidia.com/gpu", "1"}}, {},
                 {{"nvidia.com/gpu.product", std::string(1000, 'p')}}),
      json::value("not a node"),
  };
  agent::inventory::Report report = agent::inventory::BuildReport(
      "uid", std::string(kMaxSelectorBytes, 's'), FromUnixSeconds(0), nodes);
  auto read = OverTheWire(report.message);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameNodes(report.message, *read);
  EXPECT_FALSE(read->nodes[0].error) << "64 taints are within the bounds";
  EXPECT_EQ(read->nodes[0].taints.size(), kMaxTaintsPerNode);
  for (size_t i = 1; i < nodes.size(); ++i) {
    if (i == 7) continue;  // a long product is cut, not an error
    EXPECT_TRUE(read->nodes[i].error) << i;
  }
  EXPECT_EQ(read->nodes[7].gpu_product.size(), kMaxInventoryTextBytes);
}

TEST(InventoryReplyContract, TheAgentTakesTheConsolesAcceptanceIntervalAndExpiry) {
  InventoryReply sent{true, "c0ffee", 120, FromUnixSeconds(1'900'000'000)};
  auto wire = ParseJson(json::serialize(EncodeInventoryReply(sent)));
  ASSERT_TRUE(wire.ok());
  InventoryReply read = DecodeInventoryReply(*wire);
  EXPECT_TRUE(read.accepted);
  EXPECT_EQ(read.connection_id, "c0ffee");
  EXPECT_EQ(read.report_interval_seconds, 120);
  EXPECT_EQ(read.expires_at, sent.expires_at);
}

TEST(InventoryReplyDecode, NothingButTheValueTrueIsAnAcceptance) {
  for (std::string_view body : {R"({})", R"({"accepted":"true"})", R"({"accepted":1})",
                                R"({"accepted":false})", R"([true])", R"(null)"}) {
    auto parsed = ParseJson(body);
    ASSERT_TRUE(parsed.ok());
    EXPECT_FALSE(DecodeInventoryReply(*parsed).accepted) << body;
  }
  // Any number is an interval, whole seconds, however absurd: the agent bounds it.
  for (auto [body, seconds] :
       {std::pair<std::string_view, std::int64_t>{R"({"report_interval_seconds":59.9})", 59},
        std::pair<std::string_view, std::int64_t>{R"({"report_interval_seconds":1e300})",
                                                  1'000'000'000'000'000},
        std::pair<std::string_view, std::int64_t>{R"({"report_interval_seconds":-1e300})",
                                                  -1'000'000'000'000'000}}) {
    EXPECT_EQ(DecodeInventoryReply(*ParseJson(body)).report_interval_seconds, seconds) << body;
  }
  EXPECT_EQ(DecodeInventoryReply(*ParseJson(R"({"report_interval_seconds":"60"})"))
                .report_interval_seconds,
            std::nullopt);
  EXPECT_EQ(DecodeInventoryReply(*ParseJson(R"({"expires_at":"soon"})")).expires_at, std::nullopt);
}

TEST(InventoryDecode, RefusesHostileReports) {
  const std::string node =
      R"({"name":"n","ready":true,"unschedulable":false,"gpu_resource":"","gpu_capacity":0,)"
      R"("gpu_allocatable":0})";
  auto report = [&](const std::string& nodes, const std::string& head = R"("cluster_uid":"u")") {
    return R"({"agent_version":"1",)" + head + R"(,"nodes":[)" + nodes + "]}";
  };
  ASSERT_TRUE(DecodeInventoryReport(*ParseJson(report(node))).ok());
  for (const std::string& bad : std::vector<std::string>{
           report(node, R"("cluster_uid":"")"), report(node, R"("cluster_uid":"u","surprise":1)"),
           report(R"({"name":""})"), report(R"([])"),
           report(std::string(node).replace(node.find(R"("gpu_capacity":0)"), 16,
                                            R"("gpu_capacity":-1)")),
           report(node.substr(0, node.size() - 1) + R"(,"taints":[{"key":"k"}]})"),
           report(node, R"("cluster_uid":"u","collected_at":"yesterday")"), R"({"nodes":[]})",
           report(node, R"("cluster_uid":"u","agent_instance":"pod\u0000")"),
           R"({"agent_version":"1\n","cluster_uid":"u","nodes":[]})", "[]"}) {
    auto parsed = ParseJson(bad);
    ASSERT_TRUE(parsed.ok()) << bad;
    EXPECT_FALSE(DecodeInventoryReport(*parsed).ok()) << bad;
  }
}

}  // namespace
}  // namespace uplink::protocol
