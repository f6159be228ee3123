#include "agent/node/host/proc_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

 private:
  int fd_;
};

}  // namespace

std::optional<ReadFailure> ReadProcFile(const std::string& path, std::size_t max_bytes,
                                        std::string& out) {
  out.clear();
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return FromErrno(errno);
  FileDescriptor file(fd);

  char chunk[kChunkSize];
  while (true) {
    const ssize_t n = ::read(file.get(), chunk, sizeof chunk);
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

}  // namespace uplink::agent::node
