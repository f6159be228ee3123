// uplink-console: `init` creates a data directory and prints the first API key; `serve`
// runs the HTTPS API until SIGINT or SIGTERM.
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/cpus.h"
#include "common/flags.h"
#include "common/log.h"
#include "console/api/console_api.h"
#include "console/remote_write/forwarder.h"
#include "console/replies.h"
#include "console/setup.h"
#include "net/server.h"
#include "protocol/cluster_snapshot.h"
#include "protocol/commands.h"
#include "protocol/inventory.h"
#include "protocol/workspace.h"

namespace uplink::console {
namespace {

const log::Logger& Log() {
  static const log::Logger logger("console");
  return logger;
}

int Fail(const Status& status) {
  Log().Error("uplink-console failed", {{"error", status}});
  return 1;
}

void AddStoreFlags(FlagSet& flags, StoreLocation& store) {
  flags.String("store", &store.url,
               "postgres://HOST/DB?user=U: a PostgreSQL database several replicas share "
               "(default: SQLite in --data-dir)");
  flags.String("store-password-file", &store.password_file,
               "file holding the PostgreSQL password (else PGPASSWORD or PGPASSFILE)");
}

int Init(const std::vector<std::string>& args) {
  std::string data_dir;
  std::string admin_email = "admin@localhost";
  StoreLocation store;
  FlagSet flags("uplink-console init");
  flags.String("data-dir", &data_dir, "directory for the console's database (created, 0700)");
  flags.String("admin-email", &admin_email, "email of the first (admin) user");
  AddStoreFlags(flags, store);
  if (Status parsed = flags.Parse(args); !parsed.ok()) return Fail(parsed);
  auto key = InitializeConsole(data_dir, admin_email, SystemClock(), store);
  if (!key.ok()) return Fail(key.status());
  if (store.postgres()) {
    // Made now, not at the first serve: every replica needs this same key (see LoadKeyFile).
    if (auto made = LoadOrCreateKeyFile(TwoFactorKeyPath(data_dir)); !made.ok()) {
      return Fail(made.status());
    }
  }
  // stdout carries the key and nothing else, so that scripts can capture it.
  std::cout << key->Reveal() << std::endl;
  Log().Info("console initialised; the API key above is shown only once",
             {{"data_dir", data_dir}, {"admin_email", admin_email}});
  return 0;
}

// A failure budget of `per_window` per `window`, refilled evenly, all of it usable at once.
RateLimit FailureBudget(std::int64_t per_window, std::chrono::seconds window) {
  return RateLimit{static_cast<double>(per_window),
                   static_cast<double>(per_window) / static_cast<double>(window.count())};
}

Status CheckFailureBudget(std::string_view flag, std::int64_t value) {
  constexpr std::int64_t kMaxBudget = 1'000'000;
  if (value < 1 || value > kMaxBudget) {
    return InvalidArgumentError("--" + std::string(flag) + " must be a whole number from 1 to " +
                                std::to_string(kMaxBudget));
  }
  return Status::Ok();
}

// Descriptors kept for what is not a connection: the store, the remote write queue, logs.
constexpr std::int64_t kReservedDescriptors = 256;

// Raises the soft limit on open files to the hard limit (sockets are files: a console with
// thousands of agents each holding a long poll needs one per agent) and returns the soft limit
// then in force.
std::int64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return static_cast<std::int64_t>(limit.rlim_cur);
}

int Serve(const std::vector<std::string>& args) {
  std::string data_dir;
  StoreLocation store_location;
  std::string listen = "127.0.0.1:8443";
  std::string tls_cert;
  std::string tls_key;
  std::string log_level = "info";
  ConsoleOptions options;
  std::chrono::milliseconds stale_after = options.thresholds.stale_after;
  std::chrono::milliseconds offline_after = options.thresholds.offline_after;
  std::chrono::milliseconds active_window = options.active_window;
  std::chrono::milliseconds report_interval = options.report_interval;
  // Each flag sets both a bucket's burst and its refill over the bucket's window.
  auto failures_per_address = static_cast<std::int64_t>(options.rate_limits.per_address.burst);
  auto failures_per_prefix = static_cast<std::int64_t>(options.rate_limits.per_prefix.burst);
  auto login_failures_per_email = static_cast<std::int64_t>(options.rate_limits.per_email.burst);
  auto max_upload_bytes = static_cast<std::int64_t>(options.max_upload_bytes);
  std::chrono::milliseconds record_retention = options.record_retention;
  std::chrono::milliseconds sample_raw_retention = options.sample_raw_retention;
  std::chrono::milliseconds sample_retention = options.sample_retention;
  std::chrono::milliseconds command_timeout = options.command_timeout;
  std::int64_t ssh_channels_per_grant = options.ssh_channels_per_grant;
  std::int64_t ssh_channels_per_reservation = options.ssh_channels_per_reservation;
  std::chrono::milliseconds ssh_idle_timeout = options.ssh_idle_timeout;
  std::string agent_image;
  std::string agent_cluster_image;
  std::string workspace_image;
  std::string workspace_console_cidrs;
  std::int64_t max_connections = 0;
  remote_write::RemoteWriteOptions remote_write;
  auto remote_write_queue_bytes = static_cast<std::int64_t>(remote_write.queue_max_bytes);
  FlagSet flags("uplink-console serve");
  flags.String("data-dir", &data_dir, "directory made by \"uplink-console init\"");
  AddStoreFlags(flags, store_location);
  flags.String("listen", &listen, "HOST:PORT to serve on");
  flags.String("tls-cert", &tls_cert, "PEM certificate chain (leaf first)");
  flags.String("tls-key", &tls_key, "PEM private key");
  flags.Duration("stale-after", &stale_after, "an agent silent this long is stale");
  flags.Duration("offline-after", &offline_after, "an agent silent this long is offline");
  flags.Duration("active-window", &active_window,
                 "a connection with a report this recent is active, else stale");
  flags.Duration("report-interval", &report_interval, "report interval told to agents (10s-1h)");
  flags.Int("auth-failures-per-address", &failures_per_address,
            "failed credentials or sign-ins per source address per minute (and burst)");
  flags.Int("auth-failures-per-prefix", &failures_per_prefix,
            "failed verifications per credential lookup prefix per minute (and burst)");
  flags.Int("login-failures-per-email", &login_failures_per_email,
            "failed sign-ins per email per 15 minutes (and burst)");
  flags.Int("max-upload-bytes", &max_upload_bytes,
            "largest agent spool upload, compressed and decompressed (2 MiB-64 MiB)");
  flags.Duration("record-retention", &record_retention,
                 "uploaded records are deleted this long after they arrive (1h or more)");
  flags.Duration("sample-raw-retention", &sample_raw_retention,
                 "node samples are kept raw this long after they were collected (1h or more)");
  flags.Duration("sample-retention", &sample_retention,
                 "node samples' 5-minute rollups are kept this long (at least the raw retention)");
  flags.Duration("command-timeout", &command_timeout,
                 "how long a kubectl command from a user waits for the agent's result (5s-60s)");
  flags.String("agent-image", &agent_image,
               "the agent image install commands pin, REPOSITORY@sha256:DIGEST (make images "
               "prints it)");
  flags.String("agent-cluster-image", &agent_cluster_image,
               "the cluster role's image install commands pin, REPOSITORY@sha256:DIGEST");
  flags.String("workspace-image", &workspace_image,
               "the workspace image execution.json pins, REPOSITORY@sha256:DIGEST "
               "(scripts/workspace-image.sh builds one)");
  flags.String("workspace-console-cidrs", &workspace_console_cidrs,
               "this console's addresses as workspace controllers reach them, comma-separated "
               "CIDRs, written into execution.json for their egress policy");
  flags.Int("ssh-channels-per-grant", &ssh_channels_per_grant,
            "SSH channels one grant may have open at once (1-1024)");
  flags.Int("ssh-channels-per-reservation", &ssh_channels_per_reservation,
            "SSH channels one reservation may have open at once, all its grants together "
            "(1-1024)");
  flags.Duration("ssh-idle-timeout", &ssh_idle_timeout,
                 "an SSH channel that carried no byte either way this long is closed (1m-24h)");
  flags.Int("max-connections", &max_connections,
            "connections served at once, each agent's long poll one (default: the open-file "
            "limit, raised to its hard limit, less 256)");
  flags.String("remote-write-url", &remote_write.url,
               "forward node and GPU samples with Prometheus remote write to this URL, "
               "http(s)://HOST[:PORT]/PATH");
  flags.String("remote-write-ca-file", &remote_write.ca_file,
               "PEM CA bundle to trust for an https remote write URL (default: the system's)");
  flags.String("remote-write-bearer-token-file", &remote_write.bearer_token_file,
               "file holding the remote write bearer token, read before every request");
  flags.String("remote-write-username", &remote_write.username,
               "remote write user for HTTP basic authentication");
  flags.String("remote-write-password-file", &remote_write.password_file,
               "file holding the remote write password, read before every request");
  flags.Int("remote-write-queue-bytes", &remote_write_queue_bytes,
            "size cap of the remote write queue on disk (DATA_DIR/remote-write); the oldest "
            "samples are dropped beyond it");
  flags.String("log-level", &log_level, "debug, info, warn or error");
  if (Status parsed = flags.Parse(args); !parsed.ok()) return Fail(parsed);
  for (auto [flag, text, image] :
       {std::tuple{"--agent-image", &agent_image, &options.agent_images.agent},
        std::tuple{"--agent-cluster-image", &agent_cluster_image, &options.agent_images.cluster},
        std::tuple{"--workspace-image", &workspace_image, &options.agent_images.workspace}}) {
    if (text->empty()) continue;
    auto parsed = ParseImageReference(*text);
    if (!parsed.ok()) return Fail(parsed.status().WithContext(flag));
    *image = std::move(parsed).value();
  }
  for (size_t start = 0; start < workspace_console_cidrs.size();) {
    size_t comma = std::min(workspace_console_cidrs.find(',', start), workspace_console_cidrs.size());
    std::string cidr = workspace_console_cidrs.substr(start, comma - start);
    start = comma + 1;
    if (!protocol::IsCidr(cidr)) {
      return Fail(InvalidArgumentError("--workspace-console-cidrs: \"" + std::string(cidr) +
                                       "\" is not a network in CIDR notation (10.0.0.0/8)"));
    }
    options.workspace_console_cidrs.push_back(std::move(cidr));
  }
  if (Status level = log::SetMinLevel(log_level); !level.ok()) return Fail(level);

  if (report_interval < std::chrono::seconds(10) || report_interval > std::chrono::hours(1)) {
    return Fail(InvalidArgumentError("--report-interval must be between 10s and 1h"));
  }
  if (stale_after <= std::chrono::milliseconds(0) || offline_after <= stale_after) {
    return Fail(InvalidArgumentError(
        "--offline-after must be longer than --stale-after, and both positive"));
  }
  if (active_window < std::chrono::seconds(1)) {
    return Fail(InvalidArgumentError("--active-window must be at least 1s"));
  }
  for (auto [flag, value] : {std::pair{"auth-failures-per-address", failures_per_address},
                             std::pair{"auth-failures-per-prefix", failures_per_prefix},
                             std::pair{"login-failures-per-email", login_failures_per_email}}) {
    if (Status checked = CheckFailureBudget(flag, value); !checked.ok()) return Fail(checked);
  }
  // At least one record of the largest size (1 MiB) with its envelope must fit; the upper
  // bound caps what one request makes the console hold in memory.
  constexpr std::int64_t kMinUploadBytes = 2 << 20;
  constexpr std::int64_t kMaxUploadBytes = 64 << 20;
  if (max_upload_bytes < kMinUploadBytes || max_upload_bytes > kMaxUploadBytes) {
    return Fail(InvalidArgumentError("--max-upload-bytes must be from " +
                                     std::to_string(kMinUploadBytes) + " to " +
                                     std::to_string(kMaxUploadBytes)));
  }
  if (record_retention < std::chrono::hours(1)) {
    return Fail(InvalidArgumentError("--record-retention must be at least 1h"));
  }
  if (sample_raw_retention < std::chrono::hours(1)) {
    return Fail(InvalidArgumentError("--sample-raw-retention must be at least 1h"));
  }
  if (sample_retention < sample_raw_retention) {
    return Fail(InvalidArgumentError(
        "--sample-retention must be at least --sample-raw-retention: rollups are made from the "
        "raw samples and kept after them"));
  }
  options.sample_raw_retention =
      std::chrono::duration_cast<std::chrono::seconds>(sample_raw_retention);
  options.sample_retention = std::chrono::duration_cast<std::chrono::seconds>(sample_retention);
  if (command_timeout < std::chrono::seconds(5) || command_timeout > std::chrono::seconds(60)) {
    return Fail(InvalidArgumentError("--command-timeout must be from 5s to 60s"));
  }
  options.command_timeout = std::chrono::duration_cast<std::chrono::seconds>(command_timeout);
  if (ssh_channels_per_grant < 1 || ssh_channels_per_grant > 1024) {
    return Fail(InvalidArgumentError("--ssh-channels-per-grant must be from 1 to 1024"));
  }
  if (ssh_idle_timeout < std::chrono::minutes(1) || ssh_idle_timeout > std::chrono::hours(24)) {
    return Fail(InvalidArgumentError("--ssh-idle-timeout must be from 1m to 24h"));
  }
  options.ssh_channels_per_grant = ssh_channels_per_grant;
  if (ssh_channels_per_reservation < 1 || ssh_channels_per_reservation > 1024) {
    return Fail(InvalidArgumentError("--ssh-channels-per-reservation must be from 1 to 1024"));
  }
  options.ssh_channels_per_reservation = ssh_channels_per_reservation;
  options.ssh_idle_timeout = std::chrono::duration_cast<std::chrono::seconds>(ssh_idle_timeout);
  options.max_upload_bytes = static_cast<size_t>(max_upload_bytes);
  options.record_retention = std::chrono::duration_cast<std::chrono::seconds>(record_retention);
  options.thresholds = {stale_after, offline_after};
  options.active_window = active_window;
  options.report_interval = std::chrono::duration_cast<std::chrono::seconds>(report_interval);
  options.rate_limits.per_address = FailureBudget(failures_per_address, std::chrono::minutes(1));
  options.rate_limits.per_prefix = FailureBudget(failures_per_prefix, std::chrono::minutes(1));
  options.rate_limits.per_email =
      FailureBudget(login_failures_per_email, std::chrono::minutes(15));

  const std::int64_t open_files = RaiseOpenFileLimit();
  const std::int64_t most_connections =
      std::max<std::int64_t>(open_files - kReservedDescriptors, 1);
  if (max_connections == 0) max_connections = most_connections;
  if (max_connections < 1 || max_connections > most_connections) {
    return Fail(InvalidArgumentError(
        "--max-connections must be from 1 to " + std::to_string(most_connections) +
        " (the open-file limit, " + std::to_string(open_files) +
        ", less 256); raise the limit (ulimit -n, LimitNOFILE=) for more"));
  }
  if (flags.WasSet("remote-write-url") && remote_write.url.empty()) {
    return Fail(InvalidArgumentError("--remote-write-url is empty"));
  }
  if (remote_write.url.empty() &&
      (!remote_write.ca_file.empty() || !remote_write.bearer_token_file.empty() ||
       !remote_write.username.empty() || !remote_write.password_file.empty())) {
    return Fail(InvalidArgumentError(
        "the --remote-write-* options need --remote-write-url, the TSDB to write to"));
  }
  remote_write.queue_max_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(
      remote_write_queue_bytes, 0));

