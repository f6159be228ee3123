#include "agent/node/host/filesystems.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "support/process.h"

namespace uplink::agent::node {
namespace {

Mount MakeMount(std::string mount_point, std::string fstype, std::string source = "dev",
                bool readonly = false) {
  return Mount{std::move(mount_point), std::move(fstype), std::move(source), readonly};
}

std::vector<std::string> MountPoints(const std::vector<Filesystem>& filesystems) {
  std::vector<std::string> out;
  for (const Filesystem& fs : filesystems) out.push_back(fs.mountpoint);
  return out;
}

TEST(FilesystemSelector, LeavesOutWhatNodeExporterLeavesOutByDefault) {
  auto selector = FilesystemSelector::Create(kDefaultMountPointsExclude, kDefaultFsTypesExclude);
  ASSERT_TRUE(selector.ok()) << selector.status().ToString();
  const std::vector<Mount> mounts = {
      MakeMount("/", "ext4", "/dev/nvme0n1p1"),
      MakeMount("/proc", "proc"),
      MakeMount("/proc/sys/fs/binfmt_misc", "binfmt_misc"),
      MakeMount("/dev/shm", "tmpfs"),
      MakeMount("/devices", "ext4"),  // only /dev itself and below are excluded
      MakeMount("/sys/fs/cgroup", "cgroup2"),
      MakeMount("/run", "tmpfs"),
      MakeMount("/run/credentials/systemd-sysctl.service", "ramfs"),
      MakeMount("/run/credentials", "tmpfs"),
      MakeMount("/var/lib/docker", "ext4"),
      MakeMount("/var/lib/docker/overlay2/abc/merged", "overlay"),
      MakeMount("/var/lib/containers/storage/overlay", "xfs"),
      MakeMount("/var/lib/kubelet/pods/p/volumes/kubernetes.io~secret/token", "tmpfs"),
      MakeMount("/snap/core22/1380", "squashfs"),
      MakeMount("/data", "overlay"),
      MakeMount("/media/cdrom", "iso9660"),
      MakeMount("/mnt/nfs", "nfs4", "10.0.0.5:/export"),
      MakeMount("/boot", "vfat", "/dev/sda1", true),
  };
  const auto selected = selector->Select(mounts);
  EXPECT_EQ(MountPoints(selected),
            (std::vector<std::string>{"/", "/devices", "/run", "/run/credentials",
                                      "/var/lib/docker",
                                      "/var/lib/kubelet/pods/p/volumes/kubernetes.io~secret/token",
                                      "/mnt/nfs", "/boot"}));
  EXPECT_EQ(selected.back().device, "/dev/sda1");
  EXPECT_EQ(selected.back().fstype, "vfat");
  EXPECT_TRUE(selected.back().readonly);
  EXPECT_FALSE(selected.front().readonly);
}

TEST(FilesystemSelector, KeepsOneEntryPerDeviceMountPointAndType) {
  auto selector = FilesystemSelector::Create("", "");
  ASSERT_TRUE(selector.ok());
  const auto selected = selector->Select({MakeMount("/a", "ext4", "/dev/sda"),
                                          MakeMount("/b", "ext4", "/dev/sdb"),
                                          MakeMount("/a", "ext4", "/dev/sda", true),
                                          MakeMount("/a", "ext4", "/dev/sdc")});
  ASSERT_EQ(selected.size(), 3u);
  EXPECT_EQ(selected[0].mountpoint, "/a");
  EXPECT_FALSE(selected[0].readonly) << "the first of the stacked mounts stays";
  EXPECT_EQ(selected[1].mountpoint, "/b");
  EXPECT_EQ(selected[2].device, "/dev/sdc");
}

TEST(FilesystemSelector, RefusesAPatternThatDoesNotCompile) {
  auto selector = FilesystemSelector::Create("^/(dev", "");
  EXPECT_EQ(selector.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(selector.status().message().find("mount points exclude"), std::string::npos);
}

TEST(ExcludePattern, SearchesLikeGoAnchoringOnlyTheEndsOfTheName) {
  auto lo = ExcludePattern::Compile("^lo$");
  ASSERT_TRUE(lo.ok());
  EXPECT_TRUE(lo->Excludes("lo"));
  EXPECT_FALSE(lo->Excludes("lo0"));
  EXPECT_FALSE(lo->Excludes("x\nlo")) << "'^' is not a line start";
  auto dot = ExcludePattern::Compile("^a.b$");
  ASSERT_TRUE(dot.ok());
  EXPECT_TRUE(dot->Excludes("a-b"));
  EXPECT_FALSE(dot->Excludes("a\nb")) << "'.' stops at a newline, as in Go";
  auto unanchored = ExcludePattern::Compile("veth");
  ASSERT_TRUE(unanchored.ok());
  EXPECT_TRUE(unanchored->Excludes("cali-veth0"));
  auto nothing = ExcludePattern::Compile("");
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->Excludes(""));
  EXPECT_FALSE(nothing->Excludes("lo"));
}

TEST(ExcludePattern, MatchesTheDefaultDiskPatternLikeNodeExporter) {
  auto disks = ExcludePattern::Compile(kDefaultDiskDevicesExclude);
  ASSERT_TRUE(disks.ok());
  for (const char* excluded : {"sda1", "vdb12", "xvda1", "hdc3", "nvme0n1p1", "nvme10n2p15",
                               "loop0", "ram15", "fd0"}) {
    EXPECT_TRUE(disks->Excludes(excluded)) << excluded;
  }
  for (const char* kept : {"sda", "nvme0n1", "dm-0", "md127", "sr0", "vda", "loop", "zram0"}) {
    EXPECT_FALSE(disks->Excludes(kept)) << kept;
  }
}

TEST(ExcludePattern, SurvivesANameOfAMebibyte) {
  // libstdc++'s std::regex recurses per character and crashes here; the pattern must not.
  auto points = ExcludePattern::Compile(kDefaultMountPointsExclude);
  ASSERT_TRUE(points.ok());
  EXPECT_TRUE(points->Excludes("/var/lib/docker/" + std::string(1 << 20, 'a')));
  EXPECT_FALSE(points->Excludes("/" + std::string(1 << 20, 'a')));
}

struct Device {
  std::string device;
};

std::vector<std::string> Names(const std::vector<Device>& devices) {
  std::vector<std::string> out;
  for (const Device& d : devices) out.push_back(d.device);
  return out;
}

TEST(DeviceExclusion, FollowsTheDeviceListAsItChanges) {
  auto loops = ExcludePattern::Compile(R"(^loop\d+$)");
  ASSERT_TRUE(loops.ok());
  DeviceExclusion exclusion(std::move(loops).value());
  auto keep = [&](std::vector<Device> devices) {
    exclusion.KeepIncluded(devices);
    return Names(devices);
  };
  using List = std::vector<std::string>;
  EXPECT_EQ(keep({{"loop0"}, {"sda"}, {"loop1"}}), (List{"sda"}));
  EXPECT_EQ(keep({{"loop0"}, {"sda"}, {"loop1"}}), (List{"sda"})) << "the same list again";
  EXPECT_EQ(keep({{"sda"}, {"loop0"}, {"loop1"}}), (List{"sda"})) << "reordered";
  EXPECT_EQ(keep({{"sda"}, {"sdb"}, {"loop1"}}), (List{"sda", "sdb"})) << "same size, new name";
  EXPECT_EQ(keep({{"nvme0n1"}, {"loop7"}, {"sda"}, {"loop8"}}), (List{"nvme0n1", "sda"}));
  EXPECT_EQ(keep({}), List{});
  EXPECT_EQ(keep({{"loop3"}}), List{});

  auto nothing = ExcludePattern::Compile("");
  ASSERT_TRUE(nothing.ok());
  DeviceExclusion keeps_all(std::move(nothing).value());
  std::vector<Device> devices = {{"lo"}, {"eth0"}};
  keeps_all.KeepIncluded(devices);
  EXPECT_EQ(Names(devices), (std::vector<std::string>{"lo", "eth0"}));
}

TEST(PathUnderRoot, JoinsTheHostRootAndTheMountPoint) {
  EXPECT_EQ(PathUnderRoot("/", "/data"), "/data");
  EXPECT_EQ(PathUnderRoot("", "/data"), "/data");
  EXPECT_EQ(PathUnderRoot("/host", "/"), "/host/");
  EXPECT_EQ(PathUnderRoot("/host/", "/data"), "/host/data");
}

// statvfs that answers from a table, and blocks on paths told to hang until they are released.
class FakeStatvfs {
 public:
  StatvfsFunction Function() {
    return [state = state_](const std::string& path, struct statvfs& out) {
      std::unique_lock lock(state->mutex);
      ++state->calls[path];
      state->changed.wait(lock, [&] { return !state->hanging.contains(path); });
      if (auto it = state->errors.find(path); it != state->errors.end()) return it->second;
      out = {};
      out.f_bsize = 4096;
      out.f_frsize = 1024;  // node_exporter multiplies by f_bsize; this tells them apart
      out.f_blocks = 1000;
      out.f_bfree = 600;
      out.f_bavail = 500;
      out.f_files = 100;
      out.f_ffree = 50;
      return 0;
    };
  }
  void Hang(const std::string& path) {
    std::lock_guard lock(state_->mutex);
    state_->hanging.insert(path);
  }
  void Release(const std::string& path) {
    {
      std::lock_guard lock(state_->mutex);
      state_->hanging.erase(path);
    }
    state_->changed.notify_all();
  }
  void Fail(const std::string& path, int errno_value) {
    std::lock_guard lock(state_->mutex);
    state_->errors[path] = errno_value;
  }
  int Calls(const std::string& path) {
    std::lock_guard lock(state_->mutex);
    return state_->calls[path];
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::set<std::string> hanging;
    std::map<std::string, int> errors;
    std::map<std::string, int> calls;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// Releases every hung path when a test ends, so no worker outlives the test in its call.
class ReleaseAll {
 public:
  ReleaseAll(FakeStatvfs& fake, std::vector<std::string> paths)
      : fake_(fake), paths_(std::move(paths)) {}
  ~ReleaseAll() {
    for (const auto& path : paths_) fake_.Release(path);
  }

 private:
  FakeStatvfs& fake_;
  std::vector<std::string> paths_;
};

std::vector<Filesystem> Filesystems(std::initializer_list<const char*> mount_points) {
  std::vector<Filesystem> out;
  for (const char* mount_point : mount_points) {
    Filesystem fs;
    fs.device = "dev";
    fs.fstype = "ext4";
    fs.mountpoint = mount_point;
    out.push_back(fs);
  }
  return out;
}

// One cycle: the calls, then their results.
void StatAll(FilesystemStatter& statter, std::string_view host_root,
             std::vector<Filesystem>& filesystems, std::vector<Gap>& gaps) {
  statter.Start(host_root, filesystems);
  statter.Finish(filesystems, gaps);
}

// Long enough that a call returning at once never overruns it; hung calls never return.
constexpr std::chrono::milliseconds kTimeout{1000};

TEST(FilesystemStatter, ComputesFiguresAsNodeExporterDoes) {
  FakeStatvfs fake;
  FilesystemStatter statter(fake.Function(), kTimeout);
  auto filesystems = Filesystems({"/", "/data"});
  std::vector<Gap> gaps;
  StatAll(statter, "/host", filesystems, gaps);
  EXPECT_TRUE(gaps.empty());
  for (const Filesystem& fs : filesystems) {
    EXPECT_EQ(fs.error, "");
    EXPECT_EQ(fs.size_bytes, 1000u * 4096);
    EXPECT_EQ(fs.free_bytes, 600u * 4096);
    EXPECT_EQ(fs.avail_bytes, 500u * 4096);
    EXPECT_EQ(fs.files, 100u);
    EXPECT_EQ(fs.files_free, 50u);
  }
  EXPECT_EQ(fake.Calls("/host/"), 1);
  EXPECT_EQ(fake.Calls("/host/data"), 1);
}

TEST(FilesystemStatter, MakesTheCallsBetweenStartAndFinish) {
  FakeStatvfs fake;
  FilesystemStatter statter(fake.Function(), kTimeout);
  auto filesystems = Filesystems({"/", "/data"});
  statter.Start("/host", filesystems);
  EXPECT_TRUE(testing::WaitFor(
      [&] { return fake.Calls("/host/") == 1 && fake.Calls("/host/data") == 1; }))
      << "the calls run while the caller does other work";
  std::vector<Gap> gaps;
  statter.Finish(filesystems, gaps);
  EXPECT_TRUE(gaps.empty());
  EXPECT_EQ(filesystems[0].size_bytes, 1000u * 4096);
  EXPECT_EQ(filesystems[1].files_free, 50u);
  EXPECT_EQ(fake.Calls("/host/"), 1) << "Finish calls nothing again";
}

TEST(FilesystemStatter, ReportsAFailedCallAsAnErrorAndAGap) {
  FakeStatvfs fake;
  fake.Fail("/gone", EACCES);
  FilesystemStatter statter(fake.Function(), kTimeout);
  auto filesystems = Filesystems({"/gone", "/ok"});
  std::vector<Gap> gaps;
  StatAll(statter, "/", filesystems, gaps);
  EXPECT_EQ(filesystems[0].error, "Permission denied");
  EXPECT_EQ(filesystems[0].size_bytes, 0u);
  EXPECT_EQ(filesystems[1].error, "");
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].source, "filesystem");
  EXPECT_EQ(gaps[0].path, "/gone");
  EXPECT_EQ(gaps[0].error, "Permission denied");
  EXPECT_EQ(gaps[0].errno_value, EACCES);
}

TEST(FilesystemStatter, SkipsAHungMountWithoutCallingItAgainUntilItAnswers) {
  FakeStatvfs fake;
  fake.Hang("/nfs");
  ReleaseAll release(fake, {"/nfs"});
  FilesystemStatter statter(fake.Function(), kTimeout, 2);

  for (int cycle = 0; cycle < 3; ++cycle) {
    auto filesystems = Filesystems({"/", "/nfs"});
    std::vector<Gap> gaps;
    StatAll(statter, "/", filesystems, gaps);
    EXPECT_EQ(filesystems[0].error, "") << "cycle " << cycle;
    EXPECT_EQ(filesystems[1].error, "statvfs did not answer within 1 s; skipped until it does");
    ASSERT_EQ(gaps.size(), 1u);
    EXPECT_EQ(gaps[0].path, "/nfs");
    EXPECT_EQ(gaps[0].errno_value, 0);
    EXPECT_EQ(fake.Calls("/nfs"), 1) << "one outstanding call, never a second";
    EXPECT_EQ(statter.stuck_count(), 1u);
    EXPECT_EQ(statter.thread_count(), 3u) << "two workers plus the one stuck in the call";
  }
  EXPECT_EQ(fake.Calls("/"), 3);

  fake.Release("/nfs");
  ASSERT_TRUE(testing::WaitFor([&] { return statter.stuck_count() == 0; }));
  ASSERT_TRUE(testing::WaitFor([&] { return statter.thread_count() == 2; }));
  auto filesystems = Filesystems({"/", "/nfs"});
  std::vector<Gap> gaps;
  StatAll(statter, "/", filesystems, gaps);
  EXPECT_EQ(filesystems[1].error, "");
  EXPECT_EQ(filesystems[1].size_bytes, 1000u * 4096);
  EXPECT_TRUE(gaps.empty());
  EXPECT_EQ(fake.Calls("/nfs"), 2);
}

TEST(FilesystemStatter, AHungMountFirstInLineHoldsOnlyItsOwnWorker) {
  // One worker takes the calls in turn; the ones queued behind the hung call go to the other.
  FakeStatvfs fake;
  fake.Hang("/nfs");
  ReleaseAll release(fake, {"/nfs"});
  FilesystemStatter statter(fake.Function(), kTimeout, 2);
  auto filesystems = Filesystems({"/nfs", "/", "/data"});
  std::vector<Gap> gaps;
  StatAll(statter, "/", filesystems, gaps);
  EXPECT_EQ(filesystems[0].error, "statvfs did not answer within 1 s; skipped until it does");
  EXPECT_EQ(filesystems[1].error, "");
  EXPECT_EQ(filesystems[1].size_bytes, 1000u * 4096);
  EXPECT_EQ(filesystems[2].error, "");
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].path, "/nfs");
  EXPECT_EQ(fake.Calls("/"), 1);
  EXPECT_EQ(fake.Calls("/data"), 1);
  EXPECT_EQ(statter.thread_count(), 3u) << "two workers plus the one stuck in the call";
}

