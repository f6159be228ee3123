// The durable upload spool: an append-only log of records in segment files under one
// directory, read in order by a shipper and removed once the console has acknowledged them.
//
// On disk (docs/spool.md has the whole format):
//   LOCK                       flock: one process per spool directory
//   STATE                      two 128-byte slots rewritten in place (never needs free space):
//                              spool id, consumed-through sequence, cumulative loss counters
//   <20-digit first seq>.seg   segments of 32 KiB blocks of records framed as LevelDB's log
//                              (masked CRC32C, length, type, sequence); the payload of each
//                              record is prefixed by its append time
//   <20-digit first seq>.rseg  a segment written over a recycled file's earlier records
//   <20-digit number>.free     consumed segments' files kept for reuse, and files written ahead
//                              of need (zeroes), numbered from 2^63 (overwriting a file's
//                              blocks syncs without persisting metadata)
// Anything else in the directory is ignored.
//
// Guarantees:
// - Append returns a sequence number only once the record is durable (fdatasync; concurrent
//   appends share one sync: group commit). Sequence numbers start at 1 and increase by one
//   per record; once an Append has returned one, this spool never hands it out again (its id
//   changes only if STATE is lost). A few are skipped, never reused, after a failed write
//   that could not be undone or damage at the end of the newest segment.
// - The directory is synced after a segment is created or removed. Consuming (acknowledging)
//   writes the cursor, and syncs it before it removes segments; a crash at any point leaves
//   a spool that opens and delivers everything not consumed, each record once. A power loss
//   (not a process crash) may take the cursor back to the last synced one, so consumed
//   records are delivered again (the console recognises them), never lost.
// - Bounded: the segment files (and those kept for reuse) never exceed max_bytes. At the cap the oldest waiting records
//   are dropped (whole oldest segments, never the newest records), counted in records and
//   bytes, persisted, and reported with the next upload. A record over max_record_bytes is
//   refused (ResourceExhausted) and nothing is dropped for it.
// - Damage (torn tail, flipped bits, truncated or missing segments, garbage) never stops Open:
//   damaged records are skipped and counted; every intact record is delivered.
// - Disk full: Append fails with IOError ("no space left on device") once the blocks
//   preallocated for the newest segment are used; reading, consuming and removing keep
//   working, which frees space.
// - Open reads the state, lists the directory and scans at most two segments; memory stays
//   bounded by a few blocks, the largest record and the tail of the newest durable records
//   kept for a reader that keeps up (4 MiB), whatever the spool's size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "spool/file_system.h"

namespace uplink::spool {

struct SpoolOptions {
  std::uint64_t max_bytes = 512ull << 20;  // total size of the segment files
  // The largest payload Append takes; also never more than max_bytes / 4.
  std::uint64_t max_record_bytes = 16ull << 20;
  // A new segment is started once the current one reaches this size. 0: max_bytes / 64,
  // kept within [64 KiB, 8 MiB] (dropping at the cap then loses at most 1/64 of the spool).
  std::uint64_t segment_bytes = 0;
  // Hold the whole cap on disk: every consumed segment's file is kept for reuse (not only
  // two), and WriteAhead() writes new ones, until the spool's files reach max_bytes. Appends
  // then always overwrite blocks written before, which syncs without persisting metadata (on
  // ext4, 1.5-2 times the rate of appending to a new file), and a backlog needs no free space.
  // Ignored where overwriting does not write in place (tmpfs, copy-on-write file systems).
  bool reserve_disk = false;
};

// Records and bytes, for each kind of loss. Bytes are payload bytes.
struct LossCount {
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;
};

struct SpoolLosses {
  // At the cap, oldest first. Records exactly. Bytes are estimated without reading: a
  // dropped segment's size less 23 bytes of framing per record, in proportion to the share
  // of its records that were still waiting (exact, but for block trailers, for a segment
  // nothing of which was consumed).
  LossCount dropped;
  LossCount corrupt;   // found damaged while reading (bytes: bytes skipped)
  LossCount rejected;  // given up by the shipper (refused by the console, or not JSON)
};

struct SpoolRecord {
  std::uint64_t sequence = 0;
  WallTime appended_at;
  std::string payload;
};

struct SpoolStats {
  std::string spool_id;                 // 32 hex digits, chosen when the spool was created
  std::uint64_t waiting_records = 0;    // appended and not yet consumed (damaged ones included
                                        // until the reader finds them)
  std::uint64_t bytes = 0;              // segment files on disk, and those kept for reuse
  std::uint64_t spare_bytes = 0;        // of `bytes`: files kept for reuse or written ahead
  // Files being written ahead that an append cancelled because it needed their room, since
  // this object opened the spool.
  std::uint64_t write_aheads_cancelled = 0;
  std::uint64_t segments = 0;
  std::uint64_t first_sequence = 0;     // the oldest waiting record's; 0 when none waits
  std::uint64_t last_sequence = 0;      // the newest appended record's; 0 when none ever was
  std::uint64_t consumed_through = 0;   // delivered, dropped or rejected up to here
  std::optional<WallTime> oldest_appended_at;  // of the oldest waiting record
  SpoolLosses losses;                   // cumulative over the spool's life, persisted
};

class Spool {
 public:
  // Opens the spool in `dir`, creating the directory (its parent must exist) and the spool if
  // missing. Fails with FailedPrecondition when another process has it open, and with IOError
  // only when the directory, STATE or the newest segment cannot be read or created (the disk
  // or its permissions are at fault); damage is recovered from.
  static Result<std::unique_ptr<Spool>> Open(FileSystem& fs, std::string dir,
                                             SpoolOptions options, const Clock& clock);
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // Appends one record and returns its sequence number once it is durable. Thread-safe;
  // concurrent callers write side by side and share one sync. ResourceExhausted for a
  // payload over the record limit; IOError when the disk is full or failing (the record is
  // not appended, and the spool stays usable: the next Append tries again).
  Result<std::uint64_t> Append(std::string_view payload);

  // The next records in order after those this object has already returned (starting after
  // consumed_through), until `max_bytes` of payload or `max_records` records, but at least
  // one record when any waits. Empty when none waits. Damaged records are skipped and counted
  // in losses().corrupt; records dropped at the cap meanwhile are skipped. Not thread-safe
  // against itself (one reader), safe against Append and Consume.
  Result<std::vector<SpoolRecord>> Read(size_t max_bytes, size_t max_records);

  // Reads again from the oldest waiting record (after a shipper discarded what it had read).
  void Rewind();

  // Marks everything up to `through_sequence` delivered, adding `rejected` to the losses:
  // writes the cursor; when segments then hold nothing waiting, syncs it and removes them
  // (and syncs the directory). Closing the spool syncs a cursor written since. Needs no free
  // space. Sequences at or below consumed_through are ignored.
  Status Consume(std::uint64_t through_sequence, LossCount rejected = {});

  // With reserve_disk, writes one segment's file of zeroes ahead of need while the spool's
  // files are under the cap by a segment or more, and returns true; false when there is
  // nothing to do (the cap is reached, reserve_disk is off or ignored) or not now (another
  // call is writing, or an append is under way). For idle time: the shipper calls it once
  // per idle poll, so a new spool takes its cap in about max_bytes / segment_bytes polls.
  // IOError (a full disk) leaves nothing behind. Thread-safe; an Append that needs the room
  // meanwhile cancels it (then true).
  Result<bool> WriteAhead();

  SpoolStats Stats() const;
  const std::string& dir() const;

 private:
  struct Impl;
  explicit Spool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uplink::spool
