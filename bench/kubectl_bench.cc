// bench_kubectl: how fast a kubectl command from the console reaches the cluster.
//
// Real processes on loopback: uplink-console, uplink-agent cluster, kubesim, and a kubectl
// that notes the time it starts (CLOCK_REALTIME, from /bin/date: an upper bound, since sh and
// date start first) and then runs `kubectl version --client`.
//
// 1. 1,000 commands one after another: pickup (POST sent -> kubectl started) and the whole
//    round trip (POST sent -> reply), p50 and p99.
// 2. The baseline in the same run: the reference design, an agent that asks every 2 s for
//    one command without waiting (peers.md), driven through the same console API.
// 3. Idle cost: requests per hour from an agent with nothing to do, counted for 110 s.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "common/json.h"
#include "net/client.h"
#include "support/process.h"

namespace {

using uplink::testing::ChildProcess;
using uplink::testing::TempDir;
using Clock = std::chrono::system_clock;

constexpr char kInstance[] = "bench-cluster-agent";

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
  return values[index];
}

class Bench {
 public:
  bool Start() {
    const std::string bin = UPLINK_BIN_DIR;
    kubesim_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{bin + "/uplink-kubesim", "--listen", "127.0.0.1:0", "--nodes",
                                 "2", "--kubeconfig-out", dir_.File("kubeconfig")},
        dir_.path());
    auto init = uplink::testing::RunCommand(
        {bin + "/uplink-console", "init", "--data-dir", dir_.File("console")});
    if (init.exit_code != 0) return Fail("uplink-console init: " + init.err);
    admin_key_ = std::string(uplink::TrimWhitespace(init.out));
    const int port = uplink::testing::FreePort();
    console_url_ = "http://127.0.0.1:" + std::to_string(port);
    console_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{bin + "/uplink-console", "serve", "--data-dir",
                                 dir_.File("console"), "--listen",
                                 "127.0.0.1:" + std::to_string(port), "--log-level", "warn"},
        dir_.path());
    auto client = uplink::net::HttpClient::Create(
        {.base_url = console_url_, .request_timeout = std::chrono::seconds(90)});
    if (!client.ok()) return Fail("client");
    client_ = std::move(client).value();
    if (!uplink::testing::WaitFor([&] {
          uplink::net::Request probe;
          probe.target = "/healthz";
          auto response = client_->Send(probe);
          return response.ok() && response->status == 200;
        })) {
      return Fail("the console did not start: " + console_->Stderr());
    }
    auto created = Api("POST", "/api/v1/connections",
                       R"({"agent_name":"bench","cluster_name":"bench-cluster"})");
    auto body = uplink::ParseJson(created.body);
    if (created.status != 201 || !body.ok()) return Fail("create connection: " + created.body);
    connection_ = std::string(body->at("id").as_string());
    uplink::testing::WriteFileOrDie(dir_.File("token"),
                                    std::string(body->at("token").as_string()));
    if (Api("PUT", "/api/v1/connections/" + connection_ + "/namespaces",
            R"({"namespaces": ["*"]})").status != 200) {
      return Fail("namespaces");
    }
    // Only the benchmark's commands are noted: the role's snapshots run kubectl too.
    uplink::testing::WriteFileOrDie(dir_.File("kubectl"),
                                    "#!/bin/sh\ncase \"$*\" in *'version --client'*) /bin/date "
                                    "+%s%N >> " + dir_.File("starts") +
                                        " ;; esac\nexec /usr/bin/kubectl \"$@\"\n",
                                    0755);
    if (!uplink::testing::WaitFor(
            [&] { return !uplink::testing::ReadFileOrEmpty(dir_.File("kubeconfig")).empty(); })) {
      return Fail("kubesim did not start: " + kubesim_->Stderr());
    }
    return true;
  }

  bool StartAgent(const std::string& poll_wait) {
    health_port_ = uplink::testing::FreePort();
    agent_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{
            std::string(UPLINK_BIN_DIR) + "/uplink-agent", "cluster", "--console", console_url_,
            "--token-file", dir_.File("token"), "--state-dir", dir_.File("spool-" + poll_wait),
            "--listen", "127.0.0.1:" + std::to_string(health_port_), "--kubectl",
            dir_.File("kubectl"), "--kubeconfig", dir_.File("kubeconfig"), "--cache-dir",
            dir_.File("cache"), "--poll-wait", poll_wait, "--instance", kInstance,
            "--log-level", "warn"},
        dir_.path());
    return uplink::testing::WaitFor([&] { return AgentMetric("uplink_agent_command_polls_total") >= 0; });
  }
  void StopAgent() { agent_.reset(); }

  uplink::net::Response Api(const std::string& method, const std::string& target,
                            const std::string& body) {
    uplink::net::Request request;
    request.method = method;
    request.target = target;
    request.headers.Set("Authorization", "Bearer " + admin_key_);
    if (!body.empty()) request.headers.Set("Content-Type", "application/json");
    request.body = body;
    auto response = client_->Send(request);
    if (!response.ok()) {
      std::fprintf(stderr, "bench_kubectl: %s %s: %s\n", method.c_str(), target.c_str(),
                   response.status().ToString().c_str());
      uplink::net::Response failed;
      failed.status = 0;
      return failed;
    }
    return *response;
  }

  // Sends one command; pickup and round trip in milliseconds, false on failure.
  bool Command(double* pickup_ms, double* round_trip_ms) {
    const size_t starts_before = Starts().size();
    const std::int64_t sent = NowNs();
    auto reply = Api("POST", "/api/v1/connections/" + connection_ + "/kubectl",
                     R"({"argv": ["kubectl", "version", "--client"]})");
    const std::int64_t answered = NowNs();
    const std::vector<std::int64_t> starts = Starts();
    if (reply.status != 200 || starts.size() != starts_before + 1) {
      std::fprintf(stderr, "command failed (%d): %s\n", reply.status, reply.body.c_str());
      return false;
    }
    *pickup_ms = static_cast<double>(starts.back() - sent) / 1e6;
    *round_trip_ms = static_cast<double>(answered - sent) / 1e6;
    return true;
  }

  // The reference design: ask every 2 s for one command without waiting, run it, post the
  // result. Pickup is measured the same way (the stand-in notes when it would start kubectl).
  void PeerAgent(std::atomic<bool>& stop) {
    auto agent = uplink::net::HttpClient::Create({.base_url = console_url_});
    const std::string token =
        std::string(uplink::TrimWhitespace(uplink::testing::ReadFileOrEmpty(dir_.File("token"))));
    while (!stop) {
      uplink::net::Request poll;
      poll.method = "POST";
      poll.target = "/api/v1/agent/commands/poll";
      poll.headers.Set("Authorization", "Bearer " + token);
      poll.headers.Set("Content-Type", "application/json");
      // The same instance name: its first poll replaces the one the stopped agent left held.
      poll.body = std::string(R"({"wait_seconds": 0, "max_commands": 1, "agent_instance": ")") +
                  kInstance + "\"}";
      auto reply = (*agent)->Send(poll);
      if (reply.ok() && reply->status == 200) {
        auto body = uplink::ParseJson(reply->body);
        if (body.ok()) {
          for (const auto& command : body->at("commands").as_array()) {
            std::string line = std::to_string(NowNs()) + "\n";
            uplink::testing::WriteFileOrDie(dir_.File("starts"),
                                            uplink::testing::ReadFileOrEmpty(dir_.File("starts")) +
                                                line);
            uplink::net::Request result;
            result.method = "POST";
            result.target = "/api/v1/agent/commands/" +
                            std::string(command.at("id").as_string()) + "/result";
            result.headers.Set("Authorization", "Bearer " + token);
            result.headers.Set("Content-Type", "application/json");
            result.body = R"({"exit_code": 0, "stdout": "", "stderr": "", "duration_ms": 0})";
            (void)(*agent)->Send(result);
          }
        }
      }
      for (int i = 0; i < 20 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  double AgentMetric(const std::string& name) {
    auto client = uplink::net::HttpClient::Create(
        {.base_url = "http://127.0.0.1:" + std::to_string(health_port_)});
    if (!client.ok()) return -1;
    uplink::net::Request request;
    request.target = "/metrics";
    auto response = (*client)->Send(request);
    if (!response.ok() || response->status != 200) return -1;
    double total = 0;
    size_t at = 0;
    while ((at = response->body.find("\n" + name, at)) != std::string::npos) {
      at += name.size() + 1;
      const size_t space = response->body.find(' ', at);
      const size_t end = response->body.find('\n', space);
      if (response->body[at] == ' ' || response->body[at] == '{') {
        total += std::stod(response->body.substr(space + 1, end - space - 1));
      }
    }
    return total;
  }

 private:
  bool Fail(const std::string& what) {
    std::fprintf(stderr, "bench_kubectl: %s\n", what.c_str());
    return false;
  }
  std::vector<std::int64_t> Starts() {
    std::vector<std::int64_t> out;
    const std::string text = uplink::testing::ReadFileOrEmpty(dir_.File("starts"));
    for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos;
         start = end + 1) {
      out.push_back(std::stoll(text.substr(start, end - start)));
    }
    return out;
  }

  TempDir dir_;
  std::unique_ptr<ChildProcess> kubesim_, console_, agent_;
  std::unique_ptr<uplink::net::HttpClient> client_;
  std::string console_url_, admin_key_, connection_;
  int health_port_ = 0;
};

}  // namespace

