// What the node role costs on this machine, beside Debian's prometheus-node-exporter in the
// same run, reading the same /proc:
//
// 1. One scrape of /metrics with the same collectors (cpu, stat, meminfo, loadavg, pressure,
//    netdev, diskstats, filesystem): node_exporter limited to those, against
//    `uplink-agent node --listen` (the standalone exporter, which collects on every scrape).
//    CPU seconds of each server process (utime + stime from /proc/PID/stat) per scrape, over
//    kScrapes scrapes after a warm-up; rounds alternate which exporter goes first, and the
//    verdict is the median of the per-round ratios.
// 2. The shipping path in this process: one collection rendered as the console's payload and
//    appended to a spool (the append's fdatasync included), CPU per cycle.
// 3. Peak RSS (VmHWM) of each exporter process after its scrapes, and of `uplink-agent node`
//    shipping to a console over plain HTTP and over TLS (which loads OpenSSL into the agent).
//
// Targets (node telemetry issue): <= 1/10 of node_exporter's CPU per collection and <= 1/4
// of its RSS.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "agent/node/format/payload.h"
#include "agent/node/host/host_collector.h"
#include "common/files.h"
#include "common/json.h"
#include "common/log.h"
#include "net/certs.h"
#include "net/client.h"
#include "spool/spool.h"
#include "support/process.h"

