// The simulated GPU cluster (--workloads) and what is computed from it: server-side tables of
// its pods, events, deployments, statefulsets and services, and metrics.k8s.io usage.
#include <gtest/gtest.h>

#include "kubesim/cluster.h"
#include "kubesim/embedded_data.h"
#include "kubesim/logs.h"
#include "kubesim/openapi.h"
#include "kubesim/resource_metrics.h"
#include "kubesim/store.h"
#include "kubesim/table.h"

namespace uplink::kubesim {
namespace {

const ResourceType& Type(std::string_view group, std::string_view plural) {
  for (const ResourceType& type : ResourceTypes()) {
    if (type.group == group && type.plural == plural) return type;
  }
  ADD_FAILURE() << plural;
  return ResourceTypes().front();
}

class WorkloadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (json::object& ns : DefaultNamespaces()) ASSERT_TRUE(store_.Put(ns).ok());
    for (json::object& node : GenerateNodes(ClusterShape{2, 8, 1}, clock_.Now())) {
      Result<json::object> stored = store_.Put(node);
      ASSERT_TRUE(stored.ok());
      ASSERT_TRUE(store_.Put(NodeLease(*stored, clock_.Now())).ok());
    }
    Result<std::vector<json::object>> workloads = WorkloadObjects(clock_.Now());
    ASSERT_TRUE(workloads.ok()) << workloads.status().ToString();
    // Namespaces first, as uplink-kubesim loads them.
    std::stable_partition(workloads->begin(), workloads->end(), [](const json::object& object) {
      return object.at("kind") == "Namespace";
    });
    for (json::object& object : *workloads) {
      Result<json::object> stored = store_.Put(object);
      ASSERT_TRUE(stored.ok()) << stored.status().ToString() << "\n" << ToJson(object);
    }
  }

  std::vector<json::object> List(std::string_view group, std::string_view plural,
                                 std::optional<std::string> namespace_name = std::nullopt,
                                 std::string field_selector = "") {
    ListOptions options;
    options.namespace_name = std::move(namespace_name);
    options.field_selector = std::move(field_selector);
    Result<ListPage> page = store_.List(Type(group, plural), options);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    return page.ok() ? page->items : std::vector<json::object>();
  }

  // Table rows by name: the other cells, as strings. Events print their name last.
  std::map<std::string, std::vector<std::string>> Rows(std::string_view group,
                                                       std::string_view plural,
                                                       std::optional<std::string> ns) {
    const bool name_last = plural == "events";
    json::object table = BuildTable(Type(group, plural), List(group, plural, ns), json::object(),
                                    IncludeObject::kNone, clock_.Now());
    std::map<std::string, std::vector<std::string>> rows;
    for (const json::value& row : table.at("rows").as_array()) {
      std::vector<std::string> cells;
      for (const json::value& cell : row.at("cells").as_array()) {
        cells.push_back(cell.is_string() ? std::string(cell.get_string()) : ToJson(cell));
      }
      std::string name = name_last ? cells.back() : cells.front();
      cells.erase(name_last ? cells.end() - 1 : cells.begin());
      rows[name] = std::move(cells);
    }
    return rows;
  }

  FakeClock clock_;
  ObjectStore store_{clock_};
};

TEST_F(WorkloadsTest, PodTablesShowReadinessStatusAndRestartsLikeKubectl) {
  auto pods = Rows("", "pods", std::nullopt);
  ASSERT_EQ(pods.size(), 12u);
  // READY, STATUS, RESTARTS, AGE, IP, NODE, NOMINATED NODE, READINESS GATES.
  EXPECT_EQ(pods["vllm-llama3-8b-6d9f7c5b8d-q9w4t"],
            (std::vector<std::string>{"0/1", "CrashLoopBackOff", "14 (2m29s ago)", "58m",
                                      "10.244.2.61", "gpu-node-0002", "<none>", "<none>"}));
  EXPECT_EQ(pods["vllm-llama3-8b-6d9f7c5b8d-7xk2p"][1], "Running");
  EXPECT_EQ(pods["hparam-sweep-trial-17"],
            (std::vector<std::string>{"0/1", "Pending", "0", "25m", "<none>", "<none>", "<none>",
                                      "<none>"}));
  EXPECT_EQ(pods["llama3-finetune-0"][0], "1/1");
  EXPECT_EQ(pods["llama3-finetune-0"][3], "2d4h");
}

