// The rules an agent's call meets before anything is stored, without a database.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <vector>

#include "console/store/rules/connection_rules.h"

namespace uplink::console {
namespace {

using std::chrono::seconds;

const WallTime kNow = WallTime(std::chrono::hours(24 * 20000));

StoredAgentToken Live() { return {"hash-a", kNow + seconds(60), false, false}; }

TEST(ConnectionRules, TheTokenTheCallBeganWithMustStillBeTheLiveOne) {
  EXPECT_TRUE(AgentTokenStillLive(Live(), "hash-a", kNow));
  EXPECT_FALSE(AgentTokenStillLive(Live(), "hash-b", kNow));  // rotated meanwhile
  StoredAgentToken revoked = Live();
  revoked.revoked = true;
  EXPECT_FALSE(AgentTokenStillLive(revoked, "hash-a", kNow));
  StoredAgentToken deactivated = Live();
  deactivated.owner_deactivated = true;
  EXPECT_FALSE(AgentTokenStillLive(deactivated, "hash-a", kNow));
  // The expiry is exclusive.
  EXPECT_TRUE(AgentTokenStillLive(Live(), "hash-a", kNow + seconds(59)));
  EXPECT_FALSE(AgentTokenStillLive(Live(), "hash-a", kNow + seconds(60)));
}

TEST(ConnectionRules, AConnectionIsBoundByItsFirstClusterAndRefusesAnyOther) {
  EXPECT_EQ(DecideClusterBinding(std::nullopt, "uid-1"), ClusterBinding::kBind);
  EXPECT_EQ(DecideClusterBinding("uid-1", "uid-1"), ClusterBinding::kAlreadyBound);
  EXPECT_EQ(DecideClusterBinding("uid-1", "uid-2"), ClusterBinding::kMismatch);
}

protocol::InventoryNode GpuNode(const std::string& name) {
  protocol::InventoryNode node;
  node.name = name;
  node.uid = "uid-" + name;
  node.ready = true;
  node.gpu_resource = "nvidia.com/gpu";
  node.gpu_capacity = 8;
  node.gpu_allocatable = 8;
  node.gpu_product = "NVIDIA-H100-80GB-HBM3";
  node.resources = {{"nvidia.com/gpu", 8, 8}};
  node.taints = {{"nvidia.com/gpu", "present", "NoSchedule"}};
  return node;
}

TEST(ConnectionRules, TheNodesDigestChangesWithEveryFieldOfEveryNodeAndWithTheirOrder) {
  const std::vector<protocol::InventoryNode> nodes = {GpuNode("a"), GpuNode("b")};
  const std::string digest = NodesDigest(nodes);
  EXPECT_EQ(digest.size(), 64u);
  EXPECT_EQ(NodesDigest(std::vector<protocol::InventoryNode>{GpuNode("a"), GpuNode("b")}), digest);
  const std::vector<std::function<void(protocol::InventoryNode&)>> changes = {
      [](auto& n) { n.name = "c"; },
      [](auto& n) { n.uid = "other"; },
      [](auto& n) { n.ready = false; },
      [](auto& n) { n.unschedulable = true; },
      [](auto& n) { n.gpu_resource = "amd.com/gpu"; },
      [](auto& n) { n.gpu_capacity = 4; },
      [](auto& n) { n.gpu_allocatable = 7; },
      [](auto& n) { n.gpu_product = "NVIDIA-A100"; },
      [](auto& n) { n.resources[0].allocatable = 6; },
      [](auto& n) { n.resources.push_back({"nvidia.com/mig-1g.10gb", 7, 7}); },
      [](auto& n) { n.taints[0].effect = "NoExecute"; },
      [](auto& n) { n.taints.clear(); },
      [](auto& n) { n.error = "could not read the node"; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    std::vector<protocol::InventoryNode> changed = nodes;
    changes[i](changed[1]);
    EXPECT_NE(NodesDigest(changed), digest) << "change " << i;
  }
  EXPECT_NE(NodesDigest(std::vector<protocol::InventoryNode>{GpuNode("b"), GpuNode("a")}), digest);
  EXPECT_NE(NodesDigest(std::vector<protocol::InventoryNode>{GpuNode("a")}), digest);
  EXPECT_NE(NodesDigest({}), digest);
}

}  // namespace
}  // namespace uplink::console
