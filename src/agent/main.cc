// uplink-agent: the in-cluster agent. `uplink-agent inventory [flags]` reports the selected
// GPU nodes to the console over outbound HTTPS.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/inventory/role.h"
#include "agent/stop_signal.h"
#include "common/files.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/metrics.h"
#include "kube/client.h"
#include "kube/credentials.h"

namespace {

using namespace uplink;

constexpr int kExitUsage = 2;
// After SIGTERM the current cycle may be inside a request (up to 30 s); Kubernetes gives a
// pod 30 s in all, so leave without waiting for it.
constexpr std::chrono::seconds kStopGrace{3};

const char kUsage[] =
    "usage: uplink-agent ROLE [flags]\n"
    "\n"
    "roles:\n"
    "  inventory   report the selected GPU nodes to the console\n";

int Fail(const std::string& message, int code = 1) {
  std::cerr << "uplink-agent: " << message << "\n";
  return code;
}

// The stop request lives as long as the process: the detached signal thread may use it after
// RunInventory has returned.
agent::StopSignal& ProcessStopSignal() {
  static agent::StopSignal stop;
  return stop;
}

// SIGINT and SIGTERM are blocked in every thread and taken by one waiting thread, which asks
// the agent to stop; if the agent is still busy after a grace period the process exits with
// `forced_exit_code` (1 in --once mode: no report was accepted).
void HandleStopSignals(agent::StopSignal& stop, int forced_exit_code) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals, &stop, forced_exit_code] {
    int received = 0;
    sigwait(&signals, &received);
    log::Logger("agent").Info("stopping", {{"signal", received == SIGINT ? "SIGINT" : "SIGTERM"}});
    stop.Stop();
    std::this_thread::sleep_for(kStopGrace);
    log::Logger("agent").Info("exiting without waiting for the current request",
                              {{"exit_code", forced_exit_code}});
    std::_Exit(forced_exit_code);
  }).detach();
}

