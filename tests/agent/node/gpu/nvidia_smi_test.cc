#include "agent/node/gpu/nvidia_smi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "fake_gpu.h"
#include "support/process.h"

namespace uplink::agent::node {
namespace {

using fake_gpu::FixturesDir;
using fake_gpu::QueryGpuFixtures;
using fake_gpu::UseSmiFixture;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::vector<SmiField> kFields = DefaultSmiFields();

// One row in DefaultSmiFields() order.
const char kH100Row[] =
    "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 00000000:00:09.0, "
    "590.48.01, 100, 11, 19818, 81559, 59, 631.95, 700.00, 1980, 2619, 0, 0, "
    "0x0000000000000004, 5, 16, Disabled";

std::string Row(int index, const std::string& name) {
  return std::to_string(index) + ", GPU-" + std::to_string(index) + ", " + name + ", 00000000:0" +
         std::to_string(index) +
         ":00.0, 550.54.15, 1, 2, 3, 4, 5, 6.5, 7, 8, 9, 10, 11, 0x1, 4, 16, Enabled";
}

TEST(NvidiaSmiArguments, AskForTheFieldsWithoutHeaderOrUnits) {
  EXPECT_THAT(NvidiaSmiArguments("/usr/bin/nvidia-smi", kFields),
              ::testing::ElementsAre(
                  "/usr/bin/nvidia-smi",
                  "--query-gpu=index,uuid,name,pci.bus_id,driver_version,utilization.gpu,"
                  "utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,"
                  "enforced.power.limit,clocks.current.sm,clocks.current.memory,"
                  "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,"
                  "clocks_event_reasons.active,pcie.link.gen.current,pcie.link.width.current,"
                  "mig.mode.current",
                  "--format=csv,noheader,nounits"));
}

TEST(ParseNvidiaSmiCsv, EveryFieldInItsUnits) {
  auto reading = ParseNvidiaSmiCsv(std::string(kH100Row) + "\n", kFields);
  ASSERT_TRUE(reading.ok()) << reading.status().ToString();
  EXPECT_TRUE(reading->problems.empty());
  EXPECT_EQ(reading->driver_version, "590.48.01");
  ASSERT_EQ(reading->gpus.size(), 1u);
  const Gpu& gpu = reading->gpus[0];
  EXPECT_EQ(gpu.index, 0u);
  EXPECT_EQ(gpu.uuid, "GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(gpu.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.pci_bus_id, "00000000:00:09.0");
  EXPECT_EQ(gpu.utilization_percent, 100.0);
  EXPECT_EQ(gpu.memory_utilization_percent, 11.0);
  EXPECT_EQ(gpu.memory_used_bytes, 19818ull << 20);
  EXPECT_EQ(gpu.memory_total_bytes, 81559ull << 20);
  EXPECT_EQ(gpu.temperature_celsius, 59.0);
  EXPECT_DOUBLE_EQ(*gpu.power_watts, 631.95);
  EXPECT_EQ(gpu.power_limit_watts, 700.0);
  EXPECT_EQ(gpu.sm_clock_mhz, 1980u);
  EXPECT_EQ(gpu.memory_clock_mhz, 2619u);
  EXPECT_EQ(gpu.ecc_corrected, 0u);
  EXPECT_EQ(gpu.ecc_uncorrected, 0u);
  EXPECT_EQ(gpu.throttle_reasons, 4u);
  EXPECT_EQ(gpu.pcie_generation, 5u);
  EXPECT_EQ(gpu.pcie_width, 16u);
  EXPECT_EQ(gpu.mig_mode, MigMode::kDisabled);
  EXPECT_EQ(gpu.mig_instances, 0u);
  EXPECT_FALSE(gpu.process_count.has_value());  // --query-gpu has no process count
}

TEST(ParseNvidiaSmiCsv, WhatNvidiaSmiHasNoValueForIsAbsent) {
  auto reading = ParseNvidiaSmiCsv(
      "3, GPU-x, Tesla K80, [N/A], 470.82.01, [Not Supported], N/A, [Unknown Error], 11441, "
      "[N/A], [N/A], [Requested functionality has been deprecated], [N/A], [N/A], [N/A], "
      "[N/A], [N/A], [GPU requires reset], [N/A], [N/A]\n",
      kFields);
  ASSERT_TRUE(reading.ok());
  EXPECT_TRUE(reading->problems.empty());
  ASSERT_EQ(reading->gpus.size(), 1u);
  const Gpu& gpu = reading->gpus[0];
  EXPECT_EQ(gpu.index, 3u);
  EXPECT_EQ(gpu.pci_bus_id, "");
  EXPECT_FALSE(gpu.utilization_percent || gpu.memory_utilization_percent || gpu.memory_used_bytes ||
               gpu.temperature_celsius || gpu.power_watts || gpu.power_limit_watts ||
               gpu.sm_clock_mhz || gpu.ecc_corrected || gpu.throttle_reasons ||
               gpu.pcie_generation);
  EXPECT_EQ(gpu.memory_total_bytes, 11441ull << 20);
  EXPECT_EQ(gpu.mig_mode, MigMode::kUnsupported);
}

TEST(ParseNvidiaSmiCsv, RowsPerGpuWithWindowsLineEndingsAndBlankLines) {
  auto reading = ParseNvidiaSmiCsv(Row(0, "A") + "\r\n\r\n" + Row(1, "B") + "\r\n\n", kFields);
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->gpus.size(), 2u);
  EXPECT_EQ(reading->gpus[1].name, "B");
  EXPECT_EQ(reading->gpus[1].mig_mode, MigMode::kEnabled);
  EXPECT_EQ(reading->gpus[1].pci_bus_id, "00000000:01:00.0");
}

TEST(ParseNvidiaSmiCsv, NoOutputIsNoGpus) {
  auto reading = ParseNvidiaSmiCsv("", kFields);
  ASSERT_TRUE(reading.ok());
  EXPECT_TRUE(reading->gpus.empty());
  EXPECT_TRUE(reading->problems.empty());
}

TEST(ParseNvidiaSmiCsv, ATruncatedRowIsLeftOutAndNamed) {
  std::string truncated = std::string(kH100Row).substr(0, 60);
  auto reading = ParseNvidiaSmiCsv(Row(0, "A") + "\n" + truncated, kFields);
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->gpus.size(), 1u);
  ASSERT_EQ(reading->problems.size(), 1u);
  EXPECT_THAT(reading->problems[0], StartsWith("line 2: 3 values, not 20: '0, GPU-"));
}

TEST(ParseNvidiaSmiCsv, ExtraColumnsAreNotGuessedAt) {
  // An unquoted comma in a name shifts every value after it: the row is refused whole.
  auto reading = ParseNvidiaSmiCsv(Row(0, "Vendor, Model") + "\n" + Row(1, "B"), kFields);
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->gpus.size(), 1u);
  EXPECT_EQ(reading->gpus[0].name, "B");
  EXPECT_THAT(reading->problems[0],
              StartsWith("line 1: more than 20 values: '0, GPU-0, Vendor, Model, "));
}

