// Append: group commit, the write pipeline, rolling segments, the cap and failed groups
// (docs/spool.md, "Appending: group commit" and "The cap"; spool_impl.h has the threads).
#include <algorithm>

#include "spool/log_writer.h"
#include "spool/record.h"
#include "spool/spool_impl.h"

namespace uplink::spool {

Result<std::uint64_t> Spool::Impl::Append(std::string_view payload) {
  if (payload.size() > limits.max_record_bytes) {
    return ResourceExhaustedError(
        "a spool record of " + std::to_string(payload.size()) + " bytes is over the " +
        std::to_string(limits.max_record_bytes) + "-byte limit for one record");
  }
  PendingAppend me;
  me.payload = payload;
  MutexLock lock(&mu);
  queue.push_back(&me);
  if (queue.size() > 1) queue_grew.Signal();
  while (!me.done && queue.front() != &me) me.wakeup.Wait(mu);
  if (me.done) {
    if (!me.status.ok()) return me.status;
    return me.sequence;
  }
  // The leader. The members of the last group were released together and are coming
  // back: waiting a moment for them to queue (PostgreSQL's commit_delay) makes one sync
  // serve them all, where taking the queue at once would split them over two.
  if (queue.size() < last_group_size) {
    const auto deadline = std::chrono::steady_clock::now() + kGroupGather;
    while (queue.size() < last_group_size) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      queue_grew.WaitFor(mu, deadline - now);
    }
  }
  // Everything queued behind it, up to the group limit, goes in one write.
  // Framing counts too: a queue of empty records must not make a group larger than the cap.
  std::vector<PendingAppend*> group;
  std::uint64_t group_bytes = 0;
  for (PendingAppend* waiting : queue) {
    const std::uint64_t bytes = waiting->payload.size() + kRecordOverhead;
    if (!group.empty() && group_bytes + bytes > limits.group_bytes) break;
    group.push_back(waiting);
    group_bytes += bytes;
  }
  last_group_size = group.size();
  Status status = WriteGroup(group);
  for (PendingAppend* member : group) {
    if (member == &me) continue;
    member->status = status;
    member->done = true;
    member->wakeup.Signal();
  }
  if (!status.ok()) return status;
  return me.sequence;
}

void Spool::Impl::EncodeGroup(const std::vector<PendingAppend*>& group, std::uint64_t first,
                              WallTime now, std::uint64_t offset) {
  group_buffer.clear();
  framing::Writer writer(offset);
  char time[kAppendTimeBytes];
  EncodeAppendTime(now, time);
  for (size_t i = 0; i < group.size(); ++i) {
    record_buffer.assign(time, sizeof time);
    record_buffer.append(group[i]->payload);
    writer.AddRecord(first + i, record_buffer, &group_buffer);
  }
}

void Spool::Impl::PassLeadership(size_t members) {
  for (size_t i = 0; i < members; ++i) queue.pop_front();
  if (!queue.empty()) queue.front()->wakeup.Signal();
}

bool Spool::Impl::MustRoll() const {
  return !active || roll_before_next_group || written_end >= limits.segment_bytes;
}

