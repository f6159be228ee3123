// Open: takes the directory's lock, lists the segments and the files kept for reuse, loads
// STATE (or starts a new spool id when it is lost), retires what was consumed, and finds
// where appending continues in the newest segment (docs/spool.md, "Why a crash at any point
// is safe" and "Damage").
#include <algorithm>

#include "common/crypto.h"
#include "spool/record.h"
#include "spool/spool_impl.h"

namespace uplink::spool {
namespace {

// Counts the bytes a framing::Reader skips, and why the first skip since Mark() happened.
class CountingReporter final : public framing::Reporter {
 public:
  void Corruption(std::uint64_t offset, std::uint64_t bytes, std::string_view reason) override {
    total += bytes;
    if (reason_since_mark.empty()) reason_since_mark = std::string(reason);
  }
  void Mark() {
    marked_total = total;
    reason_since_mark.clear();
  }
  std::uint64_t total = 0;
  std::uint64_t marked_total = 0;
  std::string reason_since_mark;
};

}  // namespace

Status Spool::Impl::Recover() {
  Result<std::vector<std::string>> listing = fs.ListDir(dir);
  if (!listing.ok() && listing.status().code() == StatusCode::kNotFound) {
    UPLINK_RETURN_IF_ERROR(fs.CreateDir(dir).WithContext("creating the spool directory"));
    UPLINK_RETURN_IF_ERROR(
        fs.SyncDir(ParentDir(dir)).WithContext("creating the spool directory"));
  } else if (!listing.ok()) {
    return listing.status().WithContext("opening the spool");
  }
  UPLINK_ASSIGN_OR_RETURN(lock, fs.Lock(PathOf(kLockFileName)));
  reserve_disk = limits.reserve_disk && fs.OverwritesInPlace(dir);
  if (limits.reserve_disk && !reserve_disk) {
    SpoolLog().Info("the spool's file system does not overwrite files in place (tmpfs, btrfs, "
                    "ZFS): its cap is not reserved on disk ahead of need",
                    {{"dir", dir}});
  }
  // Listed again under the lock: another process may have changed it until now.
  listing = fs.ListDir(dir);
  if (!listing.ok()) return listing.status().WithContext("opening the spool");
  std::vector<SegmentFile> files;
  std::vector<std::uint64_t> frees;
  for (const std::string& name : *listing) {
    if (auto file = ParseSegmentFileName(name)) files.push_back(*file);
    if (auto number = ParseFreeFileName(name)) frees.push_back(*number);
  }
  std::sort(files.begin(), files.end(),
            [](const SegmentFile& a, const SegmentFile& b) { return a.first < b.first; });
  std::deque<Segment> found;
  std::optional<Segment> newest_ignored;
  for (const SegmentFile& file : files) {
    Segment segment{.first = file.first, .recycled = file.recycled};
    Result<std::uint64_t> size = fs.FileSize(SegmentPath(segment));
    if (!size.ok() && size.status().code() == StatusCode::kFailedPrecondition) {
      // Not something the spool wrote (a directory, a link): what it holds is not read, and
      // the segments after it are not held back by it.
      SpoolLog().Error("ignoring an entry named like a spool segment that is not a regular file",
                       {{"dir", dir}, {"entry", segment.name()}, {"error", size.status()}});
      newest_ignored = segment;
      continue;
    }
    if (!size.ok()) return size.status().WithContext("opening the spool");
    segment.size = segment.readable_end = segment.allocated = *size;
    if (!found.empty() && found.back().first == segment.first) {
      // Never written so (a roll that failed twice moves on to another number).
      SpoolLog().Error("two spool segments start at the same sequence; ignoring the second",
                       {{"dir", dir}, {"kept", found.back().name()}, {"ignored", segment.name()}});
      continue;
    }
    found.push_back(segment);
  }
  if (newest_ignored && (found.empty() || newest_ignored->first > found.back().first)) {
    // In the newest segment's place, it may have held the last numbers handed out; going on
    // without them could hand them out again, and a console that acknowledged them before
    // would take new records for duplicates.
    return FailedPreconditionError(
        "opening the spool: " + SegmentPath(*newest_ignored) +
        " is in the newest segment's place but is not a regular file; remove it to go on "
        "without what it held");
  }

  MutexLock io(&io_mu);
  {
    MutexLock guard(&mu);
    segments = std::move(found);
  }
  UPLINK_ASSIGN_OR_RETURN(
      const bool state_recreated,
      LoadState(files.empty() ? std::nullopt : std::optional(files.front().first), frees));
  if (!state_recreated) RecoverFreeSegments(frees);
  {
    MutexLock guard(&mu);
    next_sequence = state.consumed_through + 1;
  }
  (void)RemoveConsumedSegments();
  UPLINK_RETURN_IF_ERROR(RecoverNewestSegment());
  {
    MutexLock guard(&mu);
    reserved_end = written_end = segments.empty() ? 0 : segments.back().size;
    last_durable = next_sequence - 1;
    expected = state.consumed_through + 1;
  }
  RefreshOldest();
  return Status::Ok();
}

// Returns whether the state was created afresh (a new spool, or its state was lost). Then
// the files kept for reuse (`frees`) are removed first, for good: numbering may start again
// below the sequences they hold, and a reader could take their old records for new ones.
Result<bool> Spool::Impl::LoadState(std::optional<std::uint64_t> first_segment,
                                    const std::vector<std::uint64_t>& frees) {
  UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<InPlaceFile> file,
                          fs.OpenInPlace(PathOf(kStateFileName)));
  state_file = std::make_unique<StateFile>(std::move(file));
  Result<StateFile::Loaded> loaded = state_file->Load();
  if (!loaded.ok()) return loaded.status().WithContext("reading spool state");
  if (loaded->state) {
    MutexLock guard(&mu);
    state = *loaded->state;
    return false;
  }
  // A new spool, or its state is lost: a new spool id tells the console that this is a
  // spool it has not seen, whose numbering it cannot compare with the old one's.
  PersistentState fresh;
  fresh.generation = 1;
  fresh.spool_id = RandomBytes(kSpoolIdBytes);
  fresh.consumed_through = first_segment ? *first_segment - 1 : 0;
  if (loaded->stored_bytes > 0 || first_segment) {
    size_t segment_count = 0;
    {
      MutexLock guard(&mu);
      segment_count = segments.size();
    }
    SpoolLog().Error("spool state is missing or damaged; continuing under a new spool id",
                     {{"dir", dir},
                      {"state_bytes", loaded->stored_bytes},
                      {"segments", segment_count},
                      {"spool_id", HexEncode(fresh.spool_id)}});
  } else {
    SpoolLog().Info("created spool", {{"dir", dir}, {"spool_id", HexEncode(fresh.spool_id)}});
  }
  for (std::uint64_t number : frees) {
    Status removed = fs.Remove(PathOf(FreeFileName(number)));
    if (!removed.ok() && removed.code() != StatusCode::kNotFound) {
      return removed.WithContext("removing a spool file kept for reuse before starting over");
    }
  }
  if (!frees.empty()) {
    UPLINK_RETURN_IF_ERROR(fs.SyncDir(dir).WithContext("removing spool files kept for reuse"));
  }
  UPLINK_RETURN_IF_ERROR(state_file->Create(fresh).WithContext("creating spool state"));
  UPLINK_RETURN_IF_ERROR(fs.SyncDir(dir).WithContext("creating spool state"));
  MutexLock guard(&mu);
  state = fresh;
  return true;
}