TEST(ParseNvidiaSmiCsv, AQuotedValueIsTakenWhole) {
  auto reading = ParseNvidiaSmiCsv(Row(0, "\"Vendor, \"\"Model\"\" X\""), kFields);
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->gpus.size(), 1u);
  EXPECT_EQ(reading->gpus[0].name, "Vendor, \"Model\" X");
  EXPECT_EQ(reading->gpus[0].temperature_celsius, 5.0);
}

TEST(ParseNvidiaSmiCsv, AnUnterminatedQuoteRefusesTheRow) {
  auto reading = ParseNvidiaSmiCsv(Row(0, "\"Vendor, Model"), kFields);
  EXPECT_EQ(reading.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(reading.status().message(), HasSubstr("an unterminated quote"));
}

TEST(ParseNvidiaSmiCsv, AValueThatIsNotItsKindIsAbsentAndNamed) {
  auto reading = ParseNvidiaSmiCsv(
      "0, GPU-0, A, 00000000:01:00.0, 550, lots, 1e999, -3, 99999999999999999999, nan, "
      "12W, 0x10, 4294967296, 2619, 3.5, 0, 0xZZ, 5, 16, Maybe",
      kFields);
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->gpus.size(), 1u);
  const Gpu& gpu = reading->gpus[0];
  EXPECT_FALSE(gpu.utilization_percent || gpu.memory_utilization_percent || gpu.memory_used_bytes ||
               gpu.memory_total_bytes || gpu.temperature_celsius || gpu.power_watts ||
               gpu.power_limit_watts || gpu.sm_clock_mhz || gpu.ecc_corrected ||
               gpu.throttle_reasons);
  EXPECT_EQ(gpu.memory_clock_mhz, 2619u);  // the good values of the row stay
  EXPECT_EQ(gpu.pcie_generation, 5u);
  EXPECT_EQ(gpu.mig_mode, MigMode::kUnsupported);
  // The first eight problems are kept, the rest counted.
  ASSERT_EQ(reading->problems.size(), 9u);
  EXPECT_EQ(reading->problems[0], "GPU 0: utilization.gpu 'lots' is not a number");
  EXPECT_EQ(reading->problems.back(), "3 more problems");
}

