// Inventory of 5,000 GPU nodes: how long `uplink-agent inventory --once` takes to list them
// from uplink-kubesim and have the console accept the report, and the agent's peak RSS.
//
// Targets (issue: foundation): <= 1 s wall, <= 32 MiB peak RSS. Baseline, measured in the
// same run against the same simulator: `kubectl get nodes -o json`, which lists the same
// nodes (also paged by 500) and only prints them. The reference agent's design (one unpaged
// list) fails outright above 200 nodes, so it cannot serve as a baseline.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/files.h"
#include "common/json.h"
#include "net/client.h"
#include "support/process.h"

extern char** environ;

namespace {

using uplink::testing::ChildProcess;
using uplink::testing::TempDir;

struct Run {
  double wall_seconds = 0;
  double peak_rss_mib = 0;
  int exit_code = -1;
};

// Spawns argv with output to /dev/null and measures wall time and the child's peak RSS.
Run Measure(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  auto start = std::chrono::steady_clock::now();
  pid_t pid;
  Run run;
  if (posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return run;
  }
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  run.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.peak_rss_mib = usage.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

Run Median(std::vector<Run> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.wall_seconds < b.wall_seconds; });
  Run median = runs[runs.size() / 2];
  for (const Run& r : runs) median.peak_rss_mib = std::max(median.peak_rss_mib, r.peak_rss_mib);
  return median;
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 5000;
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string bin = UPLINK_BIN_DIR;
  TempDir dir;

  std::printf("bench_inventory: %d GPU nodes, %d repetitions (median wall, max RSS)\n", nodes,
              repetitions);
  std::fflush(stdout);
  ChildProcess kubesim({bin + "/uplink-kubesim", "--listen", "127.0.0.1:0", "--nodes",
                        std::to_string(nodes), "--gpus-per-node", "8", "--kubeconfig-out",
                        dir.File("kubeconfig")},
                       dir.path());
  if (!uplink::testing::WaitFor([&] { return !uplink::testing::ReadFileOrEmpty(dir.File("kubeconfig")).empty(); },
                                std::chrono::seconds(60))) {
    std::fprintf(stderr, "kubesim did not start:\n%s\n", kubesim.Stderr().c_str());
    return 1;
  }

  auto key = uplink::testing::RunCommand(
      {bin + "/uplink-console", "init", "--data-dir", dir.File("console")});
  if (key.exit_code != 0) {
    std::fprintf(stderr, "console init failed: %s\n", key.err.c_str());
    return 1;
  }
  std::string api_key(uplink::TrimWhitespace(key.out));
  const int port = uplink::testing::FreePort();
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  ChildProcess console({bin + "/uplink-console", "serve", "--data-dir", dir.File("console"),
                        "--listen", "127.0.0.1:" + std::to_string(port)},
                       dir.path());
  auto client = uplink::net::HttpClient::Create({.base_url = url});
  if (!client.ok()) return 1;
  auto healthy = [&] {
    uplink::net::Request r;
    r.target = "/healthz";
    auto resp = (*client)->Send(r);
    return resp.ok() && resp->status == 200;
  };
  if (!uplink::testing::WaitFor(healthy, std::chrono::seconds(30))) {
    std::fprintf(stderr, "console did not start:\n%s\n", console.Stderr().c_str());
    return 1;
  }
  uplink::net::Request create;
  create.method = "POST";
  create.target = "/api/v1/connections";
  create.headers.Set("Authorization", "Bearer " + api_key);
  create.headers.Set("Content-Type", "application/json");
  create.body = R"({"agent_name":"bench","cluster_name":"bench-cluster"})";
  auto created = (*client)->Send(create);
  if (!created.ok() || created->status != 201) {
    std::fprintf(stderr, "creating the connection failed\n");
    return 1;
  }
  auto body = uplink::ParseJson(created->body);
  uplink::testing::WriteFileOrDie(dir.File("token"),
                                  std::string(body->at("token").as_string()));

  std::vector<Run> agent_runs, kubectl_runs;
  for (int i = 0; i < repetitions; ++i) {
    Run agent = Measure({bin + "/uplink-agent", "inventory", "--once", "--console", url,
                         "--token-file", dir.File("token"), "--kubeconfig", dir.File("kubeconfig"),
                         "--health-listen", "127.0.0.1:0"});
    if (agent.exit_code != 0) {
      std::fprintf(stderr, "agent run %d failed (exit %d)\n", i, agent.exit_code);
      return 1;
    }
    agent_runs.push_back(agent);
    Run kubectl = Measure({"/usr/bin/kubectl", "--kubeconfig", dir.File("kubeconfig"),
                           "--cache-dir", dir.File("kube-cache"), "get", "nodes", "-o", "json"});
    if (kubectl.exit_code != 0) {
      std::fprintf(stderr, "kubectl run %d failed (exit %d)\n", i, kubectl.exit_code);
      return 1;
    }
    kubectl_runs.push_back(kubectl);
  }
  Run agent = Median(agent_runs);
  Run kubectl = Median(kubectl_runs);
  std::printf("agent inventory --once (list %d nodes + report): wall %.3f s (target <= 1 s), "
              "peak RSS %.1f MiB (target <= 32 MiB)\n",
              nodes, agent.wall_seconds, agent.peak_rss_mib);
  std::printf("baseline kubectl get nodes -o json:              wall %.3f s, peak RSS %.1f MiB\n",
              kubectl.wall_seconds, kubectl.peak_rss_mib);
  std::printf("ratio agent/kubectl: wall %.2f, RSS %.2f\n", agent.wall_seconds / kubectl.wall_seconds,
              agent.peak_rss_mib / kubectl.peak_rss_mib);
  bool met = agent.wall_seconds <= 1.0 && agent.peak_rss_mib <= 32.0;
  std::printf("targets %s\n", met ? "met" : "NOT met");
  return 0;
}