// Takes the files kept for reuse back into the pool, as many as the cap holds, whatever
// reserve_disk says now (a spool opened without it only to be looked at must not give up
// the disk it holds); those over the cap are removed. A file cut short by a crash while it
// was written ahead is kept for what it has.
void Spool::Impl::RecoverFreeSegments(std::vector<std::uint64_t> numbers) {
  std::sort(numbers.begin(), numbers.end());
  bool removed = false;
  for (std::uint64_t number : numbers) {
    const std::string path = PathOf(FreeFileName(number));
    Result<std::uint64_t> size = fs.FileSize(path);
    if (size.ok()) {
      MutexLock guard(&mu);
      if (number >= kFirstWriteAheadNumber) {
        next_write_ahead_number = std::max(next_write_ahead_number, number + 1);
      }
      if (*size <= limits.max_bytes - std::min(limits.max_bytes, TotalBytes())) {
        free_segments.push_back(FreeSegment{number, *size});
        continue;
      }
    }
    Status status = fs.Remove(path);
    if (!status.ok()) {
      SpoolLog().Warn("could not remove a spool file kept for reuse",
                      {{"dir", dir}, {"file", FreeFileName(number)}, {"error", status}});
    }
    removed |= status.ok();
  }
  if (removed) (void)fs.SyncDir(dir);
}

