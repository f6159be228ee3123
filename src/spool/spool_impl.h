// The spool's private parts, shared by the files that implement it (LevelDB's db_impl.h):
//   recovery.cc  Open: the directory, STATE, the files kept for reuse, the newest segment
//   append.cc    Append: reserving, writing and syncing, rolling segments, the cap, failures
//   read.cc      Read and Rewind: the reader's cursor, the tail and the damage it meets
//   spool.cc     Consume, Stats, retiring segments, the oldest record's time, the interface
//   write_ahead.cc  WriteAhead: files of zeroes that hold the cap on disk (reserve_disk)
//
// Threads. Appends run side by side, as PostgreSQL inserts WAL records: each caller reserves
// its record's sequence number and place in the active segment under `mu`, then encodes and
// writes it without holding `mu`, and waits until a sync covers it. A sync covers every
// record written before it started, up to the first one still being written; while one runs,
// the next records are written behind it, and the next sync covers them all (group commit
// without a leader to hand over to). Everything that rewrites STATE or removes segments
// (Consume, Open, and an Append when the cap forces a drop) holds `io_mu`, taken before
// `mu`, so that STATE is written in the order the cursor moves and a removal never races
// another. Which mutex guards what is written on each member below and checked by clang
// (mutex.h); what only one thread touches says so.
//
// A failed append. When the write of a record or a sync fails, every record not yet durable
// fails with it; the segment is truncated back to the durable end and the cut synced.
// Sequence numbers are reused only when both succeed: no reader can have seen those records
// (readers stop at the durable end), and a power loss cannot bring back records whose Append
// failed. If either fails, the sequences are abandoned (never reused, and not counted as
// corrupt when found missing) and the next record starts a new segment, away from the
// unknown bytes. Either way, a failure after which the segment holds records also makes the
// next record start a new segment, so that consuming can free the old one on a full disk.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/log.h"
#include "spool/filename.h"
#include "spool/log_reader.h"
#include "spool/mutex.h"
#include "spool/spool.h"
#include "spool/state_file.h"

namespace uplink::spool {

const ::uplink::log::Logger& SpoolLog();

// The options, resolved and checked (ResolveLimits in spool.cc).
struct Limits {
  std::uint64_t max_bytes = 0;
  std::uint64_t max_record_bytes = 0;
  std::uint64_t segment_bytes = 0;
  bool reserve_disk = false;  // as asked (Impl::reserve_disk says whether it is done)
};

// A record's early write-out (StartWriteback) below this size is left to the sync, which
// sends it with its neighbours in one request: a small request costs the disk about as much
// as a large one.
constexpr std::uint64_t kMinWriteOut = 32 << 10;
// The newest durable records kept in memory for a reader that keeps up, in bytes (each
// record's payload and its entry): enough for a shipper's batch of 64 KiB records from
// eight writers several syncs deep, little beside a spool of hundreds of MiB.
constexpr std::uint64_t kMaxTailBytes = 4 << 20;
// Records a reader has returned and that wait to be consumed, remembered so that the append
// time of the oldest waiting record is known without I/O (a shipper's batch fits easily).
constexpr size_t kMaxRememberedReads = 16384;
// Consumed segment files kept for reuse without reserve_disk. Overwriting a file's blocks
// needs no block allocation, so its fdatasync flushes data without persisting metadata
// (about 1.5 times the appending rate on ext4); the writer and a reader that keeps up need
// two at most. With reserve_disk every one is kept, up to the cap.
constexpr size_t kMaxFreeSegments = 2;
// Files written ahead are numbered from here up: sequence numbers never get this far, so
// their names never collide with a consumed segment's file, which keeps its first sequence.
constexpr std::uint64_t kFirstWriteAheadNumber = 1ull << 63;
// WriteAhead writes and syncs this much at a time, so that an append's sync never waits
// behind more than this of zeroes, and a cancellation is seen as soon.
constexpr std::uint64_t kWriteAheadChunk = 1 << 20;
// The reader never reassembles more than this (or the configured record limit, if larger),
// so that a record written under a larger limit is still read.
constexpr std::uint64_t kMinReaderRecordLimit = 16ull << 20;

LossCount& operator+=(LossCount& a, const LossCount& b);

struct Spool::Impl {
  struct Segment {
    std::uint64_t first = 0;         // its first sequence (its name)
    std::uint64_t size = 0;          // bytes written, as far as this process knows
    std::uint64_t readable_end = 0;  // readers stop here: everything before is durable
    // The disk the file takes: larger than `size` while a recycled file is being overwritten
    // (its previous records follow the new ones; readers stop at them: their sequences are
    // lower), or while a new one has blocks preallocated past its end.
    std::uint64_t allocated = 0;
    // Bytes of a recycled file that it already had: writing there allocates no blocks.
    std::uint64_t overwritable = 0;
    bool recycled = false;
    // False when the file may hold a torn write's records past what was cut: never reused.
    bool reusable = true;
    std::string name() const { return SegmentFileName(first, recycled); }
  };