TEST_F(WorkloadsTest, WorkloadTablesMatchTheServerPrinters) {
  auto deployments = Rows("apps", "deployments", std::nullopt);
  // READY, UP-TO-DATE, AVAILABLE, AGE, CONTAINERS, IMAGES, SELECTOR.
  EXPECT_EQ(deployments["vllm-llama3-8b"],
            (std::vector<std::string>{"1/2", "2", "1", "2d22h", "vllm", "vllm/vllm-openai:v0.6.3",
                                      "app=vllm-llama3-8b"}));
  EXPECT_EQ(deployments["coredns"][0], "2/2");
  auto statefulsets = Rows("apps", "statefulsets", "ml-training");
  EXPECT_EQ(statefulsets["llama3-finetune"],
            (std::vector<std::string>{"2/2", "2d5h", "trainer", "nvcr.io/nvidia/pytorch:24.05-py3"}));
  auto replicasets = Rows("apps", "replicasets", "inference");
  EXPECT_EQ(replicasets["vllm-llama3-8b-6d9f7c5b8d"][0], "2");
  EXPECT_EQ(replicasets["vllm-llama3-8b-6d9f7c5b8d"][2], "1");
  EXPECT_EQ(replicasets["vllm-llama3-8b-6d9f7c5b8d"][6],
            "app=vllm-llama3-8b,pod-template-hash=6d9f7c5b8d");
  auto services = Rows("", "services", "kube-system");
  EXPECT_EQ(services["kube-dns"],
            (std::vector<std::string>{"ClusterIP", "10.96.0.10", "<none>", "53/UDP,53/TCP,9153/TCP",
                                      "15d", "k8s-app=kube-dns"}));
  auto leases = Rows("coordination.k8s.io", "leases", "kube-node-lease");
  EXPECT_EQ(leases["gpu-node-0001"][0], "gpu-node-0001");
}

TEST_F(WorkloadsTest, EventTablesShowWarningsWithTheirObjectAndSource) {
  auto events = Rows("", "events", "inference");
  // LAST SEEN, TYPE, REASON, OBJECT, SUBOBJECT, SOURCE, MESSAGE, FIRST SEEN, COUNT.
  const auto& back_off = events["vllm-llama3-8b-6d9f7c5b8d-q9w4t.17d3c1a6e8a1c2d4"];
  ASSERT_EQ(back_off.size(), 9u);
  EXPECT_EQ(back_off[0], "20s");
  EXPECT_EQ(back_off[1], "Warning");
  EXPECT_EQ(back_off[2], "BackOff");
  EXPECT_EQ(back_off[3], "pod/vllm-llama3-8b-6d9f7c5b8d-q9w4t");
  EXPECT_EQ(back_off[4], "spec.containers{vllm}");
  EXPECT_EQ(back_off[5], "kubelet, gpu-node-0002");
  EXPECT_EQ(back_off[8], "236");
  // Scheduler events carry an eventTime (a fraction of a second under the minute) and no
  // timestamps, as events.k8s.io writes them, and name their reporting instance.
  const auto& scheduled = events["vllm-llama3-8b-6d9f7c5b8d-q9w4t.17d3c1a0f3b25e88"];
  EXPECT_EQ(scheduled[0], "57m");
  EXPECT_EQ(scheduled[5], "default-scheduler, default-scheduler-cpu-node-0001");
  EXPECT_EQ(scheduled[8], "1");
  auto training = Rows("", "events", "ml-training");
  const auto& failed = training["hparam-sweep-trial-17.17d3b0c9e2a41f6d"];
  EXPECT_EQ(failed[0], "29s");  // series.lastObservedTime
  EXPECT_EQ(failed[8], "6");    // series.count
  EXPECT_EQ(failed[7], "24m");
}