// Writing and syncing overlap: the leader writes its group and hands the queue on, then
// waits until a sync covers its bytes. When no sync is under way, a waiting group starts one
// that covers everything written so far, so one sync makes several groups durable at once,
// while the next groups are encoded and written behind it (PostgreSQL flushes its WAL "up
// to" a position the same way). When a write or a sync fails, every group not yet durable
// fails; the first failed group cuts the segment back to the durable end once the others are
// out (spool_impl.h). Passes the leadership on before it returns.
Status Spool::Impl::WriteGroup(const std::vector<PendingAppend*>& group) {
  // A new segment, or recovering from a failure, waits for the groups still in flight.
  while (pipeline_failure || (groups_in_flight != 0 && MustRoll())) pipeline_changed.Wait(mu);
  const WallTime now = clock.Now();
  if (MustRoll()) {
    const std::uint64_t first = next_sequence;
    mu.Unlock();
    Status rolled = Roll(first);
    mu.Lock();
    if (!rolled.ok()) {
      PassLeadership(group.size());
      return rolled.WithContext("appending to the spool");
    }
  }
  // Reserved now, so that a failure of a group before this one sees it in flight.
  const std::uint64_t first = next_sequence;
  const std::uint64_t start = written_end;
  ++groups_in_flight;
  next_sequence = first + group.size();
  mu.Unlock();

  EncodeGroup(group, first, now, start);
  const std::uint64_t end = start + group_buffer.size();
  Status status = MakeRoom(start);
  if (status.ok()) {
    InPlaceFile* file = nullptr;
    {
      MutexLock guard(&mu);
      file = active.get();
      written_end = end;
      segments.back().allocated = std::max(segments.back().allocated, end);
    }
    status = file->WriteAt(start, group_buffer);
  }
  if (group_buffer.capacity() > 2 * kMaxGroupBytes) {
    // A record near the limit (16 MiB by default) must not pin that much memory for good.
    std::string().swap(group_buffer);
    std::string().swap(record_buffer);
  }
  mu.Lock();
  // A group that failed to write keeps the queue until it is repaired, so that no group
  // is written behind it for nothing.
  const bool leading = !status.ok();
  if (status.ok()) {
    unsynced.push_back(UnsyncedGroup{first, first + group.size() - 1, end, now});
    PassLeadership(group.size());
  }
  while (true) {
    const std::uint64_t durable_end = segments.back().size;
    // Durable first: a sync that covered this group counts even when a later group failed.
    if (status.ok() && durable_end >= end) break;
    if (pipeline_failure) {
      Status failure = *pipeline_failure;
      --groups_in_flight;
      pipeline_changed.SignalAll();
      if (leading) PassLeadership(group.size());
      return failure.WithContext("appending to the spool (a group before it failed)");
    }
    if (!status.ok() && durable_end >= start && !syncing) {
      RepairFailedGroups(status, first, start);  // everything before it is durable
      PassLeadership(group.size());
      return status.WithContext("appending to the spool");
    }
    if (status.ok() && !syncing) {
      status = SyncWrittenGroups();
      if (!status.ok()) {
        RepairFailedGroups(status, unsynced.front().first, segments.back().size);
        return status.WithContext("appending to the spool");
      }
      continue;
    }
    pipeline_changed.Wait(mu);
  }
  for (size_t i = 0; i < group.size(); ++i) group[i]->sequence = first + i;
  --groups_in_flight;
  pipeline_changed.SignalAll();  // a roll or a repair may be waiting for the count
  return Status::Ok();
}

Status Spool::Impl::SyncWrittenGroups() {
  const std::uint64_t target = unsynced.back().end;
  InPlaceFile* file = active.get();
  syncing = true;
  mu.Unlock();
  Status status = file->Sync();
  mu.Lock();
  syncing = false;
  if (!status.ok()) return status;
  Segment& segment = segments.back();
  segment.size = segment.readable_end = target;
  while (!unsynced.empty() && unsynced.front().end <= target) {
    if (last_durable <= state.consumed_through) oldest = unsynced.front().appended_at;
    last_durable = unsynced.front().last;
    unsynced.pop_front();
  }
  pipeline_changed.SignalAll();
  return Status::Ok();
}

// The first failed group, or the group whose sync failed: once every other group in flight
// has failed out, cuts the segment back to `start` (the durable end) and decides whether
// the failed sequences, from `first`, may be used again.
void Spool::Impl::RepairFailedGroups(const Status& status, std::uint64_t first,
                                     std::uint64_t start) {
  pipeline_failure = status;
  pipeline_changed.SignalAll();
  while (groups_in_flight != 1) pipeline_changed.Wait(mu);
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
  unsynced.clear();
  if (cut.ok()) {
    next_sequence = first;
    written_end = start;
    segments.back().allocated = start;  // the cut shortened the file
    // Start afresh after a failure, so that the records before it can be freed (disk full).
    roll_before_next_group = start > 0;
  } else {
    if (first <= last_reserved) abandoned.emplace_back(first, last_reserved);
    roll_before_next_group = true;
  }
  pipeline_failure.reset();
  --groups_in_flight;
  pipeline_changed.SignalAll();
}

