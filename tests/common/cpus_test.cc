#include "common/cpus.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <string>
#include <vector>

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
