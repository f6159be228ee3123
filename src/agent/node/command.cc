#include "agent/node/command.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <thread>

#include "agent/command_support.h"
#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/node/format/payload.h"
#include "agent/node/format/prometheus.h"
#include "agent/node/role.h"
#include "agent/shipper.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/thread_name.h"
#include "net/client.h"
#include "net/server.h"

namespace uplink::agent::node {
namespace {

// How long --once waits for the GPU collector's first read: NVML's watchdog and then the
// nvidia-smi fallback's timeout, with room to spare.
constexpr std::chrono::seconds kFirstGpuReadWait{20};

struct NodeFlags {
  std::string node_name;
  std::string host_proc = "/proc";
  std::string host_root = "/";
  std::string collectors = "cpu,memory,load,uptime,pressure,network,disk,filesystem,gpu";
  std::chrono::milliseconds interval = protocol::kDefaultPlanInterval;
  bool once = false;
  std::string format = "prometheus";
  std::string listen = "0.0.0.0:8081";
  std::string console_url;
  std::string token_file;
  std::string console_ca_file;
  std::string cluster_uid_file;
  SpoolFlags spool;
  std::string stream;
  std::string instance = DefaultInstanceName();
  std::string nvml_library = kDefaultNvmlPath;
  std::string nvidia_smi = "nvidia-smi";
  std::string log_level = "info";
};

// The node's name from the downward API (the chart sets NODE_NAME), else the host name: the
// role reads the host's /proc, and outside a pod that host is the node.
std::string DefaultNodeName() {
  if (const char* node = std::getenv("NODE_NAME"); node != nullptr && *node != '\0') return node;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

void Register(FlagSet& flags, NodeFlags& f) {
  flags.String("node-name", &f.node_name,
               "the Kubernetes node this agent runs on (default: $NODE_NAME, else the host name)");
  flags.String("host-proc", &f.host_proc, "where the host's /proc is mounted");
  flags.String("host-root", &f.host_root,
               "where the host's / is mounted (filesystems are measured under it)");
  flags.String("collectors", &f.collectors,
               "what to collect until the console's plan says otherwise: a comma list of cpu, "
               "memory, load, uptime, pressure, network, disk, filesystem, gpu");
  flags.Duration("interval", &f.interval,
                 "time between collections until the console's plan says otherwise (10s-1h)");
  flags.Bool("once", &f.once, "collect once, print it in --format and exit");
  flags.String("format", &f.format,
               "--once output: prometheus (node_exporter's names) or json (the shipped sample)");
  flags.String("listen", &f.listen,
               "HOST:PORT for /healthz, /readyz and /metrics (without --console, /metrics "
               "collects on every scrape: a standalone exporter)");
  RegisterConsoleFlags(flags, &f.console_url, &f.token_file, &f.console_ca_file,
                       "console URL, https://HOST[:PORT]; without it nothing is shipped");
  RegisterClusterUidFileFlag(flags, &f.cluster_uid_file);
  f.spool.Register(flags);
  RegisterStreamFlags(flags, &f.stream, &f.instance,
                      "the stream of the samples (default: node/NODE_NAME)");
  flags.String("nvml-library", &f.nvml_library, "the NVML library to load (dlopen)");
  flags.String("nvidia-smi", &f.nvidia_smi,
               "nvidia-smi, the fallback when NVML is unusable (empty: no fallback)");
  flags.String("log-level", &f.log_level, "debug, info, warn or error");
}

// Checks the flags; the usage error, if any.
Status Check(const FlagSet& flags, NodeFlags& f, CollectorSet& collectors) {
  if (!flags.positional().empty()) {
    // Not echoed: a token pasted in the wrong place must not end up in a log.
    return InvalidArgumentError("unexpected argument: uplink-agent node takes only flags");
  }
  if (f.node_name.empty()) f.node_name = DefaultNodeName();
  if (f.node_name.empty() || f.node_name.size() > 253) {
    return InvalidArgumentError("--node-name must be 1-253 characters (or set NODE_NAME)");
  }
  auto parsed = ParseCollectorList(f.collectors);
  if (!parsed.ok()) return InvalidArgumentError("--collectors: " + parsed.status().message());
  collectors = *parsed;
  if (f.interval < protocol::kMinPlanInterval || f.interval > protocol::kMaxPlanInterval) {
    return InvalidArgumentError("--interval must be from 10s to 1h");
  }
  if (f.format != "prometheus" && f.format != "json") {
    return InvalidArgumentError("--format must be prometheus or json");
  }
  if (Status level = log::SetMinLevel(f.log_level); !level.ok()) {
    return InvalidArgumentError("--log-level: " + level.message());
  }
  if (f.once || f.console_url.empty()) {
    for (const char* only_shipping : {"token-file", "state-dir", "stream", "cluster-uid-file"}) {
      if (flags.WasSet(only_shipping)) {
        return InvalidArgumentError(std::string("--") + only_shipping +
                                    " is for shipping to a console: pass --console too" +
                                    (f.once ? " and leave out --once" : ""));
      }
    }
    return Status::Ok();
  }
  UPLINK_RETURN_IF_ERROR(CheckConsoleFlags(f.console_url, f.token_file));
  UPLINK_RETURN_IF_ERROR(f.spool.Check());
  return CheckStreamFlags(flags, f.stream, f.instance, "node/" + f.node_name, "--node-name");
}

std::unique_ptr<GpuCollector> StartGpuCollector(const NodeFlags& f, CollectorSet collectors) {
  if (!collectors.Has(Collector::kGpu)) return nullptr;
  GpuCollectorOptions options;
  options.interval = f.interval;
  options.nvml_path = f.nvml_library;
  options.nvidia_smi_path = f.nvidia_smi;
  return std::make_unique<GpuCollector>(options);
}

void LogListening(const std::string& listen, const HealthServer& health) {
  std::string host;
  std::uint16_t port = 0;
  (void)net::SplitHostPort(listen, host, port);
  log::Logger("agent").Info("health server listening",
                            {{"address", host + ":" + std::to_string(health.port())}});
}

int RunOnce(NodeRole& role, GpuCollector* gpus, const std::string& format) {
  if (gpus != nullptr) (void)gpus->WaitForCycles(1, kFirstGpuReadWait);
  const NodeSample sample = role.Collect();
  std::string out;
  if (format == "json") {
    out = RenderPayload(sample);
    out += '\n';
  } else {
    RenderPrometheus(sample, out);
  }
  return WriteStdout(out) ? 0 : Fail("writing to stdout failed");
}

int RunExporter(NodeRole& role, metrics::Registry& registry, const std::string& listen) {
  StopSignal& stop = ProcessStopSignal();
  (void)role.Collect();  // readiness knows at once whether the host can be read
  auto health = HealthServer::Start(
      listen, [&role] { return role.CheckReadiness(); }, registry,
      [&role](std::string& out) { RenderPrometheus(role.Collect(), out); });
  if (!health.ok()) return Fail(health.status().ToString(), kExitUsage);
  LogListening(listen, **health);
  log::Logger("agent").Info("node exporter started: /metrics collects on every scrape");
  while (stop.WaitFor(std::chrono::hours(1))) {
  }
  log::Logger("agent").Info("stopped");
  return 0;
}

int RunShipping(NodeRole& role, metrics::Registry& registry, const NodeFlags& f) {
  StopSignal& stop = ProcessStopSignal();
  auto opened = OpenSpool(f.spool);
  if (!opened.ok()) return Fail(opened.status().message());
  spool::Spool& spool = **opened;
  auto console = ConsoleClient::Create(ConsoleClientOptions{.base_url = f.console_url,
                                                            .token_file = f.token_file,
                                                            .role = "node",
                                                            .ca_file = f.console_ca_file,
                                                            .cluster_uid_file = f.cluster_uid_file});
  if (!console.ok()) return Fail(console.status().ToString());
  DeclareShipperMetrics(registry);
  Shipper shipper(
      ShipperOptions{.stream = f.stream,
                     .instance = f.instance,
                     .on_acknowledged = [&role](const json::value& reply) {
                       role.TakePlanFrom(reply);
                     }},
      spool, **console, SystemClock(), registry);
  auto health = HealthServer::Start(
      f.listen,
      [&role, &shipper] {
        Readiness collecting = role.CheckReadiness();
        if (!collecting.ready) return collecting;
        return shipper.CheckReadiness();
      },
      registry, [&role](std::string& out) { role.AppendLatest(out); });
  if (!health.ok()) return Fail(health.status().ToString(), kExitUsage);
  LogListening(f.listen, **health);
  log::Logger("agent").Info(
      "node role started",
      {{"console", ConsoleOrigin(*net::ParseBaseUrl(f.console_url))},
       {"node", f.node_name},
       {"stream", f.stream},
       {"state_dir", f.spool.state_dir},
       {"spool_id", spool.Stats().spool_id}});
  // Collection stops at once on SIGTERM; the shipper then makes its last bounded attempt.
  std::thread collector([&] {
    NameThisThread("collector");
    role.Run(spool, stop);
  });
  shipper.Run(stop);
  collector.join();
  log::Logger("agent").Info("stopped");
  return 0;
}

}  // namespace

int RunNodeCommand(const std::vector<std::string>& args) {
  NodeFlags f;
  FlagSet flags("uplink-agent node");
  Register(flags, f);
  if (std::optional<int> exit_code = ParseFlagsOrExit(flags, args)) return *exit_code;
  CollectorSet collectors;
  if (Status checked = Check(flags, f, collectors); !checked.ok()) {
    return Fail(checked.message(), kExitUsage);
  }

  // Before any thread starts, so that only the signal thread takes SIGINT and SIGTERM. A
  // forced exit loses nothing: every sample stays in the spool until it is acknowledged.
  HandleStopSignals(ProcessStopSignal(), f.once ? 1 : 0, kShipStopGrace);

  HostCollectorOptions host_options;
  host_options.host_proc = f.host_proc;
  host_options.host_root = f.host_root;
  auto host = HostCollector::Create(host_options);
  if (!host.ok()) return Fail(host.status().ToString(), kExitUsage);
  std::unique_ptr<GpuCollector> gpus = StartGpuCollector(f, collectors);

  metrics::Registry registry;
  DeclareNodeMetrics(registry);
  NodeRole role(NodeRoleOptions{.node_name = f.node_name,
                                .plan = NodePlan{std::chrono::duration_cast<std::chrono::seconds>(
                                                     f.interval),
                                                 collectors}},
                **host, gpus.get(), SystemClock(), registry);
  if (f.once) return RunOnce(role, gpus.get(), f.format);
  if (f.console_url.empty()) return RunExporter(role, registry, f.listen);
  return RunShipping(role, registry, f);
}

}  // namespace uplink::agent::node
