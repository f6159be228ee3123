// Append: reserving, writing and syncing records side by side, rolling segments, the cap and
// failed appends (docs/spool.md, "Appending" and "The cap"; spool_impl.h has the threads).
#include <unistd.h>

#include <algorithm>

#include "spool/log_writer.h"
#include "spool/record.h"
#include "spool/spool_impl.h"

namespace uplink::spool {
namespace {

std::uint64_t PageSize() {
  const long size = ::sysconf(_SC_PAGESIZE);
  return size > 0 ? static_cast<std::uint64_t>(size) : 4096;
}

}  // namespace

Result<std::uint64_t> Spool::Impl::Append(std::string_view payload) {
  if (payload.size() > limits.max_record_bytes) {
    return ResourceExhaustedError(
        "a spool record of " + std::to_string(payload.size()) + " bytes is over the " +
        std::to_string(limits.max_record_bytes) + "-byte limit for one record");
  }
  MutexLock lock(&mu);
  UPLINK_RETURN_IF_ERROR(ReadyToReserve(payload.size()));
  PendingWrite me;
  me.sequence = next_sequence++;
  me.start = reserved_end;
  me.end = framing::Writer::EncodedEnd(me.start, kAppendTimeBytes + payload.size());
  me.appended_at = clock.Now();
  reserved_end = me.end;
  writing.push_back(&me);
  awaiting.push_back(&me);
  writes_returned.SignalAll();  // a sync may be waiting for the appends to come back
  ++appends_in_flight;
  const bool copy_for_tail = TailWants(payload.size());
  mu.Unlock();

  // The framing goes around slices of the payload in one vectored write: the payload is
  // never copied into an encoding buffer.
  char appended_at[kAppendTimeBytes];
  EncodeAppendTime(me.appended_at, appended_at);
  std::string framing;
  std::vector<std::string_view> pieces;
  framing::Writer(me.start).AddRecordPieces(
      me.sequence, std::string_view(appended_at, kAppendTimeBytes), payload, &framing, &pieces);
  Status status = MakeRoom(me.start, me.end);
  if (status.ok()) {
    InPlaceFile* file = nullptr;
    bool overwrites = false;
    {
      MutexLock guard(&mu);
      file = active.get();
      overwrites = me.end <= segments.back().overwritable;
      segments.back().allocated = std::max(segments.back().allocated, me.end);
    }
    status = file->WriteAt(me.start, pieces);
    // Over a recycled file's blocks, the disk can take the record now, while it waits for
    // a sync; in new blocks that would allocate them a record at a time. Its last page is
    // left to the sync: the next record fills it, and writing it now would write it twice.
    // So is a small record: the sync sends it with its neighbours in one request.
    static const std::uint64_t page = PageSize();
    const std::uint64_t from = me.start / page * page, to = me.end / page * page;
    if (status.ok() && overwrites && to >= from + kMinWriteOut) {
      file->StartWriteback(from, to - from);
    }
  }

  if (status.ok() && copy_for_tail) me.tail_copy.emplace(payload);

  mu.Lock();
  WriteReturned(me, status.ok());
  UPLINK_RETURN_IF_ERROR(AwaitDurable(me, status));
  return me.sequence;
}

Status Spool::Impl::ReadyToReserve(size_t payload_bytes) {
  while (true) {
    if (pipeline_failure || write_failed || rolling) {
      pipeline_changed.Wait(mu);
      continue;
    }
    if (!MustRoll(payload_bytes)) return Status::Ok();
    // The file being synced never changes under a sync: a new segment waits for the
    // appends still in flight.
    if (appends_in_flight != 0) {
      pipeline_changed.Wait(mu);
      continue;
    }
    rolling = true;
    const std::uint64_t first = next_sequence;
    mu.Unlock();
    Status rolled = Roll(first);
    mu.Lock();
    rolling = false;
    pipeline_changed.SignalAll();
    if (!rolled.ok()) return rolled.WithContext("appending to the spool");
  }
}

bool Spool::Impl::MustRoll(size_t payload_bytes) const {
  if (!active || roll_before_next_record || reserved_end >= limits.segment_bytes) return true;
  // A record that would run past the blocks of the file this process recycled starts the
  // next segment instead, unless it is the first: files keep their size, so the pool fills
  // the cap exactly and an append never grows past it (which would give a file kept for
  // reuse back to the disk).
  const Segment& newest = segments.back();
  return newest.overwritable > 0 && reserved_end > 0 &&
         framing::Writer::EncodedEnd(reserved_end, kAppendTimeBytes + payload_bytes) >
             newest.overwritable;
}

void Spool::Impl::WriteReturned(PendingWrite& write, bool succeeded) {
  if (!succeeded) {
    // It stays in `writing`: nothing after it becomes durable, and nothing more is reserved
    // until it is repaired, so that no record is written behind it for nothing.
    write_failed = true;
    writes_returned.SignalAll();
    return;
  }
  write.written = true;
  while (!writing.empty() && writing.front()->written) {
    PendingWrite& done = *writing.front();
    written_end = done.end;
    unsynced.push_back(
        UnsyncedRecord{done.sequence, done.end, done.appended_at, std::move(done.tail_copy)});
    writing.pop_front();
  }
  writes_returned.SignalAll();
}

Status Spool::Impl::AwaitDurable(PendingWrite& write, Status written) {
  Status status = std::move(written);
  while (true) {
    const std::uint64_t durable_end = segments.back().size;
    // Durable first: a sync that covered this record counts even when a later one failed.
    if (status.ok() && durable_end >= write.end) break;
    if (pipeline_failure) {
      Status failure = *pipeline_failure;
      LeaveFailed(write);
      return failure.WithContext("appending to the spool (a record before it failed)");
    }
    if (!status.ok() && durable_end >= write.start && !syncing) {
      RepairFailure(status, write.sequence, write.start);  // everything before it is durable
      return status.WithContext("appending to the spool");
    }
    if (status.ok() && written_end >= write.end && !syncing) {
      status = SyncWritten();
      if (!status.ok()) {
        RepairFailure(status, unsynced.front().sequence, segments.back().size);
        return status.WithContext("appending to the spool");
      }
      continue;
    }
    write.changed.Wait(mu);
  }
  std::erase(awaiting, &write);
  --appends_in_flight;
  if (appends_in_flight <= 1) pipeline_changed.SignalAll();  // a roll or a repair may wait
  return Status::Ok();
}

Status Spool::Impl::SyncWritten() {
  syncing = true;
  // The appends in flight when the last sync ended were released by it together and are
  // coming back: waiting for them, at most half as long as that sync took, makes one sync
  // serve them all, where starting at once would leave them to the next (PostgreSQL's
  // commit_delay, scaled to the disk). A lone writer never waits.
  const auto deadline = std::chrono::steady_clock::now() + last_sync_time / 2;
  while (AppendsNotDurable() < last_sync_appends && !write_failed) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    writes_returned.WaitFor(mu, deadline - now);
  }
  // Records reserved by now are being encoded and written: they are waited for (a write's
  // time, not a sync's), so that the sync covers them instead of leaving them to wait for
  // the whole next one.
  const std::uint64_t reserved = reserved_end;
  while (written_end < reserved && !write_failed) writes_returned.Wait(mu);
  const std::uint64_t target = written_end;
  InPlaceFile* file = active.get();
  mu.Unlock();
  const auto started = std::chrono::steady_clock::now();
  Status status = file->Sync();
  const auto ended = std::chrono::steady_clock::now();
  mu.Lock();
  syncing = false;
  last_sync_time = ended - started;
  last_sync_appends = awaiting.size();
  if (!status.ok()) return status;
  Segment& segment = segments.back();
  segment.size = segment.readable_end = target;
  while (!unsynced.empty() && unsynced.front().end <= target) {
    UnsyncedRecord& record = unsynced.front();
    if (last_durable <= state.consumed_through) oldest = record.appended_at;
    last_durable = record.sequence;
    if (record.tail_copy) AdmitToTail(record);
    unsynced.pop_front();
  }
  WakeAwaiting();
  return Status::Ok();
}

