// The simulated scheduler and kubelets, with a clock the test moves: pods through Pending,
// Running, Succeeded, Failed and DeadlineExceeded, restarts, scheduling failures, node
// rejections and graceful deletion, on the simulated and the process runtime.
#include "kubesim/kubelet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "api_fixture.h"
#include "kubesim/runtime.h"
#include "support/process.h"

namespace uplink::kubesim {
namespace {

using namespace std::chrono_literals;

class KubeletTest : public testing::ApiFixture {
 protected:
  virtual std::string RuntimeKind() { return "simulated"; }

  ApiOptions ServerOptions() override {
    RuntimeOptions runtime_options;
    runtime_options.kind = RuntimeKind();
    runtime_options.state_directory = state_.path();
    Result<std::unique_ptr<PodRuntime>> runtime = MakeRuntime(runtime_options);
    EXPECT_TRUE(runtime.ok()) << runtime.status().ToString();
    runtime_ = std::move(runtime).value();
    KubeletOptions options;
    options.pod_start_delay = 2s;
    options.crash_loop_backoff = 10s;
    kubelet_ = std::make_unique<Kubelet>(store_, clock_, *runtime_, options);
    ApiOptions api_options = ApiFixture::ServerOptions();
    api_options.kubelet = kubelet_.get();
    return api_options;
  }

  void TearDown() override { kubelet_->Stop(); }

  json::object CreatePod(const std::string& json, const std::string& ns = "default") {
    net::Response response = Call("POST", "/api/v1/namespaces/" + ns + "/pods", json,
                                  "application/json");
    EXPECT_EQ(response.status, 201) << response.body;
    return Body(response);
  }

  json::object GetPod(const std::string& name, const std::string& ns = "default") {
    return Body(Call("GET", "/api/v1/namespaces/" + ns + "/pods/" + name));
  }

  // The reasons of the pod's events, oldest first.
  std::vector<std::string> EventReasons(const std::string& pod) {
    json::object list = Body(Call("GET", "/api/v1/namespaces/default/events?fieldSelector="
                                         "involvedObject.name%3D" + pod));
    std::vector<std::pair<std::string, std::string>> events;
    for (const json::value& event : list["items"].as_array()) {
      events.emplace_back(event.at("metadata").at("resourceVersion").as_string(),
                          event.at("reason").as_string());
    }
    std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
      return std::stoll(a.first) < std::stoll(b.first);
    });
    std::vector<std::string> reasons;
    for (auto& [version, reason] : events) reasons.push_back(reason);
    return reasons;
  }

  static std::string Phase(const json::object& pod) {
    const json::value* status = pod.if_contains("status");
    return status ? StringAt(status->as_object(), "phase") : "";
  }

