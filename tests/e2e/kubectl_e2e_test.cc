// End to end: console -> `uplink-agent cluster` -> real kubectl -> kubesim. Every read-only
// verb works from the console's API and the CLI, refusals never reach the cluster, commands
// run side by side, a command the agent took and never answered is given up and never run
// again (also when the agent is killed and restarted mid-command), and the role's snapshots
// reach the console.
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "common/json.h"
#include "e2e/cluster.h"
#include "support/process.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;

constexpr char kRefusalHeadline[] =
    "This cluster is connected through the in-cluster uplink agent, which is read-only.";

class KubectlEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = &d_.StartCluster("5d2f1c9e-0000-4000-8000-00000000e2e6", 2, 8);
    d_.StartConsole({"--command-timeout", "5s"});
    connection_ = d_.CreateConnection("kubectl-e2e");
    token_file_ = d_.WriteToken(connection_.token);
    // A kubectl that counts the runs asking for pods labelled slow=true and makes them last,
    // so a test can kill the agent while one runs; everything else goes to the real kubectl.
    kubectl_ = d_.dir() + "/kubectl";
    testing::WriteFileOrDie(kubectl_,
                            "#!/bin/sh\n"
                            "case \"$*\" in *slow=true*) echo run >> " + slow_runs() +
                                "; /bin/sleep 20 ;; esac\n"
                                "exec /usr/bin/kubectl \"$@\"\n",
                            0755);
    StartAgent();
  }

  std::string slow_runs() const { return d_.dir() + "/slow-runs"; }

  void StartAgent() {
    health_port_ = testing::FreePort();
    agent_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{d_.bin("uplink-agent"), "cluster", "--console", d_.console_url(),
                                 "--token-file", token_file_, "--state-dir",
                                 d_.dir() + "/cluster-spool", "--listen",
                                 "127.0.0.1:" + std::to_string(health_port_), "--kubectl",
                                 kubectl_, "--kubeconfig", cluster_->kubeconfig, "--cache-dir",
                                 d_.dir() + "/kubectl-cache", "--poll-wait", "20s"},
        d_.dir());
    ASSERT_TRUE(testing::WaitFor([&] { return d_.AgentProbe(health_port_, "/healthz") == 200; },
                                 30s))
        << agent_->Stderr();
  }

  void SetNamespaces(const std::string& body) {
    net::Response set = d_.Api("PUT", "/api/v1/connections/" + connection_.id + "/namespaces",
                               body);
    ASSERT_EQ(set.status, 200) << set.body;
  }

  net::Response Run(const std::vector<std::string>& args) {
    json::array argv{"kubectl"};
    for (const std::string& arg : args) argv.emplace_back(arg);
    return d_.Api("POST", "/api/v1/connections/" + connection_.id + "/kubectl",
                  json::serialize(json::object{{"argv", argv}}));
  }

  // The command's reply, which must be 200 with kubectl's exit code 0.
  json::object RunOk(const std::vector<std::string>& args) {
    net::Response response = Run(args);
    EXPECT_EQ(response.status, 200) << args[0] << ": " << response.body;
    auto body = ParseJson(response.body);
    if (response.status != 200 || !body.ok() || !body->is_object()) return {};
    EXPECT_EQ(body->at("exit_code").as_int64(), 0) << json::serialize(*body);
    return body->as_object();
  }

  std::string Stdout(const std::vector<std::string>& args) {
    json::object reply = RunOk(args);
    return reply.contains("stdout") ? std::string(reply.at("stdout").as_string()) : "";
  }

  // The cluster role's /metrics.
  std::string AgentMetrics() {
    auto client = net::HttpClient::Create(
        {.base_url = "http://127.0.0.1:" + std::to_string(health_port_)});
    net::Request request;
    request.target = "/metrics";
    auto metrics = (*client)->Send(request);
    return metrics.ok() ? metrics->body : std::string();
  }

  // The id of the command waiting for approval, once there is one.
  std::string WaitingCommand() {
    std::string id;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          json::value waiting = d_.ApiJson("GET", "/api/v1/approvals");
          if (waiting.at("approvals").as_array().empty()) return false;
          id = std::string(waiting.at("approvals").as_array()[0].at("id").as_string());
          return true;
        },
        30s));
    return id;
  }

  Deployment d_;
  SimulatedCluster* cluster_ = nullptr;
  Connection connection_;
  std::string token_file_;
  std::string kubectl_;
  int health_port_ = 0;
  std::unique_ptr<testing::ChildProcess> agent_;
};

