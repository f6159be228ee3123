#include "agent/node/gpu/nvml_library.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_gpu.h"
#include "support/process.h"

namespace uplink::agent::node {
namespace {

using fake_gpu::FakeNvmlCalls;
using fake_gpu::FakeNvmlConfig;
using fake_gpu::FullGpu;
using ::testing::Contains;
using ::testing::HasSubstr;

// Lets every call through and remembers which were made.
class RecordingObserver : public NvmlCallObserver {
 public:
  bool BeforeCall(const char* function, std::optional<unsigned> gpu) override {
    if (calls.size() == allowed_calls) return false;
    calls.push_back(std::string(function) + (gpu ? "@" + std::to_string(*gpu) : ""));
    ++open_calls;
    return true;
  }
  void AfterCall() override { --open_calls; }

  std::vector<std::string> calls;
  size_t allowed_calls = ~size_t{0};
  int open_calls = 0;
};

class NvmlLibraryTest : public ::testing::Test {
 protected:
  Result<std::unique_ptr<NvmlLibrary>> Open(const char* path = FAKE_NVML_PATH) {
    return NvmlLibrary::Open(path, observer_);
  }
  GpuReading ReadOrDie(const FakeNvmlConfig& config, const char* path = FAKE_NVML_PATH) {
    config.Install();
    auto library = Open(path);
    EXPECT_TRUE(library.ok()) << library.status().ToString();
    if (!library.ok()) return {};
    auto reading = (*library)->Read(observer_);
    EXPECT_TRUE(reading.ok()) << reading.status().ToString();
    return reading.ok() ? *reading : GpuReading{};
  }

