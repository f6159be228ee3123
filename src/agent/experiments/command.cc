#include "agent/experiments/command.h"

#include <sys/stat.h>

#include <cerrno>
#include <memory>
#include <thread>

#include "agent/command_support.h"
#include "agent/console_client.h"
#include "agent/experiments/mlflow_file_store.h"
#include "agent/experiments/mlflow_rest.h"
#include "agent/experiments/role.h"
#include "agent/experiments/wandb_scanner.h"
#include "agent/health.h"
#include "agent/shipper.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/thread_name.h"
#include "net/client.h"

namespace uplink::agent::experiments {
namespace {

// --once: cycles until nothing is left, at most this many (a source that keeps changing
// must not keep a one-shot run alive).
constexpr int kMaxOnceCycles = 100'000;
constexpr std::chrono::seconds kOnceDrainBudget{120};

struct ExperimentsFlags {
  std::string mlflow_dir;
  MlflowRestOptions mlflow_rest;
  std::string wandb_dir;
  std::chrono::milliseconds wandb_stale_after = std::chrono::minutes(10);
  bool enable_mlflow = true;
  bool enable_wandb = true;
  std::string console_url;
  std::string token_file;
  std::string console_ca_file;
  std::string state_dir;
  SpoolFlags spool;  // its directory is state_dir/spool
  std::string stream;
  std::string instance = DefaultInstanceName();
  std::chrono::milliseconds interval = std::chrono::seconds(30);
  std::int64_t max_runs_per_cycle = 200;
  std::int64_t max_read_bytes = 32 << 20;
  std::int64_t max_upload_bytes = 1 << 20;
  bool once = false;
  std::string listen = "0.0.0.0:8081";
  std::string log_level = "info";
};

void Register(FlagSet& flags, ExperimentsFlags& f) {
  flags.String("mlflow-dir", &f.mlflow_dir,
               "an MLflow file store to scan (the mlruns/ folder `mlflow ui --backend-store-uri` "
               "reads)");
  flags.String("mlflow-uri", &f.mlflow_rest.base_url,
               "an MLflow tracking server to scan, http(s)://HOST[:PORT][/PATH] (REST API 2.0)");
  flags.String("mlflow-token-file", &f.mlflow_rest.token_file,
               "a file holding the tracking server's bearer token (re-read every scan)");
  flags.String("mlflow-basic-auth-file", &f.mlflow_rest.basic_auth_file,
               "a file holding USER:PASSWORD for the tracking server's basic auth");
  flags.String("mlflow-ca-file", &f.mlflow_rest.ca_file,
               "PEM CA bundle that signed the tracking server's certificate");
  flags.String("wandb-dir", &f.wandb_dir,
               "a Weights & Biases folder to scan (the wandb/ folder holding run-*/ and "
               "offline-run-*/)");
  flags.Duration("wandb-stale-after", &f.wandb_stale_after,
                 "a W&B run without an exit record whose log has not grown for this long "
                 "crashed (1m-24h)");
  flags.Bool("enable-mlflow", &f.enable_mlflow,
             "scan MLflow; false turns the MLflow scanner off whatever else is set");
  flags.Bool("enable-wandb", &f.enable_wandb,
             "scan W&B; false turns the W&B scanner off whatever else is set");
  RegisterConsoleFlags(flags, &f.console_url, &f.token_file, &f.console_ca_file,
                       "console URL, https://HOST[:PORT]; without it, --once prints the records");
  flags.String("state-dir", &f.state_dir,
               "directory for the cursor (the file cursor) and the upload spool (spool/); created "
               "when missing");
  flags.Int("max-bytes", &f.spool.max_bytes,
            "the spool's size cap in bytes; at the cap the oldest records are dropped");
  RegisterStreamFlags(flags, &f.stream, &f.instance,
                      "the stream of the runs (default: experiments/INSTANCE)");
  flags.Duration("interval", &f.interval, "time between scans (10s-1h)");
  flags.Int("max-runs-per-cycle", &f.max_runs_per_cycle,
            "changed runs read per scan; the rest wait for the next (1-100000)");
  flags.Int("max-read-bytes", &f.max_read_bytes,
            "bytes of metric files and W&B logs read per scan (1 MiB-1 GiB)");
  flags.Int("max-upload-bytes", &f.max_upload_bytes,
            "payload bytes per upload to the console (64 KiB-8 MiB)");
  flags.Bool("once", &f.once,
             "scan until nothing is left, deliver it and exit (0: all delivered); without "
             "--console print the records as JSON lines instead");
  flags.String("listen", &f.listen, "HOST:PORT for /healthz, /readyz and /metrics");
  flags.String("log-level", &f.log_level, "debug, info, warn or error");
}

Status Check(const FlagSet& flags, ExperimentsFlags& f) {
  if (!flags.positional().empty()) {
    // Not echoed: a token pasted in the wrong place must not end up in a log.
    return InvalidArgumentError("unexpected argument: uplink-agent experiments takes only flags");
  }
  if (Status level = log::SetMinLevel(f.log_level); !level.ok()) {
    return InvalidArgumentError("--log-level: " + level.message());
  }
  if (f.mlflow_dir.empty() && f.mlflow_rest.base_url.empty() && f.wandb_dir.empty()) {
    return InvalidArgumentError(
        "nothing to scan: pass --mlflow-uri URL or --mlflow-dir DIR, and/or --wandb-dir DIR");
  }
  if (!f.mlflow_dir.empty() && !f.mlflow_rest.base_url.empty()) {
    return InvalidArgumentError(
        "--mlflow-uri and --mlflow-dir both given: scan the tracking server or its file store, "
        "not both (the same runs would be reported twice)");
  }
  if (!f.mlflow_rest.base_url.empty()) UPLINK_RETURN_IF_ERROR(ValidateMlflowRestOptions(f.mlflow_rest));
  if (f.interval < std::chrono::seconds(10) || f.interval > std::chrono::hours(1)) {
    return InvalidArgumentError("--interval must be from 10s to 1h");
  }
  if (f.wandb_stale_after < std::chrono::minutes(1) || f.wandb_stale_after > std::chrono::hours(24)) {
    return InvalidArgumentError("--wandb-stale-after must be from 1m to 24h");
  }
  if (f.max_runs_per_cycle < 1 || f.max_runs_per_cycle > 100'000) {
    return InvalidArgumentError("--max-runs-per-cycle must be from 1 to 100000");
  }
  if (f.max_read_bytes < (1 << 20) || f.max_read_bytes > (1ll << 30)) {
    return InvalidArgumentError("--max-read-bytes must be from 1 MiB to 1 GiB");
  }
  if (f.max_upload_bytes < (64 << 10) || f.max_upload_bytes > (8 << 20)) {
    return InvalidArgumentError("--max-upload-bytes must be from 64 KiB to 8 MiB");
  }
  if (f.console_url.empty()) {
    if (!f.once) {
      return InvalidArgumentError("--console is required (or pass --once to print one scan)");
    }
    for (const char* only_shipping : {"token-file", "state-dir", "stream", "max-bytes"}) {
      if (flags.WasSet(only_shipping)) {
        return InvalidArgumentError(std::string("--") + only_shipping +
                                    " is for shipping to a console: pass --console too");
      }
    }
    return Status::Ok();
  }
  UPLINK_RETURN_IF_ERROR(CheckConsoleFlags(f.console_url, f.token_file));
  if (f.state_dir.empty()) {
    return InvalidArgumentError("--state-dir is required: where the cursor and the spool are "
                                "kept, e.g. --state-dir /var/lib/uplink/experiments");
  }
  f.spool.state_dir = f.state_dir + "/spool";
  UPLINK_RETURN_IF_ERROR(f.spool.Check());
  if (f.instance.empty()) return InvalidArgumentError("--instance is empty (or set POD_NAME)");
  return CheckStreamFlags(flags, f.stream, f.instance, "experiments/" + f.instance,
                          "--instance");
}

Result<std::vector<std::unique_ptr<Scanner>>> MakeScanners(const ExperimentsFlags& f) {
  std::vector<std::unique_ptr<Scanner>> scanners;
  if (f.enable_mlflow && !f.mlflow_dir.empty()) {
    scanners.push_back(std::make_unique<MlflowFileStoreScanner>(f.mlflow_dir));
  }
  if (f.enable_mlflow && !f.mlflow_rest.base_url.empty()) {
    UPLINK_ASSIGN_OR_RETURN(auto rest, MlflowRestScanner::Create(f.mlflow_rest));
    scanners.push_back(std::move(rest));
  }
  if (f.enable_wandb && !f.wandb_dir.empty()) {
    scanners.push_back(std::make_unique<WandbScanner>(WandbScannerOptions{
        .root = f.wandb_dir,
        .stale_after = std::chrono::duration_cast<std::chrono::seconds>(f.wandb_stale_after)}));
  }
  return scanners;
}

RoleOptions MakeRoleOptions(const ExperimentsFlags& f, std::string cursor_path) {
  RoleOptions options;
  options.cursor_path = std::move(cursor_path);
  options.interval = std::chrono::duration_cast<std::chrono::seconds>(f.interval);
  options.limits.max_runs_per_cycle = static_cast<size_t>(f.max_runs_per_cycle);
  options.limits.max_read_bytes_per_cycle = f.max_read_bytes;
  // A record is at most half an upload, so that an upload always holds a whole record.
  options.max_record_bytes =
      std::min<size_t>(kDefaultMaxPointsRecordBytes, static_cast<size_t>(f.max_upload_bytes) / 2);
  return options;
}

void LogScannersOff(const ExperimentsFlags& f) {
  log::Logger log("agent");
  if (!f.enable_mlflow && (!f.mlflow_dir.empty() || !f.mlflow_rest.base_url.empty())) {
    log.Info("the MLflow scanner is turned off (--enable-mlflow=false); nothing of it is read");
  }
  if (!f.enable_wandb && !f.wandb_dir.empty()) {
    log.Info("the W&B scanner is turned off (--enable-wandb=false); nothing of it is read");
  }
}

// --once when a source could not be listed: what was scanned is out, but the scan is not
// complete.
int FailSources(const CycleResult& cycle) {
  std::string text = "could not scan everything:";
  for (const Status& error : cycle.source_errors) text += " " + error.message() + ";";
  text.pop_back();
  return Fail(text);
}

// --once without a console: one full scan, printed.
int PrintOnce(const ExperimentsFlags& f) {
  metrics::Registry registry;
  DeclareExperimentsMetrics(registry);
  ListSink sink;
  auto scanners = MakeScanners(f);
  if (!scanners.ok()) return Fail(scanners.status().message(), kExitUsage);
  ExperimentsRole role(MakeRoleOptions(f, ""), std::move(*scanners), sink, nullptr,
                       SystemClock(), registry);
  for (int i = 0; i < kMaxOnceCycles; ++i) {
    CycleResult cycle = role.RunCycle();
    for (const std::string& record : sink.records) {
      if (!WriteStdout(record + "\n")) return Fail("writing to stdout failed");
    }
    sink.records.clear();
    if (!cycle.source_errors.empty()) return FailSources(cycle);
    if (!cycle.more) break;
  }
  return 0;
}

Status MakeDirectory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoError("create --state-dir " + dir, errno);
  }
  return Status::Ok();
}

