// Real `kubectl exec` (its WebSocket executor, v5.channel.k8s.io) against uplink-kubesim
// running pods as local processes: output, errors and exit codes, stdin and its end, large
// streams, and RBAC on pods/exec, including the create check Kubernetes 1.35 added.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "kubesim_process.h"

namespace uplink::kubesim {
namespace {

using testing::CommandResult;
using testing::KubesimProcess;
using namespace std::chrono_literals;

constexpr const char* kViewer = "viewer-token-51c0e9";
constexpr const char* kExecGetter = "exec-getter-token-7b2d44";

// The cluster agent's read-only role (get, list, watch on pods, logs) and one that may only
// `get` pods/exec, as an older WebSocket-era role would.
constexpr const char* kRbac = R"(apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: read-only}
rules:
- apiGroups: [""]
  resources: ["nodes", "namespaces", "pods", "events"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: read-only}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: read-only}
subjects: [{kind: User, name: viewer}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: exec-get}
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["pods/exec"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: exec-get}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: exec-get}
subjects: [{kind: User, name: exec-getter}]
)";

constexpr const char* kPod = R"(apiVersion: v1
kind: Pod
metadata: {name: shell}
spec:
  containers:
  - name: main
    image: debian:12
    command: [sleep, "3600"]
    env: [{name: GREETING, value: hello from the pod}]
)";

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// uplink-kubesim at `version` in RBAC mode, the roles applied and one pod running.
class ExecCluster {
 public:
  explicit ExecCluster(const std::string& version) {
    std::ofstream(files_.File("tokens.csv")) << kViewer << ",viewer,uid-viewer\n"
                                             << kExecGetter << ",exec-getter,uid-exec\n";
    auto started = KubesimProcess::Start(
        {"--runtime", "process", "--pod-start-delay", "0s", "--server-version", version,
         "--token-auth-file", files_.File("tokens.csv"), "--authorization-mode", "RBAC"});
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    if (!started.ok()) return;
    kubesim = std::move(started).value();
    CommandResult rbac = kubesim->Kubectl({"apply", "-f", "-"}, kRbac);
    EXPECT_EQ(rbac.exit_code, 0) << rbac.err;
    CommandResult pod = kubesim->Kubectl({"apply", "-f", "-"}, kPod);
    EXPECT_EQ(pod.exit_code, 0) << pod.err;
    running = uplink::testing::WaitFor([&] {
      CommandResult phase =
          kubesim->Kubectl({"get", "pod", "shell", "-o", "jsonpath={.status.phase}"});
      return phase.out == "Running";
    });
    EXPECT_TRUE(running) << kubesim->Logs();
  }
  ~ExecCluster() {
    if (kubesim) {
      EXPECT_EQ(kubesim->Stop(), 0) << kubesim->Logs();
    }
  }

  CommandResult As(const std::string& token, const std::vector<std::string>& args) {
    Result<std::string> kubeconfig = kubesim->WriteKubeconfigFor(token, token + ".kubeconfig");
    EXPECT_TRUE(kubeconfig.ok());
    return kubesim->KubectlWith(*kubeconfig, args);
  }

  uplink::testing::TempDir files_;
  std::unique_ptr<KubesimProcess> kubesim;
  bool running = false;
};

class KubectlExecTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new ExecCluster("v1.32.4"); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(cluster_->running); }
  static CommandResult Kubectl(const std::vector<std::string>& args, const std::string& input = "") {
    return cluster_->kubesim->Kubectl(args, input);
  }
  static ExecCluster* cluster_;
};

ExecCluster* KubectlExecTest::cluster_ = nullptr;

