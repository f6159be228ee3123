// Node samples as pure logic: reading the payload strictly (hostile input included), the
// figures kept from it, counter increases across resets, reboots and gaps, buckets and
// rollups, and the values the API computes from them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "console/api/node_metrics.h"
#include "console/api/node_sample_figures.h"
#include "console/store/sample_series.h"
#include "node_sample_util.h"
#include "protocol/node_sample.h"

namespace uplink::console {

using protocol::NodeSample;

namespace {

using std::chrono::seconds;
using testing::SampleJson;
using testing::SampleSpec;

Result<NodeSample> Parse(const json::object& payload) {
  return protocol::DecodeNodeSample(payload, "records[0].payload");
}

// The payload of `spec` changed by `edit`, parsed.
Result<NodeSample> ParseEdited(const std::function<void(json::object&)>& edit) {
  json::object payload = SampleJson(SampleSpec{});
  edit(payload);
  return Parse(payload);
}

std::optional<double> ValueOf(const NodeSampleFigures& figures, SampleMetric metric,
                              const std::string& label = "") {
  for (const SampleValue& value : figures.values) {
    if (value.metric == metric && value.label == label) return value.value;
  }
  return std::nullopt;
}

TEST(NodeSampleParse, TheProtocolsExampleIsReadIntoTheFiguresTheConsoleKeeps) {
  SampleSpec spec;
  spec.cpu_user = 100;
  spec.cpu_idle = 300;
  spec.receive_bytes = 5000;
  spec.transmit_bytes = 7000;
  spec.read_bytes = 1024;
  spec.written_bytes = 2048;
  auto sample = Parse(SampleJson(spec));
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(sample->node, "gpu-node-0001");
  EXPECT_EQ(sample->collected_at, spec.at);
  EXPECT_EQ(sample->boot_time, testing::kSampleBootTime);
  EXPECT_EQ(sample->gpu_source, "nvml");
  ASSERT_EQ(sample->filesystems.size(), 2u);
  EXPECT_EQ(sample->filesystems[1].error, "statvfs did not answer within 5 s");
  ASSERT_EQ(sample->gaps.size(), 1u);
  EXPECT_EQ(sample->gaps[0].errno_value, 2);

  NodeSampleFigures figures = FiguresOf(*sample);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kCpuSeconds), 400);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kCpuIdleSeconds), 300);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kCpuCount), 64);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kMemoryTotalBytes), 1000);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kMemoryAvailableBytes), 400);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kLoad1), 0.5);
  // Only eth0: loopback and the pod's veth are left out of the sums.
  EXPECT_EQ(ValueOf(figures, SampleMetric::kNetworkReceiveBytes), 5000);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kNetworkTransmitBytes), 7000);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kDiskReadBytes), 1024);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kDiskWrittenBytes), 2048);
  // The filesystem that failed has no figures.
  EXPECT_EQ(ValueOf(figures, SampleMetric::kFilesystemAvailBytes, "/"), 500);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kFilesystemSizeBytes, "/"), 1000);
  EXPECT_FALSE(ValueOf(figures, SampleMetric::kFilesystemAvailBytes, "/mnt/nfs"));
  EXPECT_EQ(ValueOf(figures, SampleMetric::kGpuUtilizationPercent, "1"), 97);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kGpuTemperatureCelsius, "1"), 61);
  EXPECT_EQ(ValueOf(figures, SampleMetric::kGpuPowerWatts, "0"), 512.5);
  EXPECT_EQ(figures.values.size(), 12u + 2u + 2u * 5u);
}