  uplink::testing::TempDir dir_;
  FakeNvmlConfig config_{dir_};
  RecordingObserver observer_;
};

TEST_F(NvmlLibraryTest, EveryFigureReachesTheReadingInItsUnits) {
  config_.Set("gpu_count", "2").Add(FullGpu(0)).Add(FullGpu(1));
  GpuReading reading = ReadOrDie(config_);

  EXPECT_EQ(reading.driver_version, "550.54.15");
  EXPECT_TRUE(reading.problems.empty());
  ASSERT_EQ(reading.gpus.size(), 2u);
  const Gpu& h100 = reading.gpus[0];
  EXPECT_EQ(h100.index, 0u);
  EXPECT_EQ(h100.uuid, "GPU-5d1f6a3e-0000-4a5b-9c8d-000000000000");
  EXPECT_EQ(h100.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(h100.utilization_percent, 97.0);
  EXPECT_EQ(h100.memory_utilization_percent, 41.0);
  EXPECT_EQ(h100.memory_used_bytes, 61203283968u);
  EXPECT_EQ(h100.memory_total_bytes, 85520809984u);
  EXPECT_EQ(h100.temperature_celsius, 63.0);
  ASSERT_TRUE(h100.power_watts.has_value());
  EXPECT_DOUBLE_EQ(*h100.power_watts, 512.3);  // milliwatts to watts
  EXPECT_EQ(h100.power_limit_watts, 700.0);
  EXPECT_EQ(h100.sm_clock_mhz, 1980u);
  EXPECT_EQ(h100.memory_clock_mhz, 2619u);
  EXPECT_EQ(h100.ecc_corrected, 3u);  // volatile, not the aggregate 300
  EXPECT_EQ(h100.ecc_uncorrected, 1u);
  EXPECT_EQ(h100.throttle_reasons, 4u);
  EXPECT_EQ(h100.pcie_generation, 5u);
  EXPECT_EQ(h100.pcie_width, 16u);
  EXPECT_EQ(h100.mig_mode, MigMode::kDisabled);
  EXPECT_EQ(h100.mig_instances, 0u);
  EXPECT_EQ(h100.process_count, 3u);  // 2 compute + 1 graphics

  const Gpu& a100 = reading.gpus[1];
  EXPECT_EQ(a100.index, 1u);
  EXPECT_EQ(a100.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(a100.pci_bus_id, "00000000:21:00.0");
  EXPECT_DOUBLE_EQ(*a100.power_watts, 61.25);
  EXPECT_EQ(a100.throttle_reasons, 1u);
  EXPECT_EQ(a100.mig_mode, MigMode::kEnabled);
  EXPECT_EQ(a100.process_count, 0u);
}

TEST_F(NvmlLibraryTest, AFailingCallLeavesOnlyItsFigureAbsent) {
  config_.Set("gpu_count", "2").Add(FullGpu(0)).Add(FullGpu(1));
  config_.Set("gpu1.error.nvmlDeviceGetPowerUsage", "15");  // GPU is lost
  config_.Set("gpu0.error.nvmlDeviceGetMemoryInfo", "999");
  GpuReading reading = ReadOrDie(config_);

  ASSERT_EQ(reading.gpus.size(), 2u);
  EXPECT_FALSE(reading.gpus[0].memory_used_bytes.has_value());
  EXPECT_FALSE(reading.gpus[0].memory_total_bytes.has_value());
  EXPECT_TRUE(reading.gpus[0].power_watts.has_value());
  EXPECT_EQ(reading.gpus[0].temperature_celsius, 63.0);
  EXPECT_FALSE(reading.gpus[1].power_watts.has_value());
  EXPECT_EQ(reading.gpus[1].memory_used_bytes, 4194304u);
  EXPECT_EQ(reading.gpus[1].power_limit_watts, 400.0);
  EXPECT_TRUE(reading.problems.empty());
}

TEST_F(NvmlLibraryTest, AnUnsupportedFigureIsAbsentNotZero) {
  config_.Set("gpu_count", "1").Set("gpu0.uuid", "GPU-bare");
  GpuReading reading = ReadOrDie(config_);

  ASSERT_EQ(reading.gpus.size(), 1u);
  const Gpu& gpu = reading.gpus[0];
  EXPECT_EQ(gpu.uuid, "GPU-bare");
  EXPECT_EQ(gpu.name, "");
  EXPECT_FALSE(gpu.utilization_percent || gpu.memory_utilization_percent || gpu.memory_used_bytes ||
               gpu.memory_total_bytes || gpu.temperature_celsius || gpu.power_watts ||
               gpu.power_limit_watts || gpu.sm_clock_mhz || gpu.memory_clock_mhz ||
               gpu.ecc_corrected || gpu.ecc_uncorrected || gpu.throttle_reasons ||
               gpu.pcie_generation || gpu.pcie_width || gpu.process_count);
  EXPECT_EQ(gpu.mig_mode, MigMode::kUnsupported);
}

TEST_F(NvmlLibraryTest, AGpuWithoutAHandleIsLeftOutAndNamed) {
  config_.Set("gpu_count", "3").Add(FullGpu(0)).Add(FullGpu(1)).Add(FullGpu(2));
  config_.Set("gpu1.error.nvmlDeviceGetHandleByIndex_v2", "15");
  GpuReading reading = ReadOrDie(config_);

  ASSERT_EQ(reading.gpus.size(), 2u);
  EXPECT_EQ(reading.gpus[0].index, 0u);
  EXPECT_EQ(reading.gpus[1].index, 2u);
  ASSERT_EQ(reading.problems.size(), 1u);
  EXPECT_EQ(reading.problems[0], "GPU 1: nvmlDeviceGetHandleByIndex_v2 failed: GPU is lost");
}

TEST_F(NvmlLibraryTest, MigInstancesAreTheSlotsWithADevice) {
  config_.Set("gpu_count", "2").Add(FullGpu(0)).Add(FullGpu(1));
  unsigned slots_asked = FakeNvmlCalls(FAKE_NVML_PATH, "nvmlDeviceGetMaxMigDeviceCount");
  GpuReading reading = ReadOrDie(config_);

  ASSERT_EQ(reading.gpus.size(), 2u);
  EXPECT_EQ(reading.gpus[1].mig_mode, MigMode::kEnabled);
  EXPECT_EQ(reading.gpus[1].mig_instances, 3u);  // slots 0, 2 and 5 of 7
  EXPECT_EQ(reading.gpus[0].mig_mode, MigMode::kDisabled);
  EXPECT_EQ(reading.gpus[0].mig_instances, 0u);
  // Only the MIG-enabled GPU was asked for its slots.
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlDeviceGetMaxMigDeviceCount"), slots_asked + 1);
}

TEST_F(NvmlLibraryTest, ProcessesAreComputePlusGraphicsCounted) {
  config_.Set("gpu_count", "3").Add(FullGpu(0)).Add(FullGpu(1)).Add(FullGpu(2));
  config_.Set("gpu0.compute_procs", "5").Set("gpu0.graphics_procs", "2");
  // A compute-only GPU does not support graphics contexts: it has none.
  config_.Set("gpu1.compute_procs", "4").Remove("gpu1.graphics_procs");
  // A failed query leaves the sum unknown rather than too small.
  config_.Set("gpu2.error.nvmlDeviceGetComputeRunningProcesses_v3", "15");
  GpuReading reading = ReadOrDie(config_);

  ASSERT_EQ(reading.gpus.size(), 3u);
  EXPECT_EQ(reading.gpus[0].process_count, 7u);
  EXPECT_EQ(reading.gpus[1].process_count, 4u);
  EXPECT_FALSE(reading.gpus[2].process_count.has_value());
}

TEST_F(NvmlLibraryTest, AnOlderLibraryIsReadThroughTheFunctionsItHas) {
  config_.Set("gpu_count", "1").Add(FullGpu(0)).Set("gpu0.mig_mode", "1");
  unsigned throttle =
      FakeNvmlCalls(FAKE_NVML_LEGACY_PATH, "nvmlDeviceGetCurrentClocksThrottleReasons");
  unsigned compute_v2 =
      FakeNvmlCalls(FAKE_NVML_LEGACY_PATH, "nvmlDeviceGetComputeRunningProcesses_v2");
  config_.Install();
  auto library = Open(FAKE_NVML_LEGACY_PATH);
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_THAT((*library)->missing_functions(), Contains("nvmlDeviceGetMigMode"));
  auto reading = (*library)->Read(observer_);
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->gpus.size(), 1u);

  const Gpu& gpu = reading->gpus[0];
  EXPECT_EQ(gpu.throttle_reasons, 4u);             // through the pre-R535 name
  EXPECT_EQ(gpu.process_count, 3u);                // through the _v2 queries
  EXPECT_EQ(gpu.mig_mode, MigMode::kUnsupported);  // no MIG functions at all
  EXPECT_EQ(gpu.temperature_celsius, 63.0);
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_LEGACY_PATH, "nvmlDeviceGetCurrentClocksThrottleReasons"),
            throttle + 1);
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_LEGACY_PATH, "nvmlDeviceGetComputeRunningProcesses_v2"),
            compute_v2 + 1);
}

