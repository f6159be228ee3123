// Node metrics end to end through the router: agents upload node samples
// (POST /api/v1/agent/uploads), users read the node list and series and set the plan, which
// comes back in the upload reply. Hostile samples, exactly-once, arrival order, resets,
// reboots, gaps, rollups against raw points, retention, auth and metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "api_fixture.h"
#include "common/gzip.h"
#include "node_sample_util.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::SampleJson;
using testing::SampleSpec;
using testing::Text;

const std::string& kStream = testing::kNodeStream;
using testing::kSpoolA;
using testing::kSpoolB;

class NodesApiTest : public testing::AgentUploadTest {
 protected:
  void SetUp() override {
    AgentUploadTest::SetUp();
    t0_ = clock_.Now();
  }

  // The sample collected `offset` after the test began, CPU busy 25% of 64 CPUs, 1000 bytes
  // received and 4096 read per second, since a boot long before.
  SampleSpec At(seconds offset) const {
    SampleSpec spec;
    spec.at = t0_ + offset;
    double elapsed = 100'000 + static_cast<double>(offset.count());
    spec.cpu_user = 16 * elapsed;
    spec.cpu_idle = 48 * elapsed;
    spec.receive_bytes = 1000 * static_cast<std::int64_t>(elapsed);
    spec.read_bytes = 4096 * static_cast<std::int64_t>(elapsed);
    return spec;
  }

  std::vector<SampleSpec> Every30s(seconds from, seconds to) const {
    std::vector<SampleSpec> samples;
    for (seconds at = from; at < to; at += seconds(30)) samples.push_back(At(at));
    return samples;
  }

  json::object UploadBody(std::int64_t first, const std::vector<json::object>& payloads,
                          const std::string& stream = kStream,
                          const std::string& spool = kSpoolA) {
    return testing::AgentUploadJson(first, payloads, stream, spool, "gpu-node-0001");
  }

  json::object UploadSamples(std::int64_t first, const std::vector<SampleSpec>& samples,
                             const std::string& spool = kSpoolA) {
    std::vector<json::object> payloads;
    for (const SampleSpec& spec : samples) payloads.push_back(SampleJson(spec));
    net::Response response = Upload(UploadBody(first, payloads, kStream, spool));
    EXPECT_EQ(response.status, 200) << response.body.substr(0, 400);
    return Body(response);
  }

  net::Response Get(const std::string& path, const std::string& credential = "") {
    return Send("GET", "/api/v1/connections/" + id_ + path,
                credential.empty() ? admin_key_ : credential);
  }

  json::array Nodes() {
    net::Response response = Get("/nodes");
    EXPECT_EQ(response.status, 200) << response.body;
    return Body(response).at("nodes").as_array();
  }

  json::object Series(const std::string& query) {
    net::Response response = Get("/nodes/gpu-node-0001/series" + query);
    EXPECT_EQ(response.status, 200) << response.body.substr(0, 400);
    return Body(response);
  }

  // The values of the only series of `reply`, by time (Unix seconds).
  std::map<std::int64_t, json::value> Points(const json::object& reply) {
    std::map<std::int64_t, json::value> points;
    const json::array& series = reply.at("series").as_array();
    EXPECT_EQ(series.size(), 1u);
    if (series.empty()) return points;
    for (const json::value& point : series[0].as_object().at("points").as_array()) {
      points.emplace(point.as_array()[0].as_int64(), point.as_array()[1]);
    }
    return points;
  }

  std::int64_t T(seconds offset) const { return ToUnixSeconds(t0_ + offset); }

  WallTime t0_;
};

