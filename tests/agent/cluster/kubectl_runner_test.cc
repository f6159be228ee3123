// The agent's kubectl runner against stand-in kubectl scripts that record their argv and
// environment, sleep, wait for a release file or print too much; and once against the real
// kubectl.
#include "agent/cluster/kubectl_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include "common/subprocess.h"
#include "kube/credentials.h"
#include "kubectl/guard.h"
#include "support/process.h"

namespace uplink::agent::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Argv = std::vector<std::string>;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos;
       start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  return lines;
}

class KubectlRunnerTest : public ::testing::Test {
 protected:
  KubectlRunnerTest() {
    uplink::testing::WriteFileOrDie(kubeconfig_, "apiVersion: v1\nkind: Config\n");
  }

  // A stand-in kubectl: `body` runs after it recorded its argv and environment. The PATH it
  // gets holds nothing, so it names every program by path.
  std::string FakeKubectl(const std::string& body) {
    std::string path = dir_.File("kubectl");
    uplink::testing::WriteFileOrDie(path,
                                    "#!/bin/sh\n"
                                    "printf '%s\\n' \"$@\" > " + dir_.File("argv") + "\n"
                                    "/usr/bin/env > " + dir_.File("env") + "\n" + body,
                                    0755);
    return path;
  }

  std::unique_ptr<KubectlRunner> Runner(const std::string& kubectl,
                                        KubectlRunnerOptions options = {}) {
    options.kubectl_path = kubectl;
    options.kubeconfig_path = kubeconfig_;
    options.cache_dir = dir_.File("cache");
    auto runner = KubectlRunner::Create(options);
    EXPECT_TRUE(runner.ok()) << runner.status().ToString();
    return runner.ok() ? std::move(runner).value() : nullptr;
  }

  uplink::testing::TempDir dir_;
  std::string kubeconfig_ = dir_.File("kubeconfig");
};

TEST_F(KubectlRunnerTest, RunsKubectlWithItsOwnKubeconfigFirstAndReportsWhatItDid) {
  auto runner = Runner(FakeKubectl("echo listed; echo warned >&2; exit 3\n"));
  auto run = runner->Run({"kubectl", "-n", "ml", "get", "pods", "-o", "wide"});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exit_code, 3);
  EXPECT_EQ(run->stdout_text, "listed\n");
  EXPECT_EQ(run->stderr_text, "warned\n");
  EXPECT_GE(run->duration_ms, 0);
  EXPECT_THAT(Lines(uplink::testing::ReadFileOrEmpty(dir_.File("argv"))),
              ElementsAre("--kubeconfig=" + kubeconfig_, "-n", "ml", "get", "pods", "-o", "wide"));
}

