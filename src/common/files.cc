#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/crypto.h"

namespace uplink {
namespace {

// Far more than any password or token; a bound so that a wrong path (a log) is refused.
constexpr size_t kMaxCredentialBytes = 64 << 10;

}  // namespace

Result<std::string> ReadFileBounded(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open " + path, errno);
  std::string out;
  char buf[16384];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      return ErrnoError("read " + path, saved);
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      return ResourceExhaustedError(path + " is larger than the " + std::to_string(max_bytes) +
                                    "-byte limit for it");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteFileAtomic(const std::string& path, std::string_view content, unsigned mode) {
  std::string dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  // An unpredictable name created exclusively, never through a symlink: in a shared directory
  // another user must not be able to pre-create the file we are about to fill.
  std::string tmp = path + ".tmp." + HexEncode(RandomBytes(8));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError("create " + tmp, errno);
  if (::fchmod(fd, mode) != 0) {  // the umask may have narrowed or the caller widened it
    int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoError("chmod " + tmp, saved);
  }
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoError("write " + tmp, saved);
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoError("fsync " + tmp, saved);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    return ErrnoError("rename " + tmp + " to " + path, saved);
  }
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return Status::Ok();
}

std::string_view TrimWhitespace(std::string_view text) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

Result<Secret> ReadCredentialFile(const std::string& path, std::string_view flag) {
  auto content = ReadFileBounded(path, kMaxCredentialBytes);
  if (!content.ok()) return content.status().WithContext("reading " + std::string(flag));
  const std::string_view value = TrimWhitespace(*content);
  Status problem = Status::Ok();
  if (value.empty()) {
    problem = FailedPreconditionError(std::string(flag) + " " + path + " is empty");
  }
  for (char c : value) {
    // The credential goes into a header; a stray newline would split it.
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f) {
      problem = FailedPreconditionError(std::string(flag) + " " + path +
                                        " holds control characters; it should hold the "
                                        "credential alone, on one line");
      break;
    }
  }
  Secret secret{std::string(value)};
  std::fill(content->begin(), content->end(), '\0');
  if (!problem.ok()) return problem;
  return secret;
}

}  // namespace uplink
