// End to end: `uplink-console serve --remote-write-url` forwarding node samples to Debian's
// Prometheus, started by the test with its remote-write receiver on loopback. The values
// uploaded are queried back with PromQL under node_exporter's and dcgm-exporter's names and
// match; samples uploaded while Prometheus is down arrive after a console restart; and a real
// `uplink-agent node` reading this machine's /proc shows up as node_exporter would.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <functional>

#include "common/json.h"
#include "common/time.h"
#include "e2e/cluster.h"
#include "net/http.h"
#include "support/process.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPrometheus = "/usr/bin/prometheus";

// Prometheus with no scrape targets and its remote-write receiver on, storing under `dir`.
class Prometheus {
 public:
  Prometheus(const std::string& dir, int port) : port_(port) {
    testing::WriteFileOrDie(dir + "/prometheus.yml", "global:\n  scrape_interval: 1m\n");
    process_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{kPrometheus, "--config.file=" + dir + "/prometheus.yml",
                                 "--storage.tsdb.path=" + dir + "/prometheus-data",
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port),
                                 "--web.enable-remote-write-receiver", "--log.level=warn"},
        dir);
    auto client = net::HttpClient::Create({.base_url = "http://127.0.0.1:" + std::to_string(port)});
    EXPECT_TRUE(client.ok());
    client_ = std::move(*client);
    const bool ready = testing::WaitFor(
        [&] {
          net::Request request;
          request.target = "/-/ready";
          auto reply = client_->Send(request);
          return reply.ok() && reply->status == 200;
        },
        60s);
    EXPECT_TRUE(ready) << "Prometheus did not start:\n" << process_->Stderr();
  }

  std::string write_url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/api/v1/write";
  }

  // The instant vector `promql` evaluates to now.
  json::array Query(const std::string& promql) {
    net::Request request;
    request.target = "/api/v1/query?query=" + net::PercentEncode(promql);
    auto reply = client_->Send(request);
    if (!reply.ok() || reply->status != 200) return {};
    auto body = ParseJson(reply->body);
    if (!body.ok()) return {};
    return body->at("data").at("result").as_array();
  }

  // The single value of `promql` once `ready` holds of it (or the last one seen, NaN if none,
  // after 30 s): samples arrive a moment after their upload.
  double Await(const std::string& promql, const std::function<bool(double)>& ready) {
    double value = std::nan("");
    testing::WaitFor(
        [&] {
          json::array result = Query(promql);
          if (result.size() != 1) return false;
          value =
              std::strtod(std::string(result[0].at("value").at(1).as_string()).c_str(), nullptr);
          return ready(value);
        },
        30s);
    return value;
  }
  double Await(const std::string& promql, double expected) {
    return Await(promql, [&](double value) { return value == expected; });
  }

 private:
  int port_;
  std::unique_ptr<testing::ChildProcess> process_;
  std::unique_ptr<net::HttpClient> client_;
};

// Byte counts are JSON integers in the protocol.
std::int64_t Bytes(double value) { return static_cast<std::int64_t>(value); }