  struct FreeSegment {
    std::uint64_t name = 0;  // the number in its name
    std::uint64_t bytes = 0;
  };

  // An Append from reserving its place in the active segment until its write returns. On
  // its caller's stack; guarded by `mu`.
  struct PendingWrite {
    std::uint64_t sequence = 0;
    std::uint64_t start = 0, end = 0;  // its bytes in the active segment
    WallTime appended_at;
    bool written = false;  // its write returned, and succeeded
    CondVar changed;       // it became durable, may start a sync, or failed
    // Its payload, for the tail (when it wants it): made by its caller before `written`.
    std::optional<std::string> tail_copy;
  };

  // A record written to the active segment and not yet durable; they sync in order.
  struct UnsyncedRecord {
    std::uint64_t sequence = 0;
    std::uint64_t end = 0;  // where its bytes end in the active segment
    WallTime appended_at;
    std::optional<std::string> tail_copy;
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

  // A durable record the reader has not been given, held in memory (the tail).
  struct TailRecord {
    ReadMark mark;
    std::string payload;
    std::uint64_t Cost() const { return payload.size() + sizeof(TailRecord); }
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
    void Corruption(std::uint64_t offset, std::uint64_t bytes, std::string_view reason) override;

   private:
    Impl& impl_;
  };

  Impl(FileSystem& fs, std::string dir, Limits limits, const Clock& clock)
      : fs(fs), dir(std::move(dir)), limits(limits), clock(clock), reporter(*this) {}
  // A clean close leaves the cursor durable, so only a power loss ever sends records again.
  ~Impl();

  std::string PathOf(std::string_view name) const { return dir + "/" + std::string(name); }
  std::string SegmentPath(const Segment& segment) const { return PathOf(segment.name()); }
  size_t ReaderRecordLimit() const;

  // ---- the segment list (spool.cc) -------------------------------------------------------
  std::optional<size_t> FindSegment(std::uint64_t first) const REQUIRES(mu);
  // The segment that holds `sequence`, or the oldest when it is older than all of them.
  // The list must not be empty.
  size_t SegmentHolding(std::uint64_t sequence) const REQUIRES(mu);
  // The last sequence segment `index` can hold.
  std::uint64_t LastSequenceOf(size_t index) const REQUIRES(mu);
  // The disk the spool holds: segments and the files kept for reuse.
  std::uint64_t TotalBytes() const REQUIRES(mu);
  std::uint64_t AbandonedWithin(std::uint64_t first, std::uint64_t last) const REQUIRES(mu);

  // ---- Open (recovery.cc) ----------------------------------------------------------------
  Status Recover() EXCLUDES(io_mu, mu);
  Result<bool> LoadState(std::optional<std::uint64_t> first_segment,
                         const std::vector<std::uint64_t>& frees) REQUIRES(io_mu) EXCLUDES(mu);
  void RecoverFreeSegments(std::vector<std::uint64_t> numbers) EXCLUDES(mu);
  Status RecoverNewestSegment() REQUIRES(io_mu) EXCLUDES(mu);
  static bool AllZero(const ReadableFile& file, std::uint64_t from, std::uint64_t to);
  // The newest segment takes no more appends: the next record starts a new one, whose name
  // (its first sequence) must differ from this one's.
  void AbandonNewestSegment() REQUIRES(mu);

