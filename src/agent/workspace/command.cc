#include "agent/workspace/command.h"

#include "agent/command_support.h"
#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/kube_system_uid.h"
#include "agent/workspace/controller.h"
#include "agent/workspace/guards.h"
#include "agent/workspace/ssh_tunnel.h"
#include "common/flags.h"
#include "common/log.h"
#include "kube/credentials.h"
#include "net/http.h"
#include "protocol/agent_api.h"
#include "protocol/ssh.h"
#include "protocol/workspace.h"

namespace uplink::agent::workspace {
namespace {

constexpr std::int64_t kMaxParallelism = 64;
constexpr std::int64_t kMaxCommandsAtOnce = 64;
constexpr std::int64_t kMaxSshChannels = 1024;

struct Common {
  std::string config_path;
  std::string kubeconfig;
  std::string console_url;
  std::string token_file;
  std::string console_ca_file;
  std::string log_level = "info";
};

void RegisterCommon(FlagSet& flags, Common& c) {
  flags.String("config", &c.config_path,
               "the execution configuration: execution.json as the console wrote it, or the "
               "chart's rendering of it");
  flags.String("kubeconfig", &c.kubeconfig, "kubeconfig file (default: the pod's service account)");
  flags.String("console", &c.console_url, "console URL, https://HOST[:PORT]");
  flags.String("token-file", &c.token_file,
               "file holding the offer's execution credential (exe_...), re-read before every "
               "call");
  flags.String("console-ca-file", &c.console_ca_file,
               "PEM CA bundle for the console's certificate (default: system store)");
  flags.String("log-level", &c.log_level, "debug, info, warn or error");
}

Result<ExecutionConfig> CheckCommon(const FlagSet& flags, const Common& c, const std::string& name) {
  if (!flags.positional().empty()) {
    // Not echoed: a credential pasted in the wrong place must not end up in a log.
    return InvalidArgumentError("unexpected argument: " + name + " takes only flags");
  }
  if (Status level = log::SetMinLevel(c.log_level); !level.ok()) {
    return InvalidArgumentError("--log-level: " + level.message());
  }
  if (c.config_path.empty()) {
    return InvalidArgumentError("--config is required: the execution configuration "
                                "(execution.json from the console, or the chart's)");
  }
  auto config = LoadExecutionConfig(c.config_path);
  if (!config.ok()) return InvalidArgumentError(config.status().message());
  return config;
}

Result<kube::KubeCredentials> Credentials(const Common& c) {
  auto credentials = c.kubeconfig.empty() ? kube::LoadInCluster() : kube::LoadKubeconfig(c.kubeconfig);
  if (!credentials.ok()) {
    return InvalidArgumentError((c.kubeconfig.empty() ? "in-cluster Kubernetes credentials: "
                                                      : "--kubeconfig: ") +
                                credentials.status().message());
  }
  return credentials;
}

kube::KubeClientOptions KubeOptions() {
  return kube::KubeClientOptions{
      .user_agent = protocol::AgentUserAgent(UPLINK_VERSION, protocol::kWorkspaceRole)};
}

ConsoleClientOptions ConsoleOptions(const Common& c) {
  return ConsoleClientOptions{.base_url = c.console_url,
                              .token_file = c.token_file,
                              .role = std::string(protocol::kWorkspaceRole),
                              .ca_file = c.console_ca_file};
}

std::string PodsPath(const ExecutionConfig& config) {
  return "/api/v1/namespaces/" + net::PercentEncode(config.namespace_name) + "/pods";
}

// --- drain ---------------------------------------------------------------------------------

int RunDrain(const std::vector<std::string>& args) {
  Common c;
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
  bool resume = false;
  FlagSet flags("uplink-agent workspace drain");
  RegisterCommon(flags, c);
  flags.Duration("timeout", &timeout, "how long to wait for the workspaces to be gone");
  flags.Bool("resume", &resume, "end a drain: the controller creates workspaces again");
  if (std::optional<int> exit_code = ParseFlagsOrExit(flags, args)) return *exit_code;
  auto config = CheckCommon(flags, c, "uplink-agent workspace drain");
  if (!config.ok()) return Fail(config.status().message(), kExitUsage);
  auto credentials = Credentials(c);
  if (!credentials.ok()) return Fail(credentials.status().message(), kExitUsage);
  auto kube = kube::KubeClient::Create(std::move(credentials).value(), KubeOptions());
  if (!kube.ok()) return Fail(kube.status().ToString());
  const std::string ns_path = "/api/v1/namespaces/" + net::PercentEncode(config->namespace_name);
  const std::string marker_path = ns_path + "/configmaps/" + std::string(kDrainMarker);

  if (resume) {
    Status deleted = (*kube)->DeleteObject(marker_path, std::nullopt);
    if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) return Fail(deleted.ToString());
    (void)WriteStdout("drain ended: the controller creates workspaces in " +
                      config->namespace_name + " again\n");
    return 0;
  }