  // Runs the kubelet's passes (its runtime work is on worker threads) until `done` holds.
  bool SyncUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 1000; ++i) {
      kubelet_->SyncOnce();
      if (done()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  // Until the pod's node has taken it, then past the start delay.
  void StartPod(const std::string& name) {
    ASSERT_TRUE(SyncUntil([&] { return GetPod(name)["status"].as_object().contains("startTime"); }));
    clock_.Advance(2s);
  }

  static std::string SleepPod(const std::string& name, const std::string& extra = "") {
    return R"({"metadata":{"name":")" + name + R"("},"spec":{)" + extra +
           R"("containers":[{"name":"main","image":"busybox:1.36","command":["sleep","3600"]}]}})";
  }

  uplink::testing::TempDir state_;
  std::unique_ptr<PodRuntime> runtime_;
  std::unique_ptr<Kubelet> kubelet_;
};

TEST_F(KubeletTest, APodIsScheduledStartsAfterTheDelayAndRunsWithAKubeletsStatus) {
  CreatePod(SleepPod("runner", R"("activeDeadlineSeconds":600,)"));
  ASSERT_TRUE(SyncUntil([&] { return GetPod("runner")["status"].as_object().contains("startTime"); }));
  json::object pending = GetPod("runner");
  EXPECT_EQ(Phase(pending), "Pending");
  std::string node(pending["spec"].at("nodeName").as_string());
  EXPECT_TRUE(node.starts_with("gpu-node-")) << node;  // the control plane is tainted
  EXPECT_EQ(pending["status"].at("containerStatuses").at(0).at("state").at("waiting").at("reason"),
            "ContainerCreating");
  EXPECT_EQ(pending["status"].at("conditions").at(0).at("type"), "PodReadyToStartContainers");
  EXPECT_EQ(pending["status"].at("conditions").at(0).at("status"), "False");

  clock_.Advance(2s);
  ASSERT_TRUE(SyncUntil([&] { return Phase(GetPod("runner")) == "Running"; }));
  json::object running = GetPod("runner");
  const json::object& status = running["status"].as_object();
  std::vector<std::string> types;
  for (const json::value& condition : status.at("conditions").as_array()) {
    types.emplace_back(condition.at("type").as_string());
    EXPECT_EQ(condition.at("status"), "True") << condition;
  }
  EXPECT_EQ(types, (std::vector<std::string>{"PodReadyToStartContainers", "Initialized", "Ready",
                                             "ContainersReady", "PodScheduled"}));
  const json::object& container = status.at("containerStatuses").at(0).as_object();
  EXPECT_EQ(container.at("ready"), true);
  EXPECT_EQ(container.at("started"), true);
  EXPECT_EQ(container.at("restartCount"), 0);
  EXPECT_TRUE(container.at("state").as_object().contains("running"));
  EXPECT_TRUE(std::string(container.at("containerID").as_string()).starts_with("containerd://"));
  EXPECT_TRUE(std::string(status.at("podIP").as_string()).starts_with("10.244."));
  EXPECT_TRUE(status.contains("hostIP"));
  EXPECT_EQ(EventReasons("runner"),
            (std::vector<std::string>{"Scheduled", "Pulled", "Created", "Started"}));
}

TEST_F(KubeletTest, ActiveDeadlineSecondsFailsThePodWithDeadlineExceeded) {
  CreatePod(SleepPod("bounded", R"("activeDeadlineSeconds":30,)"));
  StartPod("bounded");
  ASSERT_TRUE(SyncUntil([&] { return Phase(GetPod("bounded")) == "Running"; }));
  clock_.Advance(31s);
  ASSERT_TRUE(SyncUntil([&] {
    json::object pod = GetPod("bounded");
    return Phase(pod) == "Failed" &&
           pod["status"].at("containerStatuses").at(0).at("state").as_object().contains("terminated");
  }));
  json::object failed = GetPod("bounded");
  const json::object& status = failed["status"].as_object();
  EXPECT_EQ(status.at("reason"), "DeadlineExceeded");
  EXPECT_EQ(status.at("message"), "Pod was active on the node longer than the specified deadline");
  const json::object& terminated =
      status.at("containerStatuses").at(0).at("state").at("terminated").as_object();
  EXPECT_EQ(terminated.at("exitCode"), 137);
  EXPECT_EQ(terminated.at("reason"), "Error");
  for (const json::value& condition : status.at("conditions").as_array()) {
    if (condition.at("type") == "Ready") {
      EXPECT_EQ(condition.at("status"), "False");
      EXPECT_EQ(condition.at("reason"), "PodFailed");
    }
  }
  EXPECT_EQ(EventReasons("bounded"),
            (std::vector<std::string>{"Scheduled", "Pulled", "Created", "Started",
                                      "DeadlineExceeded", "Killing"}));
  // A finished pod takes no exec.
  EXPECT_EQ(kubelet_->ExecContainer("default", "bounded", "").status().message(),
            "cannot exec into a container in a completed pod; current phase is Failed");
}

TEST_F(KubeletTest, ADeleteStopsTheContainersAndThenRemovesThePod) {
  CreatePod(SleepPod("doomed"));
  StartPod("doomed");
  ASSERT_TRUE(SyncUntil([&] { return Phase(GetPod("doomed")) == "Running"; }));
  net::Response deleted = Call("DELETE", "/api/v1/namespaces/default/pods/doomed");
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  json::object terminating = Body(deleted);
  EXPECT_TRUE(terminating["metadata"].as_object().contains("deletionTimestamp"));
  EXPECT_EQ(terminating["metadata"].at("deletionGracePeriodSeconds"), 30);
  ASSERT_TRUE(SyncUntil([&] {
    return Call("GET", "/api/v1/namespaces/default/pods/doomed").status == 404;
  }));
}

TEST_F(KubeletTest, APodThatFitsNowhereSaysWhyAndIsScheduledOnceRoomIsFree) {
  auto gpu_pod = [](const std::string& name) {
    return R"({"metadata":{"name":")" + name + R"("},"spec":{"containers":[{"name":"main",
        "image":"trainer:1","resources":{"limits":{"nvidia.com/gpu":8}}}]}})";
  };
  for (const char* name : {"a", "b", "c"}) CreatePod(gpu_pod(name));
  ASSERT_TRUE(SyncUntil([&] {
    return GetPod("c")["spec"].as_object().contains("nodeName");
  }));
  CreatePod(gpu_pod("d"));
  ASSERT_TRUE(SyncUntil([&] {
    return GetPod("d")["status"].as_object().contains("conditions");
  }));
  json::object waiting = GetPod("d");
  const json::object& scheduled = waiting["status"].at("conditions").at(0).as_object();
  EXPECT_EQ(scheduled.at("type"), "PodScheduled");
  EXPECT_EQ(scheduled.at("status"), "False");
  EXPECT_EQ(scheduled.at("reason"), "Unschedulable");
  EXPECT_EQ(scheduled.at("message"),
            "0/4 nodes are available: 1 node(s) had untolerated taint "
            "{node-role.kubernetes.io/control-plane: }, 3 Insufficient nvidia.com/gpu. "
            "preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, 3 "
            "No preemption victims found for incoming pod.");
  EXPECT_EQ(EventReasons("d"), std::vector<std::string>{"FailedScheduling"});
  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/default/pods/a?gracePeriodSeconds=0").status, 200);
  ASSERT_TRUE(SyncUntil([&] { return GetPod("d")["spec"].as_object().contains("nodeName"); }));
}

