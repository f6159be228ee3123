// Resource arithmetic as resource.Quantity prints it, and the scheduler's filters.
#include "kubesim/scheduling.h"

#include <gtest/gtest.h>

#include "common/yaml.h"
#include "kubesim/resources.h"

namespace uplink::kubesim {
namespace {

std::string Canonical(std::string_view text) {
  Result<Amount> amount = Amount::Parse(text);
  EXPECT_TRUE(amount.ok()) << text;
  return amount.ok() ? amount->ToString() : "";
}

TEST(Resources, AmountsPrintInTheirCanonicalForm) {
  EXPECT_EQ(Canonical("1500m"), "1500m");
  EXPECT_EQ(Canonical("1.5"), "1500m");
  EXPECT_EQ(Canonical("1000m"), "1");
  EXPECT_EQ(Canonical("2000"), "2k");
  EXPECT_EQ(Canonical("0.1"), "100m");
  EXPECT_EQ(Canonical("1Gi"), "1Gi");
  EXPECT_EQ(Canonical("1536Mi"), "1536Mi");
  EXPECT_EQ(Canonical("2048Mi"), "2Gi");
  EXPECT_EQ(Canonical("0"), "0");
  EXPECT_EQ(Canonical("1e3"), "1k");
  EXPECT_FALSE(Amount::Parse("lots").ok());
  ResourceList sum = Add(ResourceList{{"memory", *Amount::Parse("1Gi")}},
                         ResourceList{{"memory", *Amount::Parse("512Mi")}, {"cpu", *Amount::Parse("500m")}});
  EXPECT_EQ(PrettyPrint(sum), "cpu=500m,memory=1536Mi");
}

json::object Object(std::string_view yaml) {
  Result<json::value> parsed = ParseYaml(yaml);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? parsed->as_object() : json::object();
}

json::object Node(const std::string& name, const std::string& extra = "") {
  return Object("metadata: {name: " + name + ", labels: {kubernetes.io/hostname: " + name +
                ", zone: a}}\nspec: {" + extra + "}\nstatus: {allocatable: {cpu: '8', memory: "
                "32Gi, pods: '110', nvidia.com/gpu: '8'}}\n");
}

TEST(Scheduling, RequiredAffinityAndFieldsPickTheApprovedNode) {
  std::vector<json::object> nodes = {Node("n1"), Node("n2"), Node("n3")};
  json::object pod = Object(R"(
metadata: {name: p, uid: u1}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchFields: [{key: metadata.name, operator: In, values: [n2]}]
  containers: [{name: c, resources: {requests: {nvidia.com/gpu: '2'}}}]
)");
  EXPECT_EQ(Schedule(pod, nodes, {}).node, "n2");
  json::object selector = Object("metadata: {name: q}\nspec: {nodeSelector: {zone: b}, containers: [{name: c}]}\n");
  EXPECT_EQ(Schedule(selector, nodes, {}).message,
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.");
}

TEST(Scheduling, CordonedNodesTaintsAndRunningPodsAreRespected) {
  std::vector<json::object> nodes = {
      Node("cordoned", "unschedulable: true"),
      Node("tainted", "taints: [{key: gpu, value: reserved, effect: NoSchedule}]"), Node("busy")};
  json::object running = Object(R"(
metadata: {name: r, uid: u2}
spec: {nodeName: busy, containers: [{name: c, resources: {requests: {cpu: '7'}}}]}
status: {phase: Running}
)");
  json::object pod = Object(R"(
metadata: {name: p, uid: u1}
spec: {preemptionPolicy: Never, containers: [{name: c, resources: {requests: {cpu: '2'}}}]}
)");
  SchedulingResult result = Schedule(pod, nodes, {running});
  EXPECT_EQ(result.node, "");
  EXPECT_EQ(result.message,
            "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint "
            "{gpu: reserved}, 1 node(s) were unschedulable. preemption: not eligible due to "
            "preemptionPolicy=Never.");
  // A finished pod holds nothing; a toleration opens the tainted node.
  running["status"].as_object()["phase"] = "Succeeded";
  EXPECT_EQ(Schedule(pod, nodes, {running}).node, "busy");
  json::object tolerant = Object(R"(
metadata: {name: t, uid: u3}
spec: {tolerations: [{key: gpu, operator: Exists}], nodeSelector: {kubernetes.io/hostname: tainted}, containers: [{name: c}]}
)");
  EXPECT_EQ(Schedule(tolerant, nodes, {}).node, "tainted");
}

}  // namespace
}  // namespace uplink::kubesim
