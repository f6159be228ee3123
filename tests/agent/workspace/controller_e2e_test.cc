// `uplink-agent workspace` end to end against uplink-kubesim (--runtime process: each
// workspace a local process) with the chart's guards, and the console stand-in: start-up
// refusals, a reservation's whole life with commands, the console going away, the controller
// going away, a restart in the middle of a command, and drain.
#include <gtest/gtest.h>

#include "workspace_cluster.h"

namespace uplink::agent::workspace::testing {
namespace {

using namespace std::chrono_literals;
using uplink::testing::CommandResult;
using uplink::testing::WaitFor;

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::unique_ptr<WorkspaceCluster> Cluster(const ClusterOptions& options = {}) {
  std::string error;
  auto cluster = WorkspaceCluster::Start(options, &error);
  EXPECT_NE(cluster, nullptr) << error;
  return cluster;
}

TEST(WorkspaceStartTest, RefusesKubernetes133And137) {
  for (const char* version : {"1.33.4", "1.37.0"}) {
    ClusterOptions options;
    options.server_version = version;
    options.guards = false;  // the version is checked first
    auto cluster = Cluster(options);
    ASSERT_NE(cluster, nullptr);
    std::vector<std::string> argv = cluster->ControllerArgv();
    CommandResult run = cluster->RunAgent(std::vector<std::string>(argv.begin() + 1, argv.end()));
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_TRUE(Contains(run.err, std::string("refusing to start: the Kubernetes API server is v") +
                                      version +
                                      "; uplink-agent workspace supports Kubernetes 1.34 to 1.36"))
        << run.err;
  }
}

TEST(WorkspaceStartTest, RefusesMissingGuardsAndSaysWhich) {
  auto cluster = Cluster();
  ASSERT_NE(cluster, nullptr);
  const std::string& ns = cluster->ns();
  ASSERT_EQ(cluster->kubesim().Kubectl({"delete", "networkpolicy", "default-deny", "-n", ns}).exit_code, 0);
  ASSERT_EQ(cluster->kubesim()
                .Kubectl({"delete", "validatingadmissionpolicybinding", "uplink-workspace"})
                .exit_code,
            0);
  ASSERT_EQ(cluster->kubesim()
                .Kubectl({"label", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline",
                          "--overwrite"})
                .exit_code,
            0);
  std::vector<std::string> argv = cluster->ControllerArgv();
  CommandResult run = cluster->RunAgent(std::vector<std::string>(argv.begin() + 1, argv.end()));
  EXPECT_EQ(run.exit_code, 1);
  for (const char* missing :
       {"lacks 4 guards",
        "Namespace uplink-workspaces: label pod-security.kubernetes.io/enforce=restricted",
        "NetworkPolicy in namespace uplink-workspaces: none denies all ingress",
        "NetworkPolicy in namespace uplink-workspaces: none denies all egress",
        "ValidatingAdmissionPolicyBinding: none binds uplink-workspace"}) {
    EXPECT_TRUE(Contains(run.err, missing)) << missing << "\n" << run.err;
  }
}

TEST(WorkspaceStartTest, StartsWithTheChartsGuards) {
  auto cluster = Cluster();
  ASSERT_NE(cluster, nullptr);
  cluster->StartController();
  EXPECT_TRUE(WaitFor([&] { return cluster->console().Syncs() >= 2; }, 30s))
      << cluster->ControllerLogs();
  EXPECT_EQ(cluster->console().LastUserAgent(), "uplink-agent/" UPLINK_VERSION " (workspace)");
  EXPECT_FALSE(Contains(cluster->ControllerLogs(), kCredential));
  EXPECT_EQ(cluster->StopController(), 0);
}

class WorkspaceLifeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = Cluster();
    ASSERT_NE(cluster_, nullptr);
    cluster_->StartController();
  }
  void TearDown() override {
    if (HasFailure() && cluster_) std::fprintf(stderr, "%s\n", cluster_->ControllerLogs().c_str());
  }
  bool Running(const std::string& pod) {
    return WaitFor([&] { return cluster_->Pod(pod, "{.status.phase}") == "Running"; }, 30s);
  }
  ConsoleStandIn::CommandView Finished(const std::string& id) {
    ConsoleStandIn::CommandView view;
    WaitFor([&] {
      view = cluster_->console().Command(id);
      return protocol::IsFinalCommandState(view.state);
    }, 60s);
    return view;
  }
  std::unique_ptr<WorkspaceCluster> cluster_;
};

