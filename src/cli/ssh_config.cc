#include "cli/ssh_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <vector>

#include "common/files.h"
#include "common/text.h"

namespace uplink::cli {
namespace {

// An ssh config is small; one this large is not one uplink should rewrite.
constexpr size_t kMaxSshConfigBytes = 1 << 20;

// A byte ssh would read as something other than part of a path: the end of a line, a quote
// or escape (argv_split), a glob (Include), a %-token (IdentityFile, UserKnownHostsFile).
bool IsUnsafePathByte(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f || c == '"' || c == '\'' || c == '\\' || c == '%' ||
         c == '*' || c == '?' || c == '[' || c == ']';
}

// `path` as a config value: as it is, or in double quotes when it holds a blank or a '#'.
Result<std::string> ConfigPath(std::string_view what, std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return InvalidArgumentError(std::string(what) + " must be an absolute path");
  }
  for (char c : path) {
    if (IsUnsafePathByte(c)) {
      return InvalidArgumentError(std::string(what) + " \"" + OneLineExcerpt(path, 200) +
                                  "\" has a character ssh would not read as part of a path "
                                  "(a quote, backslash, %, *, ?, [, ] or a control "
                                  "character); use a path without it");
    }
  }
  if (path.find_first_of(" \t#") == std::string_view::npos) return std::string(path);
  return "\"" + std::string(path) + "\"";
}

// `arg` as one word for the shell ssh runs the ProxyCommand with, %-tokens doubled.
Result<std::string> ShellWord(std::string_view arg) {
  std::string word;
  bool plain = !arg.empty();
  for (char c : arg) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || c == '\'' || c == '\\') {
      return InvalidArgumentError("the ProxyCommand argument \"" + OneLineExcerpt(arg, 200) +
                                  "\" has a quote, a backslash or a control character");
    }
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || std::string_view("/._-+=:,@").find(c) !=
                                                    std::string_view::npos;
    plain = plain && safe;
    word += c;
    if (c == '%') word += '%';
  }
  return plain ? word : "'" + word + "'";
}

bool IsMissing(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

// The directory at `path`, made 0700 when missing. `private_dir`: also narrowed to 0700 when
// others may read it (uplink's own directory; ~/.ssh is the user's to arrange).
Status EnsureDirectory(const std::string& path, bool private_dir) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoError("stat " + path, errno);
    if (::mkdir(path.c_str(), 0700) != 0) return ErrnoError("mkdir " + path, errno);
    return Status::Ok();
  }
  if (!S_ISDIR(st.st_mode)) return FailedPreconditionError(path + " is not a directory");
  if (private_dir && (st.st_mode & 077) != 0 && ::chmod(path.c_str(), 0700) != 0) {
    return ErrnoError("chmod 0700 " + path, errno);
  }
  return Status::Ok();
}

}  // namespace

SshPaths SshPathsFor(const std::string& ssh_dir, std::string_view reservation_id) {
  SshPaths paths;
  paths.ssh_dir = ssh_dir;
  while (paths.ssh_dir.size() > 1 && paths.ssh_dir.back() == '/') paths.ssh_dir.pop_back();
  paths.uplink_dir = paths.ssh_dir + "/uplink";
  paths.config = paths.ssh_dir + "/config";
  paths.backup = paths.ssh_dir + "/config.uplink-backup";
  paths.host_config = paths.uplink_dir + "/" + std::string(reservation_id) + ".conf";
  paths.known_hosts = paths.uplink_dir + "/" + std::string(reservation_id) + ".known_hosts";
  return paths;
}

std::string SshHostAlias(std::string_view reservation_id) {
  return "uplink-" + std::string(reservation_id);
}

Result<std::string> SshProxyCommand(const std::vector<std::string>& argv) {
  std::string command;
  for (const std::string& arg : argv) {
    UPLINK_ASSIGN_OR_RETURN(std::string word, ShellWord(arg));
    command += (command.empty() ? "" : " ") + word;
  }
  return command;
}