  std::string host;
  std::uint16_t port = 0;
  if (Status split = net::SplitHostPort(listen, host, port); !split.ok()) {
    return Fail(split.WithContext("--listen"));
  }
  net::ServerOptions server_options;
  server_options.listen = listen;
  // The upper bound, for the agent's report, uploads or command results; every other route
  // gets far less before its body is read.
  server_options.max_body_bytes = std::max(
      {protocol::kMaxReportBytes, options.max_upload_bytes, protocol::kMaxCommandResultBytes});
  server_options.body_limit_for = [max_upload = options.max_upload_bytes](
                                      const net::Request& head) {
    return RouteBodyLimit(head, max_upload);
  };
  server_options.refusal = ServerRefusalResponse;
  server_options.max_connections = static_cast<size_t>(max_connections);
  // A thread per usable CPU: password hashes run on threads of their own, but handlers still
  // wait on the store (a lookup's round trip on PostgreSQL, a commit), so never fewer than
  // two. More threads than CPUs only switch between each other: on one core, alternating
  // runs gave 5,280-5,433 uploads/s with two and 4,177-4,521 with four (docs/architecture.md).
  server_options.threads = std::clamp(UsableCpus(), 2, 16);
  if (tls_cert.empty() != tls_key.empty()) {
    return Fail(InvalidArgumentError("pass both --tls-cert and --tls-key, or neither"));
  }
  if (!tls_cert.empty()) {
    auto tls = net::LoadTlsServerConfig(tls_cert, tls_key);
    if (!tls.ok()) return Fail(tls.status());
    server_options.tls = std::move(tls).value();
  } else if (!net::IsLoopbackHost(host)) {
    return Fail(InvalidArgumentError(
        "plain HTTP is allowed only on a loopback address, and " + host +
        " is not one; pass --tls-cert and --tls-key to serve HTTPS"));
  } else {
    // A browser does not send a Secure cookie over plain HTTP, even on loopback.
    options.secure_cookies = false;
  }

