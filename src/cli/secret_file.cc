#include "cli/secret_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace uplink::cli {

SecretFile::~SecretFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(path_.c_str());
}

Status SecretFile::Create(const std::string& path, std::string_view flag) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ >= 0) return Status::Ok();
  int error = errno;
  if (error == EEXIST) {
    return AlreadyExistsError(std::string(flag) + " " + path +
                              " already exists; uplink writes a new secret only to a new file. "
                              "Remove it or choose another path");
  }
  return IOError("cannot create " + std::string(flag) + " " + path + ": " + std::strerror(error));
}

Status SecretFile::Write(std::string_view secret) {
  Status status = Status::Ok();
  for (size_t done = 0; status.ok() && done < secret.size();) {
    ssize_t n = ::write(fd_, secret.data() + done, secret.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) status = IOError(std::string("writing: ") + std::strerror(errno));
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (status.ok() && ::fsync(fd_) != 0)
    status = IOError(std::string("fsync: ") + std::strerror(errno));
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0 && status.ok())
    status = IOError(std::string("close: ") + std::strerror(errno));
  if (!status.ok()) ::unlink(path_.c_str());
  return status;
}

}  // namespace uplink::cli
