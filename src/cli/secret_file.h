// A new file for a freshly issued secret (--token-out, --key-out).
//
// It is created before the console is asked, so that a path that cannot be written costs
// nothing: O_CREAT|O_EXCL|O_NOFOLLOW with mode 0600, so the secret lands only in a new file
// this user alone can read, never through a symlink or into an existing file. If the secret
// never arrives the file is removed again.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace uplink::cli {

class SecretFile {
 public:
  SecretFile() = default;
  SecretFile(const SecretFile&) = delete;
  SecretFile& operator=(const SecretFile&) = delete;
  ~SecretFile();

  // `flag` names the option in messages ("--token-out"). AlreadyExists for an existing path.
  Status Create(const std::string& path, std::string_view flag);
  // Writes, fsyncs and closes; on failure the file is removed.
  Status Write(std::string_view secret);

  bool created() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace uplink::cli
