// End to end: every read-only verb the agent runs (get, logs, top, describe, api-resources,
// api-versions, version, cluster-info, explain), by the real /usr/bin/kubectl against
// `uplink-kubesim --workloads`. kubectl's stderr may carry version-skew warnings, so
// assertions read stdout, except where the error itself is the point.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "common/json.h"
#include "kubesim_process.h"

namespace uplink::kubesim {
namespace {

using testing::CommandResult;
using testing::KubesimProcess;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream stream(line);
  for (std::string word; stream >> word;) words.push_back(word);
  return words;
}

// The line whose first words are `prefix`; empty when none is.
std::vector<std::string> RowStartingWith(const std::string& text,
                                         const std::vector<std::string>& prefix) {
  for (const std::string& line : Lines(text)) {
    std::vector<std::string> words = Words(line);
    if (words.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), words.begin())) {
      return words;
    }
  }
  return {};
}

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

constexpr const char* kCrashing = "vllm-llama3-8b-6d9f7c5b8d-q9w4t";

class ReadOnlyKubectlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = KubesimProcess::Start({"--workloads"});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    kubesim_ = started->release();
  }
  static void TearDownTestSuite() {
    if (kubesim_) {
      EXPECT_EQ(kubesim_->Stop(), 0) << kubesim_->Logs();
    }
    delete kubesim_;
    kubesim_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(kubesim_, nullptr) << "uplink-kubesim did not start"; }
  void TearDown() override { EXPECT_TRUE(kubesim_->Running()) << kubesim_->Logs(); }

  static CommandResult Kubectl(const std::vector<std::string>& args) {
    return kubesim_->Kubectl(args);
  }
  // stdout of a command that must succeed.
  static std::string Out(const std::vector<std::string>& args) {
    CommandResult result = Kubectl(args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return result.out;
  }

  static KubesimProcess* kubesim_;
};

KubesimProcess* ReadOnlyKubectlTest::kubesim_ = nullptr;

TEST_F(ReadOnlyKubectlTest, GetPodsShowsReadinessStatusRestartsAndAge) {
  std::string out = Out({"get", "pods", "-A"});
  std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 13u) << out;
  EXPECT_EQ(Words(lines[0]), (std::vector<std::string>{"NAMESPACE", "NAME", "READY", "STATUS",
                                                       "RESTARTS", "AGE"}));
  std::vector<std::string> crashing = RowStartingWith(out, {"inference", kCrashing});
  ASSERT_EQ(crashing.size(), 8u) << out;
  EXPECT_EQ(crashing[2], "0/1");
  EXPECT_EQ(crashing[3], "CrashLoopBackOff");
  EXPECT_EQ(crashing[4], "14");
  EXPECT_TRUE(crashing[5].starts_with("(2m")) << crashing[5];
  EXPECT_EQ(crashing[6], "ago)");
  EXPECT_EQ(crashing[7], "58m");
  EXPECT_EQ(RowStartingWith(out, {"ml-training", "hparam-sweep-trial-17"}),
            (std::vector<std::string>{"ml-training", "hparam-sweep-trial-17", "0/1", "Pending",
                                      "0", "25m"}));
  std::vector<std::string> wide =
      RowStartingWith(Out({"get", "pods", "-n", "ml-training", "-o", "wide"}), {"llama3-finetune-1"});
  ASSERT_GE(wide.size(), 7u);
  EXPECT_EQ(wide[5], "10.244.2.41");
  EXPECT_EQ(wide[6], "gpu-node-0002");
}

