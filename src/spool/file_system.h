// The file operations the spool needs, behind an interface so that tests can inject faults
// (LevelDB's Env is the model). tests/spool/fault_injection_fs.h implements it in memory and
// simulates power loss (everything not yet synced is lost: file contents since the last
// Sync, directory entries since the last SyncDir) and ENOSPC/EIO at chosen operations.
//
// Every error is IOError (or NotFound for a missing file) carrying the operation, the path
// and strerror; ENOSPC reads "no space left on device" so that callers and logs can say so.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace uplink::spool {

class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads up to `n` bytes at `offset` into `scratch` and returns them; fewer at the end of the
  // file, none past it. The view may point into `scratch`.
  virtual Result<std::string_view> Read(std::uint64_t offset, size_t n, char* scratch) const = 0;
};

// A file written at chosen offsets: segments (appended to, or a recycled one overwritten)
// and STATE (rewritten in place). Overwriting bytes the file has never needs free space.
class InPlaceFile {
 public:
  virtual ~InPlaceFile() = default;
  virtual Result<std::string_view> Read(std::uint64_t offset, size_t n, char* scratch) const = 0;
  // Writes `data` at `offset`, extending the file (with zeroes before `offset` if it is past
  // the end) as needed.
  virtual Status WriteAt(std::uint64_t offset, std::string_view data) = 0;
  // Writes `pieces` one after the other from `offset`, as one vectored write (pwritev), so
  // that a record is written from its framing and its payload in place. A failure may leave
  // a prefix of the bytes written, as a short write does.
  virtual Status WriteAt(std::uint64_t offset, std::span<const std::string_view> pieces) = 0;
  // Makes everything written so far durable (fdatasync).
  virtual Status Sync() = 0;
  // Starts writing bytes [offset, offset + n) to the disk without waiting (sync_file_range),
  // so that a later Sync has less left to do. A hint: it makes nothing durable, and errors
  // are left for Sync to report.
  virtual void StartWriteback(std::uint64_t offset, std::uint64_t n) = 0;
  // Allocates the blocks for the file's first `bytes` bytes without changing its size
  // (fallocate, FALLOC_FL_KEEP_SIZE): writing there then needs no free space and allocates
  // nothing when synced. Not every file system can; an error leaves the file as it was.
  // Truncating the file releases what lies past its new size.
  virtual Status Preallocate(std::uint64_t bytes) = 0;
};

// Held until destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Creates `path` if it does not exist (its parent must).
  virtual Status CreateDir(const std::string& path) = 0;
  // Names (not paths) of the directory's entries, without "." and "..".
  virtual Result<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  // The size of a regular file; FailedPrecondition for anything else at `path` (a directory,
  // a link, which is not followed).
  virtual Result<std::uint64_t> FileSize(const std::string& path) = 0;
  virtual Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) = 0;
  // Opens for reading and writing in place, creating the file (empty) if missing.
  virtual Result<std::unique_ptr<InPlaceFile>> OpenInPlace(const std::string& path) = 0;
  // Shortens a file; needs no free space.
  virtual Status Truncate(const std::string& path, std::uint64_t size) = 0;
  virtual Status Remove(const std::string& path) = 0;
  // Renames a file within one directory, replacing `to` if it exists; durable after SyncDir.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Makes the directory's entries (files created, renamed and removed) durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // An exclusive lock on `path` (created if missing) between processes;
  // FailedPrecondition when another holder has it.
  virtual Result<std::unique_ptr<FileLock>> Lock(const std::string& path) = 0;
  // Whether overwriting a file's blocks in `dir` writes them where they are, so that files
  // written ahead of need make later syncs cheaper: false where files live in memory (tmpfs,
  // where they would only take memory) or every write goes to new blocks (btrfs, ZFS).
  virtual bool OverwritesInPlace(const std::string& dir) = 0;
};

// The real one (POSIX calls, O_CLOEXEC, EINTR retried).
FileSystem& PosixFileSystem();

}  // namespace uplink::spool