  // ---- STATE, retiring segments, the oldest record's time (spool.cc) --------------------
  // Makes `next` (just persisted) the state, and forgets what it consumed.
  void AdoptState(const PersistentState& next) REQUIRES(mu);
  // Retires every segment but the newest whose records are all consumed.
  Status RemoveConsumedSegments() REQUIRES(io_mu) EXCLUDES(mu);
  // Removes segments whose records are all consumed or dropped, or with `recycle` keeps
  // their files for reuse while the pool has room (a file under half a segment is not worth
  // keeping). Stops at the first failure, which is logged and returned: the cursor is
  // persisted already, so the next Consume or Open retires what is left.
  Status RetireSegments(const std::vector<std::uint64_t>& doomed, bool recycle)
      REQUIRES(io_mu) EXCLUDES(mu);
  // Finds the append time of the oldest waiting record: from the records the reader returned
  // when they cover it, or the tail when it holds it, else by reading from the end of the
  // record consumed_through (when the reader returned it) or from the start of the segment
  // that holds it.
  void RefreshOldest() EXCLUDES(mu);
  std::optional<WallTime> FindFirstWaiting(const std::vector<Segment>& snapshot,
                                           std::uint64_t after,
                                           const std::optional<ReadMark>& hint);
  Status Consume(std::uint64_t through, LossCount rejected) EXCLUDES(io_mu, mu);
  SpoolStats Stats() const EXCLUDES(mu);

  // ---- Append (append.cc) ----------------------------------------------------------------
  Result<std::uint64_t> Append(std::string_view payload) EXCLUDES(io_mu, mu);
  // Waits until a record may be reserved in the active segment, starting a new segment when
  // the active one is full (once the appends in flight are out).
  Status ReadyToReserve(size_t payload_bytes) REQUIRES(mu) EXCLUDES(io_mu);
  // Whether the next record (of `payload_bytes`) starts a new segment.
  bool MustRoll(size_t payload_bytes) const REQUIRES(mu);
  // Notes that `write` returned; records written without a gap before them become unsynced.
  void WriteReturned(PendingWrite& write, bool succeeded) REQUIRES(mu);
  // Waits until `write`'s record is durable, syncing when no sync covers it.
  Status AwaitDurable(PendingWrite& write, Status written) REQUIRES(mu);
  // Syncs the active segment, making every record written so far durable; releases `mu` for
  // the sync.
  Status SyncWritten() REQUIRES(mu);
  // Fails every record not yet durable, and once their appends are out cuts the segment back
  // to `start` (the durable end) and decides whether the sequences from `first` may be used
  // again.
  void RepairFailure(const Status& status, std::uint64_t first, std::uint64_t start)
      REQUIRES(mu);
  // An append leaves the pipeline, failed.
  void LeaveFailed(PendingWrite& write) REQUIRES(mu);
  // Wakes the appends whose records are now durable, and the first one that is not, which
  // may start the next sync or repair a failure.
  void WakeAwaiting() REQUIRES(mu);
  // Wakes every append in flight (a failure is being repaired).
  void WakeAllAwaiting() REQUIRES(mu);
  size_t AppendsNotDurable() const REQUIRES(mu);
  // Starts segment `first`, in a file kept for reuse when there is one, and makes its
  // directory entry durable before anything is written to it.
  Status Roll(std::uint64_t first) EXCLUDES(io_mu, mu);
  // Allocates a new segment file's blocks up front, as far as the cap leaves room (so that
  // it never drops a record): appending to them needs no block allocation to be made
  // durable with every sync, and no free space. A torn segment releases them at Open.
  void Preallocate(InPlaceFile& file, Segment& segment) EXCLUDES(mu);
  // Gives the oldest file kept for reuse back to the disk (the cap counts it).
  Status DiscardFreeSegment() REQUIRES(io_mu) EXCLUDES(mu);
  // Whether a consumed segment's file of `bytes` is kept for reuse, with the pool as it is.
  bool KeepsForReuse(std::uint64_t bytes) const REQUIRES(mu);
  // Cancels a WriteAhead in progress and waits until its file is gone.
  void CancelWriteAhead() REQUIRES(io_mu) EXCLUDES(mu);
  // The disk the spool will hold once bytes [start, end) of the active segment are written:
  // in a recycled file a record overwrites bytes already counted.
  std::uint64_t BytesAfterWrite(std::uint64_t start, std::uint64_t end) const REQUIRES(mu);
  Status MakeRoom(std::uint64_t start, std::uint64_t end) EXCLUDES(io_mu, mu);
  // Drops whole oldest segments, never the newest, until their files add up to `over` bytes:
  // counts the waiting records they held, persists the cursor past them, then retires them
  // (with `recycle`, their files are kept for reuse). False when there is none to drop.
  Result<bool> DropOldestSegments(std::uint64_t over, bool recycle) REQUIRES(io_mu) EXCLUDES(mu);
  // With the cap held on disk and reached (less than half a segment of room left), no file
  // kept for reuse: drops the oldest segment so that the next one is written over its file,
  // not into new blocks (a drop the next records would force anyway).
  Status ReuseOldestSegmentAtTheCap() EXCLUDES(io_mu, mu);
  bool AtTheCapWithNoFileToReuse() const REQUIRES(mu);

