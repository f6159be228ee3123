// Test helpers around the fake libnvidia-ml.so.1 and the fake nvidia-smi built next to these
// tests: a config written to a temporary directory and named in the environment, the fake
// library's call counters, and the fixture captures.
#pragma once

#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support/process.h"

namespace uplink::agent::node::fake_gpu {

// A fully described GPU in the fake's keys (see fake_nvml.cc).
inline std::map<std::string, std::string> FullGpu(int gpu) {
  std::string p = "gpu" + std::to_string(gpu) + ".";
  if (gpu == 0) {
    return {{p + "uuid", "GPU-5d1f6a3e-0000-4a5b-9c8d-000000000000"},
            {p + "name", "NVIDIA H100 80GB HBM3"},
            {p + "bus_id", "00000000:18:00.0"},
            {p + "util_gpu", "97"},
            {p + "util_mem", "41"},
            {p + "mem_total", "85520809984"},
            {p + "mem_used", "61203283968"},
            {p + "temp", "63"},
            {p + "power_mw", "512300"},
            {p + "power_limit_mw", "700000"},
            {p + "sm_clock", "1980"},
            {p + "mem_clock", "2619"},
            {p + "ecc_corrected", "3"},
            {p + "ecc_uncorrected", "1"},
            {p + "ecc_aggregate_corrected", "300"},
            {p + "ecc_aggregate_uncorrected", "100"},
            {p + "clock_reasons", "0x4"},
            {p + "pcie_gen", "5"},
            {p + "pcie_width", "16"},
            {p + "mig_mode", "0"},
            {p + "compute_procs", "2"},
            {p + "graphics_procs", "1"}};
  }
  return {{p + "uuid", "GPU-" + std::to_string(gpu) + "aaaaaaa-1111-2222-3333-444444444444"},
          {p + "name", "NVIDIA A100-SXM4-80GB"},
          {p + "bus_id", "00000000:" + std::to_string(20 + gpu) + ":00.0"},
          {p + "util_gpu", "5"},
          {p + "util_mem", "1"},
          {p + "mem_total", "85899345920"},
          {p + "mem_used", "4194304"},
          {p + "temp", "35"},
          {p + "power_mw", "61250"},
          {p + "power_limit_mw", "400000"},
          {p + "sm_clock", "210"},
          {p + "mem_clock", "1593"},
          {p + "ecc_corrected", "0"},
          {p + "ecc_uncorrected", "0"},
          {p + "clock_reasons", "0x1"},
          {p + "pcie_gen", "4"},
          {p + "pcie_width", "16"},
          {p + "mig_mode", "1"},
          {p + "mig_slots", "7"},
          {p + "mig_devices", "0,2,5"},
          {p + "compute_procs", "0"},
          {p + "graphics_procs", "0"}};
}

// The fake library's config: built up, then written and named in $FAKE_NVML_CONFIG. Tests
// install it before they start a collector, so no thread reads the environment meanwhile.
class FakeNvmlConfig {
 public:
  explicit FakeNvmlConfig(const uplink::testing::TempDir& dir) : path_(dir.File("nvml.conf")) {
    values_["driver_version"] = "550.54.15";
  }
  FakeNvmlConfig& Set(const std::string& key, const std::string& value) {
    values_[key] = value;
    return *this;
  }
  FakeNvmlConfig& Remove(const std::string& key) {
    values_.erase(key);
    return *this;
  }
  FakeNvmlConfig& Add(const std::map<std::string, std::string>& values) {
    for (const auto& [key, value] : values) values_[key] = value;
    return *this;
  }
  void Install() const {
    std::string text;
    for (const auto& [key, value] : values_) text += key + "=" + value + "\n";
    uplink::testing::WriteFileOrDie(path_, text);
    ::setenv("FAKE_NVML_CONFIG", path_.c_str(), 1);
  }

 private:
  std::string path_;
  std::map<std::string, std::string> values_;
};

// How often the fake at `library_path` saw `function` called (across the whole test run).
inline unsigned FakeNvmlCalls(const char* library_path, const char* function) {
  // The same path gives the collector's own instance; the handle is kept for the run.
  void* handle = ::dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return ~0u;
  auto calls = reinterpret_cast<unsigned (*)(const char*)>(::dlsym(handle, "fake_nvml_calls"));
  return calls != nullptr ? calls(function) : ~0u;
}

// Initialisations of the fake at `library_path` not yet matched by nvmlShutdown.
inline int FakeNvmlSessions(const char* library_path) {
  void* handle = ::dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return -1;
  auto sessions = reinterpret_cast<int (*)()>(::dlsym(handle, "fake_nvml_sessions"));
  return sessions != nullptr ? sessions() : -1;
}

inline std::string FixturesDir() { return std::string(UPLINK_FIXTURES_DIR) + "/nvidia-smi"; }

// Every --query-gpu capture in the fixtures: the 20 cut from nvidia_gpu_exporter's captures,
// its hand-made two-GPU query.txt, and netdata's Tesla P100 CSV.
inline std::vector<std::string> QueryGpuFixtures() {
  std::vector<std::string> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(FixturesDir() + "/nvidia_gpu_exporter/csv")) {
    std::string name = entry.path().filename().string();
    if (name.ends_with("__query-gpu.csv") || name == "nvidia_gpu_exporter-query.txt") {
      files.push_back(entry.path().string());
    }
  }
  files.push_back(FixturesDir() + "/netdata/netdata-tesla-p100.csv");
  std::sort(files.begin(), files.end());
  return files;
}

// Points the fake nvidia-smi at a capture and clears any misbehaviour.
inline void UseSmiFixture(const std::string& fixture) {
  ::setenv("FAKE_SMI_FIXTURE", fixture.c_str(), 1);
  ::unsetenv("FAKE_SMI_MODE");
  ::unsetenv("FAKE_SMI_REJECT");
  ::unsetenv("FAKE_SMI_LOG");
}

}  // namespace uplink::agent::node::fake_gpu