TEST_F(NodesApiTest, UploadedSamplesShowInTheNodeListAndNotAsRecords) {
  clock_.Advance(seconds(65));
  json::object reply = UploadSamples(1, Every30s(seconds(0), seconds(90)));
  EXPECT_EQ(reply.at("stored").as_int64(), 3);
  // The reply of a node stream carries the plan: the default one.
  json::object plan = reply.at("plan").as_object();
  EXPECT_EQ(plan.at("interval_seconds").as_int64(), 30);
  EXPECT_EQ(plan.at("collectors").as_array().size(), 9u);
  EXPECT_EQ(Metric("uplink_console_node_samples_stored_total", {}), 3);

  json::array nodes = Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  const json::object& node = nodes[0].as_object();
  EXPECT_EQ(Text(node, "node"), "gpu-node-0001");
  EXPECT_EQ(Text(node, "last_sample_at"), FormatRfc3339Millis(t0_ + seconds(60)));
  EXPECT_FALSE(node.at("stale").as_bool());
  EXPECT_EQ(node.at("cpu_count").as_int64(), 64);
  EXPECT_EQ(node.at("cpu_percent").as_int64(), 25);
  EXPECT_EQ(node.at("memory_total_bytes").as_int64(), 1000);
  EXPECT_EQ(node.at("memory_used_percent").as_int64(), 60);
  EXPECT_EQ(node.at("network_receive_bytes_per_second").as_int64(), 1000);
  EXPECT_EQ(node.at("disk_read_bytes_per_second").as_int64(), 4096);
  EXPECT_EQ(node.at("gpus").as_array().size(), 2u);
  EXPECT_EQ(Text(node.at("gpus").as_array()[0].as_object(), "name"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(node.at("gaps").as_array().size(), 1u);

  // The records API does not repeat them.
  net::Response records = Get("/records?stream=" + kStream);
  ASSERT_EQ(records.status, 200) << records.body;
  EXPECT_TRUE(Body(records).at("records").as_array().empty());

  // Stale once three intervals pass without a sample.
  clock_.Advance(seconds(91));
  EXPECT_TRUE(Nodes()[0].as_object().at("stale").as_bool());
}

TEST_F(NodesApiTest, HostileSamplesAreRefusedWith422NamingTheRecordAndNothingIsStored) {
  struct Case {
    json::object payload;
    std::string stream;
    std::string says;
  };
  json::object future_version = SampleJson(At(seconds(0)));
  future_version["version"] = 2;
  json::object negative = SampleJson(At(seconds(0)));
  negative["disks"].as_array()[0].as_object()["read_bytes"] = -1;
  json::object wrong_type = SampleJson(At(seconds(0)));
  wrong_type["gpus"] = "eight";
  SampleSpec other_node;
  other_node.node = "gpu-node-0002";
  std::vector<Case> cases = {
      {future_version, kStream, "records[1].payload.version is 2"},
      {negative, kStream, "records[1].payload.disks[0].read_bytes must be a whole number"},
      {wrong_type, kStream, "records[1].payload.gpus must be an array"},
      {SampleJson(other_node), kStream,
       "records[1].payload.node is \"gpu-node-0002\" but the stream is \"node/gpu-node-0001\""},
      {SampleJson(At(seconds(0))), "cluster/main",
       "records[1].payload is a node_sample, which belongs on a node's stream"},
  };
  clock_.Advance(seconds(65));
  for (const Case& c : cases) {
    net::Response response =
        Upload(UploadBody(1, {json::object{{"kind", "heartbeat"}}, c.payload}, c.stream));
    EXPECT_EQ(response.status, 422) << c.says;
    EXPECT_EQ(ErrorCode(response), "invalid_record");
    EXPECT_NE(ErrorMessage(response).find(c.says), std::string::npos) << ErrorMessage(response);
    EXPECT_EQ(Body(response).at("error").as_object().at("sequence").as_int64(), 2);
  }
  EXPECT_EQ(Metric("uplink_console_node_samples_refused_total", {{"reason", "invalid"}}),
            static_cast<double>(cases.size()));
  EXPECT_TRUE(Nodes().empty());
  EXPECT_EQ(Metric("uplink_console_node_samples_stored_total", {}), 0);
  // The agent rejects that record and sends the rest: then it is stored.
  EXPECT_EQ(UploadSamples(1, {At(seconds(30))}).at("stored").as_int64(), 1);
  EXPECT_EQ(Nodes().size(), 1u);
}

TEST_F(NodesApiTest, ABatchSentAgainAfterALostReplyIsStoredOnce) {
  clock_.Advance(minutes(3));
  std::vector<SampleSpec> samples = Every30s(seconds(0), seconds(150));
  UploadSamples(1, samples);
  json::object again = UploadSamples(1, samples);
  EXPECT_EQ(again.at("stored").as_int64(), 0);
  EXPECT_EQ(again.at("duplicates").as_int64(), 5);
  auto points = Points(Series("?metric=load1&since=" + FormatRfc3339(t0_) + "&step=30"));
  int with_value = 0;
  for (const auto& [at, value] : points) with_value += value.is_null() ? 0 : 1;
  EXPECT_EQ(with_value, 5);
  EXPECT_EQ(Metric("uplink_console_node_samples_stored_total", {}), 5);
}

TEST_F(NodesApiTest, SeriesFollowCollectionTimeResetsRebootsAndGaps) {
  // Spooled while the console was down and delivered out of order: a reboot at 150 s (CPU
  // time and bytes start again from zero), then an outage from 240 s to 480 s.
  std::vector<SampleSpec> samples;
  for (seconds at : {seconds(0), seconds(30), seconds(60), seconds(90), seconds(120),
                     seconds(180), seconds(210), seconds(240), seconds(480), seconds(510)}) {
    SampleSpec spec = At(at);
    if (at > seconds(150)) {
      double since_boot = static_cast<double>((at - seconds(150)).count());
      spec.boot_time += 100'000;
      spec.cpu_user = 16 * since_boot;
      spec.cpu_idle = 48 * since_boot;
      spec.receive_bytes = 1000 * static_cast<std::int64_t>(since_boot);
    }
    samples.push_back(spec);
  }
  std::vector<SampleSpec> shuffled = {samples[5], samples[0], samples[9], samples[2],
                                      samples[1], samples[7], samples[3], samples[8],
                                      samples[4], samples[6]};
  clock_.Advance(seconds(520));
  UploadSamples(1, {shuffled.begin(), shuffled.begin() + 5});
  UploadSamples(6, {shuffled.begin() + 5, shuffled.end()});

  std::string query = "&since=" + FormatRfc3339(t0_) + "&step=30";
  json::object rates = Series("?metric=network_receive_bytes_per_second" + query);
  EXPECT_EQ(Text(rates, "unit"), "bytes_per_second");
  EXPECT_EQ(rates.at("step_seconds").as_int64(), 30);
  EXPECT_EQ(Text(rates, "source"), "raw");
  EXPECT_TRUE(rates.at("series").as_array()[0].as_object().at("labels").as_object().empty());
  auto points = Points(rates);
  EXPECT_TRUE(points.at(T(seconds(0))).is_null());  // no sample before the first
  EXPECT_EQ(points.at(T(seconds(30))).as_int64(), 1000);
  EXPECT_EQ(points.at(T(seconds(120))).as_int64(), 1000);
  // Across the reboot: 30 s since boot at 1000/s, over the 60 s between the samples.
  EXPECT_EQ(points.at(T(seconds(180))).as_int64(), 500);
  EXPECT_EQ(points.at(T(seconds(240))).as_int64(), 1000);
  // The outage: nothing, not an average across it; then rates again.
  EXPECT_TRUE(points.at(T(seconds(270))).is_null());
  EXPECT_TRUE(points.at(T(seconds(480))).is_null());
  EXPECT_EQ(points.at(T(seconds(510))).as_int64(), 1000);
  for (const auto& [at, value] : points) {
    if (!value.is_null()) {
      EXPECT_GE(value.to_number<double>(), 0) << at;
    }
  }

  auto cpu = Points(Series("?metric=cpu_percent" + query));
  EXPECT_EQ(cpu.at(T(seconds(60))).as_int64(), 25);
  EXPECT_EQ(cpu.at(T(seconds(180))).as_int64(), 25);
  EXPECT_TRUE(cpu.at(T(seconds(480))).is_null());

  auto used = Points(Series("?metric=memory_used_bytes" + query));
  EXPECT_EQ(used.at(T(seconds(90))).as_int64(), 600);
}

TEST_F(NodesApiTest, CountersThatStepBackWithoutARebootGiveNoAbsurdRate) {
  std::vector<SampleSpec> samples = Every30s(seconds(0), seconds(120));
  // An interface went away: the sum drops far below, with the same boot time.
  samples[2].receive_bytes = 5;
  samples[3].receive_bytes = 5 + 30 * 1000;
  clock_.Advance(seconds(125));
  UploadSamples(1, samples);
  auto points = Points(Series("?metric=network_receive_bytes_per_second&since=" +
                              FormatRfc3339(t0_) + "&step=30"));
  EXPECT_EQ(points.at(T(seconds(30))).as_int64(), 1000);
  EXPECT_TRUE(points.at(T(seconds(60))).is_null());
  EXPECT_EQ(points.at(T(seconds(90))).as_int64(), 1000);
}

TEST_F(NodesApiTest, AnAgentRestartWithANewSpoolKeepsRatesRight) {
  clock_.Advance(seconds(95));
  UploadSamples(1, Every30s(seconds(0), seconds(60)));
  // The agent's spool was recreated: its sequences start again at 1 in a new epoch, while the
  // host's counters carry on.
  UploadSamples(1, Every30s(seconds(60), seconds(120)), kSpoolB);
  auto points = Points(Series("?metric=disk_read_bytes_per_second&since=" + FormatRfc3339(t0_) +
                              "&step=30"));
  EXPECT_EQ(points.at(T(seconds(60))).as_int64(), 4096);
  EXPECT_EQ(points.at(T(seconds(90))).as_int64(), 4096);
  json::array nodes = Nodes();
  EXPECT_EQ(nodes[0].as_object().at("disk_read_bytes_per_second").as_int64(), 4096);
}

TEST_F(NodesApiTest, GpuAndFilesystemSeriesAreOnePerLabel) {
  clock_.Advance(seconds(65));
  UploadSamples(1, Every30s(seconds(0), seconds(60)));
  std::string query = "&since=" + FormatRfc3339(t0_) + "&step=30";
  json::object gpus = Series("?metric=gpu_temperature_celsius" + query);
  EXPECT_EQ(Text(gpus, "unit"), "celsius");
  const json::array& series = gpus.at("series").as_array();
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(Text(series[1].as_object().at("labels").as_object(), "gpu"), "1");
  EXPECT_EQ(series[1].as_object().at("points").as_array()[0].as_array()[1].as_int64(), 61);
  json::object filesystems = Series("?metric=filesystem_avail_bytes" + query);
  ASSERT_EQ(filesystems.at("series").as_array().size(), 1u);
  EXPECT_EQ(Text(filesystems.at("series").as_array()[0].as_object().at("labels").as_object(),
                 "mountpoint"),
            "/");
}

// Raw samples kept for 2 h here; a query reaching further back reads the rollups.
class NodeRollupApiTest : public NodesApiTest {
 protected:
  ConsoleOptions Options() override {
    ConsoleOptions options = testing::FastOptions();
    options.sample_raw_retention = hours(2);
    options.sample_retention = hours(5);
    return options;
  }
};

TEST_F(NodeRollupApiTest, RatesFromRollupsEqualRatesFromRawPointsAndRetentionEndsBoth) {
  // t0 on a 15-minute boundary, so that both queries' buckets start at the same time.
  t0_ = FromUnixSeconds((ToUnixSeconds(t0_) / 900 + 1) * 900);
  std::vector<SampleSpec> samples = Every30s(seconds(0), hours(1));
  // Some irregularity: a reboot and a missing stretch.
  for (SampleSpec& spec : samples) {
    if (spec.at >= t0_ + minutes(20)) {
      double since_boot = static_cast<double>(ToUnixSeconds(spec.at) - T(minutes(20)) + 10);
      spec.boot_time += 50'000;
      spec.read_bytes = static_cast<std::int64_t>(4096 * since_boot);
    }
  }
  std::erase_if(samples, [&](const SampleSpec& spec) {
    return spec.at > t0_ + minutes(40) && spec.at < t0_ + minutes(47);
  });
  clock_.SetNow(t0_ + hours(1) + minutes(5));
  UploadSamples(1, samples);
  std::string query = "?metric=disk_read_bytes_per_second&since=" + FormatRfc3339(t0_) +
                      "&step=900";
  json::object raw = Series(query);
  EXPECT_EQ(Text(raw, "source"), "raw");

  // Later, the same window is past the raw retention: the rollups answer.
  clock_.SetNow(t0_ + hours(2) + minutes(10));
  UploadSamples(1000, {At(hours(2) + minutes(9))});
  json::object rolled = Series(query);
  EXPECT_EQ(Text(rolled, "source"), "rollups");
  auto raw_points = Points(raw);
  auto rolled_points = Points(rolled);
  int compared = 0;
  for (const auto& [at, value] : raw_points) {
    if (value.is_null()) continue;
    ASSERT_TRUE(rolled_points.contains(at)) << at;
    EXPECT_NEAR(value.to_number<double>(), rolled_points.at(at).to_number<double>(), 1e-9) << at;
    ++compared;
  }
  EXPECT_EQ(compared, 4);

  // Past the retention (5 h here) even the rollups are gone: the first hour reads null, the
  // samples at 2 h 9 min (rolled up) and 6 h 10 min (raw) remain.
  clock_.SetNow(t0_ + hours(6) + minutes(11));
  UploadSamples(2000, {At(hours(6) + minutes(10))});
  json::object old = Series("?metric=load1&since=" + FormatRfc3339(t0_) + "&step=900");
  int kept = 0;
  for (const auto& [at, value] : Points(old)) {
    if (at < T(hours(2))) {
      EXPECT_TRUE(value.is_null()) << at;
    }
    kept += value.is_null() ? 0 : 1;
  }
  EXPECT_EQ(kept, 2);
  EXPECT_GT(Metric("uplink_console_node_samples_pruned_total", {}), 0);
  EXPECT_GT(Metric("uplink_console_node_rollups_pruned_total", {}), 0);
  EXPECT_GT(Metric("uplink_console_node_rollups_written_total", {}), 0);
}

TEST_F(NodesApiTest, SeriesQueriesAreCheckedAndAnswerClearly) {
  clock_.Advance(seconds(65));
  UploadSamples(1, Every30s(seconds(0), seconds(60)));
  struct Case {
    std::string path;
    int status;
    std::string says;
  };
  std::string series = "/nodes/gpu-node-0001/series";
  std::vector<Case> cases = {
      {series, 400, "metric is required, one of cpu_percent, memory_used_bytes"},
      {series + "?metric=cpu", 400, "metric \"cpu\" is not one of cpu_percent"},
      {series + "?metric=load1&since=yesterday", 400, "since must be an RFC 3339 time"},
      {series + "?metric=load1&since=2099-01-01T00:00:00Z", 400, "since must be in the past"},
      {series + "?metric=load1&step=5", 400, "step must be a whole number from 10 to 86400"},
      {series + "?metric=load1&step=abc", 400, "step must be a whole number"},
      {series + "?metric=load1&since=7d&step=60", 400,
       "step 60 would give more than 1000 points"},
      {series + "?metric=load1&color=red", 400, "unknown query parameter \"color\""},
      {"/nodes/gpu-node-0002/series?metric=load1", 404, "no samples from node \"gpu-node-0002\""},
      {"/nodes/bad%20name/series?metric=load1", 404, "no samples from node"},
      {"/nodes?limit=0", 400, "limit must be a whole number from 1 to 500"},
      {"/nodes?sort=name", 400, "unknown query parameter \"sort\""},
  };
  for (const Case& c : cases) {
    net::Response response = Get(c.path);
    EXPECT_EQ(response.status, c.status) << c.path << " " << response.body;
    EXPECT_NE(ErrorMessage(response).find(c.says), std::string::npos)
        << c.path << " " << response.body;
  }
  // Defaults: the last hour, at the collection interval.
  json::object defaults = Series("?metric=load5");
  EXPECT_EQ(defaults.at("step_seconds").as_int64(), 30);
  EXPECT_LE(Points(defaults).size(), 122u);
  EXPECT_EQ(Series("?metric=load5&since=7d").at("step_seconds").as_int64(), 3600);
}

TEST_F(NodesApiTest, TheNodeListIsSortedAndPaged) {
  clock_.Advance(seconds(65));
  for (const char* name : {"node-c", "node-a", "node-b"}) {
    SampleSpec spec = At(seconds(0));
    spec.node = name;
    net::Response response =
        Upload(UploadBody(1, {SampleJson(spec)}, std::string("node/") + name));
    ASSERT_EQ(response.status, 200) << response.body;
  }
  net::Response first = Get("/nodes?limit=2");
  ASSERT_EQ(first.status, 200);
  json::object page = Body(first);
  ASSERT_EQ(page.at("nodes").as_array().size(), 2u);
  EXPECT_EQ(Text(page.at("nodes").as_array()[0].as_object(), "node"), "node-a");
  EXPECT_EQ(Text(page, "next_after"), "node-b");
  json::object rest = Body(Get("/nodes?limit=2&after=node-b"));
  ASSERT_EQ(rest.at("nodes").as_array().size(), 1u);
  EXPECT_EQ(Text(rest.at("nodes").as_array()[0].as_object(), "node"), "node-c");
  EXPECT_TRUE(rest.at("next_after").is_null());
}

TEST_F(NodesApiTest, ThePlanIsReadAndSetByTheOwnerOrAnAdminAuditedAndSentToAgents) {
  net::Response shown = Get("/node-plan");
  ASSERT_EQ(shown.status, 200) << shown.body;
  EXPECT_EQ(Body(shown).at("interval_seconds").as_int64(), 30);
  EXPECT_TRUE(Body(shown).at("updated_at").is_null());

  net::Response set = Send("PUT", "/api/v1/connections/" + id_ + "/node-plan", admin_key_,
                           R"({"interval_seconds": 60, "collectors": ["gpu", "cpu"]})");
  ASSERT_EQ(set.status, 200) << set.body;
  json::object plan = Body(set);
  EXPECT_EQ(plan.at("interval_seconds").as_int64(), 60);
  EXPECT_EQ(ToJson(plan.at("collectors")), R"(["cpu","gpu"])");
  EXPECT_EQ(Text(plan, "updated_at"), FormatRfc3339(clock_.Now()));
  AuditEvent event = LastAudit("connection.node_plan");
  EXPECT_EQ(event.target_id, id_);
  EXPECT_NE(event.detail.find(R"("previous_interval_seconds":30)"), std::string::npos);
  EXPECT_EQ(Body(AsAdmin("GET", "/api/v1/audit?action=connection.node_plan"))
                .at("events")
                .as_array()
                .size(),
            1u);

  // The next upload's reply tells the agent.
  clock_.Advance(seconds(5));
  json::object reply = UploadSamples(1, {At(seconds(0))});
  EXPECT_EQ(reply.at("plan").as_object().at("interval_seconds").as_int64(), 60);
  EXPECT_EQ(ToJson(reply.at("plan").as_object().at("collectors")), R"(["cpu","gpu"])");
  // Other streams' replies carry no node plan (cluster/ streams carry the cluster plan,
  // kubectl_api_test.cc).
  net::Response other = Upload(UploadBody(1, {json::object{{"kind", "gateway_event"}}},
                                          "gateway/main"));
  ASSERT_EQ(other.status, 200) << other.body;
  EXPECT_FALSE(Body(other).contains("plan"));

  // An empty body resets it to the default.
  net::Response reset = Send("PUT", "/api/v1/connections/" + id_ + "/node-plan", admin_key_, "{}");
  ASSERT_EQ(reset.status, 200) << reset.body;
  EXPECT_EQ(Body(reset).at("collectors").as_array().size(), 9u);

  struct Case {
    std::string body;
    std::string says;
  };
  std::vector<Case> bad = {
      {R"({"interval_seconds": 5})", "interval_seconds must be between 10 and 3600"},
      {R"({"interval_seconds": 3601})", "interval_seconds must be between 10 and 3600"},
      {R"({"interval_seconds": "30"})", "interval_seconds must be an integer"},
      {R"({"collectors": "cpu"})", "collectors must be an array"},
      {R"({"collectors": ["cpu", 7]})", "collectors must hold names"},
      {R"({"collectors": ["cpu", "rgb"]})", "\"rgb\", which is not a collector"},
      {R"({"collectors": ["cpu", "cpu"]})", "collectors names \"cpu\" twice"},
      {R"({"every": 30})", "unknown field \"every\""},
  };
  for (const Case& c : bad) {
    net::Response response =
        Send("PUT", "/api/v1/connections/" + id_ + "/node-plan", admin_key_, c.body);
    EXPECT_EQ(response.status, 400) << c.body;
    EXPECT_NE(ErrorMessage(response).find(c.says), std::string::npos) << response.body;
  }
}

TEST_F(NodesApiTest, AnotherUsersConnectionIsNotFoundButAnAdminMayManageItsPlan) {
  clock_.Advance(seconds(65));
  UploadSamples(1, Every30s(seconds(0), seconds(60)));
  testing::TestUser member = AddUser("member@example.com");
  for (const std::string& path : {std::string("/nodes"), std::string("/node-plan"),
                                  std::string("/nodes/gpu-node-0001/series?metric=load1")}) {
    net::Response response = Get(path, member.api_key);
    EXPECT_EQ(response.status, 404) << path;
    EXPECT_EQ(ErrorCode(response), "not_found");
    EXPECT_EQ(response.body.find("gpu-node-0001\""), std::string::npos) << response.body;
  }
  EXPECT_EQ(Send("PUT", "/api/v1/connections/" + id_ + "/node-plan", member.api_key,
                 R"({"interval_seconds": 60})")
                .status,
            404);
  EXPECT_EQ(Send("GET", "/api/v1/connections/" + id_ + "/nodes", "").status, 401);

  // The member's own connection: an admin may set its plan, not read its nodes.
  std::string own = Text(CreateConnection(member.api_key, "theirs"), "id");
  EXPECT_EQ(Send("GET", "/api/v1/connections/" + own + "/nodes", member.api_key).status, 200);
  EXPECT_EQ(Send("GET", "/api/v1/connections/" + own + "/nodes", admin_key_).status, 404);
  net::Response admin_set = Send("PUT", "/api/v1/connections/" + own + "/node-plan", admin_key_,
                                 R"({"interval_seconds": 120})");
  EXPECT_EQ(admin_set.status, 200) << admin_set.body;
  net::Response member_reads = Send("GET", "/api/v1/connections/" + own + "/node-plan",
                                    member.api_key);
  EXPECT_EQ(Body(member_reads).at("interval_seconds").as_int64(), 120);
  EXPECT_EQ(Send("GET", "/api/v1/connections/0000000000000000/node-plan", admin_key_).status, 404);
}

TEST_F(NodesApiTest, SamplesOutsideTheKeptTimeRangeAreAcknowledgedAndCounted) {
  clock_.Advance(hours(50));
  SampleSpec future = At(hours(50) + minutes(10));
  json::object reply = UploadSamples(1, {At(seconds(0)), future, At(hours(50))});
  EXPECT_EQ(reply.at("acked_through").as_int64(), 3);
  EXPECT_EQ(Metric("uplink_console_node_samples_refused_total", {{"reason", "too_old"}}), 1);
  EXPECT_EQ(Metric("uplink_console_node_samples_refused_total", {{"reason", "in_future"}}), 1);
  EXPECT_EQ(Metric("uplink_console_node_samples_stored_total", {}), 1);
}

}  // namespace
}  // namespace uplink::console
