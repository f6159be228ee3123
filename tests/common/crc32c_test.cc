#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace uplink::crc32c {
namespace {

std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// RFC 3720, appendix B.4.
TEST(Crc32c, MatchesTheRfc3720Vectors) {
  EXPECT_EQ(Value(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(Value(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Value(ascending), 0x46dd794eu);
  EXPECT_EQ(Value(descending), 0x113fdb5cu);
  const std::string iscsi_read =
      Bytes({0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
             0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
             0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
             0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
  EXPECT_EQ(Value(iscsi_read), 0xd9963a56u);
  EXPECT_EQ(Value("123456789"), 0xe3069283u);
  EXPECT_EQ(Value(""), 0u);
}

TEST(Crc32c, ExtendEqualsTheValueOfTheConcatenation) {
  EXPECT_EQ(Value("hello world"), Extend(Value("hello "), "world"));
  std::string data(1000, 'x');
  for (size_t split = 0; split <= data.size(); split += 37) {
    EXPECT_EQ(Extend(Value(data.substr(0, split)), data.substr(split)), Value(data));
  }
}

TEST(Crc32c, DiffersForDifferentData) {
  EXPECT_NE(Value("a"), Value("foo"));
  EXPECT_NE(Value("foo"), Value("fop"));
}

TEST(Crc32c, MaskIsNotTheIdentityAndUnmaskUndoesIt) {
  const std::uint32_t crc = Value("foo");
  EXPECT_NE(Mask(crc), crc);
  EXPECT_NE(Mask(Mask(crc)), crc);
  EXPECT_EQ(Unmask(Mask(crc)), crc);
  EXPECT_EQ(Unmask(Unmask(Mask(Mask(crc)))), crc);
}

TEST(Crc32c, UsesTheCrcInstructionWhereTheCpuHasIt) {
#if defined(__x86_64__)
  EXPECT_EQ(HardwareAvailable(), static_cast<bool>(__builtin_cpu_supports("sse4.2")));
#else
  EXPECT_FALSE(HardwareAvailable());
#endif
}

// Every length and alignment up to a few words, then long random buffers: the hardware and
// table paths split the input differently (alignment head, 8-byte words, tail).
TEST(Crc32c, HardwareAndPortableAgreeOnRandomData) {
  std::mt19937_64 random(20261130);
  std::string buffer(70000, '\0');
  for (char& c : buffer) c = static_cast<char>(random());
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t length = 0; length < 80; ++length) {
      std::string_view piece(buffer.data() + offset, length);
      const std::uint32_t seed = static_cast<std::uint32_t>(random());
      ASSERT_EQ(ExtendPortable(seed, piece), Extend(seed, piece)) << offset << " " << length;
      if (HardwareAvailable()) {
        ASSERT_EQ(ExtendPortable(seed, piece), ExtendHardware(seed, piece))
            << offset << " " << length;
      }
    }
  }
  // Around the hardware path's three interleaved 1 KiB stretches, with a seed.
  for (size_t length : {3071, 3072, 3073, 6144 + 7, 32753, 65589}) {
    std::string_view piece(buffer.data() + 3, length);
    const std::uint32_t seed = static_cast<std::uint32_t>(random());
    ASSERT_EQ(ExtendPortable(seed, piece), Extend(seed, piece)) << length;
  }
  for (int round = 0; round < 50; ++round) {
    size_t offset = random() % 64;
    size_t length = random() % (buffer.size() - offset);
    std::string_view piece(buffer.data() + offset, length);
    const std::uint32_t expected = ExtendPortable(0, piece);
    EXPECT_EQ(Value(piece), expected);
    if (HardwareAvailable()) {
      EXPECT_EQ(ExtendHardware(0, piece), expected);
    }
  }
}

}  // namespace
}  // namespace uplink::crc32c
