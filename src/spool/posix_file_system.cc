// The FileSystem over POSIX calls. Every descriptor is opened with O_CLOEXEC (the agent starts
// helper processes), every call is retried on EINTR and loops over short transfers, and
// every error names the operation and the path.
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "spool/file_system.h"

namespace uplink::spool {
namespace {

// "append /var/spool/x.seg: no space left on device". Lower case, so that the text reads
// the same inside a longer message; ENOENT is NotFound, the rest IOError.
Status PosixError(std::string_view operation, const std::string& path, int error) {
  std::string reason = std::strerror(error);
  if (!reason.empty())
    reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  std::string message(operation);
  message += ' ';
  message += path;
  message += ": ";
  message += reason;
  if (error == ENOENT) return NotFoundError(std::move(message));
  return IOError(std::move(message));
}

template <typename Call>
auto RetryOnInterrupt(Call call) {
  while (true) {
    auto result = call();
    if (result >= 0 || errno != EINTR) return result;
  }
}

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// O_NOFOLLOW: every file is the spool's own; a link in its place is damage, not a redirection
// (an open that follows it could create or write a file elsewhere).
Result<int> OpenFile(const std::string& path, int flags) {
  int fd =
      RetryOnInterrupt([&] { return ::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, 0600); });
  if (fd < 0) return PosixError("open", path, errno);
  return fd;
}

Result<std::string_view> ReadAt(int fd, const std::string& path, std::uint64_t offset, size_t n,
                                char* scratch) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, scratch + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return PosixError("read", path, errno);
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return std::string_view(scratch, done);
}

Status SyncData(int fd, const std::string& path) {
  if (RetryOnInterrupt([&] { return ::fdatasync(fd); }) != 0)
    return PosixError("fdatasync", path, errno);
  return Status::Ok();
}

class PosixReadableFile final : public ReadableFile {
 public:
  PosixReadableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Result<std::string_view> Read(std::uint64_t offset, size_t n, char* scratch) const override {
    return ReadAt(fd_.get(), path_, offset, n, scratch);
  }

 private:
  Descriptor fd_;
  std::string path_;
};

class PosixInPlaceFile final : public InPlaceFile {
 public:
  PosixInPlaceFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  Result<std::string_view> Read(std::uint64_t offset, size_t n, char* scratch) const override {
    return ReadAt(fd_.get(), path_, offset, n, scratch);
  }

  Status WriteAt(std::uint64_t offset, std::string_view data) override {
    while (!data.empty()) {
      ssize_t written = ::pwrite(fd_.get(), data.data(), data.size(), static_cast<off_t>(offset));
      if (written < 0) {
        if (errno == EINTR) continue;
        return PosixError("write", path_, errno);
      }
      data.remove_prefix(static_cast<size_t>(written));
      offset += static_cast<std::uint64_t>(written);
    }
    return Status::Ok();
  }

  Status WriteAt(std::uint64_t offset, std::span<const std::string_view> pieces) override {
    iovec batch[IOV_MAX];
    size_t done_in_first = 0;  // bytes of pieces.front() already written
    while (!pieces.empty()) {
      const size_t count = std::min<size_t>(pieces.size(), IOV_MAX);
      for (size_t i = 0; i < count; ++i) {
        const size_t skip = i == 0 ? done_in_first : 0;
        batch[i].iov_base = const_cast<char*>(pieces[i].data() + skip);
        batch[i].iov_len = pieces[i].size() - skip;
      }
      ssize_t written =
          ::pwritev(fd_.get(), batch, static_cast<int>(count), static_cast<off_t>(offset));
      if (written < 0) {
        if (errno == EINTR) continue;
        return PosixError("write", path_, errno);
      }
      offset += static_cast<std::uint64_t>(written);
      // Past the pieces written whole; a short write resumes inside the next one.
      size_t left = static_cast<size_t>(written) + done_in_first;
      while (!pieces.empty() && left >= pieces.front().size()) {
        left -= pieces.front().size();
        pieces = pieces.subspan(1);
      }
      done_in_first = left;
    }
    return Status::Ok();
  }

  Status Sync() override { return SyncData(fd_.get(), path_); }

  void StartWriteback(std::uint64_t offset, std::uint64_t n) override {
    (void)::sync_file_range(fd_.get(), static_cast<off_t>(offset), static_cast<off_t>(n),
                            SYNC_FILE_RANGE_WRITE);
  }

