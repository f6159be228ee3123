// The uplink-agent binary: start-up validation, --once, signals.
#include <gtest/gtest.h>
#include <signal.h>

#include "support/fake_http.h"
#include "support/process.h"

namespace uplink::agent {
namespace {

using std::chrono::seconds;
using testing::FakeHttp;
using testing::Fixture;

const std::string kAgent = std::string(UPLINK_BIN_DIR) + "/uplink-agent";

class AgentBinaryTest : public ::testing::Test {
 protected:
  AgentBinaryTest()
      : kube_api_([](const net::Request& request) {
          if (request.Path() == "/api/v1/namespaces/kube-system") {
            return net::Response::Json(200, Fixture("kube-graffiti/namespace-kube-system.json"));
          }
          return net::Response::Json(200, Fixture("edgexr-gpu-node-a16-vgpu-nodelist.json"));
        }),
        console_([](const net::Request&) {
          return net::Response::Json(200, R"({"accepted":true,"report_interval_seconds":60})");
        }) {
    testing::WriteFileOrDie(token_file_, "agt_binary_test\n");
    testing::WriteFileOrDie(kubeconfig_,
                            "current-context: t\n"
                            "contexts: [{name: t, context: {cluster: k, user: u}}]\n"
                            "clusters: [{name: k, cluster: {server: '" + kube_api_.url() + "'}}]\n"
                            "users: [{name: u, user: {token: kube-token}}]\n");
  }

  std::vector<std::string> Args(std::vector<std::string> extra) {
    std::vector<std::string> args = {kAgent,         "inventory",   "--console",
                                     console_.url(), "--token-file", token_file_,
                                     "--kubeconfig", kubeconfig_};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  testing::CommandResult Run(const std::vector<std::string>& args) {
    return testing::RunCommand(args, seconds(30), testing::EnvWith({}));
  }

  testing::TempDir dir_;
  std::string token_file_ = dir_.File("token");
  std::string kubeconfig_ = dir_.File("kubeconfig");
  FakeHttp kube_api_;
  FakeHttp console_;
};

TEST_F(AgentBinaryTest, VersionPrintsTheProjectsVersion) {
  auto result = Run({kAgent, "--version"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "uplink-agent " UPLINK_VERSION "\n");
}

TEST_F(AgentBinaryTest, AnUnknownRoleIsAUsageError) {
  auto result = Run({kAgent, "exporter"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("unknown role 'exporter'"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("inventory"), std::string::npos);
  EXPECT_EQ(Run({kAgent}).exit_code, 2);
}

TEST_F(AgentBinaryTest, StartUpErrorsNameTheFlagAndTheFix) {
  auto no_console = Run({kAgent, "inventory", "--token-file", token_file_});
  EXPECT_EQ(no_console.exit_code, 2);
  EXPECT_NE(no_console.err.find("--console is required"), std::string::npos) << no_console.err;

  auto plain = Run({kAgent, "inventory", "--console", "http://console.example", "--token-file",
                    token_file_});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_NE(plain.err.find("use https"), std::string::npos) << plain.err;

  auto no_token = Run(Args({"--token-file", dir_.File("absent")}));
  EXPECT_EQ(no_token.exit_code, 2);
  EXPECT_NE(no_token.err.find("--token-file"), std::string::npos) << no_token.err;

  auto empty_selector = Run(Args({"--selector="}));
  EXPECT_EQ(empty_selector.exit_code, 2);
  EXPECT_NE(empty_selector.err.find("--selector must not be empty"), std::string::npos)
      << empty_selector.err;

  auto no_namespace = Run(Args({"--status-configmap", "uplink-status"}));
  EXPECT_EQ(no_namespace.exit_code, 2);
  EXPECT_NE(no_namespace.err.find("--namespace"), std::string::npos) << no_namespace.err;

  auto unknown_flag = Run(Args({"--frobnicate"}));
  EXPECT_EQ(unknown_flag.exit_code, 2);
  EXPECT_NE(unknown_flag.err.find("frobnicate"), std::string::npos) << unknown_flag.err;
}

TEST_F(AgentBinaryTest, OnceExitsZeroWhenTheConsoleAcceptsTheReport) {
  auto result = Run(Args({"--once"}));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  ASSERT_EQ(console_.request_count(), 1u);
  EXPECT_EQ(console_.requests()[0].headers.Get("Authorization").value_or(""),
            "Bearer agt_binary_test");
  EXPECT_EQ(result.err.find("kube-token"), std::string::npos);
  EXPECT_EQ(result.err.find("agt_binary_test"), std::string::npos);
}

TEST_F(AgentBinaryTest, OnceExitsNonZeroWithTheReasonWhenTheConsoleRefuses) {
  console_.SetHandler([](const net::Request&) {
    return net::Response::Json(401, R"({"error":{"code":"revoked","message":"token revoked"}})");
  });
  auto result = Run(Args({"--once"}));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("report not accepted"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("revoked"), std::string::npos) << result.err;
}

TEST_F(AgentBinaryTest, SigtermEndsTheAgentPromptlyWithExitZero) {
  int port = testing::FreePort();
  testing::ChildProcess agent(Args({"--health-listen", "127.0.0.1:" + std::to_string(port)}),
                              dir_.path(), testing::EnvWith({}));
  ASSERT_TRUE(testing::WaitFor([&] { return console_.request_count() >= 1; }, seconds(20)))
      << agent.Stderr();
  ASSERT_TRUE(testing::WaitFor(
      [&] { return agent.Stderr().find("health server listening") != std::string::npos; },
      seconds(10)));
  EXPECT_NE(agent.Stderr().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  ::kill(agent.pid(), SIGTERM);
  auto code = agent.Wait(seconds(5));
  ASSERT_TRUE(code.has_value()) << "still running 5 s after SIGTERM";
  EXPECT_EQ(*code, 0) << agent.Stderr();
}

TEST_F(AgentBinaryTest, OnceForcedToExitBySigtermExitsNonZeroBecauseNothingWasAccepted) {
  console_.SetSilent(true);  // the one report hangs until the forced exit
  testing::ChildProcess agent(Args({"--once"}), dir_.path(), testing::EnvWith({}));
  ASSERT_TRUE(testing::WaitFor([&] { return console_.request_count() >= 1; }, seconds(20)))
      << agent.Stderr();
  ::kill(agent.pid(), SIGTERM);
  auto code = agent.Wait(seconds(20));
  ASSERT_TRUE(code.has_value()) << "still running after SIGTERM";
  EXPECT_EQ(*code, 1) << agent.Stderr();
}

}  // namespace
}  // namespace uplink::agent