TEST_F(WorkloadsTest, WarningEventsAndPodsOnANodeAreSelectable) {
  EXPECT_EQ(List("", "events", std::nullopt, "type=Warning").size(), 3u);
  EXPECT_EQ(List("", "pods", std::nullopt,
                 "spec.nodeName=gpu-node-0002,status.phase!=Succeeded,status.phase!=Failed")
                .size(),
            4u);
  EXPECT_EQ(List("", "pods", std::nullopt, "status.phase=Pending").size(), 1u);
}

TEST_F(WorkloadsTest, TheCrashLoopingPodHasItsOutOfMemoryLog) {
  Result<json::object> pod =
      store_.Get(Type("", "pods"), "inference", "vllm-llama3-8b-6d9f7c5b8d-q9w4t");
  ASSERT_TRUE(pod.ok());
  Result<std::string> log =
      ReadContainerLog(*pod, *ParseLogOptions({{"previous", "true"}, {"tailLines", "2"}}),
                       store_.logs(), clock_.Now());
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_NE(log->find("torch.OutOfMemoryError: CUDA out of memory"), std::string::npos) << *log;
  // The last training step was logged half a minute ago.
  Result<json::object> trainer = store_.Get(Type("", "pods"), "ml-training", "llama3-finetune-1");
  Result<std::string> recent = ReadContainerLog(*trainer, *ParseLogOptions({{"sinceSeconds", "60"}}),
                                                store_.logs(), clock_.Now());
  ASSERT_TRUE(recent.ok());
  EXPECT_EQ(*recent, "[rank4]: step 28400/32768 loss=1.2000 lr=1.6e-05 grad_norm=0.41 tokens/s=11985\n");
}

TEST_F(WorkloadsTest, MetricsCoverRunningContainersAndSumOnTheirNodes) {
  std::vector<json::object> pods = PodMetricsItems(store_, std::nullopt, clock_.Now());
  std::vector<std::string> names;
  for (const json::object& pod : pods) names.emplace_back(pod.at("metadata").at("name").as_string());
  // The crash-looping and the pending pod have no running container to measure.
  EXPECT_EQ(names.size(), 10u);
  EXPECT_EQ(std::count(names.begin(), names.end(), "vllm-llama3-8b-6d9f7c5b8d-q9w4t"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "hparam-sweep-trial-17"), 0);
  const json::object& first = pods.front();
  EXPECT_EQ(first.at("kind"), "PodMetrics");
  EXPECT_EQ(first.at("apiVersion"), "metrics.k8s.io/v1beta1");
  EXPECT_EQ(first.at("timestamp").as_string(), FormatRfc3339(clock_.Now()));
  EXPECT_TRUE(first.at("metadata").at("labels").is_object());
  std::string cpu(first.at("containers").at(0).at("usage").at("cpu").as_string());
  EXPECT_TRUE(cpu.ends_with("000000n")) << cpu;
  // Same names, same usage: kubectl top agrees with itself.
  EXPECT_EQ(ToJson(json::value(PodMetricsItems(store_, std::string("ml-training"), clock_.Now())
                                   .at(0)
                                   .at("containers"))),
            ToJson(json::value(PodMetricsItems(store_, std::string("ml-training"), clock_.Now())
                                   .at(0)
                                   .at("containers"))));
  std::vector<json::object> nodes = NodeMetricsItems(store_, clock_.Now());
  ASSERT_EQ(nodes.size(), 3u);
  for (const json::object& node : nodes) {
    std::string memory(node.at("usage").at("memory").as_string());
    EXPECT_TRUE(memory.ends_with("Ki")) << memory;
    // Every node carries at least the system overhead of 2 GiB.
    EXPECT_GE(std::stoll(memory), 2 * 1024 * 1024) << memory;
  }
}