Status Spool::Impl::Roll(std::uint64_t first) {
  std::optional<FreeSegment> reused;
  {
    MutexLock guard(&mu);
    if (!free_segments.empty()) {
      reused = free_segments.front();
      free_segments.pop_front();
    }
  }
  Segment segment{first, 0, 0, 0, false};
  if (reused) {
    segment.recycled = true;
    Status renamed = fs.Rename(PathOf(FreeFileName(reused->name)), SegmentPath(segment));
    if (renamed.ok()) {
      segment.allocated = reused->bytes;
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
  MutexLock guard(&mu);
  segments.push_back(segment);
  active = std::move(*file);
  written_end = 0;
  roll_before_next_group = false;
  return Status::Ok();
}

Status Spool::Impl::DiscardFreeSegments() {
  std::deque<FreeSegment> discarded;
  {
    MutexLock guard(&mu);
    discarded.swap(free_segments);
  }
  Status result;
  for (const FreeSegment& free : discarded) {
    Status status = fs.Remove(PathOf(FreeFileName(free.name)));
    if (status.ok() || status.code() == StatusCode::kNotFound) continue;
    if (result.ok()) result = status;
    MutexLock guard(&mu);
    free_segments.push_back(free);  // still on disk: still counted
  }
  if (!discarded.empty()) {
    Status synced = fs.SyncDir(dir);
    if (result.ok()) result = synced;
  }
  return result.WithContext("removing spool files kept for reuse");
}

std::uint64_t Spool::Impl::BytesAfterGroup(std::uint64_t start) const {
  const Segment& newest = segments.back();
  const std::uint64_t footprint = std::max(newest.size, newest.allocated);
  return TotalBytes() - footprint + std::max(footprint, start + group_buffer.size());
}

// Enforces the cap before the encoded group is written at `start` of the active segment:
// drops whole oldest segments, counting the waiting records they held, persists the cursor
// past them, then removes them. The active segment never needs to go: it is below
// segment_bytes (at most half the cap) or a new one was started, and a group is at most a
// quarter of the cap.
Status Spool::Impl::MakeRoom(std::uint64_t start) {
  {
    MutexLock guard(&mu);
    if (BytesAfterGroup(start) <= limits.max_bytes) return Status::Ok();
  }
  MutexLock io(&io_mu);
  while (true) {
    bool has_free = false;
    {
      MutexLock guard(&mu);
      if (BytesAfterGroup(start) <= limits.max_bytes) return Status::Ok();
      has_free = !free_segments.empty();
    }
    // Files kept for reuse go before any waiting record does (if they can be removed).
    if (has_free) {
      Status discarded = DiscardFreeSegments();
      if (discarded.ok()) continue;
      SpoolLog().Warn("could not remove spool files kept for reuse; dropping records instead",
                      {{"dir", dir}, {"error", discarded}});
    }
    PersistentState next;
    std::vector<std::uint64_t> doomed;
    std::uint64_t consumed_before = 0;
    {
      MutexLock guard(&mu);
      const std::uint64_t total = BytesAfterGroup(start);
      if (total <= limits.max_bytes) return Status::Ok();
      next = state;
      consumed_before = state.consumed_through;
      std::uint64_t freed = 0;
      for (size_t i = 0; i + 1 < segments.size() && total - freed > limits.max_bytes; ++i) {
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
    if (doomed.empty()) {
      return InternalError("a group of " + std::to_string(group_buffer.size()) +
                           " bytes does not fit under the spool's cap of " +
                           std::to_string(limits.max_bytes) + " bytes");
    }
    if (next.consumed_through > consumed_before) {
      Status persisted = state_file->Write(next, StateFile::Durability::kSync);
      if (!persisted.ok()) {
        return persisted.WithContext(
            "persisting the spool cursor to drop records at the size cap");
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
    UPLINK_RETURN_IF_ERROR(RetireSegments(doomed, /*recycle=*/false)
                               .WithContext("dropping spool segments at the size cap"));
    RefreshOldest();
  }
}

}  // namespace uplink::spool