TEST_F(ReadOnlyKubectlTest, SelectorsNarrowPodsAndEvents) {
  EXPECT_EQ(Out({"get", "pods", "-n", "ml-training", "-l", "app=llama3-finetune", "-o", "name"}),
            "pod/llama3-finetune-0\npod/llama3-finetune-1\n");
  EXPECT_EQ(Lines(Out({"get", "pods", "-A", "--field-selector", "spec.nodeName=gpu-node-0002",
                       "--no-headers"}))
                .size(),
            4u);
  EXPECT_EQ(Out({"get", "pods", "-A", "--field-selector", "status.phase=Pending", "-o", "name"}),
            "pod/hparam-sweep-trial-17\n");
  std::string warnings = Out({"get", "events", "-A", "--field-selector", "type=Warning"});
  std::vector<std::string> lines = Lines(warnings);
  ASSERT_EQ(lines.size(), 4u) << warnings;
  EXPECT_EQ(Words(lines[0]), (std::vector<std::string>{"NAMESPACE", "LAST", "SEEN", "TYPE",
                                                       "REASON", "OBJECT", "MESSAGE"}));
  std::vector<std::string> unschedulable = RowStartingWith(warnings, {"ml-training"});
  ASSERT_GE(unschedulable.size(), 5u) << warnings;
  EXPECT_EQ(unschedulable[3], "FailedScheduling");
  EXPECT_EQ(unschedulable[4], "pod/hparam-sweep-trial-17");
  EXPECT_TRUE(Contains(warnings, "pod/" + std::string(kCrashing)));
  EXPECT_TRUE(Contains(warnings, "Back-off restarting failed container vllm"));
  EXPECT_TRUE(Contains(warnings, "2 Insufficient nvidia.com/gpu"));
}

TEST_F(ReadOnlyKubectlTest, WorkloadListsPrintTheirColumns) {
  std::string deployments = Out({"get", "deployments", "-A"});
  EXPECT_EQ(Words(Lines(deployments)[0]),
            (std::vector<std::string>{"NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"}));
  EXPECT_EQ(RowStartingWith(deployments, {"inference", "vllm-llama3-8b"}),
            (std::vector<std::string>{"inference", "vllm-llama3-8b", "1/2", "2", "1", "2d22h"}));
  std::string statefulsets = Out({"get", "sts", "-n", "ml-training"});
  EXPECT_EQ(Words(Lines(statefulsets)[0]), (std::vector<std::string>{"NAME", "READY", "AGE"}));
  EXPECT_EQ(RowStartingWith(statefulsets, {"llama3-finetune"}),
            (std::vector<std::string>{"llama3-finetune", "2/2", "2d5h"}));
  std::string namespaces = Out({"get", "namespaces"});
  EXPECT_EQ(Words(Lines(namespaces)[0]), (std::vector<std::string>{"NAME", "STATUS", "AGE"}));
  EXPECT_EQ(RowStartingWith(namespaces, {"inference"}),
            (std::vector<std::string>{"inference", "Active", "3d"}));
  std::string all = Out({"get", "all", "-n", "inference", "-o", "name"});
  EXPECT_EQ(all,
            "pod/vllm-llama3-8b-6d9f7c5b8d-7xk2p\npod/vllm-llama3-8b-6d9f7c5b8d-q9w4t\n"
            "service/vllm-llama3-8b\ndeployment.apps/vllm-llama3-8b\n"
            "replicaset.apps/vllm-llama3-8b-6d9f7c5b8d\n");
  std::string nodes = Out({"get", "nodes"});
  EXPECT_EQ(Lines(nodes).size(), 4u) << nodes;
  EXPECT_EQ(RowStartingWith(nodes, {"gpu-node-0001"})[3], "15d");
}

