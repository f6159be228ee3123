#include "agent/workspace/ssh_workspace.h"

#include "agent/workspace/pod_spec.h"
#include "common/files.h"
#include "common/text.h"
#include "protocol/ssh.h"

namespace uplink::agent::workspace {
namespace {

// $1 the directory. The private key is renamed into place last, and its presence is what
// says the key exists, so an interrupted run leaves nothing that a later one would keep.
constexpr std::string_view kHostKeyScript = R"SH(umask 077
mkdir -p "$1" && cd "$1" || exit 1
[ -s host_ed25519_key ] || { rm -f hk.tmp hk.tmp.pub && ssh-keygen -q -t ed25519 -N '' -C '' -f hk.tmp && mv hk.tmp.pub host_ed25519_key.pub && mv hk.tmp host_ed25519_key; } || exit 1
{ /usr/sbin/sshd -V; ssh -V; } 2>&1 | grep -o 'OpenSSH_[^ ,]*' | head -n 1 >&2
# The workspace's user owns this directory: a FIFO in place of the key would hang a reader.
[ -f host_ed25519_key.pub ] && timeout 10 head -c 4096 host_ed25519_key.pub
)SH";

// $1 the directory, $2 the bytes on stdin. A temporary file per writer, made new by mktemp
// (the workspace's user owns the directory: a name planted in advance, a FIFO say, is never
// opened), checked for its length before the rename: a cut exec session never leaves a
// shortened authorized_keys; -T refuses to move it into a directory planted in its place.
constexpr std::string_view kAuthorizedKeysScript = R"SH(umask 077
mkdir -p "$1" || exit 1
t=$(mktemp "$1/ak.XXXXXX") || exit 1
timeout 10 head -c "$2" > "$t" && [ "$(wc -c < "$t")" -eq "$2" ] && mv -fT "$t" "$1/authorized_keys" || { rm -f "$t"; exit 1; }
)SH";

std::string ExecFailure(const ExecResult& ran) {
  std::string detail = OneLineExcerpt(TrimWhitespace(ran.stderr_text), 300);
  std::optional<int> code = ExecExitCode(ran.status_json);
  return (code ? "exit code " + std::to_string(*code) : std::string("no exit code")) +
         (detail.empty() ? "" : ": " + detail);
}

}  // namespace

std::optional<std::string> ParseHostPublicKey(std::string_view text) {
  std::string_view key = TrimWhitespace(text);
  constexpr std::string_view kType = "ssh-ed25519 ";
  if (!key.starts_with(kType) || key.size() > protocol::kMaxHostKeyBytes) return std::nullopt;
  std::string_view blob = key.substr(kType.size());
  if (blob.empty()) return std::nullopt;
  for (char c : blob) {
    const bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && c != '+' && c != '/' && c != '=') return std::nullopt;
  }
  return std::string(key);
}

Result<HostKey> EnsureHostKey(kube::KubeClient& kube, const WorkspacePod& where,
                              const SshPaths& paths, ExecSessions& sessions) {
  std::string out;
  UPLINK_ASSIGN_OR_RETURN(
      ExecResult ran,
      RunExec(kube, where.ns, where.pod, kContainerName,
              {"sh", "-c", std::string(kHostKeyScript), "uplink-ssh-host-key", paths.dir}, "",
              [&](std::string_view chunk) {
                if (out.size() < 4 * protocol::kMaxHostKeyBytes) out.append(chunk);
              },
              sessions));
  if (ExecExitCode(ran.status_json) != 0) {
    return FailedPreconditionError("the host key could not be made in " + where.pod + " (" +
                                   ExecFailure(ran) +
                                   "); is the workspace image the SSH one (deploy/workspace)?");
  }
  std::optional<std::string> key = ParseHostPublicKey(out);
  if (!key) {
    return DataLossError("the workspace " + where.pod + " answered no ssh-ed25519 public key in " +
                         paths.dir + "/host_ed25519_key.pub");
  }
  HostKey host_key{.public_key = *key};
  std::string_view version = TrimWhitespace(ran.stderr_text);
  if (version.starts_with("OpenSSH_") && version.size() <= protocol::kMaxSshdVersionBytes &&
      version.find_first_of(" \n\r\t") == std::string_view::npos) {
    host_key.sshd = std::string(version);
  }
  return host_key;
}

Result<std::string> AuthorizedKeysText(const std::vector<std::string>& keys) {
  if (keys.size() > protocol::kMaxAuthorizedKeys) {
    return InvalidArgumentError(std::to_string(keys.size()) + " authorized keys; at most " +
                                std::to_string(protocol::kMaxAuthorizedKeys));
  }
  std::string text;
  for (const std::string& key : keys) {
    // The decoder checked it already; checked again where it becomes a line of the file.
    if (!protocol::IsAuthorizedKeyLine(key)) {
      return InvalidArgumentError("an authorized key is not one line of an allowed key type");
    }
    text += key;
    text += '\n';
  }
  return text;
}

Status WriteAuthorizedKeys(kube::KubeClient& kube, const WorkspacePod& where,
                           const SshPaths& paths, const std::vector<std::string>& keys,
                           ExecSessions& sessions) {
  UPLINK_ASSIGN_OR_RETURN(std::string text, AuthorizedKeysText(keys));
  UPLINK_ASSIGN_OR_RETURN(
      ExecResult ran,
      RunExec(kube, where.ns, where.pod, kContainerName,
              {"sh", "-c", std::string(kAuthorizedKeysScript), "uplink-ssh-keys", paths.dir,
               std::to_string(text.size())},
              text, [](std::string_view) {}, sessions));
  if (ExecExitCode(ran.status_json) != 0) {
    return FailedPreconditionError("authorized_keys could not be written in " + where.pod + " (" +
                                   ExecFailure(ran) + ")");
  }
  return Status::Ok();
}

std::vector<std::string> SshdArgv(const SshPaths& paths) {
  return {"/usr/sbin/sshd", "-i", "-e", "-f", paths.sshd_config};
}

}  // namespace uplink::agent::workspace