// The pod's name from the downward API (the chart sets POD_NAME), else the host name, which
// in a pod is also the pod's name.
std::string DefaultInstanceName() {
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') return pod;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

int RunInventory(const std::vector<std::string>& args) {
  std::string console_url;
  std::string token_file;
  std::string console_ca_file;
  std::string kubeconfig;
  std::string selector = "nvidia.com/gpu.present=true";
  std::string status_configmap;
  std::string ns;
  bool once = false;
  std::string health_listen = "0.0.0.0:8081";
  std::string log_level = "info";
  std::string instance = DefaultInstanceName();

  FlagSet flags("uplink-agent inventory");
  flags.String("console", &console_url, "console URL, https://HOST[:PORT]");
  flags.String("token-file", &token_file, "file holding the connection token (agt_...)");
  flags.String("console-ca-file", &console_ca_file,
               "PEM CA bundle for the console's certificate (default: system store)");
  flags.String("kubeconfig", &kubeconfig,
               "kubeconfig file (default: the pod's service account)");
  flags.String("selector", &selector, "label selector of the GPU nodes to report");
  flags.String("status-configmap", &status_configmap,
               "ConfigMap this agent keeps its status in (empty: none)");
  flags.String("namespace", &ns,
               "namespace of the status ConfigMap (default: the service account's)");
  flags.Bool("once", &once, "run one cycle; exit 0 if the console accepted the report");
  flags.String("health-listen", &health_listen, "HOST:PORT for /healthz, /readyz, /metrics");
  flags.String("log-level", &log_level, "debug, info, warn or error");
  flags.String("instance", &instance,
               "this agent's name in the console (default: $POD_NAME, else the host name)");

  if (Status parsed = flags.Parse(args); !parsed.ok()) {
    return Fail(parsed.message() + "\n" + flags.Usage(), kExitUsage);
  }
  if (instance.size() > 253) {
    return Fail("--instance must be at most 253 characters", kExitUsage);
  }
  if (!flags.positional().empty()) {
    return Fail("unexpected argument '" + flags.positional().front() + "'\n" + flags.Usage(),
                kExitUsage);
  }
  if (Status level = log::SetMinLevel(log_level); !level.ok()) {
    return Fail("--log-level: " + level.message(), kExitUsage);
  }
  if (console_url.empty()) {
    return Fail("--console is required: the console URL, e.g. --console https://console.example "
                "(or UPLINK_CONSOLE)", kExitUsage);
  }
  if (Status url = agent::ValidateConsoleUrl(console_url); !url.ok()) {
    return Fail(url.message(), kExitUsage);
  }
  if (token_file.empty()) {
    return Fail("--token-file is required: the file holding the connection token, usually the "
                "mounted connection Secret (or UPLINK_TOKEN_FILE)", kExitUsage);
  }
  if (auto token = ReadFileBounded(token_file, 4096); !token.ok()) {
    return Fail("--token-file: " + token.status().message() +
                "; mount the connection Secret there or fix the path", kExitUsage);
  }
  if (selector.empty()) {
    return Fail("--selector must not be empty: uplink reports only selected nodes; use e.g. "
                "--selector nvidia.com/gpu.present=true", kExitUsage);
  }

  auto credentials = kubeconfig.empty() ? kube::LoadInCluster() : kube::LoadKubeconfig(kubeconfig);
  if (!credentials.ok()) {
    return Fail((kubeconfig.empty() ? "in-cluster Kubernetes credentials: " : "--kubeconfig: ") +
                credentials.status().message(), kExitUsage);
  }
  if (ns.empty()) ns = credentials->default_namespace;
  if (!status_configmap.empty() && ns.empty()) {
    return Fail("--status-configmap needs a namespace: pass --namespace NS (no service-account "
                "or kubeconfig namespace was found)", kExitUsage);
  }

  agent::StopSignal& stop = ProcessStopSignal();
  HandleStopSignals(stop, once ? 1 : 0);

  std::string user_agent = "uplink-agent/" UPLINK_VERSION " (inventory)";
  auto kube = kube::KubeClient::Create(std::move(credentials).value(),
                                       kube::KubeClientOptions{.user_agent = user_agent});
  if (!kube.ok()) return Fail(kube.status().ToString());
  auto console = agent::ConsoleClient::Create(agent::ConsoleClientOptions{
      .base_url = console_url, .token_file = token_file, .ca_file = console_ca_file});
  if (!console.ok()) return Fail(console.status().ToString());

  metrics::Registry registry;
  agent::inventory::DeclareMetrics(registry);
  agent::inventory::InventoryRole role(
      agent::inventory::RoleOptions{.selector = selector,
                                    .instance = instance,
                                    .status_configmap = status_configmap,
                                    .status_namespace = ns},
      **kube, **console, SystemClock(), registry);

  log::Logger log("agent");
  if (once) {
    agent::inventory::CycleResult cycle = role.RunCycle();
    if (!cycle.status.ok()) return Fail("report not accepted: " + cycle.status.ToString());
    return 0;
  }

  auto health = agent::HealthServer::Start(
      health_listen, [&role] { return role.CheckReadiness(); }, registry);
  if (!health.ok()) return Fail(health.status().ToString(), kExitUsage);
  std::string host;
  std::uint16_t port = 0;
  (void)net::SplitHostPort(health_listen, host, port);
  log.Info("health server listening",
           {{"address", host + ":" + std::to_string((*health)->port())}});
  // Only the origin: a path could carry something that is not meant for logs.
  std::string console_origin = agent::ConsoleOrigin(*net::ParseBaseUrl(console_url));
  log.Info("inventory role started", {{"console", console_origin},
                                      {"selector", selector},
                                      {"status_configmap", status_configmap},
                                      {"namespace", ns}});
  role.Run(stop);
  log.Info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args.front() == "-h" || args.front() == "--help" || args.front() == "help") {
    std::cerr << kUsage;
    return args.empty() ? kExitUsage : 0;
  }
  std::string role = args.front();
  args.erase(args.begin());
  if (role == "inventory") return RunInventory(args);
  std::cerr << "uplink-agent: unknown role '" << role << "'\n" << kUsage;
  return kExitUsage;
}