  Status Preallocate(std::uint64_t bytes) override {
    if (RetryOnInterrupt([&] {
          return ::fallocate(fd_.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes));
        }) != 0) {
      return PosixError("preallocate", path_, errno);
    }
    return Status::Ok();
  }

 private:
  Descriptor fd_;
  std::string path_;
};

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}  // closing the descriptor releases the flock

 private:
  Descriptor fd_;
};

class PosixFileSystemImpl final : public FileSystem {
 public:
  Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0700) == 0) return Status::Ok();
    const int error = errno;
    struct stat st {};
    if (error == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      return Status::Ok();
    return PosixError("create directory", path, error);
  }

  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    DIR* handle = ::opendir(dir.c_str());
    if (handle == nullptr) return PosixError("list directory", dir, errno);
    std::vector<std::string> names;
    while (true) {
      errno = 0;
      const dirent* entry = ::readdir(handle);
      if (entry == nullptr) break;
      std::string_view name(entry->d_name);
      if (name != "." && name != "..") names.emplace_back(name);
    }
    const int error = errno;
    ::closedir(handle);
    if (error != 0) return PosixError("list directory", dir, error);
    return names;
  }

  Result<std::uint64_t> FileSize(const std::string& path) override {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return PosixError("stat", path, errno);
    if (!S_ISREG(st.st_mode)) return FailedPreconditionError(path + " is not a regular file");
    return static_cast<std::uint64_t>(st.st_size);
  }

  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) override {
    UPLINK_ASSIGN_OR_RETURN(int fd, OpenFile(path, O_RDONLY));
    return std::unique_ptr<ReadableFile>(new PosixReadableFile(fd, path));
  }

  Result<std::unique_ptr<InPlaceFile>> OpenInPlace(const std::string& path) override {
    UPLINK_ASSIGN_OR_RETURN(int fd, OpenFile(path, O_RDWR | O_CREAT));
    return std::unique_ptr<InPlaceFile>(new PosixInPlaceFile(fd, path));
  }

  Status Truncate(const std::string& path, std::uint64_t size) override {
    UPLINK_ASSIGN_OR_RETURN(int fd, OpenFile(path, O_WRONLY));
    Descriptor descriptor(fd);
    if (RetryOnInterrupt([&] { return ::ftruncate(fd, static_cast<off_t>(size)); }) != 0) {
      return PosixError("truncate", path, errno);
    }
    return Status::Ok();
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PosixError("remove", path, errno);
    return Status::Ok();
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return PosixError("rename", from, errno);
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override {
    UPLINK_ASSIGN_OR_RETURN(int fd, OpenFile(dir, O_RDONLY | O_DIRECTORY));
    Descriptor descriptor(fd);
    if (RetryOnInterrupt([&] { return ::fsync(fd); }) != 0)
      return PosixError("fsync directory", dir, errno);
    return Status::Ok();
  }

  Result<std::unique_ptr<FileLock>> Lock(const std::string& path) override {
    UPLINK_ASSIGN_OR_RETURN(int fd, OpenFile(path, O_RDWR | O_CREAT));
    if (RetryOnInterrupt([&] { return ::flock(fd, LOCK_EX | LOCK_NB); }) != 0) {
      const int error = errno;
      ::close(fd);
      if (error == EWOULDBLOCK) {
        return FailedPreconditionError(path + " is locked: another process is using this spool");
      }
      return PosixError("lock", path, error);
    }
    return std::unique_ptr<FileLock>(new PosixFileLock(fd));
  }

  bool OverwritesInPlace(const std::string& dir) override {
    // The magic numbers of linux/magic.h (and ZFS's own), spelled out: not every libc has them.
    constexpr unsigned long kTmpfs = 0x01021994, kRamfs = 0x858458f6, kBtrfs = 0x9123683e,
                            kZfs = 0x2fc12fc2;
    struct statfs info {};
    if (RetryOnInterrupt([&] { return ::statfs(dir.c_str(), &info); }) != 0) return false;
    const auto type = static_cast<unsigned long>(info.f_type);
    return type != kTmpfs && type != kRamfs && type != kBtrfs && type != kZfs;
  }
};

}  // namespace

FileSystem& PosixFileSystem() {
  static PosixFileSystemImpl* const file_system = new PosixFileSystemImpl();
  return *file_system;
}

}  // namespace uplink::spool