TEST(NodeSampleParse, AbsentSectionsAndUnknownFieldsAreAccepted) {
  json::object minimal{{"kind", "node_sample"},
                       {"version", 1},
                       {"node", "n1"},
                       {"collected_at", "2026-11-30T03:20:00Z"},
                       {"a_newer_figure", {{"anything", json::array{1, "two"}}}}};
  auto sample = Parse(minimal);
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(sample->boot_time, 0);
  EXPECT_TRUE(FiguresOf(*sample).values.empty());

  auto extended = ParseEdited([](json::object& p) {
    p["cpu"].as_object()["seconds"].as_object()["guest"] = 5;
    p["gpus"].as_array()[0].as_object()["future_figure"] = "x";
    p["memory"].as_object()["hugepages_total"] = 4;  // not *_bytes: not a figure it knows
    p["gaps"].as_array()[0].as_object()["error"] = "";
  });
  EXPECT_TRUE(extended.ok()) << extended.status().ToString();
}

TEST(NodeSampleParse, StackedMountsKeepTheirFirstEntry) {
  auto sample = ParseEdited([](json::object& p) {
    p["filesystems"].as_array().push_back(
        json::object{{"mountpoint", "/"}, {"size_bytes", 9}, {"avail_bytes", 9}});
  });
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(ValueOf(FiguresOf(*sample), SampleMetric::kFilesystemAvailBytes, "/"), 500);
}