  // ---- files written ahead of need (write_ahead.cc) --------------------------------------
  Result<bool> WriteAhead() EXCLUDES(io_mu, mu);
  // Writes `bytes` of zeroes to `file` a chunk at a time, each synced; stops early (ok)
  // when cancelled.
  Status WriteZeroes(InPlaceFile& file, std::uint64_t bytes) EXCLUDES(mu);

  // ---- Read (read.cc) --------------------------------------------------------------------
  Result<std::vector<SpoolRecord>> Read(size_t max_bytes, size_t max_records) EXCLUDES(mu);
  Status OpenCursor(std::uint64_t segment, std::uint64_t offset, std::uint64_t limit)
      EXCLUDES(mu);
  // The next record for the reader; none at the durable end.
  Result<std::optional<ReadItem>> NextRecord() EXCLUDES(mu);
  // The next record from the tail, its payload moved out; none unless the tail holds it.
  std::optional<ReadItem> NextFromTail() EXCLUDES(mu);
  // Whether an append of `payload_bytes` copies its payload for the tail: only while the
  // reader keeps up (it has returned every durable record, or waits within the tail), so
  // that a backlog nobody reads costs no copy.
  bool TailWants(size_t payload_bytes) const REQUIRES(mu);
  // `record` (with its copy) became durable: it joins the tail, the oldest leaving for room.
  void AdmitToTail(UnsyncedRecord& record) REQUIRES(mu);
  void DropTailFront() REQUIRES(mu);
  // Intact record `sequence` arrived: the sequences skipped since the last one, and the
  // damaged bytes met meanwhile, become a pending corruption.
  void NoteArrival(std::uint64_t sequence) EXCLUDES(mu);
  void Rewind() EXCLUDES(mu);

  FileSystem& fs;
  const std::string dir;
  const Limits limits;
  const Clock& clock;
  std::unique_ptr<FileLock> lock;  // set by Open, then never touched
  // Whether the whole cap is held on disk: limits.reserve_disk where the file system
  // overwrites in place. Set by Open, then never changed.
  bool reserve_disk = false;

  Mutex io_mu ACQUIRED_BEFORE(mu);
  std::unique_ptr<StateFile> state_file GUARDED_BY(io_mu);