TEST(ParseNvidiaSmiCsv, MiBThatWouldOverflowBytesAreRefused) {
  std::string row = Row(0, "A");
  row.replace(row.find(", 3, 4,"), 7, ", 17592186044416, 17592186044415,");
  auto reading = ParseNvidiaSmiCsv(row, kFields);
  ASSERT_TRUE(reading.ok());
  EXPECT_FALSE(reading->gpus[0].memory_used_bytes.has_value());  // 2^44 MiB = 2^64 bytes
  EXPECT_EQ(reading->gpus[0].memory_total_bytes, 17592186044415ull << 20);
}

TEST(ParseNvidiaSmiCsv, ControlCharactersAndNulsNeverReachAString) {
  const char kName[] = "evil\0name\x1b[2J";
  std::string row = Row(0, std::string(kName, sizeof kName - 1));
  auto reading = ParseNvidiaSmiCsv(row, kFields);
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->gpus.size(), 1u);
  EXPECT_EQ(reading->gpus[0].name, "");
  EXPECT_THAT(reading->problems[0], HasSubstr("name"));
  EXPECT_EQ(reading->problems[0].find('\0'), std::string::npos);
}

TEST(ParseNvidiaSmiCsv, ARowWithoutAnIndexIsRefused) {
  std::string row = std::string(kH100Row);
  auto reading = ParseNvidiaSmiCsv("[N/A]" + row.substr(1) + "\n" + "-1" + row.substr(1), kFields);
  EXPECT_EQ(reading.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(reading.status().message(), HasSubstr("is not a GPU index"));
}

TEST(ParseNvidiaSmiCsv, GarbageIsAnErrorNotACrash) {
  const char kGarbage[] =
      "\x7f"
      "ELF\x02\x01\0\0\0\xff\xfe,,,\n\"x\n%s%n\n";
  auto reading = ParseNvidiaSmiCsv(std::string(kGarbage, sizeof kGarbage - 1), kFields);
  EXPECT_EQ(reading.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(reading.status().message(), HasSubstr("nvidia-smi printed no GPU row"));
}

TEST(ParseNvidiaSmiCsv, HugeOutputIsReadOnlyAsFarAsItsBounds) {
  std::string rows;
  while (rows.size() < 100u * 1000 * 1000) rows += std::string(kH100Row) + "\n";
  auto reading = ParseNvidiaSmiCsv(rows, kFields);
  ASSERT_TRUE(reading.ok());
  EXPECT_EQ(reading->gpus.size(), kMaxGpus);
  EXPECT_THAT(reading->problems,
              ::testing::ElementsAre("more than 64 GPUs; the rest was not read"));

  std::string junk_lines;
  for (int i = 0; i < 5000; ++i) junk_lines += "junk\n";
  auto junk = ParseNvidiaSmiCsv(junk_lines + kH100Row, kFields);
  EXPECT_EQ(junk.status().code(), StatusCode::kInvalidArgument);

  std::string long_line(10 << 20, 'x');
  EXPECT_EQ(ParseNvidiaSmiCsv(long_line, kFields).status().code(), StatusCode::kInvalidArgument);
}

TEST(ParseNvidiaSmiCsv, ColumnsFollowTheFieldsAsked) {
  std::vector<SmiField> fields = {SmiField::kName, SmiField::kIndex,
                                  SmiField::kClockThrottleReasons};
  auto reading = ParseNvidiaSmiCsv("Quadro P400, 2, 0x0000000000000040\n", fields);
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->gpus.size(), 1u);
  EXPECT_EQ(reading->gpus[0].index, 2u);
  EXPECT_EQ(reading->gpus[0].name, "Quadro P400");
  EXPECT_EQ(reading->gpus[0].throttle_reasons, 0x40u);
}

TEST(RejectedSmiField, FindsTheFieldNamedInNvidiaSmisRefusal) {
  EXPECT_EQ(RejectedSmiField("Field \"clocks_event_reasons.active\" is not a valid field to "
                             "query.\n\n",
                             kFields),
            SmiField::kClockEventReasons);
  EXPECT_EQ(RejectedSmiField("Field \u201cmig.mode.current\u201d is not a valid field to query.",
                             kFields),
            SmiField::kMigMode);
  EXPECT_EQ(RejectedSmiField("Field \"fan.speed\" is not a valid field to query.", kFields),
            std::nullopt);
  EXPECT_EQ(RejectedSmiField("\"mig.mode.current\" something else", kFields), std::nullopt);
}

// The figures a capture holds for one GPU, read straight from its header and row: the
// oracle the fallback's results are held against.
class Capture {
 public:
  explicit Capture(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    for (const std::string& column : Split(line)) {
      size_t bracket = column.find(" [");
      names_.push_back(column.substr(0, bracket));
      units_.push_back(bracket == std::string::npos
                           ? ""
                           : " " + column.substr(bracket + 2, column.size() - bracket - 3));
    }
    while (std::getline(in, line)) {
      if (!line.empty()) rows_.push_back(Split(line));
    }
  }
  size_t gpus() const { return rows_.size(); }
  // The value without its unit, or nullopt when the capture has none.
  std::optional<std::string> Get(size_t gpu, std::string name) const {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] != name) continue;
      std::string value = rows_[gpu][i];
      if (value.empty() || value == "N/A" || value.front() == '[') return std::nullopt;
      if (!units_[i].empty() && value.ends_with(units_[i])) {
        value.resize(value.size() - units_[i].size());
      }
      return value;
    }
    return std::nullopt;
  }

 private:
  static std::vector<std::string> Split(const std::string& line) {
    std::vector<std::string> parts;
    std::stringstream in(line);
    std::string part;
    while (std::getline(in, part, ',')) {
      size_t begin = part.find_first_not_of(" \r");
      size_t end = part.find_last_not_of(" \r");
      parts.push_back(begin == std::string::npos ? "" : part.substr(begin, end - begin + 1));
    }
    return parts;
  }
  std::vector<std::string> names_, units_;
  std::vector<std::vector<std::string>> rows_;
};

class NvidiaSmiFixtureTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("FAKE_SMI_LOG");
    ::unsetenv("FAKE_SMI_MODE");
    ::unsetenv("FAKE_SMI_REJECT");
  }
  size_t Runs() const {
    std::string log = uplink::testing::ReadFileOrEmpty(dir_.File("runs"));
    return static_cast<size_t>(std::count(log.begin(), log.end(), '\n'));
  }
  static std::string Fixture(const std::string& name) {
    return FixturesDir() + "/nvidia_gpu_exporter/csv/" + name;
  }

  uplink::testing::TempDir dir_;
};

template <typename T>
std::optional<T> Expected(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  if constexpr (std::is_same_v<T, double>) {
    return std::stod(*text);
  } else {
    return static_cast<T>(std::stoull(*text, nullptr, 0));
  }
}

TEST_F(NvidiaSmiFixtureTest, EveryCaptureReadsBackThroughTheFallback) {
  std::vector<std::string> fixtures = QueryGpuFixtures();
  ASSERT_EQ(fixtures.size(), 22u);
  for (const std::string& fixture : fixtures) {
    SCOPED_TRACE(fixture);
    UseSmiFixture(fixture);
    NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::seconds(60));
    auto reading = smi.Read();
    ASSERT_TRUE(reading.ok()) << reading.status().ToString();
    EXPECT_TRUE(reading->problems.empty()) << reading->problems.front();
    Capture capture(fixture);
    ASSERT_EQ(reading->gpus.size(), capture.gpus());
    EXPECT_EQ(reading->driver_version, capture.Get(0, "driver_version").value_or(""));
    for (size_t i = 0; i < capture.gpus(); ++i) {
      const Gpu& gpu = reading->gpus[i];
      EXPECT_EQ(gpu.index, Expected<unsigned>(capture.Get(i, "index")).value_or(i));
      EXPECT_EQ(gpu.uuid, capture.Get(i, "uuid").value_or(""));
      EXPECT_EQ(gpu.name, capture.Get(i, "name").value_or(""));
      EXPECT_EQ(gpu.pci_bus_id, capture.Get(i, "pci.bus_id").value_or(""));
      EXPECT_EQ(gpu.utilization_percent, Expected<double>(capture.Get(i, "utilization.gpu")));
      EXPECT_EQ(gpu.memory_utilization_percent,
                Expected<double>(capture.Get(i, "utilization.memory")));
      auto mib = [](std::optional<std::uint64_t> v) {
        return v ? std::optional<std::uint64_t>(*v << 20) : std::nullopt;
      };
      EXPECT_EQ(gpu.memory_used_bytes, mib(Expected<std::uint64_t>(capture.Get(i, "memory.used"))));
      EXPECT_EQ(gpu.memory_total_bytes,
                mib(Expected<std::uint64_t>(capture.Get(i, "memory.total"))));
      EXPECT_EQ(gpu.temperature_celsius, Expected<double>(capture.Get(i, "temperature.gpu")));
      EXPECT_EQ(gpu.power_watts, Expected<double>(capture.Get(i, "power.draw")));
      EXPECT_EQ(gpu.power_limit_watts, Expected<double>(capture.Get(i, "enforced.power.limit")));
      EXPECT_EQ(gpu.sm_clock_mhz, Expected<unsigned>(capture.Get(i, "clocks.current.sm")));
      EXPECT_EQ(gpu.memory_clock_mhz, Expected<unsigned>(capture.Get(i, "clocks.current.memory")));
      EXPECT_EQ(gpu.ecc_corrected,
                Expected<std::uint64_t>(capture.Get(i, "ecc.errors.corrected.volatile.total")));
      EXPECT_EQ(gpu.ecc_uncorrected,
                Expected<std::uint64_t>(capture.Get(i, "ecc.errors.uncorrected.volatile.total")));
      EXPECT_EQ(gpu.throttle_reasons,
                Expected<std::uint64_t>(capture.Get(i, "clocks_event_reasons.active")));
      EXPECT_EQ(gpu.pcie_generation, Expected<unsigned>(capture.Get(i, "pcie.link.gen.current")));
      EXPECT_EQ(gpu.pcie_width, Expected<unsigned>(capture.Get(i, "pcie.link.width.current")));
      auto mig = capture.Get(i, "mig.mode.current");
      EXPECT_EQ(gpu.mig_mode, !mig                ? MigMode::kUnsupported
                              : *mig == "Enabled" ? MigMode::kEnabled
                                                  : MigMode::kDisabled);
    }
  }
}

