// The spool (spool.h; docs/spool.md has the format and the crash-safety argument; the
// threads and the files that implement it are described in spool_impl.h). Here: the
// interface, Consume and Stats, retiring segments, and the oldest waiting record's time.
#include "spool/spool.h"

#include <algorithm>

#include "common/crypto.h"
#include "spool/record.h"
#include "spool/spool_impl.h"

namespace uplink::spool {
namespace {

Result<Limits> ResolveLimits(const SpoolOptions& options) {
  constexpr std::uint64_t kMinMaxBytes = 64 << 10;
  if (options.max_bytes < kMinMaxBytes) {
    return InvalidArgumentError("spool max_bytes must be at least 65536, not " +
                                std::to_string(options.max_bytes));
  }
  if (options.max_record_bytes == 0)
    return InvalidArgumentError("spool max_record_bytes must be positive");
  if (options.segment_bytes > options.max_bytes / 2) {
    return InvalidArgumentError("spool segment_bytes (" + std::to_string(options.segment_bytes) +
                                ") must be at most half of max_bytes (" +
                                std::to_string(options.max_bytes) + ")");
  }
  Limits limits;
  limits.max_bytes = options.max_bytes;
  limits.max_record_bytes = std::min(options.max_record_bytes, options.max_bytes / 4);
  limits.segment_bytes = options.segment_bytes;
  limits.reserve_disk = options.reserve_disk;
  if (limits.segment_bytes == 0) {
    limits.segment_bytes =
        std::min(std::clamp<std::uint64_t>(options.max_bytes / 64, 64 << 10, 8 << 20),
                 options.max_bytes / 2);
  }
  return limits;
}

}  // namespace

const ::uplink::log::Logger& SpoolLog() {
  static const ::uplink::log::Logger logger("spool");
  return logger;
}

LossCount& operator+=(LossCount& a, const LossCount& b) {
  a.records += b.records;
  a.bytes += b.bytes;
  return a;
}

Spool::Impl::~Impl() {
  MutexLock io(&io_mu);
  if (!state_file) return;
  if (Status synced = state_file->Sync(); !synced.ok()) {
    SpoolLog().Warn("could not sync the spool cursor on close; records consumed since the last "
                    "sync may be sent again after a power loss",
                    {{"dir", dir}, {"error", synced}});
  }
}

size_t Spool::Impl::ReaderRecordLimit() const {
  return static_cast<size_t>(std::max(limits.max_record_bytes, kMinReaderRecordLimit) +
                             kAppendTimeBytes);
}

// ---- the segment list ---------------------------------------------------------------------

std::optional<size_t> Spool::Impl::FindSegment(std::uint64_t first) const {
  auto it = std::lower_bound(segments.begin(), segments.end(), first,
                             [](const Segment& s, std::uint64_t f) { return s.first < f; });
  if (it == segments.end() || it->first != first) return std::nullopt;
  return static_cast<size_t>(it - segments.begin());
}

size_t Spool::Impl::SegmentHolding(std::uint64_t sequence) const {
  auto it = std::upper_bound(segments.begin(), segments.end(), sequence,
                             [](std::uint64_t s, const Segment& seg) { return s < seg.first; });
  return it == segments.begin() ? 0 : static_cast<size_t>(it - segments.begin()) - 1;
}

std::uint64_t Spool::Impl::LastSequenceOf(size_t index) const {
  return index + 1 < segments.size() ? segments[index + 1].first - 1 : next_sequence - 1;
}

std::uint64_t Spool::Impl::TotalBytes() const {
  // Saturating: sizes come from the directory, which may hold anything (sparse files).
  auto add = [](std::uint64_t a, std::uint64_t b) {
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
  };
  std::uint64_t total = write_ahead_bytes;
  for (const Segment& s : segments) total = add(total, std::max(s.size, s.allocated));
  for (const FreeSegment& f : free_segments) total = add(total, f.bytes);
  return total;
}

bool Spool::Impl::KeepsForReuse(std::uint64_t bytes) const {
  // A file under half a segment is not worth keeping.
  if (bytes < limits.segment_bytes / 2) return false;
  return reserve_disk || free_segments.size() < kMaxFreeSegments;
}

std::uint64_t Spool::Impl::AbandonedWithin(std::uint64_t first, std::uint64_t last) const {
  std::uint64_t count = 0;
  for (const auto& [from, to] : abandoned) {
    const std::uint64_t low = std::max(from, first), high = std::min(to, last);
    if (low <= high) count += high - low + 1;
  }
  return count;
}

// ---- STATE and retiring segments ----------------------------------------------------------

void Spool::Impl::AdoptState(const PersistentState& next) {
  state = next;
  const std::uint64_t consumed = state.consumed_through;
  for (auto it = pending_corruption.begin(); it != pending_corruption.end();) {
    if (it->last <= consumed) {
      it = pending_corruption.erase(it);
      continue;
    }
    if (it->first <= consumed) {
      it->records -= std::min(it->records, consumed - it->first + 1);
      it->bytes = 0;
      it->first = consumed + 1;
    }
    ++it;
  }
  while (!returned.empty() && returned.front().sequence <= consumed) {
    if (returned.front().sequence == consumed) anchor = returned.front();
    returned.pop_front();
  }
  if (anchor && anchor->sequence != consumed) anchor.reset();
  while (!tail.empty() && tail.front().mark.sequence <= consumed) DropTailFront();
  std::erase_if(abandoned, [&](const auto& range) { return range.second <= consumed; });
}

Status Spool::Impl::RemoveConsumedSegments() {
  std::vector<std::uint64_t> doomed;
  {
    MutexLock guard(&mu);
    for (size_t i = 0; i + 1 < segments.size() && LastSequenceOf(i) <= state.consumed_through;
         ++i) {
      doomed.push_back(segments[i].first);
    }
  }
  if (doomed.empty()) return Status::Ok();
  // Never on the word of a lazily written cursor: a power loss could take it back below
  // the retired segments (a segment may have started since Consume decided not to sync).
  if (Status synced = state_file->Sync(); !synced.ok()) {
    SpoolLog().Warn("could not sync the spool cursor; consumed segments stay until it is",
                    {{"dir", dir}, {"error", synced}});
    return synced;
  }
  return RetireSegments(doomed, /*recycle=*/true);
}

Status Spool::Impl::RetireSegments(const std::vector<std::uint64_t>& doomed, bool recycle) {
  Status result;
  size_t removed = 0;
  for (std::uint64_t first : doomed) {
    std::optional<FreeSegment> kept;
    std::string path;
    {
      MutexLock guard(&mu);
      auto index = FindSegment(first);
      if (!index) continue;
      path = SegmentPath(segments[*index]);
      if (recycle && segments[*index].reusable && KeepsForReuse(segments[*index].allocated)) {
        kept = FreeSegment{first, segments[*index].allocated};
      }
    }
    Status status = kept ? fs.Rename(path, PathOf(FreeFileName(first))) : fs.Remove(path);
    if (!status.ok() && status.code() != StatusCode::kNotFound) {
      SpoolLog().Warn("could not remove a consumed spool segment; will retry",
                      {{"dir", dir}, {"file", path}, {"error", status}});
      result = status;
      break;
    }
    MutexLock guard(&mu);
    if (auto index = FindSegment(first))
      segments.erase(segments.begin() + static_cast<long>(*index));
    if (kept && status.ok()) free_segments.push_back(*kept);
    ++removed;
  }
  if (removed > 0) {
    Status synced = fs.SyncDir(dir);
    if (!synced.ok())
      SpoolLog().Warn("could not sync the spool directory", {{"dir", dir}, {"error", synced}});
  }
  return result;
}

// ---- the oldest waiting record's time -----------------------------------------------------

void Spool::Impl::RefreshOldest() {
  std::uint64_t after = 0;
  std::optional<ReadMark> hint;
  std::vector<Segment> snapshot;
  {
    MutexLock guard(&mu);
    after = state.consumed_through;
    if (last_durable <= after) {
      oldest = std::nullopt;
      return;
    }
    if (!returned.empty() && trimmed_through <= after) {
      oldest = returned.front().appended_at;
      return;
    }
    // The reader has not been given it, but the tail holds it.
    if (!tail.empty() && tail.front().mark.sequence == after + 1) {
      oldest = tail.front().mark.appended_at;
      return;
    }
    if (anchor && anchor->sequence == after) hint = anchor;
    snapshot.assign(segments.begin(), segments.end());
  }
  std::optional<WallTime> found = FindFirstWaiting(snapshot, after, hint);
  MutexLock guard(&mu);
  if (state.consumed_through == after) oldest = found;
}

std::optional<WallTime> Spool::Impl::FindFirstWaiting(const std::vector<Segment>& snapshot,
                                                      std::uint64_t after,
                                                      const std::optional<ReadMark>& hint) {
  if (snapshot.empty()) return std::nullopt;
  auto holding =
      std::upper_bound(snapshot.begin(), snapshot.end(), after + 1,
                       [](std::uint64_t s, const Segment& seg) { return s < seg.first; });
  size_t index =
      holding == snapshot.begin() ? 0 : static_cast<size_t>(holding - snapshot.begin()) - 1;
  std::uint64_t offset = 0;
  if (hint) {
    for (size_t i = 0; i < snapshot.size(); ++i) {
      if (snapshot[i].first == hint->segment) {
        index = i;
        offset = hint->end_offset;
      }
    }
  }
  for (; index < snapshot.size(); ++index, offset = 0) {
    Result<std::unique_ptr<ReadableFile>> file = fs.OpenReadable(SegmentPath(snapshot[index]));
    if (!file.ok()) continue;
    framing::Reader reader(**file, nullptr, offset, snapshot[index].readable_end,
                           ReaderRecordLimit(), snapshot[index].first);
    framing::LogRecord record;
    while (reader.ReadRecord(&record)) {
      if (record.sequence <= after) continue;
      if (auto decoded = DecodeRecord(record.payload)) return decoded->appended_at;
    }
  }
  return std::nullopt;
}

// ---- Consume and Stats --------------------------------------------------------------------

Status Spool::Impl::Consume(std::uint64_t through, LossCount rejected) {
  MutexLock io(&io_mu);
  PersistentState next;
  bool advances = false;
  bool retires = false;
  {
    MutexLock guard(&mu);
    through = std::min(through, last_durable);
    advances = through > state.consumed_through;
    retires =
        segments.size() > 1 && LastSequenceOf(0) <= std::max(through, state.consumed_through);
    next = state;
    if (advances) {
      next.consumed_through = through;
      for (const PendingCorruption& found : pending_corruption) {
        if (found.first > through && found.last > through) break;
        next.losses.corrupt.records += found.last <= through
                                           ? found.records
                                           : std::min(found.records, through - found.first + 1);
        next.losses.corrupt.bytes += found.bytes;
      }
    }
    next.losses.rejected += rejected;
  }
  if (advances || rejected.records > 0 || rejected.bytes > 0) {
    // Synced only when a segment is retired on its word: the cursor itself may lag a
    // power loss behind (StateFile).
    UPLINK_RETURN_IF_ERROR(
        state_file
            ->Write(next, retires ? StateFile::Durability::kSync : StateFile::Durability::kLazy)
            .WithContext("persisting the spool cursor"));
    MutexLock guard(&mu);
    AdoptState(next);
  }
  (void)RemoveConsumedSegments();  // logged; retried by the next Consume or Open
  if (advances) RefreshOldest();
  return Status::Ok();
}

SpoolStats Spool::Impl::Stats() const {
  MutexLock guard(&mu);
  SpoolStats stats;
  stats.spool_id = HexEncode(state.spool_id);
  stats.consumed_through = state.consumed_through;
  stats.last_sequence = last_durable;
  if (last_durable > state.consumed_through) {
    stats.waiting_records = last_durable - state.consumed_through -
                            AbandonedWithin(state.consumed_through + 1, last_durable);
  }
  if (stats.waiting_records > 0) {
    stats.first_sequence = state.consumed_through + 1;
    stats.oldest_appended_at = oldest;
  }
  stats.bytes = TotalBytes();
  stats.spare_bytes = write_ahead_bytes;
  for (const FreeSegment& f : free_segments) stats.spare_bytes += f.bytes;
  stats.write_aheads_cancelled = write_aheads_cancelled;
  stats.segments = segments.size();
  stats.losses = state.losses;
  for (const PendingCorruption& found : pending_corruption) {
    stats.losses.corrupt.records += found.records;
    stats.losses.corrupt.bytes += found.bytes;
  }
  stats.losses.corrupt.bytes += unattributed_damage_bytes;
  return stats;
}

// ---- the interface ------------------------------------------------------------------------

Spool::Spool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Spool::~Spool() = default;

Result<std::unique_ptr<Spool>> Spool::Open(FileSystem& fs, std::string dir, SpoolOptions options,
                                           const Clock& clock) {
  UPLINK_ASSIGN_OR_RETURN(Limits limits, ResolveLimits(options));
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  auto impl = std::make_unique<Impl>(fs, std::move(dir), limits, clock);
  UPLINK_RETURN_IF_ERROR(impl->Recover());
  return std::unique_ptr<Spool>(new Spool(std::move(impl)));
}

Result<std::uint64_t> Spool::Append(std::string_view payload) { return impl_->Append(payload); }

Result<std::vector<SpoolRecord>> Spool::Read(size_t max_bytes, size_t max_records) {
  return impl_->Read(max_bytes, max_records);
}

void Spool::Rewind() { impl_->Rewind(); }

Status Spool::Consume(std::uint64_t through_sequence, LossCount rejected) {
  return impl_->Consume(through_sequence, rejected);
}

Result<bool> Spool::WriteAhead() { return impl_->WriteAhead(); }

SpoolStats Spool::Stats() const { return impl_->Stats(); }

const std::string& Spool::dir() const { return impl_->dir; }

}  // namespace uplink::spool
