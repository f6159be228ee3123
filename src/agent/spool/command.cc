#include "agent/spool/command.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/command_support.h"
#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/shipper.h"
#include "agent/stop_signal.h"
#include "common/flags.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/text.h"
#include "common/time.h"
#include "net/client.h"
#include "net/server.h"
#include "spool/spool.h"

namespace uplink::agent {
namespace {

constexpr std::int64_t kMaxWriters = 64;

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
                   {"spare_bytes", stats.spare_bytes},
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

}  // namespace

int RunSpoolCommand(const std::vector<std::string>& args, std::string_view agent_usage) {
  if (args.empty()) {
    (void)WriteStderr("uplink-agent: spool needs a command: stat, dump, append or ship\n" +
                      std::string(agent_usage));
    return kExitUsage;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string& command = args.front();
  if (command == "stat") return RunSpoolStat(rest);
  if (command == "dump") return RunSpoolDump(rest);
  if (command == "append") return RunSpoolAppend(rest);
  if (command == "ship") return RunSpoolShip(rest);
  if (command == "-h" || command == "--help" || command == "help") {
    (void)WriteStderr(agent_usage);
    return 0;
  }
  (void)WriteStderr("uplink-agent: unknown spool command '" + OneLineExcerpt(command, 64) +
                    "'\n" + std::string(agent_usage));
  return kExitUsage;
}

}  // namespace uplink::agent