TEST_F(KubectlEndToEnd, EveryReadOnlyVerbWorksThroughTheAgent) {
  SetNamespaces(R"({"namespaces": ["*"]})");
  EXPECT_NE(Stdout({"get", "nodes"}).find("Ready"), std::string::npos);
  const std::string pods = Stdout({"get", "pods", "-A", "-o",
                                   "jsonpath={range .items[*]}{.metadata.namespace} "
                                   "{.metadata.name}{\"\\n\"}{end}"});
  ASSERT_FALSE(pods.empty()) << "kubesim holds no pods";
  const std::string first = pods.substr(0, pods.find('\n'));
  const std::string pod_namespace = first.substr(0, first.find(' '));
  const std::string pod_name = first.substr(first.find(' ') + 1);
  RunOk({"logs", "-n", pod_namespace, pod_name, "--tail=5"});
  EXPECT_NE(Stdout({"top", "nodes"}).find("CPU"), std::string::npos);
  const std::string node = Stdout({"get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"});
  ASSERT_FALSE(node.empty());
  EXPECT_NE(Stdout({"describe", "node", node}).find("Name:"), std::string::npos);
  EXPECT_NE(Stdout({"api-resources"}).find("pods"), std::string::npos);
  EXPECT_NE(Stdout({"api-versions"}).find("apps/v1"), std::string::npos);
  EXPECT_NE(Stdout({"version"}).find("Server Version"), std::string::npos);
  EXPECT_NE(Stdout({"explain", "pods"}).find("KIND"), std::string::npos);
  // --recursive lists every field of the schema: a read, as explain is.
  EXPECT_NE(Stdout({"explain", "pods", "--recursive"}).find("creationTimestamp"),
            std::string::npos);
  EXPECT_NE(Stdout({"get", "deployments", "-A"}).find("NAME"), std::string::npos);
  net::Response info = Run({"cluster-info"});
  EXPECT_EQ(info.status, 200) << info.body;
}

TEST_F(KubectlEndToEnd, RefusalsAndScopeNeverReachTheCluster) {
  // Until the owner chooses namespaces, only cluster-scoped reads run; a namespaced read is
  // refused with a message saying how to choose.
  net::Response unscoped = Run({"get", "pods", "-n", "default"});
  EXPECT_EQ(unscoped.status, 403) << unscoped.body;
  EXPECT_NE(unscoped.body.find("namespaces_not_chosen"), std::string::npos);
  EXPECT_NE(Stdout({"get", "nodes"}).find("Ready"), std::string::npos);
  SetNamespaces(R"({"namespaces": ["default"]})");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"delete", "pod", "x"}, {"get", "secrets"},
        {"get", "pods", "--token", "abc"}, {"logs", "-f", "x"}, {"get", "--raw", "/api"},
        {"get", "pods", "-w"}, {"cluster-info", "dump"}}) {
    net::Response refused = Run(args);
    EXPECT_EQ(refused.status, 403) << args[0] << ": " << refused.body;
    EXPECT_NE(refused.body.find(kRefusalHeadline), std::string::npos) << refused.body;
  }
  // Another program gets the same read-only refusal.
  net::Response helm = d_.Api("POST", "/api/v1/connections/" + connection_.id + "/kubectl",
                              R"({"argv":["helm","list","-A"]})");
  EXPECT_EQ(helm.status, 403) << helm.body;
  EXPECT_NE(helm.body.find(kRefusalHeadline), std::string::npos) << helm.body;
  net::Response outside = Run({"get", "pods", "-n", "kube-system"});
  EXPECT_EQ(outside.status, 403) << outside.body;
  EXPECT_NE(outside.body.find("namespace_not_allowed"), std::string::npos);
  EXPECT_EQ(Run({"get", "pods", "-A"}).status, 403);
  // Cluster-scoped reads and the chosen namespace work.
  RunOk({"get", "nodes"});
  RunOk({"get", "pods", "-n", "default"});
  // Only those three reached the agent.
  const std::string ran = AgentMetrics();
  EXPECT_NE(ran.find("uplink_agent_kubectl_commands_total{outcome=\"ok\"} 3"), std::string::npos)
      << ran;
  EXPECT_EQ(ran.find("outcome=\"refused\""), std::string::npos) << ran;
}