TEST_F(ReadOnlyKubectlTest, LogsHonourTailSincePreviousContainerTimestampsAndLimit) {
  std::string tail = Out({"logs", "-n", "inference", kCrashing, "--tail=1"});
  EXPECT_EQ(tail, "ERROR 06-01 11:57:19 api_server.py:188] RuntimeError: Engine process failed to start\n");
  EXPECT_EQ(Out({"logs", "-n", "inference", kCrashing, "--previous", "-c", "vllm", "--tail=1"}), tail);
  std::string stamped = Out({"logs", "-n", "inference", kCrashing, "--tail=2", "--timestamps"});
  std::vector<std::string> lines = Lines(stamped);
  ASSERT_EQ(lines.size(), 2u) << stamped;
  EXPECT_EQ(lines[0].substr(4, 1), "-");
  EXPECT_TRUE(Contains(lines[0], "Z torch.OutOfMemoryError: CUDA out of memory.")) << lines[0];
  // Training logs one line a minute; the last was half a minute ago.
  std::string recent = Out({"logs", "-n", "ml-training", "llama3-finetune-0", "--since=1m"});
  EXPECT_EQ(Lines(recent).size(), 1u) << recent;
  EXPECT_TRUE(recent.starts_with("[rank0]: step 28400/32768")) << recent;
  EXPECT_EQ(Out({"logs", "-n", "ml-training", "llama3-finetune-0", "--limit-bytes=7"}), "[rank0]");
  EXPECT_EQ(Lines(Out({"logs", "-n", "ml-training", "-l", "app=llama3-finetune", "--tail=1"})).size(),
            2u);
  EXPECT_TRUE(Out({"logs", "-n", "inference", "deploy/vllm-llama3-8b", "--tail=1"})
                  .starts_with("INFO 06-01 12:00:00 metrics.py:351]"));
  EXPECT_TRUE(Out({"logs", "-n", "kube-system", "coredns-668d6bf9bc-7k9xq"}).starts_with(".:53\n"));
  // A pod that was never scheduled has no log yet.
  EXPECT_EQ(Out({"logs", "-n", "ml-training", "hparam-sweep-trial-17"}), "");
}

TEST_F(ReadOnlyKubectlTest, LogsRefuseFollowAndUnknownContainersWithoutHanging) {
  CommandResult follow = Kubectl({"logs", "-n", "inference", kCrashing, "-f"});
  EXPECT_FALSE(follow.timed_out);
  EXPECT_NE(follow.exit_code, 0);
  EXPECT_TRUE(Contains(follow.err, "Error from server (BadRequest): follow is not supported by "
                                   "uplink-kubesim"))
      << follow.err;
  CommandResult container = Kubectl({"logs", "-n", "inference", kCrashing, "-c", "sidecar"});
  EXPECT_NE(container.exit_code, 0);
  EXPECT_TRUE(Contains(container.err, "container sidecar is not valid for pod " + std::string(kCrashing)))
      << container.err;
  CommandResult previous =
      Kubectl({"logs", "-n", "ml-training", "llama3-finetune-0", "--previous"});
  EXPECT_NE(previous.exit_code, 0);
  EXPECT_TRUE(Contains(previous.err, "previous terminated container \"trainer\" in pod "
                                     "\"llama3-finetune-0\" not found"))
      << previous.err;
}

TEST_F(ReadOnlyKubectlTest, TopShowsNodeAndPodUsage) {
  std::string nodes = Out({"top", "nodes"});
  std::vector<std::string> lines = Lines(nodes);
  ASSERT_EQ(lines.size(), 4u) << nodes;
  EXPECT_EQ(Words(lines[0])[0], "NAME");
  EXPECT_EQ(Words(lines[0])[1], "CPU(cores)");
  std::vector<std::string> gpu = RowStartingWith(nodes, {"gpu-node-0001"});
  ASSERT_EQ(gpu.size(), 5u) << nodes;
  EXPECT_TRUE(gpu[1].ends_with("m")) << gpu[1];
  EXPECT_TRUE(gpu[3].ends_with("Mi")) << gpu[3];
  std::string pods = Out({"top", "pods", "-A"});
  EXPECT_EQ(Lines(pods).size(), 11u) << pods;
  EXPECT_TRUE(RowStartingWith(pods, {"inference", kCrashing}).empty()) << pods;
  std::string containers = Out({"top", "pods", "-n", "ml-training", "--containers"});
  EXPECT_EQ(RowStartingWith(containers, {"llama3-finetune-0", "trainer"}).size(), 4u) << containers;
  EXPECT_EQ(Out({"top", "pods", "-n", "ml-training", "-l", "app=llama3-finetune", "--no-headers"})
                .empty(),
            false);
}

