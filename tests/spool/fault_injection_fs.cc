#include "spool/fault_injection_fs.h"

#include <cerrno>
#include <cstring>

namespace uplink::spool::testing {
namespace {

std::string Reason(int error) {
  std::string reason = std::strerror(error);
  if (!reason.empty())
    reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  return reason;
}

Status Error(std::string_view verb, const std::string& path, int error) {
  std::string message = std::string(verb) + " " + path + ": " + Reason(error);
  return error == ENOENT ? NotFoundError(std::move(message)) : IOError(std::move(message));
}

std::string ParentOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return path.substr(0, slash);
}

std::string NameOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

// One open file: reads and writes at offsets through its node, which outlives a
// removal of the file (as an open descriptor does).
class MemoryFileSystem::File final : public ReadableFile, public InPlaceFile {
 public:
  File(MemoryFileSystem& fs, std::shared_ptr<Node> node, std::string path)
      : fs_(fs), node_(std::move(node)), path_(std::move(path)), epoch_(fs.epoch_) {}

  Status Sync() override {
    RunHook(&MemoryFileSystem::before_file_sync_);
    std::lock_guard lock(fs_.mutex_);
    UPLINK_RETURN_IF_ERROR(Alive("fdatasync"));
    return fs_.SyncPoint(FsOp::kSync, path_, "fdatasync", [&] { node_->synced = node_->current; });
  }

  // Like sync_file_range: nothing becomes durable.
  void StartWriteback(std::uint64_t offset, std::uint64_t n) override {
    std::lock_guard lock(fs_.mutex_);
    ++fs_.calls_[FsOp::kStartWriteback];
    fs_.writeback_ranges_.emplace_back(offset, offset + n);
  }

  Status Preallocate(std::uint64_t bytes) override {
    std::lock_guard lock(fs_.mutex_);
    UPLINK_RETURN_IF_ERROR(Alive("preallocate"));
    UPLINK_RETURN_IF_ERROR(fs_.Check(FsOp::kPreallocate, path_, "preallocate"));
    if (!fs_.preallocation_) return Error("preallocate", path_, EOPNOTSUPP);
    if (bytes <= node_->Allocated()) {
      node_->preallocated = std::max(node_->preallocated, bytes);
      return Status::Ok();
    }
    const std::uint64_t growth = bytes - node_->Allocated();
    if (fs_.capacity_ && fs_.UsedBytesLocked() + growth > *fs_.capacity_)
      return fs_.NoSpace(path_, "preallocate");
    node_->preallocated = bytes;
    return Status::Ok();
  }

  Result<std::string_view> Read(std::uint64_t offset, size_t n, char* scratch) const override {
    RunHook(&MemoryFileSystem::before_read_);
    std::lock_guard lock(fs_.mutex_);
    UPLINK_RETURN_IF_ERROR(Alive("read"));
    UPLINK_RETURN_IF_ERROR(fs_.Check(FsOp::kRead, path_, "read"));
    const std::string& bytes = node_->current;
    if (offset >= bytes.size()) return std::string_view(scratch, 0);
    const size_t count = std::min<std::uint64_t>(n, bytes.size() - offset);
    std::memcpy(scratch, bytes.data() + offset, count);
    return std::string_view(scratch, count);
  }

  Status WriteAt(std::uint64_t offset, std::string_view data) override {
    return WriteAt(offset, std::span<const std::string_view>(&data, 1));
  }

  // Piece by piece: a piece that does not fit fails the write with ENOSPC and leaves those
  // before it written, as a short write followed by a failed one does.
  Status WriteAt(std::uint64_t offset, std::span<const std::string_view> pieces) override {
    RunHook(&MemoryFileSystem::before_write_);
    std::lock_guard lock(fs_.mutex_);
    UPLINK_RETURN_IF_ERROR(Alive("write"));
    UPLINK_RETURN_IF_ERROR(fs_.Check(FsOp::kWriteAt, path_, "write"));
    for (std::string_view piece : pieces) {
      UPLINK_RETURN_IF_ERROR(WritePiece(offset, piece));
      offset += piece.size();
    }
    return Status::Ok();
  }

 private:
  // Runs a test's hook outside the file system's lock, so that it may block.
  void RunHook(std::function<void()> MemoryFileSystem::*which) const {
    std::function<void()> hook;
    {
      std::lock_guard lock(fs_.mutex_);
      hook = fs_.*which;
    }
    if (hook) hook();
  }