TEST_F(KubectlEndToEnd, CommandsRunSideBySide) {
  SetNamespaces(R"({"namespaces": ["*"]})");
  constexpr int kCommands = 8;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kCommands; ++i) {
    threads.emplace_back([&] {
      net::Response response = Run({"get", "nodes", "-o", "name"});
      if (response.status == 200 && response.body.find("\"exit_code\":0") != std::string::npos) {
        ++ok;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), kCommands);
}

TEST_F(KubectlEndToEnd, ACommandTheAgentDiedWithIsGivenUpAndNeverRunAgain) {
  SetNamespaces(R"({"namespaces": ["*"]})");
  net::Response given_up;
  std::thread user([&] { given_up = Run({"get", "pods", "-A", "-l", "slow=true"}); });
  ASSERT_TRUE(testing::WaitFor(
      [&] { return !testing::ReadFileOrEmpty(slow_runs()).empty(); }, 20s));
  ::kill(agent_->pid(), SIGKILL);
  agent_.reset();
  StartAgent();
  user.join();
  EXPECT_EQ(given_up.status, 504) << given_up.body;
  EXPECT_NE(given_up.body.find("returned nothing"), std::string::npos) << given_up.body;
  // The restarted agent works, and the slow command was never handed out again.
  RunOk({"get", "nodes"});
  EXPECT_EQ(testing::ReadFileOrEmpty(slow_runs()), "run\n");
}

TEST_F(KubectlEndToEnd, SnapshotsOfThePlanReachTheConsole) {
  SetNamespaces(R"({"namespaces": ["*"]})");
  json::value snapshot;
  // The first snapshot (cluster-scoped, before the first reply) comes at start; the one with
  // the console's plan after an interval of the plan the first upload's reply carried.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        net::Response got = d_.Api("GET", "/api/v1/connections/" + connection_.id + "/cluster");
        if (got.status != 200) return false;
        auto parsed = ParseJson(got.body);
        if (!parsed.ok()) return false;
        snapshot = *parsed;
        return got.body.find("\"name\":\"nodes\"") != std::string::npos;
      },
      30s))
      << agent_->Stderr();
  bool nodes_ok = false;
  for (const json::value& result : snapshot.at("results").as_array()) {
    if (result.at("name") == "nodes") {
      nodes_ok = result.as_object().contains("exit_code") && result.at("exit_code") == 0 &&
                 result.at("stdout").as_string().find("Ready") != json::string::npos;
    }
  }
  EXPECT_TRUE(nodes_ok) << json::serialize(snapshot);

  // Once the console's plan applies, the snapshot carries the pods' requests and limits and
  // their usage: pod right-sizing shows kubesim's pods side by side with what they use.
  json::value sizing;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        net::Response got =
            d_.Api("GET", "/api/v1/connections/" + connection_.id + "/right-sizing");
        auto parsed = ParseJson(got.body);
        if (got.status != 200 || !parsed.ok() || parsed->at("pods").as_array().empty()) {
          return false;
        }
        sizing = *parsed;
        return true;
      },
      90s))
      << agent_->Stderr();
  std::map<std::string, const json::object*> pods;
  for (const json::value& pod : sizing.at("pods").as_array()) {
    pods[std::string(pod.at("namespace").as_string()) + "/" +
         std::string(pod.at("pod").as_string())] = &pod.as_object();
  }
  const json::object* vllm = pods["inference/vllm-llama3-8b-6d9f7c5b8d-7xk2p"];
  ASSERT_NE(vllm, nullptr) << json::serialize(sizing);
  EXPECT_EQ(vllm->at("cpu").at("request_millicores").as_int64(), 8000);
  EXPECT_EQ(vllm->at("memory").at("limit_bytes").as_int64(), std::int64_t{64} << 30);
  EXPECT_GE(vllm->at("samples").as_int64(), 1);
  EXPECT_GT(vllm->at("cpu").at("peak_millicores").as_int64(), 0);
  // The device plugin requests nothing: under-provisioned whatever it uses.
  const json::object* plugin = pods["gpu-operator/nvidia-device-plugin-daemonset-x4d8p"];
  ASSERT_NE(plugin, nullptr) << json::serialize(sizing);
  EXPECT_EQ(plugin->at("verdict"), "under_provisioned");
  EXPECT_NE(json::serialize(plugin->at("findings")).find("no_request"), std::string::npos);
  // The pending pod is listed with its requests; a finished one would not be.
  ASSERT_NE(pods["ml-training/hparam-sweep-trial-17"], nullptr);
}

