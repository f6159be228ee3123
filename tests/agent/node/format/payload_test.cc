#include "agent/node/format/payload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/json.h"

namespace uplink::agent::node {
namespace {

using namespace std::string_literals;

// JSON values equal as the console reads them: numbers by value, whatever their spelling
// (97 and 97.0), objects by their key sets and values.
std::string Difference(const json::value& ours, const json::value& theirs,
                       const std::string& where) {
  if (ours.is_number() && theirs.is_number()) {
    return ours.to_number<double>() == theirs.to_number<double>()
               ? ""
               : where + ": " + json::serialize(ours) + " != " + json::serialize(theirs);
  }
  if (ours.kind() != theirs.kind()) {
    return where + ": " + json::serialize(ours) + " is not like " + json::serialize(theirs);
  }
  if (ours.is_object()) {
    const auto& a = ours.as_object();
    const auto& b = theirs.as_object();
    for (const auto& [key, value] : a) {
      if (!b.contains(key)) return where + "." + std::string(key) + " is extra";
    }
    for (const auto& [key, value] : b) {
      if (!a.contains(key)) return where + "." + std::string(key) + " is missing";
      std::string d = Difference(a.at(key), value, where + "." + std::string(key));
      if (!d.empty()) return d;
    }
    return "";
  }
  if (ours.is_array()) {
    const auto& a = ours.as_array();
    const auto& b = theirs.as_array();
    if (a.size() != b.size()) return where + ": " + std::to_string(a.size()) + " entries";
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string d = Difference(a[i], b[i], where + "[" + std::to_string(i) + "]");
      if (!d.empty()) return d;
    }
    return "";
  }
  return ours == theirs ? "" : where + ": " + json::serialize(ours) + " != " + json::serialize(theirs);
}

// The example of docs/protocol.md, "Node samples", as the document itself has it.
json::value DocExample() {
  std::ifstream in(std::string(UPLINK_SOURCE_DIR) + "/docs/protocol.md");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string doc = buffer.str();
  const std::size_t section = doc.find("## Node samples");
  const std::size_t begin = doc.find("```json\n", section);
  const std::size_t end = doc.find("\n```", begin + 8);
  if (section == std::string::npos || begin == std::string::npos || end == std::string::npos) {
    ADD_FAILURE() << "docs/protocol.md has no Node samples example";
    return nullptr;
  }
  auto parsed = ParseJson(doc.substr(begin + 8, end - begin - 8));
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : json::value(nullptr);
}

// The sample the doc's example describes.
NodeSample DocSample() {
  NodeSample sample;
  sample.node = "gpu-node-0001";
  sample.collected_at = *ParseRfc3339("2026-11-30T03:20:00.125Z");
  sample.collected = CollectorSet::All();
  CpuStats cpu;
  cpu.boot_time = 1764400000;
  cpu.total = {81234.5, 0.2, 9120.3, 7712345.9, 120.4, 0, 310.7, 0, 0, 0};
  for (int i = 0; i < 64; ++i) cpu.per_cpu.push_back({i, {}});
  sample.cpu = cpu;
  Memory memory;
  memory.total_bytes = 540000000000;
  memory.available_bytes = 500000000000;
  memory.free_bytes = 400000000000;
  memory.buffers_bytes = 1000000;
  memory.cached_bytes = 90000000000;
  memory.swap_total_bytes = 0;
  memory.swap_free_bytes = 0;
  sample.memory = memory;
  sample.load = Load{0.52, 0.41, 0.33};
  sample.uptime_seconds = 123456.78;
  Pressure pressure;
  pressure.cpu_some = PressureLine{0, 0, 0, 12.5};
  pressure.memory_some = PressureLine{0, 0, 0, 0.4};
  pressure.memory_full = PressureLine{0, 0, 0, 0.1};
  pressure.io_some = PressureLine{0, 0, 0, 3.2};
  pressure.io_full = PressureLine{0, 0, 0, 2.9};
  sample.pressure = pressure;
  NetDevice eth0;
  eth0.device = "eth0";
  eth0.receive_bytes = 123;
  eth0.transmit_bytes = 456;
  eth0.receive_packets = 7;
  eth0.transmit_packets = 8;
  eth0.receive_multicast = 99;  // a figure the payload does not carry
  sample.network = {eth0};
  DiskStats disk;
  disk.device = "nvme0n1";
  disk.sectors_read = 2;
  disk.sectors_written = 4;
  disk.reads_completed = 1;
  disk.writes_completed = 2;
  disk.io_ms = 500;
  disk.weighted_io_ms = 900;
  sample.disks = {disk};
  Filesystem root;
  root.mountpoint = "/";
  root.device = "/dev/nvme0n1p1";
  root.fstype = "ext4";
  root.size_bytes = 1000;
  root.avail_bytes = 500;
  root.free_bytes = 600;
  root.files = 100;
  root.files_free = 50;
  Filesystem nfs;
  nfs.mountpoint = "/mnt/nfs";
  nfs.device = "nfs:/export";
  nfs.fstype = "nfs4";
  nfs.error = "statvfs did not answer within 5 s; skipped until it does";
  sample.filesystems = {root, nfs};
  GpuReport report;
  report.source = GpuSource::kNvml;
  report.driver_version = "550.54.15";
  Gpu gpu;
  gpu.index = 0;
  gpu.uuid = "GPU-5d1f…";
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.pci_bus_id = "00000000:1B:00.0";
  gpu.utilization_percent = 97;
  gpu.memory_utilization_percent = 41;
  gpu.memory_used_bytes = 61203283968;
  gpu.memory_total_bytes = 85520809984;
  gpu.temperature_celsius = 63;
  gpu.power_watts = 512.3;
  gpu.power_limit_watts = 700;
  gpu.sm_clock_mhz = 1980;
  gpu.memory_clock_mhz = 2619;
  gpu.ecc_corrected = 0;
  gpu.ecc_uncorrected = 0;
  gpu.throttle_reasons = 0;
  gpu.pcie_generation = 5;
  gpu.pcie_width = 16;
  gpu.mig_mode = MigMode::kDisabled;
  gpu.mig_instances = 0;
  gpu.process_count = 1;
  report.gpus = {gpu};
  sample.gpus = report;
  sample.gaps = {{"pressure", "/host/proc/pressure/cpu", "No such file or directory", 2}};
  return sample;
}

json::value Render(const NodeSample& sample) {
  const std::string text = RenderPayload(sample);
  auto parsed = ParseJson(text, {.max_bytes = 64 << 20});
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << text.substr(0, 2000);
  return parsed.ok() ? *parsed : json::value(nullptr);
}

TEST(RenderPayload, IsTheProtocolDocumentsExampleForTheSameSample) {
  const json::value expected = DocExample();
  ASSERT_TRUE(expected.is_object());
  EXPECT_EQ(Difference(Render(DocSample()), expected, "payload"), "");
}

TEST(RenderPayload, IsCompact) {
  const std::string text = RenderPayload(DocSample());
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_EQ(text.find("\": "), std::string::npos);
  EXPECT_EQ(text.find(", \""), std::string::npos);
  EXPECT_EQ(text.rfind("{\"kind\":\"node_sample\",\"version\":1,", 0), 0u);
}

TEST(RenderPayload, WritesVectorSectionsOnlyWhenTheirFiguresAreKnown) {
  NodeSample sample;
  sample.node = "n";
  sample.collected.Add(Collector::kNetwork);
  sample.collected.Add(Collector::kDisk);
  sample.gaps = {{"disk", "/host/proc/diskstats", "Permission denied", 13}};
  const json::value payload = Render(sample);
  const auto& object = payload.as_object();
  ASSERT_TRUE(object.contains("network")) << "asked for, read, and empty";
  EXPECT_TRUE(object.at("network").as_array().empty());
  EXPECT_FALSE(object.contains("disks")) << "empty because its source failed";
  EXPECT_FALSE(object.contains("filesystems")) << "not asked for";
  for (const char* key : {"cpu", "memory", "load", "uptime_seconds", "pressure", "boot_time",
                          "gpu_source", "gpus"}) {
    EXPECT_FALSE(object.contains(key)) << key;
  }
  EXPECT_EQ(object.at("gaps").as_array().size(), 1u);
}

TEST(RenderPayload, StaysValidJsonWithHostileStringsAndLeavesOutNonFiniteNumbers) {
  NodeSample sample;
  sample.node = std::string(300, 'n');
  sample.collected.Add(Collector::kNetwork);
  sample.collected.Add(Collector::kFilesystem);
  NetDevice device;
  device.device = "a\"b\\c\n\x01\xFF\0z"s;
  sample.network = {device};
  Filesystem fs;
  fs.mountpoint = "/" + std::string(5000, 'm');
  fs.device = "dev";
  fs.fstype = "ext4";
  sample.filesystems = {fs};
  sample.load = Load{std::nan(""), 1, std::numeric_limits<double>::infinity()};
  sample.uptime_seconds = std::nan("");
  const json::value payload = Render(sample);
  const auto& object = payload.as_object();
  EXPECT_EQ(object.at("node").as_string().size(), 253u);
  EXPECT_EQ(object.at("network").as_array()[0].as_object().at("device").as_string(),
            "a\"b\\c\n\x01\xEF\xBF\xBD\0z"s);
  EXPECT_EQ(object.at("filesystems").as_array()[0].as_object().at("mountpoint").as_string().size(),
            4096u);
  const auto& load = object.at("load").as_object();
  EXPECT_FALSE(load.contains("load1"));
  EXPECT_EQ(load.at("load5").to_number<double>(), 1);
  EXPECT_FALSE(load.contains("load15"));
  EXPECT_FALSE(object.contains("uptime_seconds"));
}

TEST(RenderPayload, CapsArraysAndSaysWhatWasLeftOut) {
  NodeSample sample;
  sample.node = "n";
  sample.collected.Add(Collector::kNetwork);
  for (int i = 0; i < 1500; ++i) {
    NetDevice device;
    device.device = "veth" + std::to_string(i);
    sample.network.push_back(device);
  }
  for (int i = 0; i < 300; ++i) {
    sample.gaps.push_back({"filesystem", "/mnt/" + std::to_string(i), "Permission denied", 13});
  }
  const json::value payload = Render(sample);
  const auto& object = payload.as_object();
  EXPECT_EQ(object.at("network").as_array().size(), protocol::kMaxSampleInterfaces);
  const auto& gaps = object.at("gaps").as_array();
  ASSERT_EQ(gaps.size(), protocol::kMaxSampleGaps);
  EXPECT_EQ(gaps[253].as_object().at("path").as_string(), "/mnt/253");
  EXPECT_EQ(gaps[254].as_object().at("error").as_string(),
            "1500 interfaces; the first 1024 are sent");
  EXPECT_EQ(gaps[254].as_object().at("source").as_string(), "network");
  EXPECT_EQ(gaps[255].as_object().at("error").as_string(),
            "46 more gaps; the payload carries 256");
}

TEST(RenderPayload, WritesOnlyTheFiguresAGpuHas) {
  NodeSample sample;
  sample.node = "n";
  GpuReport report;
  report.source = GpuSource::kNvidiaSmi;
  Gpu gpu;
  gpu.index = 3;
  gpu.uuid = "GPU-3";
  gpu.name = "Tesla T4";
  gpu.temperature_celsius = 51.5;
  report.gpus = {gpu};
  sample.gpus = report;
  const json::value payload = Render(sample);
  EXPECT_EQ(payload.at("gpu_source").as_string(), "nvidia-smi");
  EXPECT_EQ(Difference(payload.at("gpus"),
                       *ParseJson(R"([{"index":3,"uuid":"GPU-3","name":"Tesla T4",)"
                                  R"("temperature_celsius":51.5}])"),
                       "gpus"),
            "");
  sample.gpus->source = GpuSource::kNone;
  sample.gpus->gpus.clear();
  const json::value none = Render(sample);
  EXPECT_EQ(none.at("gpu_source").as_string(), "none");
  EXPECT_TRUE(none.at("gpus").as_array().empty());
}

}  // namespace
}  // namespace uplink::agent::node
