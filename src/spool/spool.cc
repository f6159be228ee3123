// The spool (spool.h; docs/spool.md has the format and the crash-safety argument).
//
// Threads. Appends queue up as in LevelDB's DBImpl::Write: the caller at the front of the
// queue (the leader) takes the queued records as one group and writes them without holding
// `mu`, then hands the queue on and waits until a sync covers them (WriteGroup), and hands
// every member of the group its sequence number or the shared error. Everything that rewrites STATE or removes segments (Consume, and the leader when
// the cap forces a drop) holds `io_mu`, taken before `mu`, so that STATE is written in the
// order the cursor moves and a removal never races another.
//
// A failed group. When the write or the sync of a group fails, it and the groups written
// behind it fail; the segment is truncated back to where the first of them began and the cut
// synced. Sequence numbers are reused only
// when both succeed: no reader can have seen those records (readers stop at the durable end),
// and a power loss cannot bring back records whose Append failed. If either fails, the group's
// sequences are abandoned (never reused, and not counted as corrupt when found missing) and
// the next group starts a new segment, away from the unknown bytes. Either way, a failure
// after which the segment holds records also makes the next group start a new segment, so
// that consuming can free the old one on a full disk.
#include "spool/spool.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/crc32c.h"
#include "common/crypto.h"
#include "common/log.h"
#include "spool/log_format.h"
#include "spool/log_reader.h"
#include "spool/log_writer.h"

