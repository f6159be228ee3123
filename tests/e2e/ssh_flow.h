// What the SSH end-to-end tests and bench_ssh share: the workspace flow on podman with the
// workspace SSH image (deploy/workspace), a reservation whose SSH is ready, `uplink ssh setup`
// done for a fresh key, and real OpenSSH clients run with the config it wrote.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "workspace_flow.h"

namespace uplink::e2e {

class SshFlow : public WorkspaceFlow {
 protected:
  // kubesim on podman with the workspace SSH image, and SSH on in the execution settings.
  void SetUp() override;

  // A qualified offer with SSH on, its controller running with --ssh, a running reservation
  // of one GPU whose SSH is ready (ssh_), and `uplink ssh setup` done for a fresh Ed25519 key
  // (key_, grant_).
  void ReadyForSsh();
  // GET /api/v1/reservations/{id}/ssh until `ready`.
  json::value WaitUntilReady();

  // An OpenSSH key pair made by ssh-keygen in the user's home; the private key's path.
  std::string NewKey(const std::string& name, const std::string& type);
  // The uplink CLI as the admin.
  testing::CommandResult Cli(std::vector<std::string> args);

  std::string SshDir() const { return d_.cli_home() + "/.ssh"; }
  std::string Host() const { return "uplink-" + id_; }
  // The Host block `uplink ssh setup` wrote for the reservation.
  std::string ReadConf() const;
  // The first grant id in `text`; "" when none.
  static std::string GrantIn(const std::string& text);
  // The user's environment: the CLI's, with its API key.
  std::map<std::string, std::string> UserEnv() const;
  // argv for `program` (ssh, scp, sftp) with the setup's config, never waiting at a prompt.
  std::vector<std::string> ClientArgv(const std::string& program,
                                      const std::vector<std::string>& args) const;
  // `program` run with ClientArgv in the user's environment (its ProxyCommand, `uplink ssh
  // proxy`, finds its credential there).
  testing::CommandResult Run(const std::string& program, const std::vector<std::string>& args,
                             const std::string& stdin_data = "",
                             std::chrono::milliseconds timeout = std::chrono::seconds(600));
  testing::CommandResult Ssh(const std::string& command);
  // The `ProxyCommand` of the setup's Host block.
  std::string ProxyCommand() const;

  std::string offer_id_, id_, pod_, key_, grant_;
  json::value ssh_;
};

// The SHA-256 of a file's bytes, in hex.
std::string Sha256OfFile(const std::string& path);
// Writes a file of `bytes` (whole MiB) random bytes at `path`.
void RandomFile(const std::string& path, size_t bytes);

}  // namespace uplink::e2e
