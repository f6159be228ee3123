#include "console/store/rules/upload_rules.h"

#include <algorithm>

namespace uplink::console {
namespace {

LossCount AtLeast(LossCount stored, LossCount sent) {
  return {std::max(stored.records, sent.records), std::max(stored.bytes, sent.bytes)};
}

}  // namespace

bool SpoolChanged(const std::optional<StreamPosition>& stream, std::string_view spool_id) {
  return stream && stream->spool_id != spool_id;
}

Result<UploadPlacement> PlaceUpload(const std::optional<StreamPosition>& stream,
                                    const UploadBatch& batch,
                                    std::optional<std::int64_t> spool_epoch) {
  UploadPlacement placement;
  if (!stream) {
    placement.new_stream = true;
    placement.losses = batch.losses;
    return placement;
  }
  if (SpoolChanged(stream, batch.spool_id)) {
    if (spool_epoch) {
      return ConflictError(
          "spool " + batch.spool_id + " was replaced on stream " + batch.stream + " by spool " +
          stream->spool_id + " (epoch " + std::to_string(stream->epoch) +
          "); two shippers may share this stream: give each its own --stream, or remove "
          "this spool directory");
    }
    // The agent's spool was recreated: its sequences start again, so its records go to a new
    // epoch and nothing of the old one is overwritten.
    placement.restarted = true;
    placement.epoch = stream->epoch + 1;
    placement.losses = batch.losses;
    return placement;
  }
  placement.epoch = stream->epoch;
  placement.acked_through = stream->acked_through;
  placement.losses = {AtLeast(stream->losses.dropped, batch.losses.dropped),
                      AtLeast(stream->losses.corrupt, batch.losses.corrupt),
                      AtLeast(stream->losses.rejected, batch.losses.rejected)};
  return placement;
}

SequenceAccount AccountSequences(std::int64_t acked_through, const UploadBatch& batch) {
  SequenceAccount account;
  for (size_t i = 0; i < batch.records.size(); ++i) {
    if (batch.records[i].sequence <= acked_through) {
      ++account.duplicates;
    } else {
      account.new_records.push_back(i);
    }
  }
  account.stored = static_cast<std::int64_t>(account.new_records.size());
  if (batch.last_sequence > acked_through) {
    account.lost = batch.last_sequence - acked_through - account.stored;
    account.acked_through = batch.last_sequence;
  } else {
    account.acked_through = acked_through;
  }
  return account;
}

bool MaintenanceDue(std::optional<WallTime> last_run, WallTime now,
                    std::chrono::seconds interval) {
  return !last_run || now < *last_run || now - *last_run >= interval;
}

}  // namespace uplink::console
