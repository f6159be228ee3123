// Forwarding node samples with Prometheus remote write (console/remote_write/): the wire
// format checked by protoc against Prometheus's schema, the node_exporter and dcgm-exporter
// series of a sample, the queue's records (hostile ones too), and the forwarder against a
// receiver on loopback: retries, splitting a refused request, credentials, restarts, the
// queue's cap. tests/e2e/remote_write_e2e_test.cc does it against Debian's Prometheus.
#include <gtest/gtest.h>
#include <snappy.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "api_fixture.h"
#include "common/crypto.h"
#include "common/json.h"
#include "console/api/upload_batch.h"
#include "console/remote_write/forwarder.h"
#include "console/remote_write/node_series.h"
#include "console/remote_write/queue_record.h"
#include "console/remote_write/write_request.h"
#include "node_sample_util.h"
#include "remote_write_tsdb.h"
#include "support/process.h"

namespace uplink::console::remote_write {
namespace {

using console::testing::DecodedSeries;
using console::testing::DecodeWriteRequest;
using console::testing::FakeTsdb;
using console::testing::Find;
using console::testing::SampleJson;
using console::testing::SampleSpec;
using namespace std::chrono_literals;

const std::string kConnectionId = "c0ffee00c0ffee00c0ffee00c0ffee00";

std::int64_t Millis(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// ---- the wire format ----

TEST(WriteRequestTest, ProtocDecodesItAgainstPrometheusSchema) {
  WriteRequestBuilder builder;
  const Label labels[] = {
      {"zone", "b"}, {"instance", "gpu-node-1"}, {"empty", ""}, {"UUID", "GPU-1"}};
  builder.Add("node_load1", labels, 0.52, 1'800'000'000'125);
  builder.Add("up", {}, -1.5e300, 1);
  EXPECT_EQ(builder.series(), 2u);
  auto decoded = uplink::testing::RunCommand(
      {"/usr/bin/protoc", "--decode=prometheus.WriteRequest",
       std::string("--proto_path=") + UPLINK_FIXTURES_DIR + "/prometheus", "remote.proto"},
      60s, std::nullopt, builder.bytes());
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err << " (protoc is Debian's protobuf-compiler)";
  // Sorted by name (upper case before "__name__"), the empty label left out.
  EXPECT_EQ(decoded.out,
            "timeseries {\n"
            "  labels {\n    name: \"UUID\"\n    value: \"GPU-1\"\n  }\n"
            "  labels {\n    name: \"__name__\"\n    value: \"node_load1\"\n  }\n"
            "  labels {\n    name: \"instance\"\n    value: \"gpu-node-1\"\n  }\n"
            "  labels {\n    name: \"zone\"\n    value: \"b\"\n  }\n"
            "  samples {\n    value: 0.52\n    timestamp: 1800000000125\n  }\n"
            "}\n"
            "timeseries {\n"
            "  labels {\n    name: \"__name__\"\n    value: \"up\"\n  }\n"
            "  samples {\n    value: -1.5e+300\n    timestamp: 1\n  }\n"
            "}\n");
}

TEST(WriteRequestTest, RequestsJoinByConcatenation) {
  WriteRequestBuilder first, second;
  first.Add("a", {}, 1, 10);
  second.Add("b", {}, 2, 20);
  const std::vector<DecodedSeries> joined = DecodeWriteRequest(first.Take() + second.Take());
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_EQ(joined[0].Label("__name__"), "a");
  EXPECT_EQ(joined[1].Label("__name__"), "b");
  EXPECT_EQ(joined[1].value, 2);
  EXPECT_EQ(joined[1].timestamp_ms, 20);
  EXPECT_EQ(first.series(), 0u);  // Take empties it
}

TEST(WriteRequestTest, SnappyBlockFormatRoundTrips) {
  std::string data;
  for (int i = 0; i < 10'000; ++i) data += "node_cpu_seconds_total" + std::to_string(i % 7);
  const std::string compressed = SnappyCompress(data);
  EXPECT_LT(compressed.size(), data.size() / 4);
  std::string back;
  ASSERT_TRUE(snappy::Uncompress(compressed.data(), compressed.size(), &back));
  EXPECT_EQ(back, data);
}

// ---- a node sample's series ----

std::vector<DecodedSeries> SeriesOf(const json::object& payload) {
  WriteRequestBuilder builder;
  auto count = AppendNodeSampleSeries(payload, {kConnectionId, "prod-a"}, builder);
  EXPECT_TRUE(count.ok()) << count.status().ToString();
  std::vector<DecodedSeries> series = DecodeWriteRequest(builder.bytes());
  EXPECT_EQ(series.size(), count.value_or(0));
  return series;
}

double ValueOf(const std::vector<DecodedSeries>& all, const std::string& name,
               const std::map<std::string, std::string>& labels = {}) {
  auto found = Find(all, name, labels);
  EXPECT_EQ(found.size(), 1u) << name;
  return found.empty() ? -1 : found.front().value;
}

TEST(NodeSeriesTest, NodeExporterAndDcgmNamesWithTheSamplesFigures) {
  SampleSpec spec;
  spec.cpu_user = 81234.5;
  spec.cpu_idle = 7712345.25;
  spec.memory_total = 540'000'000'000;
  spec.memory_available = 500'000'000'000;
  spec.load1 = 0.52;
  spec.receive_bytes = 123'456'789;
  spec.read_bytes = 1024;
  spec.gpu_utilization = 97;
  const std::vector<DecodedSeries> all = SeriesOf(SampleJson(spec));

  EXPECT_EQ(ValueOf(all, "node_cpu_seconds_total", {{"mode", "user"}}), 81234.5);
  EXPECT_EQ(ValueOf(all, "node_cpu_seconds_total", {{"mode", "idle"}}), 7712345.25);
  EXPECT_EQ(Find(all, "node_cpu_seconds_total").size(), 8u);
  EXPECT_EQ(ValueOf(all, "uplink_node_cpus"), 64);
  EXPECT_EQ(ValueOf(all, "node_memory_MemTotal_bytes"), 540e9);
  EXPECT_EQ(ValueOf(all, "node_memory_MemAvailable_bytes"), 500e9);
  EXPECT_EQ(ValueOf(all, "node_memory_MemFree_bytes"), 100);
  EXPECT_EQ(ValueOf(all, "node_load1"), 0.52);
  EXPECT_EQ(ValueOf(all, "node_load15"), 0.33);
  EXPECT_EQ(ValueOf(all, "node_boot_time_seconds"), console::testing::kSampleBootTime);
  EXPECT_EQ(ValueOf(all, "node_time_seconds"), 1'800'000'000);
  EXPECT_EQ(ValueOf(all, "node_pressure_cpu_waiting_seconds_total"), 12.5);
  EXPECT_EQ(ValueOf(all, "node_pressure_io_stalled_seconds_total"), 2.9);
  EXPECT_TRUE(Find(all, "node_pressure_memory_waiting_seconds_total").empty());  // not sent
  EXPECT_EQ(ValueOf(all, "node_network_receive_bytes_total", {{"device", "eth0"}}), 123456789);
  // Every interface, as node_exporter shows them (the console's own sums leave lo out).
  EXPECT_EQ(ValueOf(all, "node_network_receive_bytes_total", {{"device", "lo"}}), 999999);
  EXPECT_EQ(ValueOf(all, "node_disk_read_bytes_total", {{"device", "nvme0n1"}}), 1024);
  EXPECT_EQ(ValueOf(all, "node_disk_io_time_seconds_total", {{"device", "nvme0n1"}}), 0.5);
  const std::map<std::string, std::string> root = {
      {"mountpoint", "/"}, {"device", "/dev/nvme0n1p1"}, {"fstype", "ext4"}};
  EXPECT_EQ(ValueOf(all, "node_filesystem_avail_bytes", root), 500);
  EXPECT_EQ(ValueOf(all, "node_filesystem_device_error", root), 0);
  EXPECT_EQ(ValueOf(all, "node_uname_info", {{"nodename", spec.node}}), 1);

  const std::map<std::string, std::string> gpu1 = {{"gpu", "1"},
                                                   {"UUID", "GPU-1"},
                                                   {"device", "nvidia1"},
                                                   {"modelName", "NVIDIA H100 80GB HBM3"},
                                                   {"Hostname", spec.node}};
  EXPECT_EQ(ValueOf(all, "DCGM_FI_DEV_GPU_UTIL", gpu1), 97);
  EXPECT_EQ(ValueOf(all, "DCGM_FI_DEV_GPU_TEMP", gpu1), 61);
  EXPECT_EQ(ValueOf(all, "DCGM_FI_DEV_POWER_USAGE", gpu1), 512.5);
  // Whole MiB, as DCGM reports framebuffer memory.
  EXPECT_EQ(ValueOf(all, "DCGM_FI_DEV_FB_USED", gpu1), 58368);
  EXPECT_EQ(ValueOf(all, "DCGM_FI_DEV_FB_FREE", gpu1), (85520809984 - 61203283968) >> 20);
  EXPECT_TRUE(Find(all, "DCGM_FI_DEV_SM_CLOCK").empty());  // absent from the sample

  for (const DecodedSeries& series : all) {
    EXPECT_EQ(series.Label("job"), "uplink");
    EXPECT_EQ(series.Label("instance"), spec.node);
    EXPECT_EQ(series.Label("cluster"), "prod-a");
    EXPECT_EQ(series.Label("uplink_connection"), kConnectionId);
    EXPECT_EQ(series.timestamp_ms, Millis(spec.at));
  }
}

TEST(NodeSeriesTest, AFailedFilesystemHasOnlyItsDeviceError) {
  json::object payload = SampleJson(SampleSpec{});
  payload["filesystems"] = json::array{{{"mountpoint", "/mnt/nfs"},
                                        {"device", "nfs:/export"},
                                        {"fstype", "nfs4"},
                                        {"error", "statvfs did not answer within 5 s"}}};
  const std::vector<DecodedSeries> all = SeriesOf(payload);
  EXPECT_EQ(ValueOf(all, "node_filesystem_device_error", {{"mountpoint", "/mnt/nfs"}}), 1);
  EXPECT_TRUE(Find(all, "node_filesystem_size_bytes").empty());
}

TEST(NodeSeriesTest, BootTimeFromTheUptimeWhenBtimeIsAbsent) {
  json::object payload = SampleJson(SampleSpec{});
  payload.erase("boot_time");
  payload["uptime_seconds"] = 1000.5;
  EXPECT_EQ(ValueOf(SeriesOf(payload), "node_boot_time_seconds"), 1'800'000'000 - 1000.5);
}

TEST(NodeSeriesTest, ASampleWithoutNodeOrTimeIsRefused) {
  WriteRequestBuilder builder;
  json::object payload = SampleJson(SampleSpec{});
  payload["collected_at"] = "yesterday";
  EXPECT_EQ(AppendNodeSampleSeries(payload, {}, builder).status().code(),
            StatusCode::kInvalidArgument);
  payload = SampleJson(SampleSpec{});
  payload.erase("node");
  EXPECT_EQ(AppendNodeSampleSeries(payload, {}, builder).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(builder.series(), 0u);
}

// ---- the queue's records ----

TEST(QueueRecordTest, RoundTrips) {
  const std::vector<QueuedSample> samples = {
      {"c1", "prod-a", R"({"kind":"node_sample"})"},
      {"c2", "", std::string(300, 'x')},  // a length over one varint byte
  };
  auto decoded = DecodeQueueRecord(EncodeQueueRecord(samples));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->size(), 2u);
  EXPECT_EQ((*decoded)[0].connection_id, "c1");
  EXPECT_EQ((*decoded)[0].cluster_name, "prod-a");
  EXPECT_EQ((*decoded)[1].payload, std::string(300, 'x'));
  EXPECT_TRUE(DecodeQueueRecord(EncodeQueueRecord({})).value().empty());
}

TEST(QueueRecordTest, HostileRecordsAreRefusedWhole) {
  const std::string good = EncodeQueueRecord(std::vector<QueuedSample>{{"c1", "a", "{}"}});
  const std::vector<std::string> hostile = {
      "",                                             // no version
      std::string(1, '\x02') + good.substr(1),        // unknown version
      good.substr(0, good.size() - 1),                // ends inside the payload
      good.substr(0, 3),                              // ends inside a field
      good + "\x05",                                  // a length past the end
      std::string("\x01") + std::string(11, '\xff'),  // a varint longer than ten bytes
      std::string("\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11),  // a length of 2^64-1
      std::string("\x01\x80", 2),                                       // a varint cut short
  };
  for (const std::string& record : hostile) {
    auto decoded = DecodeQueueRecord(record);
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument)
        << ::testing::PrintToString(record);
  }
}

// ---- the forwarder ----

// A node-stream upload of `payloads`, parsed as the API parses it, sequences from `first`.
UploadBatch NodeBatch(const std::vector<json::object>& payloads, std::int64_t first = 1,
                      const std::string& node = console::testing::kSampleNode) {
  auto parsed = protocol::DecodeUpload(
      json::value(console::testing::AgentUploadJson(first, payloads, "node/" + node)));
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed.ok() && std::holds_alternative<protocol::DecodedUpload>(*parsed));
  return parsed.ok() && std::holds_alternative<protocol::DecodedUpload>(*parsed)
             ? StoreBatchOf(std::get<protocol::DecodedUpload>(std::move(*parsed)))
             : UploadBatch{};
}

json::object Sample(int second, const std::string& node = console::testing::kSampleNode,
                    std::int64_t memory_total = 1000) {
  SampleSpec spec;
  spec.node = node;
  spec.at = FromUnixSeconds(1'800'000'000 + second);
  spec.memory_total = memory_total;
  return SampleJson(spec);
}

Connection TheConnection() {
  Connection connection;
  connection.id = kConnectionId;
  connection.cluster_name = "prod-a";
  return connection;
}

UploadOutcome Stored(const UploadBatch& batch, std::int64_t duplicates = 0) {
  UploadOutcome outcome;
  outcome.duplicates = duplicates;
  outcome.stored = static_cast<std::int64_t>(batch.records.size()) - duplicates;
  return outcome;
}

// MemTotal values of the node_memory_MemTotal_bytes series received, in arrival order.
std::vector<double> MemTotals(const std::vector<DecodedSeries>& all) {
  std::vector<double> values;
  for (const DecodedSeries& series : Find(all, "node_memory_MemTotal_bytes")) {
    values.push_back(series.value);
  }
  return values;
}

class ForwarderTest : public ::testing::Test {
 protected:
  RemoteWriteOptions Options(const std::string& url) {
    RemoteWriteOptions options;
    options.url = url;
    options.queue_dir = dir_.File("queue");
    options.backoff = {.base = 5ms, .cap = 20ms};
    options.request_timeout = 10s;
    return options;
  }
  std::unique_ptr<RemoteWriteForwarder> Start(const RemoteWriteOptions& options) {
    auto started = RemoteWriteForwarder::Start(options, SystemClock());
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    return started.ok() ? std::move(started).value() : nullptr;
  }
  static double Metric(const RemoteWriteForwarder& forwarder, const std::string& sample) {
    std::string text;
    forwarder.RenderMetrics(text);
    const size_t at = text.find("\n" + sample + " ");
    return at == std::string::npos ? -1
                                   : std::strtod(text.c_str() + at + sample.size() + 2, nullptr);
  }

  uplink::testing::TempDir dir_;
};

TEST_F(ForwarderTest, SendsEachNewNodeSampleOnceWithItsHeaders) {
  FakeTsdb tsdb;
  auto forwarder = Start(Options(tsdb.url()));
  ASSERT_TRUE(forwarder);
  // Three records, the first a duplicate of an earlier upload: it is not forwarded again.
  const UploadBatch batch =
      NodeBatch({Sample(0, "n", 1), Sample(30, "n", 2), Sample(60, "n", 3)}, 1, "n");
  forwarder->UploadStored(TheConnection(), batch, Stored(batch, 1));
  ASSERT_TRUE(tsdb.WaitFor([](const auto& all) { return MemTotals(all).size() == 2; }));
  EXPECT_EQ(MemTotals(tsdb.accepted()), (std::vector<double>{2, 3}));
  const auto calls = tsdb.calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls[0].headers.at("Content-Type"), "application/x-protobuf");
  EXPECT_EQ(calls[0].headers.at("Content-Encoding"), "snappy");
  EXPECT_EQ(calls[0].headers.at("X-Prometheus-Remote-Write-Version"), "0.1.0");
  EXPECT_FALSE(calls[0].headers.contains("Authorization"));

  // Other streams carry no node samples.
  UploadBatch other = NodeBatch({Sample(90, "n", 4)}, 4, "n");
  other.stream = "cluster/c1";
  forwarder->UploadStored(TheConnection(), other, Stored(other));
  const UploadBatch next = NodeBatch({Sample(120, "n", 5)}, 5, "n");
  forwarder->UploadStored(TheConnection(), next, Stored(next));
  ASSERT_TRUE(tsdb.WaitFor([](const auto& all) { return MemTotals(all).size() == 3; }));
  EXPECT_EQ(MemTotals(tsdb.accepted()), (std::vector<double>{2, 3, 5}));
  ASSERT_TRUE(uplink::testing::WaitFor([&] {
    return Metric(*forwarder, "uplink_console_remote_write_node_samples_sent_total") == 3;
  }));
  forwarder->Stop();
  EXPECT_EQ(Metric(*forwarder, "uplink_console_remote_write_node_samples_sent_total"), 3);
  EXPECT_EQ(Metric(*forwarder, "uplink_console_remote_write_node_samples_queued_total"), 3);
  EXPECT_EQ(Metric(*forwarder, "uplink_console_remote_write_queue_records"), 0);
}

TEST_F(ForwarderTest, RetriesServerErrorsWithBackOff) {
  FakeTsdb tsdb;
  int failures = 2;
  tsdb.SetPolicy([&](const console::testing::WriteCall&) { return failures-- > 0 ? 503 : 204; });
  auto forwarder = Start(Options(tsdb.url()));
  const UploadBatch batch = NodeBatch({Sample(0)});
  forwarder->UploadStored(TheConnection(), batch, Stored(batch));
  ASSERT_TRUE(tsdb.WaitFor([](const auto& all) { return MemTotals(all).size() == 1; }));
  // Counted once the reply is read, a moment after the receiver kept the series.
  ASSERT_TRUE(uplink::testing::WaitFor([&] {
    return Metric(*forwarder, "uplink_console_remote_write_node_samples_sent_total") == 1;
  }));
  EXPECT_EQ(tsdb.calls().size(), 3u);
  EXPECT_EQ(Metric(*forwarder, "uplink_console_remote_write_requests_total{result=\"5xx\"}"), 2);
  EXPECT_EQ(Metric(*forwarder, "uplink_console_remote_write_requests_total{result=\"2xx\"}"), 1);
}

TEST_F(ForwarderTest, ARefusedRequestIsSplitAndOnlyTheBadSampleDropped) {
  FakeTsdb tsdb;
  // As Prometheus answers 400 to a whole request with one out-of-order sample in it.
  tsdb.SetPolicy([](const console::testing::WriteCall& call) {
    for (const DecodedSeries& series : call.series) {
      if (series.Label("instance") == "stale-node") return 400;
    }
    return 204;
  });
  auto forwarder = Start(Options(tsdb.url()));
  // Four node samples in one request: all of one upload.
  UploadBatch batch = NodeBatch(
      {Sample(0, "n1", 1), Sample(1, "n1", 2), Sample(2, "n1", 3), Sample(3, "n1", 4)}, 1, "n1");
  // The third is another node's (the parser would refuse that on a real stream, so it is
  // swapped in afterwards): the TSDB refuses every request that holds it.
  const std::string stale = ToJson(Sample(2, "stale-node", 3));
  batch.records[2].payload_offset = batch.payloads.size();
  batch.records[2].payload_size = stale.size();
  batch.payloads += stale;
  forwarder->UploadStored(TheConnection(), batch, Stored(batch));
  ASSERT_TRUE(tsdb.WaitFor([](const auto& all) { return MemTotals(all).size() == 3; }));
  ASSERT_TRUE(uplink::testing::WaitFor([&] {
    return Metric(*forwarder, "uplink_console_remote_write_node_samples_sent_total") == 3;
  }));
  forwarder->Stop();
  std::vector<double> totals = MemTotals(tsdb.accepted());
  std::sort(totals.begin(), totals.end());
  EXPECT_EQ(totals, (std::vector<double>{1, 2, 4}));
  EXPECT_EQ(Metric(*forwarder, "uplink_console_remote_write_node_samples_refused_total"), 1);
  EXPECT_EQ(Metric(*forwarder, "uplink_console_remote_write_node_samples_sent_total"), 3);
}

TEST_F(ForwarderTest, RefusedCredentialsKeepEverythingQueued) {
  FakeTsdb tsdb;
  std::atomic<bool> fixed{false};
  tsdb.SetPolicy([&](const console::testing::WriteCall&) { return fixed ? 204 : 401; });
  auto forwarder = Start(Options(tsdb.url()));
  const UploadBatch batch = NodeBatch({Sample(0, "n", 7), Sample(1, "n", 8)}, 1, "n");
  forwarder->UploadStored(TheConnection(), batch, Stored(batch));
  ASSERT_TRUE(tsdb.WaitForCalls(3));  // refused, retried
  EXPECT_TRUE(tsdb.accepted().empty());
  fixed = true;  // the operator fixed the credential
  ASSERT_TRUE(tsdb.WaitFor([](const auto& all) { return MemTotals(all).size() == 2; }));
  EXPECT_EQ(Metric(*forwarder, "uplink_console_remote_write_node_samples_refused_total"), 0);
}

TEST_F(ForwarderTest, CredentialsComeFromFilesReadBeforeEachRequest) {
  FakeTsdb tsdb;
  RemoteWriteOptions options = Options(tsdb.url());
  options.bearer_token_file = dir_.File("token");
  uplink::testing::WriteFileOrDie(options.bearer_token_file, "first-token\n");
  auto forwarder = Start(options);
  UploadBatch batch = NodeBatch({Sample(0)});
  forwarder->UploadStored(TheConnection(), batch, Stored(batch));
  ASSERT_TRUE(tsdb.WaitForCalls(1));
  uplink::testing::WriteFileOrDie(options.bearer_token_file, "second-token");
  batch = NodeBatch({Sample(30)}, 2);
  forwarder->UploadStored(TheConnection(), batch, Stored(batch));
  ASSERT_TRUE(tsdb.WaitForCalls(2));
  EXPECT_EQ(tsdb.calls()[0].headers.at("Authorization"), "Bearer first-token");
  EXPECT_EQ(tsdb.calls()[1].headers.at("Authorization"), "Bearer second-token");
  forwarder.reset();

  // HTTP basic, with the password from its file.
  FakeTsdb basic;
  options = Options(basic.url());
  options.queue_dir = dir_.File("queue-basic");
  options.username = "tenant-1";
  options.password_file = dir_.File("password");
  uplink::testing::WriteFileOrDie(options.password_file, "s3cret:with:colons\n");
  forwarder = Start(options);
  batch = NodeBatch({Sample(0)});
  forwarder->UploadStored(TheConnection(), batch, Stored(batch));
  ASSERT_TRUE(basic.WaitForCalls(1));
  EXPECT_EQ(basic.calls()[0].headers.at("Authorization"),
            "Basic " + Base64Encode("tenant-1:s3cret:with:colons"));
}

TEST_F(ForwarderTest, TheQueueOutlivesARestartWhileTheTsdbIsDown) {
  const int port = uplink::testing::FreePort();  // nothing listens there yet
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/api/v1/write";
  {
    auto forwarder = Start(Options(url));
    const UploadBatch batch = NodeBatch({Sample(0, "n", 11), Sample(30, "n", 12)}, 1, "n");
    forwarder->UploadStored(TheConnection(), batch, Stored(batch));
    ASSERT_TRUE(uplink::testing::WaitFor([&] {
      return Metric(*forwarder, "uplink_console_remote_write_requests_total{result=\"network\"}") >=
             2;
    }));
    // Stopped with both samples unsent: they are on disk.
  }
  FakeTsdb tsdb(port);
  auto forwarder = Start(Options(url));
  ASSERT_TRUE(tsdb.WaitFor([](const auto& all) { return MemTotals(all).size() == 2; }));
  EXPECT_EQ(MemTotals(tsdb.accepted()), (std::vector<double>{11, 12}));
}

TEST_F(ForwarderTest, StopEndsARequestTheTsdbNeverAnswers) {
  FakeTsdb tsdb;
  tsdb.SetPolicy([](const console::testing::WriteCall&) { return 0; });
  RemoteWriteOptions options = Options(tsdb.url());
  options.request_timeout = 600s;
  auto forwarder = Start(options);
  const UploadBatch batch = NodeBatch({Sample(0, "n", 21)}, 1, "n");
  forwarder->UploadStored(TheConnection(), batch, Stored(batch));
  ASSERT_TRUE(tsdb.WaitForCalls(1));
  forwarder->Stop();  // returns: the request in flight is cut short
  forwarder.reset();
  // And the sample is still queued.
  tsdb.SetPolicy({});
  forwarder = Start(Options(tsdb.url()));
  ASSERT_TRUE(tsdb.WaitFor([](const auto& all) { return MemTotals(all).size() == 1; }));
}

TEST_F(ForwarderTest, AtTheQueueCapTheOldestAreDroppedAndCounted) {
  const int port = uplink::testing::FreePort();
  RemoteWriteOptions options =
      Options("http://127.0.0.1:" + std::to_string(port) + "/api/v1/write");
  options.queue_max_bytes = kMinQueueBytes;
  auto forwarder = Start(options);
  // About 3 KB each: 4,000 of them are three times the cap.
  constexpr int kSamples = 4'000;
  for (int i = 0; i < kSamples; i += 100) {
    std::vector<json::object> payloads;
    for (int j = i; j < i + 100; ++j) payloads.push_back(Sample(j, "n", j));
    const UploadBatch batch = NodeBatch(payloads, i + 1, "n");
    forwarder->UploadStored(TheConnection(), batch, Stored(batch));
  }
  ASSERT_TRUE(uplink::testing::WaitFor([&] {
    return Metric(*forwarder, "uplink_console_remote_write_queue_dropped_records_total") > 0 &&
           Metric(*forwarder, "uplink_console_remote_write_queue_records") > 0;
  }));
  EXPECT_LE(Metric(*forwarder, "uplink_console_remote_write_queue_bytes"), kMinQueueBytes);
  forwarder->Stop();
  forwarder.reset();
  FakeTsdb tsdb(port);
  forwarder = Start(options);
  // The newest arrives, the oldest never does.
  ASSERT_TRUE(tsdb.WaitFor([](const auto& all) {
    const auto totals = MemTotals(all);
    return std::find(totals.begin(), totals.end(), kSamples - 1) != totals.end();
  }));
  const auto totals = MemTotals(tsdb.accepted());
  EXPECT_EQ(std::find(totals.begin(), totals.end(), 0), totals.end());
  EXPECT_LT(totals.size(), static_cast<size_t>(kSamples));
}

TEST(RemoteWriteOptionsTest, WhatCannotWorkIsRefusedWithoutQuotingTheUrl) {
  uplink::testing::TempDir dir;
  const std::string token = dir.File("token");
  uplink::testing::WriteFileOrDie(token, "t0ken");
  struct Case {
    RemoteWriteOptions options;
    std::string says;
  };
  auto with = [&](std::string url, auto change) {
    RemoteWriteOptions options;
    options.url = std::move(url);
    options.queue_dir = dir.File("queue");
    change(options);
    return options;
  };
  const auto none = [](RemoteWriteOptions&) {};
  const std::vector<Case> cases = {
      {with("https://user:hunter2@tsdb.example/api/v1/write", none), "--remote-write-url"},
      {with("https://tsdb.example/api/v1/write?token=hunter2", none), "--remote-write-url"},
      {with("ftp://tsdb.example/write", none), "--remote-write-url"},
      {with("http://tsdb.example/api/v1/write",
            [&](RemoteWriteOptions& o) { o.bearer_token_file = token; }),
       "plain http"},
      {with("https://tsdb.example/w",
            [&](RemoteWriteOptions& o) {
              o.bearer_token_file = token;
              o.username = "u";
              o.password_file = token;
            }),
       "not both"},
      {with("https://tsdb.example/w", [&](RemoteWriteOptions& o) { o.username = "u"; }),
       "go together"},
      {with("https://tsdb.example/w",
            [&](RemoteWriteOptions& o) {
              o.username = "a:b";
              o.password_file = token;
            }),
       "cannot contain ':'"},
      {with("https://tsdb.example/w",
            [&](RemoteWriteOptions& o) { o.bearer_token_file = dir.File("missing"); }),
       "--remote-write-bearer-token-file"},
      {with("https://tsdb.example/w",
            [&](RemoteWriteOptions& o) { o.queue_max_bytes = kMinQueueBytes - 1; }),
       "--remote-write-queue-bytes"},
  };
  for (const Case& c : cases) {
    Status status = ValidateRemoteWriteOptions(c.options);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.options.url;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status.message();
    EXPECT_EQ(status.message().find("hunter2"), std::string::npos) << status.message();
  }
  // Credentials over http on loopback, and none over http anywhere, are fine.
  EXPECT_TRUE(
      ValidateRemoteWriteOptions(with("http://127.0.0.1:9090/api/v1/write",
                                      [&](RemoteWriteOptions& o) { o.bearer_token_file = token; }))
          .ok());
  EXPECT_TRUE(
      ValidateRemoteWriteOptions(with("http://victoria.internal:8428/api/v1/write", none)).ok());
  uplink::testing::WriteFileOrDie(token, "two\nlines");
  EXPECT_FALSE(
      ValidateRemoteWriteOptions(with("https://tsdb.example/w", [&](RemoteWriteOptions& o) {
        o.bearer_token_file = token;
      })).ok());
}

}  // namespace
}  // namespace uplink::console::remote_write