  // 1. Stop accepting: the marker tells the running controller, which creates nothing more.
  json::object marker{{"apiVersion", "v1"},
                      {"kind", "ConfigMap"},
                      {"metadata", json::object{{"name", kDrainMarker},
                                                {"namespace", config->namespace_name}}},
                      {"data", json::object{{"since", FormatRfc3339(SystemClock().Now())}}}};
  auto created = (*kube)->CreateObject(ns_path + "/configmaps", marker);
  if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) {
    return Fail("could not mark the namespace as draining: " + created.status().ToString());
  }
  // And the console, when it can be reached, that this cluster takes no reservation now.
  if (!c.console_url.empty() && !c.token_file.empty()) {
    auto console = ConsoleClient::Create(ConsoleOptions(c));
    if (console.ok()) {
      auto uid = ReadKubeSystemUid(**kube);
      if (uid.ok()) (*console)->SetClusterUid(*uid);
      protocol::WorkspaceSync sync{.instance = DefaultInstanceName(),
                                   .version = UPLINK_VERSION,
                                   .namespace_name = config->namespace_name,
                                   .draining = true};
      ConsoleReply reply = (*console)->PostJson(protocol::kWorkspaceSyncPath,
                                                protocol::EncodeWorkspaceSync(sync));
      if (!reply.status.ok()) {
        (void)WriteStderr("uplink-agent: warning: the console was not told of the drain: " +
                          reply.status.message() + "\n");
      }
    }
  }
  // 2. Delete every workload in the namespace, ours or not, and 3. wait until none is left.
  const SteadyTime deadline = SystemClock().SteadyNow() + timeout;
  std::int64_t deleted = 0;
  std::set<std::string> asked;
  std::vector<json::value> left;
  while (true) {
    auto pods = (*kube)->ListObjects(PodsPath(*config));
    if (!pods.ok()) return Fail("listing the pods of " + config->namespace_name + ": " +
                                pods.status().ToString());
    left = std::move(pods).value();
    if (left.empty()) break;
    for (const json::value& pod : left) {
      const json::object& metadata = ObjectAt(pod.get_object(), "metadata");
      std::string name = StringAt(metadata, "name");
      // By UID: a controller that had not yet seen the marker may have made the pod again
      // under the same name, and that one must go too.
      std::string uid = StringAt(metadata, "uid");
      if (asked.contains(uid)) continue;
      Status removed = (*kube)->DeleteObject(PodsPath(*config) + "/" + net::PercentEncode(name),
                                             kTerminationGraceSeconds);
      if (removed.ok()) {
        asked.insert(uid);
        ++deleted;
      } else if (removed.code() != StatusCode::kNotFound) {
        (void)WriteStderr("uplink-agent: deleting pod " + name + ": " + removed.message() + "\n");
      }
    }
    if (SystemClock().SteadyNow() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // 4. Verify: nothing is left.
  if (!left.empty()) {
    std::string names;
    for (const json::value& pod : left) {
      names += " " + StringAt(ObjectAt(pod.get_object(), "metadata"), "name");
    }
    return Fail("drain incomplete after " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                " s: " + std::to_string(left.size()) + " pods are still in " +
                config->namespace_name + ":" + names +
                " (run drain again, or look at them with kubectl describe)");
  }
  (void)WriteStdout("drained: " + std::to_string(deleted) + " workspace pods deleted; no pod is "
                    "left in " + config->namespace_name +
                    "; the controller creates none until 'uplink-agent workspace drain --resume'\n");
  return 0;
}

// --- render-pod ------------------------------------------------------------------------------

int RunRenderPod(const std::vector<std::string>& args) {
  Common c;
  std::string node;
  std::int64_t gpus = 1;
  FlagSet flags("uplink-agent workspace render-pod");
  RegisterCommon(flags, c);
  flags.String("node", &node, "the approved node (default: the first)");
  flags.Int("gpus", &gpus, "GPUs of the reservation");
  if (std::optional<int> exit_code = ParseFlagsOrExit(flags, args)) return *exit_code;
  auto config = CheckCommon(flags, c, "uplink-agent workspace render-pod");
  if (!config.ok()) return Fail(config.status().message(), kExitUsage);
  const WallTime now = SystemClock().Now();
  DesiredReservation reservation{
      .id = "res_0000000000000000",
      .gpus = gpus,
      .node = node.empty() ? config->nodes.front() : node,
      .cpu_millis = config->cpu_millis_per_gpu * std::max<std::int64_t>(gpus, 1),
      .memory_bytes = config->memory_bytes_per_gpu * std::max<std::int64_t>(gpus, 1),
      .ephemeral_storage_bytes =
          config->ephemeral_storage_bytes_per_gpu * std::max<std::int64_t>(gpus, 1),
      .expires_at = now + std::chrono::seconds(config->max_lifetime_seconds),
      .desired = std::string(protocol::kDesiredRunning)};
  auto pod = BuildWorkspacePod(*config, reservation, now);
  if (!pod.ok()) return Fail(pod.status().message());
  return WriteStdout(ToJson(*pod) + "\n") ? 0 : 1;
}

}  // namespace

int RunWorkspaceCommand(const std::vector<std::string>& args) {
  if (!args.empty() && args.front() == "drain") {
    return RunDrain(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  // The Pod the controller would create, for a review of it (and the admission policy tests).
  if (!args.empty() && args.front() == "render-pod") {
    return RunRenderPod(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  Common c;
  ControllerOptions options{.instance = DefaultInstanceName()};
  std::string listen = "0.0.0.0:8081";
  std::chrono::milliseconds sync_wait = std::chrono::seconds(20);
  std::chrono::milliseconds busy_interval = options.busy_interval;
  std::int64_t parallelism = 8;
  std::int64_t max_commands = static_cast<std::int64_t>(options.max_commands);
  FlagSet flags("uplink-agent workspace");
  RegisterCommon(flags, c);
  flags.String("instance", &options.instance,
               "this controller's name in the console (default: $POD_NAME, else the host name)");
  flags.String("release", &options.release, "the Helm release it belongs to (shown in the console)");
  flags.String("listen", &listen, "HOST:PORT for /healthz, /readyz and /metrics");
  flags.Duration("sync-wait", &sync_wait, "how long the console may hold a sync (0s-55s)");
  flags.Duration("busy-interval", &busy_interval,
                 "time between syncs while pods start or events wait (100ms-10s)");
  flags.Duration("expiry-interval", &options.expiry_interval,
                 "how often the local expiry loop runs (1s-5m)");
  flags.Int("parallelism", &parallelism, "Kubernetes calls at once (1-64)");
  flags.Int("max-commands", &max_commands, "commands run at once (1-64)");
  bool ssh = false;
  SshPaths ssh_paths;
  std::int64_t ssh_channels = 64;
  flags.Bool("ssh", &ssh,
             "SSH access to workspaces: one tunnel to the console, sshd -i in the workspace per "
             "channel (the chart sets it from execution.sshEnabled)");
  flags.String("ssh-dir", &ssh_paths.dir,
               "the workspace's directory for its SSH host key and authorized_keys");
  flags.String("sshd-config", &ssh_paths.sshd_config, "the sshd configuration in the workspace image");
  flags.Int("ssh-max-channels", &ssh_channels, "SSH channels open at once (1-1024)");
  std::chrono::milliseconds ssh_report_interval = protocol::kCapabilityReportInterval;
  flags.Duration("ssh-report-interval", &ssh_report_interval,
                 "how often each running workspace's SSH capability is reported (1s-50s; the "
                 "console wants one younger than a minute)");
  if (std::optional<int> exit_code = ParseFlagsOrExit(flags, args)) return *exit_code;
  auto config = CheckCommon(flags, c, "uplink-agent workspace");
  if (!config.ok()) return Fail(config.status().message(), kExitUsage);
  if (Status console = CheckConsoleFlags(c.console_url, c.token_file); !console.ok()) {
    return Fail(console.message(), kExitUsage);
  }
  if (sync_wait < std::chrono::seconds(0) || sync_wait > std::chrono::seconds(55)) {
    return Fail("--sync-wait must be from 0s to 55s", kExitUsage);
  }
  if (busy_interval < std::chrono::milliseconds(100) || busy_interval > std::chrono::seconds(10)) {
    return Fail("--busy-interval must be from 100ms to 10s", kExitUsage);
  }
  if (options.expiry_interval < std::chrono::seconds(1) ||
      options.expiry_interval > std::chrono::minutes(5)) {
    return Fail("--expiry-interval must be from 1s to 5m", kExitUsage);
  }
  if (parallelism < 1 || parallelism > kMaxParallelism || max_commands < 1 ||
      max_commands > kMaxCommandsAtOnce) {
    return Fail("--parallelism and --max-commands must be from 1 to 64", kExitUsage);
  }
  if (ssh_channels < 1 || ssh_channels > kMaxSshChannels) {
    return Fail("--ssh-max-channels must be from 1 to 1024", kExitUsage);
  }
  if (ssh_report_interval < std::chrono::seconds(1) ||
      ssh_report_interval > std::chrono::seconds(50)) {
    return Fail("--ssh-report-interval must be from 1s to 50s", kExitUsage);
  }
  if (!ssh_paths.dir.starts_with("/") || !ssh_paths.sshd_config.starts_with("/")) {
    return Fail("--ssh-dir and --sshd-config must be absolute paths in the workspace", kExitUsage);
  }
  if (!config->enabled) {
    return Fail("execution is disabled in " + c.config_path +
                " (execution.enabled is false): nothing to run", kExitUsage);
  }
  options.config_path = c.config_path;
  options.sync_wait = std::chrono::duration_cast<std::chrono::seconds>(sync_wait);
  options.busy_interval = busy_interval;
  options.max_commands = static_cast<size_t>(max_commands);
  log::Logger log("agent.workspace");
  for (const std::string& key : config->ignored_keys) {
    log.Warn("the execution configuration has a key the controller does not know; ignored",
             {{"key", key}});
  }

  // Before any thread starts, so that only the signal thread takes SIGINT and SIGTERM. A
  // forced exit loses nothing: workspaces, their commands and results live in the cluster.
  StopSignal& stop = ProcessStopSignal();
  HandleStopSignals(stop, 0, kStopGrace);

  auto credentials = Credentials(c);
  if (!credentials.ok()) return Fail(credentials.status().message(), kExitUsage);
  auto pool = KubePool::Create(*credentials, KubeOptions(), static_cast<size_t>(parallelism));
  if (!pool.ok()) return Fail(pool.status().ToString());
  {
    auto lease = (*pool)->Acquire();
    // Refuses to run on a Kubernetes it was not built for, or without the guards.
    if (Status verified = VerifyCluster(*lease, *config); !verified.ok()) {
      return Fail("refusing to start: " + verified.message());
    }
  }
  std::string cluster_uid;
  {
    auto lease = (*pool)->Acquire();
    auto uid = ReadKubeSystemUid(*lease);
    if (!uid.ok()) {
      return Fail("refusing to start: the cluster's identity (the kube-system namespace's UID), "
                  "which every call to the console names, could not be read: " +
                  uid.status().message());
    }
    cluster_uid = *uid;
  }
  ConsoleClientOptions sync_options = ConsoleOptions(c);
  sync_options.request_timeout = SyncRequestTimeout(options.sync_wait);
  auto sync = ConsoleClient::Create(sync_options);
  auto output = ConsoleClient::Create(ConsoleOptions(c));
  for (const auto* client : {&sync, &output}) {
    if (!client->ok()) return Fail(client->status().ToString());
  }
  (*sync)->SetClusterUid(cluster_uid);
  (*output)->SetClusterUid(cluster_uid);

  metrics::Registry registry;
  DeclareWorkspaceMetrics(registry);
  const std::string namespace_name = config->namespace_name;
  std::unique_ptr<SshTunnel> tunnel;
  if (ssh) {
    DeclareSshMetrics(registry);
    tunnel = std::make_unique<SshTunnel>(
        SshTunnelOptions{.console = {.base_url = c.console_url,
                                     .ca_file = c.console_ca_file,
                                     .user_agent = protocol::AgentUserAgent(
                                         UPLINK_VERSION, protocol::kWorkspaceRole)},
                         .token_file = c.token_file,
                         .cluster_uid = cluster_uid,
                         .paths = ssh_paths,
                         .max_channels = static_cast<size_t>(ssh_channels),
                         .capability_interval = ssh_report_interval},
        (*pool)->ForExec(), registry);
    options.pods_observed = [&tunnel, namespace_name](const std::vector<ObservedPod>& pods) {
      std::vector<WorkspacePod> running;
      for (const ObservedPod& pod : pods) {
        if (pod.phase == "Running" && !pod.deleting &&
            protocol::IsReservationId(pod.reservation_id)) {
          running.push_back({namespace_name, pod.name, pod.reservation_id});
        }
      }
      tunnel->SetRunning(std::move(running));
    };
  }
  WorkspaceController controller(options, std::move(config).value(), **pool, **sync, **output,
                                 SystemClock(), registry);
  auto health = HealthServer::Start(
      listen, [&controller] { return controller.CheckReadiness(); }, registry);
  if (!health.ok()) return Fail(health.status().ToString(), kExitUsage);
  log.Info("workspace controller started",
           {{"console", ConsoleOrigin(*net::ParseBaseUrl(c.console_url))},
            {"namespace", namespace_name},
            {"instance", options.instance},
            {"cluster_uid", cluster_uid},
            {"ssh", ssh},
            {"health_port", static_cast<std::int64_t>((*health)->port())}});
  // Beside the controller, never in its way: SSH down or off leaves commands working.
  std::thread ssh_thread;
  if (tunnel) ssh_thread = std::thread([&] { tunnel->Run(stop); });
  controller.Run(stop);
  if (ssh_thread.joinable()) ssh_thread.join();
  log.Info("stopped");
  return 0;
}

}  // namespace uplink::agent::workspace
