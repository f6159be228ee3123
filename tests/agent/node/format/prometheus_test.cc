#include "agent/node/format/prometheus.h"

#include <gtest/gtest.h>

#include "exposition.h"

namespace uplink::agent::node {
namespace {

using text_format::ParseExposition;

NodeSample RichSample() {
  NodeSample sample;
  sample.node = "gpu-node-0001";
  sample.collected_at = FromUnixSeconds(1'800'000'000) + std::chrono::milliseconds(125);
  sample.collected = CollectorSet::All();

  CpuStats cpu;
  cpu.total = {100, 1, 20, 500, 3, 0, 2, 0, 0, 0};
  cpu.per_cpu = {{0, {60, 1, 10, 250, 2, 0, 1, 0.5, 7, 0.25}},
                 {3, {40, 0, 10, 250, 1, 0, 1, 0, 0, 0}}};
  cpu.context_switches = 1234567;
  cpu.interrupts = 89;
  cpu.forks = 4567;
  cpu.procs_running = 3;
  cpu.procs_blocked = 1;
  cpu.boot_time = 1764400000;
  sample.cpu = cpu;

  Memory memory;
  memory.fields = {{"MemTotal", 1024 * 1024, true},
                   {"Active(anon)", 2048, true},
                   {"HugePages_Total", 4, false},
                   {"Bar_total", 7, false},
                   {"Active_anon", 9999, true},  // mangles to the name Active(anon) took
                   {"Active(an)on", 5555, true},  // and a third line to it
                   {"Bad(name", 1, true}};       // no closing parenthesis: '(' is invalid
  sample.memory = memory;
  sample.load = Load{0.52, 0.41, 0.33};
  sample.uptime_seconds = 35600.5;

  Pressure pressure;
  pressure.cpu_some = PressureLine{1, 2, 3, 12.5};
  pressure.cpu_full = PressureLine{0, 0, 0, 9.5};
  pressure.memory_some = PressureLine{0, 0, 0, 0.4};
  pressure.io_some = PressureLine{0, 0, 0, 3.2};
  pressure.io_full = PressureLine{0, 0, 0, 2.9};
  sample.pressure = pressure;

  NetDevice eth0;
  eth0.device = "eth0";
  eth0.receive_bytes = 123;
  eth0.transmit_colls = 4;
  NetDevice odd;
  odd.device = "we\"ird\\dev\nx";
  odd.transmit_carrier = 18446744073709551615u;
  sample.network = {eth0, odd};

  DiskStats sda;
  sda.major = 8;
  sda.device = "sda";
  sda.sectors_read = 2;
  sda.read_ms = 1500;
  sda.io_in_progress = 2;
  DiskStats nvme;
  nvme.major = 259;
  nvme.minor = 1;
  nvme.device = "nvme0n1";
  nvme.discards_completed = 5;
  nvme.discards_merged = 6;
  nvme.sectors_discarded = 7;
  nvme.discard_ms = 8;
  nvme.flushes_completed = 9;
  nvme.flush_ms = 10;
  sample.disks = {sda, nvme};

  Filesystem root;
  root.device = "/dev/nvme0n1p1";
  root.mountpoint = "/";
  root.fstype = "ext4";
  root.size_bytes = 1000;
  root.free_bytes = 600;
  root.avail_bytes = 500;
  root.files = 100;
  root.files_free = 50;
  Filesystem nfs;
  nfs.device = "10.0.0.5:/export";
  nfs.mountpoint = "/mnt/nfs";
  nfs.fstype = "nfs4";
  nfs.readonly = true;
  nfs.error = "statvfs did not answer within 5 s; skipped until it does";
  sample.filesystems = {root, nfs};

  GpuReport report;
  report.source = GpuSource::kNvml;
  Gpu full;
  full.index = 0;
  full.uuid = "GPU-5d1f";
  full.name = "NVIDIA H100 80GB HBM3";
  full.pci_bus_id = "00000000:1B:00.0";
  full.utilization_percent = 97;
  full.memory_utilization_percent = 41;
  full.memory_used_bytes = 61203283968;
  full.memory_total_bytes = 85520809984;
  full.temperature_celsius = 63;
  full.power_watts = 512.3;
  full.power_limit_watts = 700;
  full.sm_clock_mhz = 1980;
  full.memory_clock_mhz = 2619;
  full.ecc_corrected = 3;
  full.ecc_uncorrected = 0;
  full.throttle_reasons = 4;
  full.pcie_generation = 5;
  full.pcie_width = 16;
  Gpu sparse;
  sparse.index = 1;
  sparse.uuid = "GPU-77";
  sparse.name = "NVIDIA L40S";
  sparse.temperature_celsius = 40;
  report.gpus = {full, sparse};
  sample.gpus = report;

  sample.gaps = {{"pressure", "/host/proc/pressure/cpu", "No such file or directory", 2},
                 {"filesystem", "/host/mnt/nfs", nfs.error, 0},
                 {"filesystem", "/host/mnt/nfs", nfs.error, 0}};
  return sample;
}

class RenderPrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RenderPrometheus(RichSample(), text_);
    exposition_ = ParseExposition(text_);
    ASSERT_EQ(exposition_.error, "") << text_;
  }
  const text_format::Family& Family(const std::string& name) {
    static const text_format::Family kMissing;
    auto it = exposition_.families.find(name);
    EXPECT_NE(it, exposition_.families.end()) << name << " is missing";
    return it == exposition_.families.end() ? kMissing : it->second;
  }
  double Value(const std::string& name, const std::string& labels = "") {
    const auto& series = Family(name).series;
    auto it = series.find(labels);
    EXPECT_NE(it, series.end()) << name << "{" << labels << "} is missing";
    return it == series.end() ? -1 : it->second;
  }
  bool Has(const std::string& name) { return exposition_.families.contains(name); }

