// End to end: a console over TLS, and `uplink-agent node` reading this machine's real /proc and
// shipping to it. Samples appear in the console's API within one interval, the plan set in
// the console reaches the agent, and the rates are sane.
#include <gtest/gtest.h>

#include <cmath>

#include "common/json.h"
#include "e2e/cluster.h"
#include "support/process.h"

namespace uplink::e2e {
namespace {

using namespace std::chrono_literals;

// MemTotal of this machine, in bytes.
std::uint64_t MemTotalBytes() {
  const std::string meminfo = testing::ReadFileOrEmpty("/proc/meminfo");
  return std::stoull(meminfo.substr(meminfo.find(':') + 1)) * 1024;
}

double Number(const json::value& value) { return value.to_number<double>(); }

class NodeEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    // Over TLS, as the chart deploys it.
    d_.StartTlsConsole();
    connection_ = d_.CreateConnection("node-e2e");
    token_file_ = d_.WriteToken(connection_.token);
    // The shortest interval the plan allows, so that two samples arrive within the test.
    net::Response plan = d_.Api("PUT", "/api/v1/connections/" + connection_.id + "/node-plan",
                                R"({"interval_seconds": 10})");
    ASSERT_EQ(plan.status, 200) << plan.body;
    health_port_ = testing::FreePort();
    agent_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{d_.bin("uplink-agent"), "node", "--console", d_.console_url(),
                                 "--console-ca-file", d_.ca_file(),
                                 "--token-file", token_file_, "--state-dir",
                                 d_.dir() + "/node-spool", "--node-name", "e2e-node",
                                 "--listen", "127.0.0.1:" + std::to_string(health_port_),
                                 "--nvml-library", "/nonexistent/libnvidia-ml.so.1",
                                 "--nvidia-smi", ""},
        d_.dir());
  }

  json::value Nodes() {
    return d_.ApiJson("GET", "/api/v1/connections/" + connection_.id + "/nodes");
  }

  // The node's entry once it satisfies `ready`; null on timeout.
  json::value WaitForNode(const std::function<bool(const json::object&)>& ready,
                          std::chrono::milliseconds timeout) {
    json::value found;
    testing::WaitFor(
        [&] {
          json::value nodes = Nodes();
          if (!nodes.is_object()) return false;
          for (const json::value& node : nodes.at("nodes").as_array()) {
            if (node.at("node") == "e2e-node" && ready(node.as_object())) {
              found = node;
              return true;
            }
          }
          return false;
        },
        timeout);
    return found;
  }

  Deployment d_;
  Connection connection_;
  std::string token_file_;
  int health_port_ = 0;
  std::unique_ptr<testing::ChildProcess> agent_;
};

TEST_F(NodeEndToEnd, SamplesFromTheRealProcArriveWithinAnIntervalWithSaneRates) {
  // The first sample is collected at start and shipped at once: well within one interval.
  json::value first = WaitForNode([](const json::object&) { return true; }, 10s);
  ASSERT_TRUE(first.is_object()) << agent_->Stderr();
  EXPECT_EQ(first.at("memory_total_bytes").to_number<std::uint64_t>(), MemTotalBytes());
  EXPECT_GT(first.at("cpu_count").to_number<std::uint64_t>(), 0u);
  EXPECT_EQ(first.at("gpu_source"), "none");
  EXPECT_FALSE(first.at("stale").as_bool());
  // The agent loads OpenSSL on demand (net/tls_library.h): this sample came over TLS.
  EXPECT_NE(testing::ReadFileOrEmpty("/proc/" + std::to_string(agent_->pid()) + "/maps")
                .find("libssl.so.3"),
            std::string::npos);

  // The second, one interval (10 s, the plan set in the console) later, gives rates.
  json::value second = WaitForNode(
      [](const json::object& node) { return !node.at("cpu_percent").is_null(); }, 30s);
  ASSERT_TRUE(second.is_object()) << agent_->Stderr();
  const double cpu = Number(second.at("cpu_percent"));
  EXPECT_GE(cpu, 0);
  EXPECT_LE(cpu, 100);
  for (const char* rate :
       {"network_receive_bytes_per_second", "network_transmit_bytes_per_second",
        "disk_read_bytes_per_second", "disk_written_bytes_per_second"}) {
    ASSERT_FALSE(second.at(rate).is_null()) << rate;
    const double value = Number(second.at(rate));
    EXPECT_GE(value, 0) << rate;
    EXPECT_LT(value, 100e9) << rate;  // under 100 GB/s: not a counter taken as a rate
  }
  const double used = Number(second.at("memory_used_percent"));
  EXPECT_GT(used, 0);
  EXPECT_LT(used, 100);
  EXPECT_FALSE(second.at("filesystems").as_array().empty());

  // The series of the same figures.
  json::value series = d_.ApiJson(
      "GET", "/api/v1/connections/" + connection_.id +
                 "/nodes/e2e-node/series?metric=cpu_percent&since=5m&step=10");
  ASSERT_TRUE(series.is_object());
  EXPECT_EQ(series.at("unit"), "percent");
  size_t points_with_values = 0;
  for (const json::value& point : series.at("series").at(0).at("points").as_array()) {
    if (!point.at(1).is_null()) ++points_with_values;
  }
  EXPECT_GE(points_with_values, 1u);

  // The agent is ready, stops cleanly, and nothing was lost on the way.
  EXPECT_EQ(d_.AgentProbe(health_port_, "/readyz"), 200);
  EXPECT_EQ(agent_->Stop(20s), 0) << agent_->Stderr();
  json::value stream;
  json::value connection = d_.ApiJson("GET", "/api/v1/connections/" + connection_.id);
  for (const json::value& entry : connection.at("streams").as_array()) {
    if (entry.at("stream") == "node/e2e-node") stream = entry;
  }
  ASSERT_TRUE(stream.is_object()) << json::serialize(connection);
  EXPECT_EQ(stream.at("lost_records").to_number<std::uint64_t>(), 0u) << json::serialize(stream);
  EXPECT_GE(stream.at("records_stored").to_number<std::uint64_t>(), 2u);
}

}  // namespace
}  // namespace uplink::e2e
