// uplink-agent: the in-cluster agent. `uplink-agent inventory [flags]` reports the selected
// GPU nodes to the console over outbound HTTPS; `uplink-agent node [flags]` collects the
// node's figures (src/agent/node/command.cc); `uplink-agent cluster [flags]` runs the console's
// read-only kubectl commands and collects its plan (src/agent/cluster/command.cc);
// `uplink-agent experiments [flags]` reports ML experiment runs from MLflow and W&B
// (src/agent/experiments/command.cc); `uplink-agent workspace [drain]` runs reserved GPU
// workspaces (src/agent/workspace/command.cc); `uplink-agent spool COMMAND` inspects, fills and
// ships a durable upload spool; `uplink-agent check-kubectl` says what the read-only kubectl
// guard would do with each argv on stdin (src/agent/cluster/check_command.cc).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/cluster/check_command.h"
#include "agent/cluster/command.h"
#include "agent/command_support.h"
#include "agent/console_client.h"
#include "agent/experiments/command.h"
#include "agent/health.h"
#include "agent/inventory/role.h"
#include "agent/node/command.h"
#include "agent/shipper.h"
#include "agent/stop_signal.h"
#include "agent/workspace/command.h"
#include "common/files.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/text.h"
#include "kube/client.h"
#include "kube/credentials.h"
#include "protocol/agent_api.h"
#include "spool/spool.h"

namespace {

using namespace uplink;
using agent::CheckConsoleFlags;
using agent::DefaultInstanceName;
using agent::Fail;
using agent::HandleStopSignals;
using agent::kExitUsage;
using agent::LineRead;
using agent::ProcessStopSignal;
using agent::ReadLine;
using agent::SpoolFlags;
using agent::WriteStderr;
using agent::WriteStdout;

constexpr std::int64_t kMaxWriters = 64;

const char kUsage[] =
    "usage: uplink-agent ROLE [flags]\n"
    "       uplink-agent spool COMMAND --state-dir DIR [flags]\n"
    "       uplink-agent check-kubectl < LINES\n"
    "\n"
    "roles:\n"
    "  inventory     report the selected GPU nodes to the console\n"
    "  node          collect the node's CPU, memory, disk, network and GPU figures: ship\n"
    "                them to the console, serve them as a Prometheus exporter, or print\n"
    "                one collection (--once)\n"
    "  cluster       run the read-only kubectl commands the console sends, and collect its\n"
    "                plan (nodes, pods, warning events, ...) for the console\n"
    "  experiments   report ML experiment runs (MLflow, Weights & Biases) to the console:\n"
    "                only what changed since the last scan\n"
    "  workspace     run the reserved GPU workspaces of a qualified offer as isolated pods, and\n"
    "                the console's commands in them; 'workspace drain' deletes every one\n"
    "\n"
    "spool commands (the durable upload spool in DIR; one process at a time):\n"
    "  spool stat    print the spool's counts as one JSON object\n"
    "  spool dump    print the waiting records in order as JSON lines, without consuming them\n"
    "  spool append  append one record per line of stdin; print each record's sequence number\n"
    "                once it is durable\n"
    "  spool ship    deliver the spool's records to the console until SIGTERM\n"
    "\n"
    "other commands:\n"
    "  --version     print the agent's version\n"
    "  check-kubectl read one JSON argv array per line on stdin ([\"kubectl\", \"get\", ...]);\n"
    "                print 'allow' or 'refuse: REASON' for each: what the agent's read-only\n"
    "                kubectl would run\n"
    "\n"
    "'uplink-agent spool COMMAND --help' lists a command's flags.\n";

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

// --- spool commands ---------------------------------------------------------------------

// Why a spool command ends before it starts: a usage error, or the flags asked for by --help.
struct EarlyExit {
  std::string text;
  int exit_code = kExitUsage;
};

int Finish(const EarlyExit& early) {
  if (early.exit_code != 0) return Fail(early.text, early.exit_code);
  return WriteStdout(early.text) ? 0 : 1;
}

// Parses the flags of a spool command.
std::optional<EarlyExit> ParseSpoolFlags(FlagSet& flags, const SpoolFlags& spool,
                                         const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") return EarlyExit{flags.Usage(), 0};
  }
  if (Status parsed = flags.Parse(args); !parsed.ok()) {
    return EarlyExit{parsed.message() + "\n" + flags.Usage()};
  }
  if (!flags.positional().empty()) {
    return EarlyExit{"unexpected argument '" + flags.positional().front() + "'\n" + flags.Usage()};
  }
  if (Status checked = spool.Check(); !checked.ok()) return EarlyExit{checked.message()};
  return std::nullopt;
}

