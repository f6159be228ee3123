#include "agent/cluster/command.h"

#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/cluster/command_poller.h"
#include "agent/cluster/kubectl_runner.h"
#include "agent/cluster/snapshot.h"
#include "agent/command_support.h"
#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/kube_system_uid.h"
#include "agent/shipper.h"
#include "common/flags.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/thread_name.h"
#include "kube/client.h"
#include "kube/credentials.h"
#include "net/client.h"
#include "protocol/agent_api.h"
#include "protocol/cluster_snapshot.h"
#include "protocol/plans.h"

namespace uplink::agent::cluster {
namespace {

// A poll is held by the console for up to `wait`; the request may take that long and more.
constexpr std::chrono::seconds kPollSlack{15};
// Until the cluster's identity could be read, it is tried again this often; meanwhile calls
// go without it.
constexpr std::chrono::seconds kIdentityRetry{30};
// The first read happens before the role starts: a slow API server must not hold it long.
constexpr std::chrono::seconds kIdentityReadTimeout{10};

struct ClusterFlags {
  std::string console_url;
  std::string token_file;
  std::string console_ca_file;
  SpoolFlags spool;
  std::string stream;
  std::string instance = DefaultInstanceName();
  std::string listen = "0.0.0.0:8081";
  std::string kubectl = "/usr/local/bin/kubectl";
  std::string kubeconfig;
  std::string cache_dir = "/tmp/uplink-kubectl";
  std::int64_t max_concurrent = 4;
  std::chrono::milliseconds poll_wait = std::chrono::seconds(50);
  std::string log_level = "info";
};

void Register(FlagSet& flags, ClusterFlags& f) {
  RegisterConsoleFlags(flags, &f.console_url, &f.token_file, &f.console_ca_file);
  f.spool.Register(flags);
  RegisterStreamFlags(flags, &f.stream, &f.instance,
                      "the stream of the snapshots (default: cluster/INSTANCE)");
  flags.String("listen", &f.listen, "HOST:PORT for /healthz, /readyz and /metrics");
  flags.String("kubectl", &f.kubectl, "absolute path of the kubectl to run");
  flags.String("kubeconfig", &f.kubeconfig,
               "kubeconfig for kubectl (default: one written under --cache-dir from the pod's "
               "service account, which names the token file and never holds the token)");
  flags.String("cache-dir", &f.cache_dir,
               "writable directory for kubectl's HOME and discovery cache (an emptyDir)");
  flags.Int("max-concurrent", &f.max_concurrent, "console commands run at once (1-16)");
  flags.Duration("poll-wait", &f.poll_wait,
                 "how long the console may hold a poll for commands (0s-55s)");
  flags.String("log-level", &f.log_level, "debug, info, warn or error");
}

Status Check(const FlagSet& flags, ClusterFlags& f) {
  if (!flags.positional().empty()) {
    // Not echoed: a token pasted in the wrong place must not end up in a log.
    return InvalidArgumentError("unexpected argument: uplink-agent cluster takes only flags");
  }
  if (Status level = log::SetMinLevel(f.log_level); !level.ok()) {
    return InvalidArgumentError("--log-level: " + level.message());
  }
  UPLINK_RETURN_IF_ERROR(CheckConsoleFlags(f.console_url, f.token_file));
  UPLINK_RETURN_IF_ERROR(f.spool.Check());
  if (f.instance.empty()) return InvalidArgumentError("--instance is empty (or set POD_NAME)");
  UPLINK_RETURN_IF_ERROR(
      CheckStreamFlags(flags, f.stream, f.instance, "cluster/" + f.instance, "--instance"));
  if (f.max_concurrent < 1 || f.max_concurrent > 16) {
    return InvalidArgumentError("--max-concurrent must be from 1 to 16");
  }
  if (f.poll_wait < std::chrono::seconds(0) || f.poll_wait > std::chrono::seconds(55)) {
    return InvalidArgumentError("--poll-wait must be from 0s to 55s");
  }
  if (!std::filesystem::path(f.kubectl).is_absolute()) {
    return InvalidArgumentError("--kubectl must be an absolute path (no PATH lookup: a plugin "
                                "or a look-alike must never be run instead)");
  }
  if (!std::filesystem::path(f.cache_dir).is_absolute()) {
    return InvalidArgumentError("--cache-dir must be an absolute path");
  }
  return Status::Ok();
}

// The plan, shared by the collector thread and the shipper's replies.
class PlanHolder {
 public:
  ClusterPlan Get() const {
    std::lock_guard lock(mutex_);
    return plan_;
  }
  void TakeFrom(const json::value& reply) {
    Result<std::optional<ClusterPlan>> parsed = protocol::DecodeClusterPlan(reply);
    if (!parsed.ok()) {
      log_.Warn("ignoring the console's plan; keeping the current one",
                {{"error", parsed.status()}});
      return;
    }
    if (!parsed->has_value()) return;
    std::lock_guard lock(mutex_);
    if (plan_ == **parsed) return;
    plan_ = std::move(**parsed);
    log_.Info("collection plan changed",
              {{"interval_seconds", static_cast<std::int64_t>(plan_.interval.count())},
               {"commands", static_cast<std::int64_t>(plan_.commands.size())}});
  }

