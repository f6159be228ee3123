// Pod right-sizing (console/api/right_sizing.h): what `kubectl top pods` and the pod_resources
// read print, read strictly line by line (hostile lines skipped), and the verdict of each
// threshold.
#include "console/api/right_sizing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/json.h"

namespace uplink::console {
namespace {

constexpr std::int64_t kMi = 1 << 20;

TEST(TopPods, BothTableFormsAreRead) {
  std::vector<PodUsage> all = ParseTopPods(
      "NAMESPACE      NAME                              CPU(cores)   MEMORY(bytes)   \n"
      "inference      vllm-llama3-8b-6d9f7c5b8d-7xk2p   884m         35750Mi         \n"
      "ml-training    llama3-finetune-0                 27479m       197236Mi\n"
      "kube-system    coredns-668d6bf9bc-7k9xq          2            1Gi\n",
      "");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].namespace_name, "inference");
  EXPECT_EQ(all[0].pod, "vllm-llama3-8b-6d9f7c5b8d-7xk2p");
  EXPECT_EQ(all[0].cpu_millicores, 884);
  EXPECT_EQ(all[0].memory_bytes, 35750 * kMi);
  EXPECT_EQ(all[2].cpu_millicores, 2000);
  EXPECT_EQ(all[2].memory_bytes, 1024 * kMi);

  std::vector<PodUsage> one = ParseTopPods(
      "NAME                CPU(cores)   MEMORY(bytes)\nllama3-finetune-1   25620m   211293Mi\n",
      "ml-training");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].namespace_name, "ml-training");
  EXPECT_EQ(one[0].cpu_millicores, 25620);
}

TEST(TopPods, HostileLinesAreSkipped) {
  const std::string output =
      "error: Metrics API not available\n"
      "No resources found in ml namespace.\n"
      "ns pod -5m 10Mi\n"
      "ns pod 5m 99999999999999999999Ei\n"
      "ns POD 5m 10Mi\n"
      "ns pod\x01x 5m 10Mi\n"
      "ns " + std::string(300, 'p') + " 5m 10Mi\n"
      "ns pod 5m 10Mi extra words\n"
      "ns pod five 10Mi\n"
      "\n\n\t\n"
      "ok-ns ok-pod 1m 1Ki\n";
  std::vector<PodUsage> usage = ParseTopPods(output, "");
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].pod, "ok-pod");
  EXPECT_EQ(usage[0].memory_bytes, 1024);
  EXPECT_TRUE(ParseTopPods("", "ml").empty());
  EXPECT_TRUE(ParseTopPods(std::string(1 << 16, ' '), "ml").empty());
}

TEST(TopPods, ASnapshotsUsageComesFromItsSuccessfulTopPodsResults) {
  auto payload = ParseJson(R"({"kind":"cluster_snapshot","collected_at":"2026-11-30T03:20:00Z",
    "results":[
      {"name":"top_pods/ml","argv":["kubectl","top","pods","-n","ml"],"exit_code":0,
       "stdout":"NAME CPU(cores) MEMORY(bytes)\ntrainer-0 10m 20Mi\n","stderr":"","duration_ms":5},
      {"name":"top_pods/dev","argv":["kubectl","top","pods","-n","dev"],"exit_code":1,
       "stdout":"NAME CPU(cores) MEMORY(bytes)\nx 10m 20Mi\n","stderr":"","duration_ms":5},
      {"name":"top_podsx","argv":["kubectl","top","pods","-A"],"exit_code":0,
       "stdout":"NAMESPACE NAME CPU(cores) MEMORY(bytes)\nns y 10m 20Mi\n","stderr":"","duration_ms":5},
      {"name":"top_pods","argv":["kubectl","top","pods","-A"],"error":{"code":"timeout","message":"x"},
       "duration_ms":5},
      {"name":"pods","argv":["kubectl","get","pods","-A"],"exit_code":0,
       "stdout":"NAMESPACE NAME CPU MEMORY\nns z 10m 20Mi\n","stderr":"","duration_ms":5}]})");
  ASSERT_TRUE(payload.ok());
  auto snapshot = protocol::DecodeClusterSnapshot(payload->as_object(), "payload");
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  std::vector<PodUsage> usage = PodUsageOfSnapshot(*snapshot, 7);
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].namespace_name, "ml");
  EXPECT_EQ(usage[0].pod, "trainer-0");
  EXPECT_EQ(usage[0].sequence, 7);
}