// Opens an existing spool for stat and dump.
Result<std::unique_ptr<spool::Spool>> OpenExistingSpool(const SpoolFlags& flags) {
  struct stat info {};
  if (::stat(flags.state_dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return NotFoundError("--state-dir " + flags.state_dir + " is not a directory");
  }
  if (!agent::HoldsSpool(flags.state_dir)) {
    return NotFoundError(flags.state_dir + " holds no spool (no STATE file or segments)");
  }
  return agent::OpenSpool(flags);
}

json::object LossJson(const spool::LossCount& loss) {
  return json::object{{"records", loss.records}, {"bytes", loss.bytes}};
}

int RunSpoolStat(const std::vector<std::string>& args) {
  SpoolFlags spool_flags;
  FlagSet flags("uplink-agent spool stat");
  spool_flags.Register(flags);
  if (auto early = ParseSpoolFlags(flags, spool_flags, args)) return Finish(*early);
  auto opened = OpenExistingSpool(spool_flags);
  if (!opened.ok()) return Fail(opened.status().message());
  spool::SpoolStats stats = (*opened)->Stats();
  json::value oldest_age = nullptr;
  if (stats.oldest_appended_at) {
    oldest_age = std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::seconds>(SystemClock().Now() -
                                                            *stats.oldest_appended_at)
               .count());
  }
  json::object out{{"spool_id", stats.spool_id},
                   {"records", stats.waiting_records},
                   {"bytes", stats.bytes},
                   {"segments", stats.segments},
                   {"first_sequence", stats.first_sequence},
                   {"last_sequence", stats.last_sequence},
                   {"consumed_through", stats.consumed_through},
                   {"oldest_age_seconds", oldest_age},
                   {"dropped", LossJson(stats.losses.dropped)},
                   {"corrupt", LossJson(stats.losses.corrupt)},
                   {"rejected", LossJson(stats.losses.rejected)}};
  return WriteStdout(ToJson(out) + "\n") ? 0 : Fail("writing to stdout failed");
}