size_t Spool::Impl::AppendsNotDurable() const {
  const std::uint64_t durable_end = segments.back().size;
  return static_cast<size_t>(std::count_if(awaiting.begin(), awaiting.end(),
                                           [&](const PendingWrite* write) {
                                             return write->end > durable_end;
                                           }));
}

void Spool::Impl::WakeAwaiting() {
  const std::uint64_t durable_end = segments.back().size;
  for (PendingWrite* write : awaiting) {
    write->changed.Signal();
    if (write->end > durable_end) break;
  }
}

void Spool::Impl::WakeAllAwaiting() {
  for (PendingWrite* write : awaiting) write->changed.Signal();
}

void Spool::Impl::LeaveFailed(PendingWrite& write) {
  std::erase(writing, &write);
  std::erase(awaiting, &write);
  --appends_in_flight;
  pipeline_changed.SignalAll();
}

void Spool::Impl::RepairFailure(const Status& status, std::uint64_t first, std::uint64_t start) {
  pipeline_failure = status;
  WakeAllAwaiting();
  pipeline_changed.SignalAll();
  while (appends_in_flight != 1) pipeline_changed.Wait(mu);
  const std::uint64_t last_reserved = next_sequence - 1;
  const std::string path = SegmentPath(segments.back());
  InPlaceFile* file = active.get();
  mu.Unlock();
  // The cut must be durable before the sequences are reused: otherwise a power loss could
  // bring back records whose Append failed (and which the caller may retry).
  Status cut = fs.Truncate(path, start);
  if (cut.ok()) cut = file->Sync();
  if (!cut.ok()) {
    SpoolLog().Error(
        "could not remove a failed append from the spool; its sequence numbers are skipped",
        {{"dir", dir}, {"file", path}, {"error", cut}});
  }
  mu.Lock();
  writing.clear();
  awaiting.clear();
  unsynced.clear();
  if (cut.ok()) {
    next_sequence = first;
    reserved_end = written_end = start;
    segments.back().allocated = start;  // the cut shortened the file
    segments.back().overwritable = std::min(segments.back().overwritable, start);
    // Start afresh after a failure, so that the records before it can be freed (disk full).
    roll_before_next_record = start > 0;
  } else {
    if (first <= last_reserved) abandoned.emplace_back(first, last_reserved);
    roll_before_next_record = true;
  }
  pipeline_failure.reset();
  write_failed = false;
  --appends_in_flight;
  pipeline_changed.SignalAll();
}