// A node sample of figures chosen by the test, in the protocol's payload.
json::object Sample(const std::string& node, WallTime at, double scale) {
  json::array gpus;
  for (int i = 0; i < 2; ++i) {
    gpus.push_back(json::object{{"index", i},
                                {"uuid", "GPU-e2e-" + std::to_string(i)},
                                {"name", "NVIDIA H100 80GB HBM3"},
                                {"utilization_percent", 40 * scale + i},
                                {"memory_used_bytes", 61203283968},
                                {"memory_total_bytes", 85520809984},
                                {"temperature_celsius", 60 + i},
                                {"power_watts", 512.25 * scale},
                                {"ecc_uncorrected", 0}});
  }
  return json::object{
      {"kind", "node_sample"},
      {"version", 1},
      {"node", node},
      {"collected_at", FormatRfc3339Millis(at)},
      {"boot_time", 1'764'400'000},
      {"cpu",
       {{"count", 64},
        {"seconds",
         {{"user", 81234.5 * scale},
          {"nice", 0.25},
          {"system", 9120.5},
          {"idle", 7712345.75 * scale},
          {"iowait", 120.5},
          {"irq", 0},
          {"softirq", 310.75},
          {"steal", 0}}}}},
      {"memory", {{"total_bytes", 540'000'000'000}, {"available_bytes", Bytes(250e9 * scale)}}},
      {"load", {{"load1", 0.5 * scale}, {"load5", 0.41}, {"load15", 0.33}}},
      {"network", json::array{{{"device", "eth0"},
                               {"receive_bytes", Bytes(123e6 * scale)},
                               {"transmit_bytes", 456'000}}}},
      {"disks",
       json::array{
           {{"device", "nvme0n1"}, {"read_bytes", Bytes(1024 * scale)}, {"written_bytes", 2048}}}},
      {"filesystems", json::array{{{"mountpoint", "/"},
                                   {"device", "/dev/nvme0n1p1"},
                                   {"fstype", "ext4"},
                                   {"size_bytes", 1'000'000'000'000},
                                   {"avail_bytes", Bytes(400e9 * scale)}}}},
      {"gpu_source", "nvml"},
      {"gpus", std::move(gpus)}};
}

class RemoteWriteEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(kPrometheus, X_OK), 0)
        << "Debian's prometheus is missing: apt-get install prometheus (scripts/deps.sh)";
    prometheus_port_ = testing::FreePort();
    token_file_ = d_.dir() + "/tsdb-token";
    testing::WriteFileOrDie(token_file_, "a-token-prometheus-ignores\n");
  }

  void StartConsole() {
    d_.StartConsole({"--remote-write-url",
                     "http://127.0.0.1:" + std::to_string(prometheus_port_) + "/api/v1/write",
                     "--remote-write-bearer-token-file", token_file_});
  }

  void Upload(const Connection& connection, std::int64_t sequence, const json::object& payload) {
    auto client = net::HttpClient::Create({.base_url = d_.console_url()});
    ASSERT_TRUE(client.ok());
    const std::string node(payload.at("node").as_string());
    json::object none{{"records", 0}, {"bytes", 0}};
    net::Request request;
    request.method = "POST";
    request.target = "/api/v1/agent/uploads";
    request.headers.Set("Authorization", "Bearer " + connection.token);
    request.headers.Set("Content-Type", "application/json");
    request.body = ToJson(json::object{
        {"agent_version", "0.1.0"},
        {"stream", "node/" + node},
        {"spool_id", "9f2c4e0a5b7d41c3a8e6f0b1c2d3e4f5"},
        {"first_sequence", sequence},
        {"last_sequence", sequence},
        {"losses", {{"dropped", none}, {"corrupt", none}, {"rejected", none}}},
        {"records", json::array{{{"sequence", sequence},
                                 {"appended_at", FormatRfc3339Millis(SystemClock().Now())},
                                 {"payload", payload}}}}});
    auto reply = (*client)->Send(std::move(request));
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_EQ(reply->status, 200) << reply->body;
  }

  Deployment d_;
  int prometheus_port_ = 0;
  std::string token_file_;
};

TEST_F(RemoteWriteEndToEnd, ValuesUploadedAreQueriedBackWithPromQL) {
  Prometheus prometheus(d_.dir(), prometheus_port_);
  StartConsole();
  Connection connection = d_.CreateConnection("e2e-cluster");
  // Two samples of one node, 30 s apart and just collected.
  const WallTime second = SystemClock().Now() - 1s;
  const WallTime first = second - 30s;
  Upload(connection, 1, Sample("e2e-node", first, 1));
  Upload(connection, 2, Sample("e2e-node", second, 2));
  const double second_at =
      static_cast<double>(
          std::chrono::duration_cast<std::chrono::milliseconds>(second.time_since_epoch())
              .count()) /
      1000;
  auto expect = [&](const std::string& promql, double expected) {
    EXPECT_EQ(prometheus.Await(promql, expected), expected) << promql;
  };

  const std::string node = R"(instance="e2e-node",cluster="e2e-cluster",job="uplink")";
  // Both arrived; the instant queries read the second.
  expect("count_over_time(node_load1{" + node + "}[5m])", 2);
  expect("node_load1{" + node + "}", 1.0);
  expect("node_memory_MemTotal_bytes{" + node + "}", 540e9);
  expect("node_memory_MemAvailable_bytes{" + node + "}", 500e9);
  expect(R"(node_cpu_seconds_total{mode="user",)" + node + "}", 162469);
  expect(R"(node_network_receive_bytes_total{device="eth0",)" + node + "}", 246e6);
  expect(R"(node_disk_read_bytes_total{device="nvme0n1",)" + node + "}", 2048);
  expect(R"(node_filesystem_avail_bytes{mountpoint="/",fstype="ext4",)" + node + "}", 800e9);
  // As dashboards compute them: the uptime, and a counter's increase between the samples.
  expect("node_time_seconds{" + node + "} - node_boot_time_seconds{" + node + "}",
         second_at - 1'764'400'000);
  expect(R"(node_cpu_seconds_total{mode="user",)" + node + "} - " +
             R"(node_cpu_seconds_total{mode="user",)" + node + "} offset 30s",
         81234.5);
  // Stored at the time the sample was collected, to the millisecond.
  expect("timestamp(node_load1{" + node + "})", second_at);
  // dcgm-exporter's names and labels, as its Grafana dashboard selects them.
  const std::string gpu1 = R"(gpu="1",UUID="GPU-e2e-1",device="nvidia1",)"
                           R"(modelName="NVIDIA H100 80GB HBM3",Hostname="e2e-node")";
  expect("DCGM_FI_DEV_GPU_UTIL{" + gpu1 + "}", 81);
  expect("DCGM_FI_DEV_POWER_USAGE{" + gpu1 + "}", 1024.5);
  expect("DCGM_FI_DEV_GPU_TEMP{" + gpu1 + "}", 61);
  expect("DCGM_FI_DEV_FB_USED{" + gpu1 + "}", 58368);
  expect("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{" + gpu1 + "}", 0);
  expect(R"(avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL{Hostname="e2e-node"}))", 80.5);
}

TEST_F(RemoteWriteEndToEnd, SamplesUploadedWhilePrometheusIsDownArriveAfterARestart) {
  StartConsole();  // Prometheus is not running: nothing listens on its port
  Connection connection = d_.CreateConnection("e2e-outage");
  Upload(connection, 1, Sample("outage-node", SystemClock().Now() - 5s, 1.5));
  d_.StopConsole();  // the sample is in the queue's files, not sent

  Prometheus prometheus(d_.dir(), prometheus_port_);
  StartConsole();
  const std::string promql = R"(node_load1{instance="outage-node",cluster="e2e-outage"})";
  EXPECT_EQ(prometheus.Await(promql, 0.75), 0.75);
}

TEST_F(RemoteWriteEndToEnd, ARealNodeRoleShowsUpAsNodeExporterWould) {
  Prometheus prometheus(d_.dir(), prometheus_port_);
  StartConsole();
  Connection connection = d_.CreateConnection("e2e-real");
  const std::string token_file = d_.WriteToken(connection.token);
  testing::ChildProcess agent(
      {d_.bin("uplink-agent"), "node", "--console", d_.console_url(), "--token-file", token_file,
       "--state-dir", d_.dir() + "/node-spool", "--node-name", "e2e-real-node", "--listen",
       "127.0.0.1:" + std::to_string(testing::FreePort()), "--nvml-library",
       "/nonexistent/libnvidia-ml.so.1", "--nvidia-smi", ""},
      d_.dir());
  const std::string meminfo = testing::ReadFileOrEmpty("/proc/meminfo");
  const double mem_total = std::stod(meminfo.substr(meminfo.find(':') + 1)) * 1024;
  const std::string node = R"(instance="e2e-real-node",cluster="e2e-real")";
  EXPECT_EQ(prometheus.Await("node_memory_MemTotal_bytes{" + node + "}", mem_total), mem_total)
      << agent.Stderr();
  EXPECT_EQ(prometheus.Await(R"(node_uname_info{nodename="e2e-real-node"})", 1), 1);
  const auto positive = [](double value) { return value > 0; };
  EXPECT_GT(prometheus.Await("sum(node_cpu_seconds_total{" + node + "})", positive), 0);
  EXPECT_GT(prometheus.Await("count(node_filesystem_size_bytes{" + node + "})", positive), 0);
}

TEST_F(RemoteWriteEndToEnd, ServeRefusesCredentialsInArgvAndExplains) {
  const std::string data_dir = d_.dir() + "/refusing";
  ASSERT_EQ(
      testing::RunCommand({d_.bin("uplink-console"), "init", "--data-dir", data_dir}).exit_code, 0);
  const std::string listen = "127.0.0.1:" + std::to_string(testing::FreePort());
  auto serve = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv{
        d_.bin("uplink-console"), "serve", "--data-dir", data_dir, "--listen", listen};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return testing::RunCommand(argv, 30s);
  };
  auto in_url = serve({"--remote-write-url", "https://tenant:hunter2@tsdb.example/api/v1/push"});
  EXPECT_EQ(in_url.exit_code, 1);
  EXPECT_NE(in_url.err.find("--remote-write-password-file"), std::string::npos) << in_url.err;
  EXPECT_EQ(in_url.err.find("hunter2"), std::string::npos) << in_url.err;
  auto without_url = serve({"--remote-write-bearer-token-file", token_file_});
  EXPECT_EQ(without_url.exit_code, 1);
  EXPECT_NE(without_url.err.find("need --remote-write-url"), std::string::npos) << without_url.err;
}

}  // namespace
}  // namespace uplink::e2e