int main() {
  Bench bench;
  if (!bench.Start() || !bench.StartAgent("50s")) return 1;
  constexpr int kCommands = 1000;
  std::vector<double> pickup, round_trip;
  for (int i = 0; i < kCommands; ++i) {
    double p = 0, r = 0;
    if (!bench.Command(&p, &r)) return 1;
    pickup.push_back(p);
    round_trip.push_back(r);
    if ((i + 1) % 250 == 0) std::fprintf(stderr, "  %d/%d commands\n", i + 1, kCommands);
  }
  std::printf("bench_kubectl: %d commands one after another, kubectl version --client\n",
              kCommands);
  std::printf("  %-44s %10s %10s\n", "", "p50 ms", "p99 ms");
  std::printf("  %-44s %10.1f %10.1f\n", "pickup: POST sent -> kubectl started",
              Percentile(pickup, 0.5), Percentile(pickup, 0.99));
  std::printf("  %-44s %10.1f %10.1f\n", "round trip: POST sent -> reply",
              Percentile(round_trip, 0.5), Percentile(round_trip, 0.99));

  // Idle: nothing to do for 110 s (two held polls of 50 s, and the snapshot uploads).
  const double polls_before = bench.AgentMetric("uplink_agent_command_polls_total");
  const double uploads_before = bench.AgentMetric("uplink_agent_ship_uploads_total");
  constexpr int kIdleSeconds = 110;
  std::this_thread::sleep_for(std::chrono::seconds(kIdleSeconds));
  const double polls = bench.AgentMetric("uplink_agent_command_polls_total") - polls_before;
  const double uploads = bench.AgentMetric("uplink_agent_ship_uploads_total") - uploads_before;
  bench.StopAgent();

  // The baseline: the reference design's 2 s poll, one command per poll.
  std::atomic<bool> stop{false};
  std::thread peer([&] { bench.PeerAgent(stop); });
  constexpr int kPeerCommands = 30;
  std::vector<double> peer_pickup;
  std::mt19937 random(12345);
  std::uniform_int_distribution<int> arrival_ms(0, 1999);
  for (int i = 0; i < kPeerCommands; ++i) {
    // Commands arrive at any point of the poll interval, as users' do.
    std::this_thread::sleep_for(std::chrono::milliseconds(arrival_ms(random)));
    double p = 0, r = 0;
    if (!bench.Command(&p, &r)) break;
    peer_pickup.push_back(p);
  }
  stop = true;
  peer.join();
  if (peer_pickup.empty()) return 1;
  std::printf("  %-44s %10.1f %10.1f\n", "baseline (2 s poll, reference design): pickup",
              Percentile(peer_pickup, 0.5), Percentile(peer_pickup, 0.99));
  const double ratio = Percentile(pickup, 0.5) / Percentile(peer_pickup, 0.5);
  std::printf("  pickup p50 is %.4fx the reference design's\n", ratio);
  std::printf("  idle agent: %.0f command polls and %.0f uploads in %d s: %.0f requests/hour "
              "(%.0f polls/hour)\n",
              polls, uploads, kIdleSeconds, (polls + uploads) * 3600 / kIdleSeconds,
              polls * 3600 / kIdleSeconds);
  const double p99 = Percentile(pickup, 0.99);
  std::printf("  pickup p99 %.1f ms (target <= 100 ms): %s\n", p99, p99 <= 100 ? "met" : "NOT met");
  return 0;
}
