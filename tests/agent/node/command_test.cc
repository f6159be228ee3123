// `uplink-agent node` as a process: one collection printed, the standalone exporter, and the
// usage errors. Shipping to a console is covered end to end in tests/e2e/node_e2e_test.cc.
#include <gtest/gtest.h>

#include "common/json.h"
#include "net/client.h"
#include "support/process.h"

namespace uplink {
namespace {

using std::chrono::seconds;

const std::string kAgent = std::string(UPLINK_BIN_DIR) + "/uplink-agent";
const std::string kFixtureProc =
    std::string(UPLINK_SOURCE_DIR) + "/tests/fixtures/node/real-capture/proc";

testing::CommandResult RunNode(std::vector<std::string> args) {
  args.insert(args.begin(), {kAgent, "node"});
  // No NVIDIA driver or nvidia-smi is looked for: GPU figures come from the GPU tests' fakes.
  args.insert(args.end(), {"--nvml-library", "/nonexistent/libnvidia-ml.so.1", "--nvidia-smi", ""});
  return testing::RunCommand(args, seconds(60),
                             testing::EnvWith({{"NODE_NAME", "fixture-node"}}));
}

TEST(NodeCommand, OnceAsJsonPrintsTheSampleTheConsoleWouldGet) {
  auto result = RunNode({"--once", "--format", "json", "--host-proc", kFixtureProc});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto sample = ParseJson(result.out);
  ASSERT_TRUE(sample.ok()) << result.out;
  const json::object& object = sample->as_object();
  EXPECT_EQ(object.at("kind"), "node_sample");
  EXPECT_EQ(object.at("node"), "fixture-node");
  EXPECT_EQ(object.at("gpu_source"), "none");
  EXPECT_TRUE(object.at("gpus").as_array().empty());
  // The fixture's MemTotal, in bytes.
  const std::string meminfo = testing::ReadFileOrEmpty(kFixtureProc + "/meminfo");
  const std::uint64_t mem_total_kib = std::stoull(meminfo.substr(meminfo.find(':') + 1));
  EXPECT_EQ(object.at("memory").at("total_bytes").to_number<std::uint64_t>(),
            mem_total_kib * 1024);
}

TEST(NodeCommand, OnceAsPrometheusUsesNodeExportersNames) {
  auto result = RunNode({"--once", "--host-proc", kFixtureProc, "--collectors", "cpu,load"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("# TYPE node_cpu_seconds_total counter"), std::string::npos);
  EXPECT_NE(result.out.find("\nnode_load1 "), std::string::npos);
  EXPECT_EQ(result.out.find("node_memory_"), std::string::npos);  // not asked for
}

TEST(NodeCommand, RefusesFlagsItCannotHonourWithAClearMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--once", "--format", "xml"}, "--format must be prometheus or json"},
      {{"--once", "--interval", "5s"}, "--interval must be from 10s to 1h"},
      {{"--once", "--collectors", "cpu,gpus"}, "unknown collector 'gpus'"},
      {{"--token-file", "/tmp/x"}, "--token-file is for shipping to a console: pass --console"},
      {{"--console", "https://console.example"}, "--token-file is required"},
      {{"--once", "agt_pasted-here"}, "unexpected argument: uplink-agent node takes only flags"},
  };
  for (const Case& c : cases) {
    auto result = RunNode(c.args);
    EXPECT_EQ(result.exit_code, 2) << c.message;
    EXPECT_NE(result.err.find(c.message), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find("agt_"), std::string::npos) << result.err;
  }
}

class NodeExporterTest : public ::testing::Test {
 protected:
  void Start(const std::string& host_proc) {
    port_ = testing::FreePort();
    process_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{kAgent, "node", "--listen",
                                 "127.0.0.1:" + std::to_string(port_), "--host-proc", host_proc,
                                 "--nvml-library", "/nonexistent/libnvidia-ml.so.1",
                                 "--nvidia-smi", "", "--node-name", "exporter-node"},
        dir_.path());
    client_ = std::move(
        *net::HttpClient::Create({.base_url = "http://127.0.0.1:" + std::to_string(port_)}));
    ASSERT_TRUE(testing::WaitFor([&] { return Get("/healthz").status == 200; }))
        << process_->Stderr();
  }

  // Status 0 when there was no reply.
  net::Response Get(const std::string& target) {
    net::Request request;
    request.target = target;
    auto response = client_->Send(request);
    if (response.ok()) return *response;
    net::Response none;
    none.status = 0;
    return none;
  }

  testing::TempDir dir_;
  int port_ = 0;
  std::unique_ptr<testing::ChildProcess> process_;
  std::unique_ptr<net::HttpClient> client_;
};

TEST_F(NodeExporterTest, CollectsOnEveryScrapeUnderNodeExportersNames) {
  Start("/proc");
  net::Response first = Get("/metrics");
  ASSERT_EQ(first.status, 200);
  EXPECT_NE(first.body.find("node_cpu_seconds_total{cpu=\"0\",mode=\"user\"}"), std::string::npos);
  EXPECT_NE(first.body.find("node_memory_MemAvailable_bytes "), std::string::npos);
  EXPECT_NE(first.body.find("uplink_agent_node_collections_total 2"), std::string::npos)
      << "one collection at start, one for this scrape";
  net::Response second = Get("/metrics");
  EXPECT_NE(second.body.find("uplink_agent_node_collections_total 3"), std::string::npos);
  EXPECT_EQ(Get("/readyz").status, 200);
  EXPECT_EQ(process_->Stop(), 0);
}

// The standalone exporter speaks no TLS and hashes nothing: OpenSSL, loaded only for a TLS
// connection (net/tls_library.h), and libsodium stay out of its memory. Shipping over TLS,
// which loads OpenSSL, is checked in tests/e2e/node_e2e_test.cc.
TEST_F(NodeExporterTest, MapsNeitherOpenSslNorLibsodium) {
  Start("/proc");
  ASSERT_EQ(Get("/metrics").status, 200);
  const std::string maps =
      testing::ReadFileOrEmpty("/proc/" + std::to_string(process_->pid()) + "/maps");
  ASSERT_NE(maps.find("uplink-agent"), std::string::npos) << maps;
  for (const char* library : {"libssl.so", "libcrypto.so", "libsodium.so"}) {
    EXPECT_EQ(maps.find(library), std::string::npos) << library << " is mapped:\n" << maps;
  }
  EXPECT_EQ(process_->Stop(), 0);
}

TEST_F(NodeExporterTest, IsNotReadyWhileTheHostCannotBeReadAndSaysWhy) {
  Start(dir_.File("no-proc-here"));
  net::Response ready = Get("/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_NE(ready.body.find("could not read cpu"), std::string::npos) << ready.body;
  net::Response metrics = Get("/metrics");
  EXPECT_EQ(metrics.status, 200);  // the gaps themselves are figures
  EXPECT_NE(metrics.body.find("uplink_node_collector_up{collector=\"cpu\"} 0"), std::string::npos);
}

}  // namespace
}  // namespace uplink