TEST_F(WorkspaceLifeTest, AReservationRunsCommandsAndIsGoneWhenStopped) {
  const std::string id = "res_00000000000000a1";
  cluster_->console().Reserve(cluster_->Reservation(id, 2, 600));
  const std::string pod = "ws-res-00000000000000a1";
  ASSERT_TRUE(Running(pod)) << cluster_->Pod(pod, "{.status}");
  EXPECT_EQ(cluster_->Pod(pod, "{.spec.nodeName}"), "gpu-node-0001");
  EXPECT_EQ(cluster_->Pod(pod, "{.spec.containers[0].resources.limits.nvidia\\.com/gpu}"), "2");
  ASSERT_TRUE(WaitFor([&] { return cluster_->console().State(id) == "running"; }, 30s));

  std::string shell = cluster_->console().AddCommand(id, "shell", "echo out; echo err >&2; exit 3");
  std::string python = cluster_->console().AddCommand(id, "python", "print(6 * 7)");
  ConsoleStandIn::CommandView shell_done = Finished(shell);
  EXPECT_EQ(shell_done.state, "exited");
  EXPECT_EQ(shell_done.exit_code, 3);
  EXPECT_EQ(shell_done.output, "out\nerr\n");
  ConsoleStandIn::CommandView python_done = Finished(python);
  EXPECT_EQ(python_done.state, "exited");
  EXPECT_EQ(python_done.exit_code, 0);
  EXPECT_EQ(python_done.output, "42\n");

  std::string capped = cluster_->console().AddCommand(id, "shell", "seq 1 100000", 60, 1000);
  ConsoleStandIn::CommandView capped_done = Finished(capped);
  EXPECT_EQ(capped_done.output.size(), 1000u);
  EXPECT_TRUE(capped_done.truncated);
  std::string slow = cluster_->console().AddCommand(id, "shell", "sleep 30 & sleep 30", 1);
  EXPECT_EQ(Finished(slow).state, "timeout");

  cluster_->console().Stop(id);
  ASSERT_TRUE(WaitFor([&] { return cluster_->console().State(id) == "completed"; }, 30s));
  EXPECT_FALSE(cluster_->PodExistsNow(pod)) << "completed is reported once the pod is gone";
  std::vector<std::string> keys = cluster_->console().EventKeys();
  EXPECT_EQ(keys.front(), id + "/provisioning/1");
  EXPECT_TRUE(std::find(keys.begin(), keys.end(), id + "/running/1") != keys.end());
  // SSH is off unless --ssh: no tunnel was ever asked for, and none of its metrics exist.
  EXPECT_EQ(cluster_->console().TunnelAttempts(), 0);
  EXPECT_EQ(cluster_->ControllerMetric("uplink_workspace_ssh_tunnel_connected"), -1);
}

TEST_F(WorkspaceLifeTest, NeverPastTheCapacityAndReservationsRunConcurrently) {
  for (int i = 0; i < 3; ++i) {
    cluster_->console().Reserve(cluster_->Reservation("res_00000000000000b" + std::to_string(i), 2, 600));
  }
  // Capacity 4: two of the three run, the third waits for room.
  ASSERT_TRUE(WaitFor([&] { return cluster_->PodNames().size() == 2; }, 30s));
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(cluster_->PodNames().size(), 2u);
  cluster_->console().Stop("res_00000000000000b0");
  EXPECT_TRUE(WaitFor([&] { return cluster_->PodExists("ws-res-00000000000000b2"); }, 30s))
      << "the third runs once the first is gone";
}

TEST_F(WorkspaceLifeTest, WithTheConsoleDownTheLocalLoopDeletesOnTime) {
  const std::string id = "res_00000000000000c1";
  cluster_->console().Reserve(cluster_->Reservation(id, 1, 8));
  ASSERT_TRUE(Running("ws-res-00000000000000c1"));
  ASSERT_TRUE(WaitFor([&] { return cluster_->console().State(id) == "running"; }, 30s));
  cluster_->console().SetDown(true);
  EXPECT_TRUE(WaitFor([&] { return !cluster_->PodExists("ws-res-00000000000000c1"); }, 30s));
  EXPECT_EQ(cluster_->console().State(id), "running") << "the console heard nothing while down";
  cluster_->console().SetDown(false);
  // The event kept while the console was away arrives, once.
  EXPECT_TRUE(WaitFor([&] { return cluster_->console().State(id) == "expired"; }, 30s));
  EXPECT_EQ(cluster_->console().Sends(id + "/expired/1"), 1);
}

