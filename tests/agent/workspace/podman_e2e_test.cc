// One reservation end to end on uplink-kubesim's podman runtime: the workspace a real OCI
// container of the workspace image (deploy/docker/workspace-image.sh), under the chart's
// guards, with the console's commands run in it by the controller: it runs as UID 1000 on a
// read-only root, holds no service account token and no console credential (files or
// environment), and has no network.
#include <gtest/gtest.h>

#include "workspace_cluster.h"

namespace uplink::agent::workspace::testing {
namespace {

using namespace std::chrono_literals;
using uplink::testing::WaitFor;

class WorkspacePodmanTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<std::string> image = kubesim::testing::WorkspaceImage();
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    ClusterOptions options;
    options.runtime = "podman";
    options.image = *image;
    std::string error;
    cluster_ = WorkspaceCluster::Start(options, &error).release();
    ASSERT_NE(cluster_, nullptr) << error;
    cluster_->StartController();
    cluster_->console().Reserve(cluster_->Reservation(kReservation, 1, 900));
    ASSERT_TRUE(WaitFor([] { return cluster_->Pod(kPod, "{.status.phase}") == "Running"; }, 180s))
        << cluster_->Pod(kPod, "{.status}") << cluster_->ControllerLogs();
  }
  static void TearDownTestSuite() {
    if (cluster_ != nullptr) {
      cluster_->console().Stop(kReservation);
      EXPECT_TRUE(WaitFor([] { return !cluster_->PodExists(kPod); }, 60s));
    }
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  static ConsoleStandIn::CommandView Run(const std::string& kind, const std::string& code) {
    return cluster_->console().RunToEnd(kReservation, kind, code);
  }

  static constexpr char kReservation[] = "res_0000000000000a0d";
  static constexpr char kPod[] = "ws-res-0000000000000a0d";
  static WorkspaceCluster* cluster_;
};

WorkspaceCluster* WorkspacePodmanTest::cluster_ = nullptr;

TEST_F(WorkspacePodmanTest, ShellAndPythonRunAsUid1000InTheContainer) {
  EXPECT_TRUE(cluster_->Pod(kPod, "{.status.containerStatuses[0].containerID}").starts_with("podman://"));
  ConsoleStandIn::CommandView uid = Run("shell", "id -u; id -g");
  EXPECT_EQ(uid.state, "exited");
  EXPECT_EQ(uid.output, "1000\n1000\n");
  ConsoleStandIn::CommandView python = Run("python", "import os, sys\nprint(os.getuid())\nsys.exit(3)\n");
  EXPECT_EQ(python.exit_code, 3);
  EXPECT_EQ(python.output, "1000\n");
}

TEST_F(WorkspacePodmanTest, TheRootIsReadOnlyScratchAndTmpAreNot) {
  ConsoleStandIn::CommandView root = Run("shell", "touch /probe");
  EXPECT_NE(root.exit_code, 0);
  EXPECT_NE(root.output.find("Read-only file system"), std::string::npos) << root.output;
  EXPECT_EQ(Run("shell", "touch /scratch/x /tmp/x && pwd").output, "/scratch\n");
}

TEST_F(WorkspacePodmanTest, NoTokenAndNoCredentialInFilesOrEnvironment) {
  ConsoleStandIn::CommandView token =
      Run("shell", "test ! -e /var/run/secrets/kubernetes.io/serviceaccount && echo no-token");
  EXPECT_EQ(token.output, "no-token\n");
  // The credential's text nowhere in the container's files (but /proc and /sys, which are
  // the kernel's) nor in any process's environment. The code names it in two halves, so that
  // the command's own code file does not hold it.
  const std::string credential = kCredential;
  const size_t half = credential.size() / 2;
  ConsoleStandIn::CommandView search = Run(
      "shell", "a='" + credential.substr(0, half) + "'; b='" + credential.substr(half) +
                   "'; grep -rlsF --exclude-dir=proc --exclude-dir=sys \"$a$b\" / ; "
                   "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -F -e exe_ -e agt_; true");
  EXPECT_EQ(search.output, "0\n");
}

TEST_F(WorkspacePodmanTest, ThereIsNoNetwork) {
  EXPECT_EQ(Run("shell", "ls /sys/class/net").output, "lo\n");
  ConsoleStandIn::CommandView connect = Run(
      "python",
      "import socket\ntry:\n  socket.create_connection(('1.1.1.1', 443), timeout=3)\n  print('connected')\n"
      "except OSError as e:\n  print('refused')\n");
  EXPECT_EQ(connect.output, "refused\n");
}

}  // namespace
}  // namespace uplink::agent::workspace::testing
