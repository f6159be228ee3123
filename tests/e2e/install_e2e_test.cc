// `uplink connections install` with real kubectl against uplink-kubesim and a real console:
// the token reaches the cluster's Secret without ever being shown, and works.
#include <gtest/gtest.h>

#include "cluster.h"
#include "common/crypto.h"
#include "common/files.h"

namespace uplink::e2e {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class InstallEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    d_.StartConsole();
    cluster_ = &d_.StartCluster("5b0e3a52-4c9e-4f7c-9d51-1d2f3c4b5a69", 2, 8);
  }

  testing::CommandResult Install(std::vector<std::string> extra, const std::string& in = "") {
    std::vector<std::string> args{"connections", "install", "gpu-prod", "--kubeconfig",
                                  cluster_->kubeconfig};
    args.insert(args.end(), extra.begin(), extra.end());
    return d_.Uplink(args, {{"UPLINK_API_KEY", d_.admin_key()}}, in);
  }

  // The token in the Secret, read back with kubectl and decoded; "" if there is none.
  std::string SecretToken(const std::string& ns = "uplink",
                          const std::string& name = "uplink-agent-token") {
    auto got = d_.Kubectl(
        *cluster_, {"-n", ns, "get", "secret", name, "-o", "jsonpath={.data.UPLINK_AGENT_TOKEN}"});
    if (got.exit_code != 0) return "";
    auto decoded = Base64Decode(TrimWhitespace(got.out));
    EXPECT_TRUE(decoded.ok()) << got.out;
    return decoded.ok() ? *decoded : "";
  }

  Deployment d_;
  SimulatedCluster* cluster_ = nullptr;
};