int RunSpoolDump(const std::vector<std::string>& args) {
  SpoolFlags spool_flags;
  FlagSet flags("uplink-agent spool dump");
  spool_flags.Register(flags);
  if (auto early = ParseSpoolFlags(flags, spool_flags, args)) return Finish(*early);
  auto opened = OpenExistingSpool(spool_flags);
  if (!opened.ok()) return Fail(opened.status().message());
  spool::Spool& spool = **opened;
  while (true) {
    auto records = spool.Read(1 << 20, 1'000);
    if (!records.ok()) return Fail(records.status().WithContext("reading the spool").message());
    if (records->empty()) break;
    for (const spool::SpoolRecord& record : *records) {
      json::object line{{"sequence", record.sequence},
                        {"appended_at", FormatRfc3339Millis(record.appended_at)},
                        {"payload_text", ValidUtf8(record.payload)}};
      if (!WriteStdout(ToJson(line) + "\n")) return Fail("writing to stdout failed");
    }
  }
  return 0;
}

int RunSpoolAppend(const std::vector<std::string>& args) {
  SpoolFlags spool_flags;
  std::int64_t writers = 1;
  FlagSet flags("uplink-agent spool append");
  spool_flags.Register(flags);
  flags.Int("writers", &writers,
            "threads appending lines concurrently (their appends share one sync)");
  if (auto early = ParseSpoolFlags(flags, spool_flags, args)) return Finish(*early);
  if (writers < 1 || writers > kMaxWriters) {
    return Fail("--writers must be between 1 and " + std::to_string(kMaxWriters), kExitUsage);
  }
  auto opened = agent::OpenSpool(spool_flags);
  if (!opened.ok()) return Fail(opened.status().message());
  spool::Spool& spool = **opened;
  // A longer line could never be appended (spool.h: at most a quarter of the cap, 16 MiB).
  const size_t max_line = static_cast<size_t>(
      std::min<std::int64_t>(spool::SpoolOptions{}.max_record_bytes, spool_flags.max_bytes / 4));

  std::mutex input_mutex;   // guards stdin and next_line
  std::mutex error_mutex;   // one error message at a time
  std::uint64_t next_line = 0;
  std::atomic<bool> failed{false};
  auto fail = [&](const std::string& message) {
    failed = true;
    std::lock_guard lock(error_mutex);
    (void)WriteStderr("uplink-agent: " + message + "\n");
  };
  auto write_lines = [&] {
    std::string line;
    while (!failed) {
      std::uint64_t number = 0;
      {
        std::lock_guard lock(input_mutex);
        if (failed) return;
        LineRead read = ReadLine(stdin, line, max_line);
        if (read == LineRead::kEnd) return;
        number = ++next_line;
        if (read == LineRead::kTooLong) {
          fail("line " + std::to_string(number) + " of stdin is longer than the largest record (" +
               std::to_string(max_line) + " bytes); nothing after it was appended");
          return;
        }
      }
      auto sequence = spool.Append(line);
      if (!sequence.ok()) {
        fail("appending line " + std::to_string(number) + " of stdin: " +
             sequence.status().message());
        return;
      }
      if (!WriteStdout(std::to_string(*sequence) + "\n")) {
        fail("writing to stdout failed");
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (std::int64_t i = 1; i < writers; ++i) threads.emplace_back(write_lines);
  write_lines();
  for (std::thread& thread : threads) thread.join();
  return failed ? 1 : 0;
}

int RunSpoolShip(const std::vector<std::string>& args) {
  SpoolFlags spool_flags;
  std::string console_url;
  std::string token_file;
  std::string console_ca_file;
  std::string cluster_uid_file;
  std::string stream;
  std::string instance = DefaultInstanceName();
  std::string health_listen = "0.0.0.0:8081";
  std::string log_level = "info";
  FlagSet flags("uplink-agent spool ship");
  spool_flags.Register(flags);
  agent::RegisterConsoleFlags(flags, &console_url, &token_file, &console_ca_file);
  agent::RegisterClusterUidFileFlag(flags, &cluster_uid_file);
  agent::RegisterStreamFlags(
      flags, &stream, &instance,
      "the stream the records belong to in the console (default: spool/INSTANCE)");
  flags.String("health-listen", &health_listen, "HOST:PORT for /healthz, /readyz, /metrics");
  flags.String("log-level", &log_level, "debug, info, warn or error");
  if (auto early = ParseSpoolFlags(flags, spool_flags, args)) return Finish(*early);
  if (Status level = log::SetMinLevel(log_level); !level.ok()) {
    return Fail("--log-level: " + level.message(), kExitUsage);
  }
  if (Status flags_ok = CheckConsoleFlags(console_url, token_file); !flags_ok.ok()) {
    return Fail(flags_ok.message(), kExitUsage);
  }
  if (Status stream_ok = agent::CheckStreamFlags(flags, stream, instance, "spool/" + instance,
                                                 "--instance");
      !stream_ok.ok()) {
    return Fail(stream_ok.message(), kExitUsage);
  }

  // Before any thread starts, so that only the signal thread takes SIGINT and SIGTERM. A
  // forced exit loses nothing: every record stays in the spool until it is acknowledged.
  agent::StopSignal& stop = ProcessStopSignal();
  HandleStopSignals(stop, 0, agent::kShipStopGrace);

  auto opened = agent::OpenSpool(spool_flags);
  if (!opened.ok()) return Fail(opened.status().message());
  auto console = agent::ConsoleClient::Create(agent::ConsoleClientOptions{
      .base_url = console_url, .token_file = token_file, .role = "spool",
      .ca_file = console_ca_file, .cluster_uid_file = cluster_uid_file});
  if (!console.ok()) return Fail(console.status().ToString());

  metrics::Registry registry;
  agent::DeclareShipperMetrics(registry);
  agent::Shipper shipper(agent::ShipperOptions{.stream = stream, .instance = instance}, **opened,
                         **console, SystemClock(), registry);
  auto health = agent::HealthServer::Start(
      health_listen, [&shipper] { return shipper.CheckReadiness(); }, registry);
  if (!health.ok()) return Fail(health.status().ToString(), kExitUsage);
  log::Logger log("agent");
  std::string host;
  std::uint16_t port = 0;
  (void)net::SplitHostPort(health_listen, host, port);
  log.Info("health server listening",
           {{"address", host + ":" + std::to_string((*health)->port())}});
  log.Info("shipping the spool",
           {{"console", agent::ConsoleOrigin(*net::ParseBaseUrl(console_url))},
            {"state_dir", spool_flags.state_dir},
            {"stream", stream},
            {"spool_id", (*opened)->Stats().spool_id}});
  shipper.Run(stop);
  log.Info("stopped");
  return 0;
}

int RunSpool(const std::vector<std::string>& args) {
  if (args.empty()) {
    (void)WriteStderr(std::string("uplink-agent: spool needs a command: stat, dump, append or ship\n") +
                      kUsage);
    return kExitUsage;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string& command = args.front();
  if (command == "stat") return RunSpoolStat(rest);
  if (command == "dump") return RunSpoolDump(rest);
  if (command == "append") return RunSpoolAppend(rest);
  if (command == "ship") return RunSpoolShip(rest);
  if (command == "-h" || command == "--help" || command == "help") {
    (void)WriteStderr(kUsage);
    return 0;
  }
  (void)WriteStderr("uplink-agent: unknown spool command '" + OneLineExcerpt(command, 64) +
                    "'\n" + kUsage);
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args.front() == "-h" || args.front() == "--help" || args.front() == "help") {
    (void)WriteStderr(kUsage);
    return args.empty() ? kExitUsage : 0;
  }
  std::string role = args.front();
  args.erase(args.begin());
  // The image build and `make images` check the binary runs in its image with this.
  if (role == "--version" || role == "version") {
    (void)WriteStdout("uplink-agent " UPLINK_VERSION "\n");
    return 0;
  }
  if (role == "inventory") return RunInventory(args);
  if (role == "node") return agent::node::RunNodeCommand(args);
  if (role == "cluster") return agent::cluster::RunClusterCommand(args);
  if (role == "experiments") return agent::experiments::RunExperimentsCommand(args);
  if (role == "workspace") return agent::workspace::RunWorkspaceCommand(args);
  if (role == "spool") return RunSpool(args);
  if (role == "check-kubectl") return agent::cluster::RunCheckKubectlCommand(args);
  (void)WriteStderr("uplink-agent: unknown role '" + OneLineExcerpt(role, 64) + "'\n" + kUsage);
  return kExitUsage;
}
