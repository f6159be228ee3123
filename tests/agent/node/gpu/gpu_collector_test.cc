#include "agent/node/gpu/gpu_collector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "fake_gpu.h"
#include "support/process.h"

namespace uplink::agent::node {
namespace {

using fake_gpu::FakeNvmlCalls;
using fake_gpu::FakeNvmlConfig;
using fake_gpu::FullGpu;
using fake_gpu::UseSmiFixture;
using ::testing::HasSubstr;
using uplink::testing::WaitFor;

constexpr auto kGenerous = std::chrono::seconds(60);  // a hang guard, never a measure

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::string H100Capture() {
  return fake_gpu::FixturesDir() +
         "/nvidia_gpu_exporter/csv/"
         "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load__query-gpu.csv";
}

class GpuCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.Set("gpu_count", "2").Add(FullGpu(0)).Add(FullGpu(1));
    UseSmiFixture(H100Capture());
    ::setenv("FAKE_SMI_LOG", dir_.File("smi-runs").c_str(), 1);
  }
  // A hang left in the fake library is always let go, and the thread left behind is seen
  // to shut NVML down, so no test leaves a thread that could touch the next one's counts.
  void TearDown() override {
    if (hang_set_) uplink::testing::WriteFileOrDie(dir_.File("release"), "");
    EXPECT_TRUE(WaitFor([] { return fake_gpu::FakeNvmlSessions(FAKE_NVML_PATH) == 0; }, kGenerous));
    ::unsetenv("FAKE_SMI_LOG");
    ::unsetenv("FAKE_SMI_MODE");
  }

  // Makes `function` hang (on GPU `gpu`, when given) once the "arm" file exists, or at once.
  void HangIn(const std::string& function, std::optional<int> gpu, bool armed_later) {
    config_.Set("hang.function", function)
        .Set("hang.entered_file", dir_.File("entered"))
        .Set("hang.release_file", dir_.File("release"))
        .Set("hang.left_file", dir_.File("left"));
    if (gpu) config_.Set("hang.gpu", std::to_string(*gpu));
    if (armed_later) config_.Set("hang.arm_file", dir_.File("arm"));
    hang_set_ = true;
  }
  void Arm() { uplink::testing::WriteFileOrDie(dir_.File("arm"), ""); }
  bool Entered() const { return Exists(dir_.File("entered")); }
  bool Left() const { return Exists(dir_.File("left")); }
  size_t SmiRuns() const {
    std::string log = uplink::testing::ReadFileOrEmpty(dir_.File("smi-runs"));
    return static_cast<size_t>(std::count(log.begin(), log.end(), '\n'));
  }

  std::unique_ptr<GpuCollector> Start(GpuCollectorOptions options) {
    config_.Install();
    return std::make_unique<GpuCollector>(std::move(options));
  }
  static GpuCollectorOptions Nvml(std::string smi = "") {
    GpuCollectorOptions options;
    options.nvml_path = FAKE_NVML_PATH;
    options.nvidia_smi_path = std::move(smi);
    options.interval = std::chrono::milliseconds(20);
    return options;
  }

  uplink::testing::TempDir dir_;
  FakeNvmlConfig config_{dir_};
  bool hang_set_ = false;
};