TEST(ResourceMetrics, HostileRequestsNeitherOverflowNorCrash) {
  FakeClock clock;
  ObjectStore store(clock);
  for (json::object& ns : DefaultNamespaces()) ASSERT_TRUE(store.Put(ns).ok());
  for (json::object& node : GenerateNodes(ClusterShape{1, 8, 0}, clock.Now())) {
    ASSERT_TRUE(store.Put(node).ok());
  }
  Result<std::vector<json::object>> pods = ParseObjects(R"(
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: default}
spec:
  nodeName: gpu-node-0001
  containers:
  - {name: a, resources: {requests: {cpu: "9e18", memory: "9Ei"}}}
  - {name: b, resources: {requests: {cpu: "-5", memory: "lots"}}}
  - {name: c, resources: {requests: {cpu: 4000000000000000, memory: "8Ei"}}}
  - {name: d, resources: "none"}
  - 7
status: {phase: Running}
)");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_TRUE(store.Put(pods->at(0)).ok());
  std::vector<json::object> metrics = PodMetricsItems(store, std::nullopt, clock.Now());
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0].at("containers").as_array().size(), 4u);
  for (const json::value& container : metrics[0].at("containers").as_array()) {
    std::string cpu(container.at("usage").at("cpu").as_string());
    EXPECT_NE(cpu.front(), '-') << cpu;
  }
  EXPECT_EQ(NodeMetricsItems(store, clock.Now()).size(), 1u);
}

TEST(WorkloadTimes, AreMovedToTheStartWithTheirFractionsAndLogLines) {
  Result<std::vector<json::object>> objects = ParseObjects(R"(
apiVersion: v1
kind: Event
metadata: {name: e, namespace: default, creationTimestamp: "2025-06-01T11:00:00Z"}
eventTime: "2025-06-01T11:59:00.417000Z"
lastTimestamp: null
message: "2025-06-01T11:00:00Z stays: it is text"
---
apiVersion: kubesim.uplink.dev/v1
kind: ContainerLog
containerID: x
log: |
  2025-06-01T11:59:59.5Z last
  no time
)");
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  for (json::object& object : *objects) ShiftTimes(object, std::chrono::hours(24));
  const json::object& event = objects->at(0);
  EXPECT_EQ(event.at("metadata").at("creationTimestamp"), "2025-06-02T11:00:00Z");
  EXPECT_EQ(event.at("eventTime"), "2025-06-02T11:59:00.417000Z");  // a MicroTime: 6 digits
  EXPECT_TRUE(event.at("lastTimestamp").is_null());
  EXPECT_EQ(event.at("message"), "2025-06-01T11:00:00Z stays: it is text");
  EXPECT_EQ(objects->at(1).at("log"), "2025-06-02T11:59:59.5Z last\nno time\n");
}

TEST(WorkloadTimes, AreRelativeToTheEpoch) {
  WallTime now = *ParseRfc3339("2030-01-01T00:00:00Z");
  Result<std::vector<json::object>> objects = WorkloadObjects(now);
  ASSERT_TRUE(objects.ok());
  for (const json::object& object : *objects) {
    const json::value* metadata = object.if_contains("metadata");
    const json::value* created =
        metadata && metadata->is_object() ? metadata->as_object().if_contains("creationTimestamp")
                                          : nullptr;
    if (!created || !created->is_string()) continue;
    Result<WallTime> when = ParseRfc3339(created->get_string());
    ASSERT_TRUE(when.ok());
    EXPECT_LE(*when, now) << ToJson(object.at("metadata"));
    EXPECT_GT(*when, now - std::chrono::hours(24 * 16)) << ToJson(object.at("metadata"));
  }
}

