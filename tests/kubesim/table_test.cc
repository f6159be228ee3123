#include "kubesim/table.h"

#include <gtest/gtest.h>

#include "kubesim/cluster.h"

namespace uplink::kubesim {
namespace {

using std::chrono::seconds;

TEST(HumanDuration, FormatsAgesLikeKubectl) {
  EXPECT_EQ(HumanDuration(seconds(-5)), "<invalid>");
  EXPECT_EQ(HumanDuration(seconds(-1)), "0s");
  EXPECT_EQ(HumanDuration(seconds(45)), "45s");
  EXPECT_EQ(HumanDuration(seconds(119)), "119s");
  EXPECT_EQ(HumanDuration(seconds(300)), "5m");
  EXPECT_EQ(HumanDuration(seconds(330)), "5m30s");
  EXPECT_EQ(HumanDuration(seconds(3 * 3600 - 60)), "179m");
  EXPECT_EQ(HumanDuration(seconds(3 * 3600)), "3h");
  EXPECT_EQ(HumanDuration(seconds(5 * 3600 + 600)), "5h10m");
  EXPECT_EQ(HumanDuration(seconds(30 * 3600)), "30h");
  EXPECT_EQ(HumanDuration(seconds(2 * 86400)), "2d");
  EXPECT_EQ(HumanDuration(seconds(2 * 86400 + 4 * 3600)), "2d4h");
  EXPECT_EQ(HumanDuration(seconds(100 * 86400)), "100d");
  EXPECT_EQ(HumanDuration(seconds(395 * 86400)), "395d");
  EXPECT_EQ(HumanDuration(seconds(760 * 86400)), "2y30d");
  EXPECT_EQ(HumanDuration(seconds(3650 * 86400)), "10y");
}

TEST(AcceptsTable, RecognisesKubectlsAcceptHeader) {
  EXPECT_TRUE(AcceptsTable(
      "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"));
  EXPECT_TRUE(AcceptsTable("application/json; g=meta.k8s.io; v=v1; as=Table"));
  EXPECT_FALSE(AcceptsTable("application/json"));
  EXPECT_FALSE(AcceptsTable("application/json;as=Table;v=v1beta1;g=meta.k8s.io"));
  EXPECT_FALSE(AcceptsTable(""));
}

TEST(IncludeObject, DefaultsToMetadataAndRejectsUnknownValues) {
  EXPECT_EQ(*ParseIncludeObject(""), IncludeObject::kMetadata);
  EXPECT_EQ(*ParseIncludeObject("None"), IncludeObject::kNone);
  EXPECT_EQ(*ParseIncludeObject("Object"), IncludeObject::kObject);
  EXPECT_FALSE(ParseIncludeObject("everything").ok());
}

TEST(NodeTable, HasTheRealColumnsAndCordonedNodesShowSchedulingDisabled) {
  FakeClock clock;
  std::vector<json::object> nodes = GenerateNodes(ClusterShape{1, 8, 1, "v1.32.4"}, clock.Now());
  nodes[0]["spec"].as_object()["unschedulable"] = true;
  clock.Advance(std::chrono::hours(3));
  json::object table = BuildTable(*FindResource("", "v1", "nodes"), nodes,
                                  json::object{{"resourceVersion", "9"}}, IncludeObject::kMetadata,
                                  clock.Now());
  EXPECT_EQ(table["kind"], "Table");
  EXPECT_EQ(table["apiVersion"], "meta.k8s.io/v1");
  std::vector<std::string> names;
  std::vector<std::int64_t> priorities;
  for (const json::value& column : table["columnDefinitions"].as_array()) {
    names.emplace_back(column.at("name").as_string());
    priorities.push_back(column.at("priority").as_int64());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"Name", "Status", "Roles", "Age", "Version",
                                             "Internal-IP", "External-IP", "OS-Image",
                                             "Kernel-Version", "Container-Runtime"}));
  EXPECT_EQ(priorities, (std::vector<std::int64_t>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1}));
  const json::array& rows = table["rows"].as_array();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(ToJson(rows[0].at("cells")),
            R"(["gpu-node-0001","Ready,SchedulingDisabled","<none>","3h","v1.32.4","10.0.0.3","<none>","Ubuntu 22.04.5 LTS","5.15.0-134-generic","containerd://1.7.27"])");
  EXPECT_EQ(rows[1].at("cells").at(1), "Ready");
  EXPECT_EQ(rows[1].at("cells").at(2), "control-plane");
  EXPECT_EQ(rows[0].at("object").at("kind"), "PartialObjectMetadata");
  EXPECT_EQ(rows[0].at("object").at("metadata").at("labels").at("nvidia.com/gpu.present"), "true");
}

TEST(ConfigMapTable, CountsDataAndBinaryDataEntries) {
  FakeClock clock;
  json::object config_map{
      {"metadata", json::object{{"name", "c"}, {"creationTimestamp", FormatRfc3339(clock.Now())}}},
      {"data", json::object{{"a", "1"}, {"b", "2"}}},
      {"binaryData", json::object{{"z", "AA=="}}}};
  clock.Advance(std::chrono::seconds(42));
  json::object table = BuildTable(*FindResource("", "v1", "configmaps"), {config_map},
                                  json::object(), IncludeObject::kNone, clock.Now());
  const json::value& row = table["rows"].as_array().at(0);
  EXPECT_EQ(ToJson(row.at("cells")), R"(["c",3,"42s"])");
  EXPECT_FALSE(row.as_object().contains("object"));
}

TEST(SecretTable, ShowsTypeAndKeyCountButNeverTheData) {
  FakeClock clock;
  json::object secret{
      {"metadata", json::object{{"name", "agent"}, {"creationTimestamp", FormatRfc3339(clock.Now())}}},
      {"type", "Opaque"},
      {"data", json::object{{"UPLINK_AGENT_TOKEN", "c2VjcmV0"}, {"other", "eA=="}}}};
  clock.Advance(std::chrono::minutes(5));
  json::object table = BuildTable(*FindResource("", "v1", "secrets"), {secret}, json::object(),
                                  IncludeObject::kMetadata, clock.Now());
  std::vector<std::string> names;
  for (const json::value& column : table["columnDefinitions"].as_array()) {
    names.emplace_back(column.at("name").as_string());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"Name", "Type", "Data", "Age"}));
  const json::value& row = table["rows"].as_array().at(0);
  EXPECT_EQ(ToJson(row.at("cells")), R"(["agent","Opaque",2,"5m"])");
  EXPECT_EQ(ToJson(table).find("c2VjcmV0"), std::string::npos);
}

}  // namespace
}  // namespace uplink::kubesim