TEST_F(KubectlExecTest, OutputErrorsAndTheExitCodeComeBackAsFromARealCluster) {
  CommandResult result =
      Kubectl({"exec", "shell", "--", "sh", "-c", "echo \"$GREETING\"; echo trouble >&2; exit 7"});
  EXPECT_EQ(result.exit_code, 7) << result.err;
  EXPECT_EQ(result.out, "hello from the pod\n");
  EXPECT_TRUE(Contains(result.err, "trouble\n")) << result.err;
  EXPECT_TRUE(Contains(result.err, "command terminated with exit code 7")) << result.err;

  CommandResult ok = Kubectl({"exec", "shell", "-c", "main", "--", "true"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "");
}

TEST_F(KubectlExecTest, StdinReachesTheCommandAndItsEndLetsTheCommandFinish) {
  std::string input(300'000, 'x');
  for (size_t i = 0; i < input.size(); i += 1000) input[i] = '\n';
  CommandResult counted = Kubectl({"exec", "-i", "shell", "--", "sh", "-c", "wc -c; echo done"}, input);
  EXPECT_EQ(counted.exit_code, 0) << counted.err;
  EXPECT_EQ(counted.out, "300000\ndone\n");
  CommandResult echoed = Kubectl({"exec", "-i", "shell", "--", "cat"}, "one line\n");
  EXPECT_EQ(echoed.out, "one line\n");
}

TEST_F(KubectlExecTest, LargeOutputArrivesWhole) {
  CommandResult result = Kubectl(
      {"exec", "shell", "--", "sh", "-c", "head -c 6000000 /dev/zero | tr '\\000' z"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_EQ(result.out.size(), 6'000'000u);
  EXPECT_EQ(result.out.find_first_not_of('z'), std::string::npos);
}

TEST_F(KubectlExecTest, AMissingProgramOrContainerIsAClearError) {
  CommandResult missing = Kubectl({"exec", "shell", "--", "no-such-program"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_TRUE(Contains(missing.err, "exec: \"no-such-program\": executable file not found in $PATH"))
      << missing.err;
  CommandResult container = Kubectl({"exec", "shell", "-c", "sidecar", "--", "true"});
  EXPECT_NE(container.exit_code, 0);
  EXPECT_TRUE(Contains(container.err, "container sidecar is not valid for pod shell"))
      << container.err;
}

TEST_F(KubectlExecTest, TheReadOnlyRoleMayNotExecAndAGetOnlyRoleMayBefore135) {
  // Refused the WebSocket, kubectl falls back to SPDY's POST, whose refusal it prints.
  CommandResult viewer = cluster_->As(kViewer, {"exec", "shell", "--", "id"});
  EXPECT_NE(viewer.exit_code, 0);
  EXPECT_TRUE(Contains(viewer.err, "Error from server (Forbidden): pods \"shell\" is forbidden: "
                                   "User \"viewer\" cannot create resource \"pods/exec\" in API "
                                   "group \"\" in the namespace \"default\""))
      << viewer.err;
  EXPECT_EQ(viewer.out, "");
  CommandResult getter = cluster_->As(kExecGetter, {"exec", "shell", "--", "echo", "allowed"});
  EXPECT_EQ(getter.exit_code, 0) << getter.err;
  EXPECT_EQ(getter.out, "allowed\n");
}

TEST_F(KubectlExecTest, ZzDeleteWaitsForThePodToGoWithAWatch) {
  CommandResult deleted = Kubectl({"delete", "pod", "shell"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(deleted.out, "pod \"shell\" deleted\n");
  EXPECT_EQ(deleted.err, "");
  EXPECT_TRUE(Contains(Kubectl({"get", "pod", "shell"}).err, "NotFound"));
}

TEST(KubectlExec135, AWebSocketExecNeedsCreateFromKubernetes135) {
  ExecCluster cluster("1.35.2");
  ASSERT_TRUE(cluster.running);
  CommandResult getter = cluster.As(kExecGetter, {"exec", "shell", "--", "echo", "allowed"});
  EXPECT_NE(getter.exit_code, 0);
  EXPECT_TRUE(Contains(getter.err, "pods \"shell\" is forbidden: User \"exec-getter\" cannot "
                                   "create resource \"pods/exec\" in API group \"\" in the "
                                   "namespace \"default\""))
      << getter.err;
  CommandResult admin = cluster.kubesim->Kubectl({"exec", "shell", "--", "echo", "admin"});
  EXPECT_EQ(admin.exit_code, 0) << admin.err;
  EXPECT_EQ(admin.out, "admin\n");
}

}  // namespace
}  // namespace uplink::kubesim