Result<std::string> RenderSshHostConfig(const SshHostBlock& block, const SshPaths& paths) {
  UPLINK_ASSIGN_OR_RETURN(std::string identity, ConfigPath("--identity", block.identity_file));
  UPLINK_ASSIGN_OR_RETURN(std::string known_hosts, ConfigPath("--ssh-dir", paths.known_hosts));
  const std::string alias = SshHostAlias(block.reservation_id);
  // The rest of the user's config may set any of these for Host *; values here come first.
  return "# Written by 'uplink ssh setup " + block.reservation_id +
         "'; run it again to refresh this file.\n"
         "Host " + alias + " " + block.reservation_id + "\n" +
         "  HostName " + block.reservation_id + "\n" +
         "  User " + block.user + "\n" +
         "  IdentityFile " + identity + "\n" +
         "  IdentitiesOnly yes\n"
         "  UserKnownHostsFile " + known_hosts + "\n" +
         "  StrictHostKeyChecking yes\n"
         "  HostKeyAlias " + alias + "\n" +
         // The pin is exactly the key the console reported: ssh adds no others to the file.
         "  UpdateHostKeys no\n"
         // Nothing of this machine's is lent to the workspace.
         "  ForwardAgent no\n"
         "  ForwardX11 no\n"
         "  ProxyCommand " + block.proxy_command + "\n";
}

std::string RenderSshKnownHosts(std::string_view reservation_id, std::string_view host_key) {
  return SshHostAlias(reservation_id) + " " + std::string(host_key) + "\n";
}

Result<std::string> SshIncludeLine(const SshPaths& paths) {
  UPLINK_ASSIGN_OR_RETURN(std::string dir, ConfigPath("--ssh-dir", paths.uplink_dir));
  // The glob goes outside the quotes a path with a blank needs; ssh joins them as one word.
  return "Include " + dir + "/*.conf";
}

std::string WithIncludeFirst(std::string_view config, std::string_view include_line) {
  std::string out = std::string(include_line) + "\n";
  size_t start = 0;
  while (start < config.size()) {
    size_t end = config.find('\n', start);
    const size_t next = end == std::string_view::npos ? config.size() : end + 1;
    if (config.substr(start, (end == std::string_view::npos ? config.size() : end) - start) !=
        include_line) {
      out.append(config.substr(start, next - start));
    }
    start = next;
  }
  return out;
}

Result<SshInstallResult> InstallSshFiles(const SshPaths& paths, std::string_view host_config,
                                         std::string_view known_hosts) {
  UPLINK_RETURN_IF_ERROR(EnsureDirectory(paths.ssh_dir, false));
  UPLINK_RETURN_IF_ERROR(EnsureDirectory(paths.uplink_dir, true));
  // The pin first: a Host block is never there without its known_hosts file.
  UPLINK_RETURN_IF_ERROR(WriteFileAtomic(paths.known_hosts, known_hosts, 0600));
  UPLINK_RETURN_IF_ERROR(WriteFileAtomic(paths.host_config, host_config, 0600));
  UPLINK_ASSIGN_OR_RETURN(std::string include, SshIncludeLine(paths));

  SshInstallResult result;
  std::string target = paths.config;
  struct stat st {};
  if (::lstat(paths.config.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoError("stat " + paths.config, errno);
    UPLINK_RETURN_IF_ERROR(WriteFileAtomic(target, include + "\n", 0600));
    result.config_changed = result.config_created = true;
    return result;
  }
  if (S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (::realpath(paths.config.c_str(), resolved) == nullptr) {
      return ErrnoError(paths.config + " is a symbolic link uplink cannot follow", errno);
    }
    target = resolved;
    if (::stat(target.c_str(), &st) != 0) return ErrnoError("stat " + target, errno);
  }
  if (!S_ISREG(st.st_mode)) return FailedPreconditionError(paths.config + " is not a file");
  auto old = ReadFileBounded(target, kMaxSshConfigBytes);
  if (!old.ok()) return old.status().WithContext("read " + target);
  const std::string updated = WithIncludeFirst(*old, include);
  if (updated == *old) return result;
  if (IsMissing(paths.backup)) {
    UPLINK_RETURN_IF_ERROR(WriteFileAtomic(paths.backup, *old, st.st_mode & 0600));
    result.backup_made = true;
  }
  UPLINK_RETURN_IF_ERROR(WriteFileAtomic(target, updated, st.st_mode & 07777));
  result.config_changed = true;
  return result;
}

}  // namespace uplink::cli
