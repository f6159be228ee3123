// A real OpenSSH server for tests of the SSH path: `sshd -i` (one connection on its stdin and
// stdout, as the workspace controller runs it) with a host key and authorized_keys in a
// directory of the test's, logging in this test's user by public key only.
#pragma once

#include <string>

#include "common/status.h"
#include "common/subprocess.h"

namespace uplink::testing {

class InetdSshd {
 public:
  // Makes DIR/host_key (ssh-keygen) and DIR/sshd_config; DIR/authorized_keys is the test's to
  // write. sshd logs to DIR/sshd.log.
  explicit InetdSshd(std::string dir);

  // The host key's .pub line.
  const std::string& host_key() const { return host_key_; }
  std::string authorized_keys_path() const { return dir_ + "/authorized_keys"; }
  std::string Log() const;

  // Starts one `sshd -i` with its stdin and stdout on pipes. It runs in a mount namespace of
  // its own with a fresh /run, because sshd insists on /run/sshd, which this machine need not
  // have. The caller closes the pipes and reaps it.
  Result<SpawnedProcess> Start() const;

 private:
  std::string dir_;
  std::string host_key_;
};

// Makes an unencrypted key pair at `path` and `path`.pub with ssh-keygen (`type`: ed25519,
// ecdsa, rsa); returns the .pub line without its newline.
std::string MakeSshKeyPair(const std::string& path, const std::string& type = "ed25519",
                           const std::string& comment = "person@laptop");

}  // namespace uplink::testing