namespace {

using uplink::testing::ChildProcess;
using uplink::testing::TempDir;

constexpr int kScrapes = 1000;  // CPU time moves in 10 ms ticks: 0.01 ms per scrape
constexpr int kRounds = 5;
constexpr int kCycles = 200;
constexpr char kNodeExporter[] = "/usr/bin/prometheus-node-exporter";

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// utime + stime of a process, in seconds.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// VmHWM of a process in KiB.
long PeakRssKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

double ThreadCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Exporter {
  std::string name;
  std::unique_ptr<ChildProcess> process;
  std::unique_ptr<uplink::net::HttpClient> client;
  size_t last_bytes = 0;

  bool Scrape() {
    uplink::net::Request request;
    request.target = "/metrics";
    auto response = client->Send(request);
    if (!response.ok() || response->status != 200) return false;
    last_bytes = response->body.size();
    return true;
  }

  // CPU seconds of the exporter per scrape over kScrapes scrapes; negative on failure.
  double CpuPerScrape() {
    const double before = ProcessCpuSeconds(process->pid());
    for (int i = 0; i < kScrapes; ++i) {
      if (!Scrape()) return -1;
    }
    return (ProcessCpuSeconds(process->pid()) - before) / kScrapes;
  }
};

bool StartExporter(Exporter& exporter, std::vector<std::string> argv, int port,
                   const std::string& log_dir) {
  exporter.process = std::make_unique<ChildProcess>(std::move(argv), log_dir);
  auto client =
      uplink::net::HttpClient::Create({.base_url = "http://127.0.0.1:" + std::to_string(port)});
  if (!client.ok()) return false;
  exporter.client = std::move(*client);
  if (!uplink::testing::WaitFor([&] { return exporter.Scrape(); }, std::chrono::seconds(30))) {
    std::fprintf(stderr, "%s did not answer:\n%s\n", exporter.name.c_str(),
                 exporter.process->Stderr().c_str());
    return false;
  }
  for (int i = 0; i < 10; ++i) exporter.Scrape();  // warm-up
  return true;
}

// The shipping path, in this process: CPU per collection + payload + durable append.
double ShippingCpuPerCycle(const std::string& spool_dir, size_t* payload_bytes) {
  using namespace uplink::agent::node;
  auto host = HostCollector::Create(HostCollectorOptions{});
  auto spool = uplink::spool::Spool::Open(uplink::spool::PosixFileSystem(), spool_dir, {},
                                          uplink::SystemClock());
  if (!host.ok() || !spool.ok()) return -1;
  CollectorSet which = CollectorSet::All();
  which.Remove(Collector::kGpu);
  const double before = ThreadCpuSeconds();
  for (int i = 0; i < kCycles; ++i) {
    NodeSample sample;
    sample.node = "bench";
    sample.collected_at = uplink::SystemClock().Now();
    sample.collected = which;
    (*host)->Collect(which, sample);
    const std::string payload = RenderPayload(sample);
    *payload_bytes = payload.size();
    if (!(*spool)->Append(payload).ok()) return -1;
  }
  return (ThreadCpuSeconds() - before) / kCycles;
}

// Peak RSS of `uplink-agent node` shipping to a real console from `spool_dir`, once its
// first upload is acknowledged: a new spool (the steady state: one sample per upload), or one
// holding a backlog, which goes out in batches of up to 1 MiB of payload. Over TLS when `tls`.
long ShippingPeakRssKib(const std::string& bin, TempDir& dir, const std::string& spool_dir,
                        bool tls) {
  const std::string console_dir = spool_dir + "-console";
  const std::string token_file = spool_dir + "-token";
  const std::string ca_file = spool_dir + "-ca.pem";
  std::vector<std::string> tls_flags;
  if (tls) {
    auto ca = uplink::net::CreateCertificateAuthority("bench_node CA", 1);
    if (!ca.ok()) return -1;
    auto leaf = uplink::net::IssueServerCertificate(*ca, {"127.0.0.1"}, 1);
    if (!leaf.ok()) return -1;
    uplink::testing::WriteFileOrDie(ca_file, ca->cert_pem);
    uplink::testing::WriteFileOrDie(spool_dir + "-cert.pem", leaf->cert_pem);
    uplink::testing::WriteFileOrDie(spool_dir + "-key.pem", leaf->key_pem);
    tls_flags = {"--tls-cert", spool_dir + "-cert.pem", "--tls-key", spool_dir + "-key.pem"};
  }
  auto key = uplink::testing::RunCommand(
      {bin + "/uplink-console", "init", "--data-dir", console_dir});
  if (key.exit_code != 0) return -1;
  const std::string api_key(uplink::TrimWhitespace(key.out));
  const int port = uplink::testing::FreePort();
  const std::string url = (tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port);
  std::vector<std::string> console_args = {bin + "/uplink-console", "serve", "--data-dir",
                                           console_dir, "--listen",
                                           "127.0.0.1:" + std::to_string(port)};
  console_args.insert(console_args.end(), tls_flags.begin(), tls_flags.end());
  ChildProcess console(console_args, dir.path());
  auto client = uplink::net::HttpClient::Create(
      {.base_url = url, .ca_file = tls ? ca_file : std::string()});
  if (!client.ok()) return -1;
  auto send = [&](const std::string& method, const std::string& target, const std::string& body) {
    uplink::net::Request request;
    request.method = method;
    request.target = target;
    request.headers.Set("Authorization", "Bearer " + api_key);
    if (!body.empty()) request.headers.Set("Content-Type", "application/json");
    request.body = body;
    return (*client)->Send(request);
  };
  if (!uplink::testing::WaitFor([&] {
        auto r = send("GET", "/healthz", "");
        return r.ok() && r->status == 200;
      })) {
    return -1;
  }
  auto created = send("POST", "/api/v1/connections",
                      R"({"agent_name":"bench","cluster_name":"bench-cluster"})");
  if (!created.ok() || created->status != 201) return -1;
  auto body = uplink::ParseJson(created->body);
  if (!body.ok()) return -1;
  uplink::testing::WriteFileOrDie(token_file, std::string(body->at("token").as_string()));
  const int health_port = uplink::testing::FreePort();
  std::vector<std::string> agent_args = {
      bin + "/uplink-agent", "node", "--console", url, "--token-file", token_file,
      "--state-dir", spool_dir, "--node-name", "bench-node", "--listen",
      "127.0.0.1:" + std::to_string(health_port), "--interval", "10s"};
  if (tls) agent_args.insert(agent_args.end(), {"--console-ca-file", ca_file});
  ChildProcess agent(agent_args, dir.path());
  auto health = uplink::net::HttpClient::Create(
      {.base_url = "http://127.0.0.1:" + std::to_string(health_port)});
  if (!health.ok()) return -1;
  // Ready: a sample was collected and spooled, and the shipper has delivered it.
  const bool ready = uplink::testing::WaitFor(
      [&] {
        uplink::net::Request request;
        request.target = "/readyz";
        auto r = (*health)->Send(request);
        if (!r.ok() || r->status != 200) return false;
        request.target = "/metrics";
        auto m = (*health)->Send(request);
        return m.ok() && m->body.find("uplink_agent_ship_uploads_total 1") != std::string::npos;
      },
      std::chrono::seconds(30));
  if (!ready) {
    std::fprintf(stderr, "uplink-agent node did not ship:\n%s\n", agent.Stderr().c_str());
    return -1;
  }
  return PeakRssKib(agent.pid());
}

}  // namespace

