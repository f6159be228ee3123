#include "support/sshd.h"

#include <gtest/gtest.h>

#include "common/files.h"
#include "support/process.h"

namespace uplink::testing {

std::string MakeSshKeyPair(const std::string& path, const std::string& type,
                           const std::string& comment) {
  auto made = RunCommand(
      {"/usr/bin/ssh-keygen", "-q", "-t", type, "-N", "", "-C", comment, "-f", path});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  return std::string(TrimWhitespace(ReadFileOrEmpty(path + ".pub")));
}

InetdSshd::InetdSshd(std::string dir) : dir_(std::move(dir)) {
  host_key_ = MakeSshKeyPair(dir_ + "/host_key", "ed25519", "");
  WriteFileOrDie(dir_ + "/sshd_config",
                 "HostKey " + dir_ + "/host_key\nAuthorizedKeysFile " + authorized_keys_path() +
                     "\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                     "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                     "AllowAgentForwarding no\nSubsystem sftp internal-sftp\nPidFile none\n"
                     "LogLevel VERBOSE\n",
                 0600);
}

std::string InetdSshd::Log() const { return ReadFileOrEmpty(dir_ + "/sshd.log"); }

Result<SpawnedProcess> InetdSshd::Start() const {
  SpawnOptions spawn;
  spawn.argv = {"/usr/bin/unshare", "-m", "/bin/sh", "-c",
                "mount -t tmpfs tmpfs /run && mkdir -m 755 /run/sshd && exec /usr/sbin/sshd -i "
                "-e -f " + dir_ + "/sshd_config 2>>" + dir_ + "/sshd.log"};
  spawn.pipe_stdin = true;
  spawn.pipe_stdout = true;
  return SpawnProcess(spawn);
}

}  // namespace uplink::testing