TEST(BootstrapRbac, HasTheDefaultRolesAndBindings) {
  Result<std::vector<json::object>> objects = BootstrapRbacObjects();
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  std::vector<std::string> names;
  for (const json::object& object : *objects) {
    names.push_back(std::string(object.at("kind").as_string()) + "/" +
                    std::string(object.at("metadata").at("name").as_string()));
  }
  for (const char* expected :
       {"ClusterRole/cluster-admin", "ClusterRoleBinding/cluster-admin",
        "ClusterRole/system:discovery", "ClusterRoleBinding/system:discovery",
        "ClusterRole/system:public-info-viewer", "ClusterRole/system:basic-user"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
}

TEST(OpenApi, EveryStoredKindHasItsSchemaAndAPatchPathWithFieldValidation) {
  Result<OpenApiDocuments> documents =
      OpenApiDocuments::Load(EmbeddedDataFile("openapi-schemas.yaml"), "v1.32.4");
  ASSERT_TRUE(documents.ok()) << documents.status().ToString();
  Result<json::value> index = ParseJson(documents->IndexJson());
  ASSERT_TRUE(index.ok());
  for (const ResourceType& type : ResourceTypes()) {
    if (!type.stored) continue;
    std::string path = type.group.empty() ? "api/v1" : "apis/" + type.ApiVersion();
    const OpenApiDocuments::Document* document = documents->Find(path);
    ASSERT_NE(document, nullptr) << path;
    std::string url(index->at("paths").at(path).at("serverRelativeURL").as_string());
    EXPECT_EQ(url, "/openapi/v3/" + path + "?hash=" + document->hash);
    Result<json::value> parsed = ParseJson(document->json, JsonLimits{16 << 20, 128});
    ASSERT_TRUE(parsed.ok());
    bool has_kind = false;
    for (const auto& [name, schema] : parsed->at("components").at("schemas").as_object()) {
      const json::value* gvks = schema.as_object().if_contains("x-kubernetes-group-version-kind");
      if (gvks && gvks->as_array().at(0).at("kind").as_string() == type.kind) has_kind = true;
    }
    EXPECT_TRUE(has_kind) << type.kind;
    std::string patch_path = "/" + path + (type.namespaced ? "/namespaces/{namespace}/" : "/") +
                             type.plural + "/{name}";
    const json::value& patch = parsed->at("paths").at(patch_path).at("patch");
    EXPECT_EQ(patch.at("x-kubernetes-group-version-kind").at("kind").as_string(), type.kind);
    bool field_validation = false;
    for (const json::value& parameter : patch.at("parameters").as_array()) {
      field_validation |= parameter.at("name") == "fieldValidation";
    }
    EXPECT_TRUE(field_validation) << patch_path;
  }
  EXPECT_EQ(documents->Find("apis/metrics.k8s.io/v1beta1"), nullptr);
}

TEST(OpenApi, BadSchemaFilesAreRefused) {
  EXPECT_EQ(OpenApiDocuments::Load("- a list", "v1").status().message(),
            "the OpenAPI schemas are not a map");
  EXPECT_EQ(OpenApiDocuments::Load("a: 1", "v1").status().message(),
            "OpenAPI schema a is not an object");
  EXPECT_EQ(OpenApiDocuments::Load("a: {properties: {b: {$ref: '#/components/schemas/missing'}}}",
                                   "v1")
                .status()
                .message(),
            "OpenAPI schema a refers to the undefined schema missing");
  EXPECT_EQ(OpenApiDocuments::Load("a: {$ref: 'http://elsewhere/x'}", "v1").status().message(),
            "OpenAPI schema a: a $ref is not of the form #/components/schemas/NAME");
  // A schema nested deeper than any real one is refused rather than recursed into.
  std::string deep = "a: ";
  for (int i = 0; i < 100; ++i) deep += "{x: ";
  deep += "1" + std::string(100, '}');
  EXPECT_FALSE(OpenApiDocuments::Load(deep, "v1").ok());
}

// kubectl describe node parses the Lease's renewTime with a fixed six-digit layout; a
// trimmed fraction ("...:02.49259Z") made it print "Failed to get lease".
TEST(NodeLeaseTest, RenewTimeIsAMicroTimeWithSixDigits) {
  const WallTime now = FromUnixSeconds(1'796'097'600) + std::chrono::microseconds(492'590);
  json::object node{{"metadata", json::object{{"name", "gpu-node-0001"}}}};
  const json::object lease = NodeLease(node, now);
  EXPECT_EQ(lease.at("spec").at("renewTime").as_string(), "2026-12-01T04:00:00.492590Z");
}

}  // namespace
}  // namespace uplink::kubesim