Status Spool::Impl::Roll(std::uint64_t first) {
  if (Status reused = ReuseOldestSegmentAtTheCap(); !reused.ok()) {
    SpoolLog().Warn("could not drop the oldest spool segment to reuse its file; starting a "
                    "new one",
                    {{"dir", dir}, {"error", reused}});
  }
  std::optional<FreeSegment> reused;
  {
    MutexLock guard(&mu);
    if (!free_segments.empty()) {
      reused = free_segments.front();
      free_segments.pop_front();
    }
  }
  Segment segment{.first = first};
  if (reused) {
    segment.recycled = true;
    Status renamed = fs.Rename(PathOf(FreeFileName(reused->name)), SegmentPath(segment));
    if (renamed.ok()) {
      segment.allocated = segment.overwritable = reused->bytes;
    } else {
      segment.recycled = false;
      SpoolLog().Warn("could not reuse a spool file; starting a new one",
                      {{"dir", dir}, {"file", FreeFileName(reused->name)}, {"error", renamed}});
      MutexLock guard(&mu);
      free_segments.push_back(*reused);  // still on disk: still counted
    }
  }
  const std::string path = SegmentPath(segment);
  Result<std::unique_ptr<InPlaceFile>> file = fs.OpenInPlace(path);
  Status status = file.status();
  if (status.ok()) status = fs.SyncDir(dir);
  if (!status.ok()) {
    // Not used until its entry is durable. A leftover file holds no record of its own
    // number or above, so the next Open finds it empty; the next roll takes another
    // number, so that a fresh and a recycled file never share one.
    if (Status removed = fs.Remove(path); !removed.ok()) {
      MutexLock guard(&mu);
      abandoned.emplace_back(first, first);
      next_sequence = std::max(next_sequence, first + 1);
    }
    return status.WithContext("starting a spool segment");
  }
  if (!segment.recycled) Preallocate(**file, segment);
  MutexLock guard(&mu);
  segments.push_back(segment);
  active = std::move(*file);
  reserved_end = written_end = 0;
  roll_before_next_record = false;
  return Status::Ok();
}

void Spool::Impl::Preallocate(InPlaceFile& file, Segment& segment) {
  std::uint64_t room = 0;
  {
    MutexLock guard(&mu);
    room = limits.max_bytes - std::min(limits.max_bytes, TotalBytes());
  }
  const std::uint64_t bytes = std::min(limits.segment_bytes, room);
  // Not every file system can; appending then allocates as it goes.
  if (bytes > 0 && file.Preallocate(bytes).ok()) segment.allocated = bytes;
}

Status Spool::Impl::DiscardFreeSegment() {
  FreeSegment discarded;
  {
    MutexLock guard(&mu);
    if (free_segments.empty()) return Status::Ok();
    discarded = free_segments.front();
    free_segments.pop_front();
  }
  Status status = fs.Remove(PathOf(FreeFileName(discarded.name)));
  if (!status.ok() && status.code() != StatusCode::kNotFound) {
    MutexLock guard(&mu);
    free_segments.push_front(discarded);  // still on disk: still counted
    return status.WithContext("removing a spool file kept for reuse");
  }
  return fs.SyncDir(dir).WithContext("removing a spool file kept for reuse");
}

void Spool::Impl::CancelWriteAhead() {
  MutexLock guard(&mu);
  if (write_ahead_bytes == 0) return;
  if (!write_ahead_cancelled) ++write_aheads_cancelled;
  write_ahead_cancelled = true;
  while (write_ahead_bytes != 0) write_ahead_ended.Wait(mu);
}

