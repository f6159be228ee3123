// The names of a spool directory's files, and what is not one of them.
#include "spool/filename.h"

#include <gtest/gtest.h>

namespace uplink::spool {
namespace {

TEST(SpoolFileNames, RoundTrip) {
  EXPECT_EQ(SegmentFileName(1, false), "00000000000000000001.seg");
  EXPECT_EQ(SegmentFileName(42, true), "00000000000000000042.rseg");
  EXPECT_EQ(FreeFileName(18446744073709551615ull), "18446744073709551615.free");
  auto segment = ParseSegmentFileName(SegmentFileName(123456789, true));
  ASSERT_TRUE(segment.has_value());
  EXPECT_EQ(segment->first, 123456789u);
  EXPECT_TRUE(segment->recycled);
  EXPECT_EQ(ParseFreeFileName(FreeFileName(7)), 7u);
}

TEST(SpoolFileNames, AnythingElseIsNotASpoolFile) {
  for (const char* name :
       {"", "LOCK", "STATE", ".seg", "1.seg", "0000000000000000001.seg", "000000000000000000001.seg",
        "00000000000000000000.seg",   // sequence 0 is never used
        "18446744073709551616.seg",   // overflows 64 bits
        "99999999999999999999.seg", "0000000000000000000a.seg", "-0000000000000000001.seg",
        "00000000000000000001.seg~", "00000000000000000001.seg.tmp", "00000000000000000001.SEG",
        "00000000000000000001.free", "00000000000000000001 seg", "+0000000000000000001.seg"}) {
    EXPECT_FALSE(ParseSegmentFileName(name).has_value()) << name;
  }
  EXPECT_FALSE(ParseFreeFileName("00000000000000000001.seg").has_value());
  EXPECT_FALSE(ParseFreeFileName("00000000000000000000.free").has_value());
  EXPECT_FALSE(ParseFreeFileName(std::string_view("0000000000000000001\0.free", 25)).has_value());
}

TEST(SpoolFileNames, ParentDir) {
  EXPECT_EQ(ParentDir("/var/spool/uplink"), "/var/spool");
  EXPECT_EQ(ParentDir("/spool"), "/");
  EXPECT_EQ(ParentDir("spool"), ".");
  EXPECT_EQ(ParentDir("a/b"), "a");
}

}  // namespace
}  // namespace uplink::spool