// Scans the newest segment to find where appending continues: after its last intact
// record. What follows it is either a torn write (cut short, zeroes where a crash left
// an extended file unwritten, or bytes up to where a recycled file's previous records
// begin: records whose Append never returned), which is cut off, or damage, which may
// have held acknowledged records: it stays for readers to skip and count, appends go to a
// new segment, and the sequence numbers it could have held (one per 23 bytes at most) are
// skipped so that none is ever reused.
Status Spool::Impl::RecoverNewestSegment() {
  Segment newest;
  std::uint64_t consumed = 0;
  {
    MutexLock guard(&mu);
    if (segments.empty()) return Status::Ok();
    newest = segments.back();
    consumed = state.consumed_through;
  }
  const std::string path = SegmentPath(newest);
  // Blocks preallocated past its end (a process stopped before it filled the segment) are
  // released: the cap counts what Open finds, the files' sizes. Needs no free space.
  if (Status released = fs.Truncate(path, newest.size); !released.ok()) {
    SpoolLog().Warn("could not release blocks preallocated past the newest spool segment",
                    {{"dir", dir}, {"segment", newest.name()}, {"error", released}});
  }
  Result<std::unique_ptr<ReadableFile>> file = fs.OpenReadable(path);
  if (!file.ok()) return file.status().WithContext("opening the spool");
  CountingReporter damage;
  framing::Reader reader(**file, &damage, 0, newest.size, ReaderRecordLimit(), newest.first);
  framing::LogRecord record;
  std::uint64_t intact_end = 0, highest = 0;
  bool holds_waiting = false;
  while (reader.ReadRecord(&record)) {
    intact_end = record.end_offset;
    highest = std::max(highest, record.sequence);
    holds_waiting |= record.sequence > consumed;
    damage.Mark();
  }
  const std::uint64_t tail = newest.size - intact_end;
  // The sequences the bytes after the last intact record could hold, none of which may be
  // handed out again when they cannot be cut off.
  const std::uint64_t after_intact = std::max(highest, newest.first - 1) + 1;
  const std::uint64_t past_tail = after_intact + tail / kRecordOverhead;
  // An intact fragment of a later record past them: the end was damaged after those records
  // were written (a torn write is the last write, so nothing of this use follows it), and
  // they may have been acknowledged. Until 2026-12-04 such a tail was cut off when the
  // reader took the damage for a record cut short, and its sequences were handed out again.
  const bool later_records = tail > 0 && framing::HoldsFragmentIn(**file, intact_end, newest.size,
                                                                  after_intact, past_tail);
  // Otherwise, in a recycled file, what follows the last intact record is the previous use's
  // data (cut or garbled at the boundary): it is treated as the end.
  const bool stale_tail = newest.recycled && !later_records;
  const bool damaged_tail = later_records || (damage.total > damage.marked_total && !stale_tail &&
                                              !AllZero(**file, intact_end, newest.size));
  file->reset();
  {
    MutexLock guard(&mu);
    next_sequence = std::max({newest.first, consumed + 1, highest + 1});
    if (damaged_tail) {
      SpoolLog().Error(
          "the newest spool segment ends in damage; appends go to a new segment and skip the "
          "sequence numbers the damage may have held",
          {{"dir", dir},
           {"segment", newest.name()},
           {"damaged_bytes", tail},
           {"reason", damage.reason_since_mark.empty() ? "intact records follow a record cut short"
                                                       : damage.reason_since_mark},
           {"next_sequence", std::max(next_sequence, past_tail)}});
      next_sequence = std::max(next_sequence, past_tail);
      AbandonNewestSegment();
      return Status::Ok();
    }
  }
  if (!holds_waiting && consumed + 1 >= newest.first) {
    // Nothing in it or before it waits: the next append starts a segment of its own. A file
    // with anything after its last intact record is not reused: blocks of a torn write may
    // lie there, past older data, with the sequences the next appends will take.
    if (RetireSegments({newest.first}, /*recycle=*/tail == 0).ok()) return Status::Ok();
  }
  if (tail > 0) {
    // Also after a clean stop in a recycled file: a torn write's later blocks may lie
    // beyond the earlier records, and must not outlive the reuse of their sequences.
    SpoolLog().Write(stale_tail ? ::uplink::log::Level::kInfo : ::uplink::log::Level::kWarn,
                     stale_tail ? "cutting a recycled file's earlier records off the newest "
                                  "spool segment"
                                : "cutting a torn write off the newest spool segment",
                     {{"dir", dir}, {"segment", newest.name()}, {"bytes", tail}});
    Status cut = fs.Truncate(path, intact_end);
    MutexLock guard(&mu);
    Segment& segment = segments.back();
    if (!cut.ok()) {
      // What stays may hold a torn write's records: their sequences are never reused, and
      // the file never is either.
      next_sequence = std::max(next_sequence, past_tail);
      SpoolLog().Error("could not cut the torn write off; appends go to a new segment and skip "
                       "the sequence numbers it may hold",
                       {{"dir", dir}, {"error", cut}, {"next_sequence", next_sequence}});
      segment.readable_end = intact_end;
      segment.reusable = false;
      AbandonNewestSegment();
      return Status::Ok();
    }
    segment.size = segment.readable_end = segment.allocated = intact_end;
  }
  Result<std::unique_ptr<InPlaceFile>> writable = fs.OpenInPlace(path);
  MutexLock guard(&mu);
  if (!writable.ok()) {
    SpoolLog().Error("could not reopen the newest spool segment; appends go to a new segment",
                     {{"dir", dir}, {"error", writable.status()}});
    AbandonNewestSegment();
    return Status::Ok();
  }
  active = std::move(*writable);
  return Status::Ok();
}

// Whether bytes [from, to) of `file` are all zero; false if they cannot be read.
bool Spool::Impl::AllZero(const ReadableFile& file, std::uint64_t from, std::uint64_t to) {
  std::unique_ptr<char[]> buffer(new char[framing::kBlockSize]);
  while (from < to) {
    Result<std::string_view> chunk = file.Read(
        from, static_cast<size_t>(std::min<std::uint64_t>(framing::kBlockSize, to - from)),
        buffer.get());
    if (!chunk.ok() || chunk->empty()) return false;
    for (char c : *chunk) {
      if (c != '\0') return false;
    }
    from += chunk->size();
  }
  return true;
}

void Spool::Impl::AbandonNewestSegment() {
  roll_before_next_record = true;
  if (next_sequence == segments.back().first) {
    abandoned.emplace_back(next_sequence, next_sequence);
    ++next_sequence;
  }
}

}  // namespace uplink::spool
