// The rules of an upload (docs/protocol.md, "POST /api/v1/agent/uploads"): which epoch of its
// stream it goes to, which of its records are new, duplicates or lost, and when an upload's
// transaction also does retention. Plain functions over what the store read, so that every
// store accounts alike and the rules are tested without a database.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "console/store/stream_store.h"

namespace uplink::console {

// A stream as the store has it before an upload.
struct StreamPosition {
  std::string spool_id;
  std::int64_t epoch = 0;
  std::int64_t acked_through = 0;  // in `epoch`
  AgentLosses losses;              // of the current spool
};

// Where an upload goes.
struct UploadPlacement {
  bool new_stream = false;
  bool restarted = false;          // a new spool: a new epoch, sequences start again
  std::int64_t epoch = 0;
  std::int64_t acked_through = 0;  // before this upload, in `epoch`
  AgentLosses losses;              // the stream's agent losses once this upload is stored
};

// Whether the upload comes from another spool than the stream's current one; only then does
// PlaceUpload need to know whether the stream had that spool before.
bool SpoolChanged(const std::optional<StreamPosition>& stream, std::string_view spool_id);

// `stream` none: the connection has no such stream yet. `spool_epoch`: the epoch in which the
// stream had `batch.spool_id` before, if it did (looked up when SpoolChanged). A stream goes
// back to an earlier spool never: that is two shippers sharing one stream name, refused with
// Conflict. A changed spool starts the next epoch at acked_through 0 with the agent's losses
// as sent; the same spool keeps the larger of the stored and sent losses (an agent that lost
// its count does not make the console's smaller).
Result<UploadPlacement> PlaceUpload(const std::optional<StreamPosition>& stream,
                                    const UploadBatch& batch,
                                    std::optional<std::int64_t> spool_epoch);

// What the batch's sequences come to in its epoch.
struct SequenceAccount {
  std::vector<size_t> new_records;  // indexes into batch.records, above acked_through
  std::int64_t stored = 0;          // = new_records.size()
  std::int64_t duplicates = 0;      // at or below acked_through: not stored again
  std::int64_t lost = 0;            // after acked_through, up to last_sequence, not sent
  std::int64_t acked_through = 0;   // after this upload: never moves back
};

// Every sequence after `acked_through` up to the batch's last_sequence either arrived now or
// never will: one the agent skipped is counted lost once, here.
SequenceAccount AccountSequences(std::int64_t acked_through, const UploadBatch& batch);

// Whether retention work that runs at most once per `interval` is due at `now`. A clock that
// went back makes it due rather than waiting for the old time to return.
bool MaintenanceDue(std::optional<WallTime> last_run, WallTime now,
                    std::chrono::seconds interval);

}  // namespace uplink::console