  // Requires fs_.mutex_.
  Status WritePiece(std::uint64_t offset, std::string_view data) {
    std::string& bytes = node_->current;
    const std::uint64_t end = offset + data.size();
    if (end > bytes.size()) {
      // Preallocated blocks take it without more space.
      const std::uint64_t growth = end - std::min(end, node_->Allocated());
      if (fs_.capacity_ && fs_.UsedBytesLocked() + growth > *fs_.capacity_)
        return fs_.NoSpace(path_, "write");
      bytes.resize(end, '\0');
    }
    bytes.replace(offset, data.size(), data);
    return Status::Ok();
  }

  Status Alive(std::string_view verb) const {
    if (epoch_ != fs_.epoch_ || !fs_.powered_)
      return IOError(std::string(verb) + " " + path_ + ": power was lost");
    return Status::Ok();
  }

  MemoryFileSystem& fs_;
  std::shared_ptr<Node> node_;
  std::string path_;
  int epoch_;
};

class MemoryFileSystem::HeldLock final : public FileLock {
 public:
  HeldLock(MemoryFileSystem& fs, std::string path)
      : fs_(fs), path_(std::move(path)), epoch_(fs.epoch_) {}
  ~HeldLock() override {
    std::lock_guard lock(fs_.mutex_);
    auto it = fs_.locks_.find(path_);
    if (it != fs_.locks_.end() && it->second == epoch_) fs_.locks_.erase(it);
  }

 private:
  MemoryFileSystem& fs_;
  std::string path_;
  int epoch_;
};

MemoryFileSystem::MemoryFileSystem() { dirs_["/"]; }
MemoryFileSystem::~MemoryFileSystem() = default;

Status MemoryFileSystem::Check(FsOp op, const std::string& path, std::string_view verb) {
  const int call = ++calls_[op];
  UPLINK_RETURN_IF_ERROR(PowerCheck(path, verb));
  auto [begin, end] = faults_.equal_range(op);
  for (auto it = begin; it != end; ++it) {
    if (it->second.at_call == 0 || it->second.at_call == call) {
      const int error = it->second.error;
      if (it->second.at_call != 0) faults_.erase(it);
      return Error(verb, path, error);
    }
  }
  return Status::Ok();
}

Status MemoryFileSystem::PowerCheck(const std::string& path, std::string_view verb) const {
  if (!powered_) return IOError(std::string(verb) + " " + path + ": power was lost");
  return Status::Ok();
}

Status MemoryFileSystem::NoSpace(const std::string& path, std::string_view verb) const {
  return Error(verb, path, ENOSPC);
}

MemoryFileSystem::Dir* MemoryFileSystem::DirOf(const std::string& path, std::string* name) {
  auto it = dirs_.find(ParentOf(path));
  if (it == dirs_.end()) return nullptr;
  *name = NameOf(path);
  return &it->second;
}

std::shared_ptr<MemoryFileSystem::Node> MemoryFileSystem::Find(const std::string& path) {
  std::string name;
  Dir* dir = DirOf(path, &name);
  if (dir == nullptr) return nullptr;
  auto it = dir->entries.find(name);
  return it == dir->entries.end() ? nullptr : it->second;
}

Status MemoryFileSystem::SyncPoint(FsOp op, const std::string& path, std::string_view verb,
                                   const std::function<void()>& effect) {
  const int point = ++sync_points_;
  if (point == crash_at_ && crash_timing_ == CrashTiming::kBeforeSync) {
    ++calls_[op];
    LosePowerLocked();
    return IOError(std::string(verb) + " " + path + ": power was lost");
  }
  UPLINK_RETURN_IF_ERROR(Check(op, path, verb));
  effect();
  if (point == crash_at_ && crash_timing_ == CrashTiming::kAfterSync) LosePowerLocked();
  return Status::Ok();
}

Status MemoryFileSystem::CreateDir(const std::string& path) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(PowerCheck(path, "create directory"));
  if (dirs_.count(path) != 0) return Status::Ok();
  std::string name;
  Dir* parent = DirOf(path, &name);
  if (parent == nullptr) return Error("create directory", path, ENOENT);
  if (parent->entries.count(name) != 0) return Error("create directory", path, EEXIST);
  parent->subdirs.insert(name);
  dirs_[path];
  return Status::Ok();
}

Result<std::vector<std::string>> MemoryFileSystem::ListDir(const std::string& dir) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(Check(FsOp::kListDir, dir, "list directory"));
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return Error("list directory", dir, ENOENT);
  std::vector<std::string> names;
  for (const auto& [name, node] : it->second.entries) names.push_back(name);
  for (const auto& name : it->second.subdirs) names.push_back(name);
  return names;
}

