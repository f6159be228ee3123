// STATE's slots: what a slot holds, and that a damaged or foreign slot is never taken.
#include "spool/state_file.h"

#include <gtest/gtest.h>

#include <random>

namespace uplink::spool {
namespace {

PersistentState Sample() {
  PersistentState state;
  state.generation = 0x0102030405060708ull;
  state.spool_id = std::string("0123456789abcdef");
  state.consumed_through = 987654321;
  state.losses.dropped = {1, 2};
  state.losses.corrupt = {3, 4};
  state.losses.rejected = {5, 0xffffffffffffffffull};
  return state;
}

TEST(StateSlot, RoundTripsEveryField) {
  const std::string slot = EncodeStateSlot(Sample());
  ASSERT_EQ(slot.size(), 128u);
  EXPECT_EQ(slot.substr(0, 8), "UPLSPOOL");
  auto decoded = DecodeStateSlot(slot);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->generation, Sample().generation);
  EXPECT_EQ(decoded->spool_id, Sample().spool_id);
  EXPECT_EQ(decoded->consumed_through, Sample().consumed_through);
  EXPECT_EQ(decoded->losses.dropped.bytes, 2u);
  EXPECT_EQ(decoded->losses.corrupt.records, 3u);
  EXPECT_EQ(decoded->losses.rejected.bytes, 0xffffffffffffffffull);
}

TEST(StateSlot, AnyFlippedBitOrShortSlotIsRefused) {
  const std::string slot = EncodeStateSlot(Sample());
  for (size_t byte = 0; byte < slot.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = slot;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      EXPECT_FALSE(DecodeStateSlot(damaged).has_value()) << byte << ":" << bit;
    }
  }
  EXPECT_FALSE(DecodeStateSlot(slot.substr(0, 127)).has_value());
  EXPECT_FALSE(DecodeStateSlot("").has_value());
  EXPECT_FALSE(DecodeStateSlot(std::string(128, '\0')).has_value());
  std::mt19937 random(7);
  for (int i = 0; i < 1000; ++i) {
    std::string noise(128, '\0');
    for (char& c : noise) c = static_cast<char>(random());
    EXPECT_FALSE(DecodeStateSlot(noise).has_value());
  }
}

}  // namespace
}  // namespace uplink::spool