TEST_F(NvmlLibraryTest, AnAbsentLibraryIsNotFound) {
  auto by_path = Open("/nonexistent/dir/libnvidia-ml.so.1");
  EXPECT_EQ(by_path.status().code(), StatusCode::kNotFound);
  auto by_name = Open("libuplink-test-no-such-nvml.so.1");
  EXPECT_EQ(by_name.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(by_name.status().message(), HasSubstr("no NVIDIA driver"));
}

TEST_F(NvmlLibraryTest, AFileThatIsNotALibraryIsUnusableNotAbsent) {
  uplink::testing::WriteFileOrDie(dir_.File("libnvidia-ml.so.1"), "not an ELF file\n");
  auto library = Open(dir_.File("libnvidia-ml.so.1").c_str());
  EXPECT_EQ(library.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(library.status().message(), HasSubstr("cannot load"));
}

TEST_F(NvmlLibraryTest, AMissingRequiredFunctionMakesTheLibraryUnusableAndSaysWhich) {
  config_.Set("gpu_count", "1").Add(FullGpu(0)).Install();
  auto library = Open(FAKE_NVML_NO_COUNT_PATH);
  EXPECT_EQ(library.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(library.status().message(), HasSubstr("lacks nvmlDeviceGetCount_v2"));
}

TEST_F(NvmlLibraryTest, AFailedInitMakesTheLibraryUnusableWithNvmlsReason) {
  config_.Set("init_error", "9").Install();
  unsigned shutdowns = FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown");
  auto library = Open();
  EXPECT_EQ(library.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(library.status().message(), "nvmlInit_v2 failed: Driver Not Loaded");
  // No shutdown is owed for an init that failed.
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown"), shutdowns);
}

TEST_F(NvmlLibraryTest, GpusThatCannotBeCountedAreAnError) {
  config_.Set("count_error", "15").Install();
  auto library = Open();
  ASSERT_TRUE(library.ok());
  auto reading = (*library)->Read(observer_);
  EXPECT_EQ(reading.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(reading.status().message(), "nvmlDeviceGetCount_v2 failed: GPU is lost");
}

TEST_F(NvmlLibraryTest, NvmlIsInitialisedOnceAndShutDownOnDestruction) {
  config_.Set("gpu_count", "1").Add(FullGpu(0)).Install();
  unsigned inits = FakeNvmlCalls(FAKE_NVML_PATH, "nvmlInit_v2");
  unsigned shutdowns = FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown");
  {
    auto library = Open();
    ASSERT_TRUE(library.ok());
    ASSERT_TRUE((*library)->Read(observer_).ok());
    ASSERT_TRUE((*library)->Read(observer_).ok());
    EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown"), shutdowns);
  }
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlInit_v2"), inits + 1);
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown"), shutdowns + 1);
}

TEST_F(NvmlLibraryTest, TheObserverSeesEveryCallWithItsGpu) {
  config_.Set("gpu_count", "2").Add(FullGpu(0)).Add(FullGpu(1));
  ReadOrDie(config_);
  EXPECT_THAT(observer_.calls, Contains("dlopen"));
  EXPECT_THAT(observer_.calls, Contains("nvmlInit_v2"));
  EXPECT_THAT(observer_.calls, Contains("nvmlDeviceGetCount_v2"));
  EXPECT_THAT(observer_.calls, Contains("nvmlDeviceGetPowerUsage@0"));
  EXPECT_THAT(observer_.calls, Contains("nvmlDeviceGetPowerUsage@1"));
  EXPECT_THAT(observer_.calls, Contains("nvmlDeviceGetMigDeviceHandleByIndex@1"));
  EXPECT_EQ(observer_.open_calls, 0);
}

TEST_F(NvmlLibraryTest, AnAbandonedReadStopsAtTheNextCall) {
  config_.Set("gpu_count", "2").Add(FullGpu(0)).Add(FullGpu(1)).Install();
  auto library = Open();
  ASSERT_TRUE(library.ok());
  observer_.calls.clear();
  observer_.allowed_calls = 5;
  auto reading = (*library)->Read(observer_);
  EXPECT_EQ(reading.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(observer_.calls.size(), 5u);
}

TEST_F(NvmlLibraryTest, AtMost64GpusAreRead) {
  config_.Set("gpu_count", "70").Add(FullGpu(0));
  GpuReading reading = ReadOrDie(config_);
  EXPECT_EQ(reading.gpus.size(), 64u);
  ASSERT_EQ(reading.problems.size(), 1u);
  EXPECT_EQ(reading.problems[0], "NVML counts 70 GPUs; only the first 64 are read");
}

}  // namespace
}  // namespace uplink::agent::node