Result<std::uint64_t> MemoryFileSystem::FileSize(const std::string& path) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(PowerCheck(path, "stat"));
  auto node = Find(path);
  if (!node && dirs_.count(path) > 0) {
    return FailedPreconditionError(path + " is not a regular file");
  }
  if (!node) return Error("stat", path, ENOENT);
  return static_cast<std::uint64_t>(node->current.size());
}

Result<std::unique_ptr<ReadableFile>> MemoryFileSystem::OpenReadable(const std::string& path) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(Check(FsOp::kOpen, path, "open"));
  auto node = Find(path);
  if (!node) return Error("open", path, ENOENT);
  return std::unique_ptr<ReadableFile>(new File(*this, node, path));
}

Result<std::unique_ptr<InPlaceFile>> MemoryFileSystem::OpenInPlace(const std::string& path) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(Check(FsOp::kOpen, path, "open"));
  std::string name;
  Dir* dir = DirOf(path, &name);
  if (dir == nullptr) return Error("open", path, ENOENT);
  auto& node = dir->entries[name];
  if (!node) node = std::make_shared<Node>();
  return std::unique_ptr<InPlaceFile>(new File(*this, node, path));
}

Status MemoryFileSystem::Truncate(const std::string& path, std::uint64_t size) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(Check(FsOp::kTruncate, path, "truncate"));
  auto node = Find(path);
  if (!node) return Error("truncate", path, ENOENT);
  node->current.resize(size, '\0');
  node->preallocated = std::min(node->preallocated, size);
  return Status::Ok();
}

Status MemoryFileSystem::Remove(const std::string& path) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(Check(FsOp::kRemove, path, "remove"));
  std::string name;
  Dir* dir = DirOf(path, &name);
  if (dir == nullptr || dir->entries.erase(name) == 0) return Error("remove", path, ENOENT);
  return Status::Ok();
}

Status MemoryFileSystem::Rename(const std::string& from, const std::string& to) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(Check(FsOp::kRename, from, "rename"));
  std::string from_name, to_name;
  Dir* dir = DirOf(from, &from_name);
  if (dir == nullptr || DirOf(to, &to_name) != dir) return Error("rename", from, EXDEV);
  auto it = dir->entries.find(from_name);
  if (it == dir->entries.end()) return Error("rename", from, ENOENT);
  std::shared_ptr<Node> node = it->second;
  dir->entries.erase(it);
  dir->entries[to_name] = std::move(node);
  return Status::Ok();
}

Status MemoryFileSystem::SyncDir(const std::string& dir) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(PowerCheck(dir, "fsync directory"));
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return Error("fsync directory", dir, ENOENT);
  Dir& target = it->second;
  return SyncPoint(FsOp::kSyncDir, dir, "fsync directory", [&] {
    target.synced_entries = target.entries;
    target.synced_subdirs = target.subdirs;
  });
}

Result<std::unique_ptr<FileLock>> MemoryFileSystem::Lock(const std::string& path) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(PowerCheck(path, "lock"));
  std::string name;
  Dir* dir = DirOf(path, &name);
  if (dir == nullptr) return Error("lock", path, ENOENT);
  auto held = locks_.find(path);
  if (held != locks_.end() && held->second == epoch_) {
    return FailedPreconditionError(path + " is locked: another process is using this spool");
  }
  auto& node = dir->entries[name];
  if (!node) node = std::make_shared<Node>();
  locks_[path] = epoch_;
  return std::unique_ptr<FileLock>(new HeldLock(*this, path));
}

void MemoryFileSystem::FailNth(FsOp op, int nth, int error) {
  std::lock_guard lock(mutex_);
  faults_.emplace(op, Fault{calls_[op] + nth, error});
}

void MemoryFileSystem::FailAlways(FsOp op, int error) {
  std::lock_guard lock(mutex_);
  faults_.emplace(op, Fault{0, error});
}

void MemoryFileSystem::ClearFaults() {
  std::lock_guard lock(mutex_);
  faults_.clear();
}

void MemoryFileSystem::SetCapacity(std::optional<std::uint64_t> bytes) {
  std::lock_guard lock(mutex_);
  capacity_ = bytes;
}

std::uint64_t MemoryFileSystem::UsedBytes() const {
  std::lock_guard lock(mutex_);
  return UsedBytesLocked();
}

