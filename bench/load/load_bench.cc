// bench_load: ten thousand simulated agents against one console, and nginx answering 204 to
// the same requests on the same machine as the HTTP floor. `make bench` runs it on SQLite (its
// last line starts with `load:`), on PostgreSQL (`--store postgres`: `load (postgres):`) and
// in the fail-over (`--failover`: `failover:`, below).
//
// Every agent is a connection (its own token) with three roles: the inventory role reports
// four GPU nodes every 60 s, the node role uploads one node sample every 30 s (gzip, through
// the spool protocol), and the cluster role holds a command long poll open (50 s, then again).
// One process drives them all with epoll (http_load.h).
//
//   1. setup      `uplink-console init` and `serve` (SQLite) pinned to one core, the
//                 generator on the other; one connection per agent through the API.
//   2. long polls every agent's poll opened and held; the console's resident memory with
//                 all of them held, against before.
//   3. first contact  each agent's first report and first upload, spread over one upload
//                 interval: the console creates its stream, node row and series (a fleet
//                 installed at once, or a new console). Measured apart, so that
//   4. sustained  the schedule above for --sustain measures agents the console knows, as it
//                 runs day to day: upload and report latencies (from when each was due, so
//                 queueing in the generator counts), console CPU, resident memory and open
//                 connections; /metrics scraped every --scrape-interval meanwhile, as
//                 Prometheus would (its read of every connection row runs beside them).
//   5. capacity   the polls closed; authenticated gzip uploads (a new sequence each, so every
//                 one is stored) as fast as --closed-loop connections get answers, for
//                 --saturate: uploads per second per console core.
//   6. console's floor  the same console answering `GET /healthz` (no body, no store, no
//                 authentication) in the same closed loop: what its HTTP stack costs alone, so
//                 that the upload's own work shows apart from it.
//   7. floor      nginx-light pinned to the same core, one worker, answering 204 to the same
//                 upload requests from the same generator: its requests per second per core.
//
// The machine it was made for has 2 cores and a hard limit of 20,000 open files per process:
// each agent's poll is a connection of its own (10,000 sockets on each side), while uploads
// and reports share a pool of --pool keep-alive connections, as many agents' requests
// multiplexed over a few hundred connections; the console raises its own limit to the hard
// one. --console URL runs the phases against a console already running (--admin-key-file,
// and --console-pid for its figures).
//
// --store postgres runs the same phases with the console on a PostgreSQL server the bench
// starts on the console's core, durable (fsync and synchronous commit on, as SQLite's store
// flushes every commit), so that the two compare; --store postgres://... uses one given.
//
// --failover: two `serve` replicas on one PostgreSQL database; each agent uploads to its
// primary (replica i % 2) as the agent's shipper does: one upload in flight, the same records
// sent again until acknowledged, and after a refused or broken connection sent to the other
// replica. Replica 1 gets SIGKILL after --kill-after; once every upload is acknowledged, the
// database's rows are compared with the acknowledgements: lost (acknowledged, absent) and
// duplicated (stored more than once) must be 0, and every agent of the killed replica must
// have had an upload acknowledged by the other (kill to that acknowledgement: p50/p99/max).
// With --restart-database the bench's own PostgreSQL server is restarted instead (a fast
// shutdown, every connection closed, then started again: a database restart or fail-over as
// the replicas see it), both replicas staying up; the same count, and from the restart to
// each agent's next acknowledged upload.
#include <libpq-fe.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bench/load/agents.h"
#include "bench/load/http_load.h"
#include "common/files.h"
#include "common/flags.h"
#include "common/json.h"
#include "common/log.h"
#include "support/postgres_server.h"
#include "support/process.h"
#include "support/stall_proxy.h"

namespace uplink::bench {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::TempDir;

enum Kind { kCreate, kInventory, kUpload, kPoll, kMetrics };

struct Options {
  std::int64_t agents = 10'000;
  std::chrono::milliseconds sustain = 90s;
  std::chrono::milliseconds saturate = 15s;
  std::chrono::milliseconds upload_interval = 30s;
  std::chrono::milliseconds report_interval = 60s;
  std::chrono::milliseconds scrape_interval = 15s;  // 0: no scrape in the sustained phase
  std::int64_t pool = 256;
  std::int64_t closed_loop = 64;
  std::int64_t ramp_per_second = 2'000;
  std::string console;
  std::string admin_key_file;
  std::int64_t console_pid = 0;
  bool nginx = true;
  bool smoke = false;
  // sqlite; postgres (a durable server the bench starts); or a postgres:// URL.
  std::string store = "sqlite";
  std::string store_password_file;
  // With the bench's own PostgreSQL: the consoles reach it through a loopback proxy that holds
  // every chunk half of this each way, as a database across a network (0: its Unix socket).
  std::int64_t database_rtt_us = 0;
  bool failover = false;
  bool restart_database = false;  // with failover: restart PostgreSQL instead of a replica
  std::chrono::milliseconds kill_after = 10s;
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "bench_load: %s\n", message.c_str());
  std::exit(1);
}

bool PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// Starts the database's delay proxy on `cpu` (any when negative) at real-time priority: it
// stands for a network, which costs the machines at either end nothing, so it must neither
// take the console's core nor wait behind the generator for its chunks' due times. The
// proxy's thread inherits both from this one, which gets its own back after.
std::unique_ptr<testing::StallProxy> StartDelayProxy(const std::string& socket_path,
                                                    std::chrono::microseconds one_way, int cpu) {
  cpu_set_t affinity;
  CPU_ZERO(&affinity);
  sched_getaffinity(0, sizeof(affinity), &affinity);
  const int policy = sched_getscheduler(0);
  sched_param priority{};
  sched_getparam(0, &priority);
  if (cpu >= 0) PinToCpu(cpu);
  sched_param realtime{.sched_priority = 1};
  if (sched_setscheduler(0, SCHED_FIFO, &realtime) != 0) {
    std::fprintf(stderr,
                 "bench_load: the database's delay proxy runs without real-time priority (%s): "
                 "its delays will be longer than asked under load\n",
                 std::strerror(errno));
  }
  auto proxy = testing::StallProxy::Start(socket_path, one_way);
  sched_setscheduler(0, policy, &priority);
  sched_setaffinity(0, sizeof(affinity), &affinity);
  if (!proxy.ok()) Die("starting the database's delay proxy: " + proxy.status().ToString());
  return std::move(*proxy);
}

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

// A process's figures from /proc.
struct ProcessFigures {
  double rss_bytes = 0;
  double cpu_seconds = 0;
  int sockets = -1;  // counted only when asked: it reads a link per descriptor
};

