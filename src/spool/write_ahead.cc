// Files written ahead of need (docs/spool.md, "Holding the cap on disk"): with reserve_disk,
// idle time fills the spool's cap with files of zeroes, so that every segment a backlog
// starts overwrites blocks that exist, as in steady state, instead of allocating new ones.
#include <algorithm>
#include <string>

#include "spool/spool_impl.h"

namespace uplink::spool {

Result<bool> Spool::Impl::WriteAhead() {
  std::uint64_t number = 0;
  {
    MutexLock guard(&mu);
    // Not while an append or a roll is under way: each checks the room, then takes it
    // (a record's bytes, a new segment's preallocation) in a later critical section.
    if (!reserve_disk || write_ahead_bytes != 0 || appends_in_flight != 0 || rolling ||
        TotalBytes() + limits.segment_bytes > limits.max_bytes) {
      return false;
    }
    // The next number no kept file has (one left by a failed removal may).
    auto after = [](std::uint64_t n) { return n == UINT64_MAX ? kFirstWriteAheadNumber : n + 1; };
    number = next_write_ahead_number;
    for (size_t i = 0; i < free_segments.size();) {
      if (free_segments[i].name != number) {
        ++i;
        continue;
      }
      number = after(number);
      i = 0;
    }
    next_write_ahead_number = after(number);
    write_ahead_bytes = limits.segment_bytes;
    write_ahead_cancelled = false;
  }
  const std::string path = PathOf(FreeFileName(number));
  Result<std::unique_ptr<InPlaceFile>> file = fs.OpenInPlace(path);
  Status status = file.status();
  if (status.ok()) status = WriteZeroes(**file, limits.segment_bytes);
  bool cancelled = false;
  {
    MutexLock guard(&mu);
    cancelled = write_ahead_cancelled;
  }
  if (status.ok() && !cancelled) {
    // Its directory entry is made durable by the next roll's sync; lost before that, the
    // file was only spare.
    MutexLock guard(&mu);
    free_segments.push_back(FreeSegment{number, limits.segment_bytes});
    write_ahead_bytes = 0;
    write_ahead_ended.SignalAll();
    return true;
  }
  // Gone from the disk before the cap stops counting it.
  if (file.ok()) file->reset();
  Status removed = fs.Remove(path);
  const bool still_there = !removed.ok() && removed.code() != StatusCode::kNotFound;
  if (still_there) {
    SpoolLog().Warn("could not remove a spool file being written ahead; keeping it for reuse",
                    {{"dir", dir}, {"file", FreeFileName(number)}, {"error", removed}});
  }
  MutexLock guard(&mu);
  // Still on disk: still counted (at most this much), and removed first when room is needed.
  if (still_there) free_segments.push_front(FreeSegment{number, limits.segment_bytes});
  write_ahead_bytes = 0;
  write_ahead_ended.SignalAll();
  if (!status.ok()) return status.WithContext("writing a spool file ahead of need");
  return true;
}

Status Spool::Impl::WriteZeroes(InPlaceFile& file, std::uint64_t bytes) {
  static const std::string zeroes(kWriteAheadChunk, '\0');
  for (std::uint64_t at = 0; at < bytes; at += kWriteAheadChunk) {
    {
      MutexLock guard(&mu);
      if (write_ahead_cancelled) return Status::Ok();
    }
    const std::uint64_t n = std::min(kWriteAheadChunk, bytes - at);
    UPLINK_RETURN_IF_ERROR(file.WriteAt(at, std::string_view(zeroes).substr(0, n)));
    UPLINK_RETURN_IF_ERROR(file.Sync());
  }
  return Status::Ok();
}

}  // namespace uplink::spool