TEST(PodResources, EachContainersRequestsAndLimitsAreRead) {
  std::vector<PodResources> pods = ParsePodResources(
      "inference\tvllm-0\tRunning\tvllm|8|48Gi||64Gi\tsidecar|100m|||\n"
      "gpu-operator\tdcgm-exporter\tRunning\tdcgm||||\n"
      "ml\tjob-1\tSucceeded\n"
      "ml\tbad\tRunning\tc|1|2|3\n"
      "ml\tbad2\tRunning\tC|1|2|3|4\n"
      "NS\tx\tRunning\n"
      "ml\tweird\tRunning\tc|lots|2Gi||\n");
  ASSERT_EQ(pods.size(), 4u);
  EXPECT_EQ(pods[0].namespace_name, "inference");
  ASSERT_EQ(pods[0].containers.size(), 2u);
  EXPECT_EQ(pods[0].containers[0].cpu_request_millicores, 8000);
  EXPECT_EQ(pods[0].containers[0].memory_request_bytes, 48 * 1024 * kMi);
  EXPECT_EQ(pods[0].containers[0].cpu_limit_millicores, std::nullopt);
  EXPECT_EQ(pods[0].containers[0].memory_limit_bytes, 64 * 1024 * kMi);
  EXPECT_EQ(pods[0].containers[1].cpu_request_millicores, 100);
  EXPECT_EQ(pods[0].containers[1].memory_request_bytes, std::nullopt);
  EXPECT_EQ(pods[1].containers[0].cpu_request_millicores, std::nullopt);
  EXPECT_TRUE(pods[2].containers.empty());
  EXPECT_EQ(pods[3].name, "weird");
  EXPECT_EQ(pods[3].containers[0].cpu_request_millicores, std::nullopt) << "not a quantity";
}

PodResources Pod(const std::string& name, std::optional<std::int64_t> cpu_request,
                 std::optional<std::int64_t> cpu_limit, std::optional<std::int64_t> memory_request,
                 std::optional<std::int64_t> memory_limit) {
  return PodResources{"ml", name, "Running",
                      {ContainerResources{"c", cpu_request, memory_request, cpu_limit,
                                          memory_limit}}};
}

PodUsageSummary Used(const std::string& name, std::int64_t samples, std::int64_t cpu_peak,
                     std::int64_t memory_peak) {
  return PodUsageSummary{"ml", name, samples, cpu_peak / 2, cpu_peak, memory_peak / 2,
                         memory_peak};
}

const json::object& Row(const json::object& reply, const std::string& pod) {
  for (const json::value& row : reply.at("pods").as_array()) {
    if (row.at("pod").as_string() == pod) return row.as_object();
  }
  ADD_FAILURE() << "no row for " << pod;
  static const json::object empty;
  return empty;
}

std::vector<std::string> Kinds(const json::object& row) {
  std::vector<std::string> kinds;
  for (const json::value& finding : row.at("findings").as_array()) {
    kinds.emplace_back(finding.at("kind").as_string());
  }
  return kinds;
}

