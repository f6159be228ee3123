// uplink connections install against a scripted console and a stand-in kubectl that records
// its arguments and its standard input: the exact commands, the token only on stdin, and the
// manual fallback.
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
  EXPECT_NE(r.out.find("helm upgrade --install uplink-agent charts/uplink-agent"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--namespace uplink --set config.baseUrl=" + console_.url() +
                       " --set token.existingSecret=uplink-agent-token"),
            std::string::npos)
      << r.out;

  auto created = console_.RequestsTo("POST", "/api/v1/connections");
  ASSERT_EQ(created.size(), 1u);
  auto body = ParseJson(created[0].body);
  EXPECT_EQ(body->at("agent_name"), "uplink-agent");
  EXPECT_EQ(body->at("cluster_name"), "gpu-a");
}

TEST_F(Install, ReinstallingRotatesTheTokenAndPatchesTheExistingSecret) {
  uplink::testing::WriteFileOrDie(log_ + "/namespace", "");
  uplink::testing::WriteFileOrDie(log_ + "/secret", "agt_old");
  Connections({ConnectionJson("ffffffffffffffff", "gpu-a", "revoked"),
               ConnectionJson(kId, "gpu-a", "active")});
  auto r = RunInstall({"--yes", "--namespace", "gpu-agents", "--secret-name", "agent.token",
                       "--pod-security", "baseline", "--chart", "oci://example/uplink-agent"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(console_.RequestsTo("POST", "/api/v1/connections").empty());
  EXPECT_EQ(
      console_.RequestsTo("POST", std::string("/api/v1/connections/") + kId + "/rotate").size(),
      1u);
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
  EXPECT_NE(r.out.find("oci://example/uplink-agent --namespace gpu-agents"), std::string::npos);
}

TEST_F(Install, AnsweringNoPrintsTheTokenOnceWithTheCommandsToRunAndExits0) {
  for (const std::string& answer : {std::string("n\n"), std::string(""), std::string("maybe\n")}) {
    std::filesystem::remove_all(log_);
    std::filesystem::create_directories(log_);
    auto r = RunInstall({}, answer);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(Calls(), (std::vector<Argv>{{"config", "current-context"}}))
        << "kubectl changed something without a yes";
    EXPECT_NE(r.err.find("Create Secret uplink-agent-token in namespace uplink and set that "
                         "namespace's Pod Security enforcement to privileged, using kubectl "
                         "context 'sim-context'? [y/N] "),
              std::string::npos)
        << r.err;
    EXPECT_EQ(Count(r.out, kToken), 1u) << r.out;
    for (const char* line :
         {"kubectl create namespace uplink",
          "kubectl label namespace uplink pod-security.kubernetes.io/enforce=privileged "
          "--overwrite",
          "read -rs UPLINK_AGENT_TOKEN   # paste the agt_ token; it is not echoed or kept in "
          "history",
          "printf '%s' \"$UPLINK_AGENT_TOKEN\" | kubectl -n uplink create secret generic "
          "uplink-agent-token --from-file=UPLINK_AGENT_TOKEN=/dev/stdin",
          "unset UPLINK_AGENT_TOKEN",
          "helm upgrade --install uplink-agent charts/uplink-agent --namespace uplink"}) {
      EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
    }
  }
}

TEST_F(Install, TheQuestionGoesToTheTerminalWhenThereIsOne) {
  cli_.terminal.available = true;
  cli_.terminal.answers = {"Y", "ml, dev"};
  auto r = RunInstall({"--context", "prod"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(cli_.terminal.prompts,
            (std::vector<std::string>{
                "Create Secret uplink-agent-token in namespace uplink and set that namespace's "
                "Pod Security enforcement to privileged, using kubectl context 'prod'? [y/N] ",
                "Namespaces 'uplink kubectl' and the cluster view may read (comma-separated, * "
                "for all, 'none' for cluster-scoped reads only; Enter to choose later): "}));
  auto created = console_.RequestsTo("POST", "/api/v1/connections");
  ASSERT_EQ(created.size(), 1u);
  EXPECT_NE(created[0].body.find(R"("namespaces":["ml","dev"])"), std::string::npos)
      << created[0].body;
  EXPECT_EQ(Calls().size(), 5u);
  EXPECT_EQ(r.out.find(kToken), std::string::npos);
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
                                           {"--kubeconfig", "-k"}}) {
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