TEST_F(ReadOnlyKubectlTest, DescribeShowsPodsNodesAndWorkloadsWithTheirEvents) {
  std::string pod = Out({"describe", "pod", "-n", "inference", kCrashing});
  EXPECT_TRUE(Contains(pod, "Node:             gpu-node-0002/10.0.0.4")) << pod;
  EXPECT_TRUE(Contains(pod, "Reason:       CrashLoopBackOff")) << pod;
  EXPECT_TRUE(Contains(pod, "Restart Count:  14")) << pod;
  EXPECT_TRUE(Contains(pod, "Warning  BackOff")) << pod;
  EXPECT_TRUE(Contains(pod, "(x236 over 57m)")) << pod;
  std::string node = Out({"describe", "node", "gpu-node-0002"});
  EXPECT_TRUE(Contains(node, "HolderIdentity:  gpu-node-0002")) << node;
  EXPECT_TRUE(Contains(node, "Non-terminated Pods:          (4 in total)")) << node;
  // The fine-tune's 4 GPUs and the crash-looping server's 1.
  EXPECT_TRUE(Contains(node, "nvidia.com/gpu     5            5")) << node;
  EXPECT_TRUE(Contains(node, "NodeHasSufficientMemory")) << node;
  std::string deployment = Out({"describe", "deployment", "-n", "inference", "vllm-llama3-8b"});
  EXPECT_TRUE(Contains(deployment, "Replicas:               2 desired | 2 updated | 2 total | 1 available | 1 unavailable"))
      << deployment;
  EXPECT_TRUE(Contains(deployment, "NewReplicaSet:   vllm-llama3-8b-6d9f7c5b8d (2/2 replicas created)"))
      << deployment;
  EXPECT_TRUE(Contains(deployment, "ScalingReplicaSet")) << deployment;
  std::string statefulset = Out({"describe", "statefulset", "-n", "ml-training", "llama3-finetune"});
  EXPECT_TRUE(Contains(statefulset, "Pods Status:        2 Running / 0 Waiting / 0 Succeeded / 0 Failed"))
      << statefulset;
}

TEST_F(ReadOnlyKubectlTest, ApiResourcesAndVersionsListEverythingServed) {
  std::string resources = Out({"api-resources"});
  EXPECT_EQ(RowStartingWith(resources, {"pods"}),
            (std::vector<std::string>{"pods", "po", "v1", "true", "Pod"}));
  EXPECT_EQ(RowStartingWith(resources, {"deployments"}),
            (std::vector<std::string>{"deployments", "deploy", "apps/v1", "true", "Deployment"}));
  EXPECT_EQ(RowStartingWith(resources, {"events"}),
            (std::vector<std::string>{"events", "ev", "v1", "true", "Event"}));
  EXPECT_EQ(RowStartingWith(resources, {"nodes", "metrics.k8s.io/v1beta1"}),
            (std::vector<std::string>{"nodes", "metrics.k8s.io/v1beta1", "false", "NodeMetrics"}));
  EXPECT_EQ(RowStartingWith(resources, {"clusterroles"}),
            (std::vector<std::string>{"clusterroles", "rbac.authorization.k8s.io/v1", "false",
                                      "ClusterRole"}));
  EXPECT_FALSE(Contains(resources, "pods/log"));
  std::string wide = Out({"api-resources", "--api-group=apps", "-o", "wide"});
  EXPECT_EQ(RowStartingWith(wide, {"statefulsets"}),
            (std::vector<std::string>{"statefulsets", "sts", "apps/v1", "true", "StatefulSet",
                                      "create,delete,get,list,patch,watch", "all"}));
  EXPECT_EQ(Out({"api-resources", "--namespaced=false", "--api-group=", "-o", "name"}),
            "namespaces\nnodes\n");
  EXPECT_EQ(Out({"api-versions"}),
            "admissionregistration.k8s.io/v1\napps/v1\nauthorization.k8s.io/v1\n"
            "coordination.k8s.io/v1\nmetrics.k8s.io/v1beta1\nnetworking.k8s.io/v1\n"
            "rbac.authorization.k8s.io/v1\nscheduling.k8s.io/v1\nv1\n");
}

