// Read and Rewind: the reader follows the segments in order from consumed_through + 1 up to
// the durable end, skipping records dropped meanwhile and counting damage once, and takes
// the records the tail holds from memory (docs/spool.md, "Reading and consuming", "The
// tail" and "Damage"). Only the reading thread is here, but for the tail's upkeep.
#include <algorithm>

#include "spool/record.h"
#include "spool/spool_impl.h"

namespace uplink::spool {

void Spool::Impl::ReaderReporter::Corruption(std::uint64_t offset, std::uint64_t bytes,
                                             std::string_view reason) {
  MutexLock guard(&impl_.mu);
  impl_.unattributed_damage_bytes += bytes;
  SpoolLog().Warn("skipping damaged spool bytes",
                  {{"dir", impl_.dir},
                   {"segment", impl_.cursor ? impl_.cursor->name : std::string()},
                   {"offset", offset},
                   {"bytes", bytes},
                   {"reason", reason}});
}

Result<std::vector<SpoolRecord>> Spool::Impl::Read(size_t max_bytes, size_t max_records) {
  std::vector<SpoolRecord> out;
  std::vector<ReadMark> marks;
  size_t bytes = 0;
  Status error;
  while (out.size() < std::max<size_t>(max_records, 1)) {
    std::optional<ReadItem> item;
    if (stash) {
      item = std::move(stash);
      stash.reset();
      MutexLock guard(&mu);
      if (item->record.sequence <= state.consumed_through) continue;
    } else {
      Result<std::optional<ReadItem>> next = NextRecord();
      if (!next.ok()) {
        error = next.status();
        break;
      }
      if (!*next) break;
      item = std::move(**next);
    }
    if (!out.empty() && bytes + item->record.payload.size() > max_bytes) {
      stash = std::move(item);
      break;
    }
    bytes += item->record.payload.size();
    marks.push_back(item->mark);
    out.push_back(std::move(item->record));
  }
  if (out.empty() && !error.ok()) return error.WithContext("reading the spool");
  MutexLock guard(&mu);
  reader_next = expected;
  for (const ReadMark& mark : marks) {
    if (mark.sequence <= state.consumed_through) continue;
    returned.push_back(mark);
    if (returned.size() > kMaxRememberedReads) {
      trimmed_through = returned.front().sequence;
      returned.pop_front();
    }
  }
  return out;
}

Status Spool::Impl::OpenCursor(std::uint64_t segment, std::uint64_t offset,
                               std::uint64_t limit) {
  Cursor opened;
  opened.segment = segment;
  {
    MutexLock guard(&mu);
    auto index = FindSegment(segment);
    if (!index) {  // removed meanwhile: read as empty, so that the reader moves on
      cursor = std::move(opened);
      return Status::Ok();
    }
    opened.name = segments[*index].name();
  }
  Result<std::unique_ptr<ReadableFile>> file = fs.OpenReadable(PathOf(opened.name));
  if (file.ok()) {
    opened.file = std::move(*file);
    opened.reader = std::make_unique<framing::Reader>(*opened.file, &reporter, offset, limit,
                                                      ReaderRecordLimit(), segment);
  } else if (file.status().code() != StatusCode::kNotFound) {
    return file.status();
  }  // else removed meanwhile: read as empty, so that the reader moves on
  cursor = std::move(opened);
  return Status::Ok();
}

Result<std::optional<Spool::Impl::ReadItem>> Spool::Impl::NextRecord() {
  if (std::optional<ReadItem> item = NextFromTail()) return item;
  while (true) {
    std::uint64_t consumed = 0, limit = 0, following = 0;
    bool is_last = false;
    std::optional<std::pair<std::uint64_t, std::uint64_t>> open_at;  // segment, offset
    {
      MutexLock guard(&mu);
      consumed = state.consumed_through;
      expected = std::max(expected, consumed + 1);
      std::optional<size_t> index;
      if (cursor) index = FindSegment(cursor->segment);
      if (!index) {  // not started, left for the tail, or its segment was removed meanwhile
        cursor.reset();
        if (segments.empty()) return std::optional<ReadItem>();
        const bool after_tail = resume && resume->sequence + 1 == expected;
        // Everything durable was served from the tail: the file has nothing more for now.
        if (after_tail && expected > last_durable) return std::optional<ReadItem>();
        // Just after the record last served from the tail, or the one consumed_through
        // ends, while its segment is there; else from the start of the one holding `expected`.
        const std::optional<ReadMark>& after = after_tail ? resume : anchor;
        if (after && after->sequence + 1 == expected &&
            (index = FindSegment(after->segment))) {
          open_at.emplace(after->segment, after->end_offset);
        } else {
          index = SegmentHolding(expected);
          open_at.emplace(segments[*index].first, 0);
        }
      }
      limit = segments[*index].readable_end;
      is_last = *index + 1 == segments.size();
      if (!is_last) following = segments[*index + 1].first;
    }
    if (!is_last && expected >= following) {
      // Its last record was read: what follows it in a recycled file is older data.
      UPLINK_RETURN_IF_ERROR(OpenCursor(following, 0, 0));
      continue;
    }
    if (open_at) UPLINK_RETURN_IF_ERROR(OpenCursor(open_at->first, open_at->second, limit));

    framing::LogRecord record;
    bool found = false;
    if (cursor->reader) {
      cursor->reader->ExtendLimit(limit);
      found = cursor->reader->ReadRecord(&record);
    }
    if (!found) {
      // A segment that is no longer the last one is complete: go on to the next.
      if (is_last) return std::optional<ReadItem>();
      UPLINK_RETURN_IF_ERROR(OpenCursor(following, 0, 0));
      continue;
    }
    {
      // At the cap a new segment may take this one's file while it is read (it is dropped,
      // then written over: ReuseOldestSegmentAtTheCap), so what was read may be the new
      // segment's records, not yet durable. Its entry goes before its file is written
      // over: a segment still listed was read as it was.
      MutexLock guard(&mu);
      if (!FindSegment(cursor->segment)) {
        unattributed_damage_bytes = 0;  // what was met there lay among dropped records
        cursor.reset();
        continue;
      }
    }
    if (record.sequence <= consumed) {
      MutexLock guard(&mu);
      unattributed_damage_bytes = 0;  // damage before it lay among consumed records
      continue;
    }
    std::optional<DecodedRecord> decoded;
    if (record.sequence >= expected) decoded = DecodeRecord(record.payload);
    if (!decoded) {
      reporter.Corruption(record.offset, record.end_offset - record.offset,
                          record.sequence < expected
                              ? "record out of sequence order"
                              : "record too short to hold its append time");
      continue;
    }
    NoteArrival(record.sequence);
    expected = record.sequence + 1;
    ReadItem item;
    item.record.sequence = record.sequence;
    item.record.appended_at = decoded->appended_at;
    item.record.payload.assign(decoded->payload);
    item.mark = ReadMark{record.sequence, decoded->appended_at, cursor->segment, record.end_offset};
    return std::optional<ReadItem>(std::move(item));
  }
}

std::optional<Spool::Impl::ReadItem> Spool::Impl::NextFromTail() {
  std::optional<ReadItem> item;
  {
    MutexLock guard(&mu);
    expected = std::max(expected, state.consumed_through + 1);
    // Records the reader passed in the file meanwhile.
    while (!tail.empty() && tail.front().mark.sequence < expected) DropTailFront();
    if (tail.empty() || tail.front().mark.sequence != expected) return std::nullopt;
    TailRecord& front = tail.front();
    // At once, not at the end of the batch: the appends meanwhile still take copies.
    reader_next = front.mark.sequence + 1;
    tail_bytes -= front.Cost();
    item.emplace(ReadItem{
        SpoolRecord{front.mark.sequence, front.mark.appended_at, std::move(front.payload)},
        front.mark});
    tail.pop_front();
  }
  NoteArrival(item->mark.sequence);
  expected = item->mark.sequence + 1;
  // The file cursor stays behind: it reopens after this record when it is needed again.
  cursor.reset();
  resume = item->mark;
  return item;
}

bool Spool::Impl::TailWants(size_t payload_bytes) const {
  if (payload_bytes + sizeof(TailRecord) > kMaxTailBytes) return false;
  return reader_next > last_durable ||
         (!tail.empty() && reader_next >= tail.front().mark.sequence);
}

void Spool::Impl::AdmitToTail(UnsyncedRecord& record) {
  tail.push_back(TailRecord{
      ReadMark{record.sequence, record.appended_at, segments.back().first, record.end},
      std::move(*record.tail_copy)});
  tail_bytes += tail.back().Cost();
  while (tail_bytes > kMaxTailBytes) DropTailFront();
}

void Spool::Impl::DropTailFront() {
  tail_bytes -= tail.front().Cost();
  tail.pop_front();
}

void Spool::Impl::NoteArrival(std::uint64_t sequence) {
  MutexLock guard(&mu);
  PendingCorruption found;
  found.bytes = unattributed_damage_bytes;
  unattributed_damage_bytes = 0;
  found.first = std::max(expected, state.consumed_through + 1);
  found.last = sequence - 1;
  if (found.first <= found.last) {
    found.records = found.last - found.first + 1 - AbandonedWithin(found.first, found.last);
  }
  if (found.last <= state.consumed_through || (found.records == 0 && found.bytes == 0)) return;
  SpoolLog().Warn("spool records missing", {{"dir", dir},
                                            {"first_missing", found.first},
                                            {"records", found.records},
                                            {"damaged_bytes", found.bytes}});
  pending_corruption.push_back(found);
}

void Spool::Impl::Rewind() {
  MutexLock guard(&mu);
  cursor.reset();
  stash.reset();
  resume.reset();
  expected = reader_next = state.consumed_through + 1;
  pending_corruption.clear();
  unattributed_damage_bytes = 0;
  returned.clear();
  trimmed_through = 0;
}

}  // namespace uplink::spool