namespace uplink::spool {
namespace {

const ::uplink::log::Logger& Log() {
  static const ::uplink::log::Logger logger("spool");
  return logger;
}

constexpr char kStateName[] = "STATE";
constexpr char kLockName[] = "LOCK";
constexpr char kSegmentSuffix[] = ".seg";
// A segment written into a recycled file: its previous records follow the new ones.
constexpr char kRecycledSuffix[] = ".rseg";
constexpr char kFreeSuffix[] = ".free";
constexpr size_t kSegmentDigits = 20;

// STATE: two slots, written alternately; the valid one with the higher generation wins.
constexpr size_t kSlotSize = 128;
constexpr char kStateMagic[8] = {'U', 'P', 'L', 'S', 'P', 'O', 'O', 'L'};
constexpr std::uint32_t kStateVersion = 1;
constexpr size_t kSpoolIdBytes = 16;
constexpr size_t kSlotCrcOffset = kSlotSize - 4;

// Each record's payload on disk is prefixed by its append time (unix microseconds).
constexpr size_t kTimePrefixBytes = 8;
// Framing a record costs at least this much besides its payload (estimates of dropped bytes).
constexpr std::uint64_t kRecordOverhead = framing::kHeaderSize + kTimePrefixBytes;
// How long a leader waits for the last group's members to queue again. A fraction of one
// sync (about a millisecond here), and spent only while appends come from several threads.
constexpr std::chrono::microseconds kGroupGather{200};
// A group's payload stops growing here (LevelDB's figure), unless its first record is larger.
constexpr std::uint64_t kMaxGroupBytes = 1 << 20;
// Records a reader has returned and that wait to be consumed, remembered so that the append
// time of the oldest waiting record is known without I/O (a shipper's batch fits easily).
constexpr size_t kMaxRememberedReads = 16384;
// Consumed segment files kept for reuse. Overwriting a file's blocks needs no block
// allocation, so its fdatasync flushes data without a journal commit (about 1.5 times the
// appending rate on ext4); the writer and a reader that keeps up need two at most.
constexpr size_t kMaxFreeSegments = 2;
// The reader never reassembles more than this (or the configured record limit, if larger),
// so that a record written under a larger limit is still read.
constexpr std::uint64_t kMinReaderRecordLimit = 16ull << 20;

void PutFixed32(char* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

void PutFixed64(char* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

std::uint32_t GetFixed32(const char* p) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

std::uint64_t GetFixed64(const char* p) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

std::int64_t ToUnixMicros(WallTime t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

WallTime FromUnixMicros(std::int64_t micros) {
  return WallTime(
      std::chrono::duration_cast<WallTime::duration>(std::chrono::microseconds(micros)));
}

LossCount& operator+=(LossCount& a, const LossCount& b) {
  a.records += b.records;
  a.bytes += b.bytes;
  return a;
}

struct PersistentState {
  std::uint64_t generation = 0;
  std::string spool_id;  // kSpoolIdBytes raw bytes
  std::uint64_t consumed_through = 0;
  SpoolLosses losses;
};

// magic (8) | version (4) | zero (4) | generation (8) | spool id (16) | consumed_through (8)
// | dropped, corrupt, rejected as records and bytes (6 x 8) | zero | masked CRC32C (4)
std::string EncodeSlot(const PersistentState& state) {
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

std::optional<PersistentState> DecodeSlot(std::string_view slot) {
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

std::string NumberedName(std::uint64_t number, const char* suffix) {
  char name[kSegmentDigits + sizeof kFreeSuffix];
  std::snprintf(name, sizeof name, "%020" PRIu64 "%s", number, suffix);
  return name;
}

std::string SegmentName(std::uint64_t first_sequence, bool recycled) {
  return NumberedName(first_sequence, recycled ? kRecycledSuffix : kSegmentSuffix);
}

// A consumed segment's file kept for reuse: still named by its old first sequence.
std::string FreeName(std::uint64_t first_sequence) {
  return NumberedName(first_sequence, kFreeSuffix);
}

// "00000000000000000042<suffix>" -> 42; anything else (temporary files, editor backups,
// LOCK, STATE, a number of 0 or one that overflows) is not one.
std::optional<std::uint64_t> ParseNumberedName(std::string_view name, std::string_view suffix) {
  if (name.size() != kSegmentDigits + suffix.size() || name.substr(kSegmentDigits) != suffix) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  for (char c : name.substr(0, kSegmentDigits)) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (value == 0) return std::nullopt;
  return value;
}

struct SegmentFile {
  std::uint64_t first = 0;
  bool recycled = false;
};

std::optional<SegmentFile> ParseSegmentName(std::string_view name) {
  if (auto first = ParseNumberedName(name, kSegmentSuffix)) return SegmentFile{*first, false};
  if (auto first = ParseNumberedName(name, kRecycledSuffix)) return SegmentFile{*first, true};
  return std::nullopt;
}

std::string ParentDir(const std::string& dir) {
  const size_t slash = dir.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return dir.substr(0, slash);
}

struct Limits {
  std::uint64_t max_bytes = 0;
  std::uint64_t max_record_bytes = 0;
  std::uint64_t segment_bytes = 0;
  std::uint64_t group_bytes = 0;
};

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
  if (limits.segment_bytes == 0) {
    limits.segment_bytes =
        std::min(std::clamp<std::uint64_t>(options.max_bytes / 64, 64 << 10, 8 << 20),
                 options.max_bytes / 2);
  }
  // With the record limit at a quarter of the cap, a group (and its framing) always fits once
  // every older segment is dropped.
  limits.group_bytes = std::min(kMaxGroupBytes, options.max_bytes / 4);
  return limits;
}

// The payload bytes of the `waiting` last records of a segment of `records` records and
// `size` bytes, estimated from its size less the framing of each record (spool.h).
std::uint64_t EstimatePayloadBytes(std::uint64_t size, std::uint64_t records,
                                   std::uint64_t waiting) {
  if (records == 0 || waiting == 0) return 0;
  const unsigned __int128 framing = static_cast<unsigned __int128>(records) * kRecordOverhead;
  if (size <= framing) return 0;
  const unsigned __int128 payload = size - framing;
  return static_cast<std::uint64_t>(payload * std::min(waiting, records) / records);
}

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

struct DecodedRecord {
  WallTime appended_at;
  std::string_view payload;
};

std::optional<DecodedRecord> DecodeRecord(std::string_view stored) {
  if (stored.size() < kTimePrefixBytes) return std::nullopt;
  return DecodedRecord{FromUnixMicros(static_cast<std::int64_t>(GetFixed64(stored.data()))),
                       stored.substr(kTimePrefixBytes)};
}

}  // namespace

struct Spool::Impl {
  struct Segment {
    std::uint64_t first = 0;         // its first sequence (its name)
    std::uint64_t size = 0;          // bytes written, as far as this process knows
    std::uint64_t readable_end = 0;  // readers stop here: everything before is durable
    // The file's size: larger than `size` while a recycled file is being overwritten (its
    // previous records follow the new ones; readers stop at them: their sequences are lower).
    std::uint64_t allocated = 0;
    bool recycled = false;
    // False when the file may hold a torn group's records past what was cut: never reused.
    bool reusable = true;
    std::string name() const { return SegmentName(first, recycled); }
  };

  struct FreeSegment {
    std::uint64_t name = 0;  // the number in its name
    std::uint64_t bytes = 0;
  };

  // An Append waiting in the queue.
  struct PendingAppend {
    std::string_view payload;
    bool done = false;
    Status status;
    std::uint64_t sequence = 0;
    std::condition_variable wakeup;
  };

  // Damage the reader found, added to the persisted counters once the records around it are
  // consumed, so that damage found again after a restart or a Rewind is counted once.
  struct PendingCorruption {
    std::uint64_t first = 0;  // the missing sequences are first..last; none when first > last
    std::uint64_t last = 0;
    std::uint64_t records = 0;
    std::uint64_t bytes = 0;
  };

  // Where a record the reader returned lies, and when it was appended.
  struct ReadMark {
    std::uint64_t sequence = 0;
    WallTime appended_at;
    std::uint64_t segment = 0;  // the first sequence of its segment
    std::uint64_t end_offset = 0;
  };

  struct ReadItem {
    SpoolRecord record;
    ReadMark mark;
  };

  struct Cursor {
    std::uint64_t segment = 0;
    std::string name;  // its file's
    std::unique_ptr<ReadableFile> file;       // null when the file has vanished
    std::unique_ptr<framing::Reader> reader;  // null when the file has vanished
  };

  // Damage met by the reader: held unattributed until the next intact record shows which
  // sequences it took with it.
  class ReaderReporter final : public framing::Reporter {
   public:
    explicit ReaderReporter(Impl& impl) : impl_(impl) {}
    void Corruption(std::uint64_t offset, std::uint64_t bytes, std::string_view reason) override {
      std::lock_guard guard(impl_.mu);
      impl_.unattributed_damage_bytes += bytes;
      Log().Warn("skipping damaged spool bytes",
                 {{"dir", impl_.dir},
                  {"segment", impl_.cursor ? impl_.cursor->name : std::string()},
                  {"offset", offset},
                  {"bytes", bytes},
                  {"reason", reason}});
    }

   private:
    Impl& impl_;
  };

  Impl(FileSystem& fs, std::string dir, Limits limits, const Clock& clock)
      : fs(fs), dir(std::move(dir)), limits(limits), clock(clock), reporter(*this) {}

  // A clean close leaves the cursor durable, so only a power loss ever sends records again.
  ~Impl() {
    if (!state_file) return;
    if (Status synced = SyncState(); !synced.ok()) {
      Log().Warn("could not sync the spool cursor on close; records consumed since the last "
                 "sync may be sent again after a power loss",
                 {{"dir", dir}, {"error", synced}});
    }
  }

  std::string PathOf(std::string_view name) const { return dir + "/" + std::string(name); }
  std::string SegmentPath(const Segment& segment) const { return PathOf(segment.name()); }
  size_t ReaderRecordLimit() const {
    return static_cast<size_t>(std::max(limits.max_record_bytes, kMinReaderRecordLimit) +
                               kTimePrefixBytes);
  }

  // ---- helpers over the segment list (require mu, or Open) ------------------------------

  std::optional<size_t> FindSegment(std::uint64_t first) const {
    auto it = std::lower_bound(segments.begin(), segments.end(), first,
                               [](const Segment& s, std::uint64_t f) { return s.first < f; });
    if (it == segments.end() || it->first != first) return std::nullopt;
    return static_cast<size_t>(it - segments.begin());
  }

  // The segment that holds `sequence`, or the oldest when it is older than all of them.
  // The list must not be empty.
  size_t SegmentHolding(std::uint64_t sequence) const {
    auto it = std::upper_bound(segments.begin(), segments.end(), sequence,
                               [](std::uint64_t s, const Segment& seg) { return s < seg.first; });
    return it == segments.begin() ? 0 : static_cast<size_t>(it - segments.begin()) - 1;
  }

  // The last sequence segment `index` can hold.
  std::uint64_t LastSequenceOf(size_t index) const {
    return index + 1 < segments.size() ? segments[index + 1].first - 1 : next_sequence - 1;
  }

  // The disk the spool holds: segments and the files kept for reuse.
  std::uint64_t TotalBytes() const {
    std::uint64_t total = 0;
    for (const Segment& s : segments) total += std::max(s.size, s.allocated);
    for (const FreeSegment& f : free_segments) total += f.bytes;
    return total;
  }

  std::uint64_t AbandonedWithin(std::uint64_t first, std::uint64_t last) const {
    std::uint64_t count = 0;
    for (const auto& [from, to] : abandoned) {
      const std::uint64_t low = std::max(from, first), high = std::min(to, last);
      if (low <= high) count += high - low + 1;
    }
    return count;
  }

  // ---- Open ------------------------------------------------------------------------------

  Status Recover() {
    Result<std::vector<std::string>> listing = fs.ListDir(dir);
    if (!listing.ok() && listing.status().code() == StatusCode::kNotFound) {
      UPLINK_RETURN_IF_ERROR(fs.CreateDir(dir).WithContext("creating the spool directory"));
      UPLINK_RETURN_IF_ERROR(
          fs.SyncDir(ParentDir(dir)).WithContext("creating the spool directory"));
    } else if (!listing.ok()) {
      return listing.status().WithContext("opening the spool");
    }
    UPLINK_ASSIGN_OR_RETURN(lock, fs.Lock(PathOf(kLockName)));
    // Listed again under the lock: another process may have changed it until now.
    listing = fs.ListDir(dir);
    if (!listing.ok()) return listing.status().WithContext("opening the spool");
    std::vector<SegmentFile> files;
    std::vector<std::uint64_t> frees;
    for (const std::string& name : *listing) {
      if (auto file = ParseSegmentName(name)) files.push_back(*file);
      if (auto number = ParseNumberedName(name, kFreeSuffix)) frees.push_back(*number);
    }
    std::sort(files.begin(), files.end(),
              [](const SegmentFile& a, const SegmentFile& b) { return a.first < b.first; });
    for (const SegmentFile& file : files) {
      Segment segment{file.first, 0, 0, 0, file.recycled};
      Result<std::uint64_t> size = fs.FileSize(SegmentPath(segment));
      if (!size.ok()) return size.status().WithContext("opening the spool");
      segment.size = segment.readable_end = segment.allocated = *size;
      if (!segments.empty() && segments.back().first == segment.first) {
        // Never written so (a roll that failed twice moves on to another number).
        Log().Error("two spool segments start at the same sequence; ignoring the second",
                    {{"dir", dir}, {"kept", segments.back().name()}, {"ignored", segment.name()}});
        continue;
      }
      segments.push_back(segment);
    }
    UPLINK_ASSIGN_OR_RETURN(
        const bool state_recreated,
        LoadState(files.empty() ? std::nullopt : std::optional(files.front().first), frees));
    if (!state_recreated) RecoverFreeSegments(frees);
    next_sequence = state.consumed_through + 1;
    (void)RemoveConsumedSegments();
    UPLINK_RETURN_IF_ERROR(RecoverNewestSegment());
    written_end = segments.empty() ? 0 : segments.back().size;
    last_durable = next_sequence - 1;
    expected = state.consumed_through + 1;
    RefreshOldest();
    return Status::Ok();
  }

  // Returns whether the state was created afresh (a new spool, or its state was lost). Then
  // the files kept for reuse (`frees`) are removed first, for good: numbering may start again
  // below the sequences they hold, and a reader could take their old records for new ones.
  Result<bool> LoadState(std::optional<std::uint64_t> first_segment,
                         const std::vector<std::uint64_t>& frees) {
    UPLINK_ASSIGN_OR_RETURN(state_file, fs.OpenInPlace(PathOf(kStateName)));
    char buffer[2 * kSlotSize];
    Result<std::string_view> stored = state_file->Read(0, sizeof buffer, buffer);
    if (!stored.ok()) return stored.status().WithContext("reading spool state");
    std::optional<PersistentState> best;
    for (size_t slot = 0; slot < 2 && stored->size() >= (slot + 1) * kSlotSize; ++slot) {
      auto decoded = DecodeSlot(stored->substr(slot * kSlotSize, kSlotSize));
      if (decoded && (!best || decoded->generation > best->generation)) {
        best = decoded;
        synced_slot = slot;
      }
    }
    if (best) {
      // The winner may be a lazy write a crashed process left in the page cache: it must be
      // durable before segments are retired on its word.
      UPLINK_RETURN_IF_ERROR(state_file->Sync().WithContext("reading spool state"));
      state = *best;
      return false;
    }
    // A new spool, or its state is lost: a new spool id tells the console that this is a
    // spool it has not seen, whose numbering it cannot compare with the old one's.
    state = PersistentState{};
    state.generation = 1;
    state.spool_id = RandomBytes(kSpoolIdBytes);
    state.consumed_through = first_segment ? *first_segment - 1 : 0;
    if (!stored->empty() || first_segment) {
      Log().Error("spool state is missing or damaged; continuing under a new spool id",
                  {{"dir", dir},
                   {"state_bytes", stored->size()},
                   {"segments", segments.size()},
                   {"spool_id", HexEncode(state.spool_id)}});
    } else {
      Log().Info("created spool", {{"dir", dir}, {"spool_id", HexEncode(state.spool_id)}});
    }
    for (std::uint64_t number : frees) {
      Status removed = fs.Remove(PathOf(FreeName(number)));
      if (!removed.ok() && removed.code() != StatusCode::kNotFound) {
        return removed.WithContext("removing a spool file kept for reuse before starting over");
      }
    }
    if (!frees.empty()) {
      UPLINK_RETURN_IF_ERROR(fs.SyncDir(dir).WithContext("removing spool files kept for reuse"));
    }
    // Both slots at once: the only write of STATE that needs free space.
    const std::string slot = EncodeSlot(state);
    UPLINK_RETURN_IF_ERROR(state_file->WriteAt(0, slot + slot).WithContext("creating spool state"));
    UPLINK_RETURN_IF_ERROR(state_file->Sync().WithContext("creating spool state"));
    UPLINK_RETURN_IF_ERROR(fs.SyncDir(dir).WithContext("creating spool state"));
    return true;
  }

  // Takes the files kept for reuse back into the pool; extra ones are removed.
  void RecoverFreeSegments(const std::vector<std::uint64_t>& numbers) {
    bool removed = false;
    for (std::uint64_t number : numbers) {
      const std::string path = PathOf(FreeName(number));
      Result<std::uint64_t> size = fs.FileSize(path);
      if (size.ok() && free_segments.size() < kMaxFreeSegments) {
        free_segments.push_back(FreeSegment{number, *size});
        continue;
      }
      Status status = fs.Remove(path);
      if (!status.ok()) {
        Log().Warn("could not remove a spool file kept for reuse",
                   {{"dir", dir}, {"file", FreeName(number)}, {"error", status}});
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
  Status RecoverNewestSegment() {
    if (segments.empty()) return Status::Ok();
    Segment& newest = segments.back();
    const std::string path = SegmentPath(newest);
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
      holds_waiting |= record.sequence > state.consumed_through;
      damage.Mark();
    }
    next_sequence = std::max({newest.first, state.consumed_through + 1, highest + 1});
    const std::uint64_t tail = newest.size - intact_end;
    // In a recycled file, what follows the last intact record is the previous use's data
    // (cut or garbled at the boundary): it is always treated as the end.
    const bool stale_tail = newest.recycled;
    const bool damaged_tail = damage.total > damage.marked_total && !stale_tail &&
                              !AllZero(**file, intact_end, newest.size);
    file->reset();
    if (damaged_tail) {
      const std::uint64_t skip_to =
          std::max(highest, newest.first - 1) + 1 + tail / kRecordOverhead;
      Log().Error(
          "the newest spool segment ends in damage; appends go to a new segment and skip the "
          "sequence numbers the damage may have held",
          {{"dir", dir},
           {"segment", newest.name()},
           {"damaged_bytes", tail},
           {"reason", damage.reason_since_mark},
           {"next_sequence", std::max(next_sequence, skip_to)}});
      next_sequence = std::max(next_sequence, skip_to);
      AbandonNewestSegment();
      return Status::Ok();
    }
    if (!holds_waiting && state.consumed_through + 1 >= newest.first) {
      // Nothing in it or before it waits: the next append starts a segment of its own. A file
      // with anything after its last intact record is not reused: blocks of a torn group may
      // lie there, past older data, with the sequences the next appends will take.
      if (RetireSegments({newest.first}, /*recycle=*/tail == 0).ok()) return Status::Ok();
    }
    if (tail > 0) {
      // Also after a clean stop in a recycled file: a torn group's later blocks may lie
      // beyond the earlier records, and must not outlive the reuse of their sequences.
      Log().Write(stale_tail ? ::uplink::log::Level::kInfo : ::uplink::log::Level::kWarn,
                  stale_tail ? "cutting a recycled file's earlier records off the newest "
                               "spool segment"
                             : "cutting a torn write off the newest spool segment",
                  {{"dir", dir}, {"segment", newest.name()}, {"bytes", tail}});
      Status cut = fs.Truncate(path, intact_end);
      if (!cut.ok()) {
        // What stays may hold a torn group's records: their sequences are never reused, and
        // the file never is either.
        next_sequence =
            std::max(next_sequence, std::max(highest, newest.first - 1) + 1 + tail / kRecordOverhead);
        Log().Error("could not cut the torn write off; appends go to a new segment and skip "
                    "the sequence numbers it may hold",
                    {{"dir", dir}, {"error", cut}, {"next_sequence", next_sequence}});
        newest.readable_end = intact_end;
        newest.reusable = false;
        AbandonNewestSegment();
        return Status::Ok();
      }
      newest.size = newest.readable_end = newest.allocated = intact_end;
    }
    Result<std::unique_ptr<InPlaceFile>> writable = fs.OpenInPlace(path);
    if (!writable.ok()) {
      Log().Error("could not reopen the newest spool segment; appends go to a new segment",
                  {{"dir", dir}, {"error", writable.status()}});
      AbandonNewestSegment();
      return Status::Ok();
    }
    active = std::move(*writable);
    return Status::Ok();
  }

  // Whether bytes [from, to) of `file` are all zero; false if they cannot be read.
  static bool AllZero(const ReadableFile& file, std::uint64_t from, std::uint64_t to) {
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

  // The newest segment takes no more appends: the next group starts a new one, whose name
  // (its first sequence) must differ from this one's.
  void AbandonNewestSegment() {
    roll_before_next_group = true;
    if (next_sequence == segments.back().first) {
      abandoned.emplace_back(next_sequence, next_sequence);
      ++next_sequence;
    }
  }

  // ---- STATE, removal, the oldest record's time (hold io_mu, or be in Open) ----------------

  // Writes `next` into the slot that does not hold the last synced state, so that slot
  // survives a power loss during the write; with kSync makes it the synced one. A lazy write
  // survives a crash of the process (it is in the page cache) but a power loss may take it:
  // the cursor then goes back to the last synced state, which is safe because every segment
  // is retired only after a synced state has moved past it, and the console recognises the
  // records sent again.
  enum class StateDurability { kLazy, kSync };
  Status WriteState(PersistentState& next, StateDurability durability) {
    next.generation = state.generation + 1;
    const size_t slot = 1 - synced_slot;
    UPLINK_RETURN_IF_ERROR(state_file->WriteAt(slot * kSlotSize, EncodeSlot(next)));
    if (durability == StateDurability::kLazy) {
      state_unsynced = true;
      return Status::Ok();
    }
    UPLINK_RETURN_IF_ERROR(state_file->Sync());
    synced_slot = slot;
    state_unsynced = false;
    return Status::Ok();
  }

  // Makes a lazily written cursor durable: the slot it went to becomes the synced one.
  Status SyncState() {
    if (!state_unsynced) return Status::Ok();
    UPLINK_RETURN_IF_ERROR(state_file->Sync());
    synced_slot = 1 - synced_slot;
    state_unsynced = false;
    return Status::Ok();
  }

  // Makes `next` (just persisted) the state, and forgets what it consumed. Requires mu.
  void AdoptStateLocked(const PersistentState& next) {
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
    std::erase_if(abandoned, [&](const auto& range) { return range.second <= consumed; });
  }

  // Retires every segment but the newest whose records are all consumed.
  Status RemoveConsumedSegments() {
    std::vector<std::uint64_t> doomed;
    {
      std::lock_guard guard(mu);
      for (size_t i = 0; i + 1 < segments.size() && LastSequenceOf(i) <= state.consumed_through;
           ++i) {
        doomed.push_back(segments[i].first);
      }
    }
    if (doomed.empty()) return Status::Ok();
    // Never on the word of a lazily written cursor: a power loss could take it back below
    // the retired segments (a segment may have started since Consume decided not to sync).
    if (Status synced = SyncState(); !synced.ok()) {
      Log().Warn("could not sync the spool cursor; consumed segments stay until it is",
                 {{"dir", dir}, {"error", synced}});
      return synced;
    }
    return RetireSegments(doomed, /*recycle=*/true);
  }

  // Removes segments whose records are all consumed or dropped, or with `recycle` keeps
  // their files for reuse while the pool has room (a file under half a segment is not worth
  // keeping). Stops at the first failure, which is logged and returned: the cursor is
  // persisted already, so the next Consume or Open retires what is left.
  Status RetireSegments(const std::vector<std::uint64_t>& doomed, bool recycle) {
    Status result;
    size_t removed = 0;
    for (std::uint64_t first : doomed) {
      std::optional<FreeSegment> kept;
      std::string path;
      {
        std::lock_guard guard(mu);
        auto index = FindSegment(first);
        if (!index) continue;
        path = SegmentPath(segments[*index]);
        if (recycle && segments[*index].reusable && free_segments.size() < kMaxFreeSegments &&
            segments[*index].allocated >= limits.segment_bytes / 2) {
          kept = FreeSegment{first, segments[*index].allocated};
        }
      }
      Status status = kept ? fs.Rename(path, PathOf(FreeName(first))) : fs.Remove(path);
      if (!status.ok() && status.code() != StatusCode::kNotFound) {
        Log().Warn("could not remove a consumed spool segment; will retry",
                   {{"dir", dir}, {"file", path}, {"error", status}});
        result = status;
        break;
      }
      std::lock_guard guard(mu);
      if (auto index = FindSegment(first))
        segments.erase(segments.begin() + static_cast<long>(*index));
      if (kept && status.ok()) free_segments.push_back(*kept);
      ++removed;
    }
    if (removed > 0) {
      Status synced = fs.SyncDir(dir);
      if (!synced.ok())
        Log().Warn("could not sync the spool directory", {{"dir", dir}, {"error", synced}});
    }
    return result;
  }

  // Finds the append time of the oldest waiting record: from the records the reader returned
  // when they cover it, else by reading from the end of the record consumed_through (when
  // the reader returned it) or from the start of the segment that holds it.
  void RefreshOldest() {
    std::uint64_t after = 0;
    std::optional<ReadMark> hint;
    std::vector<Segment> snapshot;
    {
      std::lock_guard guard(mu);
      after = state.consumed_through;
      if (last_durable <= after) {
        oldest = std::nullopt;
        return;
      }
      if (!returned.empty() && trimmed_through <= after) {
        oldest = returned.front().appended_at;
        return;
      }
      if (anchor && anchor->sequence == after) hint = anchor;
      snapshot.assign(segments.begin(), segments.end());
    }
    std::optional<WallTime> found = FindFirstWaiting(snapshot, after, hint);
    std::lock_guard guard(mu);
    if (state.consumed_through == after) oldest = found;
  }

  std::optional<WallTime> FindFirstWaiting(const std::vector<Segment>& snapshot,
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
      Result<std::unique_ptr<ReadableFile>> file =
          fs.OpenReadable(SegmentPath(snapshot[index]));
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

  // ---- Append ----------------------------------------------------------------------------

  Result<std::uint64_t> Append(std::string_view payload) {
    if (payload.size() > limits.max_record_bytes) {
      return ResourceExhaustedError(
          "a spool record of " + std::to_string(payload.size()) + " bytes is over the " +
          std::to_string(limits.max_record_bytes) + "-byte limit for one record");
    }
    PendingAppend me;
    me.payload = payload;
    std::unique_lock lock(mu);
    queue.push_back(&me);
    if (queue.size() > 1) queue_grew.notify_one();
    me.wakeup.wait(lock, [&] { return me.done || queue.front() == &me; });
    if (me.done) {
      if (!me.status.ok()) return me.status;
      return me.sequence;
    }
    // The leader. The members of the last group were released together and are coming
    // back: waiting a moment for them to queue (PostgreSQL's commit_delay) makes one sync
    // serve them all, where taking the queue at once would split them over two.
    if (queue.size() < last_group_size) {
      queue_grew.wait_for(lock, kGroupGather, [&] { return queue.size() >= last_group_size; });
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
    Status status = WriteGroup(lock, group);
    for (PendingAppend* member : group) {
      if (member == &me) continue;
      member->status = status;
      member->done = true;
      member->wakeup.notify_one();
    }
    if (!status.ok()) return status;
    return me.sequence;
  }

  void EncodeGroup(const std::vector<PendingAppend*>& group, std::uint64_t first, WallTime now,
                   std::uint64_t offset) {
    group_buffer.clear();
    framing::Writer writer(offset);
    char time[kTimePrefixBytes];
    PutFixed64(time, static_cast<std::uint64_t>(ToUnixMicros(now)));
    for (size_t i = 0; i < group.size(); ++i) {
      record_buffer.assign(time, sizeof time);
      record_buffer.append(group[i]->payload);
      writer.AddRecord(first + i, record_buffer, &group_buffer);
    }
  }

  // Hands the front of the queue to the next leader. Requires mu.
  void PassLeadership(size_t members) {
    for (size_t i = 0; i < members; ++i) queue.pop_front();
    if (!queue.empty()) queue.front()->wakeup.notify_one();
  }

  // Writes one group and returns once it is durable. Writing and syncing overlap: the leader
  // writes its group and hands the queue on, then waits until a sync covers its bytes. When
  // no sync is under way, a waiting group starts one that covers everything written so far,
  // so one sync makes several groups durable at once, while the next groups are encoded and
  // written behind it (PostgreSQL flushes its WAL "up to" a position the same way). When a
  // write or a sync fails, every group not yet durable fails; the first failed group cuts the
  // segment back to the durable end once the others are out (see the top of this file).
  //
  // Called and returns with `lock` (on mu) held; releases it for the I/O. Passes the
  // leadership on before it returns.
  Status WriteGroup(std::unique_lock<std::mutex>& lock, const std::vector<PendingAppend*>& group) {
    // A new segment, or recovering from a failure, waits for the groups still in flight.
    auto must_roll = [&] {
      return !active || roll_before_next_group || written_end >= limits.segment_bytes;
    };
    pipeline_changed.wait(lock, [&] {
      return !pipeline_failure && (groups_in_flight == 0 || !must_roll());
    });
    const WallTime now = clock.Now();
    if (must_roll()) {
      const std::uint64_t first = next_sequence;
      lock.unlock();
      Status rolled = Roll(first);
      lock.lock();
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
    lock.unlock();

    EncodeGroup(group, first, now, start);
    const std::uint64_t end = start + group_buffer.size();
    Status status = MakeRoom(start);
    if (status.ok()) {
      InPlaceFile* file = nullptr;
      {
        std::lock_guard guard(mu);
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
    lock.lock();
    // A group that failed to write keeps the queue until it is repaired, so that no group
    // is written behind it for nothing.
    const bool leading = !status.ok();
    if (status.ok()) {
      unsynced.push_back(UnsyncedGroup{first, first + group.size() - 1, end, now});
      PassLeadership(group.size());
    }
    while (true) {
      Segment& segment = segments.back();
      // Durable first: a sync that covered this group counts even when a later group failed.
      if (status.ok() && segment.size >= end) break;
      if (pipeline_failure) {
        Status failure = *pipeline_failure;
        --groups_in_flight;
        pipeline_changed.notify_all();
        if (leading) PassLeadership(group.size());
        return failure.WithContext("appending to the spool (a group before it failed)");
      }
      if (!status.ok() && segment.size >= start && !syncing) {
        RepairFailedGroups(lock, status, first, start);  // everything before it is durable
        PassLeadership(group.size());
        return status.WithContext("appending to the spool");
      }
      if (status.ok() && !syncing) {
        status = SyncWrittenGroups(lock);
        if (!status.ok()) {
          RepairFailedGroups(lock, status, unsynced.front().first, segment.size);
          return status.WithContext("appending to the spool");
        }
        continue;
      }
      pipeline_changed.wait(lock);
    }
    for (size_t i = 0; i < group.size(); ++i) group[i]->sequence = first + i;
    --groups_in_flight;
    pipeline_changed.notify_all();  // a roll or a repair may be waiting for the count
    return Status::Ok();
  }

  // Syncs the active segment, making every group written so far durable. Called and returns
  // with `lock` held; releases it for the sync.
  Status SyncWrittenGroups(std::unique_lock<std::mutex>& lock) {
    const std::uint64_t target = unsynced.back().end;
    InPlaceFile* file = active.get();
    syncing = true;
    lock.unlock();
    Status status = file->Sync();
    lock.lock();
    syncing = false;
    if (!status.ok()) return status;
    Segment& segment = segments.back();
    segment.size = segment.readable_end = target;
    while (!unsynced.empty() && unsynced.front().end <= target) {
      if (last_durable <= state.consumed_through) oldest = unsynced.front().appended_at;
      last_durable = unsynced.front().last;
      unsynced.pop_front();
    }
    pipeline_changed.notify_all();
    return Status::Ok();
  }

  // The first failed group, or the group whose sync failed: once every other group in flight
  // has failed out, cuts the segment back to `start` (the durable end) and decides whether
  // the failed sequences, from `first`, may be used again.
  void RepairFailedGroups(std::unique_lock<std::mutex>& lock, const Status& status,
                          std::uint64_t first, std::uint64_t start) {
    pipeline_failure = status;
    pipeline_changed.notify_all();
    pipeline_changed.wait(lock, [&] { return groups_in_flight == 1; });
    const std::uint64_t last_reserved = next_sequence - 1;
    const std::string path = SegmentPath(segments.back());
    InPlaceFile* file = active.get();
    lock.unlock();
    // The cut must be durable before the sequences are reused: otherwise a power loss could
    // bring back records whose Append failed (and which the caller may retry).
    Status cut = fs.Truncate(path, start);
    if (cut.ok()) cut = file->Sync();
    if (!cut.ok()) {
      Log().Error(
          "could not remove a failed append from the spool; its sequence numbers are skipped",
          {{"dir", dir}, {"file", path}, {"error", cut}});
    }
    lock.lock();
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
    pipeline_changed.notify_all();
  }

  // Starts segment `first`, in a file kept for reuse when there is one, and makes its
  // directory entry durable before anything is written to it.
  Status Roll(std::uint64_t first) {
    std::optional<FreeSegment> reused;
    {
      std::lock_guard guard(mu);
      if (!free_segments.empty()) {
        reused = free_segments.front();
        free_segments.pop_front();
      }
    }
    Segment segment{first, 0, 0, 0, false};
    if (reused) {
      segment.recycled = true;
      Status renamed = fs.Rename(PathOf(FreeName(reused->name)), SegmentPath(segment));
      if (renamed.ok()) {
        segment.allocated = reused->bytes;
      } else {
        segment.recycled = false;
        Log().Warn("could not reuse a spool file; starting a new one",
                   {{"dir", dir}, {"file", FreeName(reused->name)}, {"error", renamed}});
        std::lock_guard guard(mu);
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
        std::lock_guard guard(mu);
        abandoned.emplace_back(first, first);
        next_sequence = std::max(next_sequence, first + 1);
      }
      return status.WithContext("starting a spool segment");
    }
    std::lock_guard guard(mu);
    segments.push_back(segment);
    active = std::move(*file);
    written_end = 0;
    roll_before_next_group = false;
    return Status::Ok();
  }

  // Gives the files kept for reuse back to the disk (the cap counts them).
  Status DiscardFreeSegments() {
    std::deque<FreeSegment> discarded;
    {
      std::lock_guard guard(mu);
      discarded.swap(free_segments);
    }
    Status result;
    for (const FreeSegment& free : discarded) {
      Status status = fs.Remove(PathOf(FreeName(free.name)));
      if (status.ok() || status.code() == StatusCode::kNotFound) continue;
      if (result.ok()) result = status;
      std::lock_guard guard(mu);
      free_segments.push_back(free);  // still on disk: still counted
    }
    if (!discarded.empty()) {
      Status synced = fs.SyncDir(dir);
      if (result.ok()) result = synced;
    }
    return result.WithContext("removing spool files kept for reuse");
  }

  // The disk the spool will hold once the encoded group is written at `start` of the active
  // segment: in a recycled file the group overwrites bytes already counted. Requires mu.
  std::uint64_t BytesAfterGroup(std::uint64_t start) const {
    const Segment& active = segments.back();
    const std::uint64_t footprint = std::max(active.size, active.allocated);
    return TotalBytes() - footprint + std::max(footprint, start + group_buffer.size());
  }

  // Enforces the cap before the encoded group is written at `start`: drops whole oldest
  // segments, counting the waiting records they held, persists the cursor past them, then
  // removes them. The active segment never needs to go: it is below segment_bytes (at most
  // half the cap) or a new one was started, and a group is at most a quarter of the cap.
  Status MakeRoom(std::uint64_t start) {
    {
      std::lock_guard guard(mu);
      if (BytesAfterGroup(start) <= limits.max_bytes) return Status::Ok();
    }
    std::lock_guard io(io_mu);
    while (true) {
      bool has_free = false;
      {
        std::lock_guard guard(mu);
        if (BytesAfterGroup(start) <= limits.max_bytes) return Status::Ok();
        has_free = !free_segments.empty();
      }
      // Files kept for reuse go before any waiting record does (if they can be removed).
      if (has_free) {
        Status discarded = DiscardFreeSegments();
        if (discarded.ok()) continue;
        Log().Warn("could not remove spool files kept for reuse; dropping records instead",
                   {{"dir", dir}, {"error", discarded}});
      }
      PersistentState next;
      std::vector<std::uint64_t> doomed;
      std::uint64_t consumed_before = 0;
      {
        std::lock_guard guard(mu);
        const std::uint64_t total = BytesAfterGroup(start);
        if (total <= limits.max_bytes) return Status::Ok();
        next = state;
        consumed_before = state.consumed_through;
        std::uint64_t freed = 0;
        for (size_t i = 0;
             i + 1 < segments.size() && total - freed > limits.max_bytes;
             ++i) {
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
        Status persisted = WriteState(next, StateDurability::kSync);
        if (!persisted.ok()) {
          return persisted.WithContext(
              "persisting the spool cursor to drop records at the size cap");
        }
        {
          std::lock_guard guard(mu);
          AdoptStateLocked(next);
        }
        Log().Warn("spool full: dropped its oldest records",
                   {{"dir", dir},
                    {"consumed_through", next.consumed_through},
                    {"dropped_records_total", next.losses.dropped.records}});
      }
      UPLINK_RETURN_IF_ERROR(
          RetireSegments(doomed, /*recycle=*/false)
              .WithContext("dropping spool segments at the size cap"));
      RefreshOldest();
    }
  }

  // ---- Read ------------------------------------------------------------------------------

  Result<std::vector<SpoolRecord>> Read(size_t max_bytes, size_t max_records) {
    std::vector<SpoolRecord> out;
    std::vector<ReadMark> marks;
    size_t bytes = 0;
    Status error;
    while (out.size() < std::max<size_t>(max_records, 1)) {
      std::optional<ReadItem> item;
      if (stash) {
        item = std::move(stash);
        stash.reset();
        std::lock_guard guard(mu);
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
    std::lock_guard guard(mu);
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

  Status OpenCursor(std::uint64_t segment, std::uint64_t offset, std::uint64_t limit) {
    Cursor opened;
    opened.segment = segment;
    {
      std::lock_guard guard(mu);
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

  // The next record for the reader; none at the durable end.
  Result<std::optional<ReadItem>> NextRecord() {
    while (true) {
      std::uint64_t consumed = 0, limit = 0, following = 0;
      bool is_last = false;
      std::optional<std::pair<std::uint64_t, std::uint64_t>> open_at;  // segment, offset
      {
        std::lock_guard guard(mu);
        consumed = state.consumed_through;
        expected = std::max(expected, consumed + 1);
        std::optional<size_t> index;
        if (cursor) index = FindSegment(cursor->segment);
        if (!index) {  // not started, or its segment was removed meanwhile
          cursor.reset();
          if (segments.empty()) return std::optional<ReadItem>();
          if (anchor && anchor->sequence == consumed && expected == consumed + 1 &&
              FindSegment(anchor->segment)) {
            open_at.emplace(anchor->segment, anchor->end_offset);
            index = FindSegment(anchor->segment);
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
      if (record.sequence <= consumed) {
        std::lock_guard guard(mu);
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
      item.mark =
          ReadMark{record.sequence, decoded->appended_at, cursor->segment, record.end_offset};
      return std::optional<ReadItem>(std::move(item));
    }
  }

  // Intact record `sequence` arrived: the sequences skipped since the last one, and the
  // damaged bytes met meanwhile, become a pending corruption.
  void NoteArrival(std::uint64_t sequence) {
    std::lock_guard guard(mu);
    PendingCorruption found;
    found.bytes = unattributed_damage_bytes;
    unattributed_damage_bytes = 0;
    found.first = std::max(expected, state.consumed_through + 1);
    found.last = sequence - 1;
    if (found.first <= found.last) {
      found.records = found.last - found.first + 1 - AbandonedWithin(found.first, found.last);
    }
    if (found.last <= state.consumed_through || (found.records == 0 && found.bytes == 0)) return;
    Log().Warn("spool records missing", {{"dir", dir},
                                         {"first_missing", found.first},
                                         {"records", found.records},
                                         {"damaged_bytes", found.bytes}});
    pending_corruption.push_back(found);
  }

  void Rewind() {
    std::lock_guard guard(mu);
    cursor.reset();
    stash.reset();
    expected = state.consumed_through + 1;
    pending_corruption.clear();
    unattributed_damage_bytes = 0;
    returned.clear();
    trimmed_through = 0;
  }

  // ---- Consume ---------------------------------------------------------------------------

  Status Consume(std::uint64_t through, LossCount rejected) {
    std::lock_guard io(io_mu);
    PersistentState next;
    bool advances = false;
    bool retires = false;
    {
      std::lock_guard guard(mu);
      through = std::min(through, last_durable);
      advances = through > state.consumed_through;
      retires = segments.size() > 1 && LastSequenceOf(0) <= std::max(through, state.consumed_through);
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
      // power loss behind (WriteState).
      UPLINK_RETURN_IF_ERROR(
          WriteState(next, retires ? StateDurability::kSync : StateDurability::kLazy)
              .WithContext("persisting the spool cursor"));
      std::lock_guard guard(mu);
      AdoptStateLocked(next);
    }
    (void)RemoveConsumedSegments();  // logged; retried by the next Consume or Open
    if (advances) RefreshOldest();
    return Status::Ok();
  }

  SpoolStats Stats() const {
    std::lock_guard guard(mu);
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
    stats.segments = segments.size();
    stats.losses = state.losses;
    for (const PendingCorruption& found : pending_corruption) {
      stats.losses.corrupt.records += found.records;
      stats.losses.corrupt.bytes += found.bytes;
    }
    stats.losses.corrupt.bytes += unattributed_damage_bytes;
    return stats;
  }

  FileSystem& fs;
  const std::string dir;
  const Limits limits;
  const Clock& clock;
  std::unique_ptr<FileLock> lock;
  std::unique_ptr<InPlaceFile> state_file;

  std::mutex io_mu;  // taken before mu

  mutable std::mutex mu;
  PersistentState state;  // as last written to STATE
  size_t synced_slot = 0;  // the STATE slot holding the last synced state
  bool state_unsynced = false;
  std::deque<Segment> segments;
  std::unique_ptr<InPlaceFile> active;  // segments.back(), when appends may go there
  std::deque<FreeSegment> free_segments;  // consumed segment files kept for reuse
  bool roll_before_next_group = false;
  std::uint64_t next_sequence = 1;  // the next group's first; moved by the leader only
  std::uint64_t last_durable = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> abandoned;  // skipped after failures
  std::deque<PendingAppend*> queue;
  std::condition_variable queue_grew;  // an Append queued behind the front
  size_t last_group_size = 1;
  // The write pipeline (WriteGroup): where the next group goes in the active segment, and
  // the groups written but not yet synced, which sync in ticket order.
  struct UnsyncedGroup {
    std::uint64_t first = 0, last = 0;  // its sequences
    std::uint64_t end = 0;              // where its bytes end in the active segment
    WallTime appended_at;
  };
  std::uint64_t written_end = 0;
  std::deque<UnsyncedGroup> unsynced;  // written, in order, not yet durable
  bool syncing = false;
  int groups_in_flight = 0;  // from reserving sequences until durable or failed
  std::optional<Status> pipeline_failure;  // set while the first failed group repairs
  std::condition_variable pipeline_changed;
  std::optional<WallTime> oldest;
  std::deque<PendingCorruption> pending_corruption;  // in sequence order
  std::uint64_t unattributed_damage_bytes = 0;
  std::deque<ReadMark> returned;      // returned by Read and waiting, in order
  std::uint64_t trimmed_through = 0;  // marks let go of for room, up to this sequence
  std::optional<ReadMark> anchor;     // where the record consumed_through ends

  // The leader's buffers.
  std::string group_buffer;
  std::string record_buffer;

  // The reader's position: used by the reading thread only (Read and Rewind).
  ReaderReporter reporter;
  std::optional<Cursor> cursor;
  std::uint64_t expected = 1;     // the sequence the reader expects next
  std::optional<ReadItem> stash;  // read, but over the last batch's byte limit
};

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

SpoolStats Spool::Stats() const { return impl_->Stats(); }

const std::string& Spool::dir() const { return impl_->dir; }

}  // namespace uplink::spool