TEST(FilesystemStatter, MoreHungMountsThanWorkersNeitherStarveTheRestNorMultiplyCalls) {
  FakeStatvfs fake;
  const std::vector<std::string> hung = {"/h1", "/h2", "/h3", "/h4"};
  for (const auto& path : hung) fake.Hang(path);
  ReleaseAll release(fake, hung);
  FilesystemStatter statter(fake.Function(), kTimeout, 2);
  auto make = [] { return Filesystems({"/a", "/b", "/c", "/h1", "/h2", "/h3", "/h4"}); };

  // Cycle 1: two hung calls hold both workers past the timeout; the two still queued then are
  // not reached this time.
  auto first = make();
  std::vector<Gap> gaps;
  StatAll(statter, "/", first, gaps);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(first[i].error, "") << first[i].mountpoint;
  for (int i = 3; i < 7; ++i) EXPECT_NE(first[i].error, "") << first[i].mountpoint;
  EXPECT_EQ(gaps.size(), 4u);

  // Cycle 2 reaches the other two; cycle 3 finds all four stuck and calls none of them.
  for (int cycle = 2; cycle <= 3; ++cycle) {
    auto filesystems = make();
    gaps.clear();
    StatAll(statter, "/", filesystems, gaps);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(filesystems[i].error, "") << "cycle " << cycle;
    for (int i = 3; i < 7; ++i) {
      EXPECT_EQ(filesystems[i].error, "statvfs did not answer within 1 s; skipped until it does")
          << "cycle " << cycle << " " << filesystems[i].mountpoint;
    }
  }
  for (const auto& path : hung) EXPECT_EQ(fake.Calls(path), 1) << path;
  EXPECT_EQ(statter.stuck_count(), 4u);
  EXPECT_EQ(statter.thread_count(), 2u + 4u);

  for (const auto& path : hung) fake.Release(path);
  ASSERT_TRUE(testing::WaitFor([&] { return statter.thread_count() == 2; }));
  EXPECT_EQ(statter.stuck_count(), 0u);
}

