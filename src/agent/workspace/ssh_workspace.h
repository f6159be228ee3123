// The workspace's side of SSH (docs/protocol.md, "SSH relay"), done through the exec API in
// the workspace container as its own user: the host key made once, authorized_keys rewritten
// whole, and the argv of `sshd -i` for one channel. The host key's private half never leaves
// the workspace; only the public key comes back.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/workspace/command_runner.h"
#include "common/status.h"
#include "kube/client.h"

namespace uplink::agent::workspace {

struct SshPaths {
  std::string dir = "/scratch/.uplink-ssh";           // --ssh-dir
  std::string sshd_config = "/etc/ssh/sshd_config";  // --sshd-config
};

// Where a workspace is: the exec target.
struct WorkspacePod {
  std::string ns;
  std::string pod;
  std::string reservation_id;
};

struct HostKey {
  std::string public_key;  // "ssh-ed25519 AAAA..."
  std::string sshd;        // "OpenSSH_9.2p1"; empty when the image did not say
};

// Makes the host key unless it exists (atomically: a crash leaves either no key or the whole
// one) and returns its public half and the OpenSSH version.
Result<HostKey> EnsureHostKey(kube::KubeClient& kube, const WorkspacePod& where,
                              const SshPaths& paths, ExecSessions& sessions);

// authorized_keys' text: one line per key. A key that is not one line of an allowed type
// (protocol::IsAuthorizedKeyLine: no options, no line break) is refused: it would add a line,
// or a power, the console never granted.
Result<std::string> AuthorizedKeysText(const std::vector<std::string>& keys);

// Replaces authorized_keys with exactly `keys` (written to a temporary file of its own, then
// renamed over it: sshd never reads half a file).
Status WriteAuthorizedKeys(kube::KubeClient& kube, const WorkspacePod& where,
                           const SshPaths& paths, const std::vector<std::string>& keys,
                           ExecSessions& sessions);

// `sshd -i -e -f CONFIG`: one SSH connection on stdin/stdout, its log on stderr.
std::vector<std::string> SshdArgv(const SshPaths& paths);

// "ssh-ed25519 <base64>" (no comment) as ssh-keygen writes it; nullopt for anything else.
std::optional<std::string> ParseHostPublicKey(std::string_view text);

}  // namespace uplink::agent::workspace