TEST_F(NvidiaSmiFixtureTest, AnH100InMigModeUnderLoad) {
  UseSmiFixture(Fixture("linux-x86_64__nvidia-h100-mig__590.48.01__load__query-gpu.csv"));
  NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::seconds(60));
  auto reading = smi.Read();
  ASSERT_TRUE(reading.ok()) << reading.status().ToString();
  ASSERT_EQ(reading->gpus.size(), 1u);
  const Gpu& gpu = reading->gpus[0];
  EXPECT_EQ(gpu.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.mig_mode, MigMode::kEnabled);
  EXPECT_FALSE(gpu.utilization_percent.has_value());  // not reported in MIG mode
  EXPECT_EQ(gpu.memory_used_bytes, 11125ull * 1048576);
  EXPECT_EQ(gpu.memory_total_bytes, 81559ull * 1048576);
  EXPECT_EQ(gpu.temperature_celsius, 53.0);
  EXPECT_DOUBLE_EQ(*gpu.power_watts, 433.78);
  EXPECT_EQ(gpu.power_limit_watts, 700.0);
  EXPECT_EQ(gpu.sm_clock_mhz, 1980u);
  EXPECT_EQ(gpu.memory_clock_mhz, 2619u);
  EXPECT_EQ(gpu.ecc_corrected, 0u);
  EXPECT_EQ(gpu.throttle_reasons, 0u);
  EXPECT_EQ(gpu.pcie_generation, 5u);
  EXPECT_EQ(gpu.pcie_width, 16u);
  EXPECT_EQ(reading->driver_version, "590.48.01");
}

TEST_F(NvidiaSmiFixtureTest, AGeForceWithoutEccOrMig) {
  UseSmiFixture(
      Fixture("windows-x86_64__nvidia-geforce-rtx-2080-super__610.62__load__query-gpu.csv"));
  NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::seconds(60));
  auto reading = smi.Read();
  ASSERT_TRUE(reading.ok());
  const Gpu& gpu = reading->gpus.at(0);
  EXPECT_EQ(gpu.utilization_percent, 7.0);
  EXPECT_EQ(gpu.memory_utilization_percent, 3.0);
  EXPECT_DOUBLE_EQ(*gpu.power_watts, 97.99);
  EXPECT_EQ(gpu.power_limit_watts, 250.0);
  EXPECT_FALSE(gpu.ecc_corrected.has_value());
  EXPECT_EQ(gpu.mig_mode, MigMode::kUnsupported);
  EXPECT_EQ(gpu.pcie_generation, 3u);
}

