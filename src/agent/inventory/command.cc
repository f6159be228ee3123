#include "agent/inventory/command.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/command_support.h"
#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/inventory/role.h"
#include "agent/stop_signal.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/time.h"
#include "kube/client.h"
#include "kube/credentials.h"
#include "net/client.h"
#include "net/server.h"
#include "protocol/agent_api.h"

namespace uplink::agent::inventory {

int RunInventoryCommand(const std::vector<std::string>& args) {
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
  agent::RegisterConsoleFlags(flags, &console_url, &token_file, &console_ca_file);
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

  if (std::optional<int> exit_code = agent::ParseFlagsOrExit(flags, args)) return *exit_code;
  if (instance.size() > 253) {
    return Fail("--instance must be at most 253 characters", kExitUsage);
  }
  if (!flags.positional().empty()) {
    // Not echoed: a token pasted in the wrong place must not end up in a log.
    return Fail("unexpected argument: uplink-agent inventory takes only flags\n" + flags.Usage(),
                kExitUsage);
  }
  if (Status level = log::SetMinLevel(log_level); !level.ok()) {
    return Fail("--log-level: " + level.message(), kExitUsage);
  }
  if (Status flags_ok = CheckConsoleFlags(console_url, token_file); !flags_ok.ok()) {
    return Fail(flags_ok.message(), kExitUsage);
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

  std::string user_agent = protocol::AgentUserAgent(UPLINK_VERSION, "inventory");
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

}  // namespace uplink::agent::inventory
