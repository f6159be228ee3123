// uplink connections install against a scripted console and a stand-in kubectl that records
// its arguments and its standard input: the exact commands, the token only on stdin, the
// manual fallback, the workloads asked for, and a reporting agent's token never rotated
// without a yes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cli_harness.h"
#include "common/crypto.h"

namespace uplink::cli {
namespace {

using testing::Cli;
using testing::ConnectionJson;
using testing::ErrorReply;
using testing::FakeConsole;

constexpr char kKey[] = "uk_KKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKK";
constexpr char kToken[] = "agt_TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT";
constexpr char kId[] = "0123456789abcdef";
constexpr char kInstallPath[] = "/api/v1/connections/0123456789abcdef/install";

// Answers like kubectl against a cluster whose namespace and Secret exist when the files
// "namespace" and "secret" do; "fail-label" makes the label step fail.
constexpr char kFakeKubectl[] = R"(#!/bin/sh
log=LOGDIR
n=$(($(cat "$log/count" 2>/dev/null || echo 0) + 1))
echo "$n" > "$log/count"
printf '%s\n' "$@" > "$log/argv.$n"
cat > "$log/stdin.$n"
env > "$log/env.$n"
case " $* " in
  *" config current-context "*)
    if [ -e "$log/no-context" ]; then echo 'error: current-context is not set' >&2; exit 1; fi
    echo sim-context; exit 0 ;;
  *" get namespace "*)
    if [ -e "$log/namespace" ]; then echo namespace/x; exit 0; fi
    echo 'Error from server (NotFound): namespaces "x" not found' >&2; exit 1 ;;
  *" create namespace "*)
    if [ -e "$log/namespace" ]; then
      echo 'Error from server (AlreadyExists): namespaces "x" already exists' >&2; exit 1
    fi
    touch "$log/namespace"; exit 0 ;;
  *" label namespace "*)
    if [ -e "$log/fail-label" ]; then echo 'error: the server refused the label' >&2; exit 1; fi
    exit 0 ;;
  *" create secret generic "*)
    if [ -e "$log/secret" ]; then
      echo 'error: failed to create secret secrets "x" already exists' >&2; exit 1
    fi
    cp "$log/stdin.$n" "$log/secret"; exit 0 ;;
  *" patch secret "*) cp "$log/stdin.$n" "$log/patch"; exit 0 ;;
esac
echo "unexpected: $*" >&2
exit 2
)";

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class Install : public ::testing::Test {
 protected:
  void SetUp() override {
    cli_.env["UPLINK_API_KEY"] = kKey;
    log_ = cli_.home() + "/kubectl-log";
    std::filesystem::create_directories(log_);
    std::string script = kFakeKubectl;
    script.replace(script.find("LOGDIR"), 6, log_);
    kubectl_ = cli_.home() + "/kubectl";
    uplink::testing::WriteFileOrDie(kubectl_, script, 0755);
    Connections({});
    json::object created = ConnectionJson(kId, "gpu-a");
    created["token"] = kToken;
    console_.OnJson("POST", "/api/v1/connections", 201, created);
    console_.OnJson("POST", std::string("/api/v1/connections/") + kId + "/rotate", 200, created);
    console_.OnJson("POST", kInstallPath, 200,
                    json::object{{"helm_commands",
                                  json::array{"helm repo add --force-update uplink URL/charts",
                                              "helm upgrade --install uplink-agent "
                                              "uplink/uplink-agent --version 9.9.9 \\\n"
                                              "    --set kubernetes.enabled=true"}},
                                 {"warnings", json::array{}}});
  }

  // The body of the one install-commands request, parsed.
  json::object InstallBody() const {
    auto requests = console_.RequestsTo("POST", kInstallPath);
    EXPECT_EQ(requests.size(), 1u);
    if (requests.empty()) return {};
    auto body = ParseJson(requests[0].body);
    EXPECT_TRUE(body.ok() && body->is_object()) << requests[0].body;
    return body.ok() && body->is_object() ? body->get_object() : json::object{};
  }

  // An existing connection for gpu-a whose agent reported (or not).
  void Existing(bool reported) {
    json::object c = ConnectionJson(kId, "gpu-a", reported ? "active" : "never");
    if (reported) c["last_report_at"] = "2027-01-02T03:04:05Z";
    Connections({ConnectionJson("ffffffffffffffff", "gpu-a", "revoked"), c});
  }

  size_t Rotations() const {
    return console_.RequestsTo("POST", std::string("/api/v1/connections/") + kId + "/rotate")
        .size();
  }

  void Connections(json::array list) {
    console_.OnJson("GET", "/api/v1/connections", 200, json::object{{"connections", list}});
  }

  testing::CliResult RunInstall(std::vector<std::string> extra, const std::string& in = "") {
    std::vector<std::string> args{"connections",  "install",   "gpu-a", "--console",
                                  console_.url(), "--kubectl", kubectl_};
    args.insert(args.end(), extra.begin(), extra.end());
    return cli_.Run(args, in);
  }

  std::vector<std::vector<std::string>> Calls() const {
    std::vector<std::vector<std::string>> calls;
    for (int n = 1;; ++n) {
      std::string path = log_ + "/argv." + std::to_string(n);
      if (!std::filesystem::exists(path)) return calls;
      std::vector<std::string> argv;
      std::string text = uplink::testing::ReadFileOrEmpty(path);
      for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos;
           start = end + 1) {
        argv.push_back(text.substr(start, end - start));
      }
      calls.push_back(argv);
    }
  }
  std::string Stdin(int n) const {
    return uplink::testing::ReadFileOrEmpty(log_ + "/stdin." + std::to_string(n));
  }
  void ExpectTokenNeverInArgv() const {
    for (const auto& call : Calls()) {
      for (const auto& arg : call) EXPECT_EQ(arg.find("agt_"), std::string::npos) << arg;
    }
  }

  Cli cli_;
  FakeConsole console_;
  std::string log_;
  std::string kubectl_;
};