TEST(RightSizing, EachThresholdFlagsWhatItSays) {
  const RightSizingThresholds thresholds;
  std::vector<PodResources> pods = {
      Pod("idle", 2000, std::nullopt, 4096 * kMi, std::nullopt),      // peak 10%: over
      Pod("small-idle", 100, std::nullopt, 64 * kMi, std::nullopt),   // over, but too small
      Pod("busy", 500, 1000, 256 * kMi, 512 * kMi),                   // peak above the request
      Pod("throttled", 950, 1000, 290 * kMi, 300 * kMi),              // at 95% of both limits
      Pod("unrequested", std::nullopt, std::nullopt, std::nullopt, std::nullopt),
      Pod("fine", 1000, 2000, 1024 * kMi, 2048 * kMi),
      Pod("new", 1000, 2000, 1024 * kMi, 2048 * kMi),                 // too few samples
      Pod("gone", 1000, 2000, 1024 * kMi, 2048 * kMi),                // no usage at all
      {"ml", "done", "Succeeded", {}},
  };
  std::vector<PodUsageSummary> usage = {
      Used("idle", 120, 200, 400 * kMi),        Used("small-idle", 120, 10, 8 * kMi),
      Used("busy", 120, 700, 300 * kMi),        Used("throttled", 120, 950, 285 * kMi),
      Used("unrequested", 120, 30, 50 * kMi),   Used("fine", 120, 700, 700 * kMi),
      Used("new", 9, 10, 10 * kMi),             Used("elsewhere", 120, 1, 1),
  };
  json::object reply = RightSizingJson(pods, usage, thresholds);
  EXPECT_EQ(reply.at("pods").as_array().size(), 8u) << "finished pods are left out";
  EXPECT_EQ(Row(reply, "idle").at("verdict"), "over_provisioned");
  EXPECT_EQ(Kinds(Row(reply, "idle")),
            (std::vector<std::string>{"over_provisioned", "over_provisioned"}));
  EXPECT_EQ(Row(reply, "idle").at("cpu").at("suggested_request_millicores").as_int64(), 260);
  EXPECT_EQ(Row(reply, "idle").at("memory").at("suggested_request_bytes").as_int64(), 520 * kMi);
  EXPECT_EQ(Row(reply, "small-idle").at("verdict"), "ok");
  EXPECT_EQ(Row(reply, "busy").at("verdict"), "under_provisioned");
  EXPECT_EQ(Kinds(Row(reply, "busy")), (std::vector<std::string>{"above_request", "above_request"}));
  EXPECT_EQ(Row(reply, "throttled").at("verdict"), "under_provisioned");
  EXPECT_EQ(Kinds(Row(reply, "throttled")), (std::vector<std::string>{"near_limit", "near_limit"}));
  EXPECT_EQ(Row(reply, "unrequested").at("verdict"), "under_provisioned");
  EXPECT_EQ(Kinds(Row(reply, "unrequested")),
            (std::vector<std::string>{"no_request", "no_request"}));
  EXPECT_TRUE(Row(reply, "unrequested").at("cpu").at("request_millicores").is_null());
  EXPECT_EQ(Row(reply, "fine").at("verdict"), "ok");
  EXPECT_TRUE(Kinds(Row(reply, "fine")).empty());
  EXPECT_EQ(Row(reply, "new").at("verdict"), "unknown");
  EXPECT_EQ(Row(reply, "gone").at("verdict"), "unknown");
  EXPECT_EQ(Row(reply, "gone").at("samples").as_int64(), 0);
  EXPECT_EQ(Row(reply, "fine").at("memory").at("peak_bytes").as_int64(), 700 * kMi);
  // The under-provisioned first, then the over-provisioned, the unknown and the rest.
  EXPECT_EQ(reply.at("pods").as_array().front().at("verdict"), "under_provisioned");
  EXPECT_EQ(reply.at("pods").as_array().back().at("verdict"), "ok");
  EXPECT_EQ(reply.at("totals").at("under_provisioned").as_int64(), 3);
  EXPECT_EQ(reply.at("totals").at("over_provisioned").as_int64(), 1);
  EXPECT_EQ(reply.at("totals").at("unknown").as_int64(), 2);
  EXPECT_EQ(reply.at("totals").at("ok").as_int64(), 2);
}

TEST(RightSizing, APodWithAContainerWithoutALimitHasNoLimit) {
  PodResources pod{"ml",
                   "two",
                   "Running",
                   {ContainerResources{"a", 100, 64 * kMi, 200, 128 * kMi},
                    ContainerResources{"b", 100, 64 * kMi, std::nullopt, std::nullopt}}};
  json::object reply =
      RightSizingJson({pod}, {Used("two", 120, 150, 100 * kMi)}, RightSizingThresholds{});
  const json::object& row = Row(reply, "two");
  EXPECT_EQ(row.at("cpu").at("request_millicores").as_int64(), 200);
  EXPECT_TRUE(row.at("cpu").at("limit_millicores").is_null()) << "unbounded as a whole";
  EXPECT_EQ(row.at("containers").as_int64(), 2);
  EXPECT_EQ(row.at("verdict"), "ok");
}

}  // namespace
}  // namespace uplink::console