int main() {
  (void)uplink::log::SetMinLevel("error");
  if (::access(kNodeExporter, X_OK) != 0) {
    std::fprintf(stderr, "bench_node needs %s: run `make deps`\n", kNodeExporter);
    return 1;
  }
  const std::string bin = UPLINK_BIN_DIR;
  TempDir dir;

  const int ne_port = uplink::testing::FreePort();
  Exporter node_exporter{.name = "node_exporter"};
  if (!StartExporter(node_exporter,
                     {kNodeExporter, "--web.listen-address=127.0.0.1:" + std::to_string(ne_port),
                      "--collector.disable-defaults", "--collector.cpu", "--collector.stat",
                      "--collector.meminfo", "--collector.loadavg", "--collector.pressure",
                      "--collector.netdev", "--collector.diskstats", "--collector.filesystem"},
                     ne_port, dir.path())) {
    return 1;
  }
  const int up_port = uplink::testing::FreePort();
  Exporter uplink_node{.name = "uplink-agent node"};
  if (!StartExporter(uplink_node,
                     {bin + "/uplink-agent", "node", "--listen",
                      "127.0.0.1:" + std::to_string(up_port), "--collectors",
                      "cpu,memory,load,uptime,pressure,network,disk,filesystem"},
                     up_port, dir.path())) {
    return 1;
  }

  std::vector<double> ne_cpu, up_cpu, ratios;
  for (int round = 0; round < kRounds; ++round) {
    const bool uplink_first = round % 2 == 0;
    double up = 0, ne = 0;
    if (uplink_first) up = uplink_node.CpuPerScrape();
    ne = node_exporter.CpuPerScrape();
    if (!uplink_first) up = uplink_node.CpuPerScrape();
    if (up < 0 || ne <= 0) {
      std::fprintf(stderr, "a scrape failed\n");
      return 1;
    }
    up_cpu.push_back(up);
    ne_cpu.push_back(ne);
    ratios.push_back(up / ne);
  }
  const long ne_rss = PeakRssKib(node_exporter.process->pid());
  const long up_rss = PeakRssKib(uplink_node.process->pid());

  size_t payload_bytes = 0;
  const double shipping_cpu = ShippingCpuPerCycle(dir.File("spool"), &payload_bytes);
  if (shipping_cpu < 0) {
    std::fprintf(stderr, "the in-process collection failed\n");
    return 1;
  }
  const long shipping_rss = ShippingPeakRssKib(bin, dir, dir.File("fresh-spool"), false);
  if (shipping_rss < 0) return 1;
  const long tls_rss = ShippingPeakRssKib(bin, dir, dir.File("tls-spool"), true);
  if (tls_rss < 0) return 1;
  // The in-process measurement above left its samples in this spool: a backlog to deliver.
  const long backlog_rss = ShippingPeakRssKib(bin, dir, dir.File("spool"), false);
  if (backlog_rss < 0) return 1;

  const double ratio = Median(ratios);
  const double rss_ratio = static_cast<double>(up_rss) / static_cast<double>(ne_rss);
  std::printf("bench_node: one scrape of the same collectors, %d rounds of %d scrapes "
              "(CPU of the exporter process per scrape, median)\n",
              kRounds, kScrapes);
  std::printf("  %-40s %10.3f ms %8zu bytes\n", "node_exporter 1.5 (Debian)",
              Median(ne_cpu) * 1e3, node_exporter.last_bytes);
  std::printf("  %-40s %10.3f ms %8zu bytes   %.3f x node_exporter (quartiles %.3f-%.3f)\n",
              "uplink-agent node --listen", Median(up_cpu) * 1e3, uplink_node.last_bytes, ratio,
              [&] { auto r = ratios; std::sort(r.begin(), r.end()); return r[1]; }(),
              [&] { auto r = ratios; std::sort(r.begin(), r.end()); return r[3]; }());
  std::printf("  %-40s %10.3f ms %8zu bytes   %.3f x node_exporter's scrape\n",
              "collection + payload + durable append", shipping_cpu * 1e3, payload_bytes,
              shipping_cpu / Median(ne_cpu));
  std::printf("bench_node: peak RSS\n");
  std::printf("  %-40s %10.1f MiB\n", "node_exporter 1.5 (Debian)", ne_rss / 1024.0);
  std::printf("  %-40s %10.1f MiB   %.3f x node_exporter\n", "uplink-agent node --listen",
              up_rss / 1024.0, rss_ratio);
  std::printf("  %-40s %10.1f MiB   %.3f x node_exporter\n",
              "uplink-agent node shipping to a console", shipping_rss / 1024.0,
              static_cast<double>(shipping_rss) / static_cast<double>(ne_rss));
  std::printf("  %-40s %10.1f MiB   %.3f x node_exporter (OpenSSL loaded)\n",
              "  ... over TLS", tls_rss / 1024.0,
              static_cast<double>(tls_rss) / static_cast<double>(ne_rss));
  std::printf("  %-40s %10.1f MiB   %.3f x node_exporter (1 MiB batches)\n",
              "  ... delivering a backlog of samples", backlog_rss / 1024.0,
              static_cast<double>(backlog_rss) / static_cast<double>(ne_rss));
  // The target compares like with like: node_exporter serves plain HTTP and ships nothing.
  const double worst_rss = std::max(up_rss, shipping_rss) / static_cast<double>(ne_rss);
  std::printf("  CPU per collection %.3f x node_exporter (target <= 0.1): %s; peak RSS without "
              "TLS %.3f x (target <= 0.25): %s\n",
              ratio, ratio <= 0.1 ? "met" : "NOT met", worst_rss,
              worst_rss <= 0.25 ? "met" : "NOT met");
  return 0;
}
