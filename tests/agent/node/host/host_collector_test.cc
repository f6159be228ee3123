#include "agent/node/host/host_collector.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/node/host/proc_file.h"
#include "support/process.h"

namespace uplink::agent::node {
namespace {

namespace fs = std::filesystem;

std::string Fixture(const std::string& name) {
  return std::string(UPLINK_SOURCE_DIR) + "/tests/fixtures/node/" + name;
}

// statvfs that answers the same figures for every path: these tests are about /proc.
StatvfsFunction SameFigures() {
  return [](const std::string&, struct statvfs& out) {
    out = {};
    out.f_bsize = 4096;
    out.f_blocks = 2000;
    out.f_bfree = 1000;
    out.f_bavail = 900;
    out.f_files = 300;
    out.f_ffree = 200;
    return 0;
  };
}

std::unique_ptr<HostCollector> MakeCollector(const std::string& proc,
                                             HostCollectorOptions options = {}) {
  options.host_proc = proc;
  options.host_root = "/host";
  if (!options.statvfs) options.statvfs = SameFigures();
  auto collector = HostCollector::Create(std::move(options));
  EXPECT_TRUE(collector.ok()) << collector.status().ToString();
  return collector.ok() ? std::move(collector).value() : nullptr;
}

HostCollectorOptions WithFakeStatvfs() {
  HostCollectorOptions options;
  options.statvfs = SameFigures();
  return options;
}

CollectorSet HostCollectors() {
  CollectorSet set = CollectorSet::All();
  set.Remove(Collector::kGpu);
  return set;
}

template <typename T>
std::vector<std::string> Devices(const std::vector<T>& items) {
  std::vector<std::string> out;
  for (const T& item : items) out.push_back(item.device);
  return out;
}

std::vector<std::string> MountPoints(const std::vector<Filesystem>& filesystems) {
  std::vector<std::string> out;
  for (const Filesystem& fs : filesystems) out.push_back(fs.mountpoint);
  return out;
}

std::string GapsText(const std::vector<Gap>& gaps) {
  std::ostringstream out;
  for (const Gap& gap : gaps) {
    out << gap.source << " " << gap.path << " " << gap.errno_value << " " << gap.error << "\n";
  }
  return out.str();
}

TEST(HostCollector, FillsEverySectionFromThisMachinesCapturedFiles) {
  const std::string proc = Fixture("real-capture/proc");
  auto collector = MakeCollector(proc, WithFakeStatvfs());
  ASSERT_NE(collector, nullptr);
  NodeSample sample;
  collector->Collect(HostCollectors(), sample);
  EXPECT_TRUE(sample.gaps.empty()) << GapsText(sample.gaps);

  ASSERT_TRUE(sample.cpu);
  EXPECT_EQ(sample.cpu->per_cpu.size(), 2u);
  EXPECT_GT(sample.cpu->total.idle, 0);
  EXPECT_GT(sample.cpu->boot_time, 1'600'000'000);
  EXPECT_GT(sample.cpu->context_switches, 0u);
  ASSERT_TRUE(sample.memory);
  EXPECT_EQ(sample.memory->total_bytes, 24683656ull * 1024);
  EXPECT_TRUE(sample.memory->available_bytes);
  EXPECT_TRUE(sample.load);
  EXPECT_TRUE(sample.uptime_seconds);
  ASSERT_TRUE(sample.pressure);
  EXPECT_TRUE(sample.pressure->cpu_some && sample.pressure->cpu_full);
  EXPECT_TRUE(sample.pressure->io_full);
  EXPECT_EQ(Devices(sample.network), (std::vector<std::string>{"lo", "ifb0", "ifb1", "eth0"}));
  EXPECT_EQ(Devices(sample.disks), (std::vector<std::string>{"vda", "zram0"}));
  EXPECT_EQ(MountPoints(sample.filesystems),
            (std::vector<std::string>{"/", "/mnt/sandboxing/model_tools_env/v1/python"}));
  EXPECT_TRUE(sample.filesystems[1].readonly);
  EXPECT_EQ(sample.filesystems[0].size_bytes, 2000u * 4096);
}

TEST(HostCollector, WithoutPsiLeavesPressureOutWithOneGap) {
  const std::string proc = Fixture("centos7-no-psi/proc");
  auto collector = MakeCollector(proc, WithFakeStatvfs());
  ASSERT_NE(collector, nullptr);
  NodeSample sample;
  collector->Collect(HostCollectors(), sample);
  EXPECT_FALSE(sample.pressure);
  ASSERT_EQ(sample.gaps.size(), 1u) << GapsText(sample.gaps);
  EXPECT_EQ(sample.gaps[0].source, "pressure");
  EXPECT_EQ(sample.gaps[0].path, proc + "/pressure/cpu");
  EXPECT_EQ(sample.gaps[0].error, "No such file or directory");
  EXPECT_EQ(sample.gaps[0].errno_value, ENOENT);

  // Linux 3.10's 14-field diskstats, whole devices only.
  EXPECT_EQ(Devices(sample.disks), (std::vector<std::string>{"sda", "sr0", "dm-0", "dm-1"}));
  EXPECT_FALSE(sample.disks[0].discards_completed);
  EXPECT_FALSE(sample.disks[0].flushes_completed);
  EXPECT_EQ(sample.disks[0].sectors_read, 128375450u);

  EXPECT_EQ(MountPoints(sample.filesystems),
            (std::vector<std::string>{
                "/run", "/", "/boot",
                "/var/lib/kubelet/pods/6a1b2c3d-0000-4e5f-8a9b-112233445566/volumes/"
                "kubernetes.io~secret/token",
                "/mnt/nfs", "/data/archive", "/srv/team share"}));
  EXPECT_EQ(sample.filesystems[4].device, "10.0.0.5:/export/home");
  EXPECT_EQ(sample.filesystems[4].fstype, "nfs4");
  EXPECT_TRUE(sample.filesystems[5].readonly);
  EXPECT_FALSE(sample.filesystems[6].readonly);
  ASSERT_TRUE(sample.memory);
  EXPECT_EQ(sample.memory->swap_total_bytes, 8257532ull * 1024);
}

TEST(HostCollector, KeepsOfflineCpuGapsOf256Cpus) {
  auto collector = MakeCollector(Fixture("cpu256-offline/proc"), WithFakeStatvfs());
  ASSERT_NE(collector, nullptr);
  NodeSample sample;
  collector->Collect(HostCollectors(), sample);
  EXPECT_TRUE(sample.gaps.empty()) << GapsText(sample.gaps);
  ASSERT_TRUE(sample.cpu);
  ASSERT_EQ(sample.cpu->per_cpu.size(), 256u - 64u - 1u);
  for (const PerCpuTimes& cpu : sample.cpu->per_cpu) {
    EXPECT_NE(cpu.cpu, 5);
    EXPECT_FALSE(cpu.cpu >= 128 && cpu.cpu < 192) << cpu.cpu;
  }
  EXPECT_EQ(sample.cpu->per_cpu.back().cpu, 255);
}

TEST(HostCollector, ReadsLongInterfaceNamesAndTwentyFieldDiskstats) {
  auto collector = MakeCollector(Fixture("kernel6-long-names/proc"), WithFakeStatvfs());
  ASSERT_NE(collector, nullptr);
  NodeSample sample;
  collector->Collect(HostCollectors(), sample);
  EXPECT_TRUE(sample.gaps.empty()) << GapsText(sample.gaps);
  EXPECT_EQ(Devices(sample.network),
            (std::vector<std::string>{"lo", "enp94s0f0np0", "veth1a2b3c4d5e6", "cali0123456789a",
                                      "bond0.100", "ib0",
                                      "a-name-far-longer-than-ifnamsiz-allows"}));
  EXPECT_EQ(sample.network[1].receive_bytes, 18446744073709551615u);
  EXPECT_EQ(Devices(sample.disks),
            (std::vector<std::string>{"nvme0n1", "nvme1n1", "md127", "dm-0", "sda", "sdb"}));
  EXPECT_EQ(sample.disks[0].flushes_completed, 765432u);
  EXPECT_EQ(sample.disks[0].discard_ms, 4567u);
  ASSERT_TRUE(sample.pressure);
  ASSERT_TRUE(sample.pressure->cpu_full) << "Linux 5.13+ has a cpu full line";
  EXPECT_EQ(MountPoints(sample.filesystems),
            (std::vector<std::string>{
                "/run", "/",
                "/var/lib/kubelet/pods/0f1e2d3c-aaaa-bbbb-cccc-ddddeeeeffff/volumes/"
                "kubernetes.io~projected/kube-api-access-x7k2p",
                "/mnt/scratch", "/home", "/var/lib/readonly\ttab", "/run/user/1000"}));
  EXPECT_TRUE(sample.filesystems[5].readonly) << "ro only among the superblock's options";
}

TEST(HostCollector, CollectsOnlyWhatItIsAskedFor) {
  auto collector = MakeCollector(Fixture("real-capture/proc"), WithFakeStatvfs());
  ASSERT_NE(collector, nullptr);
  NodeSample sample;
  sample.load = Load{9, 9, 9};
  CollectorSet only_cpu;
  only_cpu.Add(Collector::kCpu);
  collector->Collect(only_cpu, sample);
  EXPECT_TRUE(sample.cpu);
  EXPECT_EQ(sample.load->load1, 9) << "an unasked section is left as it was";
  EXPECT_FALSE(sample.memory);
  EXPECT_TRUE(sample.network.empty());
  EXPECT_TRUE(sample.filesystems.empty());
}

TEST(HostCollector, AMissingProcGivesAGapPerSourceAndNoSections) {
  testing::TempDir dir;
  auto collector = MakeCollector(dir.File("proc"), WithFakeStatvfs());
  ASSERT_NE(collector, nullptr);
  NodeSample sample;
  collector->Collect(HostCollectors(), sample);
  EXPECT_FALSE(sample.cpu || sample.memory || sample.load || sample.uptime_seconds ||
               sample.pressure);
  EXPECT_TRUE(sample.network.empty() && sample.disks.empty() && sample.filesystems.empty());
  std::vector<std::string> sources;
  for (const Gap& gap : sample.gaps) {
    sources.push_back(gap.source);
    EXPECT_EQ(gap.errno_value, ENOENT) << gap.path;
    EXPECT_EQ(gap.path.rfind(dir.File("proc/"), 0), 0u) << gap.path;
  }
  EXPECT_EQ(sources, (std::vector<std::string>{"cpu", "memory", "load", "uptime", "pressure",
                                               "network", "disk", "filesystem"}));
}

void CopyTree(const std::string& from, const std::string& to) {
  fs::copy(from, to, fs::copy_options::recursive);
}

TEST(HostCollector, ReportsMalformedLinesAndOversizedFilesAsGaps) {
  testing::TempDir dir;
  const std::string proc = dir.File("proc");
  CopyTree(Fixture("real-capture/proc"), proc);
  testing::WriteFileOrDie(proc + "/loadavg", "high medium low\n");
  testing::WriteFileOrDie(proc + "/diskstats",
                          " 254 0 vda 1 2 3 4 5 6 7 8 9 10 11\n 254 1 broken\n 254 2 x 1\n");
  testing::WriteFileOrDie(proc + "/meminfo", std::string(kSmallProcFileCap + 1, 'M'));
  auto collector = MakeCollector(proc, WithFakeStatvfs());
  ASSERT_NE(collector, nullptr);
  NodeSample sample;
  collector->Collect(HostCollectors(), sample);
  ASSERT_EQ(sample.gaps.size(), 3u) << GapsText(sample.gaps);
  EXPECT_EQ(sample.gaps[0].source, "memory");
  EXPECT_EQ(sample.gaps[0].errno_value, 0);
  EXPECT_NE(sample.gaps[0].error.find("65536-byte cap"), std::string::npos);
  EXPECT_FALSE(sample.memory);
  EXPECT_EQ(sample.gaps[1].source, "load");
  EXPECT_NE(sample.gaps[1].error.find("'high'"), std::string::npos);
  EXPECT_FALSE(sample.load);
  EXPECT_EQ(sample.gaps[2].source, "disk");
  EXPECT_EQ(sample.gaps[2].path, proc + "/diskstats");
  EXPECT_EQ(sample.gaps[2].error.rfind("skipped 2 malformed lines; line 2: ", 0), 0u)
      << sample.gaps[2].error;
  EXPECT_EQ(Devices(sample.disks), std::vector<std::string>{"vda"}) << "the good line counts";
}

TEST(HostCollector, ExclusionsCanBeOverridden) {
  HostCollectorOptions options = WithFakeStatvfs();
  options.net_devices_exclude = "^(lo|ifb\\d+)$";
  options.disk_devices_exclude = "";
  options.mount_points_exclude = "^/mnt/";
  options.fs_types_exclude = "^(proc|sysfs|devtmpfs|devpts|tmpfs|cgroup2?)$";
  auto collector = MakeCollector(Fixture("real-capture/proc"), options);
  ASSERT_NE(collector, nullptr);
  NodeSample sample;
  collector->Collect(HostCollectors(), sample);
  EXPECT_EQ(Devices(sample.network), std::vector<std::string>{"eth0"});
  EXPECT_EQ(sample.disks.size(), 10u) << "loop devices kept";
  EXPECT_EQ(MountPoints(sample.filesystems), std::vector<std::string>{"/"});

  options.net_devices_exclude = "(";
  auto refused = HostCollector::Create(options);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("network devices exclude"), std::string::npos);
}

TEST(HostCollector, StatsEachMountUnderTheHostRoot) {
  testing::TempDir root;
  fs::create_directories(root.File("mnt/sandboxing/model_tools_env/v1/python"));
  HostCollectorOptions options;
  options.host_proc = Fixture("real-capture/proc");
  options.host_root = root.path();
  auto collector = HostCollector::Create(options);
  ASSERT_TRUE(collector.ok());
  NodeSample sample;
  CollectorSet only_filesystems;
  only_filesystems.Add(Collector::kFilesystem);
  (*collector)->Collect(only_filesystems, sample);
  ASSERT_EQ(sample.filesystems.size(), 2u);
  // The root's directory exists, so statvfs answers with the real figures of its filesystem.
  EXPECT_EQ(sample.filesystems[0].error, "");
  EXPECT_GT(sample.filesystems[0].size_bytes, 0u);
  EXPECT_GT(sample.filesystems[0].files, 0u);
  EXPECT_EQ(sample.filesystems[1].error, "");
  fs::remove_all(root.File("mnt"));
  sample = {};
  (*collector)->Collect(only_filesystems, sample);
  EXPECT_EQ(sample.filesystems[1].error, "No such file or directory");
  ASSERT_EQ(sample.gaps.size(), 1u);
  EXPECT_EQ(sample.gaps[0].path, root.path() + "/mnt/sandboxing/model_tools_env/v1/python");
  EXPECT_EQ(sample.gaps[0].errno_value, ENOENT);
}

TEST(HostCollector, AHungMountCostsOneTimeoutOnceAndIsSkippedAfter) {
  struct Hang {
    std::mutex mutex;
    std::condition_variable released_cv;
    bool released = false;
    int calls = 0;
  };
  auto hang = std::make_shared<Hang>();
  HostCollectorOptions options;
  options.statvfs_timeout = std::chrono::milliseconds(1000);
  options.statvfs = [hang, same = SameFigures()](const std::string& path, struct statvfs& out) {
    if (path == "/host/mnt/nfs") {
      std::unique_lock lock(hang->mutex);
      ++hang->calls;
      hang->released_cv.wait(lock, [&] { return hang->released; });
    }
    return same(path, out);
  };
  auto collector = MakeCollector(Fixture("centos7-no-psi/proc"), options);
  ASSERT_NE(collector, nullptr);
  CollectorSet only_filesystems;
  only_filesystems.Add(Collector::kFilesystem);
  for (int cycle = 0; cycle < 2; ++cycle) {
    NodeSample sample;
    collector->Collect(only_filesystems, sample);
    ASSERT_EQ(sample.filesystems.size(), 7u);
    EXPECT_EQ(sample.filesystems[4].mountpoint, "/mnt/nfs");
    EXPECT_EQ(sample.filesystems[4].error,
              "statvfs did not answer within 1 s; skipped until it does");
    EXPECT_EQ(sample.filesystems[1].error, "") << "the other mounts still answer";
    ASSERT_EQ(sample.gaps.size(), 1u) << GapsText(sample.gaps);
    EXPECT_EQ(sample.gaps[0].path, "/host/mnt/nfs");
    EXPECT_EQ(collector->statter().stuck_count(), 1u);
  }
  {
    std::lock_guard lock(hang->mutex);
    EXPECT_EQ(hang->calls, 1);
    hang->released = true;
  }
  hang->released_cv.notify_all();
  EXPECT_TRUE(testing::WaitFor([&] { return collector->statter().stuck_count() == 0; }));
}

// The agent sees the host's filesystems through its own read-only mount of the host's / (the
// chart mounts it so): statvfs's ST_RDONLY is that mount's, not the filesystem's.
TEST(HostCollector, AReadOnlyViewOfTheHostDoesNotMakeItsFilesystemsReadOnly) {
  testing::TempDir dir;
  const std::string proc = dir.File("proc");
  fs::create_directories(proc + "/1");
  testing::WriteFileOrDie(proc + "/1/mountinfo",
                          "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
                          "23 22 8:2 / /data ro,relatime - ext4 /dev/sda2 rw\n");
  HostCollectorOptions options;
  options.statvfs = [same = SameFigures()](const std::string& path, struct statvfs& out) {
    const int error = same(path, out);
    out.f_flag |= ST_RDONLY;
    return error;
  };
  auto collector = MakeCollector(proc, std::move(options));
  ASSERT_NE(collector, nullptr);
  CollectorSet only_filesystems;
  only_filesystems.Add(Collector::kFilesystem);
  NodeSample sample;
  collector->Collect(only_filesystems, sample);
  ASSERT_EQ(MountPoints(sample.filesystems), (std::vector<std::string>{"/", "/data"}));
  EXPECT_FALSE(sample.filesystems[0].readonly);
  EXPECT_TRUE(sample.filesystems[1].readonly);
}

// A superblock made read-only and then read-write again with fsconfig raises no mount event
// (nor does ext4's errors=remount-ro), so the mount table is also read again once it is
// mount_table_max_age old. Two collectors watch one tmpfs: one whose table never ages, one
// whose table is always too old. Runs in a mount namespace of its own (as root, as CI does).
TEST(HostCollector, AMountTableWithoutEventsIsReadAgainOnceItIsTooOld) {
  testing::TempDir dir;
  const std::string target = dir.File("mnt");
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
  const int failed_check = testing::RunInOwnMountNamespace([&] {
    if (::mount("none", target.c_str(), "tmpfs", 0, nullptr) != 0) return 1;
    // The role reads PID 1's table; this namespace's is this process's.
    const std::string proc = dir.File("proc");
    if (::mkdir(proc.c_str(), 0700) != 0) return 2;
    const std::string self = "/proc/" + std::to_string(::getpid());
    if (::symlink(self.c_str(), (proc + "/1").c_str()) != 0) return 3;
    auto ageless = HostCollector::Create(
        {.host_proc = proc, .host_root = "/", .mount_table_max_age = std::chrono::hours(1)});
    auto always_old = HostCollector::Create(
        {.host_proc = proc, .host_root = "/", .mount_table_max_age = std::chrono::milliseconds(0)});
    if (!ageless.ok() || !always_old.ok()) return 4;
    CollectorSet only_filesystems;
    only_filesystems.Add(Collector::kFilesystem);
    // -1: the mount is missing from the sample.
    auto readonly = [&](HostCollector& collector) -> int {
      NodeSample sample;
      collector.Collect(only_filesystems, sample);
      for (const Filesystem& filesystem : sample.filesystems) {
        if (filesystem.mountpoint == target) return filesystem.readonly ? 1 : 0;
      }
      return -1;
    };
    auto reconfigure = [&](const char* flag) {
      const int fs = ::fspick(AT_FDCWD, target.c_str(), FSPICK_CLOEXEC);
      if (fs < 0) return false;
      const bool done = ::fsconfig(fs, FSCONFIG_SET_FLAG, flag, nullptr, 0) == 0 &&
                        ::fsconfig(fs, FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) == 0;
      ::close(fs);
      return done;
    };
    if (readonly(**ageless) != 0 || readonly(**always_old) != 0) return 5;
    if (!reconfigure("ro")) return 6;
    if (readonly(**ageless) != 0) return 7;  // no event: its table still says rw
    if (readonly(**always_old) != 1) return 8;
    if (!reconfigure("rw")) return 9;
    if (readonly(**always_old) != 0) return 10;
    return 0;
  });
  EXPECT_EQ(failed_check, 0)
      << "5: the mount not reported rw; 6/9: fsconfig refused; 7: a superblock change raised "
         "a mount event after all; 8/10: an aged table not read again; 99: no mount namespace "
         "(needs root)";
}

TEST(HostCollector, FollowsTheMountTableAsItChanges) {
  testing::TempDir dir;
  const std::string proc = dir.File("proc");
  fs::create_directories(proc + "/1");
  const std::string mountinfo = proc + "/1/mountinfo";
  const std::string root_line = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n";
  testing::WriteFileOrDie(mountinfo,
                          root_line + "23 22 8:2 / /data rw,relatime - ext4 /dev/sda2 rw\n");
  auto collector = MakeCollector(proc, WithFakeStatvfs());
  ASSERT_NE(collector, nullptr);
  CollectorSet only_filesystems;
  only_filesystems.Add(Collector::kFilesystem);
  auto collect = [&] {
    NodeSample sample;
    collector->Collect(only_filesystems, sample);
    return sample;
  };

  NodeSample sample = collect();
  EXPECT_TRUE(sample.gaps.empty()) << GapsText(sample.gaps);
  EXPECT_EQ(MountPoints(sample.filesystems), (std::vector<std::string>{"/", "/data"}));
  EXPECT_FALSE(sample.filesystems[1].readonly);
  EXPECT_EQ(sample.filesystems[1].size_bytes, 2000u * 4096);

  // /data remounted read-only, a new mount, and one the exclusions leave out.
  testing::WriteFileOrDie(mountinfo, root_line +
                                         "23 22 8:2 / /data ro,relatime - ext4 /dev/sda2 ro\n"
                                         "24 22 0:5 / /proc rw - proc proc rw\n"
                                         "25 22 8:3 / /new rw - xfs /dev/sda3 rw\n");
  sample = collect();
  EXPECT_TRUE(sample.gaps.empty()) << GapsText(sample.gaps);
  EXPECT_EQ(MountPoints(sample.filesystems), (std::vector<std::string>{"/", "/data", "/new"}));
  EXPECT_TRUE(sample.filesystems[1].readonly);
  EXPECT_EQ(sample.filesystems[2].fstype, "xfs");
  EXPECT_EQ(sample.filesystems[2].files, 300u) << "a new mount gets its figures";

  // A malformed line is reported every cycle the table holds it, not only when it appears.
  testing::WriteFileOrDie(mountinfo, root_line + "26 22 8:4 / /broken\n");
  for (int cycle = 0; cycle < 2; ++cycle) {
    sample = collect();
    ASSERT_EQ(sample.gaps.size(), 1u) << "cycle " << cycle << "\n" << GapsText(sample.gaps);
    EXPECT_EQ(sample.gaps[0].path, mountinfo);
    EXPECT_EQ(sample.gaps[0].error.rfind("skipped 1 malformed line; line 2: ", 0), 0u)
        << sample.gaps[0].error;
    EXPECT_EQ(MountPoints(sample.filesystems), std::vector<std::string>{"/"});
  }

  testing::WriteFileOrDie(mountinfo, "garbage\n");
  for (int cycle = 0; cycle < 2; ++cycle) {
    sample = collect();
    ASSERT_EQ(sample.gaps.size(), 1u) << "cycle " << cycle << "\n" << GapsText(sample.gaps);
    EXPECT_EQ(sample.gaps[0].error, "no usable mount line");
    EXPECT_TRUE(sample.filesystems.empty());
  }

  testing::WriteFileOrDie(mountinfo, root_line);
  sample = collect();
  EXPECT_TRUE(sample.gaps.empty()) << GapsText(sample.gaps);
  EXPECT_EQ(MountPoints(sample.filesystems), std::vector<std::string>{"/"});
}

TEST(HostCollector, ReadsTheLiveProcAfreshEveryCycle) {
  auto collector = MakeCollector("/proc", WithFakeStatvfs());
  ASSERT_NE(collector, nullptr);
  CollectorSet only_cpu;
  only_cpu.Add(Collector::kCpu);
  NodeSample first;
  collector->Collect(only_cpu, first);
  ASSERT_TRUE(first.cpu) << GapsText(first.gaps);
  std::thread([] {}).join();  // counted in /proc/stat's "processes"
  NodeSample second;
  collector->Collect(only_cpu, second);
  ASSERT_TRUE(second.cpu) << GapsText(second.gaps);
  EXPECT_GT(second.cpu->forks, first.cpu->forks);
}

// Runs a collection of `proc` as an unprivileged user, as the agent's container runs, so
// permission bits bind even when the test runs as root. Returns the gaps as
// "source errno" lines plus which sections came back.
std::string CollectUnprivileged(const std::string& proc) {
  auto collect = [&] {
    auto collector = HostCollector::Create({.host_proc = proc, .statvfs = SameFigures()});
    if (!collector.ok()) return std::string("create failed\n");
    NodeSample sample;
    (*collector)->Collect(HostCollectors(), sample);
    std::string out;
    for (const Gap& gap : sample.gaps) {
      out += gap.source + " " + std::to_string(gap.errno_value) + " " + gap.path + "\n";
    }
    out += sample.cpu ? "cpu present\n" : "cpu absent\n";
    out += sample.network.empty() ? "network empty\n" : "network present\n";
    return out;
  };
  if (::geteuid() != 0) return collect();

  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    const gid_t nogroup = 65534;
    if (::setgroups(1, &nogroup) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(3);
    const std::string out = collect();
    const bool written = ::write(pipe_fds[1], out.data(), out.size()) ==
                         static_cast<ssize_t>(out.size());
    _exit(written ? 0 : 4);
  }
  ::close(pipe_fds[1]);
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) out.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child failed: " + out;
  return out;
}

TEST(HostCollector, AnUnreadablePid1GivesPermissionGapsAndTheRestStillCounts) {
  // hidepid-style: /proc/1 is there but not ours to read. Git keeps no such mode, so the test
  // copies the fixture and takes the permissions away.
  testing::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string proc = dir.File("proc");
  CopyTree(Fixture("hidepid/proc"), proc);
  ASSERT_EQ(::chmod((proc + "/1").c_str(), 0), 0);
  const std::string report = CollectUnprivileged(proc);
  ::chmod((proc + "/1").c_str(), 0755);
  EXPECT_EQ(report, "network " + std::to_string(EACCES) + " " + proc + "/1/net/dev\n" +
                        "filesystem " + std::to_string(EACCES) + " " + proc + "/1/mountinfo\n" +
                        "cpu present\nnetwork empty\n");
}

}  // namespace
}  // namespace uplink::agent::node