TEST_F(InstallEndToEnd, YesPutsAWorkingTokenInTheSecretWithoutShowingIt) {
  auto r = Install({"--yes"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string token = SecretToken();
  ASSERT_EQ(token.rfind("agt_", 0), 0u) << "the Secret holds: " << token;
  EXPECT_EQ(d_.AgentWhoami(token), 200);
  EXPECT_EQ(r.out.find(token), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find(token), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("agt_"), std::string::npos) << r.out;
  // The helm commands install every workload from the console's own chart repository.
  EXPECT_NE(r.out.find("helm repo add --force-update uplink " + d_.console_url() + "/charts"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("helm upgrade --install uplink-agent uplink/uplink-agent --version " +
                       std::string(UPLINK_VERSION)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--set-string config.baseUrl=" + d_.console_url()), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--set kubernetes.enabled=true"), std::string::npos) << r.out;
  // The console is on loopback: no pod could reach it, and the CLI says so.
  EXPECT_NE(r.err.find("uplink: warning: The agent cannot reach the console at " +
                       d_.console_url() + ": 127.0.0.1 is a loopback address"),
            std::string::npos)
      << r.err;

  auto labels =
      d_.Kubectl(*cluster_, {"get", "namespace", "uplink", "-o", "jsonpath={.metadata.labels}"});
  ASSERT_EQ(labels.exit_code, 0) << labels.err;
  EXPECT_NE(labels.out.find("\"pod-security.kubernetes.io/enforce\":\"privileged\""),
            std::string::npos)
      << labels.out;
  EXPECT_NE(labels.out.find("\"pod-security.kubernetes.io/enforce-version\":\"latest\""),
            std::string::npos)
      << labels.out;

  // Installing again rotates the token and replaces it in the existing Secret.
  auto again = Install({"--yes"});
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("Rotated"), std::string::npos) << again.out;
  const std::string rotated = SecretToken();
  ASSERT_EQ(rotated.rfind("agt_", 0), 0u);
  EXPECT_NE(rotated, token);
  EXPECT_EQ(d_.AgentWhoami(rotated), 200);
  EXPECT_EQ(d_.AgentWhoami(token), 401) << "the old token still works";
  EXPECT_EQ(again.out.find(rotated), std::string::npos);
  EXPECT_EQ(again.err.find(rotated), std::string::npos);

  auto list = d_.Uplink({"connections", "list"}, {{"UPLINK_API_KEY", d_.admin_key()}});
  EXPECT_EQ(Count(list.out, "gpu-prod"), 1u) << "install made a second connection\n" << list.out;
}

TEST_F(InstallEndToEnd, AnotherNamespaceSecretAndLevel) {
  auto r = Install({"--yes", "--namespace", "gpu-agents", "--secret-name", "agent-token",
                    "--workloads", "inventory", "--pod-security", "baseline"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string token = SecretToken("gpu-agents", "agent-token");
  EXPECT_EQ(d_.AgentWhoami(token), 200);
  auto labels = d_.Kubectl(*cluster_,
                           {"get", "namespace", "gpu-agents", "-o", "jsonpath={.metadata.labels}"});
  EXPECT_NE(labels.out.find("\"pod-security.kubernetes.io/enforce\":\"baseline\""),
            std::string::npos)
      << labels.out;
}

TEST_F(InstallEndToEnd, TheQuestionIsAskedOnTheTerminal) {
  auto r = d_.UplinkInTerminal(
      {"connections", "install", "gpu-prod", "--kubeconfig", cluster_->kubeconfig},
      {{"UPLINK_API_KEY", d_.admin_key()}},
      {{"Workloads [2]: ", "1\n"},
       {"[nvidia.com/gpu.present=true]: ", "nvidia.com/gpu.present=true,pool=a\n"},
       {"to restricted, using kubectl context 'uplink-kubesim'? [y/N] ", "y\n"},
       {"Enter to choose later): ", "ml, inference\n"}});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string token = SecretToken();
  EXPECT_EQ(d_.AgentWhoami(token), 200);
  EXPECT_EQ(r.out.find("agt_"), std::string::npos) << r.out;
  // The namespace scope was chosen with the connection.
  json::value connections = d_.ApiJson("GET", "/api/v1/connections");
  const std::string id(connections.at("connections").as_array().at(0).at("id").as_string());
  json::value scope = d_.ApiJson("GET", "/api/v1/connections/" + id + "/namespaces");
  EXPECT_EQ(json::serialize(scope.at("namespaces")), R"(["inference","ml"])");
  auto labels =
      d_.Kubectl(*cluster_, {"get", "namespace", "uplink", "-o", "jsonpath={.metadata.labels}"});
  EXPECT_NE(labels.out.find("\"pod-security.kubernetes.io/enforce\":\"restricted\""),
            std::string::npos)
      << labels.out;
  // The choice is kept with the connection, beside what the agent will report.
  auto shown = d_.Uplink({"connections", "show", "gpu-prod"}, {{"UPLINK_API_KEY", d_.admin_key()}});
  EXPECT_NE(shown.out.find("install selector:"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("nvidia.com/gpu.present=true,pool=a (workloads: inventory)"),
            std::string::npos)
      << shown.out;
}

// A connection whose agent reports keeps its token when the answer is no: the agent keeps
// working, and the output says what to do instead.
TEST_F(InstallEndToEnd, NoLeavesTheTokenOfAReportingAgentAlone) {
  auto first = Install({"--yes"});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  const std::string token = SecretToken();
  auto report = d_.RunAgentOnce(*cluster_, d_.WriteToken(token));
  ASSERT_EQ(report.exit_code, 0) << report.err;

  auto again = Install({}, "n\n");
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(d_.AgentWhoami(token), 200) << "answering no cut the running agent off";
  EXPECT_EQ(again.out.find("agt_"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("Its token was left as it is, so that agent keeps working"),
            std::string::npos)
      << again.out;
  EXPECT_EQ(SecretToken(), token);

  // Without kubectl either: nothing is rotated, and it exits 9.
  auto missing = Install({"--kubectl", "/nonexistent/kubectl", "--yes"});
  EXPECT_EQ(missing.exit_code, 9) << missing.out << missing.err;
  EXPECT_EQ(d_.AgentWhoami(token), 200);
}

TEST_F(InstallEndToEnd, AnsweringNoPrintsTheTokenAndTheManualCommands) {
  auto r = Install({}, "n\n");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("Create Secret uplink-agent-token in namespace uplink and set that "
                       "namespace's Pod Security enforcement to privileged, using kubectl context"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(SecretToken(), "") << "a Secret was created after a no";
  const size_t at = r.out.find("agt_");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string token = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_EQ(Count(r.out, token), 1u);
  EXPECT_EQ(d_.AgentWhoami(token), 200);
  for (const char* line :
       {"kubectl --kubeconfig ", " create namespace uplink",
        " label namespace uplink pod-security.kubernetes.io/enforce=privileged "
        "--overwrite",
        "read -rs UPLINK_AGENT_TOKEN", "printf '%s' \"$UPLINK_AGENT_TOKEN\" | kubectl ",
        " -n uplink create secret generic uplink-agent-token "
        "--from-file=UPLINK_AGENT_TOKEN=/dev/stdin",
        "unset UPLINK_AGENT_TOKEN", "helm upgrade --install uplink-agent"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
}

TEST_F(InstallEndToEnd, WithoutKubectlItPrintsTheTokenAndTheCommandsAndExits9) {
  auto r = Install({"--kubectl", "/nonexistent/kubectl", "--yes"});
  EXPECT_EQ(r.exit_code, 9) << r.out << r.err;
  EXPECT_NE(r.err.find("/nonexistent/kubectl"), std::string::npos) << r.err;
  const size_t at = r.out.find("agt_");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string token = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_EQ(d_.AgentWhoami(token), 200);
  EXPECT_NE(r.out.find("read -rs UPLINK_AGENT_TOKEN"), std::string::npos) << r.out;
}

TEST_F(InstallEndToEnd, AKubectlThatCannotReachTheClusterFallsBackAndExits9) {
  cluster_->process->Stop();
  auto r = Install({"--yes"});
  EXPECT_EQ(r.exit_code, 9) << r.out << r.err;
  EXPECT_NE(r.out.find("agt_"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("kubectl"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace uplink::e2e
