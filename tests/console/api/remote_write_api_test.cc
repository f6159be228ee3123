// The hook between the agent API and remote write: what an upload stored is forwarded once,
// with its connection's labels, after the upload's transaction; what it did not store (a
// duplicate, a refused upload) is not; and the console's /metrics shows the forwarder's.
#include <gtest/gtest.h>

#include "api_fixture.h"
#include "console/remote_write/forwarder.h"
#include "node_sample_util.h"
#include "remote_write_tsdb.h"
#include "support/process.h"

namespace uplink::console {
namespace {

using namespace std::chrono_literals;
using testing::AgentUploadJson;
using testing::Body;
using testing::DecodedSeries;
using testing::Find;
using testing::SampleJson;
using testing::SampleSpec;
using testing::Text;

class RemoteWriteApiTest : public testing::ApiTest {
 protected:
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    remote_write::RemoteWriteOptions forwarding;
    forwarding.url = tsdb_.url();
    forwarding.queue_dir = queue_.File("remote-write");
    forwarding.backoff = {.base = 5ms, .cap = 20ms};
    auto started = remote_write::RemoteWriteForwarder::Start(forwarding, SystemClock());
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    forwarder_ = std::move(started).value();
    options.upload_sink = forwarder_.get();
    return options;
  }
  void SetUp() override {
    ApiTest::SetUp();
    json::object created = CreateConnection(admin_key_, "prod-eu");
    id_ = Text(created, "id");
    token_ = Text(created, "token");
  }
  void TearDown() override {
    api_.reset();  // before the forwarder it points to
    ApiTest::TearDown();
  }

  net::Response Upload(std::int64_t first, const std::vector<json::object>& payloads) {
    net::Request request;
    request.method = "POST";
    request.target = "/api/v1/agent/uploads";
    request.headers.Set("Authorization", "Bearer " + token_);
    request.headers.Set("Content-Type", "application/json");
    request.body = ToJson(AgentUploadJson(first, payloads, "node/" + testing::kSampleNode));
    request.remote_address = testing::kClientAddress;
    return testing::Call(api_->router(), std::move(request));
  }

  json::object Sample(int second, std::int64_t memory_total) const {
    SampleSpec spec;
    spec.at = clock_.Now() - 10min + std::chrono::seconds(second);
    spec.memory_total = memory_total;
    return SampleJson(spec);
  }

  static std::vector<double> MemTotals(const std::vector<DecodedSeries>& all) {
    std::vector<double> values;
    for (const DecodedSeries& series : Find(all, "node_memory_MemTotal_bytes")) {
      values.push_back(series.value);
    }
    return values;
  }

  testing::FakeTsdb tsdb_;
  testing::ScratchDir queue_;
  std::unique_ptr<remote_write::RemoteWriteForwarder> forwarder_;
  std::string id_;
  std::string token_;
};

TEST_F(RemoteWriteApiTest, StoredSamplesAreForwardedOnceWithTheirConnection) {
  ASSERT_EQ(Upload(1, {Sample(0, 1), Sample(30, 2)}).status, 200);
  ASSERT_TRUE(tsdb_.WaitFor([](const auto& all) { return MemTotals(all).size() == 2; }));
  const std::vector<DecodedSeries> first = tsdb_.accepted();
  for (const DecodedSeries& series : first) {
    EXPECT_EQ(series.Label("cluster"), "prod-eu");
    EXPECT_EQ(series.Label("uplink_connection"), id_);
    EXPECT_EQ(series.Label("instance"), testing::kSampleNode);
  }

  // Sent again after a lost reply: stored once, so forwarded once; the next one follows.
  net::Response again = Upload(1, {Sample(0, 1), Sample(30, 2)});
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(Body(again).at("duplicates").as_int64(), 2);
  // A refused upload (a sample with a negative load) stores nothing and forwards nothing.
  json::object bad = Sample(45, 9);
  bad["load"].as_object()["load1"] = -1;
  ASSERT_EQ(Upload(3, {bad}).status, 422);
  ASSERT_EQ(Upload(3, {Sample(60, 3)}).status, 200);
  ASSERT_TRUE(tsdb_.WaitFor([](const auto& all) { return MemTotals(all).size() == 3; }));
  EXPECT_EQ(MemTotals(tsdb_.accepted()), (std::vector<double>{1, 2, 3}));

  // Counted once the TSDB's reply is read, a moment after it kept the series.
  net::Response metrics;
  EXPECT_TRUE(uplink::testing::WaitFor([&] {
    metrics = Send("GET", "/metrics", "");
    return metrics.body.find("uplink_console_remote_write_node_samples_sent_total 3") !=
           std::string::npos;
  })) << metrics.body;
  EXPECT_NE(metrics.body.find("# TYPE uplink_console_remote_write_queue_bytes gauge"),
            std::string::npos);
}

}  // namespace
}  // namespace uplink::console