std::optional<ProcessFigures> ReadProcess(pid_t pid, bool count_sockets = false) {
  if (pid <= 0) return std::nullopt;
  const std::string base = "/proc/" + std::to_string(pid);
  const std::string status = testing::ReadFileOrEmpty(base + "/status");
  if (status.empty()) return std::nullopt;
  ProcessFigures figures;
  const size_t rss = status.find("VmRSS:");
  if (rss != std::string::npos)
    figures.rss_bytes = std::strtod(status.c_str() + rss + 6, nullptr) * 1024;
  const std::string stat = testing::ReadFileOrEmpty(base + "/stat");
  const size_t close = stat.rfind(')');
  if (close != std::string::npos) {
    // Fields after the command: state is field 3; utime and stime are fields 14 and 15.
    std::vector<std::string_view> fields;
    std::string_view rest = std::string_view(stat).substr(close + 2);
    while (!rest.empty() && fields.size() < 13) {
      const size_t space = rest.find(' ');
      fields.push_back(rest.substr(0, space));
      if (space == std::string_view::npos) break;
      rest.remove_prefix(space + 1);
    }
    if (fields.size() == 13) {
      const double ticks = std::strtod(std::string(fields[11]).c_str(), nullptr) +
                           std::strtod(std::string(fields[12]).c_str(), nullptr);
      figures.cpu_seconds = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  if (count_sockets) {
    figures.sockets = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(base + "/fd", ec)) {
      std::error_code link_ec;
      if (std::filesystem::read_symlink(entry.path(), link_ec).string().starts_with("socket:")) {
        ++figures.sockets;
      }
    }
  }
  return figures;
}

// The kernel's count of connections it dropped because a listener's accept queue was full
// (TcpExt ListenOverflows in /proc/net/netstat): machine-wide, so read around a phase. A
// client sees these as connections that hang in retransmission or end reset, the server
// sees nothing at all.
std::int64_t ListenOverflows() {
  std::ifstream netstat("/proc/net/netstat");
  std::string names;
  std::string values;
  while (std::getline(netstat, names) && std::getline(netstat, values)) {
    if (!names.starts_with("TcpExt:")) continue;
    std::istringstream name_words(names);
    std::istringstream value_words(values);
    std::string name;
    std::string value;
    while (name_words >> name && value_words >> value) {
      if (name == "ListenOverflows") return std::strtoll(value.c_str(), nullptr, 10);
    }
  }
  return 0;
}

double OwnCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Latencies of one kind of request and how they ended.
struct Tally {
  std::vector<float> micros;
  std::int64_t ok = 0;
  std::map<int, std::int64_t> other;  // status (kNoReply, kTimedOut or HTTP's) -> count
  // Those without a reply, by how their connection failed: how many, and the shortest and
  // longest time from when each was due.
  struct NoReply {
    std::int64_t count = 0;
    double min_s = 0;
    double max_s = 0;
  };
  std::map<std::string, NoReply, std::less<>> no_reply;

  void Add(const LoadReply& reply) {
    if (reply.status >= 200 && reply.status < 300) {
      ++ok;
      micros.push_back(
          static_cast<float>(std::chrono::duration<double, std::micro>(reply.latency).count()));
      return;
    }
    ++other[reply.status];
    if (reply.status != kNoReply) return;
    const double after = std::chrono::duration<double>(reply.latency).count();
    auto [cause, added] = no_reply.try_emplace(std::string(reply.failure));
    NoReply& figures = cause->second;
    figures.min_s = added ? after : std::min(figures.min_s, after);
    figures.max_s = std::max(figures.max_s, after);
    ++figures.count;
  }
  double QuantileMs(double q) {
    if (micros.empty()) return 0;
    const auto at = static_cast<size_t>(q * static_cast<double>(micros.size() - 1));
    std::nth_element(micros.begin(), micros.begin() + static_cast<std::ptrdiff_t>(at),
                     micros.end());
    return micros[at] / 1000.0;
  }
  std::int64_t failed() const {
    std::int64_t total = 0;
    for (const auto& [status, count] : other) total += count;
    return total;
  }
  std::string Failures() const {
    std::string text;
    for (const auto& [status, count] : other) {
      text += (text.empty() ? "" : ", ") + std::to_string(count) + " x " +
              (status == kNoReply    ? "no reply (" + NoReplyCauses() + ")"
               : status == kTimedOut ? "timed out (" + std::to_string(kReplyTimeout.count()) + " s)"
                                     : "HTTP " + std::to_string(status));
    }
    return text.empty() ? "none" : text;
  }
  // "closed by the server: 850, 0.1-50.2 s after due; reset: 9, ..."
  std::string NoReplyCauses() const {
    std::string text;
    for (const auto& [cause, figures] : no_reply) {
      char range[64];
      std::snprintf(range, sizeof(range), "%.1f-%.1f s", figures.min_s, figures.max_s);
      text += (text.empty() ? "" : "; ") + cause + ": " + std::to_string(figures.count) + ", " +
              range + " after due";
    }
    return text;
  }
};

// The value of an unlabelled sample in Prometheus text.
double MetricValue(std::string_view text, std::string_view name) {
  size_t at = 0;
  while ((at = text.find(name, at)) != std::string_view::npos) {
    const bool line_start = at == 0 || text[at - 1] == '\n';
    const size_t after = at + name.size();
    if (line_start && after < text.size() && text[after] == ' ') {
      return std::strtod(std::string(text.substr(after + 1, 32)).c_str(), nullptr);
    }
    at = after;
  }
  return 0;
}

// The consoles' store: SQLite in each data directory, or one PostgreSQL database that the
// bench starts itself (durable, as SQLite's store is, so that the two compare) or is given.
class Store {
 public:
  // SQLite.
  Store() = default;
  // PostgreSQL: `url` (no password in it) and its password, written to a file in `dir` for
  // --store-password-file; an empty `url` launches a server of the bench's own, which the
  // consoles reach through a proxy adding `round_trip` when it is not zero, running on
  // `proxy_core`.
  Store(const TempDir& dir, std::string url, std::string password,
        testing::PostgresServer::Durability durability, std::chrono::microseconds round_trip,
        int proxy_core) {
    if (url.empty()) {
      auto server = testing::PostgresServer::Launch(testing::kDebianPostgresBinDir, durability);
      if (!server.ok()) Die("starting PostgreSQL: " + server.status().ToString());
      server_ = std::move(*server);
      auto database = server_->NewDatabase();
      if (!database.ok()) Die("creating the database: " + database.status().ToString());
      url = *database;
      password = server_->password();
      if (round_trip.count() > 0) {
        proxy_ = StartDelayProxy(server_->socket_dir() + "/.s.PGSQL.5432", round_trip / 2,
                                 proxy_core);
        // postgres:///NAME?host=DIR&user=USER, reached over TCP through the proxy instead.
        const size_t name_end = url.find('?');
        const size_t user = url.find("&user=");
        if (!url.starts_with("postgres:///") || name_end == std::string::npos ||
            user == std::string::npos) {
          Die("unexpected database URL form from the bench's server");
        }
        console_url_ = "postgres://127.0.0.1:" + std::to_string(proxy_->port()) + "/" +
                       url.substr(12, name_end - 12) + "?user=" + url.substr(user + 6);
      }
    }
    url_ = std::move(url);
    password_ = std::move(password);
    password_file_ = dir.File("store-password");
    testing::WriteFileOrDie(password_file_, password_, 0600);
  }
  bool postgres() const { return !url_.empty(); }
  // Restarts the server the bench started (Die without one).
  void RestartServer() const {
    if (server_ == nullptr) Die("--restart-database needs the bench's own server (--store postgres)");
    if (Status restarted = server_->Restart(); !restarted.ok()) {
      Die("restarting PostgreSQL: " + restarted.ToString() + "\n" + server_->Log());
    }
  }
  // A libpq connection of the bench's own, to count what the consoles stored.
  PGconn* Connect() const {
    const char* keywords[] = {"dbname", "password", nullptr};
    const char* values[] = {url_.c_str(), password_.c_str(), nullptr};
    PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    if (PQstatus(conn) != CONNECTION_OK) {
      Die(std::string("connecting to the store: ") + PQerrorMessage(conn));
    }
    return conn;
  }
  // What init and serve are given to use it.
  std::vector<std::string> Flags() const {
    if (!postgres()) return {};
    return {"--store", console_url_.empty() ? url_ : console_url_, "--store-password-file",
            password_file_};
  }

 private:
  std::unique_ptr<testing::PostgresServer> server_;
  std::unique_ptr<testing::StallProxy> proxy_;  // the consoles' way to it, when delayed
  std::string console_url_;                     // through proxy_; empty: url_
  std::string url_;
  std::string password_;
  std::string password_file_;
};

// `uplink-console init` in `data_dir`: the admin's API key.
std::string InitConsole(const std::string& data_dir, const Store& store) {
  std::vector<std::string> argv = {std::string(UPLINK_BIN_DIR) + "/uplink-console", "init",
                                   "--data-dir", data_dir};
  for (std::string& flag : store.Flags()) argv.push_back(std::move(flag));
  auto init = testing::RunCommand(argv);
  if (init.exit_code != 0) Die("uplink-console init failed: " + init.err);
  return std::string(TrimWhitespace(init.out));
}

class Console {
 public:
  // Starts `uplink-console serve` on `data_dir` (initialised) and `store`, on core `core` (or
  // on any core when `core` < 0).
  Console(const std::string& data_dir, const Store& store, std::string api_key, int core)
      : api_key_(std::move(api_key)) {
    const int port = testing::FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port);
    if (core >= 0) PinToCpu(core);
    std::vector<std::string> argv = {std::string(UPLINK_BIN_DIR) + "/uplink-console",
                                     "serve",
                                     "--data-dir",
                                     data_dir,
                                     "--listen",
                                     "127.0.0.1:" + std::to_string(port),
                                     "--log-level",
                                     "warn"};
    for (std::string& flag : store.Flags()) argv.push_back(std::move(flag));
    const std::string logs = data_dir + "-logs";
    std::filesystem::create_directories(logs);
    process_ = std::make_unique<ChildProcess>(argv, logs);
  }
  // One already running.
  Console(std::string url, std::string api_key, pid_t pid)
      : url_(std::move(url)), api_key_(std::move(api_key)), pid_(pid) {}

  pid_t pid() const { return process_ ? process_->pid() : pid_; }
  const std::string& url() const { return url_; }
  const std::string& api_key() const { return api_key_; }
  std::string Stderr() const { return process_ ? process_->Stderr() : ""; }
  bool started_here() const { return process_ != nullptr; }
  // SIGKILL, as a crashed replica or a lost machine: no shutdown of any kind.
  void Kill() {
    ::kill(process_->pid(), SIGKILL);
    (void)process_->Wait(std::chrono::seconds(30));
  }

 private:
  std::string url_;
  std::string api_key_;
  pid_t pid_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

// Runs `load` until `done` holds or `timeout` passes; false on timeout.
bool RunUntilDone(HttpLoad& load, const std::function<bool()>& done,
                  std::chrono::milliseconds timeout,
                  const std::function<void(LoadClock::time_point)>& tick = {}) {
  const auto deadline = LoadClock::now() + timeout;
  while (!done()) {
    const auto now = LoadClock::now();
    if (now >= deadline) return false;
    load.RunUntil(std::min(deadline, now + 100ms), tick);
  }
  return true;
}

// One connection per agent through the admin API, agent i's on target i % `targets`; their
// replies go to `load`'s on_reply, which counts them in `creates`. Dies unless all were made.
void CreateConnections(HttpLoad& load, const AgentRequests& requests, const std::string& api_key,
                       int count, size_t targets, const Tally& creates) {
  for (int i = 0; i < count; ++i) {
    load.Queue({requests.CreateConnection(api_key, i), kCreate, i, LoadClock::now(),
                static_cast<size_t>(i) % targets});
  }
  if (!RunUntilDone(
          load, [&] { return creates.ok + creates.failed() == count; },
          std::chrono::milliseconds(60'000 + count * 20)) ||
      creates.failed() > 0) {
    Die("creating connections: " + std::to_string(creates.ok) +
        " created; failures: " + creates.Failures());
  }
}

// GET /metrics through `load`'s pool (its reply comes to `on_metrics`).
std::string FetchMetrics(HttpLoad& load, const AgentRequests& requests, std::string& body,
                         bool& arrived) {
  arrived = false;
  load.Queue({requests.Metrics(), kMetrics, -1, LoadClock::now()});
  RunUntilDone(
      load, [&] { return arrived; }, 30s);
  return body;
}

struct ClosedLoop {
  double requests_per_second = 0;
  double server_cores = 0;     // CPU the server used, in cores
  double generator_cores = 0;  // CPU this process used, in cores
  Tally tally;
};

// `connections` connections each sending `next()`'s request as soon as the last is answered;
// measured over `duration` after a second of warm-up.
ClosedLoop RunClosedLoop(const Target& target, pid_t server, std::int64_t connections,
                         std::chrono::milliseconds duration,
                         const std::function<std::shared_ptr<const std::string>()>& next) {
  ClosedLoop result;
  bool measuring = false;
  HttpLoad* self = nullptr;
  HttpLoad load({target}, [&](const LoadReply& reply) {
    if (measuring) result.tally.Add(reply);
    self->Queue({next(), kUpload, 0, LoadClock::now()});
  });
  self = &load;
  if (Status opened = load.OpenPool(static_cast<size_t>(connections)); !opened.ok()) {
    Die("opening connections: " + opened.ToString());
  }
  for (std::int64_t i = 0; i < connections; ++i) load.Queue({next(), kUpload, 0, LoadClock::now()});
  load.RunUntil(LoadClock::now() + 1s, {});
  measuring = true;
  const auto server_before = ReadProcess(server);
  const double own_before = OwnCpuSeconds();
  const auto start = LoadClock::now();
  load.RunUntil(start + duration, {});
  const double seconds = std::chrono::duration<double>(LoadClock::now() - start).count();
  measuring = false;
  const auto server_after = ReadProcess(server);
  result.requests_per_second = static_cast<double>(result.tally.ok) / seconds;
  if (server_before && server_after) {
    result.server_cores = (server_after->cpu_seconds - server_before->cpu_seconds) / seconds;
  }
  result.generator_cores = (OwnCpuSeconds() - own_before) / seconds;
  return result;
}

// nginx-light: one process (no master), one core, answering 204 to everything.
class Nginx {
 public:
  Nginx(const TempDir& dir, int core) {
    const std::string prefix = dir.File("nginx");
    std::filesystem::create_directories(prefix + "/logs");
    port_ = testing::FreePort();
    testing::WriteFileOrDie(prefix + "/nginx.conf",
                            "daemon off;\nmaster_process off;\nworker_processes 1;\npid " + prefix +
                                "/nginx.pid;\nerror_log " + prefix +
                                "/logs/error.log warn;\n"
                                "events { worker_connections 4096; }\n"
                                "http {\n  access_log off;\n  client_body_temp_path " +
                                prefix +
                                "/body;\n"
                                "  keepalive_requests 100000000;\n  keepalive_timeout 120s;\n"
                                "  client_max_body_size 16m;\n  client_body_buffer_size 64k;\n"
                                "  server {\n    listen 127.0.0.1:" +
                                std::to_string(port_) +
                                ";\n"
                                "    location / { return 204; }\n  }\n}\n",
                            0644);
    if (core >= 0) PinToCpu(core);
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kBinary, "-p", prefix, "-e", prefix + "/logs/error.log", "-c",
                                 prefix + "/nginx.conf"},
        dir.path());
  }
  static bool Installed() { return ::access(kBinary, X_OK) == 0; }
  pid_t pid() const { return process_->pid(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string Stderr() const { return process_->Stderr(); }

 private:
  static constexpr const char* kBinary = "/usr/sbin/nginx";
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

bool WaitForHttp(const Target& target) {
  bool answered = false;
  HttpLoad probe({target}, [&](const LoadReply& reply) { answered = reply.status > 0; });
  auto request = std::make_shared<const std::string>(
      "GET /healthz HTTP/1.1\r\nHost: " + target.host + "\r\n\r\n");
  for (int attempt = 0; attempt < 300 && !answered; ++attempt) {
    if (probe.OpenPool(1).ok()) {
      probe.Queue({request, kMetrics, 0, LoadClock::now()});
      probe.RunUntil(LoadClock::now() + 100ms, {});
    }
  }
  return answered;
}

std::string StoreName(const Options& options) {
  if (!options.console.empty()) return "its own store";
  if (options.store == "sqlite") return "SQLite";
  if (options.store != "postgres") return "PostgreSQL (given)";
  if (options.database_rtt_us == 0) return "PostgreSQL (durable: fsync on)";
  return "PostgreSQL (durable: fsync on; reached through a proxy adding a " +
         std::to_string(options.database_rtt_us) + " us round trip)";
}

// `proxy_core`: where the database's delay proxy runs (--database-rtt-us).
std::unique_ptr<Store> MakeStore(const TempDir& dir, const Options& options,
                                 testing::PostgresServer::Durability durability,
                                 int proxy_core = -1) {
  if (options.store == "sqlite") return std::make_unique<Store>();
  if (options.store == "postgres") {
    return std::make_unique<Store>(dir, "", "", durability,
                                   std::chrono::microseconds(options.database_rtt_us), proxy_core);
  }
  auto password = ReadFileBounded(options.store_password_file, 4096);
  if (!password.ok()) Die("--store URL needs --store-password-file: " + password.status().ToString());
  return std::make_unique<Store>(dir, options.store, std::string(TrimWhitespace(*password)),
                                 durability, std::chrono::microseconds(0), -1);
}

std::string Mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f MiB", bytes / (1 << 20));
  return text;
}

// What the console logged at warn or error (its --log-level), by message, most frequent first:
// "none", or e.g. "3 x warn: connections refused: too many connections; 1 x error: ...". A
// failure the bench counts (a poll without a reply) is often explained here.
struct LoggedProblems {
  std::string summary;
  std::int64_t errors = 0;
};
LoggedProblems SummariseLog(const std::string& log) {
  std::map<std::string, std::int64_t> counts;
  std::int64_t unreadable = 0;
  std::int64_t errors = 0;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string_view line(log.data() + start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    auto parsed = ParseJson(line);
    if (!parsed.ok() || !parsed->is_object()) {
      ++unreadable;
      continue;
    }
    const std::string level = StringAt(parsed->as_object(), "level");
    if (level == "warn" || level == "error") {
      ++counts[level + ": " + StringAt(parsed->as_object(), "msg")];
    }
    if (level == "error") ++errors;
  }
  std::vector<std::pair<std::int64_t, std::string>> ranked;
  for (const auto& [message, count] : counts) ranked.emplace_back(count, message);
  std::sort(ranked.rbegin(), ranked.rend());
  std::string text;
  for (size_t i = 0; i < std::min<size_t>(ranked.size(), 5); ++i) {
    if (!text.empty()) text += "; ";
    text += std::to_string(ranked[i].first) + " x " + ranked[i].second;
  }
  if (ranked.size() > 5) text += "; and " + std::to_string(ranked.size() - 5) + " more kinds";
  if (unreadable > 0) {
    if (!text.empty()) text += "; ";
    text += std::to_string(unreadable) + " lines not JSON";
  }
  return {text.empty() ? "none" : text, errors};
}

int Run(const Options& options) {
  const int cores = UsableCpus();
  const bool pin = cores >= 2;
  // The generator's core; servers get the other one.
  const int generator_core = pin ? 0 : -1;
  const int server_core = pin ? 1 : -1;
  TempDir dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<Console> console;
  if (options.console.empty()) {
    // The database, when the bench starts one, shares the console's core.
    if (server_core >= 0) PinToCpu(server_core);
    store = MakeStore(dir, options, testing::PostgresServer::Durability::kDurable,
                      generator_core);
    const std::string data_dir = dir.File("console");
    console = std::make_unique<Console>(data_dir, *store, InitConsole(data_dir, *store),
                                        server_core);
  } else {
    auto key = ReadFileBounded(options.admin_key_file, 4096);
    if (!key.ok()) Die("--console needs --admin-key-file: " + key.status().ToString());
    console = std::make_unique<Console>(options.console, std::string(TrimWhitespace(*key)),
                                        static_cast<pid_t>(options.console_pid));
  }
  if (generator_core >= 0) PinToCpu(generator_core);
  auto target = ParseTarget(console->url());
  if (!target.ok()) Die("--console: " + target.status().ToString());
  if (!WaitForHttp(*target)) Die("the console did not answer:\n" + console->Stderr());
  const AgentRequests requests(target->host + ":" + std::to_string(target->port));
  const auto agents_count = static_cast<int>(options.agents);
  // The figures are only as quiet as the machine: say how busy it was.
  std::printf(
      "bench_load: machine load average %s with %d usable cores\n",
      std::string(TrimWhitespace(testing::ReadFileOrEmpty("/proc/loadavg").substr(0, 14))).c_str(),
      cores);
  std::printf("bench_load: %d agents against %s on %s (%s), uploads every %.0f s, reports every "
              "%.0f s\n",
              agents_count, console->url().c_str(), StoreName(options).c_str(),
              pin ? "console (and a database of the bench's own) and nginx pinned to core 1, "
                    "the generator to core 0"
                  : "one core: nothing pinned",
              std::chrono::duration<double>(options.upload_interval).count(),
              std::chrono::duration<double>(options.report_interval).count());

  // 1. One connection per agent.
  std::vector<SimulatedAgent> agents;
  agents.reserve(static_cast<size_t>(agents_count));
  for (int i = 0; i < agents_count; ++i) agents.push_back(MakeAgent(i, "", ""));
  std::vector<int> poll_connection(static_cast<size_t>(agents_count), -1);
  std::vector<char> poll_held(static_cast<size_t>(agents_count), 0);
  Tally creates, reports, uploads, polls, scrapes;
  Tally first_reports, first_uploads, first_polls;
  // Where replies to reports, uploads and polls are counted: from the polls' opening to the
  // last first contact's answer, then the sustained phase's.
  Tally* report_tally = &first_reports;
  Tally* upload_tally = &first_uploads;
  Tally* poll_tally = &first_polls;
  // Until the sustained phase starts, no reply counts towards its slowest seconds.
  LoadClock::time_point sustain_start = LoadClock::time_point::max();
  std::vector<float> slowest;  // ms, by second of the sustained phase
  std::string metrics_body;
  bool metrics_arrived = false;
  // Where the sustained phase's scrapes are counted (their bodies are not kept).
  Tally* scrape_tally = nullptr;
  HttpLoad* load_ptr = nullptr;
  HttpLoad load({*target}, [&](const LoadReply& reply) {
    const LoadRequest& request = *reply.request;
    switch (request.kind) {
      case kCreate:
        creates.Add(reply);
        if (reply.status == 201) {
          auto body = ParseJson(reply.body);
          if (body.ok() && body->is_object()) {
            SimulatedAgent& agent = agents[static_cast<size_t>(request.agent)];
            agent.connection_id = StringAt(body->get_object(), "id");
            agent.token = StringAt(body->get_object(), "token");
          }
        }
        break;
      case kInventory:
      case kUpload: {
        (request.kind == kUpload ? *upload_tally : *report_tally).Add(reply);
        // The slowest answer to what fell due in each second of the sustained phase, to tell
        // a stall (something holding the store) from a slow path.
        const auto second =
            std::chrono::duration_cast<std::chrono::seconds>(request.due - sustain_start).count();
        if (second >= 0) {
          if (slowest.size() <= static_cast<size_t>(second)) slowest.resize(second + 1);
          slowest[second] = std::max(
              slowest[second], std::chrono::duration<float, std::milli>(reply.latency).count());
        }
        break;
      }
      case kPoll: {
        poll_tally->Add(reply);
        poll_held[static_cast<size_t>(request.agent)] = 0;
        // The cluster role polls again at once (after a failure, once the connection is back).
        const SimulatedAgent& agent = agents[static_cast<size_t>(request.agent)];
        load_ptr->SendOn(reply.connection,
                         {requests.Poll(agent), kPoll, agent.index, LoadClock::now()});
        poll_held[static_cast<size_t>(request.agent)] = 1;
        break;
      }
      case kMetrics:
        if (scrape_tally != nullptr) {
          scrape_tally->Add(reply);
          break;
        }
        metrics_body.assign(reply.body);
        metrics_arrived = true;
        break;
    }
  });
  load_ptr = &load;
  if (Status opened = load.OpenPool(static_cast<size_t>(options.pool)); !opened.ok()) {
    Die("opening the pool: " + opened.ToString());
  }
  const auto setup_start = LoadClock::now();
  const std::int64_t overflows_before = ListenOverflows();
  CreateConnections(load, requests, console->api_key(), agents_count, 1, creates);
  std::printf("  setup: %d connections created in %.1f s\n", agents_count,
              std::chrono::duration<double>(LoadClock::now() - setup_start).count());

  // 2. Every agent's long poll, opened at --ramp-per-second and held.
  const auto before_polls = ReadProcess(console->pid(), true);
  int opened_polls = 0;
  const auto ramp_start = LoadClock::now();
  auto open_polls = [&](LoadClock::time_point now) {
    const double elapsed = std::chrono::duration<double>(now - ramp_start).count();
    const int due = std::min(
        agents_count, static_cast<int>(elapsed * static_cast<double>(options.ramp_per_second)) + 1);
    for (; opened_polls < due; ++opened_polls) {
      const SimulatedAgent& agent = agents[static_cast<size_t>(opened_polls)];
      auto id = load.OpenDedicated({requests.Poll(agent), kPoll, agent.index, now});
      if (!id.ok()) Die("opening a long poll: " + id.status().ToString());
      poll_connection[static_cast<size_t>(opened_polls)] = *id;
      poll_held[static_cast<size_t>(opened_polls)] = 1;
    }
  };
  RunUntilDone(
      load, [&] { return opened_polls == agents_count; }, 600s, open_polls);
  // Held when the console says so.
  double held = 0;
  RunUntilDone(
      load,
      [&] {
        held = MetricValue(FetchMetrics(load, requests, metrics_body, metrics_arrived),
                           "uplink_console_kubectl_polls_waiting");
        return held >= agents_count;
      },
      120s);
  const auto with_polls = ReadProcess(console->pid(), true);
  std::printf("  long polls: %.0f of %d held by the console (opened in %.1f s)", held, agents_count,
              std::chrono::duration<double>(LoadClock::now() - ramp_start).count());
  if (before_polls && with_polls) {
    std::printf("; console RSS %s before, %s with them held (%.1f KiB per poll), %d sockets",
                Mib(before_polls->rss_bytes).c_str(), Mib(with_polls->rss_bytes).c_str(),
                (with_polls->rss_bytes - before_polls->rss_bytes) / 1024 / std::max(held, 1.0),
                with_polls->sockets);
  }
  std::printf("\n");

  // 3. First contact: agent i reports and uploads at (i / N) of one upload interval.
  const int stride = agents_count % 7919 == 0 ? 1 : 7919;
  {
    const auto start = LoadClock::now();
    const WallTime wall_start = SystemClock().Now();
    int issued = 0;
    const auto contact_end = start + options.upload_interval;
    auto issue_due = [&](LoadClock::time_point now) {
      for (; issued < agents_count; ++issued) {
        const auto due = start + options.upload_interval * issued / agents_count;
        if (due > now) return;
        const auto wall =
            wall_start + std::chrono::duration_cast<std::chrono::nanoseconds>(due - start);
        SimulatedAgent& reporter =
            agents[static_cast<size_t>((static_cast<std::int64_t>(issued) * stride) % agents_count)];
        load.Queue({requests.Inventory(reporter, wall), kInventory, reporter.index, due});
        SimulatedAgent& uploader = agents[static_cast<size_t>(issued)];
        load.Queue({requests.Upload(uploader, wall), kUpload, uploader.index, due});
      }
    };
    load.RunUntil(contact_end, issue_due);
    // The loop ends without a last tick at its end, and the last agents fall due within a
    // tick of it: without this, a run now and then waited for requests never sent.
    issue_due(contact_end);
    RunUntilDone(
        load,
        [&] {
          return first_uploads.ok + first_uploads.failed() == agents_count &&
                 first_reports.ok + first_reports.failed() == agents_count;
        },
        600s);
    std::printf("  first contact: %" PRId64 " first uploads and %" PRId64
                " first reports, due over %.0f s, answered in %.1f s; uploads p50 %.2f ms, "
                "p99 %.2f ms, reports p50 %.2f ms, p99 %.2f ms; failed: %s%s%s; "
                "since the polls opened, %" PRId64 " polls answered, failed: %s\n",
                first_uploads.ok, first_reports.ok,
                std::chrono::duration<double>(options.upload_interval).count(),
                std::chrono::duration<double>(LoadClock::now() - start).count(),
                first_uploads.QuantileMs(0.5), first_uploads.QuantileMs(0.99),
                first_reports.QuantileMs(0.5), first_reports.QuantileMs(0.99),
                first_uploads.Failures().c_str(), first_reports.failed() > 0 ? ", reports " : "",
                first_reports.failed() > 0 ? first_reports.Failures().c_str() : "",
                first_polls.ok, first_polls.Failures().c_str());
  }
  upload_tally = &uploads;
  report_tally = &reports;
  poll_tally = &polls;
  scrape_tally = &scrapes;

  // 4. The schedule: agent i uploads at (i / N) of each upload interval, and reports at a
  // scrambled position of each report interval, so reports and uploads do not line up.
  sustain_start = LoadClock::now();
  const WallTime wall_start = SystemClock().Now();
  std::int64_t uploads_due = 0;
  std::int64_t reports_due = 0;
  std::int64_t scrapes_due = 0;
  ProcessFigures peak;
  auto last_sample = sustain_start;
  const auto console_before = ReadProcess(console->pid());
  const double own_before = OwnCpuSeconds();
  auto schedule = [&](std::int64_t& issued, std::chrono::milliseconds interval, Kind kind,
                      LoadClock::time_point now) {
    for (;;) {
      const std::int64_t round = issued / agents_count;
      const std::int64_t slot = issued % agents_count;
      const auto due = sustain_start + interval * round + interval * slot / agents_count;
      if (due > now) return;
      const int index = kind == kUpload ? static_cast<int>(slot)
                                        : static_cast<int>((slot * stride) % agents_count);
      SimulatedAgent& agent = agents[static_cast<size_t>(index)];
      const WallTime wall =
          wall_start + std::chrono::duration_cast<std::chrono::nanoseconds>(due - sustain_start);
      load.Queue({kind == kUpload ? requests.Upload(agent, wall) : requests.Inventory(agent, wall),
                  kind, index, due});
      ++issued;
    }
  };
  auto sustain_tick = [&](LoadClock::time_point now) {
    schedule(uploads_due, options.upload_interval, kUpload, now);
    schedule(reports_due, options.report_interval, kInventory, now);
    // The first scrape a whole interval in, as from a scraper that was already running.
    while (options.scrape_interval.count() > 0) {
      const auto due = sustain_start + options.scrape_interval * (scrapes_due + 1);
      if (due > now) break;
      load.Queue({requests.Metrics(), kMetrics, -1, due});
      ++scrapes_due;
    }
    if (now - last_sample >= 1s) {
      last_sample = now;
      if (auto figures = ReadProcess(console->pid())) {
        peak.rss_bytes = std::max(peak.rss_bytes, figures->rss_bytes);
      }
    }
  };
  load.RunUntil(sustain_start + options.sustain, sustain_tick);
  const auto console_after = ReadProcess(console->pid());
  const double sustain_seconds =
      std::chrono::duration<double>(LoadClock::now() - sustain_start).count();
  // Counted once the schedule is over: reading 10,000 links would stall the loop meanwhile.
  if (auto figures = ReadProcess(console->pid(), true)) peak.sockets = figures->sockets;
  const double own_sustain = (OwnCpuSeconds() - own_before) / sustain_seconds;
  RunUntilDone(
      load,
      [&] {
        return uploads.ok + uploads.failed() == uploads_due &&
               reports.ok + reports.failed() == reports_due &&
               scrapes.ok + scrapes.failed() == scrapes_due;
      },
      60s);
  scrape_tally = nullptr;
  const std::string console_metrics = FetchMetrics(load, requests, metrics_body, metrics_arrived);
  const double accepted = MetricValue(console_metrics, "uplink_console_uploads_accepted_total");
  const double stored = MetricValue(console_metrics, "uplink_console_node_samples_stored_total");
  const double console_cores =
      console_before && console_after
          ? (console_after->cpu_seconds - console_before->cpu_seconds) / sustain_seconds
          : 0;
  std::printf("  sustained %.0f s: %" PRId64 " uploads (%.0f/s), %" PRId64 " reports, %" PRId64
              " polls answered; console CPU %.2f cores, generator %.2f\n",
              sustain_seconds, uploads.ok, static_cast<double>(uploads.ok) / sustain_seconds,
              reports.ok, polls.ok, console_cores, own_sustain);
  const double upload_p50 = uploads.QuantileMs(0.5);
  const double upload_p99 = uploads.QuantileMs(0.99);
  std::printf("    uploads: p50 %.2f ms, p99 %.2f ms, max %.2f ms; failed: %s\n", upload_p50,
              upload_p99, uploads.QuantileMs(1.0), uploads.Failures().c_str());
  std::printf("    reports: p50 %.2f ms, p99 %.2f ms; failed: %s\n", reports.QuantileMs(0.5),
              reports.QuantileMs(0.99), reports.Failures().c_str());
  std::printf("    polls failed: %s\n", polls.Failures().c_str());
  if (scrapes_due > 0) {
    std::printf("    /metrics scrapes (every %.0f s): %" PRId64 ", p50 %.2f ms, max %.2f ms; "
                "failed: %s\n",
                std::chrono::duration<double>(options.scrape_interval).count(), scrapes.ok,
                scrapes.QuantileMs(0.5), scrapes.QuantileMs(1.0), scrapes.Failures().c_str());
  }
  std::vector<size_t> seconds(slowest.size());
  std::iota(seconds.begin(), seconds.end(), 0);
  std::sort(seconds.begin(), seconds.end(),
            [&](size_t a, size_t b) { return slowest[a] > slowest[b]; });
  std::printf("    slowest seconds (when due, from the start):");
  for (size_t i = 0; i < std::min<size_t>(6, seconds.size()); ++i) {
    std::printf(" %zus %.0f ms%s", seconds[i], slowest[seconds[i]], i < 5 ? "," : "");
  }
  std::printf("\n");
  std::printf(
      "    console: RSS up to %s, %d open sockets at the end (its own count: %.0f HTTP "
      "connections open); it counted %.0f uploads accepted and %.0f node samples stored, first "
      "contact included\n",
      Mib(peak.rss_bytes).c_str(), peak.sockets,
      MetricValue(console_metrics, "uplink_console_http_connections_open"), accepted, stored);
  // A request without a reply (above) that the console counted here was ended by it.
  std::string lost;
  for (const char* reason : {"read_timeout", "client_closed", "write_failed"}) {
    const double count = MetricValue(
        console_metrics,
        std::string("uplink_console_http_requests_lost_total{reason=\"") + reason + "\"}");
    if (count <= 0) continue;
    if (!lost.empty()) lost += ", ";
    lost += std::to_string(static_cast<std::int64_t>(count)) + " " + reason;
  }
  std::printf("    requests the console ended without a response, since it started: %s\n",
              lost.empty() ? "none" : lost.c_str());
  std::printf("    connection attempts the kernel dropped at a full accept queue (machine-wide, "
              "since the setup): %" PRId64 "\n",
              ListenOverflows() - overflows_before);
  std::optional<LoggedProblems> logged;
  if (console->started_here()) {
    logged = SummariseLog(console->Stderr());
    std::printf("    console logged (warn and error, since it started): %s\n",
                logged->summary.c_str());
  }

  // 5. Capacity: closed loop of fresh uploads.
  load.CloseDedicated();
  int next_agent = 0;
  ClosedLoop capacity =
      RunClosedLoop(*target, console->pid(), options.closed_loop, options.saturate, [&] {
        SimulatedAgent& agent = agents[static_cast<size_t>(next_agent)];
        next_agent = (next_agent + 1) % agents_count;
        return requests.Upload(agent, SystemClock().Now());
      });
  const double console_per_core =
      capacity.requests_per_second / std::max(capacity.server_cores, 1e-9);
  std::printf("  capacity: %.0f uploads/s over %" PRId64
              " connections, console CPU %.2f cores (%.0f uploads/s per core), generator %.2f; "
              "p50 %.2f ms, p99 %.2f ms; failed: %s\n",
              capacity.requests_per_second, options.closed_loop, capacity.server_cores,
              console_per_core, capacity.generator_cores, capacity.tally.QuantileMs(0.5),
              capacity.tally.QuantileMs(0.99), capacity.tally.Failures().c_str());

  // 6. The console's own floor: its HTTP stack answering a request that does no work.
  const auto healthz = std::make_shared<const std::string>(
      "GET /healthz HTTP/1.1\r\nHost: " + target->host + "\r\n\r\n");
  ClosedLoop stack = RunClosedLoop(*target, console->pid(), options.closed_loop, options.saturate,
                                   [&] { return healthz; });
  const double stack_per_core = stack.requests_per_second / std::max(stack.server_cores, 1e-9);
  std::printf(
      "  console's floor: GET /healthz %.0f requests/s, console CPU %.2f cores (%.0f per core), "
      "generator %.2f; an upload costs the console %.1fx a /healthz; failed: %s\n",
      stack.requests_per_second, stack.server_cores, stack_per_core, stack.generator_cores,
      stack_per_core / std::max(console_per_core, 1e-9), stack.tally.Failures().c_str());

  // 7. The floor: nginx answering the same requests.
  std::optional<ClosedLoop> floor;
  if (options.nginx && Nginx::Installed()) {
    std::vector<std::shared_ptr<const std::string>> ring;
    std::vector<SimulatedAgent> copies(agents.begin(),
                                       agents.begin() + std::min(agents_count, 2048));
    for (SimulatedAgent& agent : copies)
      ring.push_back(requests.Upload(agent, SystemClock().Now()));
    Nginx nginx(dir, server_core);
    if (generator_core >= 0) PinToCpu(generator_core);
    auto nginx_target = ParseTarget(nginx.url());
    if (!nginx_target.ok() || !WaitForHttp(*nginx_target))
      Die("nginx did not start:\n" + nginx.Stderr());
    size_t next = 0;
    floor = RunClosedLoop(*nginx_target, nginx.pid(), options.closed_loop, options.saturate,
                          [&] { return ring[next++ % ring.size()]; });
    std::printf(
        "  floor: nginx %.0f requests/s, CPU %.2f cores (%.0f per core), generator %.2f; "
        "failed: %s\n",
        floor->requests_per_second, floor->server_cores,
        floor->requests_per_second / std::max(floor->server_cores, 1e-9), floor->generator_cores,
        floor->tally.Failures().c_str());
  } else {
    std::printf("  floor: nginx not run (%s)\n",
                options.nginx ? "/usr/sbin/nginx is missing: apt-get install nginx-light"
                              : "--nginx=false");
  }

  const double memory = with_polls ? with_polls->rss_bytes : 0;
  std::string ratio = "no nginx";
  std::string stack_ratio;
  if (floor) {
    const double nginx_per_core = floor->requests_per_second / std::max(floor->server_cores, 1e-9);
    char text[64];
    std::snprintf(text, sizeof(text), "%.3fx nginx's %.0f/s", console_per_core / nginx_per_core,
                  nginx_per_core);
    ratio = text;
    std::snprintf(text, sizeof(text), "; the console's GET /healthz %.0f/s per core = %.3fx nginx",
                  stack_per_core, stack_per_core / nginx_per_core);
    stack_ratio = text;
  }
  // SQLite's line is `load:`, the issue's; PostgreSQL's says so, so that both read side by side.
  const std::string label = options.store == "sqlite" ? "load" : "load (postgres)";
  std::printf(
      "%s: %d agents; console %.0f authenticated gzip uploads/s per core = %s (aim "
      ">= 0.5x); upload p50 %.1f ms p99 %.1f ms at %.0f/s (aim p99 < 50 ms); %.0f long "
      "polls held in %s of console RSS (aim < 1 GiB), %d open connections%s\n",
      label.c_str(), agents_count, console_per_core, ratio.c_str(), upload_p50, upload_p99,
      static_cast<double>(uploads.ok) / sustain_seconds, held, Mib(memory).c_str(),
      std::max(peak.sockets, with_polls ? with_polls->sockets : -1), stack_ratio.c_str());

  if (options.smoke) {
    // Checks, not aims: every request answered as the protocol says, and counted by the console.
    std::vector<std::string> problems;
    for (const auto& [name, tally] : {std::pair<const char*, Tally*>{"first uploads", &first_uploads},
                                      {"first reports", &first_reports},
                                      {"uploads", &uploads},
                                      {"reports", &reports}}) {
      if (tally->ok == 0 || tally->failed() > 0) {
        problems.push_back(std::string(name) + ": " + tally->Failures());
      }
    }
    if (first_polls.failed() > 0) problems.push_back("first polls: " + first_polls.Failures());
    if (polls.failed() > 0) problems.push_back("polls: " + polls.Failures());
    if (scrapes.failed() > 0) problems.push_back("/metrics scrapes: " + scrapes.Failures());
    if (held < agents_count) problems.push_back("not every long poll was held");
    if (logged && logged->errors > 0) {
      problems.push_back("the console logged errors: " + logged->summary);
    }
    const std::int64_t uploaded = first_uploads.ok + uploads.ok;
    if (accepted != static_cast<double>(uploaded) || stored != static_cast<double>(uploaded)) {
      problems.push_back("the console counted " + std::to_string(accepted) + " uploads and " +
                         std::to_string(stored) + " samples, the generator " +
                         std::to_string(uploaded));
    }
    if (capacity.tally.ok == 0 || capacity.tally.failed() > 0) {
      problems.push_back("capacity: " + capacity.tally.Failures());
    }
    if (stack.tally.ok == 0 || stack.tally.failed() > 0) {
      problems.push_back("console's floor: " + stack.tally.Failures());
    }
    if (floor && (floor->tally.ok == 0 || floor->tally.failed() > 0)) {
      problems.push_back("nginx: " + floor->tally.Failures());
    }
    for (const std::string& problem : problems)
      std::fprintf(stderr, "FAILED: %s\n", problem.c_str());
    if (!problems.empty()) return 1;
  }
  return 0;
}

// --failover: two `serve` replicas on one PostgreSQL database, each agent's node role shipping
// to its primary (agent i's is replica i % 2) as the agent ships its spool: one upload in
// flight, sent again until acknowledged, and on a refused or broken connection sent to the
// other replica (as behind a load balancer that drops a dead server). Replica 1 is killed with
// SIGKILL after --kill-after; once every upload is acknowledged the database is read directly
// and compared with what the replicas acknowledged.
struct PendingUpload {
  std::int64_t sequence = 0;
  std::shared_ptr<const std::string> bytes;
  LoadClock::time_point due;
};

struct Shipper {
  size_t primary = 0;
  size_t replica = 0;  // where it sends now
  std::deque<PendingUpload> unacked;
  bool in_flight = false;
  LoadClock::time_point retry_at{};
  std::int64_t acked_through = 0;
  std::vector<std::int64_t> collected_ms;  // by sequence - 1: how its stored sample is found
  // From the event (the kill; or the database restart) to its first acknowledgement after it
  // by the other replica (after a restart: after a failed try); and from the later of the
  // event and when that upload was due (what the event itself cost, not the schedule).
  std::optional<LoadClock::duration> moved_after;
  std::optional<LoadClock::duration> move_cost;
  bool failed_after_restart = false;
};

// What the database holds for each connection's node stream.
struct StoredStream {
  std::unordered_set<std::int64_t> sample_times;  // samples.at
  std::int64_t sample_rows = 0;
  std::int64_t records_stored = 0;  // the console's own count (streams.records_stored)
};

std::unordered_map<std::string, StoredStream> ReadStoredStreams(const Store& store) {
  PGconn* conn = store.Connect();
  std::unordered_map<std::string, StoredStream> streams;
  auto query = [&](const char* sql, const std::function<void(PGresult*, int)>& row) {
    PGresult* result = PQexec(conn, sql);
    if (PQresultStatus(result) != PGRES_TUPLES_OK) {
      Die(std::string(sql) + ": " + PQerrorMessage(conn));
    }
    for (int i = 0; i < PQntuples(result); ++i) row(result, i);
    PQclear(result);
  };
  query(
      "SELECT n.connection_id, s.at FROM samples s JOIN sample_nodes n ON n.id = s.node_id",
      [&](PGresult* result, int i) {
        StoredStream& stream = streams[PQgetvalue(result, i, 0)];
        stream.sample_times.insert(std::strtoll(PQgetvalue(result, i, 1), nullptr, 10));
        ++stream.sample_rows;
      });
  query("SELECT connection_id, records_stored FROM streams", [&](PGresult* result, int i) {
    streams[PQgetvalue(result, i, 0)].records_stored +=
        std::strtoll(PQgetvalue(result, i, 1), nullptr, 10);
  });
  PQfinish(conn);
  return streams;
}

int RunFailover(const Options& options) {
  constexpr size_t kKilled = 1;
  TempDir dir;
  // The smoke run checks counts, not speed: its database need not flush.
  auto store = MakeStore(dir, options,
                         options.smoke ? testing::PostgresServer::Durability::kFast
                                       : testing::PostgresServer::Durability::kDurable);
  const std::vector<std::string> data_dirs = {dir.File("replica-0"), dir.File("replica-1")};
  const std::string api_key = InitConsole(data_dirs[0], *store);
  // Every replica needs the two-factor key init wrote (setup.h's TwoFactorKeyPath).
  std::filesystem::create_directories(data_dirs[1]);
  std::filesystem::permissions(data_dirs[1], std::filesystem::perms::owner_all);
  std::filesystem::copy_file(data_dirs[0] + "/two-factor.key", data_dirs[1] + "/two-factor.key");
  std::vector<std::unique_ptr<Console>> replicas;
  std::vector<Target> targets;
  for (const std::string& data_dir : data_dirs) {
    replicas.push_back(std::make_unique<Console>(data_dir, *store, api_key, -1));
    auto target = ParseTarget(replicas.back()->url());
    if (!target.ok() || !WaitForHttp(*target)) {
      Die("replica " + data_dir + " did not answer:\n" + replicas.back()->Stderr());
    }
    targets.push_back(*target);
  }
  const AgentRequests requests(targets[0].host + ":" + std::to_string(targets[0].port));
  const auto agents_count = static_cast<int>(options.agents);
  std::printf("bench_load --failover: machine load average %s; %d agents on 2 replicas (%s, %s) "
              "sharing %s, uploads every %.0f s, %s after %.0f s\n",
              std::string(TrimWhitespace(testing::ReadFileOrEmpty("/proc/loadavg").substr(0, 14)))
                  .c_str(),
              agents_count, replicas[0]->url().c_str(), replicas[1]->url().c_str(),
              options.smoke ? "PostgreSQL (fsync off)" : StoreName(options).c_str(),
              std::chrono::duration<double>(options.upload_interval).count(),
              options.restart_database ? "the database restarted" : "replica 1 killed",
              std::chrono::duration<double>(options.kill_after).count());

  std::vector<SimulatedAgent> agents;
  std::vector<Shipper> shippers(static_cast<size_t>(agents_count));
  for (int i = 0; i < agents_count; ++i) {
    agents.push_back(MakeAgent(i, "", ""));
    shippers[static_cast<size_t>(i)].primary = static_cast<size_t>(i) % 2;
    shippers[static_cast<size_t>(i)].replica = static_cast<size_t>(i) % 2;
  }
  Tally creates, uploads;
  std::int64_t moves = 0;
  std::optional<LoadClock::time_point> killed_at;
  std::thread restarter;  // --restart-database
  HttpLoad* load_ptr = nullptr;
  auto send = [&](int index, LoadClock::time_point now) {
    Shipper& shipper = shippers[static_cast<size_t>(index)];
    if (shipper.in_flight || shipper.unacked.empty() || now < shipper.retry_at) return;
    shipper.in_flight = true;
    load_ptr->Queue({shipper.unacked.front().bytes, kUpload, index, now, shipper.replica});
  };
  HttpLoad load(targets, [&](const LoadReply& reply) {
    const LoadRequest& request = *reply.request;
    if (request.kind == kCreate) {
      creates.Add(reply);
      auto body = ParseJson(reply.body);
      if (reply.status == 201 && body.ok() && body->is_object()) {
        SimulatedAgent& agent = agents[static_cast<size_t>(request.agent)];
        agent.connection_id = StringAt(body->get_object(), "id");
        agent.token = StringAt(body->get_object(), "token");
      }
      return;
    }
    uploads.Add(reply);
    Shipper& shipper = shippers[static_cast<size_t>(request.agent)];
    shipper.in_flight = false;
    const auto now = LoadClock::now();
    if (reply.status == 200) {
      auto body = ParseJson(reply.body);
      const json::value* acked =
          body.ok() && body->is_object() ? body->get_object().if_contains("acked_through") : nullptr;
      if (acked == nullptr || !acked->is_int64()) Die("an upload's reply without acked_through");
      shipper.acked_through = std::max(shipper.acked_through, acked->get_int64());
      const bool affected = options.restart_database
                                ? shipper.failed_after_restart
                                : shipper.primary == kKilled && shipper.replica != kKilled;
      if (killed_at && affected && !shipper.moved_after && !shipper.unacked.empty()) {
        shipper.moved_after = now - *killed_at;
        shipper.move_cost = now - std::max(*killed_at, shipper.unacked.front().due);
      }
      while (!shipper.unacked.empty() &&
             shipper.unacked.front().sequence <= shipper.acked_through) {
        shipper.unacked.pop_front();
      }
    } else if (reply.status == kNoReply || reply.status == kTimedOut) {
      // Refused, broken or silent: the other replica, at once.
      shipper.replica = 1 - shipper.replica;
      ++moves;
    } else {
      // The console is up but could not take it now (say, the store is busy): as the agent's
      // shipper, try again shortly.
      shipper.retry_at = now + 200ms;
    }
    if (reply.status != 200 && killed_at) shipper.failed_after_restart = true;
    send(request.agent, now);
  });
  load_ptr = &load;
  if (Status opened = load.OpenPool(static_cast<size_t>(options.pool)); !opened.ok()) {
    Die("opening the pool: " + opened.ToString());
  }
  CreateConnections(load, requests, api_key, agents_count, targets.size(), creates);

  // Agent i's upload is due at (i / N) of each interval, as in the sustained phase.
  const auto start = LoadClock::now();
  const WallTime wall_start = SystemClock().Now();
  std::int64_t issued = 0;
  std::int64_t in_flight_at_kill = 0;
  auto tick = [&](LoadClock::time_point now) {
    for (;;) {
      const std::int64_t round = issued / agents_count;
      const std::int64_t slot = issued % agents_count;
      const auto due =
          start + options.upload_interval * round + options.upload_interval * slot / agents_count;
      if (due > now || due >= start + options.sustain) break;
      SimulatedAgent& agent = agents[static_cast<size_t>(slot)];
      Shipper& shipper = shippers[static_cast<size_t>(slot)];
      auto bytes = requests.Upload(
          agent, wall_start + std::chrono::duration_cast<std::chrono::nanoseconds>(due - start));
      shipper.collected_ms.push_back(agent.last_collected_ms);
      shipper.unacked.push_back({agent.sequence, std::move(bytes), due});
      send(static_cast<int>(slot), now);
      ++issued;
    }
    if (!killed_at && now >= start + options.kill_after) {
      in_flight_at_kill = static_cast<std::int64_t>(load.in_flight());
      if (options.restart_database) {
        // On a thread of its own: the load goes on while the server stops and starts.
        restarter = std::thread([&store] { store->RestartServer(); });
      } else {
        replicas[kKilled]->Kill();
      }
      killed_at = LoadClock::now();
    }
    // Those told to wait, when their time comes.
    for (int i = 0; i < agents_count; ++i) {
      const Shipper& shipper = shippers[static_cast<size_t>(i)];
      if (!shipper.in_flight && !shipper.unacked.empty() && now >= shipper.retry_at) send(i, now);
    }
  };
  load.RunUntil(start + options.sustain, tick, 5ms);
  const auto drained = [&] {
    return std::all_of(shippers.begin(), shippers.end(),
                       [](const Shipper& shipper) { return shipper.unacked.empty(); });
  };
  if (!RunUntilDone(load, drained, 120s, tick)) {
    std::fprintf(stderr, "bench_load: some uploads were never acknowledged (failures: %s)\n",
                 uploads.Failures().c_str());
  }
  const double seconds = std::chrono::duration<double>(LoadClock::now() - start).count();
  if (restarter.joinable()) restarter.join();

  // The count: what was acknowledged against what the database holds.
  const auto stored = ReadStoredStreams(*store);
  std::int64_t acknowledged = 0, lost = 0, duplicated = 0, records = 0, unacknowledged = 0;
  std::int64_t on_killed = 0, moved = 0;
  std::vector<double> moved_seconds, move_cost_seconds;
  for (int i = 0; i < agents_count; ++i) {
    const Shipper& shipper = shippers[static_cast<size_t>(i)];
    const SimulatedAgent& agent = agents[static_cast<size_t>(i)];
    acknowledged += shipper.acked_through;
    unacknowledged += static_cast<std::int64_t>(shipper.unacked.size());
    auto found = stored.find(agent.connection_id);
    const StoredStream empty;
    const StoredStream& stream = found == stored.end() ? empty : found->second;
    std::int64_t present = 0;
    for (std::int64_t sequence = 1; sequence <= agent.sequence; ++sequence) {
      const bool is_stored =
          stream.sample_times.contains(shipper.collected_ms[static_cast<size_t>(sequence - 1)]);
      present += is_stored ? 1 : 0;
      if (!is_stored && sequence <= shipper.acked_through) ++lost;
    }
    records += stream.sample_rows;
    // More rows, or more stores counted by the console, than distinct samples sent.
    duplicated += std::max<std::int64_t>(0, stream.sample_rows - present) +
                  std::max<std::int64_t>(0, stream.records_stored - present);
    if (options.restart_database ? shipper.failed_after_restart : shipper.primary == kKilled) {
      ++on_killed;
      if (shipper.moved_after) {
        ++moved;
        moved_seconds.push_back(std::chrono::duration<double>(*shipper.moved_after).count());
        move_cost_seconds.push_back(std::chrono::duration<double>(*shipper.move_cost).count());
      }
    }
  }
  auto quantile = [](std::vector<double>& values, double q) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))];
  };
  std::printf("  %" PRId64 " uploads answered in %.1f s (%.0f/s), %" PRId64
              " in flight at the kill; failed tries (sent again): %s; %" PRId64
              " moves to the other replica\n",
              uploads.ok, seconds, static_cast<double>(uploads.ok) / seconds, in_flight_at_kill,
              uploads.Failures().c_str(), moves);
  std::printf(options.restart_database
                  ? "database restart: %d agents on 2 PostgreSQL replicas, the server restarted "
                    "under %.0f uploads/s; %" PRId64 " uploads acknowledged, %" PRId64
                    " samples stored, lost %" PRId64 ", duplicated %" PRId64
                    ", never acknowledged %" PRId64 "; %" PRId64 " of %" PRId64
                    " agents with a failed try acknowledged again, restart to next acknowledged "
                    "upload p50 %.2f s p99 %.2f s max %.2f s (uploads every %.0f s; beyond the "
                    "upload's schedule p99 %.2f s max %.2f s)\n"
                  : "failover: %d agents on 2 PostgreSQL replicas, one SIGKILLed under %.0f "
                    "uploads/s; %" PRId64 " uploads acknowledged, %" PRId64
                    " samples stored, lost %" PRId64 ", duplicated %" PRId64
                    ", never acknowledged %" PRId64 "; %" PRId64 " of %" PRId64
                    " agents of the killed replica moved, kill to next acknowledged upload p50 "
                    "%.2f s p99 %.2f s max %.2f s (uploads every %.0f s; beyond the upload's "
                    "schedule p99 %.2f s max %.2f s)\n",
              agents_count, static_cast<double>(uploads.ok) / seconds, acknowledged, records,
              lost, duplicated, unacknowledged, moved, on_killed, quantile(moved_seconds, 0.5),
              quantile(moved_seconds, 0.99), quantile(moved_seconds, 1.0),
              std::chrono::duration<double>(options.upload_interval).count(),
              quantile(move_cost_seconds, 0.99), quantile(move_cost_seconds, 1.0));
  if (options.smoke) {
    // Counts, not times.
    std::vector<std::string> problems;
    if (acknowledged == 0) problems.push_back("no upload was acknowledged");
    if (lost != 0) problems.push_back(std::to_string(lost) + " acknowledged uploads lost");
    if (duplicated != 0) problems.push_back(std::to_string(duplicated) + " stored twice");
    if (unacknowledged != 0) problems.push_back(std::to_string(unacknowledged) + " never acked");
    if (options.restart_database && on_killed == 0) {
      problems.push_back("no upload was refused during the restart: it tested nothing");
    }
    if (moved != on_killed) {
      problems.push_back(std::to_string(on_killed - moved) +
                         (options.restart_database
                              ? " agents with a failed try were never acknowledged again"
                              : " agents of the killed replica never moved"));
    }
    for (const std::string& problem : problems)
      std::fprintf(stderr, "FAILED: %s\n", problem.c_str());
    if (!problems.empty()) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace uplink::bench

int main(int argc, char** argv) {
  using namespace uplink;
  bench::Options options;
  FlagSet flags("bench_load");
  flags.Int("agents", &options.agents, "simulated agents (each one connection)");
  flags.Duration("sustain", &options.sustain, "length of the sustained phase");
  flags.Duration("saturate", &options.saturate, "length of each capacity run");
  flags.Duration("upload-interval", &options.upload_interval, "each agent's node upload interval");
  flags.Duration("report-interval", &options.report_interval,
                 "each agent's inventory report interval");
  flags.Duration("scrape-interval", &options.scrape_interval,
                 "how often the sustained phase scrapes the console's /metrics (0: never)");
  flags.Int("pool", &options.pool, "keep-alive connections shared by uploads and reports");
  flags.Int("closed-loop", &options.closed_loop, "connections of the capacity runs");
  flags.Int("ramp-per-second", &options.ramp_per_second, "long polls opened per second");
  flags.String("console", &options.console,
               "http://IPv4:PORT of a running console (default: start one)");
  flags.String("admin-key-file", &options.admin_key_file, "its admin API key, with --console");
  flags.Int("console-pid", &options.console_pid, "its process, for CPU and memory figures");
  flags.Bool("nginx", &options.nginx, "measure nginx-light answering 204 as the floor");
  flags.Bool("smoke", &options.smoke, "check that every request was answered and counted");
  flags.String("store", &options.store,
               "the consoles' store: sqlite, postgres (a durable server of the bench's own) or "
               "postgres://HOST/DB?user=U");
  flags.String("store-password-file", &options.store_password_file,
               "the password of a --store postgres:// URL");
  flags.Int("database-rtt-us", &options.database_rtt_us,
            "with --store postgres: the consoles reach the database through a loopback proxy "
            "adding this round trip, as across a network (0: its Unix socket)");
  flags.Bool("failover", &options.failover,
             "two replicas on PostgreSQL under uploads, one killed with SIGKILL after "
             "--kill-after: count what was acknowledged, stored, lost and duplicated");
  flags.Duration("kill-after", &options.kill_after, "with --failover: when the kill comes");
  flags.Bool("restart-database", &options.restart_database,
             "with --failover: restart the bench's PostgreSQL server at --kill-after instead of "
             "killing a replica");
  if (Status parsed = flags.Parse(std::vector<std::string>(argv + 1, argv + argc)); !parsed.ok()) {
    std::fprintf(stderr, "%s\n%s", parsed.ToString().c_str(), flags.Usage().c_str());
    return 2;
  }
  if (options.store != "sqlite" && options.store != "postgres" &&
      !options.store.starts_with("postgres://") && !options.store.starts_with("postgresql://")) {
    std::fprintf(stderr, "--store must be sqlite, postgres or a postgres:// URL\n");
    return 2;
  }
  if (options.failover && options.store == "sqlite") options.store = "postgres";
  if (options.database_rtt_us < 0 || options.database_rtt_us > 1'000'000 ||
      (options.database_rtt_us > 0 && options.store != "postgres")) {
    std::fprintf(stderr, "--database-rtt-us needs --store postgres and 0 to 1000000 (1 s)\n");
    return 2;
  }
  if (options.restart_database && (!options.failover || options.store != "postgres")) {
    std::fprintf(stderr, "--restart-database needs --failover and the bench's own server\n");
    return 2;
  }
  if (options.failover && options.kill_after + options.upload_interval > options.sustain) {
    // Else some agents of the killed replica would have nothing left to send.
    std::fprintf(stderr, "--kill-after must leave at least --upload-interval of --sustain\n");
    return 2;
  }
  if (options.agents < 1 || options.pool < 1 || options.closed_loop < 1 ||
      options.ramp_per_second < 1) {
    std::fprintf(stderr,
                 "--agents, --pool, --closed-loop and --ramp-per-second must be positive\n");
    return 2;
  }
  (void)log::SetMinLevel("error");
  ::signal(SIGPIPE, SIG_IGN);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each phase's figures as they come, piped or not
  return options.failover ? bench::RunFailover(options) : bench::Run(options);
}