std::uint64_t MemoryFileSystem::UsedBytesLocked() const {
  std::uint64_t used = 0;
  for (const auto& [path, dir] : dirs_) {
    for (const auto& [name, node] : dir.entries) used += node->Allocated();
  }
  return used;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> MemoryFileSystem::WritebackRanges() const {
  std::lock_guard lock(mutex_);
  return writeback_ranges_;
}

int MemoryFileSystem::Calls(FsOp op) const {
  std::lock_guard lock(mutex_);
  auto it = calls_.find(op);
  return it == calls_.end() ? 0 : it->second;
}

void MemoryFileSystem::SetBeforeFileSync(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  before_file_sync_ = std::move(hook);
}

bool MemoryFileSystem::OverwritesInPlace(const std::string&) {
  std::lock_guard lock(mutex_);
  return overwrites_in_place_;
}

void MemoryFileSystem::SetOverwritesInPlace(bool in_place) {
  std::lock_guard lock(mutex_);
  overwrites_in_place_ = in_place;
}

void MemoryFileSystem::EnablePreallocation() {
  std::lock_guard lock(mutex_);
  preallocation_ = true;
}

std::optional<std::uint64_t> MemoryFileSystem::AllocatedBytes(const std::string& path) const {
  std::lock_guard lock(mutex_);
  auto node = const_cast<MemoryFileSystem*>(this)->Find(path);
  if (!node) return std::nullopt;
  return node->Allocated();
}

void MemoryFileSystem::SetBeforeRead(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  before_read_ = std::move(hook);
}

void MemoryFileSystem::SetBeforeWrite(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  before_write_ = std::move(hook);
}

void MemoryFileSystem::LosePower() {
  std::lock_guard lock(mutex_);
  LosePowerLocked();
}

void MemoryFileSystem::LosePowerLocked() {
  powered_ = false;
  ++epoch_;
  locks_.clear();
  for (auto& [path, dir] : dirs_) {
    dir.entries = dir.synced_entries;
    dir.subdirs = dir.synced_subdirs;
    for (auto& [name, node] : dir.entries) node->current = node->synced;
  }
  // Directories whose creation was not made durable vanish with everything in them; the
  // map's order puts every parent before its children.
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    if (it->first == "/") {
      ++it;
      continue;
    }
    auto parent = dirs_.find(ParentOf(it->first));
    const bool reachable =
        parent != dirs_.end() && parent->second.subdirs.count(NameOf(it->first)) != 0;
    it = reachable ? std::next(it) : dirs_.erase(it);
  }
}

void MemoryFileSystem::PowerOn() {
  std::lock_guard lock(mutex_);
  powered_ = true;
  crash_at_ = 0;
}

bool MemoryFileSystem::powered() const {
  std::lock_guard lock(mutex_);
  return powered_;
}

int MemoryFileSystem::sync_points() const {
  std::lock_guard lock(mutex_);
  return sync_points_;
}

void MemoryFileSystem::CrashAtSyncPoint(int k, CrashTiming timing) {
  std::lock_guard lock(mutex_);
  crash_at_ = k;
  crash_timing_ = timing;
}

bool MemoryFileSystem::PutFile(const std::string& path, const std::string& content) {
  std::lock_guard lock(mutex_);
  std::string name;
  Dir* dir = DirOf(path, &name);
  if (dir == nullptr) return false;
  auto node = std::make_shared<Node>(Node{content, content});
  dir->entries[name] = node;
  dir->synced_entries[name] = node;
  return true;
}

std::optional<std::string> MemoryFileSystem::Contents(const std::string& path) const {
  std::lock_guard lock(mutex_);
  auto node = const_cast<MemoryFileSystem*>(this)->Find(path);
  if (!node) return std::nullopt;
  return node->current;
}

bool MemoryFileSystem::FlipBit(const std::string& path, std::uint64_t offset, int bit) {
  std::lock_guard lock(mutex_);
  auto node = Find(path);
  if (!node) return false;
  for (std::string* bytes : {&node->current, &node->synced}) {
    if (offset < bytes->size()) (*bytes)[offset] = static_cast<char>((*bytes)[offset] ^ (1 << bit));
  }
  return true;
}

bool MemoryFileSystem::TruncateStored(const std::string& path, std::uint64_t size) {
  std::lock_guard lock(mutex_);
  auto node = Find(path);
  if (!node) return false;
  for (std::string* bytes : {&node->current, &node->synced}) {
    if (size < bytes->size()) bytes->resize(size);
  }
  return true;
}

bool MemoryFileSystem::OverwriteStored(const std::string& path, std::uint64_t offset,
                                       const std::string& data) {
  std::lock_guard lock(mutex_);
  auto node = Find(path);
  if (!node) return false;
  for (std::string* bytes : {&node->current, &node->synced}) {
    if (bytes->size() < offset + data.size()) bytes->resize(offset + data.size(), '\0');
    bytes->replace(offset, data.size(), data);
  }
  return true;
}

}  // namespace uplink::spool::testing
