// What authenticating an agent costs the console.
//
// 1. In process: the router's time per request for GET /api/v1/agent/whoami (token lookup by
//    prefix, SHA-256, constant-time compare, revocation/expiry/owner checks, JSON reply) beside
//    GET /healthz, on the same ConsoleApi and SQLite store. The difference is the per-request
//    authentication overhead.
// 2. Over HTTP: requests per second, and console CPU time per request, that one console
//    process pinned to one core serves for each of the two, from keep-alive connections driven
//    by a load generator pinned to the other core. Each round measures both back to back (in
//    alternating order), and the verdict is the median of the rounds' CPU ratios: pairing
//    cancels the drift of a shared machine, which moves both alike within a round.
//
// Target (credentials issue): the authenticated no-op costs under 20% more than /healthz.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "common/json.h"
#include "console/api/console_api.h"
#include "console/setup.h"
#include "net/client.h"
#include "support/process.h"

namespace {

using Clock = std::chrono::steady_clock;
using uplink::testing::ChildProcess;
using uplink::testing::TempDir;

bool PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// The value at `fraction` (0.5: the median) of the sorted values.
double Quantile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5)];
}

double Median(std::vector<double> values) { return Quantile(std::move(values), 0.5); }

// Returns the connection token, or an empty string.
std::string CreateConnection(const uplink::net::Router& router, const std::string& api_key) {
  uplink::net::Request request;
  request.method = "POST";
  request.target = "/api/v1/connections";
  request.headers.Set("Authorization", "Bearer " + api_key);
  request.headers.Set("Content-Type", "application/json");
  request.body = R"({"agent_name":"bench","cluster_name":"bench-cluster"})";
  uplink::net::Response response;
  router.Dispatch(std::move(request), [&](uplink::net::Response r) { response = std::move(r); });
  if (response.status != 201) {
    std::fprintf(stderr, "creating a connection failed: %d %s\n", response.status,
                 response.body.c_str());
    return "";
  }
  return std::string(uplink::ParseJson(response.body)->at("token").as_string());
}

// Nanoseconds per request through the router, median of `rounds`.
double RouterNanosPerRequest(const uplink::net::Router& router, const uplink::net::Request& request,
                             int iterations, int rounds) {
  std::vector<double> samples;
  for (int round = 0; round < rounds; ++round) {
    auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) {
      int status = 0;
      router.Dispatch(request, [&](uplink::net::Response r) { status = r.status; });
      if (status != 200) {
        std::fprintf(stderr, "%s answered %d\n", request.target.c_str(), status);
        std::exit(1);
      }
    }
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                      iterations);
  }
  return Median(samples);
}

// One keep-alive connection sending `request` and reading each reply whole (by
// Content-Length) until `stop`.
void Hammer(int port, const std::string& request, const std::atomic<bool>& stop,
            std::atomic<long>& done, std::atomic<bool>& failed) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    failed = true;
    ::close(fd);
    return;
  }
  std::string buffer;
  char chunk[16384];
  long count = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
      failed = true;
      break;
    }
    // Read one whole reply.
    size_t needed = std::string::npos;
    while (true) {
      size_t header_end = buffer.find("\r\n\r\n");
      if (header_end != std::string::npos && needed == std::string::npos) {
        std::string head = buffer.substr(0, header_end);
        if (head.compare(9, 3, "200") != 0) {
          failed = true;
          break;
        }
        size_t at = head.find("Content-Length: ");
        if (at == std::string::npos) at = head.find("content-length: ");
        size_t length = at == std::string::npos ? 0 : std::strtoul(head.c_str() + at + 16, nullptr, 10);
        needed = header_end + 4 + length;
      }
      if (needed != std::string::npos && buffer.size() >= needed) {
        buffer.erase(0, needed);
        break;
      }
      ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) {
        failed = true;
        break;
      }
      buffer.append(chunk, static_cast<size_t>(n));
    }
    if (failed) break;
    ++count;
  }
  done += count;
  ::close(fd);
}

// Nanoseconds the process has run on a CPU, all threads together (schedstat's first field).
double CpuNanos(pid_t pid) {
  double total = 0;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::string stat = uplink::testing::ReadFileOrEmpty(task.path().string() + "/schedstat");
    total += std::strtod(stat.c_str(), nullptr);
  }
  return total;
}

struct Round {
  double requests_per_second = 0;
  double server_cpu_us_per_request = 0;
};