 private:
  mutable std::mutex mutex_;
  ClusterPlan plan_ = DefaultClusterPlan();
  log::Logger log_{"cluster"};
};

// Collects the plan into the spool until `stop`.
void CollectLoop(SnapshotCollector& collector, PlanHolder& plan, spool::Spool& spool,
                 StopSignal& stop, std::atomic<bool>& stopping) {
  log::Logger log("cluster");
  while (!stop.stopped()) {
    const ClusterPlan current = plan.Get();
    const protocol::ClusterSnapshot snapshot = collector.Collect(current, &stopping);
    if (stopping) break;
    Result<std::uint64_t> appended =
        spool.Append(json::serialize(protocol::EncodeClusterSnapshot(snapshot)));
    if (!appended.ok()) {
      log.Warn("could not spool a cluster snapshot; the next cycle tries again",
               {{"error", appended.status()}});
    }
    if (!stop.WaitFor(current.interval)) break;
  }
}

// Reads the kube-system UID with kubectl's own credentials and has every client name it on
// its calls. False when it could not (yet).
bool NameTheCluster(const std::string& kubeconfig, const std::vector<ConsoleClient*>& clients) {
  log::Logger log("cluster");
  auto credentials = kube::LoadKubeconfig(kubeconfig);
  auto kube = credentials.ok()
                  ? kube::KubeClient::Create(
                        std::move(credentials).value(),
                        kube::KubeClientOptions{
                            .user_agent = protocol::AgentUserAgent(UPLINK_VERSION, "cluster"),
                            .request_timeout = kIdentityReadTimeout})
                  : Result<std::unique_ptr<kube::KubeClient>>(credentials.status());
  Result<std::string> uid = kube.ok() ? ReadKubeSystemUid(**kube) : kube.status();
  if (!uid.ok()) {
    log.Warn("could not read the cluster's identity; calls to the console go without it until "
             "it can be read",
             {{"error", uid.status()},
              {"retry_in_s", static_cast<std::int64_t>(kIdentityRetry.count())}});
    return false;
  }
  for (ConsoleClient* client : clients) client->SetClusterUid(*uid);
  log.Info("calls to the console name the cluster", {{"cluster_uid", *uid}});
  return true;
}

}  // namespace

int RunClusterCommand(const std::vector<std::string>& args) {
  ClusterFlags f;
  FlagSet flags("uplink-agent cluster");
  Register(flags, f);
  if (std::optional<int> exit_code = ParseFlagsOrExit(flags, args)) return *exit_code;
  if (Status checked = Check(flags, f); !checked.ok()) return Fail(checked.message(), kExitUsage);

  // Before any thread starts, so that only the signal thread takes SIGINT and SIGTERM. A
  // forced exit loses nothing durable: snapshots stay in the spool until acknowledged, and
  // the console gives up on a command whose result never came.
  StopSignal& stop = ProcessStopSignal();
  HandleStopSignals(stop, 0, kShipStopGrace);

  if (f.kubeconfig.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(f.cache_dir, ignored);
    f.kubeconfig = f.cache_dir + "/kubeconfig";
    if (Status written = WriteInClusterKubeconfig(f.kubeconfig); !written.ok()) {
      return Fail(written.message() +
                  " (outside a pod, pass --kubeconfig with a kubeconfig for kubectl)");
    }
  }
  auto runner = KubectlRunner::Create(KubectlRunnerOptions{
      .kubectl_path = f.kubectl,
      .kubeconfig_path = f.kubeconfig,
      .cache_dir = f.cache_dir + "/home",
      .max_concurrent = static_cast<size_t>(f.max_concurrent) + 1});  // + the collector
  if (!runner.ok()) return Fail(runner.status().ToString(), kExitUsage);

  auto opened = OpenSpool(f.spool);
  if (!opened.ok()) return Fail(opened.status().message());
  spool::Spool& spool = **opened;
  const ConsoleClientOptions console_options{.base_url = f.console_url,
                                             .token_file = f.token_file,
                                             .role = "cluster",
                                             .ca_file = f.console_ca_file,
                                             .token_expiry = std::make_shared<TokenExpiry>()};
  ConsoleClientOptions poll_options = console_options;
  poll_options.request_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(f.poll_wait + kPollSlack);
  auto uploads = ConsoleClient::Create(console_options);
  auto polls = ConsoleClient::Create(poll_options);
  auto results = ConsoleClient::Create(console_options);
  for (const auto* client : {&uploads, &polls, &results}) {
    if (!client->ok()) return Fail(client->status().ToString());
  }

  metrics::Registry registry;
  DeclareShipperMetrics(registry);
  DeclareClusterMetrics(registry);
  DeclareCommandMetrics(registry);
  PlanHolder plan;
  Shipper shipper(ShipperOptions{.stream = f.stream,
                                 .instance = f.instance,
                                 .on_acknowledged = [&plan](const json::value& reply) {
                                   plan.TakeFrom(reply);
                                 }},
                  spool, **uploads, SystemClock(), registry);
  CommandPoller poller(
      CommandPollerOptions{.instance = f.instance,
                           .wait = std::chrono::duration_cast<std::chrono::seconds>(f.poll_wait),
                           .max_concurrent = static_cast<size_t>(f.max_concurrent)},
      **polls, **results, **runner, SystemClock(), registry);
  SnapshotCollector collector(**runner, SystemClock(), registry);
  auto health = HealthServer::Start(
      f.listen,
      [&shipper, &poller] {
        Readiness commands = poller.CheckReadiness();
        if (!commands.ready) return commands;
        return shipper.CheckReadiness();
      },
      registry);
  if (!health.ok()) return Fail(health.status().ToString(), kExitUsage);
  log::Logger("agent").Info(
      "cluster role started",
      {{"console", ConsoleOrigin(*net::ParseBaseUrl(f.console_url))},
       {"stream", f.stream},
       {"instance", f.instance},
       {"health_port", static_cast<std::int64_t>((*health)->port())},
       {"state_dir", f.spool.state_dir},
       {"spool_id", spool.Stats().spool_id}});

  // Named before the first call when Kubernetes answers; otherwise tried again beside the
  // roles (docs/protocol.md, "Cluster identity").
  const std::vector<ConsoleClient*> clients{uploads->get(), polls->get(), results->get()};
  const bool named = NameTheCluster(f.kubeconfig, clients);
  std::thread naming([&] {
    while (!named && stop.WaitFor(kIdentityRetry)) {
      if (NameTheCluster(f.kubeconfig, clients)) return;
    }
  });
  std::atomic<bool> stopping{false};
  std::thread collecting([&] {
    NameThisThread("plan-collector");
    CollectLoop(collector, plan, spool, stop, stopping);
  });
  std::thread polling([&] {
    NameThisThread("command-poller");
    poller.Run(stop);
  });
  std::thread stop_watch([&] {
    while (stop.WaitFor(std::chrono::hours(1))) {
    }
    stopping = true;  // a snapshot under way stops; the shipper makes its last attempt
  });
  shipper.Run(stop);
  stop_watch.join();
  naming.join();
  collecting.join();
  polling.join();
  log::Logger("agent").Info("stopped");
  return 0;
}

}  // namespace uplink::agent::cluster
