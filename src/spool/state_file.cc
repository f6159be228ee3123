#include "spool/state_file.h"

#include <cstring>

#include "common/crc32c.h"
#include "spool/coding.h"

namespace uplink::spool {
namespace {

constexpr size_t kSlotSize = 128;
constexpr char kStateMagic[8] = {'U', 'P', 'L', 'S', 'P', 'O', 'O', 'L'};
constexpr std::uint32_t kStateVersion = 1;
constexpr size_t kSlotCrcOffset = kSlotSize - 4;

}  // namespace

// magic (8) | version (4) | zero (4) | generation (8) | spool id (16) | consumed_through (8)
// | dropped, corrupt, rejected as records and bytes (6 x 8) | zero | masked CRC32C (4)
std::string EncodeStateSlot(const PersistentState& state) {
  std::string slot(kSlotSize, '\0');
  char* p = slot.data();
  std::memcpy(p, kStateMagic, sizeof kStateMagic);
  PutFixed32(p + 8, kStateVersion);
  PutFixed64(p + 16, state.generation);
  std::memcpy(p + 24, state.spool_id.data(), kSpoolIdBytes);
  PutFixed64(p + 40, state.consumed_through);
  const LossCount counts[] = {state.losses.dropped, state.losses.corrupt, state.losses.rejected};
  for (size_t i = 0; i < 3; ++i) {
    PutFixed64(p + 48 + 16 * i, counts[i].records);
    PutFixed64(p + 56 + 16 * i, counts[i].bytes);
  }
  PutFixed32(p + kSlotCrcOffset, crc32c::Mask(crc32c::Value(std::string_view(p, kSlotCrcOffset))));
  return slot;
}

std::optional<PersistentState> DecodeStateSlot(std::string_view slot) {
  if (slot.size() < kSlotSize) return std::nullopt;
  const char* p = slot.data();
  if (crc32c::Unmask(GetFixed32(p + kSlotCrcOffset)) !=
      crc32c::Value(std::string_view(p, kSlotCrcOffset))) {
    return std::nullopt;
  }
  if (std::memcmp(p, kStateMagic, sizeof kStateMagic) != 0 || GetFixed32(p + 8) != kStateVersion) {
    return std::nullopt;
  }
  PersistentState state;
  state.generation = GetFixed64(p + 16);
  state.spool_id.assign(p + 24, kSpoolIdBytes);
  state.consumed_through = GetFixed64(p + 40);
  LossCount* counts[] = {&state.losses.dropped, &state.losses.corrupt, &state.losses.rejected};
  for (size_t i = 0; i < 3; ++i) {
    counts[i]->records = GetFixed64(p + 48 + 16 * i);
    counts[i]->bytes = GetFixed64(p + 56 + 16 * i);
  }
  return state;
}

Result<StateFile::Loaded> StateFile::Load() {
  char buffer[2 * kSlotSize];
  Result<std::string_view> stored = file_->Read(0, sizeof buffer, buffer);
  if (!stored.ok()) return stored.status();
  Loaded loaded;
  loaded.stored_bytes = stored->size();
  for (size_t slot = 0; slot < 2 && stored->size() >= (slot + 1) * kSlotSize; ++slot) {
    auto decoded = DecodeStateSlot(stored->substr(slot * kSlotSize, kSlotSize));
    if (decoded && (!loaded.state || decoded->generation > loaded.state->generation)) {
      loaded.state = decoded;
      synced_slot_ = slot;
    }
  }
  if (loaded.state) {
    UPLINK_RETURN_IF_ERROR(file_->Sync());
    generation_ = loaded.state->generation;
  }
  return loaded;
}

Status StateFile::Create(const PersistentState& state) {
  const std::string slot = EncodeStateSlot(state);
  UPLINK_RETURN_IF_ERROR(file_->WriteAt(0, slot + slot));
  UPLINK_RETURN_IF_ERROR(file_->Sync());
  generation_ = state.generation;
  synced_slot_ = 0;
  unsynced_ = false;
  return Status::Ok();
}

Status StateFile::Write(PersistentState& next, Durability durability) {
  next.generation = generation_ + 1;
  const size_t slot = 1 - synced_slot_;
  UPLINK_RETURN_IF_ERROR(file_->WriteAt(slot * kSlotSize, EncodeStateSlot(next)));
  if (durability == Durability::kLazy) {
    generation_ = next.generation;
    unsynced_ = true;
    return Status::Ok();
  }
  UPLINK_RETURN_IF_ERROR(file_->Sync());
  generation_ = next.generation;
  synced_slot_ = slot;
  unsynced_ = false;
  return Status::Ok();
}

Status StateFile::Sync() {
  if (!unsynced_) return Status::Ok();
  UPLINK_RETURN_IF_ERROR(file_->Sync());
  synced_slot_ = 1 - synced_slot_;
  unsynced_ = false;
  return Status::Ok();
}

}  // namespace uplink::spool