TEST_F(KubectlRunnerTest, KubectlGetsACleanEnvironment) {
  ::setenv("KUBECONFIG", dir_.File("someone-elses-kubeconfig").c_str(), 1);
  ::setenv("UPLINK_RUNNER_TEST_INHERITED", "leaked", 1);
  auto runner = Runner(FakeKubectl("exit 0\n"));
  auto run = runner->Run({"kubectl", "version", "--client"});
  ::unsetenv("KUBECONFIG");
  ::unsetenv("UPLINK_RUNNER_TEST_INHERITED");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  std::map<std::string, std::string> env;
  for (const std::string& line : Lines(uplink::testing::ReadFileOrEmpty(dir_.File("env")))) {
    env[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
  }
  EXPECT_EQ(env["HOME"], dir_.File("cache"));
  EXPECT_EQ(env["PATH"], dir_.File("cache/empty-path"));
  EXPECT_EQ(env["KUBERC"], "off");
  EXPECT_EQ(env.count("KUBECONFIG"), 0u);
  EXPECT_EQ(env.count("UPLINK_RUNNER_TEST_INHERITED"), 0u);
  // The shell adds PWD and the like; nothing else of ours is there.
  for (const auto& [name, value] : env) {
    EXPECT_TRUE(name == "HOME" || name == "PATH" || name == "KUBERC" || name == "PWD" ||
                name == "OLDPWD" || name == "SHLVL" || name == "_")
        << name << "=" << value;
  }
  std::filesystem::path empty_path(env["PATH"]);
  EXPECT_TRUE(std::filesystem::is_directory(empty_path));
  EXPECT_TRUE(std::filesystem::is_empty(empty_path));
}

TEST_F(KubectlRunnerTest, ARefusalNeverStartsAProcess) {
  auto runner = Runner(FakeKubectl("exit 0\n"));
  for (const Argv& argv : std::vector<Argv>{{"kubectl", "delete", "pod", "x"},
                                            {"kubectl", "get", "secrets"},
                                            {"kubectl", "get", "pods", "--as=admin"},
                                            {"kubectl", "--kubeconfig=/tmp/k", "get", "pods"},
                                            {"kubectl", "logs", "-f", "p"},
                                            {"kubectl", "exec", "p", "--", "sh"},
                                            {"sh", "-c", "id"},
                                            {}}) {
    auto run = runner->Run(argv);
    EXPECT_EQ(run.status().code(), StatusCode::kPermissionDenied);
    EXPECT_FALSE(std::filesystem::exists(dir_.File("argv"))) << run.status().ToString();
  }
  auto refused = runner->Run({"kubectl", "get", "--raw", "/api"});
  EXPECT_EQ(kubectl::RefusalText(refused.status().message()),
            std::string(kubectl::kRefusalHeadline) + "\n" + refused.status().message());
}

TEST_F(KubectlRunnerTest, AKubectlThatRunsTooLongIsKilled) {
  auto runner = Runner(FakeKubectl("/bin/sleep 600\n"),
                       KubectlRunnerOptions{.timeout = std::chrono::milliseconds(300)});
  auto run = runner->Run({"kubectl", "get", "pods"});
  EXPECT_EQ(run.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(run.status().message(), HasSubstr("did not finish within 300 ms and was killed"));
}

TEST_F(KubectlRunnerTest, OutputBeyondTheBoundIsAFailureNotACutShortSuccess) {
  auto runner = Runner(FakeKubectl("/usr/bin/head -c 3000000 /dev/zero\n"),
                       KubectlRunnerOptions{.max_output_bytes = 1 << 20});
  auto run = runner->Run({"kubectl", "get", "pods", "-A", "-o", "json"});
  EXPECT_EQ(run.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(run.status().message(), HasSubstr("more than 1048576 bytes"));
  EXPECT_THAT(run.status().message(), HasSubstr("narrow the command"));

  auto exact = Runner(FakeKubectl("/usr/bin/head -c 1048576 /dev/zero\n"),
                      KubectlRunnerOptions{.max_output_bytes = 1 << 20});
  auto fits = exact->Run({"kubectl", "get", "pods"});
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->stdout_text.size(), 1u << 20);
}

TEST_F(KubectlRunnerTest, TheDefaultsAreThirtySecondsFourMiBAndFourAtATime) {
  auto runner = Runner(FakeKubectl("exit 0\n"));
  EXPECT_EQ(runner->options().timeout, std::chrono::seconds(30));
  EXPECT_EQ(runner->options().max_output_bytes, 4u << 20);
  EXPECT_EQ(runner->options().max_concurrent, 4u);
}

// Each run marks itself running and waits for the release file, so the test sees how many
// run at once without timing anything.
TEST_F(KubectlRunnerTest, RunsSeveralAtOnceButNoMoreThanAllowed) {
  const std::string running = dir_.File("running");
  std::filesystem::create_directories(running);
  const std::string release = dir_.File("release");
  auto runner = Runner(FakeKubectl("/usr/bin/touch " + running + "/$$\n"
                                   "n=0\n"
                                   "while [ ! -e " + release + " ] && [ $n -lt 1200 ]; do\n"
                                   "  /bin/sleep 0.05; n=$((n + 1))\n"
                                   "done\n"
                                   "/bin/rm " + running + "/$$\n"
                                   "echo done\n"),
                       KubectlRunnerOptions{.max_concurrent = 3});
  auto running_now = [&] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(running)) ++n;
    return n;
  };
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&] {
      auto run = runner->Run({"kubectl", "get", "pods"});
      if (run.ok() && run->stdout_text == "done\n") ++finished;
    });
  }
  EXPECT_TRUE(uplink::testing::WaitFor([&] { return running_now() == 3; }));
  // Two wait for a slot; give them every chance to start too early.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(running_now(), 3u);
  uplink::testing::WriteFileOrDie(release, "");
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(finished.load(), 5);
  EXPECT_EQ(running_now(), 0u);
}