TEST_F(ReadOnlyKubectlTest, VersionAndClusterInfoNameTheServer) {
  std::string version = Out({"version"});
  EXPECT_TRUE(Contains(version, "Server Version: v1.32.4")) << version;
  Result<json::value> json = ParseJson(Out({"version", "-o", "json"}));
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->at("serverVersion").at("gitVersion"), "v1.32.4");
  std::string info = Out({"cluster-info"});
  // kubectl colours the names only on a terminal.
  EXPECT_TRUE(Contains(info, "Kubernetes control plane is running at " + kubesim_->server_url()))
      << info;
  EXPECT_TRUE(Contains(info, "CoreDNS is running at " + kubesim_->server_url() +
                                 "/api/v1/namespaces/kube-system/services/kube-dns:dns/proxy"))
      << info;
}

TEST_F(ReadOnlyKubectlTest, ExplainRendersTheOpenApiSchemas) {
  std::string pods = Out({"explain", "pods"});
  EXPECT_TRUE(Contains(pods, "KIND:       Pod")) << pods;
  EXPECT_TRUE(Contains(pods, "spec\t<PodSpec>")) << pods;
  std::string spec = Out({"explain", "deployment.spec"});
  EXPECT_TRUE(Contains(spec, "GROUP:      apps")) << spec;
  EXPECT_TRUE(Contains(spec, "FIELD: spec <DeploymentSpec>")) << spec;
  EXPECT_TRUE(Contains(spec, "replicas\t<integer>")) << spec;
  EXPECT_TRUE(Contains(spec, "template\t<PodTemplateSpec> -required-")) << spec;
  std::string resources = Out({"explain", "pods.spec.containers.resources.limits"});
  EXPECT_TRUE(Contains(resources, "FIELD: limits <map[string]Quantity>")) << resources;
  std::string recursive = Out({"explain", "clusterrole", "--recursive"});
  EXPECT_TRUE(Contains(recursive, "nonResourceURLs")) << recursive;
  CommandResult unknown = Kubectl({"explain", "pods.spec.bogus"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_TRUE(Contains(unknown.err, "field \"bogus\" does not exist")) << unknown.err;
}

// The dispatcher runs the kubectl build that matches the server's minor version: each of
// them must read the simulator the same way.
class KubectlVersionsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KubectlVersionsTest, EveryKubectlBuildReadsTheSimulatedCluster) {
  auto started = KubesimProcess::Start({"--workloads", "--server-version", GetParam()});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  KubesimProcess& kubesim = **started;
  auto out = [&](const std::vector<std::string>& args) {
    CommandResult result = kubesim.Kubectl(args);
    EXPECT_EQ(result.exit_code, 0) << GetParam() << " " << args.front() << ": " << result.err;
    return result.out;
  };
  std::string pods = out({"get", "pods", "-n", "inference"});
  EXPECT_EQ(RowStartingWith(pods, {kCrashing}).at(2), "CrashLoopBackOff") << pods;
  EXPECT_TRUE(Contains(out({"logs", "-n", "inference", kCrashing, "--previous", "--tail=1"}),
                       "Engine process failed to start"));
  EXPECT_EQ(Lines(out({"top", "nodes", "--no-headers"})).size(), 3u);
  EXPECT_TRUE(Contains(out({"describe", "pod", "-n", "inference", kCrashing}), "BackOff"));
  EXPECT_TRUE(Contains(out({"explain", "deployment.spec.replicas"}), "replicas"));
  EXPECT_TRUE(Contains(out({"version"}), GetParam()));
  EXPECT_TRUE(Contains(out({"cluster-info"}), "CoreDNS"));
  EXPECT_TRUE(Contains(out({"api-resources"}), "PodMetrics"));
  EXPECT_EQ(kubesim.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Builds, KubectlVersionsTest,
                         ::testing::Values("v1.27.16", "v1.29.14", "v1.31.6", "v1.33.1"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

}  // namespace
}  // namespace uplink::kubesim
