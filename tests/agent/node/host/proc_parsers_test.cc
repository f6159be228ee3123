#include "agent/node/host/proc_parsers.h"

#include <gtest/gtest.h>

#include <string>

namespace uplink::agent::node {
namespace {

using namespace std::string_literals;

const std::string kStat =
    "cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0\n"
    "cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0\n"
    "cpu1 1335616 34123 549410 13379497 3556 0 4086 0 22124 0\n"
    "cpu3 1225216 31960 541960 13388100 2745 0 1474 0 19964 0\n"
    "intr 199292311 39 0 0 0 0 0 0 0 1 0 0 0 0\n"
    "ctxt 38014093\n"
    "btime 1764400000\n"
    "processes 26442\n"
    "procs_running 2\n"
    "procs_blocked 1\n"
    "softirq 5057579 250191 1481983 1647 211099 186066 0 1783454 622196 12499 508444\n";

TEST(ParseProcStat, ReadsTotalsPerCpuLinesAndCountersInSeconds) {
  auto parsed = ParseProcStat(kStat);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const CpuStats& stats = parsed->value;
  EXPECT_EQ(parsed->skipped_lines, 0u);
  EXPECT_DOUBLE_EQ(stats.total.user, 101321.53);
  EXPECT_DOUBLE_EQ(stats.total.nice, 2906.96);
  EXPECT_DOUBLE_EQ(stats.total.idle, 468284.83);
  EXPECT_DOUBLE_EQ(stats.total.guest, 1756.28);
  ASSERT_EQ(stats.per_cpu.size(), 3u);
  EXPECT_EQ(stats.per_cpu[0].cpu, 0);
  EXPECT_EQ(stats.per_cpu[2].cpu, 3) << "an offline cpu2 leaves a gap, not a renumbering";
  EXPECT_DOUBLE_EQ(stats.per_cpu[2].times.system, 5419.60);
  EXPECT_EQ(stats.interrupts, 199292311u);
  EXPECT_EQ(stats.context_switches, 38014093u);
  EXPECT_EQ(stats.boot_time, 1764400000);
  EXPECT_EQ(stats.forks, 26442u);
  EXPECT_EQ(stats.procs_running, 2u);
  EXPECT_EQ(stats.procs_blocked, 1u);
}

TEST(ParseProcStat, DividesTicksExactlyAsNodeExporterDoes) {
  auto parsed = ParseProcStat("cpu 7 1 1 1\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->value.total.user, 7.0 / 100.0);
}

TEST(ParseProcStat, TakesOldKernelsWithFewerModes) {
  auto parsed = ParseProcStat("cpu  1 2 3 4\ncpu0 1 2 3 4 5 6 7\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_DOUBLE_EQ(parsed->value.total.idle, 0.04);
  EXPECT_EQ(parsed->value.total.iowait, 0);
  EXPECT_DOUBLE_EQ(parsed->value.per_cpu[0].times.softirq, 0.07);
  EXPECT_EQ(parsed->value.per_cpu[0].times.steal, 0);
}

TEST(ParseProcStat, SkipsMalformedLinesAndKeepsTheRest) {
  const std::string text =
      "cpu  1 2 3 4 5 6 7 8 9 10\n"
      "cpu0 1 2 3\n"                                  // too few modes
      "cpu1 1 2 x 4\n"                                // not a number
      "cpu2 1 2 18446744073709551616 4\n"             // 2^64 overflows
      "cpu3 1 -2 3 4\n"                               // signed
      "cpuX 1 2 3 4\n"                                // not a cpu number
      "cpu4 1 2 3 4 5 6 7 8 9 10\n"
      "cpu4 9 9 9 9\n"                                // duplicate
      "cpu5 1 2\0 3 4\n"s                             // embedded NUL
      "ctxt\n"                                        // no value
      "ctxt 12abc\n"                                  // not a number
      "ctxt 77\n"
      "ctxt 78\n"                                     // second ctxt
      "btime 99999999999999999999\n";                 // overflow
  auto parsed = ParseProcStat(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->value.per_cpu.size(), 1u);
  EXPECT_EQ(parsed->value.per_cpu[0].cpu, 4);
  EXPECT_DOUBLE_EQ(parsed->value.per_cpu[0].times.user, 0.01);
  EXPECT_EQ(parsed->value.context_switches, 77u);
  EXPECT_EQ(parsed->value.boot_time, 0);
  EXPECT_EQ(parsed->skipped_lines, 11u);
  EXPECT_EQ(parsed->problems.size(), kMaxLineProblems) << "the list is bounded";
  EXPECT_EQ(parsed->problems[0].line, 2u);
  EXPECT_NE(parsed->problems[0].reason.find("user, nice, system and idle"), std::string::npos);
  EXPECT_NE(parsed->problems[2].reason.find("'18446744073709551616'"), std::string::npos);
}

TEST(ParseProcStat, RefusesAFileWithoutTheTotalLine) {
  EXPECT_FALSE(ParseProcStat("").ok());
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4\nctxt 5\n").ok());
  EXPECT_FALSE(ParseProcStat("cpu 1 2\n").ok());
  EXPECT_EQ(ParseProcStat(std::string(100000, '\0')).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ParseProcStat, ReadsOnlyTheFirstFieldOfAHugeIntrLine) {
  std::string text = "cpu 1 2 3 4\nintr 123456789012";
  for (int i = 0; i < 10000; ++i) text += " 1";
  text += "\nctxt 5\n";
  auto parsed = ParseProcStat(text);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->value.interrupts, 123456789012u);
  EXPECT_EQ(parsed->value.context_switches, 5u);
}

TEST(ParseProcStat, IgnoresExtraModesOfAFutureKernelAndALineOfTenThousandFields) {
  std::string wide = "cpu0 1 2 3 4 5 6 7 8 9 10";
  for (int i = 0; i < 10000; ++i) wide += " 11";
  auto parsed = ParseProcStat("cpu 1 2 3 4 5 6 7 8 9 10 11 12\n" + wide + "\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_DOUBLE_EQ(parsed->value.total.guest_nice, 0.10);
  ASSERT_EQ(parsed->value.per_cpu.size(), 1u);
  EXPECT_EQ(parsed->skipped_lines, 0u);
}

TEST(ParseProcStat, KeepsTheFirstOfDuplicateCpusEvenOutOfOrder) {
  auto parsed = ParseProcStat("cpu 1 1 1 1\ncpu7 1 1 1 1\ncpu2 2 2 2 2\ncpu7 3 3 3 3\n");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->value.per_cpu.size(), 2u);
  EXPECT_EQ(parsed->value.per_cpu[0].cpu, 7);
  EXPECT_DOUBLE_EQ(parsed->value.per_cpu[0].times.user, 0.01);
  EXPECT_EQ(parsed->value.per_cpu[1].cpu, 2);
  ASSERT_EQ(parsed->problems.size(), 1u);
  EXPECT_EQ(parsed->problems[0].line, 4u);
  EXPECT_NE(parsed->problems[0].reason.find("duplicate CPU 7"), std::string::npos);
}

TEST(ParseMeminfo, ScalesKilobytesAndKeepsUnitlessCountsAsTheyAre) {
  auto parsed = ParseMeminfo(
      "MemTotal:       16266368 kB\n"
      "MemFree:         1230844 kB\n"
      "Buffers:            2108 kB\n"
      "Cached:         10525312 kB\n"
      "SwapTotal:             0 kB\n"
      "SwapFree:              0 kB\n"
      "Active(anon):    3322248 kB\n"
      "HugePages_Total:       4\n");
  ASSERT_TRUE(parsed.ok());
  const Memory& memory = parsed->value;
  ASSERT_EQ(memory.fields.size(), 8u);
  EXPECT_EQ(memory.fields[6].name, "Active(anon)");
  EXPECT_EQ(memory.fields[6].value, 3322248u * 1024);
  EXPECT_TRUE(memory.fields[6].in_bytes);
  EXPECT_EQ(memory.fields[7].name, "HugePages_Total");
  EXPECT_EQ(memory.fields[7].value, 4u);
  EXPECT_FALSE(memory.fields[7].in_bytes);
  EXPECT_EQ(memory.total_bytes, 16266368ull * 1024);
  EXPECT_EQ(memory.free_bytes, 1230844ull * 1024);
  EXPECT_FALSE(memory.available_bytes) << "kernels before 3.14 lack MemAvailable";
  EXPECT_EQ(memory.buffers_bytes, 2108u * 1024);
  EXPECT_EQ(memory.cached_bytes, 10525312ull * 1024);
  EXPECT_EQ(memory.swap_total_bytes, 0u);
}

TEST(ParseMeminfo, SkipsHostileLines) {
  auto parsed = ParseMeminfo(
      "MemTotal: 100 kB\n"
      "NoColon 5 kB\n"
      "Empty:\n"
      "Words: many kB\n"
      "Unit: 5 MB\n"
      "Extra: 5 kB more\n"
      "Huge: 18014398509481984 kB\n"  // 2^54 kB overflows in bytes
      "Overflow: 18446744073709551616\n"
      "Nul\0: 5 kB\n"s
      "Bell\a: 5 kB\n"
      ": 5 kB\n"
      "MemTotal: 200 kB\n"
      "\n"
      "MemFree: 50 kB\n");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->value.fields.size(), 2u);
  EXPECT_EQ(parsed->value.total_bytes, 100u * 1024) << "the first MemTotal stays";
  EXPECT_EQ(parsed->value.free_bytes, 50u * 1024);
  EXPECT_EQ(parsed->skipped_lines, 11u);
}

TEST(ParseMeminfo, RefusesAFileWithNothingUsable) {
  EXPECT_FALSE(ParseMeminfo("").ok());
  EXPECT_FALSE(ParseMeminfo("garbage\n\n").ok());
}

TEST(ParseLoadavg, ReadsTheThreeAverages) {
  auto load = ParseLoadavg("0.52 0.41 0.33 1/84 20017\n");
  ASSERT_TRUE(load.ok());
  EXPECT_DOUBLE_EQ(load->load1, 0.52);
  EXPECT_DOUBLE_EQ(load->load5, 0.41);
  EXPECT_DOUBLE_EQ(load->load15, 0.33);
}

TEST(ParseLoadavg, RefusesWhatIsNotThreeFiniteNonNegativeNumbers) {
  for (const char* text : {"", "0.1 0.2", "0.1 x 0.3", "-1 0 0", "nan 0 0", "inf 0 0",
                           "1e999 0 0", "0x10 0 0", "+1 0 0"}) {
    EXPECT_FALSE(ParseLoadavg(text).ok()) << text;
  }
}

TEST(ParseUptime, ReadsTheFirstFigure) {
  auto uptime = ParseUptime("29522.62 11380.34\n");
  ASSERT_TRUE(uptime.ok());
  EXPECT_DOUBLE_EQ(*uptime, 29522.62);
  EXPECT_FALSE(ParseUptime("").ok());
  EXPECT_FALSE(ParseUptime("soon").ok());
  EXPECT_FALSE(ParseUptime("12.5\0 1"s).ok());
}

TEST(ParsePressure, ReadsSomeAndFullLines) {
  auto parsed = ParsePressure(
      "some avg10=5.41 avg60=2.45 avg300=1.64 total=11418236204\n"
      "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  ASSERT_TRUE(parsed.ok());
  ASSERT_TRUE(parsed->value.some);
  EXPECT_DOUBLE_EQ(parsed->value.some->avg10, 5.41);
  EXPECT_DOUBLE_EQ(parsed->value.some->avg300, 1.64);
  EXPECT_EQ(parsed->value.some->total_seconds, 11418236204.0 / 1000.0 / 1000.0);
  ASSERT_TRUE(parsed->value.full);
  EXPECT_EQ(parsed->value.full->total_seconds, 0);
}

TEST(ParsePressure, TakesACpuFileWithoutFullAndIgnoresUnknownKinds) {
  auto parsed = ParsePressure(
      "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"
      "partial avg10=1 avg60=1 avg300=1 total=1\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->value.some);
  EXPECT_FALSE(parsed->value.full);
  EXPECT_EQ(parsed->skipped_lines, 0u);
}

TEST(ParsePressure, SkipsBrokenLinesAndRefusesAFileWithNoneLeft) {
  auto parsed = ParsePressure(
      "some avg10=0.00 avg60=0.00 total=5\n"  // avg300 missing
      "full avg10=x avg60=0 avg300=0 total=5\n"
      "full avg10=0 avg60=0 avg300=0 total=-5\n"
      "full avg10=0 avg60=0 avg300=0 total=18446744073709551616\n"
      "full avg10=1 avg60=2 avg300=3 total=4\n"
      "full avg10=1 avg60=2 avg300=3 total=5\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->value.some);
  ASSERT_TRUE(parsed->value.full);
  EXPECT_DOUBLE_EQ(parsed->value.full->total_seconds, 4e-6);
  EXPECT_EQ(parsed->skipped_lines, 5u);
  EXPECT_FALSE(ParsePressure("some avg10=1\n").ok());
  EXPECT_FALSE(ParsePressure("").ok());
}

const std::string kNetDevHeader =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
    "drop fifo colls carrier compressed\n";

TEST(ParseNetDev, ReadsTheSixteenCountersOfEachInterface) {
  auto parsed = ParseNetDev(kNetDevHeader +
                            "    lo: 8766317373 42921818    0    0    0     0          0         "
                            "0 8766317373 42921818    0    0    0     0       0          0\n"
                            "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->value.size(), 2u);
  EXPECT_EQ(parsed->value[0].device, "lo");
  EXPECT_EQ(parsed->value[0].receive_bytes, 8766317373u);
  const NetDevice& eth0 = parsed->value[1];
  EXPECT_EQ(eth0.device, "eth0");
  EXPECT_EQ(eth0.receive_bytes, 1u);
  EXPECT_EQ(eth0.receive_packets, 2u);
  EXPECT_EQ(eth0.receive_errs, 3u);
  EXPECT_EQ(eth0.receive_drop, 4u);
  EXPECT_EQ(eth0.receive_fifo, 5u);
  EXPECT_EQ(eth0.receive_frame, 6u);
  EXPECT_EQ(eth0.receive_compressed, 7u);
  EXPECT_EQ(eth0.receive_multicast, 8u);
  EXPECT_EQ(eth0.transmit_bytes, 9u);
  EXPECT_EQ(eth0.transmit_packets, 10u);
  EXPECT_EQ(eth0.transmit_errs, 11u);
  EXPECT_EQ(eth0.transmit_drop, 12u);
  EXPECT_EQ(eth0.transmit_fifo, 13u);
  EXPECT_EQ(eth0.transmit_colls, 14u);
  EXPECT_EQ(eth0.transmit_carrier, 15u);
  EXPECT_EQ(eth0.transmit_compressed, 16u);
}

TEST(ParseNetDev, TakesNamesOfAnyLengthAndSplitsAtTheLastColon) {
  const std::string long_name(200, 'v');
  auto parsed = ParseNetDev(kNetDevHeader +
                            "veth1a2b3c4d5e6:1 0 0 0 0 0 0 0 2 0 0 0 0 0 0 0\n" + long_name +
                            ": 3 0 0 0 0 0 0 0 4 0 0 0 0 0 0 0\n"
                            "odd:name: 5 0 0 0 0 0 0 0 6 0 0 0 0 0 0 0\n");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->value.size(), 3u);
  EXPECT_EQ(parsed->value[0].device, "veth1a2b3c4d5e6");
  EXPECT_EQ(parsed->value[0].transmit_bytes, 2u);
  EXPECT_EQ(parsed->value[1].device, long_name);
  EXPECT_EQ(parsed->value[2].device, "odd:name");
}

TEST(ParseNetDev, SkipsHostileRowsAndKeepsTheFirstOfDuplicates) {
  auto parsed = ParseNetDev(
      kNetDevHeader +
      "eth0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"                    // no colon
      ": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"                       // no name
      "eth1: 1 2 3\n"                                                    // truncated
      "eth2: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x\n"                    // not a number
      "eth3: 18446744073709551616 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"  // overflow
      "et\0h4: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"s +             // NUL
      "two words: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n" + std::string(300, 'n') +
      ": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"  // longer than any name
      "eth5: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n"
      "eth5: 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9\n"
      "\n");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->value.size(), 1u);
  EXPECT_EQ(parsed->value[0].device, "eth5");
  EXPECT_EQ(parsed->value[0].receive_bytes, 1u);
  EXPECT_EQ(parsed->skipped_lines, 9u);
}

TEST(ParseNetDev, ReadsRowsWhenTheHeaderIsMissing) {
  auto parsed = ParseNetDev("lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->value.size(), 1u);
  EXPECT_TRUE(ParseNetDev("")->value.empty());
}

TEST(ParseDiskstats, ReadsFourteenEighteenAndTwentyFieldLines) {
  auto parsed = ParseDiskstats(
      "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n"
      " 259       0 nvme0n1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n"
      " 254       0 vda 153930 30568 8468426 438528 1471822 216227 132466912 971886 0 344288 "
      "1619689 222481 118 107792200 101221 429311 108053\n");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->value.size(), 3u);
  const DiskStats& sda = parsed->value[0];
  EXPECT_EQ(sda.major, 8u);
  EXPECT_EQ(sda.device, "sda");
  EXPECT_EQ(sda.reads_completed, 1u);
  EXPECT_EQ(sda.sectors_read, 3u);
  EXPECT_EQ(sda.io_in_progress, 9u);
  EXPECT_EQ(sda.weighted_io_ms, 11u);
  EXPECT_FALSE(sda.discards_completed);
  EXPECT_FALSE(sda.flushes_completed);
  const DiskStats& nvme = parsed->value[1];
  EXPECT_EQ(nvme.discards_completed, 12u);
  EXPECT_EQ(nvme.sectors_discarded, 14u);
  EXPECT_EQ(nvme.discard_ms, 15u);
  EXPECT_FALSE(nvme.flushes_completed);
  const DiskStats& vda = parsed->value[2];
  EXPECT_EQ(vda.major, 254u);
  EXPECT_EQ(vda.sectors_written, 132466912u);
  EXPECT_EQ(vda.flushes_completed, 429311u);
  EXPECT_EQ(vda.flush_ms, 108053u);
}

TEST(ParseDiskstats, SkipsHostileLines) {
  auto parsed = ParseDiskstats(
      "8 0 sda 1 2 3\n"                                           // truncated
      "8 0\n"                                                     // no name
      "x 0 sdb 1 2 3 4 5 6 7 8 9 10 11\n"                         // major not a number
      "4294967296 0 sdc 1 2 3 4 5 6 7 8 9 10 11\n"                // major past 32 bits
      "8 0 sdd 1 2 3 4 5 6 7 8 9 10 99999999999999999999\n"       // overflow
      "8 0 sd\0e 1 2 3 4 5 6 7 8 9 10 11\n"s +                    // NUL
      "8 0 " + std::string(300, 'd') + " 1 2 3 4 5 6 7 8 9 10 11\n" +
      "8 16 sdf 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n"  // future fields
      "8 16 sdf 1 2 3 4 5 6 7 8 9 10 11\n");                           // duplicate
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->value.size(), 1u);
  EXPECT_EQ(parsed->value[0].device, "sdf");
  EXPECT_EQ(parsed->value[0].flush_ms, 17u);
  EXPECT_EQ(parsed->skipped_lines, 8u);
}

TEST(ParseMountinfo, ReadsFieldsAroundTheOptionalOnes) {
  auto parsed = ParseMountinfo(
      "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
      "36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 shared:7 - ext3 /dev/root "
      "rw,errors=continue\n"
      "40 27 0:40 / /mnt/ro ro,relatime - nfs4 10.0.0.5:/export rw,vers=4.1\n"
      "41 27 0:41 / /mnt/sbro rw,relatime - ext4 /dev/sdb ro,data=ordered\n"
      "42 27 0:42 / /mnt/t\\011a\\012b\\134c\\999 rw - fuse.sshfs  rw\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto& mounts = parsed->value;
  ASSERT_EQ(mounts.size(), 5u);
  EXPECT_EQ(mounts[0].mount_point, "/");
  EXPECT_EQ(mounts[0].fstype, "ext4");
  EXPECT_EQ(mounts[0].source, "/dev/vda");
  EXPECT_FALSE(mounts[0].readonly);
  EXPECT_EQ(mounts[1].mount_point, "/mnt/a b");
  EXPECT_EQ(mounts[1].source, "/dev/root");
  EXPECT_TRUE(mounts[2].readonly) << "ro in the mount options";
  EXPECT_EQ(mounts[2].source, "10.0.0.5:/export");
  EXPECT_TRUE(mounts[3].readonly) << "ro in the superblock options";
  EXPECT_EQ(mounts[4].mount_point, "/mnt/t\ta\nb\\c\\999") << "only the kernel's escapes";
  EXPECT_EQ(mounts[4].source, "") << "an empty source is a field, not a missing one";
}

TEST(ParseMountinfo, SkipsHostileLinesAndRefusesAFileWithNoMount) {
  std::string many_optional = "50 27 0:50 / /mnt/wide rw";
  for (int i = 0; i < 10000; ++i) many_optional += " shared:" + std::to_string(i);
  many_optional += " - tmpfs tmpfs rw\n";
  auto parsed = ParseMountinfo(
      "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
      "28 27 0:1 / /a rw - tmpfs\n"                       // truncated after the separator
      "29 27 0:1 / /b rw shared:1 tmpfs tmpfs rw\n"       // no separator
      "30 27 0:1 /\n"                                     // truncated
      "x 27 0:1 / /c rw - tmpfs tmpfs rw\n"               // id not a number
      "31 27 01 / /d rw - tmpfs tmpfs rw\n"               // no major:minor
      "32 27 0:1 / relative rw - tmpfs tmpfs rw\n"        // not absolute
      "33 27 0:1 / /e\0 rw - tmpfs tmpfs rw\n"s +         // NUL
      "34 27 0:1 / /" + std::string(5000, 'p') + " rw - tmpfs tmpfs rw\n" +  // past PATH_MAX
      many_optional);
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->value.size(), 2u);
  EXPECT_EQ(parsed->value[1].mount_point, "/mnt/wide");
  EXPECT_EQ(parsed->skipped_lines, 8u);
  EXPECT_FALSE(ParseMountinfo("").ok());
  EXPECT_FALSE(ParseMountinfo("garbage\n").ok());
}

TEST(Parsers, SurviveEveryTruncationOfARealFile) {
  // Whatever prefix of a file a read returns, each parser answers without crashing, and only
  // ever with entries that were whole in the prefix.
  const std::string stat = kStat;
  for (std::size_t cut = 0; cut <= stat.size(); ++cut) {
    auto parsed = ParseProcStat(std::string_view(stat).substr(0, cut));
    if (parsed.ok()) {
      EXPECT_LE(parsed->value.per_cpu.size(), 3u);
    }
  }
  const std::string mountinfo =
      "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
      "36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 - ext3 /dev/root rw\n";
  for (std::size_t cut = 0; cut <= mountinfo.size(); ++cut) {
    auto parsed = ParseMountinfo(std::string_view(mountinfo).substr(0, cut));
    if (parsed.ok()) {
      EXPECT_LE(parsed->value.size(), 2u);
      for (const Mount& m : parsed->value) EXPECT_EQ(m.mount_point.front(), '/');
    }
  }
}

}  // namespace
}  // namespace uplink::agent::node
