#include "common/cpus.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "common/files.h"
#include "support/process.h"

namespace uplink {
namespace {

TEST(ParseCgroupCpuMax, ReadsAQuotaAsCpusRoundedUp) {
  EXPECT_EQ(ParseCgroupCpuMax("200000 100000\n"), 2);
  EXPECT_EQ(ParseCgroupCpuMax("150000 100000"), 2);
  EXPECT_EQ(ParseCgroupCpuMax("50000 100000\n"), 1);
  EXPECT_EQ(ParseCgroupCpuMax("1 1000000"), 1);
  EXPECT_EQ(ParseCgroupCpuMax("max 100000\n"), std::nullopt) << "no limit";
}

TEST(ParseCgroupCpuMax, RefusesWhatTheKernelDoesNotWrite) {
  const std::vector<std::string> texts = {
      "", "\n", "max", "200000", "200000 ", " 100000", "0 100000", "-1 100000",
      "200000 0", "200000 2000000", "2e5 100000", "200000 100000 7", "200000\t100000",
      "99999999999999999999999 100000", std::string("2000\0 100000", 12)};
  for (const std::string& text : texts) {
    EXPECT_EQ(ParseCgroupCpuMax(text), std::nullopt) << "\"" << text << "\"";
  }
}

TEST(ParseProcSelfCgroup, ReadsTheUnifiedHierarchysLine) {
  EXPECT_EQ(ParseProcSelfCgroup("0::/\n"), "/") << "inside a cgroup namespace";
  EXPECT_EQ(ParseProcSelfCgroup("0::/kubepods.slice/pod1/cri-containerd-2.scope\n"),
            "/kubepods.slice/pod1/cri-containerd-2.scope");
  EXPECT_EQ(ParseProcSelfCgroup("12:cpu,cpuacct:/docker/1\n1:name=systemd:/x\n0::/user.slice"),
            "/user.slice")
      << "a hybrid host lists the v1 hierarchies first";
  EXPECT_EQ(ParseProcSelfCgroup("0::/a b/c\n"), "/a b/c");
}

TEST(ParseProcSelfCgroup, RefusesWhatWouldLeaveTheMount) {
  const std::vector<std::string> texts = {
      "", "\n", "0::", "0::\n", "0::relative/path", "0::/../../outside", "0::/a/../../b",
      "0::/a/./b", "0::/a/..", "12:cpu:/docker/1\n", "1:name=systemd:/x", "00::/x", "0:/x",
      "0::/a\tb", "0::/a\x7f", std::string("0::/a\0b", 7), "0::/" + std::string(5000, 'a')};
  for (const std::string& text : texts) {
    EXPECT_EQ(ParseProcSelfCgroup(text), std::nullopt) << "\"" << text << "\"";
  }
}

TEST(ParseProcSelfCgroup, ReadsACgroupV1ControllersLine) {
  const std::string hybrid =
      "12:cpuacct:/elsewhere\n4:cpu,cpuacct:/kubepods/burstable/pod1/ctr\n1:name=systemd:/x\n"
      "0::/unified\n";
  EXPECT_EQ(ParseProcSelfCgroup(hybrid, "cpu"), "/kubepods/burstable/pod1/ctr");
  EXPECT_EQ(ParseProcSelfCgroup(hybrid, "cpuacct"), "/elsewhere") << "the first that lists it";
  EXPECT_EQ(ParseProcSelfCgroup(hybrid), "/unified");
  EXPECT_EQ(ParseProcSelfCgroup("3:cpuset,cpu:/a:b\n", "cpu"), "/a:b") << "a colon in the path";
  EXPECT_EQ(ParseProcSelfCgroup("0::/only-v2\n", "cpu"), std::nullopt);
  EXPECT_EQ(ParseProcSelfCgroup("4:cpuacct,cpuset:/x\n", "cpu"), std::nullopt);
  EXPECT_EQ(ParseProcSelfCgroup("4:cpu:/../x\n", "cpu"), std::nullopt);
  EXPECT_EQ(ParseProcSelfCgroup("4:cpu:\n", "cpu"), std::nullopt);
}

// A cgroup tree as the kernel mounts it: each level may hold a cpu.max.
class CgroupTree : public ::testing::Test {
 protected:
  void Level(const std::string& path, std::optional<std::string> cpu_max) {
    ASSERT_EQ(mkdir((mount_.path() + path).c_str(), 0700), 0) << path;
    if (cpu_max) {
      ASSERT_TRUE(WriteFileAtomic(mount_.path() + path + "/cpu.max", *cpu_max).ok());
    }
  }
  testing::TempDir mount_;
};

TEST_F(CgroupTree, ThePodsLimitBoundsAContainerWithoutOne) {
  ASSERT_TRUE(WriteFileAtomic(mount_.path() + "/cpu.max", "max 100000\n").ok());
  Level("/kubepods", "max 100000\n");
  Level("/kubepods/pod1", "300000 100000\n");
  Level("/kubepods/pod1/ctr", "max 100000\n");
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/kubepods/pod1/ctr"), 3);
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/kubepods/pod1/ctr/"), 3);
}

TEST_F(CgroupTree, TheTightestLevelWins) {
  Level("/a", "150000 100000\n");
  Level("/a/b", "400000 100000\n");
  Level("/a/b/c", std::nullopt);
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/a/b/c"), 2);
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/a/b"), 2);
}

TEST_F(CgroupTree, InsideANamespaceTheRootIsTheContainer) {
  ASSERT_TRUE(WriteFileAtomic(mount_.path() + "/cpu.max", "100000 100000\n").ok());
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/"), 1);
}

TEST_F(CgroupTree, NoQuotaAnywhereOrNoTreeIsNoLimit) {
  Level("/a", "max 100000\n");
  Level("/a/b", "garbage\n");
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/a/b"), std::nullopt);
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/gone/too"), std::nullopt);
  EXPECT_EQ(CgroupCpuLimit(mount_.path() + "/missing", "/"), std::nullopt);
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "no-leading-slash"), std::nullopt);
}

TEST_F(CgroupTree, CgroupV1SplitsTheQuotaInTwoFiles) {
  auto quota = [&](const std::string& path, const std::string& quota_us) {
    ASSERT_TRUE(WriteFileAtomic(mount_.path() + path + "/cpu.cfs_quota_us", quota_us).ok());
    ASSERT_TRUE(WriteFileAtomic(mount_.path() + path + "/cpu.cfs_period_us", "100000\n").ok());
  };
  quota("", "-1\n");
  Level("/kubepods", std::nullopt);
  quota("/kubepods", "-1\n");
  Level("/kubepods/pod1", std::nullopt);
  quota("/kubepods/pod1", "250000\n");
  Level("/kubepods/pod1/ctr", std::nullopt);
  quota("/kubepods/pod1/ctr", "-1\n");
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/kubepods/pod1/ctr", CgroupVersion::kV1), 3);
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/kubepods", CgroupVersion::kV1), std::nullopt);
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/kubepods/pod1/ctr"), std::nullopt)
      << "v2 reads cpu.max only";
  Level("/odd", std::nullopt);
  quota("/odd", "250000 100000\n");
  EXPECT_EQ(CgroupCpuLimit(mount_.path(), "/odd", CgroupVersion::kV1), std::nullopt);
}

TEST(UsableCpus, IsWithinThisProcesssAffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cpus = UsableCpus();
  EXPECT_GE(cpus, 1);
  EXPECT_LE(cpus, CPU_COUNT(&set));
}

}  // namespace
}  // namespace uplink