  mutable Mutex mu;
  PersistentState state GUARDED_BY(mu);  // as last written to STATE
  std::deque<Segment> segments GUARDED_BY(mu);
  // segments.back(), when appends may go there.
  std::unique_ptr<InPlaceFile> active GUARDED_BY(mu);
  std::deque<FreeSegment> free_segments GUARDED_BY(mu);  // files kept for reuse, oldest first
  // The file WriteAhead is writing: the cap counts all of it from the start. 0 when none.
  std::uint64_t write_ahead_bytes GUARDED_BY(mu) = 0;
  std::uint64_t next_write_ahead_number GUARDED_BY(mu) = kFirstWriteAheadNumber;
  bool write_ahead_cancelled GUARDED_BY(mu) = false;
  std::uint64_t write_aheads_cancelled GUARDED_BY(mu) = 0;  // SpoolStats'
  CondVar write_ahead_ended;
  bool roll_before_next_record GUARDED_BY(mu) = false;
  std::uint64_t next_sequence GUARDED_BY(mu) = 1;
  std::uint64_t last_durable GUARDED_BY(mu) = 0;
  // Sequences skipped after failures, as inclusive ranges.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> abandoned GUARDED_BY(mu);
  // The write pipeline (Append). In the active segment: where the next record goes, the
  // records reserved and not yet written without a gap before them (in order), the end of
  // those that are (all before it is written), and the written ones not yet durable.
  std::uint64_t reserved_end GUARDED_BY(mu) = 0;
  std::deque<PendingWrite*> writing GUARDED_BY(mu);
  std::deque<PendingWrite*> awaiting GUARDED_BY(mu);  // all appends in flight, in order
  std::uint64_t written_end GUARDED_BY(mu) = 0;
  std::deque<UnsyncedRecord> unsynced GUARDED_BY(mu);
  CondVar writes_returned;  // a record was reserved or written, or a write failed
  bool syncing GUARDED_BY(mu) = false;
  // The last sync: how long it took, and how many appends were in flight when it ended.
  std::chrono::steady_clock::duration last_sync_time GUARDED_BY(mu){};
  size_t last_sync_appends GUARDED_BY(mu) = 0;
  bool rolling GUARDED_BY(mu) = false;
  bool write_failed GUARDED_BY(mu) = false;  // a failed write waits to be repaired
  int appends_in_flight GUARDED_BY(mu) = 0;  // from reserving until durable or failed
  std::optional<Status> pipeline_failure GUARDED_BY(mu);  // set while a failure is repaired
  CondVar pipeline_changed;  // a roll or a repair ended, or an append left the pipeline
  // The tail: durable records not yet returned to the reader, in sequence order (records
  // the reader passed while reading the file are dropped as it reaches them), at most
  // kMaxTailBytes of TailRecord::Cost.
  std::deque<TailRecord> tail GUARDED_BY(mu);
  std::uint64_t tail_bytes GUARDED_BY(mu) = 0;
  // `expected`, as of the reader's last Read; 0 before the first (no reader yet: no copies).
  std::uint64_t reader_next GUARDED_BY(mu) = 0;
  std::optional<WallTime> oldest GUARDED_BY(mu);
  std::deque<PendingCorruption> pending_corruption GUARDED_BY(mu);  // in sequence order
  std::uint64_t unattributed_damage_bytes GUARDED_BY(mu) = 0;
  std::deque<ReadMark> returned GUARDED_BY(mu);      // returned by Read and waiting, in order
  std::uint64_t trimmed_through GUARDED_BY(mu) = 0;  // marks let go of for room, up to here
  std::optional<ReadMark> anchor GUARDED_BY(mu);     // where the record consumed_through ends

  // The reader's position: used by the reading thread only (Read and Rewind).
  ReaderReporter reporter;
  std::optional<Cursor> cursor;
  std::uint64_t expected = 1;     // the sequence the reader expects next
  std::optional<ReadItem> stash;  // read, but over the last batch's byte limit
  // The last record served from the tail: the file cursor, closed then, reopens after it.
  std::optional<ReadMark> resume;
};

}  // namespace uplink::spool