  auto store = OpenConsoleStore(data_dir, store_location, server_options.threads);
  if (!store.ok()) return Fail(store.status());
  // SQLite: one server per database file. PostgreSQL: replicas share the database.
  std::unique_ptr<DataDirectoryLock> lock;
  if (!store_location.postgres()) {
    auto locked = LockDataDirectory(data_dir);
    if (!locked.ok()) return Fail(locked.status());
    lock = std::move(locked).value();
  }
  auto two_factor_key = store_location.postgres() ? LoadKeyFile(TwoFactorKeyPath(data_dir))
                                                  : LoadOrCreateKeyFile(TwoFactorKeyPath(data_dir));
  if (!two_factor_key.ok()) return Fail(two_factor_key.status());
  options.two_factor_key = std::move(two_factor_key).value();
  std::unique_ptr<remote_write::RemoteWriteForwarder> forwarder;
  if (!remote_write.url.empty()) {
    remote_write.queue_dir = data_dir + "/remote-write";
    auto started = remote_write::RemoteWriteForwarder::Start(remote_write, SystemClock());
    if (!started.ok()) return Fail(started.status());
    forwarder = std::move(started).value();
    options.upload_sink = forwarder.get();
  }
  // PostgreSQL: the other replicas' messages, before the first request is served.
  std::unique_ptr<ReplicaLink> replicas;
  if (store_location.postgres()) {
    auto joined = JoinReplicas(store_location);
    if (!joined.ok()) return Fail(joined.status());
    replicas = std::move(joined).value();
    options.replica_bus = replicas->bus.get();
    options.command_claims = replicas->claims.get();
    Log().Info("joined the replicas on the --store database",
               {{"replica_id", replicas->bus->replica_id()}});
  }
  ConsoleApi api(**store, SystemClock(), options);