TEST_F(NvidiaSmiFixtureTest, TwoGpusFromTheExportersQuery) {
  UseSmiFixture(Fixture("nvidia_gpu_exporter-query.txt"));
  NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::seconds(60));
  auto reading = smi.Read();
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->gpus.size(), 2u);
  EXPECT_EQ(reading->gpus[1].index, 1u);
  EXPECT_EQ(reading->gpus[1].name, "Some Other GPU");
  EXPECT_EQ(reading->gpus[1].memory_used_bytes, 1234ull << 20);
  EXPECT_EQ(reading->driver_version, "466.63");
}

TEST_F(NvidiaSmiFixtureTest, AnOlderNvidiaSmiIsAskedForTheClockReasonsByTheirOldName) {
  UseSmiFixture(
      Fixture("linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05__idle__query-gpu.csv"));
  ::setenv("FAKE_SMI_LOG", dir_.File("runs").c_str(), 1);
  ::setenv("FAKE_SMI_REJECT", "clocks_event_reasons.", 1);
  NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::seconds(60));
  auto first = smi.Read();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->gpus.at(0).throttle_reasons, 4u);
  EXPECT_EQ(Runs(), 2u);
  EXPECT_THAT(smi.fields(), ::testing::Contains(SmiField::kClockThrottleReasons));
  // Remembered: the next read asks the right way at once.
  ASSERT_TRUE(smi.Read().ok());
  EXPECT_EQ(Runs(), 3u);
  ::unsetenv("FAKE_SMI_REJECT");
}

TEST_F(NvidiaSmiFixtureTest, AFieldThisNvidiaSmiLacksIsDropped) {
  UseSmiFixture(Fixture("linux-x86_64__nvidia-h200-mig__590.48.01__idle__query-gpu.csv"));
  ::setenv("FAKE_SMI_LOG", dir_.File("runs").c_str(), 1);
  ::setenv("FAKE_SMI_REJECT", "mig.mode,enforced.power.limit", 1);
  NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::seconds(60));
  auto reading = smi.Read();
  ::unsetenv("FAKE_SMI_REJECT");
  ASSERT_TRUE(reading.ok()) << reading.status().ToString();
  EXPECT_EQ(Runs(), 3u);
  EXPECT_EQ(smi.fields().size(), kFields.size() - 2);
  const Gpu& gpu = reading->gpus.at(0);
  EXPECT_EQ(gpu.mig_mode, MigMode::kUnsupported);
  EXPECT_FALSE(gpu.power_limit_watts.has_value());
  EXPECT_EQ(gpu.name, "NVIDIA H200");
  EXPECT_EQ(gpu.memory_total_bytes, 143771ull << 20);
}

TEST_F(NvidiaSmiFixtureTest, ADriverThatIsNotLoadedIsAnErrorWithNvidiaSmisWords) {
  ::setenv("FAKE_SMI_MODE", "fail", 1);
  NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::seconds(60));
  auto reading = smi.Read();
  ::unsetenv("FAKE_SMI_MODE");
  EXPECT_EQ(reading.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(reading.status().message(), HasSubstr("exited with status 9"));
  EXPECT_THAT(reading.status().message(), HasSubstr("couldn't communicate with the NVIDIA driver"));
}

TEST_F(NvidiaSmiFixtureTest, AHungNvidiaSmiIsKilled) {
  ::setenv("FAKE_SMI_MODE", "hang", 1);
  NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::milliseconds(200));
  auto reading = smi.Read();
  ::unsetenv("FAKE_SMI_MODE");
  EXPECT_EQ(reading.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(reading.status().message(), HasSubstr("did not finish within 200 ms and was killed"));
}

TEST_F(NvidiaSmiFixtureTest, HugeOutputIsCutAt1MiB) {
  ::setenv("FAKE_SMI_MODE", "huge", 1);
  NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::seconds(60));
  auto reading = smi.Read();
  ::unsetenv("FAKE_SMI_MODE");
  EXPECT_EQ(reading.status().code(), StatusCode::kResourceExhausted);
}

TEST_F(NvidiaSmiFixtureTest, GarbageOutputIsAnError) {
  ::setenv("FAKE_SMI_MODE", "garbage", 1);
  NvidiaSmi smi(FAKE_NVIDIA_SMI_PATH, std::chrono::seconds(60));
  auto reading = smi.Read();
  ::unsetenv("FAKE_SMI_MODE");
  EXPECT_EQ(reading.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace uplink::agent::node
