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
  EXPECT_EQ(config->namespace_name, "uplink-workspaces");
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
  EXPECT_EQ(config->kubernetes_api_port, 6443);
  EXPECT_EQ(config->cluster_name, "prod-a");
  EXPECT_TRUE(config->ignored_keys.empty());
  auto newer = ParseExecutionConfig(Values(R"(, "gpuSharing": "mig")"));
  ASSERT_TRUE(newer.ok()) << newer.status().ToString();
  EXPECT_EQ(newer->ignored_keys, std::vector<std::string>{"gpuSharing"});
}

TEST(ExecutionConfigTest, RefusesWhatItCannotUseNamingTheField) {
  // The console's values are checked by protocol::DecodeExecutionValues (its own tests); these
  // show that the controller goes through it and says which field is wrong.
  const std::pair<std::string, std::string> cases[] = {
      {"[]", "no \"execution\" object"},
      {R"({"execution": 1})", "execution"},
      {R"({"execution": {"namespace": "x"}})", "execution.enabled is required"},
      {Values(R"(, "enabled": "yes")"), "execution.enabled must be true or false"},
      {R"({"execution": {"enabled": true, "workspaceImage": "debian:12"}})",
       "must be pinned by digest"},
  };
  for (const auto& [text, message] : cases) {
    auto config = ParseExecutionConfig(text);
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(message), std::string::npos)
        << text << " -> " << config.status().message();
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
      {replace(Values(), "86400", "59"), "maxLifetimeSeconds must be between 60"},
      {replace(Values(), "[\"gpu-node-0001\", \"gpu-node-0002\"]", "[]"), "nodes"},
      {replace(Values(), "\"gpu-node-0002\"", "\"../etc\""), "nodes[1]"},
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

}  // namespace
}  // namespace uplink::agent::workspace