TEST_F(KubectlRunnerTest, ACancelStopsARunAndARunWaitingForASlot) {
  auto runner = Runner(FakeKubectl("/bin/sleep 600\n"), KubectlRunnerOptions{.max_concurrent = 1});
  std::atomic<bool> cancel{false};
  Result<KubectlRun> first = InternalError("not run");
  Result<KubectlRun> second = InternalError("not run");
  std::thread running([&] { first = runner->Run({"kubectl", "get", "pods"}, &cancel); });
  EXPECT_TRUE(uplink::testing::WaitFor(
      [&] { return std::filesystem::exists(dir_.File("argv")); }));
  std::thread waiting([&] { second = runner->Run({"kubectl", "get", "nodes"}, &cancel); });
  cancel = true;
  running.join();
  waiting.join();
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
}

TEST_F(KubectlRunnerTest, CreateRefusesPathsItCannotUse) {
  std::string kubectl = FakeKubectl("exit 0\n");
  auto relative = KubectlRunner::Create(
      {.kubectl_path = "kubectl", .kubeconfig_path = kubeconfig_, .cache_dir = dir_.File("c")});
  EXPECT_EQ(relative.status().code(), StatusCode::kInvalidArgument);
  auto missing = KubectlRunner::Create({.kubectl_path = dir_.File("nonexistent"),
                                        .kubeconfig_path = kubeconfig_,
                                        .cache_dir = dir_.File("c")});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto no_kubeconfig = KubectlRunner::Create({.kubectl_path = kubectl,
                                              .kubeconfig_path = dir_.File("nonexistent"),
                                              .cache_dir = dir_.File("c")});
  EXPECT_EQ(no_kubeconfig.status().code(), StatusCode::kNotFound);
  auto relative_cache = KubectlRunner::Create(
      {.kubectl_path = kubectl, .kubeconfig_path = kubeconfig_, .cache_dir = "cache"});
  EXPECT_EQ(relative_cache.status().code(), StatusCode::kInvalidArgument);
  auto no_slots = KubectlRunner::Create({.kubectl_path = kubectl,
                                         .kubeconfig_path = kubeconfig_,
                                         .cache_dir = dir_.File("c"),
                                         .max_concurrent = 0});
  EXPECT_EQ(no_slots.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(KubectlRunnerTest, ThePluginlessPathMustStayEmpty) {
  std::string kubectl = FakeKubectl("exit 0\n");
  ASSERT_NE(Runner(kubectl), nullptr);
  const std::string plugin_dir = dir_.File("cache/empty-path");
  std::filesystem::permissions(plugin_dir, std::filesystem::perms::owner_all);
  uplink::testing::WriteFileOrDie(plugin_dir + "/kubectl-evil", "#!/bin/sh\n", 0755);
  auto runner = KubectlRunner::Create(
      {.kubectl_path = kubectl, .kubeconfig_path = kubeconfig_, .cache_dir = dir_.File("cache")});
  EXPECT_EQ(runner.status().code(), StatusCode::kFailedPrecondition);
  std::filesystem::permissions(plugin_dir, std::filesystem::perms::owner_all);
  std::filesystem::remove(plugin_dir + "/kubectl-evil");
}

TEST_F(KubectlRunnerTest, TheRealKubectlRunsThroughTheRunner) {
  const char* path = std::getenv("PATH");
  std::optional<std::string> kubectl = FindProgram("kubectl", path != nullptr ? path : "");
  ASSERT_TRUE(kubectl) << "kubectl must be on PATH (scripts/deps.sh installs it)";
  auto runner = Runner(*kubectl);
  auto run = runner->Run({"kubectl", "version", "--client", "-o", "json"});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exit_code, 0) << run->stderr_text;
  EXPECT_THAT(run->stdout_text, HasSubstr("\"clientVersion\""));
}

class InClusterKubeconfigTest : public ::testing::Test {
 protected:
  InClusterKubeconfigTest() {
    uplink::testing::WriteFileOrDie(paths_.token, "sa-token-value\n");
    uplink::testing::WriteFileOrDie(paths_.ca_cert, "-----BEGIN CERTIFICATE-----\nMIIB\n"
                                                    "-----END CERTIFICATE-----\n");
    uplink::testing::WriteFileOrDie(paths_.namespace_file, "uplink\n");
  }

  EnvLookup Env(std::map<std::string, std::string> values) {
    env_ = std::move(values);
    return [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
  }

  uplink::testing::TempDir dir_;
  kube::InClusterPaths paths_{.token = dir_.File("token"),
                              .ca_cert = dir_.File("ca.crt"),
                              .namespace_file = dir_.File("namespace")};
  std::map<std::string, std::string> env_;
};

TEST_F(InClusterKubeconfigTest, NamesTheServerTheCaFileAndTheTokenFileNeverTheToken) {
  const std::string path = dir_.File("kubeconfig");
  EnvLookup env =
      Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  ASSERT_TRUE(WriteInClusterKubeconfig(path, env, paths_).ok());
  std::string text = uplink::testing::ReadFileOrEmpty(path);
  EXPECT_EQ(text.find("sa-token-value"), std::string::npos);
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  // uplink's own kubeconfig reader and the real kubectl read it the same way.
  auto credentials = kube::LoadKubeconfig(path);
  ASSERT_TRUE(credentials.ok()) << credentials.status().ToString();
  EXPECT_EQ(credentials->server, "https://10.96.0.1:443");
  EXPECT_EQ(credentials->token_file, paths_.token);
  EXPECT_EQ(credentials->default_namespace, "default") << "not the agent's own namespace";

  const char* search = std::getenv("PATH");
  std::optional<std::string> kubectl = FindProgram("kubectl", search != nullptr ? search : "");
  ASSERT_TRUE(kubectl);
  auto view = RunProcess(ProcessOptions{
      .argv = {*kubectl, "--kubeconfig=" + path, "config", "view", "-o",
               "jsonpath={.clusters[0].cluster.server} "
               "{.clusters[0].cluster.certificate-authority} {.users[0].user.tokenFile} "
               "{.contexts[0].context.namespace}"},
      .environment = std::vector<std::string>{"HOME=" + dir_.path()}});
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->exit_code, 0) << view->err;
  EXPECT_EQ(view->out, "https://10.96.0.1:443 " + paths_.ca_cert + " " + paths_.token + " default");
}

TEST_F(InClusterKubeconfigTest, AnIpv6ServiceHostIsBracketed) {
  auto text = InClusterKubeconfig(
      Env({{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "6443"}}), paths_);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_THAT(*text, HasSubstr("server: \"https://[fd00::1]:6443\""));
}

TEST_F(InClusterKubeconfigTest, OutsideAPodOrWithoutTheMountedFilesItSaysWhy) {
  auto outside = InClusterKubeconfig(Env({}), paths_);
  EXPECT_EQ(outside.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(outside.status().message(), HasSubstr("KUBERNETES_SERVICE_HOST"));

  auto injected = InClusterKubeconfig(
      Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1\"\nusers: []"},
           {"KUBERNETES_SERVICE_PORT", "443"}}),
      paths_);
  EXPECT_FALSE(injected.ok()) << *injected;

  std::filesystem::remove(paths_.token);
  auto no_token = InClusterKubeconfig(
      Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}}), paths_);
  EXPECT_FALSE(no_token.ok());
  EXPECT_THAT(no_token.status().message(), HasSubstr("token"));
}

}  // namespace
}  // namespace uplink::agent::cluster