TEST_F(GpuCollectorTest, NvmlFiguresReachTheReport) {
  auto collector = Start(Nvml());
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  GpuReport report = collector->Latest();
  EXPECT_EQ(report.source, GpuSource::kNvml);
  EXPECT_TRUE(report.healthy) << report.error;
  EXPECT_EQ(report.error, "");
  EXPECT_EQ(report.driver_version, "550.54.15");
  EXPECT_NE(report.read_at, WallTime{});
  ASSERT_EQ(report.gpus.size(), 2u);
  EXPECT_EQ(report.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(report.gpus[0].memory_total_bytes, 85520809984u);
  EXPECT_DOUBLE_EQ(*report.gpus[0].power_watts, 512.3);
  EXPECT_EQ(report.gpus[0].process_count, 3u);
  EXPECT_EQ(report.gpus[1].mig_mode, MigMode::kEnabled);
  EXPECT_EQ(report.gpus[1].mig_instances, 3u);
}

TEST_F(GpuCollectorTest, GpusAreReadOnTheIntervalNeverPerRequest) {
  unsigned counts = FakeNvmlCalls(FAKE_NVML_PATH, "nvmlDeviceGetCount_v2");
  GpuCollectorOptions options = Nvml();
  options.interval = std::chrono::hours(1);
  auto collector = Start(options);
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(collector->Latest().gpus.size(), 2u);
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlDeviceGetCount_v2"), counts + 1);

  // With a short interval the reads follow one another.
  auto fast = Start(Nvml());
  ASSERT_TRUE(fast->WaitForCycles(4, kGenerous));
  EXPECT_GE(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlDeviceGetCount_v2"), counts + 5);
}

TEST_F(GpuCollectorTest, NoLibraryMeansNoGpusAndNoError) {
  GpuCollectorOptions options = Nvml(FAKE_NVIDIA_SMI_PATH);
  options.nvml_path = dir_.File("absent/libnvidia-ml.so.1");
  auto collector = Start(options);
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  GpuReport report = collector->Latest();
  EXPECT_EQ(report.source, GpuSource::kNone);
  EXPECT_TRUE(report.healthy);
  EXPECT_EQ(report.error, "");
  EXPECT_TRUE(report.gpus.empty());
  EXPECT_EQ(SmiRuns(), 0u);  // no driver: nvidia-smi is not tried either
}

TEST_F(GpuCollectorTest, AnUnusableLibraryFallsBackToNvidiaSmiAndSaysWhy) {
  GpuCollectorOptions options = Nvml(FAKE_NVIDIA_SMI_PATH);
  options.nvml_path = FAKE_NVML_NO_COUNT_PATH;
  auto collector = Start(options);
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  GpuReport report = collector->Latest();
  EXPECT_EQ(report.source, GpuSource::kNvidiaSmi);
  EXPECT_TRUE(report.healthy);
  EXPECT_THAT(report.error, HasSubstr("NVML unusable"));
  EXPECT_THAT(report.error, HasSubstr("lacks nvmlDeviceGetCount_v2"));
  EXPECT_THAT(report.error, HasSubstr("read with nvidia-smi"));
  EXPECT_EQ(report.driver_version, "590.48.01");
  ASSERT_EQ(report.gpus.size(), 1u);
  EXPECT_EQ(report.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(report.gpus[0].memory_used_bytes, 19818ull << 20);
}

TEST_F(GpuCollectorTest, AnUnusableLibraryWithoutFallbackIsUnhealthy) {
  config_.Set("init_error", "9");
  auto collector = Start(Nvml(dir_.File("no-such-nvidia-smi")));
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  GpuReport report = collector->Latest();
  EXPECT_FALSE(report.healthy);
  EXPECT_EQ(report.source, GpuSource::kNone);
  EXPECT_EQ(report.error,
            "NVML unusable: nvmlInit_v2 failed: Driver Not Loaded; no nvidia-smi to fall back on");
}

TEST_F(GpuCollectorTest, AFailingNvidiaSmiKeepsTheLastFiguresAndSaysBoth) {
  ::setenv("FAKE_SMI_MODE", "fail", 1);
  GpuCollectorOptions options = Nvml(FAKE_NVIDIA_SMI_PATH);
  options.nvml_path = FAKE_NVML_NO_COUNT_PATH;
  auto collector = Start(options);
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  GpuReport report = collector->Latest();
  EXPECT_FALSE(report.healthy);
  EXPECT_THAT(report.error, HasSubstr("lacks nvmlDeviceGetCount_v2"));
  EXPECT_THAT(report.error, HasSubstr("nvidia-smi: "));
  EXPECT_THAT(report.error, HasSubstr("exited with status 9"));
}

TEST_F(GpuCollectorTest, AHungNvidiaSmiIsKilledAndReported) {
  ::setenv("FAKE_SMI_MODE", "hang", 1);
  GpuCollectorOptions options = Nvml(FAKE_NVIDIA_SMI_PATH);
  options.nvml_path = FAKE_NVML_NO_COUNT_PATH;
  options.smi_timeout = std::chrono::milliseconds(200);
  auto collector = Start(options);
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  GpuReport report = collector->Latest();
  EXPECT_FALSE(report.healthy);
  EXPECT_THAT(report.error, HasSubstr("did not finish within 200 ms and was killed"));
}

TEST_F(GpuCollectorTest, ALostGpuIsLeftOutAndMarksTheReadUnhealthy) {
  config_.Set("gpu1.error.nvmlDeviceGetHandleByIndex_v2", "15");
  auto collector = Start(Nvml());
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  GpuReport report = collector->Latest();
  EXPECT_EQ(report.source, GpuSource::kNvml);
  EXPECT_FALSE(report.healthy);
  EXPECT_EQ(report.error, "GPU 1: nvmlDeviceGetHandleByIndex_v2 failed: GPU is lost");
  ASSERT_EQ(report.gpus.size(), 1u);
  EXPECT_EQ(report.gpus[0].index, 0u);
}

TEST_F(GpuCollectorTest, TheWatchdogNamesTheHungCallAndKeepsTheLastGoodFigures) {
  HangIn("nvmlDeviceGetPowerUsage", 1, /*armed_later=*/true);
  GpuCollectorOptions options = Nvml();
  options.call_timeout = std::chrono::milliseconds(100);
  auto collector = Start(options);
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  GpuReport good = collector->Latest();
  ASSERT_TRUE(good.healthy) << good.error;

  Arm();
  ASSERT_TRUE(WaitFor([&] { return Entered(); }, kGenerous));
  ASSERT_TRUE(WaitFor([&] { return !collector->Latest().healthy; }, kGenerous));
  ASSERT_TRUE(collector->WaitForCycles(collector->cycles() + 1, kGenerous));
  GpuReport hung = collector->Latest();
  EXPECT_EQ(hung.error,
            "NVML call nvmlDeviceGetPowerUsage on GPU 1 did not return within 100 ms; "
            "no nvidia-smi to fall back on");
  EXPECT_EQ(hung.source, GpuSource::kNvml);
  EXPECT_EQ(hung.read_at, good.read_at);
  ASSERT_EQ(hung.gpus.size(), 2u);
  EXPECT_EQ(hung.gpus[1].power_watts, good.gpus[1].power_watts);

  // While the call hangs no other NVML read starts, however many cycles pass.
  unsigned counts = FakeNvmlCalls(FAKE_NVML_PATH, "nvmlDeviceGetCount_v2");
  ASSERT_TRUE(collector->WaitForCycles(collector->cycles() + 3, kGenerous));
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlDeviceGetCount_v2"), counts);
  EXPECT_FALSE(Left());
  EXPECT_FALSE(collector->Latest().healthy);
}

TEST_F(GpuCollectorTest, AHangSwitchesToNvidiaSmiUntilNvmlAnswersAgain) {
  HangIn("nvmlDeviceGetTemperature", 0, /*armed_later=*/true);
  GpuCollectorOptions options = Nvml(FAKE_NVIDIA_SMI_PATH);
  options.call_timeout = std::chrono::milliseconds(100);
  auto collector = Start(options);
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  ASSERT_EQ(collector->Latest().source, GpuSource::kNvml);

  Arm();
  ASSERT_TRUE(
      WaitFor([&] { return collector->Latest().source == GpuSource::kNvidiaSmi; }, kGenerous));
  GpuReport fallback = collector->Latest();
  EXPECT_FALSE(fallback.healthy);  // figures are fresh, but NVML is hung
  EXPECT_THAT(
      fallback.error,
      HasSubstr("NVML call nvmlDeviceGetTemperature on GPU 0 did not return within 100 ms"));
  EXPECT_THAT(fallback.error, HasSubstr("read with nvidia-smi"));
  ASSERT_EQ(fallback.gpus.size(), 1u);
  EXPECT_EQ(fallback.gpus[0].temperature_celsius, 59.0);  // the capture's

  // The call returns: NVML is read again.
  ::unlink(dir_.File("arm").c_str());
  uplink::testing::WriteFileOrDie(dir_.File("release"), "");
  ASSERT_TRUE(WaitFor(
      [&] {
        GpuReport report = collector->Latest();
        return report.source == GpuSource::kNvml && report.healthy;
      },
      kGenerous));
  EXPECT_EQ(collector->Latest().gpus.size(), 2u);
}

TEST_F(GpuCollectorTest, LatestAnswersWhileAnNvmlCallIsHung) {
  HangIn("nvmlInit_v2", std::nullopt, /*armed_later=*/false);
  GpuCollectorOptions options = Nvml();
  options.call_timeout = std::chrono::hours(1);  // the watchdog plays no part here
  auto collector = Start(options);
  ASSERT_TRUE(WaitFor([&] { return Entered(); }, kGenerous));

  GpuReport report = collector->Latest();
  EXPECT_FALSE(Left());  // the call was still hung when Latest() returned
  EXPECT_FALSE(report.healthy);
  EXPECT_EQ(report.error, "GPU data not read yet");
  EXPECT_EQ(report.source, GpuSource::kNone);

  uplink::testing::WriteFileOrDie(dir_.File("release"), "");
  ASSERT_TRUE(collector->WaitForCycles(1, kGenerous));
  EXPECT_TRUE(collector->Latest().healthy);
}

TEST_F(GpuCollectorTest, DestructionDoesNotWaitForACallTheWatchdogGaveUpOn) {
  HangIn("nvmlDeviceGetCount_v2", std::nullopt, /*armed_later=*/false);
  GpuCollectorOptions options = Nvml();
  options.call_timeout = std::chrono::milliseconds(50);
  auto collector = Start(options);
  ASSERT_TRUE(WaitFor(
      [&] {
        return !collector->Latest().error.empty() &&
               collector->Latest().error != "GPU data not read yet";
      },
      kGenerous));
  EXPECT_THAT(collector->Latest().error, HasSubstr("NVML call nvmlDeviceGetCount_v2 did not"));
  unsigned shutdowns = FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown");

  collector.reset();
  EXPECT_FALSE(Left());  // destroyed while the call still hangs
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown"), shutdowns);

  // The thread left behind shuts NVML down once the call returns.
  uplink::testing::WriteFileOrDie(dir_.File("release"), "");
  EXPECT_TRUE(WaitFor(
      [&] { return FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown") == shutdowns + 1; }, kGenerous));
}

TEST_F(GpuCollectorTest, DestructionWaitsForAnInFlightCallOnlyUntilTheWatchdogFires) {
  HangIn("nvmlDeviceGetUUID", 0, /*armed_later=*/false);
  GpuCollectorOptions options = Nvml();
  options.call_timeout = std::chrono::milliseconds(300);
  auto collector = Start(options);
  ASSERT_TRUE(WaitFor([&] { return Entered(); }, kGenerous));
  collector.reset();
  EXPECT_FALSE(Left());
}

TEST_F(GpuCollectorTest, NvmlIsShutDownWhenTheCollectorEnds) {
  unsigned inits = FakeNvmlCalls(FAKE_NVML_PATH, "nvmlInit_v2");
  unsigned shutdowns = FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown");
  auto collector = Start(Nvml());
  ASSERT_TRUE(collector->WaitForCycles(3, kGenerous));
  collector.reset();
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlInit_v2"), inits + 1);
  EXPECT_EQ(FakeNvmlCalls(FAKE_NVML_PATH, "nvmlShutdown"), shutdowns + 1);
}

TEST_F(GpuCollectorTest, TheProcessCanExitWhileAnNvmlCallHangs) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        HangIn("nvmlDeviceGetCount_v2", std::nullopt, /*armed_later=*/false);
        config_.Set("hang.release_file", dir_.File("never"));
        GpuCollectorOptions options = Nvml();
        options.call_timeout = std::chrono::milliseconds(50);
        auto collector = Start(options);
        if (!WaitFor(
                [&] {
                  return !collector->Latest().error.empty() &&
                         collector->Latest().error != "GPU data not read yet";
                },
                kGenerous)) {
          std::_Exit(2);
        }
        collector.reset();
        std::filesystem::remove_all(dir_.path());  // exit() skips the TempDir's destructor
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace uplink::agent::node