TEST_F(KubeletTest, ANodeThatLacksRoomRejectsAPodBoundToItByName) {
  CreatePod(R"({"metadata":{"name":"greedy"},"spec":{"nodeName":"gpu-node-0001",
      "containers":[{"name":"main","image":"x:1","resources":{"limits":{"nvidia.com/gpu":9}}}]}})");
  ASSERT_TRUE(SyncUntil([&] { return Phase(GetPod("greedy")) == "Failed"; }));
  json::object rejected = GetPod("greedy");
  EXPECT_EQ(rejected["status"].at("reason"), "OutOfnvidia.com/gpu");
  EXPECT_EQ(rejected["status"].at("message"),
            "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 9, "
            "used: 0, capacity: 8");
}

TEST_F(KubeletTest, PodsLoadedFromFilesKeepTheStatusTheyWereGiven) {
  json::object loaded{{"apiVersion", "v1"}, {"kind", "Pod"},
                      {"metadata", json::object{{"name", "scenery"}, {"namespace", "default"}}},
                      {"spec", json::object{{"nodeName", "gpu-node-0001"},
                                            {"containers", json::array{json::object{
                                                {"name", "c"}, {"image", "x"}}}}}},
                      {"status", json::object{{"phase", "Running"},
                                              {"conditions", json::array()}}}};
  ASSERT_TRUE(store_.Put(loaded).ok());
  std::string before = ToJson(GetPod("scenery")["status"]);
  for (int i = 0; i < 5; ++i) kubelet_->SyncOnce();
  EXPECT_EQ(ToJson(GetPod("scenery")["status"]), before);
  // And a plain delete removes it at once.
  EXPECT_EQ(Call("DELETE", "/api/v1/namespaces/default/pods/scenery").status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/default/pods/scenery").status, 404);
}

class ProcessKubeletTest : public KubeletTest {
 protected:
  std::string RuntimeKind() override { return "process"; }
  static std::string ShellPod(const std::string& name, const std::string& script,
                              const std::string& policy) {
    return R"({"metadata":{"name":")" + name + R"("},"spec":{"restartPolicy":")" + policy +
           R"(","containers":[{"name":"main","image":"busybox:1.36","command":["sh","-c"],
           "args":[")" + script + R"("],"env":[{"name":"GREETING","value":"hi"},
           {"name":"POD","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}]}]}})";
  }
};

TEST_F(ProcessKubeletTest, AContainerThatExitsZeroSucceedsAndItsPodCompletes) {
  CreatePod(ShellPod("once", "test \\\"$GREETING $POD\\\" = \\\"hi once\\\"", "Never"));
  StartPod("once");
  ASSERT_TRUE(SyncUntil([&] { return Phase(GetPod("once")) == "Succeeded"; }));
  json::object done = GetPod("once");
  const json::object& terminated =
      done["status"].at("containerStatuses").at(0).at("state").at("terminated").as_object();
  EXPECT_EQ(terminated.at("exitCode"), 0);
  EXPECT_EQ(terminated.at("reason"), "Completed");
  EXPECT_TRUE(std::string(terminated.at("containerID").as_string()).starts_with("process://"));
  for (const json::value& condition : done["status"].at("conditions").as_array()) {
    if (condition.at("type") == "Ready") {
      EXPECT_EQ(condition.at("reason"), "PodCompleted");
    }
  }
}

TEST_F(ProcessKubeletTest, AFailingContainerFailsItsPodOrRestartsWithBackOff) {
  CreatePod(ShellPod("broken", "exit 3", "Never"));
  CreatePod(ShellPod("retried", "exit 3", "OnFailure"));
  ASSERT_TRUE(SyncUntil([&] { return GetPod("broken")["status"].as_object().contains("startTime"); }));
  StartPod("retried");
  ASSERT_TRUE(SyncUntil([&] { return Phase(GetPod("broken")) == "Failed"; }));
  EXPECT_EQ(GetPod("broken")["status"].at("containerStatuses").at(0).at("state").at("terminated")
                .at("exitCode"),
            3);
  ASSERT_TRUE(SyncUntil([&] {
    json::object pod = GetPod("retried");
    return pod["status"].at("containerStatuses").at(0).at("restartCount") == 1;
  }));
  json::object backing_off = GetPod("retried");
  const json::object& container = backing_off["status"].at("containerStatuses").at(0).as_object();
  EXPECT_EQ(Phase(backing_off), "Running");
  EXPECT_EQ(container.at("state").at("waiting").at("reason"), "CrashLoopBackOff");
  EXPECT_TRUE(std::string(container.at("state").at("waiting").at("message").as_string())
                  .starts_with("back-off 10s restarting failed container=main pod=retried_default("));
  EXPECT_EQ(container.at("lastState").at("terminated").at("exitCode"), 3);
  clock_.Advance(10s);
  ASSERT_TRUE(SyncUntil([&] {
    return GetPod("retried")["status"].at("containerStatuses").at(0).at("restartCount") == 2;
  }));
}

TEST_F(ProcessKubeletTest, AMissingCommandIsAStartError) {
  CreatePod(R"({"metadata":{"name":"typo"},"spec":{"restartPolicy":"Never","containers":[
      {"name":"main","image":"x:1","command":["no-such-program-here"]}]}})");
  StartPod("typo");
  ASSERT_TRUE(SyncUntil([&] { return Phase(GetPod("typo")) == "Failed"; }));
  json::object pod = GetPod("typo");
  const json::object& terminated =
      pod["status"].at("containerStatuses").at(0).at("state").at("terminated").as_object();
  EXPECT_EQ(terminated.at("reason"), "StartError");
  EXPECT_EQ(terminated.at("exitCode"), 128);
  EXPECT_EQ(terminated.at("message"),
            "exec: \"no-such-program-here\": executable file not found in $PATH");
}

TEST_F(ProcessKubeletTest, DeletingARunningPodStopsItsProcessAndFreesItsDirectory) {
  CreatePod(ShellPod("worker", "echo started; exec sleep 3600", "Always"));
  StartPod("worker");
  ASSERT_TRUE(SyncUntil([&] { return Phase(GetPod("worker")) == "Running"; }));
  ASSERT_FALSE(std::filesystem::is_empty(state_.path()));
  ASSERT_EQ(Call("DELETE", "/api/v1/namespaces/default/pods/worker").status, 200);
  ASSERT_TRUE(SyncUntil([&] {
    return Call("GET", "/api/v1/namespaces/default/pods/worker").status == 404;
  }));
  EXPECT_TRUE(std::filesystem::is_empty(state_.path()));
}

}  // namespace
}  // namespace uplink::kubesim
