#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace uplink {
namespace {

// The name a new thread has after naming itself `name`.
std::string NamedInANewThread(const std::string& name) {
  std::string kept;
  std::thread named([&] {
    NameThisThread(name);
    kept = ThisThreadName();
  });
  named.join();
  return kept;
}

TEST(ThreadName, NamesTheCallingThreadOnly) {
  const std::string before = ThisThreadName();
  EXPECT_EQ(NamedInANewThread("store-writer"), "store-writer");
  EXPECT_EQ(ThisThreadName(), before);
}

TEST(ThreadName, ALongNameIsCutToWhatTheKernelKeeps) {
  EXPECT_EQ(NamedInANewThread("a-name-longer-than-fifteen-bytes"), "a-name-longer-t");
}

}  // namespace
}  // namespace uplink