// SIGTERM while the agent's poll is held by the console: the poll is cut short and the role
// goes through its whole shutdown (the last log line), rather than being cut off after the
// grace period with its spool's state unsynced.
TEST_F(KubectlEndToEnd, SigtermEndsAHeldPollAndStopsCleanly) {
  SetNamespaces(R"({"namespaces": ["*"]})");
  RunOk({"get", "nodes"});  // a poll is held again once this is answered
  ::kill(agent_->pid(), SIGTERM);
  const std::optional<int> exit_code = agent_->Wait(30s);
  ASSERT_TRUE(exit_code.has_value()) << agent_->Stderr();
  EXPECT_EQ(*exit_code, 0);
  EXPECT_NE(agent_->Stderr().find("\"msg\":\"stopped\""), std::string::npos) << agent_->Stderr();
}

// An approval rule end to end: the requester's `uplink kubectl` waits and says so, nothing
// reaches the agent, the approver (another user, with the CLI) approves, the command runs
// through the cluster role and real kubectl, and the requester gets its output; a rejected
// command never runs and its requester is told why.
TEST_F(KubectlEndToEnd, ACommandThatNeedsApprovalRunsOnceApprovedAndNeverWhenRejected) {
  SetNamespaces(R"({"namespaces": ["*"]})");
  const std::map<std::string, std::string> requester{{"UPLINK_API_KEY", d_.admin_key()}};
  auto rule = d_.Uplink({"approvals", "add-rule", "kubectl-e2e", "--verb", "get", "--resource",
                         "po", "--namespace", "kube-system"},
                        requester);
  ASSERT_EQ(rule.exit_code, 0) << rule.err;
  // The approver: another admin, signed in with a password.
  const std::string password = "approver password 1234";
  ASSERT_EQ(d_.Api("POST", "/api/v1/users",
                   json::serialize(json::object{{"email", "approver@example.com"},
                                                {"role", "admin"},
                                                {"password", password}}))
                .status,
            201);
  auto login = d_.Uplink({"login", "--email", "approver@example.com", "--password-stdin"}, {},
                         password + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;

  testing::CommandResult approved_run;
  std::thread asking([&] {
    approved_run = d_.Uplink({"kubectl", "kubectl-e2e", "--", "get", "pods", "-n", "kube-system"},
                             requester);
  });
  std::string id = WaitingCommand();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(AgentMetrics().find("uplink_agent_kubectl_commands_total{outcome=\"ok\"}"),
            std::string::npos)
      << "nothing ran before the approval";
  auto listed = d_.Uplink({"approvals", "list"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(id), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("get pods -n kube-system"), std::string::npos) << listed.out;
  auto approve = d_.Uplink({"approvals", "approve", id});
  EXPECT_EQ(approve.exit_code, 0) << approve.err;
  asking.join();
  EXPECT_EQ(approved_run.exit_code, 0) << approved_run.err;
  EXPECT_NE(approved_run.err.find("waiting for approval"), std::string::npos) << approved_run.err;
  EXPECT_NE(approved_run.out.find("coredns"), std::string::npos) << approved_run.out;
  json::value approvals =
      d_.ApiJson("GET", "/api/v1/audit?action=kubectl.approve&connection_id=" + connection_.id);
  ASSERT_EQ(approvals.at("events").as_array().size(), 1u);
  EXPECT_EQ(approvals.at("events").as_array()[0].at("actor").at("label"), "approver@example.com");

  testing::CommandResult rejected_run;
  std::thread asking_again([&] {
    rejected_run = d_.Uplink({"kubectl", "kubectl-e2e", "--", "get", "pods", "-A"}, requester);
  });
  id = WaitingCommand();
  ASSERT_FALSE(id.empty());
  auto reject = d_.Uplink({"approvals", "reject", id, "--reason", "use -n kube-system"});
  EXPECT_EQ(reject.exit_code, 0) << reject.err;
  asking_again.join();
  EXPECT_EQ(rejected_run.exit_code, 4) << rejected_run.err;
  EXPECT_NE(rejected_run.err.find("rejected by approver@example.com: use -n kube-system"),
            std::string::npos)
      << rejected_run.err;
  EXPECT_NE(AgentMetrics().find("uplink_agent_kubectl_commands_total{outcome=\"ok\"} 1"),
            std::string::npos)
      << AgentMetrics();
}

TEST_F(KubectlEndToEnd, TheCliRunsKubectlAndExitsWithItsCode) {
  SetNamespaces(R"({"namespaces": ["*"]})");
  const std::map<std::string, std::string> env{{"UPLINK_API_KEY", d_.admin_key()}};
  auto listed = d_.Uplink({"kubectl", connection_.id, "--", "get", "nodes"}, env);
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("Ready"), std::string::npos) << listed.out;
  auto refused = d_.Uplink({"kubectl", connection_.id, "--", "delete", "node", "x"}, env);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find(kRefusalHeadline), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace uplink::e2e
