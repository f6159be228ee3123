// STATE: the spool's id, its cursor and its loss counters, in two 128-byte slots rewritten in
// place, so that writing it never needs free space (docs/spool.md has the layout).
//
// A write goes to the slot that does not hold the last synced state, so that state stays
// intact until the new one is synced; the valid slot with the higher generation wins. A lazy
// write survives a crash of the process (it is in the page cache) but a power loss may take
// it: the cursor then goes back to the last synced state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "spool/spool.h"
#include "spool/file_system.h"

namespace uplink::spool {

constexpr size_t kSpoolIdBytes = 16;

struct PersistentState {
  std::uint64_t generation = 0;
  std::string spool_id;  // kSpoolIdBytes raw bytes
  std::uint64_t consumed_through = 0;
  SpoolLosses losses;
};

// One slot's bytes, and back; nullopt for a slot that is damaged, torn or of another version.
std::string EncodeStateSlot(const PersistentState& state);
std::optional<PersistentState> DecodeStateSlot(std::string_view slot);

class StateFile {
 public:
  enum class Durability { kLazy, kSync };

  explicit StateFile(std::unique_ptr<InPlaceFile> file) : file_(std::move(file)) {}

  struct Loaded {
    std::optional<PersistentState> state;  // none: no valid slot
    size_t stored_bytes = 0;               // what the file held
  };
  // Reads both slots and takes the newer valid one, synced first: the process that wrote it
  // may have crashed before syncing it, and segments are retired on its word.
  Result<Loaded> Load();

  // Writes `state` into both slots and syncs them: the only write that needs free space.
  Status Create(const PersistentState& state);

  // Writes `next`, as the next generation, into the slot that does not hold the last synced
  // state; with kSync makes it the synced one.
  Status Write(PersistentState& next, Durability durability);

  // Makes a lazily written state durable (nothing to do when there is none).
  Status Sync();

 private:
  std::unique_ptr<InPlaceFile> file_;
  std::uint64_t generation_ = 0;  // of the last state written
  size_t synced_slot_ = 0;        // the slot holding the last synced state
  bool unsynced_ = false;         // the other slot holds a newer state, not yet synced
};

}  // namespace uplink::spool