std::uint64_t Spool::Impl::BytesAfterWrite(std::uint64_t start, std::uint64_t end) const {
  const Segment& newest = segments.back();
  const std::uint64_t footprint = std::max(newest.size, newest.allocated);
  return TotalBytes() - footprint + std::max(footprint, end);
}

// Enforces the cap before bytes [start, end) of the active segment are written:
// drops whole oldest segments, counting the waiting records they held, persists the cursor
// past them, then removes them. The active segment never needs to go: it is below
// segment_bytes (at most half the cap) or a new one was started, and a record is at most a
// quarter of the cap.
Status Spool::Impl::MakeRoom(std::uint64_t start, std::uint64_t end) {
  {
    MutexLock guard(&mu);
    if (BytesAfterWrite(start, end) <= limits.max_bytes) return Status::Ok();
  }
  MutexLock io(&io_mu);
  while (true) {
    bool has_free = false, writing_ahead = false;
    {
      MutexLock guard(&mu);
      if (BytesAfterWrite(start, end) <= limits.max_bytes) return Status::Ok();
      has_free = !free_segments.empty();
      writing_ahead = write_ahead_bytes != 0;
    }
    // A file being written ahead, then files kept for reuse, go before any waiting record
    // does (if they can be removed).
    if (writing_ahead) {
      CancelWriteAhead();
      continue;
    }
    if (has_free) {
      Status discarded = DiscardFreeSegment();
      if (discarded.ok()) continue;
      SpoolLog().Warn("could not remove a spool file kept for reuse; dropping records instead",
                      {{"dir", dir}, {"error", discarded}});
    }
    std::uint64_t over = 0;
    {
      MutexLock guard(&mu);
      const std::uint64_t total = BytesAfterWrite(start, end);
      if (total <= limits.max_bytes) return Status::Ok();
      over = total - limits.max_bytes;
    }
    UPLINK_ASSIGN_OR_RETURN(const bool dropped, DropOldestSegments(over, /*recycle=*/false));
    if (!dropped) {
      return InternalError("a record of " + std::to_string(end - start) +
                           " bytes does not fit under the spool's cap of " +
                           std::to_string(limits.max_bytes) + " bytes");
    }
  }
}

Result<bool> Spool::Impl::DropOldestSegments(std::uint64_t over, bool recycle) {
  PersistentState next;
  std::vector<std::uint64_t> doomed;
  std::uint64_t consumed_before = 0;
  {
    MutexLock guard(&mu);
    next = state;
    consumed_before = state.consumed_through;
    std::uint64_t freed = 0;
    for (size_t i = 0; i + 1 < segments.size() && freed < over; ++i) {
      const Segment& segment = segments[i];
      const std::uint64_t last = LastSequenceOf(i);
      const std::uint64_t from = std::max(segment.first, next.consumed_through + 1);
      if (last >= from) {
        const std::uint64_t waiting = last - from + 1 - AbandonedWithin(from, last);
        next.losses.dropped.records += waiting;
        next.losses.dropped.bytes +=
            EstimatePayloadBytes(segment.size, last - segment.first + 1, waiting);
      }
      next.consumed_through = std::max(next.consumed_through, last);
      freed += std::max(segment.size, segment.allocated);
      doomed.push_back(segment.first);
    }
  }
  if (doomed.empty()) return false;
  if (next.consumed_through > consumed_before) {
    Status persisted = state_file->Write(next, StateFile::Durability::kSync);
    if (!persisted.ok()) {
      return persisted.WithContext("persisting the spool cursor to drop records at the size cap");
    }
    {
      MutexLock guard(&mu);
      AdoptState(next);
    }
    SpoolLog().Warn("spool full: dropped its oldest records",
                    {{"dir", dir},
                     {"consumed_through", next.consumed_through},
                     {"dropped_records_total", next.losses.dropped.records}});
  }
  UPLINK_RETURN_IF_ERROR(
      RetireSegments(doomed, recycle).WithContext("dropping spool segments at the size cap"));
  RefreshOldest();
  return true;
}

bool Spool::Impl::AtTheCapWithNoFileToReuse() const {
  // With half a segment of room or more, a new file takes it first.
  return reserve_disk && free_segments.empty() && write_ahead_bytes == 0 &&
         TotalBytes() + limits.segment_bytes / 2 > limits.max_bytes;
}

Status Spool::Impl::ReuseOldestSegmentAtTheCap() {
  {
    MutexLock guard(&mu);
    if (!AtTheCapWithNoFileToReuse()) return Status::Ok();
  }
  MutexLock io(&io_mu);
  {
    MutexLock guard(&mu);
    if (!AtTheCapWithNoFileToReuse()) return Status::Ok();
  }
  return DropOldestSegments(1, /*recycle=*/true).status();
}

}  // namespace uplink::spool