TEST_F(WorkspaceLifeTest, WithTheControllerStoppedTooTheDeadlineEndsTheWorkspace) {
  const std::string id = "res_00000000000000d1";
  cluster_->console().Reserve(cluster_->Reservation(id, 1, 6));
  const std::string pod = "ws-res-00000000000000d1";
  ASSERT_TRUE(Running(pod));
  cluster_->console().SetDown(true);
  EXPECT_EQ(cluster_->StopController(), 0);
  EXPECT_TRUE(WaitFor([&] { return cluster_->Pod(pod, "{.status.phase}") == "Failed"; }, 30s));
  EXPECT_EQ(cluster_->Pod(pod, "{.status.reason}"), "DeadlineExceeded");
}

TEST_F(WorkspaceLifeTest, ARestartInTheMiddleOfACommandRunsItOnce) {
  const std::string id = "res_00000000000000e1";
  cluster_->console().Reserve(cluster_->Reservation(id, 1, 600));
  ASSERT_TRUE(Running("ws-res-00000000000000e1"));
  std::string command = cluster_->console().AddCommand(
      id, "shell", "echo ran >> runs; echo started; sleep 4; echo runs: $(wc -l < runs)");
  ASSERT_TRUE(WaitFor([&] { return cluster_->console().Command(command).output == "started\n"; }, 30s));
  EXPECT_EQ(cluster_->StopController(), 0);
  cluster_->StartController();
  ConsoleStandIn::CommandView done = Finished(command);
  EXPECT_EQ(done.state, "exited");
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_EQ(done.output, "started\nruns: 1\n");
}

TEST_F(WorkspaceLifeTest, APodDeletedOutsideUplinkFailsItsReservationAndIsNotMadeAgain) {
  const std::string id = "res_00000000000000e2";
  const std::string pod = "ws-res-00000000000000e2";
  cluster_->console().Reserve(cluster_->Reservation(id, 1, 600));
  ASSERT_TRUE(Running(pod));
  ASSERT_TRUE(WaitFor([&] { return cluster_->console().State(id) == "running"; }, 30s));
  ASSERT_TRUE(cluster_->DeletePod(pod));
  EXPECT_TRUE(WaitFor([&] { return cluster_->console().State(id) == "failed"; }, 60s))
      << cluster_->console().State(id);
  // Syncs after the failure was acknowledged: none brought the pod back.
  const int syncs = cluster_->console().Syncs();
  ASSERT_TRUE(WaitFor([&] { return cluster_->console().Syncs() >= syncs + 2; }, 60s));
  EXPECT_FALSE(cluster_->PodExistsNow(pod)) << "a workspace that lost its files started afresh";
  EXPECT_EQ(cluster_->console().Sends(id + "/failed/1"), 1);
}

TEST_F(WorkspaceLifeTest, DrainDeletesEveryWorkspaceAndVerifiesNothingIsLeft) {
  cluster_->console().Reserve(cluster_->Reservation("res_00000000000000f1", 1, 600));
  cluster_->console().Reserve(cluster_->Reservation("res_00000000000000f2", 1, 600));
  ASSERT_TRUE(WaitFor([&] { return cluster_->PodNames().size() == 2; }, 30s));
  CommandResult drain = cluster_->RunAgent({"workspace", "drain", "--config=" + cluster_->config_path(),
                                            "--kubeconfig=" + cluster_->kubesim().kubeconfig()});
  EXPECT_EQ(drain.exit_code, 0) << drain.err;
  // 2, or more when the controller made a deleted pod again before it saw the marker.
  EXPECT_TRUE(Contains(drain.out, "workspace pods deleted; no pod is left in uplink-workspaces"))
      << drain.out;
  EXPECT_TRUE(cluster_->PodNames().empty());
  EXPECT_TRUE(WaitFor([&] { return cluster_->console().SawDraining(); }, 30s));
  cluster_->console().Reserve(cluster_->Reservation("res_00000000000000f3", 1, 600));
  std::this_thread::sleep_for(3s);
  EXPECT_TRUE(cluster_->PodNames().empty()) << "nothing is created while draining";
  CommandResult resume = cluster_->RunAgent({"workspace", "drain", "--resume",
                                             "--config=" + cluster_->config_path(),
                                             "--kubeconfig=" + cluster_->kubesim().kubeconfig()});
  EXPECT_EQ(resume.exit_code, 0) << resume.err;
  EXPECT_TRUE(WaitFor([&] { return cluster_->PodExists("ws-res-00000000000000f3"); }, 30s));
}

}  // namespace
}  // namespace uplink::agent::workspace::testing
