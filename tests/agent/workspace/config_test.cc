// execution.json as the controller reads it: what it needs, what it refuses, and hostile
// input (wrong types, tags instead of digests, oversized and malformed documents).
#include "agent/workspace/config.h"

#include <gtest/gtest.h>

namespace uplink::agent::workspace {
namespace {

const std::string kDigest = std::string(64, 'a');

std::string Values(const std::string& extra = "") {
  return R"({"execution": {"enabled": true, "namespace": "uplink-workspaces",
    "workspaceImage": "registry.example:5000/uplink/workspace@sha256:)" + kDigest + R"(",
    "capacityGpus": 8, "maxLifetimeSeconds": 86400, "nodes": ["gpu-node-0001", "gpu-node-0002"],
    "sshEnabled": false)" + extra + "}}";
}

TEST(ExecutionConfigTest, ReadsTheConsolesValues) {
  auto config = ParseExecutionConfig(Values(
      R"(, "cluster": {"name": "prod-a"}, "kubernetesApi": {"cidrs": ["10.0.0.1/32"], "port": 6443},
          "runtimeClassName": "nvidia", "hostUsers": false, "tmpSize": "2Gi")"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->enabled);
  EXPECT_EQ(config->ns, "uplink-workspaces");
  EXPECT_EQ(config->capacity_gpus, 8);
  EXPECT_EQ(config->max_lifetime_seconds, 86400);
  EXPECT_EQ(config->nodes, (std::vector<std::string>{"gpu-node-0001", "gpu-node-0002"}));
  EXPECT_TRUE(config->IsApprovedNode("gpu-node-0002"));
  EXPECT_FALSE(config->IsApprovedNode("gpu-node-0003"));
  EXPECT_EQ(config->runtime_class_name, "nvidia");
  EXPECT_FALSE(config->host_users);
  EXPECT_EQ(config->tmp_size_bytes, 2ll << 30);
  EXPECT_EQ(config->priority_class_name, "uplink-workspace");
  // The chart's and the console's other keys are kept aside, not refused.
  EXPECT_EQ(config->ignored_keys, (std::vector<std::string>{"cluster", "kubernetesApi"}));
}

TEST(ExecutionConfigTest, RefusesWhatItCannotUseNamingTheField) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"[]", "not a JSON object"},
      {"{}", "execution is required"},
      {R"({"execution": 1})", "execution is required"},
      {R"({"execution": {}, "other": 1})", "unknown field \"other\""},
      {R"({"execution": {"namespace": "x"}})", "execution.enabled is required"},
      {Values(R"(, "enabled": "yes")"), "execution.enabled must be true or false"},
      {R"({"execution": {"enabled": true, "namespace": "Not_A_Namespace"}})",
       "execution.namespace is not a valid namespace name"},
      {R"({"execution": {"enabled": true, "namespace": "ws", "workspaceImage": "debian:12"}})",
       "must name the image by digest"},
      {R"({"execution": {"enabled": true, "namespace": "ws", "workspaceImage": "x@sha256:ABC"}})",
       "must name the image by digest"},
  };
  for (const Case& c : cases) {
    auto config = ParseExecutionConfig(c.text);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(c.message), std::string::npos)
        << c.text << " -> " << config.status().message();
  }
}

TEST(ExecutionConfigTest, RefusesBadNumbersNodesAndNames) {
  auto replace = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  const std::pair<std::string, std::string> cases[] = {
      {replace(Values(), "\"capacityGpus\": 8", "\"capacityGpus\": 0"), "capacityGpus must be between 1"},
      {replace(Values(), "\"capacityGpus\": 8", "\"capacityGpus\": 8.5"), "capacityGpus must be an integer"},
      {replace(Values(), "\"capacityGpus\": 8", "\"capacityGpus\": 18446744073709551615"),
       "capacityGpus must be between"},
      {replace(Values(), "86400", "59"), "maxLifetimeSeconds must be between 60"},
      {replace(Values(), "[\"gpu-node-0001\", \"gpu-node-0002\"]", "[]"), "nodes must list"},
      {replace(Values(), "[\"gpu-node-0001\", \"gpu-node-0002\"]", "\"gpu-node-0001\""), "nodes must list"},
      {replace(Values(), "\"gpu-node-0002\"", "\"../etc\""), "nodes[1] is not a valid node name"},
      {replace(Values(), "\"gpu-node-0002\"", "7"), "nodes[1] is not a valid node name"},
      {Values(R"(, "runtimeClassName": "NVIDIA RUNTIME")"), "runtimeClassName is not a valid"},
      {Values(R"(, "tmpSize": "lots")"), "tmpSize must be a quantity"},
      {Values(R"(, "tmpSize": "1k")"), "tmpSize must be a quantity"},
      {Values(R"(, "hostUsers": 0)"), "hostUsers must be true or false"},
  };
  for (const auto& [text, message] : cases) {
    auto config = ParseExecutionConfig(text);
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_NE(config.status().message().find(message), std::string::npos)
        << text << " -> " << config.status().message();
  }
}

TEST(ExecutionConfigTest, HostileDocumentsAreRefusedNotParsedWhole) {
  EXPECT_FALSE(ParseExecutionConfig(std::string(kMaxConfigBytes + 1, ' ')).ok());
  EXPECT_FALSE(ParseExecutionConfig(std::string(100, '[') + std::string(100, ']')).ok());
  EXPECT_FALSE(ParseExecutionConfig("{\"execution\": {\"enabled\": tru").ok());
  EXPECT_FALSE(ParseExecutionConfig("").ok());
  EXPECT_FALSE(ParseExecutionConfig(std::string("{\"execution\"\0:{}}", 17)).ok());
  EXPECT_FALSE(LoadExecutionConfig("/nonexistent/execution.json").ok());
}

TEST(ExecutionConfigTest, PinnedImagesOnly) {
  EXPECT_TRUE(IsPinnedImage("localhost/uplink-workspace@sha256:" + kDigest));
  EXPECT_TRUE(IsPinnedImage("r.example:5000/a/b@sha256:" + kDigest));
  EXPECT_FALSE(IsPinnedImage("@sha256:" + kDigest));
  EXPECT_FALSE(IsPinnedImage("debian:12"));
  EXPECT_FALSE(IsPinnedImage("debian:12@sha256:" + kDigest.substr(1)));
  EXPECT_FALSE(IsPinnedImage("debian@sha256:" + kDigest + "0"));
  EXPECT_FALSE(IsPinnedImage("Debian@sha256:" + kDigest));
  EXPECT_FALSE(IsPinnedImage("debian@sha512:" + kDigest));
}

}  // namespace
}  // namespace uplink::agent::workspace