using Argv = std::vector<std::string>;

TEST_F(Install, WithYesItCreatesTheNamespaceLabelAndSecretWithTheTokenOnStdinOnly) {
  auto r = RunInstall({"--yes", "--kubeconfig", "/k/config", "--context", "ctx-a"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Argv base{"--kubeconfig", "/k/config", "--context", "ctx-a"};
  auto with_base = [&](Argv args) {
    args.insert(args.begin(), base.begin(), base.end());
    return args;
  };
  EXPECT_EQ(Calls(),
            (std::vector<Argv>{
                with_base({"config", "current-context"}),
                with_base({"get", "namespace", "uplink", "-o", "name"}),
                with_base({"create", "namespace", "uplink"}),
                with_base({"label", "namespace", "uplink",
                           "pod-security.kubernetes.io/enforce=privileged",
                           "pod-security.kubernetes.io/enforce-version=latest", "--overwrite"}),
                with_base({"-n", "uplink", "create", "secret", "generic", "uplink-agent-token",
                           "--from-file=UPLINK_AGENT_TOKEN=/dev/stdin"}),
            }));
  EXPECT_EQ(Stdin(5), kToken);
  for (int n = 1; n <= 4; ++n) EXPECT_EQ(Stdin(n), "") << n;
  ExpectTokenNeverInArgv();
  EXPECT_EQ(r.out.find(kToken), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find(kToken), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("kubectl context: ctx-a"), std::string::npos) << r.out;
  // The console's commands, line by line.
  EXPECT_NE(r.out.find("Now install the agent:\n\n  helm repo add --force-update uplink "
                       "URL/charts\n  helm upgrade --install uplink-agent uplink/uplink-agent "
                       "--version 9.9.9 \\\n      --set kubernetes.enabled=true\n"),
            std::string::npos)
      << r.out;

  auto created = console_.RequestsTo("POST", "/api/v1/connections");
  ASSERT_EQ(created.size(), 1u);
  auto body = ParseJson(created[0].body);
  EXPECT_EQ(body->at("agent_name"), "uplink-agent");
  EXPECT_EQ(body->at("cluster_name"), "gpu-a");
  // Without a terminal nothing is asked: every workload, runtime class nvidia, the default
  // selector, the console as the CLI reaches it.
  EXPECT_EQ(json::value(InstallBody()),
            json::value(json::object{{"console_url", console_.url()},
                                     {"workloads", json::array{"inventory", "cluster", "node"}},
                                     {"gpu_runtime_class", "nvidia"},
                                     {"selector", "nvidia.com/gpu.present=true"},
                                     {"namespace", "uplink"},
                                     {"secret_name", "uplink-agent-token"},
                                     {"kube_context", "ctx-a"},
                                     {"kubeconfig", "/k/config"}}));
}

TEST_F(Install, InventoryAloneLabelsTheNamespaceRestrictedNotPrivileged) {
  auto r = RunInstall({"--yes", "--workloads", "inventory", "--selector",
                       "gpu-type in (h100, a100),pool=train", "--agent-console",
                       "https://console.example.com:8443/"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[3], (Argv{"label", "namespace", "uplink",
                            "pod-security.kubernetes.io/enforce=restricted",
                            "pod-security.kubernetes.io/enforce-version=latest", "--overwrite"}));
  EXPECT_NE(r.out.find("Workloads: inventory only\nGPU node selector: gpu-type in (a100,h100),"
                       "pool=train\n"),
            std::string::npos)
      << r.out;
  json::object body = InstallBody();
  EXPECT_EQ(body.at("workloads"), json::array{"inventory"});
  EXPECT_EQ(body.at("selector"), "gpu-type in (a100,h100),pool=train");
  EXPECT_EQ(body.at("console_url"), "https://console.example.com:8443/");
}

TEST_F(Install, ACreatedConnectionThatIsNotInstalledShowsItsTokenOnceWithTheCommands) {
  for (const std::string& answer : {std::string("n\n"), std::string(""), std::string("maybe\n")}) {
    std::filesystem::remove_all(log_);
    std::filesystem::create_directories(log_);
    auto r = RunInstall({"--workloads", "inventory"}, answer);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(Calls(), (std::vector<Argv>{{"config", "current-context"}}))
        << "kubectl changed something without a yes";
    EXPECT_NE(r.err.find("Create Secret uplink-agent-token in namespace uplink and set that "
                         "namespace's Pod Security enforcement to restricted, using kubectl "
                         "context 'sim-context'? [y/N] "),
              std::string::npos)
        << r.err;
    EXPECT_EQ(Count(r.out, kToken), 1u) << r.out;
    for (const char* line :
         {"kubectl create namespace uplink",
          "kubectl label namespace uplink pod-security.kubernetes.io/enforce=restricted "
          "--overwrite\n",
          "read -rs UPLINK_AGENT_TOKEN   # paste the agt_ token; it is not echoed or kept in "
          "history",
          "printf '%s' \"$UPLINK_AGENT_TOKEN\" | kubectl -n uplink create secret generic "
          "uplink-agent-token --from-file=UPLINK_AGENT_TOKEN=/dev/stdin",
          "unset UPLINK_AGENT_TOKEN", "Then install the agent:\n\n  helm repo add"}) {
      EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
    }
  }
}

TEST_F(Install, NoNeverRotatesTheTokenOfAConnectionWhoseAgentReported) {
  Existing(/*reported=*/true);
  auto r = RunInstall({}, "n\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Rotations(), 0u) << "the running agent's token was rotated after a no";
  EXPECT_TRUE(console_.RequestsTo("POST", "/api/v1/connections").empty());
  EXPECT_EQ(r.out.find("agt_T"), std::string::npos) << r.out;
  EXPECT_EQ(Calls(), (std::vector<Argv>{{"config", "current-context"}}));
  for (const char* line :
       {"has an agent that last reported 2027-01-02T03:04:05Z. Its token was left as it is, so "
        "that agent keeps working; nothing was changed.",
        "To install or upgrade the agent with the Secret that holds that token:\n\n  helm repo "
        "add",
        "run this again and answer yes, or run 'uplink connections rotate 0123456789abcdef "
        "--token-out FILE'"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  // The commands asked for still reflect the choice, and are kept with the connection.
  EXPECT_EQ(InstallBody().at("workloads"), (json::array{"inventory", "cluster", "node"}));
}

TEST_F(Install, WithoutKubectlAReportingAgentsTokenIsLeftAloneAndItExits9) {
  Existing(/*reported=*/true);
  auto r = RunInstall({"--kubectl", "/nonexistent/kubectl", "--yes"});
  EXPECT_EQ(r.code, 9) << r.err;
  EXPECT_EQ(Rotations(), 0u);
  EXPECT_NE(r.err.find("/nonexistent/kubectl"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("agt_T"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Its token was left as it is"), std::string::npos) << r.out;
}

TEST_F(Install, YesRotatesAReportingAgentsTokenAndPatchesTheSecret) {
  Existing(/*reported=*/true);
  uplink::testing::WriteFileOrDie(log_ + "/namespace", "");
  uplink::testing::WriteFileOrDie(log_ + "/secret", "agt_old");
  auto r = RunInstall({"--yes"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Rotations(), 1u);
  EXPECT_NE(r.out.find("reads the new one from the Secret once the kubelet refreshes it"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find(kToken), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(log_ + "/patch"));
}

TEST_F(Install, ANeverReportedConnectionIsRotatedEvenOnNoSinceNoAgentUsesItsToken) {
  Existing(/*reported=*/false);
  auto r = RunInstall({}, "n\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Rotations(), 1u);
  EXPECT_NE(r.out.find("its agent has never reported, so no running agent loses it"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(Count(r.out, kToken), 1u) << r.out;
}

TEST_F(Install, ReinstallingRotatesTheTokenAndPatchesTheExistingSecret) {
  uplink::testing::WriteFileOrDie(log_ + "/namespace", "");
  uplink::testing::WriteFileOrDie(log_ + "/secret", "agt_old");
  Existing(/*reported=*/false);
  auto r = RunInstall({"--yes", "--namespace", "gpu-agents", "--secret-name", "agent.token",
                       "--workloads", "inventory", "--pod-security", "baseline"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(console_.RequestsTo("POST", "/api/v1/connections").empty());
  EXPECT_EQ(Rotations(), 1u);
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[1], (Argv{"get", "namespace", "gpu-agents", "-o", "name"}));
  EXPECT_EQ(calls[2],
            (Argv{"label", "namespace", "gpu-agents", "pod-security.kubernetes.io/enforce=baseline",
                  "pod-security.kubernetes.io/enforce-version=latest", "--overwrite"}));
  EXPECT_EQ(calls[3], (Argv{"-n", "gpu-agents", "create", "secret", "generic", "agent.token",
                            "--from-file=UPLINK_AGENT_TOKEN=/dev/stdin"}));
  EXPECT_EQ(calls[4], (Argv{"-n", "gpu-agents", "patch", "secret", "agent.token", "--type", "merge",
                            "--patch-file=/dev/stdin"}));
  auto patch = ParseJson(Stdin(5));
  ASSERT_TRUE(patch.ok()) << Stdin(5);
  EXPECT_EQ(*patch,
            json::value(json::object{{"data", {{"UPLINK_AGENT_TOKEN", Base64Encode(kToken)}}}}));
  ExpectTokenNeverInArgv();
  EXPECT_EQ(r.out.find(kToken), std::string::npos);
  EXPECT_NE(r.out.find("Rotated"), std::string::npos) << r.out;
  json::object body = InstallBody();
  EXPECT_EQ(body.at("namespace"), "gpu-agents");
  EXPECT_EQ(body.at("secret_name"), "agent.token");
}

TEST_F(Install, OnATerminalItAsksTheWorkloadsRuntimeClassAndSelectorThenToProceed) {
  cli_.terminal.available = true;
  // A wrong answer is asked again; an empty one keeps the default.
  cli_.terminal.answers = {"3", "2", "none", "gpu=yes,", "gpu=yes", "Y", "ml, dev"};
  auto r = RunInstall({"--context", "prod"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(cli_.terminal.prompts.size(), 7u);
  EXPECT_NE(cli_.terminal.prompts[0].find(
                "  1) inventory only: reports the GPU nodes that match the selector\n"),
            std::string::npos);
  EXPECT_TRUE(cli_.terminal.prompts[0].ends_with("Workloads [2]: "));
  EXPECT_EQ(cli_.terminal.prompts[1], cli_.terminal.prompts[0]);
  EXPECT_NE(cli_.terminal.prompts[2].find("GPU runtime class of the node pods ('none' on a "
                                          "cluster without GPUs"),
            std::string::npos);
  EXPECT_EQ(cli_.terminal.prompts[3],
            "GPU node selector: the nodes the inventory reports [nvidia.com/gpu.present=true]: ");
  EXPECT_EQ(cli_.terminal.prompts[5],
            "Create Secret uplink-agent-token in namespace uplink and set that namespace's Pod "
            "Security enforcement to privileged, using kubectl context 'prod'? [y/N] ");
  EXPECT_NE(r.err.find("uplink: answer 1 or 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("uplink: the GPU node selector: not a label selector"), std::string::npos)
      << r.err;
  // A new connection's namespace scope is asked last, and sent with it.
  EXPECT_EQ(cli_.terminal.prompts[6],
            "Namespaces 'uplink kubectl' and the cluster view may read (comma-separated, * for "
            "all, 'none' for cluster-scoped reads only; Enter to choose later): ");
  auto created = console_.RequestsTo("POST", "/api/v1/connections");
  ASSERT_EQ(created.size(), 1u);
  EXPECT_NE(created[0].body.find(R"("namespaces":["ml","dev"])"), std::string::npos)
      << created[0].body;
  EXPECT_EQ(Calls().size(), 5u);
  EXPECT_EQ(r.out.find(kToken), std::string::npos);
  json::object body = InstallBody();
  EXPECT_EQ(body.at("gpu_runtime_class"), "");
  EXPECT_EQ(body.at("selector"), "gpu=yes");
}

TEST_F(Install, FlagsAnswerTheQuestionsTheyName) {
  cli_.terminal.available = true;
  cli_.terminal.answers = {"n"};
  auto r = RunInstall({"--workloads", "all", "--no-gpu-runtime-class", "--selector", "gpu",
                       "--read-namespaces", "ml"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(cli_.terminal.prompts.size(), 1u) << cli_.terminal.prompts[0];
  EXPECT_TRUE(cli_.terminal.prompts[0].starts_with("Create Secret"));
}

TEST_F(Install, TheConsolesWarningsGoToStderrWithWhatToPass) {
  console_.OnJson(
      "POST", kInstallPath, 200,
      json::object{{"helm_commands", json::array{"helm repo add uplink x\x1b[2J"}},
                   {"warnings", json::array{json::object{{"code", "console_unreachable"},
                                                         {"message", "The agent cannot reach "
                                                                     "the console at "
                                                                     "http://127.0.0.1:1"}}}}});
  auto r = RunInstall({"--yes"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("uplink: warning: The agent cannot reach the console at "
                       "http://127.0.0.1:1\n  (pass --agent-console URL"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "a reply moved the cursor";
}

TEST_F(Install, NoCommandsFromTheConsoleStillLeavesTheTokenToInstallByHand) {
  console_.On("POST", kInstallPath,
              [](const net::Request&) { return ErrorReply(503, "unavailable", "try later"); });
  auto r = RunInstall({}, "n\n");
  EXPECT_EQ(r.code, 9) << r.err;
  EXPECT_EQ(Count(r.out, kToken), 1u) << r.out;
  EXPECT_NE(r.err.find("uplink: no install commands: "), std::string::npos) << r.err;
}

TEST_F(Install, KubectlGetsTheUsersEnvironmentButNeverTheConsoleCredential) {
  // What kubectl inherits is this process's environment (exec credential plugins need it).
  ::setenv("UPLINK_API_KEY", kKey, 1);
  ::setenv("UPLINK_INSTALL_TEST_PASSED_ON", "yes", 1);
  auto r = RunInstall({"--yes"});
  ::unsetenv("UPLINK_API_KEY");
  ::unsetenv("UPLINK_INSTALL_TEST_PASSED_ON");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_FALSE(Calls().empty());
  for (size_t n = 1; n <= Calls().size(); ++n) {
    std::string env = uplink::testing::ReadFileOrEmpty(log_ + "/env." + std::to_string(n));
    EXPECT_NE(env.find("UPLINK_INSTALL_TEST_PASSED_ON=yes"), std::string::npos) << n;
    EXPECT_EQ(env.find("UPLINK_API_KEY"), std::string::npos) << n;
    EXPECT_EQ(env.find(kKey), std::string::npos) << n;
  }
}

TEST_F(Install, AKubeconfigWithoutACurrentContextNeedsContext) {
  uplink::testing::WriteFileOrDie(log_ + "/no-context", "");
  auto with_context = RunInstall({"--yes", "--context", "named"});
  ASSERT_EQ(with_context.code, 0) << with_context.err;
  EXPECT_NE(with_context.out.find("kubectl context: named"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(log_ + "/secret"));

  std::filesystem::remove(log_ + "/secret");
  auto without = RunInstall({"--yes"});
  EXPECT_EQ(without.code, 9);
  EXPECT_NE(without.err.find("current-context is not set"), std::string::npos) << without.err;
  EXPECT_FALSE(std::filesystem::exists(log_ + "/secret"));
}

TEST_F(Install, AFailingKubectlStepPrintsTheTokenAndTheCommandsAndExits9) {
  uplink::testing::WriteFileOrDie(log_ + "/fail-label", "");
  auto r = RunInstall({"--yes"});
  EXPECT_EQ(r.code, 9) << r.err;
  EXPECT_NE(r.err.find("the server refused the label"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(kToken), std::string::npos);
  EXPECT_EQ(Count(r.out, kToken), 1u) << r.out;
  EXPECT_NE(r.out.find("read -rs UPLINK_AGENT_TOKEN"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(log_ + "/secret"));
}

TEST_F(Install, AMissingKubectlPrintsTheTokenAndTheCommandsAndExits9) {
  auto r = cli_.Run({"connections", "install", "gpu-a", "--console", console_.url(), "--kubectl",
                     "/nonexistent/kubectl", "--yes"});
  EXPECT_EQ(r.code, 9) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/kubectl"), std::string::npos) << r.err;
  EXPECT_EQ(Count(r.out, kToken), 1u);
  EXPECT_NE(r.out.find("kubectl create namespace uplink"), std::string::npos);

  cli_.env["PATH"] = "/nonexistent";
  r = cli_.Run({"connections", "install", "gpu-a", "--console", console_.url()});
  EXPECT_EQ(r.code, 9) << r.err;
  EXPECT_NE(r.err.find("kubectl was not found"), std::string::npos) << r.err;
  EXPECT_EQ(Count(r.out, kToken), 1u);
}

TEST_F(Install, BadFlagsAreUsageErrorsBeforeAnythingHappens) {
  for (const Argv& bad : std::vector<Argv>{{"--namespace", "Bad_NS"},
                                           {"--namespace", "-n"},
                                           {"--namespace", std::string(64, 'a')},
                                           {"--secret-name", "-x"},
                                           {"--secret-name", "a..b"},
                                           {"--pod-security", "open"},
                                           {"--context", ""},
                                           {"--context", "--all"},
                                           {"--kubeconfig", "-k"},
                                           {"--workloads", "node"},
                                           {"--workloads", "experiments"},
                                           {"--selector", "a b"},
                                           {"--selector", ""},
                                           {"--gpu-runtime-class", "Nvidia_GPU"},
                                           {"--pod-security", "baseline"},
                                           {"--agent-console", "ftp://console.example"},
                                           {"--agent-console", "https://u:p@console.example"}}) {
    auto r = RunInstall(bad);
    EXPECT_EQ(r.code, 2) << bad[0] << " " << bad[1] << ": " << r.err;
  }
  EXPECT_TRUE(console_.requests().empty());
  EXPECT_TRUE(Calls().empty());
}

TEST_F(Install, ASessionThatCannotConfirmChangesNothing) {
  cli_.env.erase("UPLINK_API_KEY");
  cli_.StoreCredential(console_.url(), "skt_SSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS",
                       "session");
  console_.On("POST", "/api/v1/connections", [](const net::Request&) {
    return ErrorReply(403, "confirmation_required", "confirm");
  });
  auto r = cli_.Run({"connections", "install", "gpu-a", "--kubectl", kubectl_, "--yes"});
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_EQ(Calls(), (std::vector<Argv>{{"config", "current-context"}}));
}

}  // namespace
}  // namespace uplink::cli
