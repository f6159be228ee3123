#include "agent/inventory/report.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/json.h"
#include "support/fake_http.h"

namespace uplink::agent::inventory {
namespace {

using testing::Fixture;

// A node's entry and a report as the agent sends them.
json::object Entry(const json::value& node) {
  return protocol::EncodeInventoryNode(DescribeNode(node));
}
json::object Body(const Report& report) { return protocol::EncodeInventoryReport(report.message); }

json::value FixtureJson(const std::string& path) {
  auto parsed = ParseJson(Fixture(path), JsonLimits{.max_bytes = 8 << 20});
  EXPECT_TRUE(parsed.ok()) << path << ": " << parsed.status().ToString();
  return parsed.value_or(json::value());
}

// A node built around real GPU Feature Discovery labels.
json::value NodeWithLabels(const json::value& labels, json::object capacity) {
  return json::object{
      {"metadata", json::object{{"name", "h100-0"}, {"uid", "uid-h100-0"}, {"labels", labels}}},
      {"spec", json::object{}},
      {"status", json::object{{"capacity", capacity},
                              {"allocatable", capacity},
                              {"conditions", json::array{json::object{{"type", "Ready"},
                                                                      {"status", "True"}}}}}}};
}

TEST(Report, TheRealA16VgpuNodeIsReportedWithItsProductAndCounts) {
  json::value list = FixtureJson("edgexr-gpu-node-a16-vgpu-nodelist.json");
  std::vector<json::value> nodes(list.at("items").as_array().begin(),
                                 list.at("items").as_array().end());
  Report report = BuildReport("cluster-uid", "nvidia.com/gpu.present=true",
                              FromUnixSeconds(1'800'000'000), nodes);
  const json::object body = Body(report);
  EXPECT_EQ(body.at("cluster_uid"), "cluster-uid");
  EXPECT_EQ(body.at("selector"), "nvidia.com/gpu.present=true");
  EXPECT_EQ(body.at("agent_version"), UPLINK_VERSION);
  EXPECT_EQ(body.at("collected_at"), "2027-01-15T08:00:00Z");
  ASSERT_EQ(body.at("nodes").as_array().size(), 1u);
  const json::value& node = body.at("nodes").as_array()[0];
  EXPECT_EQ(node.at("name"), "nori");
  EXPECT_FALSE(node.at("uid").as_string().empty());
  EXPECT_EQ(node.at("ready"), true);
  EXPECT_EQ(node.at("unschedulable"), false);
  EXPECT_EQ(node.at("gpu_resource"), "nvidia.com/gpu");
  EXPECT_EQ(node.at("gpu_capacity"), 1);
  EXPECT_EQ(node.at("gpu_allocatable"), 1);
  EXPECT_EQ(node.at("gpu_product"), "NVIDIA-A16-4Q");
  EXPECT_EQ(node.at("resources"),
            json::parse(R"({"nvidia.com/gpu":{"capacity":1,"allocatable":1}})"));
  EXPECT_EQ(node.at("taints"), json::array());
  EXPECT_FALSE(node.as_object().contains("error"));
  EXPECT_EQ(report.summary.nodes, 1);
  EXPECT_EQ(report.summary.gpus, 1);
}

TEST(Report, NodesWithoutGpusAreListedWithEmptyGpuFields) {
  json::value list = FixtureJson("sonobuoy-kind-v1.20/core_v1_nodes.json");
  json::object entry = Entry(list.at("items").as_array()[0]);
  EXPECT_EQ(entry.at("name"), "kind-control-plane");
  EXPECT_EQ(entry.at("gpu_resource"), "");
  EXPECT_EQ(entry.at("gpu_capacity"), 0);
  EXPECT_EQ(entry.at("resources"), json::object());
  EXPECT_EQ(entry.at("taints"),
            json::parse(R"([{"key":"node-role.kubernetes.io/master","value":"","effect":"NoSchedule"}])"));
  EXPECT_FALSE(entry.contains("error"));
}

TEST(Report, AnH100InSingleMigStrategyReportsWholeGpusAndTheProductLabel) {
  json::value labels = FixtureJson("nvidia-cloud-native-docs/mig-node-labels.json");
  json::object entry = Entry(NodeWithLabels(labels, {{"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(entry.at("gpu_resource"), "nvidia.com/gpu");
  EXPECT_EQ(entry.at("gpu_capacity"), 1);
  EXPECT_EQ(entry.at("gpu_product"), "NVIDIA-H100-80GB-HBM3");
}

TEST(Report, AnH100InMixedMigStrategyReportsEveryMigProfile) {
  json::value labels = FixtureJson("nvidia-cloud-native-docs/mig-mixed-node-labels.json");
  // The counts the device plugin advertises match the labels: 2x 1g.10gb, 1x 2g.20gb, 1x 3g.40gb.
  json::object entry = Entry(NodeWithLabels(labels, {{"nvidia.com/gpu", "0"},
                                                     {"nvidia.com/mig-1g.10gb", "2"},
                                                     {"nvidia.com/mig-2g.20gb", "1"},
                                                     {"nvidia.com/mig-3g.40gb", "1"},
                                                     {"cpu", "64"}}));
  EXPECT_FALSE(entry.contains("error")) << entry;
  EXPECT_EQ(entry.at("gpu_resource"), "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(entry.at("gpu_capacity"), 2);
  EXPECT_EQ(entry.at("gpu_product"), "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb");
  const json::object& resources = entry.at("resources").as_object();
  EXPECT_EQ(resources.size(), 4u);
  EXPECT_EQ(resources.at("nvidia.com/mig-3g.40gb"),
            json::parse(R"({"capacity":1,"allocatable":1})"));
  EXPECT_FALSE(resources.contains("cpu"));
}

TEST(Report, AnAmdNodeUsesTheProductNameOrElseNamesTheDeviceId) {
  json::object named =
      Entry(NodeWithLabels(json::object{{"amd.com/gpu.product-name", "AMD_Instinct_MI300X_OAM"}},
                           {{"amd.com/gpu", "8"}}));
  EXPECT_EQ(named.at("gpu_resource"), "amd.com/gpu");
  EXPECT_EQ(named.at("gpu_capacity"), 8);
  EXPECT_EQ(named.at("gpu_product"), "AMD_Instinct_MI300X_OAM");
  json::object by_id = Entry(
      NodeWithLabels(json::object{{"amd.com/gpu.device-id", "74a1"}}, {{"amd.com/gpu", "8"}}));
  EXPECT_EQ(by_id.at("gpu_product"), "amd.com/gpu.device-id=74a1");
}

TEST(Report, CordonedTaintedAndNotReadyNodesSayWhatTheyAre) {
  json::value node = json::parse(R"({
    "metadata": {"name": "n1", "uid": "u1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
    "spec": {"unschedulable": true, "taints": [
      {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
      {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}]},
    "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "7"},
               "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "Unknown"}]}
  })");
  json::object entry = Entry(node);
  EXPECT_EQ(entry.at("unschedulable"), true);
  EXPECT_EQ(entry.at("ready"), false);
  EXPECT_EQ(entry.at("gpu_capacity"), 8);
  EXPECT_EQ(entry.at("gpu_allocatable"), 7);
  EXPECT_EQ(entry.at("taints"), json::parse(R"([
      {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"},
      {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}])"));
}

TEST(Report, OneMalformedNodeCarriesAnErrorWhileTheOthersAreReportedNormally) {
  json::value list = FixtureJson("edgexr-gpu-node-a16-vgpu-nodelist.json");
  json::value good = list.at("items").as_array()[0];
  json::value bad = good;
  bad.at("metadata").as_object()["name"] = "gpu-node-0002";
  bad.at("status").at("capacity").as_object()["nvidia.com/gpu"] = "eight";
  json::value fractional = good;
  fractional.at("metadata").as_object()["name"] = "gpu-node-0003";
  fractional.at("status").at("allocatable").as_object()["nvidia.com/gpu"] = "1500m";

  Report report = BuildReport("uid", "sel", FromUnixSeconds(0),
                              {good, bad, fractional, json::value("not a node")});
  const json::object body = Body(report);
  const json::array& nodes = body.at("nodes").as_array();
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_FALSE(nodes[0].as_object().contains("error"));
  EXPECT_EQ(nodes[0].at("gpu_capacity"), 1);

  EXPECT_EQ(nodes[1].at("name"), "gpu-node-0002");
  EXPECT_EQ(nodes[1].at("error"),
            "status.capacity[nvidia.com/gpu]: 'eight' is not a Kubernetes quantity");
  EXPECT_EQ(nodes[1].at("gpu_resource"), "");
  EXPECT_EQ(nodes[1].at("gpu_capacity"), 0);
  EXPECT_EQ(nodes[1].at("resources"), json::object());
  EXPECT_EQ(nodes[1].at("ready"), true) << "what could be read is still reported";

  EXPECT_EQ(nodes[2].at("error"),
            "status.allocatable[nvidia.com/gpu]: quantity '1500m' is not a whole number");
  EXPECT_EQ(nodes[3].at("error"), "the node is not a JSON object");

  EXPECT_EQ(report.summary.nodes, 4);
  EXPECT_EQ(report.summary.nodes_with_errors, 3);
  EXPECT_EQ(report.summary.gpus, 1);
}

TEST(Report, StructurallyOddNodesGetAnErrorInsteadOfACrash) {
  const char* cases[][2] = {
      {R"({"metadata": {}})", "metadata.name is missing"},
      {R"({"metadata": {"name": "a"}, "status": {"capacity": ["nvidia.com/gpu"]}})",
       "status.capacity is not an object"},
      {R"({"metadata": {"name": "a"}, "status": {"capacity": {"nvidia.com/gpu": 8}}})",
       "status.capacity[nvidia.com/gpu]: is not a quantity string"},
      {R"({"metadata": {"name": "a"}, "spec": {"taints": "all"}})", "spec.taints is not a list"},
      {R"({"metadata": {"name": "a"}, "spec": {"taints": [{"effect": "NoSchedule"}]}})",
       "spec.taints has an entry without a key"},
      {R"({"metadata": {"name": "a"}, "spec": {"unschedulable": "yes"}})",
       "spec.unschedulable is not true or false"},
      {R"({"metadata": {"name": "a"}, "status": {"conditions": {"Ready": true}}})",
       "status.conditions is not a list"},
      {R"({"metadata": {"name": "a"}, "status": {"capacity": {"nvidia.com/gpu": "-2"}}})",
       "negative"},
  };
  for (const auto& [text, expected] : cases) {
    json::object entry = Entry(json::parse(text));
    ASSERT_TRUE(entry.contains("error")) << text;
    EXPECT_NE(std::string(entry.at("error").as_string()).find(expected), std::string::npos)
        << entry.at("error");
  }
}

// Every entry DescribeNode makes must pass the console's per-node bounds (docs/protocol.md).
void ExpectWithinProtocolBounds(const json::object& entry) {
  size_t name_size = entry.at("name").as_string().size();
  EXPECT_GE(name_size, 1u);
  EXPECT_LE(name_size, 253u);
  EXPECT_LE(entry.at("uid").as_string().size(), 128u);
  EXPECT_LE(entry.at("gpu_resource").as_string().size(), 253u);
  for (const char* count : {"gpu_capacity", "gpu_allocatable"}) {
    EXPECT_GE(entry.at(count).as_int64(), 0);
    EXPECT_LE(entry.at(count).as_int64(), 1'000'000);
  }
  EXPECT_LE(entry.at("gpu_product").as_string().size(), 256u);
  EXPECT_LE(entry.at("resources").as_object().size(), 64u);
  for (const auto& resource : entry.at("resources").as_object()) {
    EXPECT_LE(resource.key().size(), 253u);
    EXPECT_LE(resource.value().at("capacity").as_int64(), 1'000'000);
  }
  EXPECT_LE(entry.at("taints").as_array().size(), 64u);
  for (const json::value& taint : entry.at("taints").as_array()) {
    for (const auto& part : taint.as_object()) EXPECT_LE(part.value().as_string().size(), 256u);
  }
  if (entry.contains("error")) {
    EXPECT_LE(entry.at("error").as_string().size(), 1024u);
  }
}

json::object NodeNamed(std::string name) {
  return json::object{{"metadata", json::object{{"name", std::move(name)}, {"uid", "u1"}}},
                      {"spec", json::object{}},
                      {"status", json::object{{"capacity", json::object{{"nvidia.com/gpu", "8"}}},
                                              {"allocatable", json::object{{"nvidia.com/gpu", "8"}}}}}};
}

TEST(Report, GpuCountsAboveAMillionBecomeTheNodesErrorInsteadOfFailingTheReport) {
  json::object node = NodeNamed("big");
  node["status"].as_object()["capacity"] = json::object{{"nvidia.com/gpu", "2M"}};
  json::object entry = Entry(node);
  ASSERT_TRUE(entry.contains("error")) << entry;
  EXPECT_NE(std::string(entry.at("error").as_string()).find("1000000"), std::string::npos)
      << entry.at("error");
  EXPECT_EQ(entry.at("gpu_capacity"), 0);
  EXPECT_EQ(entry.at("resources"), json::object());
  ExpectWithinProtocolBounds(entry);
}

TEST(Report, MoreThan64TaintsOrAnOverlongTaintBecomeTheNodesError) {
  json::array many;
  for (int i = 0; i < 65; ++i) {
    many.push_back(json::object{{"key", "k" + std::to_string(i)}, {"effect", "NoSchedule"}});
  }
  json::object node = NodeNamed("tainted");
  node["spec"].as_object()["taints"] = many;
  json::object entry = Entry(node);
  ASSERT_TRUE(entry.contains("error")) << entry;
  EXPECT_NE(std::string(entry.at("error").as_string()).find("65 entries"), std::string::npos);
  ExpectWithinProtocolBounds(entry);

  many.resize(64);
  node["spec"].as_object()["taints"] = many;
  EXPECT_FALSE(Entry(node).contains("error")) << "64 taints are within the bounds";

  node["spec"].as_object()["taints"] =
      json::array{json::object{{"key", "k"}, {"value", std::string(257, 'v')}, {"effect", "NoSchedule"}}};
  entry = Entry(node);
  ASSERT_TRUE(entry.contains("error")) << entry;
  EXPECT_EQ(entry.at("taints"), json::array());
  ExpectWithinProtocolBounds(entry);
}

TEST(Report, TooManyOrOverlongGpuResourceNamesBecomeTheNodesError) {
  json::object node = NodeNamed("mig");
  json::object capacity;
  for (int i = 0; i < 65; ++i) capacity["nvidia.com/mig-" + std::to_string(i) + "g.10gb"] = "1";
  node["status"].as_object()["capacity"] = capacity;
  node["status"].as_object()["allocatable"] = capacity;
  json::object entry = Entry(node);
  ASSERT_TRUE(entry.contains("error")) << entry;
  EXPECT_NE(std::string(entry.at("error").as_string()).find("at most 64"), std::string::npos);
  ExpectWithinProtocolBounds(entry);

  node["status"].as_object()["capacity"] =
      json::object{{"nvidia.com/mig-" + std::string(250, 'x'), "1"}};
  node["status"].as_object()["allocatable"] = json::object();
  entry = Entry(node);
  ASSERT_TRUE(entry.contains("error")) << entry;
  EXPECT_NE(std::string(entry.at("error").as_string()).find("longer than 253"), std::string::npos);
  ExpectWithinProtocolBounds(entry);
}

TEST(Report, OverlongNamesUidsProductsAndErrorsAreCutOrMarkedToStayWithinTheBounds) {
  // A product label is only shown: cutting it (at a character boundary) is harmless.
  json::object node = NodeNamed("n1");
  std::string product = std::string(255, 'p') + "\u00e9\u00e9";  // 255 + 2 two-byte characters
  node["metadata"].as_object()["labels"] =
      json::object{{"nvidia.com/gpu.product", json::parse("\"" + product + "\"")}};
  json::object entry = Entry(node);
  EXPECT_FALSE(entry.contains("error")) << entry;
  EXPECT_EQ(entry.at("gpu_product").as_string(), std::string(255, 'p'));

  // A name identifies the node: cut, and the node says so.
  entry = Entry(NodeNamed(std::string(300, 'n')));
  ASSERT_TRUE(entry.contains("error"));
  EXPECT_EQ(entry.at("name").as_string().size(), 253u);
  EXPECT_EQ(entry.at("gpu_capacity"), 0);
  ExpectWithinProtocolBounds(entry);

  node = NodeNamed("n2");
  node["metadata"].as_object()["uid"] = std::string(129, 'u');
  entry = Entry(node);
  ASSERT_TRUE(entry.contains("error"));
  ExpectWithinProtocolBounds(entry);

  // An error quoting a long resource name is cut to 1024 bytes.
  node = NodeNamed("n3");
  node["status"].as_object()["capacity"] =
      json::object{{"nvidia.com/mig-" + std::string(200, 'x'), std::string(2000, '9') + "x"}};
  entry = Entry(node);
  ASSERT_TRUE(entry.contains("error"));
  ExpectWithinProtocolBounds(entry);

  // A node without a name is still listed under a placeholder (the console needs one).
  entry = Entry(json::parse(R"({"metadata": {}})"));
  EXPECT_EQ(entry.at("name"), "(no name)");
  ExpectWithinProtocolBounds(entry);
  ExpectWithinProtocolBounds(Entry(json::value("not a node")));
}

TEST(Report, TheGpuTotalSaturatesInsteadOfOverflowing) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(SaturatingAdd(kMax - 1, 1'000'000), kMax);
  EXPECT_EQ(SaturatingAdd(kMax, kMax), kMax);
  EXPECT_EQ(SaturatingAdd(40, 2), 42);
}

TEST(Report, OnlyGpuResourcesAreRecognised) {
  EXPECT_TRUE(IsGpuResource("nvidia.com/gpu"));
  EXPECT_TRUE(IsGpuResource("amd.com/gpu"));
  EXPECT_TRUE(IsGpuResource("nvidia.com/mig-1g.10gb"));
  EXPECT_FALSE(IsGpuResource("nvidia.com/mig-"));
  EXPECT_FALSE(IsGpuResource("nvidia.com/gpu.shared"));
  EXPECT_FALSE(IsGpuResource("cpu"));
}

}  // namespace
}  // namespace uplink::agent::inventory
