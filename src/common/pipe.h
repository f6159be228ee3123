// A pipe whose ends close with it (O_CLOEXEC, so no child inherits them by accident), for
// RunProcess (common/subprocess.h), which runs every helper program.
#pragma once

#include <fcntl.h>
#include <unistd.h>

namespace uplink {

class Pipe {
 public:
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) fds_[0] = fds_[1] = -1;
  }
  ~Pipe() {
    Close(0);
    Close(1);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;

  bool ok() const { return fds_[0] >= 0; }
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  // 0: the read end, 1: the write end.
  void Close(int end) {
    if (fds_[end] >= 0) ::close(fds_[end]);
    fds_[end] = -1;
  }

 private:
  int fds_[2];
};

}  // namespace uplink