int Ship(const ExperimentsFlags& f) {
  StopSignal& stop = ProcessStopSignal();
  auto scanners = MakeScanners(f);
  if (!scanners.ok()) return Fail(scanners.status().message(), kExitUsage);
  const std::string& state_dir = f.state_dir;
  if (Status made = MakeDirectory(state_dir); !made.ok()) return Fail(made.message());
  auto opened = OpenSpool(f.spool);
  if (!opened.ok()) return Fail(opened.status().message());
  spool::Spool& spool = **opened;
  auto console = ConsoleClient::Create(ConsoleClientOptions{.base_url = f.console_url,
                                                            .token_file = f.token_file,
                                                            .role = "experiments",
                                                            .ca_file = f.console_ca_file});
  if (!console.ok()) return Fail(console.status().ToString());

  metrics::Registry registry;
  DeclareShipperMetrics(registry);
  DeclareExperimentsMetrics(registry);
  SpoolSink sink(spool);
  ExperimentsRole role(MakeRoleOptions(f, state_dir + "/cursor"), std::move(*scanners),
                       sink, &spool, SystemClock(), registry);
  role.LoadCursor();
  Shipper shipper(ShipperOptions{.stream = f.stream,
                                 .instance = f.instance,
                                 .max_batch_bytes = static_cast<size_t>(f.max_upload_bytes)},
                  spool, **console, SystemClock(), registry);
  LogScannersOff(f);

  if (f.once) {
    for (int i = 0; i < kMaxOnceCycles && !stop.stopped(); ++i) {
      CycleResult cycle = role.RunCycle();
      if (!cycle.status.ok()) return Fail("spooling failed: " + cycle.status.message());
      // Deliver as it goes: a large first scan must not fill the spool to its cap.
      if (Status drained = shipper.Drain(kOnceDrainBudget); !drained.ok()) {
        return Fail("not everything was delivered: " + drained.message());
      }
      if (!cycle.source_errors.empty()) return FailSources(cycle);
      if (!cycle.more) {
        // Settles what the console acknowledged, so the saved cursor is as small as it gets.
        (void)role.RunCycle();
        return 0;
      }
    }
    return Fail("stopped before the scan was complete");
  }

  auto health = HealthServer::Start(
      f.listen,
      [&role, &shipper] {
        Readiness scanning = role.CheckReadiness();
        if (!scanning.ready) return scanning;
        return shipper.CheckReadiness();
      },
      registry);
  if (!health.ok()) return Fail(health.status().ToString(), kExitUsage);
  log::Logger("agent").Info(
      "experiments role started",
      {{"console", ConsoleOrigin(*net::ParseBaseUrl(f.console_url))},
       {"stream", f.stream},
       {"mlflow", !f.enable_mlflow ? "(off)"
                  : !f.mlflow_dir.empty() ? f.mlflow_dir
                  : f.mlflow_rest.base_url.empty() ? "" : "tracking server"},
       {"wandb_dir", f.enable_wandb ? f.wandb_dir : "(off)"},
       {"health_port", static_cast<std::int64_t>((*health)->port())},
       {"state_dir", state_dir},
       {"spool_id", spool.Stats().spool_id}});
  std::thread scanning([&] {
    NameThisThread("scanner");
    role.Run(stop);
  });
  shipper.Run(stop);
  scanning.join();
  log::Logger("agent").Info("stopped");
  return 0;
}

}  // namespace

int RunExperimentsCommand(const std::vector<std::string>& args) {
  ExperimentsFlags f;
  FlagSet flags("uplink-agent experiments");
  Register(flags, f);
  if (std::optional<int> exit_code = ParseFlagsOrExit(flags, args)) return *exit_code;
  if (Status checked = Check(flags, f); !checked.ok()) return Fail(checked.message(), kExitUsage);

  // Before any thread starts, so that only the signal thread takes SIGINT and SIGTERM. A
  // forced exit loses nothing: records stay in the spool until acknowledged, and the cursor
  // moves only past what is spooled.
  HandleStopSignals(ProcessStopSignal(), f.once ? 1 : 0, kShipStopGrace);
  if (f.console_url.empty()) return PrintOnce(f);
  return Ship(f);
}

}  // namespace uplink::agent::experiments