  // Block the stop signals before the server starts its threads, so that only sigwait below
  // receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server_options.on_request_lost = [&api](std::string_view reason) {
    api.CountLostRequest(reason);
  };
  server_options.on_connection = [&api](std::string_view event) { api.CountConnection(event); };
  auto server = net::HttpServer::Start(server_options, api.router().AsHandler());
  if (!server.ok()) return Fail(server.status());
  std::string url_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  std::string url = std::string(server_options.tls ? "https" : "http") + "://" + url_host + ":" +
                    std::to_string((*server)->port());
  Log().Info("serving", {{"url", url},
                         {"data_dir", data_dir},
                         {"store", store_location.postgres() ? "postgres" : "sqlite"}});

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  Log().Info("shutting down", {{"signal", signal_number == SIGINT ? "SIGINT" : "SIGTERM"}});
  (*server)->Stop();
  api.FinishStoreWrites();
  // What waits in memory goes to the queue's files, sent after the next start.
  if (forwarder) forwarder->Stop();
  return 0;
}

constexpr const char* kUsage =
    "usage: uplink-console init --data-dir DIR [--admin-email E]\n"
    "                           [--store postgres://HOST/DB?user=U [--store-password-file F]]\n"
    "       uplink-console serve --data-dir DIR --listen HOST:PORT [--tls-cert F --tls-key F]\n"
    "                            [--store postgres://HOST/DB?user=U [--store-password-file F]]\n"
    "                            [--active-window 10m] [--stale-after 90s] [--offline-after 150s]\n"
    "                            [--report-interval 60s] [--auth-failures-per-address 30]\n"
    "                            [--auth-failures-per-prefix 10] [--login-failures-per-email 10]\n"
    "                            [--max-upload-bytes 8388608] [--record-retention 168h]\n"
    "                            [--sample-raw-retention 48h] [--sample-retention 168h]\n"
    "                            [--agent-image REPO@sha256:D] [--agent-cluster-image REPO@sha256:D]\n"
    "                            [--workspace-image REPO@sha256:D] [--workspace-console-cidrs CIDR,...]\n"
    "                            [--ssh-channels-per-grant 4] [--ssh-channels-per-reservation 16]\n"
    "                            [--ssh-idle-timeout 30m]\n"
    "                            [--max-connections N] [--remote-write-url URL\n"
    "                             [--remote-write-bearer-token-file F | --remote-write-username U\n"
    "                              --remote-write-password-file F] [--remote-write-ca-file F]\n"
    "                             [--remote-write-queue-bytes 268435456]]\n"
    "                            [--log-level info]\n";

}  // namespace
}  // namespace uplink::console

int main(int argc, char** argv) {
  using namespace uplink::console;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string command = args.front();
  args.erase(args.begin());
  if (command == "init") return Init(args);
  if (command == "serve") return Serve(args);
  if (command == "--version" || command == "version") {
    std::puts("uplink-console " UPLINK_VERSION);
    return 0;
  }
  std::fputs(kUsage, stderr);
  return 2;
}