TEST(FilesystemStatter, CallsOncePerPathWhenMountsShareIt) {
  FakeStatvfs fake;
  FilesystemStatter statter(fake.Function(), kTimeout);
  auto filesystems = Filesystems({"/shared", "/shared"});
  filesystems[1].device = "other";
  std::vector<Gap> gaps;
  StatAll(statter, "/", filesystems, gaps);
  EXPECT_EQ(fake.Calls("/shared"), 1);
  EXPECT_EQ(filesystems[0].size_bytes, 1000u * 4096);
  EXPECT_EQ(filesystems[1].size_bytes, 1000u * 4096);
}

TEST(FilesystemStatter, GivesOneGapPerFailedPath) {
  FakeStatvfs fake;
  fake.Fail("/shared", ENOENT);
  FilesystemStatter statter(fake.Function(), kTimeout);
  auto filesystems = Filesystems({"/shared", "/shared"});
  filesystems[1].device = "other";
  std::vector<Gap> gaps;
  StatAll(statter, "/", filesystems, gaps);
  EXPECT_EQ(filesystems[0].error, "No such file or directory");
  EXPECT_EQ(filesystems[1].error, "No such file or directory");
  EXPECT_EQ(gaps.size(), 1u);
}

TEST(FilesystemStatter, GoesAwayWithoutWaitingForAHungCall) {
  FakeStatvfs fake;
  fake.Hang("/nfs");
  ReleaseAll release(fake, {"/nfs"});
  {
    FilesystemStatter statter(fake.Function(), kTimeout, 1);
    auto filesystems = Filesystems({"/nfs"});
    std::vector<Gap> gaps;
    StatAll(statter, "/", filesystems, gaps);
    EXPECT_EQ(statter.stuck_count(), 1u);
  }
  // Reaching here is the test: the destructor joined only the idle worker.
  EXPECT_EQ(fake.Calls("/nfs"), 1);
}

}  // namespace
}  // namespace uplink::agent::node
