// A FileSystem in memory that simulates what a crash does to files and the faults a disk
// has, for the spool's tests (LevelDB's fault_injection_test.cc is the model).
//
// Durability. Every file has its current bytes and its synced bytes (those at its last
// Sync); every directory has its current entries and its synced entries (those at its last
// SyncDir). LosePower() reverts every file to its synced bytes and every directory to its
// synced entries: files created since the last SyncDir of their directory vanish, files
// removed since then come back with their synced bytes, renames since then are undone, and
// a Truncate or WriteAt that was not synced is undone. Until PowerOn(), every call fails;
// handles opened before the power loss stay dead, and locks are released (the process is
// gone).
//
// Faults: the nth call of an operation, or every call, fails with the errno chosen (EIO,
// ENOSPC); a capacity beyond which writes that grow a file fail with ENOSPC, writing nothing
// (Truncate, Remove and rewriting bytes in place never need space); and a power loss right
// before or right after the kth sync point (a file Sync or a SyncDir).
//
// Preallocation (fallocate with KEEP_SIZE) fails as unsupported unless enabled; enabled, the
// blocks it reserves count as used, writes into them need no more space, a Truncate releases
// those past the new size, and they survive a power loss.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "spool/file_system.h"

namespace uplink::spool::testing {

enum class FsOp {
  kOpen, kRead, kSync, kWriteAt, kTruncate, kRemove, kRename, kSyncDir, kListDir,
  kStartWriteback,  // counted only: a hint cannot fail
  kPreallocate
};

enum class CrashTiming { kBeforeSync, kAfterSync };

class MemoryFileSystem final : public FileSystem {
 public:
  MemoryFileSystem();
  ~MemoryFileSystem() override;

  Status CreateDir(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& dir) override;
  Result<std::uint64_t> FileSize(const std::string& path) override;
  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) override;
  Result<std::unique_ptr<InPlaceFile>> OpenInPlace(const std::string& path) override;
  Status Truncate(const std::string& path, std::uint64_t size) override;
  Status Remove(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status SyncDir(const std::string& dir) override;
  Result<std::unique_ptr<FileLock>> Lock(const std::string& path) override;
  // True unless SetOverwritesInPlace(false) (as on tmpfs).
  bool OverwritesInPlace(const std::string& dir) override;
  void SetOverwritesInPlace(bool in_place);

  // ---- faults ----
  // The nth call of `op` from now on (1: the next one) fails with `error`.
  void FailNth(FsOp op, int nth, int error);
  // Every call of `op` fails with `error` until ClearFaults().
  void FailAlways(FsOp op, int error);
  void ClearFaults();
  // Bytes all files together may hold; nullopt: unlimited.
  void SetCapacity(std::optional<std::uint64_t> bytes);
  std::uint64_t UsedBytes() const;
  void EnablePreallocation();
  // The bytes a file takes: its size, or more where blocks are preallocated past it.
  std::optional<std::uint64_t> AllocatedBytes(const std::string& path) const;
  // How many times `op` was called (failed calls included).
  int Calls(FsOp op) const;
  // The ranges StartWriteback was asked for, as [offset, offset + n).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> WritebackRanges() const;
  // Runs before every file Sync, outside the file system's lock (a test can hold a sync).
  void SetBeforeFileSync(std::function<void()> hook);
  // Runs before every WriteAt, outside the file system's lock (a test can hold a write).
  void SetBeforeWrite(std::function<void()> hook);
  // Runs before every file Read, outside the file system's lock (a test can hold a reader).
  void SetBeforeRead(std::function<void()> hook);

  // ---- power ----
  void LosePower();
  void PowerOn();
  bool powered() const;
  // File Syncs and SyncDirs so far (failed ones included).
  int sync_points() const;
  // Loses power at the kth sync point counted from construction.
  void CrashAtSyncPoint(int k, CrashTiming timing);

  // ---- the medium itself (current and synced bytes alike) ----
  std::optional<std::string> Contents(const std::string& path) const;
  // Creates or replaces a file, durably; false when its directory does not exist.
  [[nodiscard]] bool PutFile(const std::string& path, const std::string& content);
  // These return false when `path` does not exist.
  [[nodiscard]] bool FlipBit(const std::string& path, std::uint64_t offset, int bit = 0);
  [[nodiscard]] bool TruncateStored(const std::string& path, std::uint64_t size);
  [[nodiscard]] bool OverwriteStored(const std::string& path, std::uint64_t offset,
                                     const std::string& data);

 private:
  struct Node {
    std::string current;
    std::string synced;
    std::uint64_t preallocated = 0;  // blocks reserved from the start, past the size or not
    std::uint64_t Allocated() const {
      return std::max<std::uint64_t>(current.size(), preallocated);
    }
  };
  struct Dir {
    std::map<std::string, std::shared_ptr<Node>> entries;
    std::map<std::string, std::shared_ptr<Node>> synced_entries;
    std::set<std::string> subdirs;
    std::set<std::string> synced_subdirs;
  };
  struct Fault {
    int at_call = 0;  // 0: every call
    int error = 0;
  };
  class File;
  class HeldLock;

  // All require mutex_.
  Status Check(FsOp op, const std::string& path, std::string_view verb);
  Status PowerCheck(const std::string& path, std::string_view verb) const;
  Dir* DirOf(const std::string& path, std::string* name);
  std::shared_ptr<Node> Find(const std::string& path);
  Status SyncPoint(FsOp op, const std::string& path, std::string_view verb,
                   const std::function<void()>& effect);
  void LosePowerLocked();
  std::uint64_t UsedBytesLocked() const;
  Status NoSpace(const std::string& path, std::string_view verb) const;

  mutable std::mutex mutex_;
  std::map<std::string, Dir> dirs_;
  std::map<FsOp, int> calls_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> writeback_ranges_;
  std::multimap<FsOp, Fault> faults_;
  std::optional<std::uint64_t> capacity_;
  bool preallocation_ = false;
  bool overwrites_in_place_ = true;
  std::function<void()> before_file_sync_;
  std::function<void()> before_write_;
  std::function<void()> before_read_;
  bool powered_ = true;
  int epoch_ = 0;  // bumped by every power loss; older handles are dead
  int sync_points_ = 0;
  int crash_at_ = 0;
  CrashTiming crash_timing_ = CrashTiming::kBeforeSync;
  std::map<std::string, int> locks_;  // path -> epoch of its holder
};

}  // namespace uplink::spool::testing