  std::string text_;
  text_format::Exposition exposition_;
};

TEST_F(RenderPrometheusTest, WritesCpuTimeAsNodeExporterDoes) {
  EXPECT_NE(text_.find("# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n"
                       "# TYPE node_cpu_seconds_total counter\n"
                       "node_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 60\n"),
            std::string::npos);
  EXPECT_EQ(Family("node_cpu_seconds_total").series.size(), 16u) << "2 CPUs, 8 modes";
  EXPECT_EQ(Value("node_cpu_seconds_total", R"(cpu="3",mode="idle")"), 250);
  EXPECT_EQ(Value("node_cpu_seconds_total", R"(cpu="0",mode="steal")"), 0.5);
  EXPECT_EQ(Value("node_cpu_guest_seconds_total", R"(cpu="0",mode="user")"), 7);
  EXPECT_EQ(Value("node_cpu_guest_seconds_total", R"(cpu="0",mode="nice")"), 0.25);
  EXPECT_EQ(Value("node_context_switches_total"), 1234567);
  EXPECT_EQ(Family("node_context_switches_total").type, "counter");
  EXPECT_EQ(Value("node_intr_total"), 89);
  EXPECT_EQ(Value("node_forks_total"), 4567);
  EXPECT_EQ(Value("node_procs_running"), 3);
  EXPECT_EQ(Family("node_procs_running").type, "gauge");
  EXPECT_EQ(Value("node_procs_blocked"), 1);
  EXPECT_EQ(Value("node_boot_time_seconds"), 1764400000);
  EXPECT_NE(text_.find("node_boot_time_seconds 1.7644e+09\n"), std::string::npos);
  EXPECT_DOUBLE_EQ(Value("node_time_seconds"), 1800000000.125);
}

TEST_F(RenderPrometheusTest, NamesMeminfoLinesAsNodeExporterDoes) {
  EXPECT_EQ(Value("node_memory_MemTotal_bytes"), 1024 * 1024);
  EXPECT_EQ(Family("node_memory_MemTotal_bytes").help, "Memory information field MemTotal_bytes.");
  EXPECT_EQ(Value("node_memory_Active_anon_bytes"), 2048) << "the first of a mangled name stays";
  EXPECT_EQ(Value("node_memory_HugePages_Total"), 4) << "no unit, no _bytes";
  EXPECT_EQ(Family("node_memory_HugePages_Total").type, "gauge");
  EXPECT_EQ(Family("node_memory_Bar_total").type, "counter");
  for (const auto& [name, family] : exposition_.families) {
    EXPECT_EQ(name.find("Bad"), std::string::npos) << name;
  }
}

TEST_F(RenderPrometheusTest, WritesLoadPressureNetworkAndDisks) {
  EXPECT_EQ(Value("node_load1"), 0.52);
  EXPECT_EQ(Value("node_load15"), 0.33);
  EXPECT_EQ(Value("node_pressure_cpu_waiting_seconds_total"), 12.5);
  EXPECT_EQ(Value("node_pressure_memory_waiting_seconds_total"), 0.4);
  EXPECT_FALSE(Has("node_pressure_memory_stalled_seconds_total")) << "no memory full line";
  EXPECT_EQ(Value("node_pressure_io_waiting_seconds_total"), 3.2);
  EXPECT_EQ(Value("node_pressure_io_stalled_seconds_total"), 2.9);

  int network_families = 0;
  for (const auto& [name, family] : exposition_.families) {
    if (name.starts_with("node_network_")) {
      ++network_families;
      EXPECT_EQ(family.type, "counter");
      EXPECT_EQ(family.series.size(), 2u) << name;
    }
  }
  EXPECT_EQ(network_families, 16);
  EXPECT_EQ(Value("node_network_receive_bytes_total", R"(device="eth0")"), 123);
  EXPECT_EQ(Value("node_network_transmit_colls_total", R"(device="eth0")"), 4);
  EXPECT_EQ(Value("node_network_transmit_carrier_total", "device=\"we\"ird\\dev\nx\""),
            18446744073709551615.0)
      << "a hostile name comes back whole through the escapes";

  EXPECT_EQ(Value("node_disk_info", R"(device="nvme0n1",major="259",minor="1")"), 1);
  EXPECT_EQ(Value("node_disk_read_bytes_total", R"(device="sda")"), 1024);
  EXPECT_EQ(Value("node_disk_read_time_seconds_total", R"(device="sda")"), 1.5);
  EXPECT_EQ(Value("node_disk_io_now", R"(device="sda")"), 2);
  EXPECT_EQ(Family("node_disk_io_now").type, "gauge");
  EXPECT_EQ(Family("node_disk_discards_completed_total").series.size(), 1u)
      << "only the disk whose kernel counts discards";
  EXPECT_EQ(Value("node_disk_discarded_sectors_total", R"(device="nvme0n1")"), 7);
  EXPECT_DOUBLE_EQ(Value("node_disk_discard_time_seconds_total", R"(device="nvme0n1")"), 0.008);
  EXPECT_EQ(Value("node_disk_flush_requests_total", R"(device="nvme0n1")"), 9);
  EXPECT_DOUBLE_EQ(Value("node_disk_flush_requests_time_seconds_total", R"(device="nvme0n1")"),
                   0.01);
}

TEST_F(RenderPrometheusTest, WritesOnlyDeviceErrorForAFilesystemThatFailed) {
  const std::string root = R"(device="/dev/nvme0n1p1",fstype="ext4",mountpoint="/")";
  const std::string nfs = R"(device="10.0.0.5:/export",fstype="nfs4",mountpoint="/mnt/nfs")";
  EXPECT_EQ(Value("node_filesystem_device_error", root), 0);
  EXPECT_EQ(Value("node_filesystem_device_error", nfs), 1);
  EXPECT_EQ(Value("node_filesystem_size_bytes", root), 1000);
  EXPECT_EQ(Value("node_filesystem_free_bytes", root), 600);
  EXPECT_EQ(Value("node_filesystem_avail_bytes", root), 500);
  EXPECT_EQ(Value("node_filesystem_files", root), 100);
  EXPECT_EQ(Value("node_filesystem_files_free", root), 50);
  EXPECT_EQ(Value("node_filesystem_readonly", root), 0);
  for (const char* name : {"node_filesystem_size_bytes", "node_filesystem_readonly"}) {
    EXPECT_EQ(Family(name).series.size(), 1u) << name;
  }
}

TEST_F(RenderPrometheusTest, WritesGpusWithDcgmExporterNamesAndLabels) {
  const std::string labels =
      R"(Hostname="gpu-node-0001",UUID="GPU-5d1f",device="nvidia0",gpu="0",)"
      R"(modelName="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:1B:00.0")";
  EXPECT_EQ(Value("DCGM_FI_DEV_GPU_UTIL", labels), 97);
  EXPECT_EQ(Value("DCGM_FI_DEV_MEM_COPY_UTIL", labels), 41);
  EXPECT_EQ(Value("DCGM_FI_DEV_FB_USED", labels), 58368) << "MiB";
  EXPECT_EQ(Value("DCGM_FI_DEV_FB_FREE", labels), 23191);
  EXPECT_EQ(Value("DCGM_FI_DEV_GPU_TEMP", labels), 63);
  EXPECT_EQ(Value("DCGM_FI_DEV_POWER_USAGE", labels), 512.3);
  EXPECT_EQ(Value("DCGM_FI_DEV_POWER_MGMT_LIMIT", labels), 700);
  EXPECT_EQ(Value("DCGM_FI_DEV_SM_CLOCK", labels), 1980);
  EXPECT_EQ(Value("DCGM_FI_DEV_MEM_CLOCK", labels), 2619);
  EXPECT_EQ(Value("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", labels), 3);
  EXPECT_EQ(Family("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL").type, "counter");
  EXPECT_EQ(Value("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", labels), 0);
  EXPECT_EQ(Value("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", labels), 4);
  EXPECT_EQ(Value("DCGM_FI_DEV_PCIE_LINK_GEN", labels), 5);
  EXPECT_EQ(Value("DCGM_FI_DEV_PCIE_LINK_WIDTH", labels), 16);
  const std::string sparse =
      R"(Hostname="gpu-node-0001",UUID="GPU-77",device="nvidia1",gpu="1",modelName="NVIDIA L40S")";
  EXPECT_EQ(Value("DCGM_FI_DEV_GPU_TEMP", sparse), 40);
  EXPECT_EQ(Family("DCGM_FI_DEV_GPU_UTIL").series.size(), 1u) << "absent figures are not zeros";
}

TEST_F(RenderPrometheusTest, TurnsGapsIntoCollectorHealth) {
  EXPECT_EQ(Family("uplink_node_collector_up").series.size(), 9u);
  EXPECT_EQ(Value("uplink_node_collector_up", R"(collector="cpu")"), 1);
  EXPECT_EQ(Value("uplink_node_collector_up", R"(collector="pressure")"), 0);
  EXPECT_EQ(Value("uplink_node_collector_up", R"(collector="filesystem")"), 0);
  EXPECT_EQ(Value("uplink_node_scrape_error_info",
                  R"(errno="2",error="No such file or directory",path="/host/proc/pressure/cpu",)"
                  R"(source="pressure")"),
            1);
  EXPECT_EQ(Family("uplink_node_scrape_error_info").series.size(), 2u)
      << "a repeated gap is one series";
}

TEST(RenderPrometheus, AppendsAndLeavesOutWhatTheSampleLacks) {
  std::string out = "# kept\n";
  RenderPrometheus(NodeSample{}, out);
  EXPECT_EQ(out, "# kept\n") << "an empty sample has no figures, so no families";

  NodeSample only_uptime;
  only_uptime.collected_at = FromUnixSeconds(1000);
  only_uptime.uptime_seconds = 250.5;
  only_uptime.collected.Add(Collector::kUptime);
  out.clear();
  RenderPrometheus(only_uptime, out);
  auto exposition = ParseExposition(out);
  ASSERT_EQ(exposition.error, "") << out;
  EXPECT_EQ(exposition.families["node_boot_time_seconds"].series[""], 749.5)
      << "without btime, the collection time minus the uptime";
  EXPECT_EQ(exposition.families["uplink_node_collector_up"].series[R"(collector="uptime")"], 1);
  EXPECT_EQ(exposition.families.size(), 3u) << out;
}

}  // namespace
}  // namespace uplink::agent::node