TEST(NodeSampleParse, HostilePayloadsAreRefusedNamingTheField) {
  struct Case {
    std::function<void(json::object&)> edit;
    std::string says;
  };
  auto cpu = [](json::object& p) -> json::object& { return p["cpu"].as_object(); };
  auto gpu0 = [](json::object& p) -> json::object& {
    return p["gpus"].as_array()[0].as_object();
  };
  auto many = [](size_t n, const json::value& item) {
    json::array list;
    for (size_t i = 0; i < n; ++i) list.push_back(item);
    return list;
  };
  std::vector<Case> cases = {
      {[](json::object& p) { p.erase("version"); }, "records[0].payload.version is required"},
      {[](json::object& p) { p["version"] = 2; }, "payload.version is 2; this console reads "
                                                  "node_sample version 1"},
      {[](json::object& p) { p["version"] = "1"; }, "payload.version is \"1\""},
      {[](json::object& p) { p["version"] = 1.0; }, "payload.version is 1"},
      {[](json::object& p) { p.erase("node"); }, "payload.node is required"},
      {[](json::object& p) { p["node"] = ""; }, "payload.node must not be empty"},
      {[](json::object& p) { p["node"] = std::string(254, 'n'); },
       "payload.node is 254 bytes long; the limit is 253"},
      {[](json::object& p) { p["node"] = 7; }, "payload.node must be a string"},
      {[](json::object& p) { p["node"] = std::string("a\0b", 3); },
       "payload.node must not contain NUL"},
      {[](json::object& p) { p.erase("collected_at"); }, "payload.collected_at is required"},
      {[](json::object& p) { p["collected_at"] = "yesterday"; },
       "payload.collected_at must be an RFC 3339 time"},
      {[](json::object& p) { p["collected_at"] = std::string(100, '2'); },
       "payload.collected_at is 100 bytes long"},
      {[](json::object& p) { p["boot_time"] = -1; }, "payload.boot_time must be a whole number"},
      {[](json::object& p) { p["boot_time"] = 1.5; }, "payload.boot_time must be a whole number"},
      {[](json::object& p) { p["cpu"] = json::array{}; }, "payload.cpu must be an object"},
      {[&](json::object& p) { cpu(p)["count"] = -64; },
       "payload.cpu.count must be a whole number from 0 to"},
      {[&](json::object& p) { cpu(p)["seconds"] = nullptr; },
       "payload.cpu.seconds must be an object"},
      {[&](json::object& p) { cpu(p)["seconds"].as_object()["user"] = -0.5; },
       "payload.cpu.seconds.user must be a number from 0 to 10^18"},
      {[&](json::object& p) { cpu(p)["seconds"].as_object()["idle"] = "lots"; },
       "payload.cpu.seconds.idle must be a number"},
      {[&](json::object& p) { cpu(p)["seconds"].as_object()["steal"] = 1e300; },
       "payload.cpu.seconds.steal must be a number from 0 to 10^18"},
      {[](json::object& p) { p["memory"].as_object()["total_bytes"] = -1; },
       "payload.memory.total_bytes must be a whole number, 0 or more"},
      {[](json::object& p) { p["memory"].as_object()["swap_free_bytes"] = 1.5; },
       "payload.memory.swap_free_bytes must be a whole number"},
      {[](json::object& p) { p["load"].as_object()["load15"] = true; },
       "payload.load.load15 must be a number"},
      {[](json::object& p) { p["uptime_seconds"] = -3; }, "payload.uptime_seconds must be"},
      {[](json::object& p) { p["pressure"].as_object()["io_full_seconds"] = "x"; },
       "payload.pressure.io_full_seconds must be a number"},
      {[](json::object& p) { p["pressure"].as_object()["cpu_full_seconds"] = -1; },
       "payload.pressure.cpu_full_seconds must be a number"},
      {[](json::object& p) { p["memory"].as_object()["hugepages_bytes"] = "many"; },
       "payload.memory.hugepages_bytes must be a whole number"},
      {[](json::object& p) { p["network"] = json::object{}; }, "payload.network must be an array"},
      {[&](json::object& p) {
         p["network"] =
             many(1025, {{"device", "eth0"}, {"receive_bytes", 1}, {"transmit_bytes", 1}});
       },
       "payload.network has 1025 entries; the limit is 1024"},
      {[](json::object& p) { p["network"].as_array()[1] = "eth0"; },
       "payload.network[1] must be an object"},
      {[](json::object& p) { p["network"].as_array()[1].as_object().erase("device"); },
       "payload.network[1].device is required"},
      {[](json::object& p) { p["network"].as_array()[1].as_object()["receive_bytes"] = -5; },
       "payload.network[1].receive_bytes must be a whole number, 0 or more"},
      {[](json::object& p) { p["network"].as_array()[1].as_object().erase("transmit_bytes"); },
       "payload.network[1].transmit_bytes is required"},
      {[](json::object& p) { p["network"].as_array()[2].as_object()["receive_errs"] = "0"; },
       "payload.network[2].receive_errs must be a whole number"},
      {[&](json::object& p) {
         p["disks"] = many(1025, {{"device", "sda"}, {"read_bytes", 1}, {"written_bytes", 1}});
       },
       "payload.disks has 1025 entries"},
      {[](json::object& p) { p["disks"].as_array()[0].as_object()["written_bytes"] = -1; },
       "payload.disks[0].written_bytes must be a whole number, 0 or more"},
      {[](json::object& p) { p["disks"].as_array()[0].as_object()["io_time_seconds"] = -1; },
       "payload.disks[0].io_time_seconds must be a number"},
      {[](json::object& p) {
         p["filesystems"].as_array()[0].as_object()["mountpoint"] = std::string(4097, '/');
       },
       "payload.filesystems[0].mountpoint is 4097 bytes long; the limit is 4096"},
      {[](json::object& p) { p["filesystems"].as_array()[0].as_object().erase("avail_bytes"); },
       "payload.filesystems[0].avail_bytes is required unless the entry has an error"},
      {[](json::object& p) { p["filesystems"].as_array()[0].as_object()["readonly"] = "no"; },
       "payload.filesystems[0].readonly must be true or false"},
      {[&](json::object& p) {
         p["filesystems"] = many(1025, {{"mountpoint", "/"}, {"error", "x"}});
       },
       "payload.filesystems has 1025 entries"},
      {[](json::object& p) { p["gpu_source"] = "rocm"; },
       "payload.gpu_source must be \"nvml\", \"nvidia-smi\" or \"none\""},
      {[&](json::object& p) { p["gpus"] = many(65, {{"index", 0}}); },
       "payload.gpus has 65 entries; the limit is 64"},
      {[&](json::object& p) { gpu0(p).erase("index"); }, "payload.gpus[0].index is required"},
      {[](json::object& p) { p["gpus"].as_array()[1].as_object()["index"] = 0; },
       "payload.gpus[1].index is 0, the index of an earlier GPU"},
      {[&](json::object& p) { gpu0(p)["utilization_percent"] = 101; },
       "payload.gpus[0].utilization_percent must be from 0 to 100"},
      {[&](json::object& p) { gpu0(p)["memory_used_bytes"] = 1.5; },
       "payload.gpus[0].memory_used_bytes must be a whole number"},
      {[&](json::object& p) { gpu0(p)["power_watts"] = -1; },
       "payload.gpus[0].power_watts must be a number from 0"},
      {[&](json::object& p) { gpu0(p)["temperature_celsius"] = "hot"; },
       "payload.gpus[0].temperature_celsius must be a number from -10^18"},
      {[&](json::object& p) { gpu0(p)["throttle_reasons"] = -1; },
       "payload.gpus[0].throttle_reasons must be a whole number"},
      {[&](json::object& p) { gpu0(p)["uuid"] = json::array{}; },
       "payload.gpus[0].uuid must be a string"},
      {[&](json::object& p) { p["gaps"] = many(257, {{"source", "x"}, {"error", "y"}}); },
       "payload.gaps has 257 entries; the limit is 256"},
      {[](json::object& p) { p["gaps"].as_array()[0].as_object()["errno"] = 99999; },
       "payload.gaps[0].errno must be a whole number from 0 to 4095"},
      {[](json::object& p) { p["gaps"].as_array()[0].as_object().erase("error"); },
       "payload.gaps[0].error is required"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    auto sample = ParseEdited(cases[i].edit);
    ASSERT_FALSE(sample.ok()) << "case " << i << " (" << cases[i].says << ") was accepted";
    EXPECT_EQ(sample.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(sample.status().message().find(cases[i].says), std::string::npos)
        << "case " << i << ": " << sample.status().message();
  }
}

TEST(NodeSampleParse, CountersUpToTwoToTheSixtyFourAreKeptAsNumbers) {
  auto sample = ParseEdited([](json::object& p) {
    p["network"].as_array()[1].as_object()["receive_bytes"] = UINT64_MAX;
  });
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_DOUBLE_EQ(*sample->network_receive_bytes, 18446744073709551615.0);
}

TEST(NodeSampleParse, HostInterfacesAreThePhysicalOnes) {
  for (const char* device : {"eth0", "ens5", "enp1s0f0", "bond0", "ib0", "wg0", "eno1"}) {
    EXPECT_TRUE(protocol::IsHostInterface(device)) << device;
  }
  for (const char* device : {"lo", "veth12ab", "cali1234", "cilium_host", "lxc9f", "cni0",
                             "flannel.1", "docker0", "br-5e1d", "virbr0", "vxlan.calico",
                             "genev_sys_6081", "tunl0", "weave", "kube-ipvs0",
                             "nodelocaldns"}) {
    EXPECT_FALSE(protocol::IsHostInterface(device)) << device;
  }
}

// --- Counters, buckets, rollups --------------------------------------------------------------

constexpr std::int64_t kBoot = 1'799'000'000;
constexpr std::int64_t kGap = 150'000;  // 5 intervals of 30 s, in ms

RawPoint P(std::int64_t at_seconds, double value, std::int64_t boot = kBoot) {
  return RawPoint{at_seconds * 1000, value, boot};
}

TEST(CounterIncrease, FollowsResetsRebootsAndGaps) {
  EXPECT_EQ(CounterIncrease(P(0, 100), P(30, 160), kGap), 60);
  EXPECT_EQ(CounterIncrease(P(0, 100), P(30, 100), kGap), 0);
  // A reboot restarts every counter from zero: the new value is the increase.
  EXPECT_EQ(CounterIncrease(P(0, 1'000'000), P(30, 40, kBoot + 86'400), kGap), 40);
  EXPECT_EQ(CounterIncrease(P(0, 100), P(30, 500, kBoot + 86'400), kGap), 500);
  // btime wobbles by a second or so without a reboot.
  EXPECT_EQ(CounterIncrease(P(0, 100), P(30, 160, kBoot + 1), kGap), 60);
  EXPECT_EQ(CounterIncrease(P(0, 100), P(30, 160, kBoot - kBootTimeTolerance), kGap), 60);
  // A decrease without a reboot is no restart from zero for a host-wide sum: unknown rather
  // than an absurd increase as large as everything since boot.
  EXPECT_FALSE(CounterIncrease(P(0, 1'000'000), P(30, 999'000), kGap));
  // Without a boot time, a decrease is still unknown and an increase still counts.
  EXPECT_FALSE(CounterIncrease(P(0, 100, 0), P(30, 50, 0), kGap));
  EXPECT_EQ(CounterIncrease(P(0, 100, 0), P(30, 130, kBoot), kGap), 30);
  // Further apart than the largest gap: nothing is known of the interval.
  EXPECT_EQ(CounterIncrease(P(0, 100), P(150, 400), kGap), 300);
  EXPECT_FALSE(CounterIncrease(P(0, 100), P(151, 400), kGap));
  EXPECT_FALSE(CounterIncrease(P(30, 100), P(30, 400), kGap));
}

TEST(AggregateBuckets, GaugesKeepMinMaxSumCountAndLast) {
  std::vector<RawPoint> points = {P(0, 5), P(30, 1), P(60, 9), P(300, 4), P(330, 6)};
  auto buckets = AggregateBuckets(MetricKind::kGauge, points, 300, 0, kGap);
  ASSERT_EQ(buckets.size(), 2u);
  const BucketAggregate& first = buckets.at(0);
  EXPECT_EQ(first.count, 3);
  EXPECT_EQ(first.min, 1);
  EXPECT_EQ(first.max, 9);
  EXPECT_EQ(first.sum, 15);
  EXPECT_EQ(first.last, 9);
  EXPECT_EQ(Average(first), 5);
  EXPECT_EQ(Average(buckets.at(300)), 5);
  EXPECT_EQ(buckets.at(300).last, 6);
  // Points before the first bucket asked for are left out.
  EXPECT_EQ(AggregateBuckets(MetricKind::kGauge, points, 300, 300, kGap).size(), 1u);
}

TEST(AggregateBuckets, ACountersPairBelongsToTheBucketOfItsLaterPoint) {
  // 10 per second, a reboot at 330 (the counter restarts and reads 30 at 360), then an outage
  // from 390 to 900.
  std::vector<RawPoint> points = {P(270, 2700), P(300, 3000), P(330, 3300),
                                  P(360, 30, kBoot + 100), P(390, 330, kBoot + 100),
                                  P(900, 5430, kBoot + 100), P(930, 5730, kBoot + 100)};
  auto buckets = AggregateBuckets(MetricKind::kCounter, points, 300, 300, kGap);
  // 270 -> 300 ends in bucket 300 and counts there even though 270 is before it.
  const BucketAggregate& first = buckets.at(300);
  EXPECT_EQ(first.pairs, 4);
  EXPECT_EQ(first.increase, 300 + 300 + 30 + 300);
  EXPECT_EQ(first.seconds, 120);
  // The outage gives nothing: 390 -> 900 is over the largest gap.
  EXPECT_FALSE(buckets.contains(600));
  const BucketAggregate& after = buckets.at(900);
  EXPECT_EQ(after.pairs, 1);
  EXPECT_EQ(Rate(after), 10);
}

TEST(AggregateBuckets, RatesFromRollupsEqualRatesFromRawPointsOverTheSameBuckets) {
  // Irregular times, a reboot, a decrease and a gap: whatever the points, merging 5-minute
  // rollups gives exactly what aggregating the raw points by the larger step gives.
  std::vector<RawPoint> counter;
  std::vector<RawPoint> gauge;
  double value = 1'000;
  std::int64_t boot = kBoot;
  std::int64_t at = 0;
  for (int i = 0; i < 400; ++i) {
    at += 20 + (i * 7) % 23;
    if (i == 120) at += 400;  // an outage
    if (i == 200) {
      boot += 5'000;  // a reboot
      value = 0;
    }
    value += (i == 300) ? -50 : 10 * (i % 5);  // a step back at 300
    counter.push_back(P(at, value, boot));
    gauge.push_back(P(at, (i * 13) % 17));
  }
  for (std::int64_t step : {900, 3600}) {
    for (MetricKind kind : {MetricKind::kCounter, MetricKind::kGauge}) {
      const std::vector<RawPoint>& points = kind == MetricKind::kCounter ? counter : gauge;
      auto raw = AggregateBuckets(kind, points, step, 0, kGap);
      std::map<std::int64_t, BucketAggregate> merged;
      MergeInto(merged, AggregateBuckets(kind, points, kRollupSeconds, 0, kGap), step);
      ASSERT_EQ(raw.size(), merged.size()) << "step " << step;
      for (const auto& [start, aggregate] : raw) {
        const BucketAggregate& rolled = merged.at(start);
        EXPECT_EQ(aggregate.pairs, rolled.pairs) << start;
        EXPECT_EQ(aggregate.count, rolled.count) << start;
        EXPECT_DOUBLE_EQ(aggregate.increase, rolled.increase) << start;
        EXPECT_DOUBLE_EQ(aggregate.seconds, rolled.seconds) << start;
        EXPECT_EQ(aggregate.min, rolled.min) << start;
        EXPECT_EQ(aggregate.max, rolled.max) << start;
        EXPECT_DOUBLE_EQ(aggregate.sum, rolled.sum) << start;
        EXPECT_EQ(aggregate.last, rolled.last) << start;
        if (Rate(aggregate)) {
          EXPECT_GE(*Rate(aggregate), 0);
        }
      }
    }
  }
}

TEST(BucketStart, AlignsOnTheEpochAndFloorsBeforeIt) {
  EXPECT_EQ(BucketStart(299'999, 300), 0);
  EXPECT_EQ(BucketStart(300'000, 300), 300);
  EXPECT_EQ(BucketStart(-1, 300), -300);
}

// --- What the API computes -------------------------------------------------------------------

TEST(ComputeSeries, CpuPercentIsTheBusyShareAndMemoryUsedIsTotalLessAvailable) {
  BucketedSeries series;
  BucketAggregate total;
  total.pairs = 1;
  total.increase = 640;  // 64 CPUs for 10 s
  total.seconds = 10;
  BucketAggregate idle = total;
  idle.increase = 160;
  series[{SampleMetric::kCpuSeconds, ""}][0] = total;
  series[{SampleMetric::kCpuIdleSeconds, ""}][0] = idle;
  auto cpu = ComputeSeries(SeriesMetric::kCpuPercent, series, 0, 60, 30);
  ASSERT_EQ(cpu.size(), 1u);
  ASSERT_EQ(cpu[0].points.size(), 3u);
  EXPECT_EQ(cpu[0].points[0].second, 75);
  EXPECT_FALSE(cpu[0].points[1].second);  // no data: null, not 0
  EXPECT_EQ(cpu[0].points[2].first, 60);

  BucketAggregate memory;
  memory.count = 2;
  memory.sum = 2000;
  BucketAggregate available;
  available.count = 2;
  available.sum = 500;
  series[{SampleMetric::kMemoryTotalBytes, ""}][0] = memory;
  series[{SampleMetric::kMemoryAvailableBytes, ""}][0] = available;
  auto used = ComputeSeries(SeriesMetric::kMemoryUsedBytes, series, 0, 0, 30);
  ASSERT_EQ(used.size(), 1u);
  EXPECT_EQ(used[0].points[0].second, 750);
}

TEST(ComputeSeries, GpuSeriesComeInIndexOrder) {
  BucketedSeries series;
  BucketAggregate point;
  point.count = 1;
  point.sum = 42;
  for (const char* label : {"10", "2", "1"}) {
    series[{SampleMetric::kGpuPowerWatts, label}][0] = point;
  }
  auto power = ComputeSeries(SeriesMetric::kGpuPowerWatts, series, 0, 0, 30);
  ASSERT_EQ(power.size(), 3u);
  EXPECT_EQ(power[0].label, "1");
  EXPECT_EQ(power[1].label, "2");
  EXPECT_EQ(power[2].label, "10");
  EXPECT_EQ(power[2].points[0].second, 42);
  EXPECT_TRUE(ComputeSeries(SeriesMetric::kGpuUtilizationPercent, series, 0, 0, 30).empty());
}

TEST(ParseSince, TakesTimesAndDurationsAndRefusesTheRest) {
  WallTime now = FromUnixSeconds(1'800'000'000);
  EXPECT_EQ(*ParseSince("1h", now), now - seconds(3600));
  EXPECT_EQ(*ParseSince("30m", now), now - seconds(1800));
  EXPECT_EQ(*ParseSince("7d", now), now - seconds(7 * 86'400));
  EXPECT_EQ(*ParseSince("2027-01-15T07:59:00Z", FromUnixSeconds(1'800'000'000)),
            *ParseRfc3339("2027-01-15T07:59:00Z"));
  for (const char* bad : {"", "soon", "-1h", "1y", "2026-13-01T00:00:00Z", "1h30", "0s"}) {
    EXPECT_FALSE(ParseSince(bad, now).ok()) << bad;
  }
  EXPECT_NE(ParseSince("2090-01-01T00:00:00Z", now).status().message().find("in the past"),
            std::string::npos);
  EXPECT_NE(ParseSince("1001d", now).status().message().find("at most 1000 days"),
            std::string::npos);
  EXPECT_FALSE(ParseSince(std::string(65, '1') + "s", now).ok());
}

TEST(DefaultStep, AboutThreeHundredPointsNeverFinerThanTheInterval) {
  EXPECT_EQ(DefaultStep(seconds(3600), 30), 30);
  EXPECT_EQ(DefaultStep(seconds(3600), 60), 60);
  EXPECT_EQ(DefaultStep(seconds(86'400), 30), 300);
  EXPECT_EQ(DefaultStep(seconds(7 * 86'400), 30), 3600);
  EXPECT_EQ(DefaultStep(seconds(1000 * 86'400), 30), 86'400);
}

TEST(NumberJson, WholeNumbersAreIntegersAndOthersDoubles) {
  EXPECT_EQ(ToJson(NumberJson(540000000000.0)), "540000000000");
  EXPECT_EQ(ToJson(NumberJson(0.5)), "5E-1");
  EXPECT_EQ(ToJson(NumberJson(std::nullopt)), "null");
  EXPECT_EQ(ToJson(NumberJson(NAN)), "null");
}

// The node list's figures for a latest sample and the one before it.
SampleNodeState TwoSamples(const SampleSpec& before, const SampleSpec& latest) {
  SampleNodeState state;
  state.node = latest.node;
  state.latest_at = latest.at;
  state.latest_boot_time = latest.boot_time;
  state.latest_payload = ToJson(SampleJson(latest));
  auto previous = protocol::DecodeNodeSample(SampleJson(before), "payload");
  EXPECT_TRUE(previous.ok());
  state.previous_at = before.at;
  state.previous_boot_time = before.boot_time;
  state.previous_values = FiguresOf(*previous).values;
  return state;
}

TEST(NodeSummaryJson, RatesComeFromTheLastTwoSamples) {
  SampleSpec before;
  before.cpu_user = 1000;
  before.cpu_idle = 3000;
  before.receive_bytes = 1'000'000;
  before.read_bytes = 500;
  SampleSpec latest = before;
  latest.at = before.at + seconds(30);
  latest.cpu_user += 30 * 16;   // 16 of 64 CPUs busy
  latest.cpu_idle += 30 * 48;
  latest.receive_bytes += 30 * 1000;
  latest.read_bytes += 30 * 4096;
  json::object node = NodeSummaryJson(TwoSamples(before, latest), latest.at + seconds(5), 30);
  EXPECT_EQ(node.at("node").as_string(), "gpu-node-0001");
  EXPECT_EQ(node.at("last_sample_at").as_string(), FormatRfc3339Millis(latest.at));
  EXPECT_FALSE(node.at("stale").as_bool());
  EXPECT_EQ(node.at("boot_time").as_int64(), testing::kSampleBootTime);
  EXPECT_EQ(node.at("cpu_count").as_int64(), 64);
  EXPECT_EQ(node.at("cpu_percent").as_int64(), 25);
  EXPECT_EQ(node.at("memory_used_percent").as_int64(), 60);
  EXPECT_EQ(node.at("network_receive_bytes_per_second").as_int64(), 1000);
  EXPECT_EQ(node.at("network_transmit_bytes_per_second").as_int64(), 0);
  EXPECT_EQ(node.at("disk_read_bytes_per_second").as_int64(), 4096);
  EXPECT_EQ(node.at("gpu_source").as_string(), "nvml");
  const json::array& gpus = node.at("gpus").as_array();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].as_object().at("uuid").as_string(), "GPU-1");
  EXPECT_EQ(gpus[1].as_object().at("memory_total_bytes").as_int64(), 85520809984);
  EXPECT_EQ(node.at("filesystems").as_array()[1].as_object().at("error").as_string(),
            "statvfs did not answer within 5 s");
  EXPECT_TRUE(node.at("filesystems").as_array()[1].as_object().at("size_bytes").is_null());
  EXPECT_EQ(node.at("gaps").as_array()[0].as_object().at("source").as_string(), "pressure");

  // Four intervals without a sample: stale.
  EXPECT_TRUE(NodeSummaryJson(TwoSamples(before, latest), latest.at + seconds(91), 30)
                  .at("stale")
                  .as_bool());
}

TEST(NodeSummaryJson, ARebootAGapOrNoPreviousSampleGiveRightOrNullRates) {
  SampleSpec before;
  before.cpu_user = 1'000'000;
  before.cpu_idle = 3'000'000;
  before.receive_bytes = 9'000'000;
  SampleSpec rebooted = before;
  rebooted.at = before.at + seconds(30);
  rebooted.boot_time = before.boot_time + 86'400;
  rebooted.cpu_user = 300;
  rebooted.cpu_idle = 900;
  rebooted.receive_bytes = 3000;
  json::object node = NodeSummaryJson(TwoSamples(before, rebooted), rebooted.at, 30);
  EXPECT_EQ(node.at("network_receive_bytes_per_second").as_int64(), 100);
  EXPECT_EQ(node.at("cpu_percent").as_int64(), 25);

  SampleSpec late = before;
  late.at = before.at + seconds(151);
  late.receive_bytes += 1000;
  node = NodeSummaryJson(TwoSamples(before, late), late.at, 30);
  EXPECT_TRUE(node.at("network_receive_bytes_per_second").is_null());
  EXPECT_TRUE(node.at("cpu_percent").is_null());
  EXPECT_EQ(node.at("memory_available_bytes").as_int64(), 400);

  SampleNodeState first = TwoSamples(before, before);
  first.previous_at.reset();
  first.previous_values.clear();
  node = NodeSummaryJson(first, before.at, 30);
  EXPECT_TRUE(node.at("disk_written_bytes_per_second").is_null());
  EXPECT_EQ(node.at("load1").as_double(), 0.5);

  // A payload that no longer reads still lists the node.
  first.latest_payload = "{}";
  node = NodeSummaryJson(first, before.at, 30);
  EXPECT_EQ(node.at("node").as_string(), "gpu-node-0001");
  EXPECT_TRUE(node.at("cpu_count").is_null());
  EXPECT_TRUE(node.at("gpus").as_array().empty());
}

}  // namespace
}  // namespace uplink::console
