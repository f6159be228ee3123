// The workspace end to end of workspace_e2e_test.cc on uplink-kubesim's podman runtime: the
// real console, inventory agent and controller, and the reservation's pod a real OCI container
// of the workspace image (deploy/docker/workspace-image.sh, built once per machine). Its
// commands, through the console's API, run as UID 1000 on a read-only root, in a container
// that holds neither the execution credential nor the inventory token nor a service account
// token (files or environment) and has no network; its stop leaves neither pod nor container.
#include <gtest/gtest.h>

#include "kubesim_process.h"
#include "workspace_flow.h"

namespace uplink::e2e {
namespace {

class WorkspacePodmanEndToEnd : public WorkspaceFlow {
 protected:
  void SetUp() override {
    Result<std::string> image = kubesim::testing::WorkspaceImage();
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    StartWith("podman", *image);
  }

  // `code` as a shell command: its output, and its exit code 0.
  std::string Shell(const std::string& reservation, const std::string& code) {
    json::value view = RunCommand(reservation, "shell", code);
    EXPECT_EQ(String(view, "state"), "exited") << ToJson(view);
    EXPECT_EQ(view.at("exit_code").as_int64(), 0) << ToJson(view);
    return String(view, "output");
  }
};

// A shell command that prints every file under / (but the kernel's /proc and /sys) that
// holds `secret`, then how many variables in any process's environment hold `prefix`.
// The secret is named in two halves, so that the command's own code does not hold it.
std::string SecretSearch(const std::string& secret, const std::string& prefix) {
  const size_t half = secret.size() / 2;
  return "a='" + secret.substr(0, half) + "'; b='" + secret.substr(half) +
         "'; grep -rlsF --devices=skip --exclude-dir=proc --exclude-dir=sys \"$a$b\" / ; "
         "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -F '" + prefix + "'; true";
}

TEST_F(WorkspacePodmanEndToEnd, OfferToReservationToCommandsToStopInARealContainer) {
  Qualified qualified;
  ASSERT_NO_FATAL_FAILURE(QualifyAndStartController(&qualified));
  ASSERT_TRUE(qualified.inventory_token.starts_with("agt_"));
  std::string id, pod;
  ASSERT_NO_FATAL_FAILURE(ReserveUntilRunning(qualified.offer_id, 1, &id, &pod));

  // The pod is a podman container, labelled with the pod's uid.
  EXPECT_TRUE(cluster_->Pod(pod, "{.status.containerStatuses[0].containerID}").starts_with("podman://"));
  const std::string pod_uid = cluster_->Pod(pod, "{.metadata.uid}");
  ASSERT_FALSE(pod_uid.empty());
  Result<std::string> containers = kubesim::testing::PodContainers(pod_uid);
  ASSERT_TRUE(containers.ok()) << containers.status().ToString();
  EXPECT_NE(*containers, "") << "no podman container for the pod";

  // A shell and a Python command: output and exit codes, as UID 1000.
  json::value id_u = RunCommand(id, "shell", "id -u");
  EXPECT_EQ(String(id_u, "state"), "exited") << ToJson(id_u);
  EXPECT_EQ(id_u.at("exit_code").as_int64(), 0);
  EXPECT_EQ(String(id_u, "output"), "1000\n");
  json::value shell = RunCommand(id, "shell", "echo out; echo err >&2; exit 3");
  EXPECT_EQ(shell.at("exit_code").as_int64(), 3) << ToJson(shell);
  EXPECT_EQ(String(shell, "output"), "out\nerr\n");
  json::value python =
      RunCommand(id, "python", "import os, sys\nprint(os.getuid(), 6 * 7)\nsys.exit(4)\n");
  EXPECT_EQ(String(python, "state"), "exited") << ToJson(python);
  EXPECT_EQ(python.at("exit_code").as_int64(), 4);
  EXPECT_EQ(String(python, "output"), "1000 42\n");

  // The root is read-only.
  json::value root = RunCommand(id, "shell", "touch /probe");
  EXPECT_NE(root.at("exit_code").as_int64(), 0) << ToJson(root);
  EXPECT_NE(String(root, "output").find("Read-only file system"), std::string::npos) << ToJson(root);

  // No service account token, and neither the execution credential nor the inventory token in
  // any file the workspace can read or in any process's environment.
  EXPECT_EQ(Shell(id, "test ! -e /var/run/secrets/kubernetes.io && echo no-token"), "no-token\n");
  EXPECT_EQ(Shell(id, SecretSearch(qualified.credential, "exe_")), "0\n");
  EXPECT_EQ(Shell(id, SecretSearch(qualified.inventory_token, "agt_")), "0\n");

  // No network: only the loopback interface, and an outbound connection fails.
  EXPECT_EQ(Shell(id, "ls /sys/class/net"), "lo\n");
  json::value connect = RunCommand(
      id, "python",
      "import socket\ntry:\n  socket.create_connection(('192.0.2.1', 443), timeout=5)\n"
      "  print('connected')\nexcept OSError as e:\n  print('refused:', e.strerror)\n");
  EXPECT_EQ(String(connect, "output"), "refused: Network is unreachable\n") << ToJson(connect);

  // Stop: the reservation completed, the pod gone, and its container too.
  StopUntilCompleted(id, pod);
  containers = kubesim::testing::PodContainers(pod_uid);
  ASSERT_TRUE(containers.ok()) << containers.status().ToString();
  EXPECT_EQ(*containers, "") << "the pod's podman container is left after the stop";
}

}  // namespace
}  // namespace uplink::e2e
