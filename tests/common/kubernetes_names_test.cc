#include "common/kubernetes_names.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace uplink {
namespace {

TEST(DnsSubdomain, LowerCaseLabelsJoinedByDots) {
  for (const std::string& good :
       std::vector<std::string>{"nvidia", "nvidia.com", "a-b.c-d", "0", std::string(253, 'a')}) {
    EXPECT_TRUE(IsDnsSubdomain(good)) << good;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "Nvidia", "nvidia_gpu", "-a", "a-", "a..b", ".a", "a.", "a b",
                                std::string(254, 'a')}) {
    EXPECT_FALSE(IsDnsSubdomain(bad)) << bad;
  }
}

TEST(DnsSubdomain, BoundsOnlyTheWholeNameAsTheApiServerDoes) {
  // apimachinery's IsDNS1123Subdomain limits the name to 253 characters, not each part to 63.
  EXPECT_TRUE(IsDnsSubdomain(std::string(64, 'a') + ".example.com"));
  EXPECT_TRUE(IsDnsSubdomain(std::string(125, 'a') + "." + std::string(127, 'b')));
  EXPECT_FALSE(IsDnsSubdomain(std::string(126, 'a') + "." + std::string(127, 'b')));
}

TEST(DnsSubdomain, RefusesHostileInput) {
  for (const std::string& bad : std::vector<std::string>{
           std::string("a\0b", 3), "a/b", "../etc", "a.-b", "a-.b", "a\nb", "é", "a.b.", "xn--\xff",
           std::string(100000, 'a'), std::string(1000, '.'), "a;b", "a%2eb"}) {
    EXPECT_FALSE(IsDnsSubdomain(bad)) << bad.substr(0, 40);
  }
}

TEST(DnsLabel, OneLowerCasePartOfAtMost63) {
  for (const std::string& good :
       std::vector<std::string>{"0", "a", "kube-system", "gpu-node-0001", std::string(63, 'a')}) {
    EXPECT_TRUE(IsDnsLabel(good)) << good;
  }
  for (const std::string& bad : std::vector<std::string>{
           "", std::string(64, 'a'), "a.b", "-a", "a-", "A", "a_b", "a b", std::string("a\0", 2),
           "a\xc2\xa0"
           "b",
           "*", "..", std::string(100000, 'a')}) {
    EXPECT_FALSE(IsDnsLabel(bad)) << bad.substr(0, 40);
  }
}

}  // namespace
}  // namespace uplink
