// --runtime podman end to end: the workspace image (deploy/docker/workspace-image.sh, built
// once per machine), a pod in a Pod Security restricted namespace under a default-deny
// NetworkPolicy, run as a real OCI container, and real `kubectl exec` into it: the user,
// Python, a read-only root, no network, no service account token; then deleted, container
// and all.
#include <gtest/gtest.h>

#include "kubesim_process.h"

namespace uplink::kubesim {
namespace {

using testing::CommandResult;
using testing::KubesimProcess;
using namespace std::chrono_literals;

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::string Manifests(const std::string& image) {
  return R"(apiVersion: v1
kind: Namespace
metadata:
  name: workspaces
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: workspaces}
spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
---
apiVersion: v1
kind: Pod
metadata: {name: workspace, namespace: workspaces}
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  restartPolicy: Never
  activeDeadlineSeconds: 600
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    runAsGroup: 1000
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: workspace
    image: )" + image + R"(
    command: [sh, -c, "trap 'exit 0' TERM; sleep infinity & wait"]
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
    resources:
      limits: {cpu: "1", memory: 256Mi}
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - {name: scratch, emptyDir: {sizeLimit: 64Mi}}
)";
}

class PodmanRuntimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<std::string> image = testing::WorkspaceImage();
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    image_ = new std::string(*image);
    auto started = KubesimProcess::Start({"--runtime", "podman", "--pod-start-delay", "0s"});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    kubesim_ = started->release();
    CommandResult applied = kubesim_->Kubectl({"apply", "-f", "-"}, Manifests(*image_));
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
    ASSERT_TRUE(uplink::testing::WaitFor(
        [] { return Get("{.status.phase}") == "Running"; }, 120s))
        << Get("{.status}") << kubesim_->Logs();
  }
  static void TearDownTestSuite() {
    if (kubesim_) {
      EXPECT_EQ(kubesim_->Stop(), 0) << kubesim_->Logs();
    }
    delete kubesim_;
    kubesim_ = nullptr;
    delete image_;
  }
  void SetUp() override { ASSERT_NE(kubesim_, nullptr); }

  static std::string Get(const std::string& jsonpath) {
    return kubesim_->Kubectl({"get", "pod", "workspace", "-n", "workspaces", "-o",
                              "jsonpath=" + jsonpath}).out;
  }
  static CommandResult Exec(const std::vector<std::string>& command) {
    std::vector<std::string> args = {"exec", "-n", "workspaces", "workspace", "--"};
    args.insert(args.end(), command.begin(), command.end());
    return kubesim_->Kubectl(args);
  }

  static std::string* image_;
  static KubesimProcess* kubesim_;
};

std::string* PodmanRuntimeTest::image_ = nullptr;
KubesimProcess* PodmanRuntimeTest::kubesim_ = nullptr;

TEST_F(PodmanRuntimeTest, TheContainerRunsTheImageAsUid1000WithPython) {
  EXPECT_TRUE(Get("{.status.containerStatuses[0].containerID}").starts_with("podman://"));
  EXPECT_EQ(Get("{.status.containerStatuses[0].imageID}"), *image_);
  CommandResult uid = Exec({"id", "-u"});
  EXPECT_EQ(uid.exit_code, 0) << uid.err;
  EXPECT_EQ(uid.out, "1000\n");
  CommandResult python =
      Exec({"python3", "-c", "import os, sys; print(os.getuid(), sum(range(10))); sys.exit(4)"});
  EXPECT_EQ(python.exit_code, 4) << python.err;
  EXPECT_EQ(python.out, "1000 45\n");
}

TEST_F(PodmanRuntimeTest, TheRootIsReadOnlyOnlyScratchIsWritableAndNoTokenIsMounted) {
  CommandResult root = Exec({"touch", "/probe"});
  EXPECT_NE(root.exit_code, 0);
  EXPECT_TRUE(Contains(root.err, "Read-only file system")) << root.err;
  CommandResult tmp = Exec({"touch", "/tmp/probe"});
  EXPECT_NE(tmp.exit_code, 0) << "/tmp is part of the read-only root unless a volume is mounted";
  CommandResult scratch = Exec({"sh", "-c", "echo data > /scratch/x && cat /scratch/x && df -k /scratch"});
  EXPECT_EQ(scratch.exit_code, 0) << scratch.err;
  EXPECT_TRUE(Contains(scratch.out, "data\n")) << scratch.out;
  // A 64 MiB tmpfs, as the emptyDir's sizeLimit says.
  EXPECT_TRUE(Contains(scratch.out, "\ntmpfs ") && Contains(scratch.out, " 65536 ")) << scratch.out;
  EXPECT_EQ(Exec({"sh", "-c", "test ! -e /var/run/secrets/kubernetes.io/serviceaccount"}).exit_code, 0);
  CommandResult capabilities = Exec({"grep", "CapEff", "/proc/self/status"});
  EXPECT_EQ(capabilities.out, "CapEff:\t0000000000000000\n");
}

TEST_F(PodmanRuntimeTest, DefaultDenyEgressLeavesNoNetwork) {
  CommandResult interfaces = Exec({"ls", "/sys/class/net"});
  EXPECT_EQ(interfaces.out, "lo\n");
  CommandResult connect = Exec(
      {"python3", "-c",
       "import socket; socket.create_connection(('192.0.2.1', 443), timeout=5)"});
  EXPECT_NE(connect.exit_code, 0);
  EXPECT_TRUE(Contains(connect.err, "Network is unreachable")) << connect.err;
}

TEST_F(PodmanRuntimeTest, ZzDeletingThePodRemovesItsContainer) {
  std::string uid = Get("{.metadata.uid}");
  ASSERT_FALSE(uid.empty());
  EXPECT_NE(testing::PodContainers(uid).value_or(""), "");
  CommandResult deleted =
      kubesim_->Kubectl({"delete", "pod", "workspace", "-n", "workspaces", "--wait=false"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  ASSERT_TRUE(uplink::testing::WaitFor([] {
    return Contains(kubesim_->Kubectl({"get", "pod", "workspace", "-n", "workspaces"}).err,
                    "NotFound");
  }, 60s));
  Result<std::string> containers = testing::PodContainers(uid);
  ASSERT_TRUE(containers.ok()) << containers.status().ToString();
  EXPECT_EQ(*containers, "");
}

}  // namespace
}  // namespace uplink::kubesim
