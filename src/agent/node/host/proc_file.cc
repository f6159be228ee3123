#include "agent/node/host/proc_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace uplink::agent::node {
namespace {

// seq_file fills as much of a read as it is given, so a large chunk means few system calls;
// appending from it copies only what the file held, where growing `out` first would clear
// its whole capacity every time.
constexpr std::size_t kChunkSize = 32u << 10;

ReadFailure FromErrno(int errno_value) { return {errno_value, std::strerror(errno_value)}; }

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// The descriptor, or -1 with errno set.
int OpenForReading(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

bool IsOnProcfs(int fd) {
  struct statfs filesystem {};
  return ::fstatfs(fd, &filesystem) == 0 && filesystem.f_type == PROC_SUPER_MAGIC;
}

// Reads until end of file, from the file's offset or, when `from_start`, from offset 0 with
// pread (a kept descriptor: the offset of the previous cycle's read does not matter).
std::optional<ReadFailure> ReadToEnd(int fd, bool from_start, std::size_t max_bytes,
                                     std::string& out) {
  char chunk[kChunkSize];
  while (true) {
    const ssize_t n = from_start
                          ? ::pread(fd, chunk, sizeof chunk, static_cast<off_t>(out.size()))
                          : ::read(fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      out.clear();
      return FromErrno(saved);
    }
    if (n == 0) return std::nullopt;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
      out.clear();
      return ReadFailure{0, "holds more than the " + std::to_string(max_bytes) +
                                "-byte cap for it"};
    }
    out.append(chunk, static_cast<std::size_t>(n));
  }
}

}  // namespace

ProcFile::~ProcFile() {
  if (kept_fd_ >= 0) ::close(kept_fd_);
}

std::optional<ReadFailure> ProcFile::Read(std::size_t max_bytes, std::string& out) {
  out.clear();
  if (kept_fd_ < 0) {
    FileDescriptor file(OpenForReading(path_));
    if (file.get() < 0) return FromErrno(errno);
    if (!IsOnProcfs(file.get())) return ReadToEnd(file.get(), false, max_bytes, out);
    kept_fd_ = file.release();
  }
  auto failure = ReadToEnd(kept_fd_, true, max_bytes, out);
  if (failure) {
    ::close(kept_fd_);
    kept_fd_ = -1;
  }
  return failure;
}

bool ProcFile::MountTableUnchanged() {
  // The descriptor is kept only while reads of it work. Opening the table records the
  // namespace's mount event count, and each poll that reports a change records the new one.
  if (kept_fd_ < 0) return false;
  pollfd entry{kept_fd_, POLLPRI, 0};
  int ready;
  do {
    ready = ::poll(&entry, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready == 0;
}

}  // namespace uplink::agent::node