Round Measure(pid_t server, int port, const std::string& request, int connections,
              std::chrono::milliseconds duration) {
  std::atomic<bool> stop{false};
  std::atomic<long> done{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  double cpu_start = CpuNanos(server);
  auto start = Clock::now();
  for (int i = 0; i < connections; ++i) {
    threads.emplace_back(Hammer, port, std::cref(request), std::cref(stop), std::ref(done),
                         std::ref(failed));
  }
  std::this_thread::sleep_for(duration);
  stop = true;
  for (auto& t : threads) t.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  double cpu = CpuNanos(server) - cpu_start;
  if (failed || done.load() == 0) {
    std::fprintf(stderr, "a request failed during the run\n");
    std::exit(1);
  }
  return Round{static_cast<double>(done.load()) / seconds, cpu / 1000 / done.load()};
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  const auto round_length = std::chrono::milliseconds(argc > 2 ? std::atoi(argv[2]) : 1000);
  const int connections = argc > 3 ? std::atoi(argv[3]) : 4;
  const std::string bin = UPLINK_BIN_DIR;
  const bool two_cores = std::thread::hardware_concurrency() >= 2;
  TempDir dir;
  (void)uplink::log::SetMinLevel("error");

  // In process.
  auto api_key = uplink::console::InitializeConsole(dir.File("inproc"), "bench@localhost",
                                                   uplink::SystemClock());
  if (!api_key.ok()) {
    std::fprintf(stderr, "init failed: %s\n", api_key.status().ToString().c_str());
    return 1;
  }
  auto store = uplink::console::OpenConsoleStore(dir.File("inproc"));
  if (!store.ok()) return 1;
  uplink::console::ConsoleApi api(**store, uplink::SystemClock(), {});
  std::string token = CreateConnection(api.router(), api_key->Reveal());
  if (token.empty()) return 1;
  uplink::net::Request healthz;
  healthz.target = "/healthz";
  healthz.remote_address = "127.0.0.1";
  uplink::net::Request whoami = healthz;
  whoami.target = "/api/v1/agent/whoami";
  whoami.headers.Set("Authorization", "Bearer " + token);
  const int iterations = 20000;
  RouterNanosPerRequest(api.router(), whoami, iterations, 1);  // warm the statement cache
  double health_ns = RouterNanosPerRequest(api.router(), healthz, iterations, rounds);
  double whoami_ns = RouterNanosPerRequest(api.router(), whoami, iterations, rounds);
  std::printf("bench_auth: in process, %d requests x %d rounds (median)\n", iterations, rounds);
  std::printf("  GET /healthz                        %8.2f us/request\n", health_ns / 1000);
  std::printf("  GET /api/v1/agent/whoami (agt_)     %8.2f us/request\n", whoami_ns / 1000);
  std::printf("  authentication overhead             %8.2f us/request\n",
              (whoami_ns - health_ns) / 1000);

  // Over HTTP: the console on core 0 (it inherits this mask), the load on core 1.
  auto init = uplink::testing::RunCommand(
      {bin + "/uplink-console", "init", "--data-dir", dir.File("console")});
  if (init.exit_code != 0) {
    std::fprintf(stderr, "console init failed: %s\n", init.err.c_str());
    return 1;
  }
  std::string key(uplink::TrimWhitespace(init.out));
  const int port = uplink::testing::FreePort();
  if (two_cores) PinToCpu(0);
  ChildProcess console({bin + "/uplink-console", "serve", "--data-dir", dir.File("console"),
                        "--listen", "127.0.0.1:" + std::to_string(port), "--log-level", "warn"},
                       dir.path());
  if (two_cores) PinToCpu(1);
  auto client = uplink::net::HttpClient::Create({.base_url = "http://127.0.0.1:" + std::to_string(port)});
  if (!client.ok()) return 1;
  bool up = uplink::testing::WaitFor([&] {
    uplink::net::Request r;
    r.target = "/healthz";
    auto reply = (*client)->Send(r);
    return reply.ok() && reply->status == 200;
  }, std::chrono::seconds(30));
  if (!up) {
    std::fprintf(stderr, "console did not start:\n%s\n", console.Stderr().c_str());
    return 1;
  }
  uplink::net::Request create;
  create.method = "POST";
  create.target = "/api/v1/connections";
  create.headers.Set("Authorization", "Bearer " + key);
  create.headers.Set("Content-Type", "application/json");
  create.body = R"({"agent_name":"bench","cluster_name":"bench-http"})";
  auto created = (*client)->Send(create);
  if (!created.ok() || created->status != 201) {
    std::fprintf(stderr, "creating the connection failed\n");
    return 1;
  }
  std::string agent_token(uplink::ParseJson(created->body)->at("token").as_string());

  const std::string health_request = "GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n";
  const std::string whoami_request = "GET /api/v1/agent/whoami HTTP/1.1\r\nHost: bench\r\n"
                                     "Authorization: Bearer " + agent_token + "\r\n\r\n";
  Measure(console.pid(), port, whoami_request, connections, std::chrono::milliseconds(300));
  std::vector<double> health_rps, whoami_rps, health_cpu, whoami_cpu, cpu_ratios;
  for (int round = 0; round < rounds; ++round) {
    Round h, w;
    if (round % 2 == 0) {
      h = Measure(console.pid(), port, health_request, connections, round_length);
      w = Measure(console.pid(), port, whoami_request, connections, round_length);
    } else {
      w = Measure(console.pid(), port, whoami_request, connections, round_length);
      h = Measure(console.pid(), port, health_request, connections, round_length);
    }
    health_rps.push_back(h.requests_per_second);
    health_cpu.push_back(h.server_cpu_us_per_request);
    whoami_rps.push_back(w.requests_per_second);
    whoami_cpu.push_back(w.server_cpu_us_per_request);
    cpu_ratios.push_back(w.server_cpu_us_per_request / h.server_cpu_us_per_request);
  }
  std::printf("bench_auth: over HTTP, console pinned to %s, %d keep-alive connections, %d "
              "paired rounds of %lld ms each (median)\n",
              two_cores ? "one core" : "the only core", connections, rounds,
              static_cast<long long>(round_length.count()));
  std::printf("  GET /healthz (baseline)             %8.0f requests/s, console CPU %6.1f us/request\n",
              Median(health_rps), Median(health_cpu));
  std::printf("  GET /api/v1/agent/whoami (agt_)     %8.0f requests/s, console CPU %6.1f us/request\n",
              Median(whoami_rps), Median(whoami_cpu));
  const double ratio = Median(cpu_ratios);
  std::printf("  console CPU per request, whoami/healthz: median of the rounds %.3f (quartiles "
              "%.3f-%.3f)\n",
              ratio, Quantile(cpu_ratios, 0.25), Quantile(cpu_ratios, 0.75));
  std::printf("  the authenticated path costs %.1f%% more than /healthz (target < 20%%): %s\n",
              (ratio - 1) * 100, ratio < 1.20 ? "met" : "NOT met");
  console.Stop();
  return 0;
}
