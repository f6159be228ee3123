// The files `uplink ssh setup` writes (docs/cli.md, "SSH"): one Host block and one pinned
// known_hosts file per reservation under SSH_DIR/uplink/, and one Include line at the top of
// SSH_DIR/config.
//
// OpenSSH uses the first value it obtains for each option, and an Include after a Host block
// belongs to that block, so the Include goes on the first line. The user's config is otherwise
// kept byte for byte: copied once to config.uplink-backup before the first change, and replaced
// atomically with its mode kept. Every value written into a config file was checked first: a
// path or id that could end a line, open a quote or name a % token is refused, never escaped
// into something ssh would read differently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace uplink::cli {

// Where the files go; every path absolute.
struct SshPaths {
  std::string ssh_dir;      // ~/.ssh
  std::string uplink_dir;   // ~/.ssh/uplink
  std::string config;       // ~/.ssh/config
  std::string backup;       // ~/.ssh/config.uplink-backup
  std::string host_config;  // ~/.ssh/uplink/RES.conf
  std::string known_hosts;  // ~/.ssh/uplink/RES.known_hosts
};
SshPaths SshPathsFor(const std::string& ssh_dir, std::string_view reservation_id);

// "uplink-res_…": the Host name to use, and the alias the host key is pinned under.
std::string SshHostAlias(std::string_view reservation_id);

// What goes into one reservation's Host block. `host_key` is "TYPE BASE64" (no comment);
// `proxy_command` comes from SshProxyCommand.
struct SshHostBlock {
  std::string reservation_id;
  std::string user;
  std::string identity_file;  // absolute
  std::string host_key;
  std::string proxy_command;
};

// The ProxyCommand line: `program` (this binary, absolute) and its arguments, each quoted
// for the shell ssh runs it with and with % doubled (ssh expands %-tokens in it).
// InvalidArgument when an argument holds a quote, a backslash or a control character.
Result<std::string> SshProxyCommand(const std::vector<std::string>& argv);

// The texts of the two per-reservation files. InvalidArgument when a path cannot be written
// into an ssh config safely (see above).
Result<std::string> RenderSshHostConfig(const SshHostBlock& block, const SshPaths& paths);
std::string RenderSshKnownHosts(std::string_view reservation_id, std::string_view host_key);

// The Include line for `paths`, without its newline.
Result<std::string> SshIncludeLine(const SshPaths& paths);

// `config` with `include_line` as its first line and nowhere else; every other byte kept.
// Equal to `config` when that already holds.
std::string WithIncludeFirst(std::string_view config, std::string_view include_line);

// What InstallSshFiles did, for the summary it prints.
struct SshInstallResult {
  bool config_changed = false;  // the Include line was added (or moved to the top)
  bool config_created = false;  // there was no config before
  bool backup_made = false;     // the old config was copied to the backup now
};

// Creates the directories (0700) when missing, writes the two per-reservation files (0600,
// atomically), then adds the Include line to the config as described at the top. A config
// that is a symbolic link (a dotfiles checkout) is written where it points.
Result<SshInstallResult> InstallSshFiles(const SshPaths& paths, std::string_view host_config,
                                         std::string_view known_hosts);

}  // namespace uplink::cli
