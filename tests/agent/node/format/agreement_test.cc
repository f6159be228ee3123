// The real node_exporter 1.5 and the node role read the same fixture tree; every series of
// every family both serve must carry the same labels and the same value.
//
// Filesystems: both tools statfs the fixture's mount points under a fresh root directory of
// this test, so they see the same filesystem (whatever holds $TMPDIR). Its size and inode
// count are fixed, and compared exactly; free space and free inodes move with whatever else
// writes there between the two reads, so for those only the series must match.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "agent/node/format/prometheus.h"
#include "agent/node/host/host_collector.h"
#include "agent/node/host/proc_file.h"
#include "agent/node/host/proc_parsers.h"
#include "exposition.h"
#include "support/process.h"

namespace uplink::agent::node {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNodeExporter = "/usr/bin/prometheus-node-exporter";
constexpr const char* kCurl = "/usr/bin/curl";

std::string Fixture(const std::string& name) {
  return std::string(UPLINK_SOURCE_DIR) + "/tests/fixtures/node/" + name;
}

// Series node_exporter 1.5 serves and the node role does not, by design: all-zero CPU time
// for offline CPUs below the highest online one (procfs 0.8 fills the gaps of its CPU slice).
bool IsOfflineCpuFill(const std::string& family, const std::string& labels, double value,
                      const std::set<std::string>& our_cpus) {
  if (family != "node_cpu_seconds_total" && family != "node_cpu_guest_seconds_total") {
    return false;
  }
  const std::size_t start = labels.find("cpu=\"");
  if (start == std::string::npos || value != 0) return false;
  const std::size_t end = labels.find('"', start + 5);
  return !our_cpus.contains(labels.substr(start + 5, end - start - 5));
}

struct Tree {
  std::string proc;  // the fixture's, read in place
  std::string root;  // the mount points of its mountinfo, as empty directories
  std::string sys;
};

Tree MakeTree(const testing::TempDir& dir, const std::string& fixture) {
  Tree tree{Fixture(fixture) + "/proc", dir.File("root"), dir.File("sys")};
  fs::create_directories(tree.root);
  fs::create_directories(tree.sys);
  std::string mountinfo;
  ProcFile mountinfo_file(tree.proc + "/1/mountinfo");
  EXPECT_FALSE(mountinfo_file.Read(kLargeProcFileCap, mountinfo));
  auto mounts = ParseMountinfo(mountinfo);
  EXPECT_TRUE(mounts.ok());
  if (mounts.ok()) {
    for (const Mount& mount : mounts->value) fs::create_directories(tree.root + mount.mount_point);
  }
  return tree;
}

std::string Scrape(int port) {
  auto result = testing::RunCommand({kCurl, "-sS", "--max-time", "30",
                                     "http://127.0.0.1:" + std::to_string(port) + "/metrics"});
  return result.exit_code == 0 ? result.out : "";
}

// node_exporter's answer for the tree, with only the collectors the node role matches, and
// upstream 1.5's defaults spelled out: Debian's build changes two of them.
std::string RunNodeExporter(const testing::TempDir& dir, const Tree& tree) {
  const int port = testing::FreePort();
  testing::ChildProcess exporter(
      {kNodeExporter, "--path.procfs=" + tree.proc, "--path.sysfs=" + tree.sys,
       "--path.rootfs=" + tree.root, "--path.udev.data=" + dir.File("no-udev"),
       "--collector.disable-defaults", "--collector.cpu", "--collector.meminfo",
       "--collector.loadavg", "--collector.pressure", "--collector.netdev",
       "--collector.diskstats", "--collector.stat", "--collector.filesystem",
       "--no-collector.netdev.netlink", "--collector.netdev.device-exclude=",
       "--collector.filesystem.mount-points-exclude=" + std::string(kDefaultMountPointsExclude),
       "--collector.filesystem.fs-types-exclude=" + std::string(kDefaultFsTypesExclude),
       "--collector.diskstats.device-exclude=" + std::string(kDefaultDiskDevicesExclude),
       "--web.disable-exporter-metrics", "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      dir.path());
  std::string text;
  const bool answered = testing::WaitFor([&] {
    text = Scrape(port);
    return !text.empty();
  });
  EXPECT_TRUE(answered) << "node_exporter did not answer; its stderr:\n" << exporter.Stderr();
  return text;
}

class AgreementTest : public ::testing::TestWithParam<const char*> {};

TEST_P(AgreementTest, EveryCommonSeriesHasTheSameValue) {
  ASSERT_EQ(::access(kNodeExporter, X_OK), 0)
      << kNodeExporter << " is missing: run `make deps` (it installs prometheus-node-exporter, "
      << "the reference these names and values are checked against)";
  ASSERT_EQ(::access(kCurl, X_OK), 0) << kCurl << " is missing: run `make deps`";

  testing::TempDir dir;
  const Tree tree = MakeTree(dir, GetParam());

  HostCollectorOptions options;
  options.host_proc = tree.proc;
  options.host_root = tree.root;
  auto collector = HostCollector::Create(options);
  ASSERT_TRUE(collector.ok()) << collector.status().ToString();
  NodeSample sample;
  sample.node = "agreement";
  sample.collected_at = SystemClock().Now();
  sample.collected = CollectorSet::All();
  sample.collected.Remove(Collector::kGpu);
  (*collector)->Collect(sample.collected, sample);
  std::string ours_text;
  RenderPrometheus(sample, ours_text);
  const text_format::Exposition ours = text_format::ParseExposition(ours_text);
  ASSERT_EQ(ours.error, "");

  const std::string theirs_text = RunNodeExporter(dir, tree);
  const text_format::Exposition theirs = text_format::ParseExposition(theirs_text);
  ASSERT_EQ(theirs.error, "") << "node_exporter's own text:\n" << theirs_text;

  // node_exporter read every source, so the comparison covers them all.
  for (const char* name : {"cpu", "diskstats", "filesystem", "loadavg", "meminfo", "netdev",
                           "stat"}) {
    const auto& success = theirs.families.at("node_scrape_collector_success").series;
    EXPECT_EQ(success.at("collector=\"" + std::string(name) + "\""), 1) << name;
  }
  for (const char* name : {"node_cpu_seconds_total", "node_boot_time_seconds",
                           "node_memory_MemTotal_bytes", "node_load1",
                           "node_network_receive_bytes_total", "node_disk_reads_completed_total",
                           "node_disk_info", "node_filesystem_size_bytes"}) {
    EXPECT_TRUE(theirs.families.contains(name)) << name;
  }
  EXPECT_EQ(theirs.families.contains("node_pressure_cpu_waiting_seconds_total"),
            sample.pressure.has_value());

  std::set<std::string> our_cpus;
  if (sample.cpu) {
    for (const PerCpuTimes& cpu : sample.cpu->per_cpu) our_cpus.insert(std::to_string(cpu.cpu));
  }
  // node_exporter about itself.
  const std::set<std::string> only_theirs = {
      "node_scrape_collector_duration_seconds", "node_scrape_collector_success",
      "node_exporter_build_info", "promhttp_metric_handler_errors_total"};
  const std::set<std::string> only_ours = {"node_time_seconds"};  // node_exporter's time collector
  const std::set<std::string> moving = {"node_filesystem_free_bytes",
                                        "node_filesystem_avail_bytes",
                                        "node_filesystem_files_free"};
  std::size_t compared = 0;
  for (const auto& [name, their_family] : theirs.families) {
    if (only_theirs.contains(name)) continue;
    auto found = ours.families.find(name);
    if (found == ours.families.end()) {
      ADD_FAILURE() << name << " is served by node_exporter only";
      continue;
    }
    const text_format::Family& our_family = found->second;
    EXPECT_EQ(our_family.type, their_family.type) << name;
    EXPECT_EQ(our_family.help, their_family.help) << name;
    for (const auto& [labels, value] : their_family.series) {
      auto series = our_family.series.find(labels);
      if (series == our_family.series.end()) {
        if (!IsOfflineCpuFill(name, labels, value, our_cpus)) {
          ADD_FAILURE() << name << "{" << labels << "} is served by node_exporter only";
        }
        continue;
      }
      ++compared;
      if (!moving.contains(name)) {
        EXPECT_EQ(series->second, value) << name << "{" << labels << "}";
      }
    }
    for (const auto& [labels, value] : our_family.series) {
      if (!their_family.series.contains(labels)) {
        ADD_FAILURE() << name << "{" << labels << "} is served by the node role only";
      }
    }
  }
  for (const auto& [name, family] : ours.families) {
    if (name.starts_with("node_") && !theirs.families.contains(name) && !only_ours.contains(name)) {
      ADD_FAILURE() << name << " is served by the node role only";
    }
  }
  EXPECT_GT(compared, 100u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AgreementTest,
                         ::testing::Values("real-capture", "centos7-no-psi", "cpu256-offline",
                                           "kernel6-long-names"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace uplink::agent::node
