#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <thread>

namespace uplink {
namespace {

TEST(ThreadName, NamesTheCallingThreadOnly) {
  const std::string before = ThisThreadName();
  std::string inside;
  std::thread named([&] {
    NameThisThread("store-writer");
    inside = ThisThreadName();
  });
  named.join();
  EXPECT_EQ(inside, "store-writer");
  EXPECT_EQ(ThisThreadName(), before);
}

TEST(ThreadName, ALongNameIsCutToWhatTheKernelKeeps) {
  std::string inside;
  std::thread named([&] {
    NameThisThread("a-name-longer-than-fifteen-bytes");
    inside = ThisThreadName();
  });
  named.join();
  EXPECT_EQ(inside, "a-name-longer-t");
}

}  // namespace
}  // namespace uplink
