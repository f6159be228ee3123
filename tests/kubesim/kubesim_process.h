// uplink-kubesim as a child process for tests, and kubectl against it. Built on the shared
// process harness in tests/support: bounded waits, and the simulator always killed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "support/process.h"

namespace uplink::kubesim::testing {

using uplink::testing::CommandResult;
using uplink::testing::TempDir;

// Runs argv with exactly `env` as its environment (kubesim's flag tests need it empty).
CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         std::chrono::seconds timeout = std::chrono::seconds(60));

// uplink-kubesim from UPLINK_BIN_DIR, started on 127.0.0.1:0 with a kubeconfig in its own
// temporary directory. Stopped (SIGTERM, then SIGKILL) on destruction.
class KubesimProcess {
 public:
  // `extra_args` are appended to --listen/--kubeconfig-out. Waits (bounded) for the
  // kubeconfig to appear.
  static Result<std::unique_ptr<KubesimProcess>> Start(const std::vector<std::string>& extra_args);

  const std::string& kubeconfig() const { return kubeconfig_; }
  const std::string& server_url() const { return server_url_; }
  const std::string& dir() const { return dir_.path(); }
  bool Running() { return process_->Running(); }
  // SIGTERM and wait; the exit code (negative: the signal that ended it).
  int Stop() { return process_->Stop(); }
  // Everything the process wrote to stderr so far (its JSON log lines).
  std::string Logs() const { return process_->Stderr(); }
  // Everything the process wrote to stdout so far.
  std::string Stdout() const { return process_->Stdout(); }

  // kubectl --kubeconfig <ours> --cache-dir <fresh> args..., with a temporary HOME and
  // `stdin_data` on its standard input.
  CommandResult Kubectl(const std::vector<std::string>& args,
                        const std::string& stdin_data = "") const;

  // What a client of our own needs to call the API as the admin: the server URL, the CA that
  // signed its certificate, and the admin token.
  struct Access {
    std::string server_url;
    std::string ca_pem;
    std::string token;
  };
  Result<Access> AdminAccess() const;

  // A kubeconfig like ours that presents `token` (an identity of --token-auth-file) instead
  // of the admin token, written to `name` in our directory; its path.
  Result<std::string> WriteKubeconfigFor(const std::string& token, const std::string& name) const;
  // kubectl as above with another kubeconfig.
  CommandResult KubectlWith(const std::string& kubeconfig, const std::vector<std::string>& args,
                            const std::string& stdin_data = "") const;

 private:
  KubesimProcess() = default;
  TempDir dir_;
  std::unique_ptr<uplink::testing::ChildProcess> process_;
  std::string kubeconfig_;
  std::string server_url_;
};

// The workspace image by digest (localhost/uplink-workspace@sha256:...), as
// deploy/docker/workspace-image.sh prints it: built by podman once per machine, then looked up.
Result<std::string> WorkspaceImage();

// The workspace SSH image (deploy/workspace/image.sh on WorkspaceImage()) by digest
// (localhost/uplink-workspace-ssh@sha256:...): OpenSSH and deploy/workspace/sshd_config added.
Result<std::string> WorkspaceSshImage();

// podman as --runtime podman runs it (runc, the cgroupfs manager, the default storage), to
// look at the containers uplink-kubesim made.
CommandResult Podman(const std::vector<std::string>& args);

// The ids of the containers, running or exited, that uplink-kubesim made for the pod with
// this uid (`podman ps -a`), one a line; "" when there are none.
Result<std::string> PodContainers(const std::string& pod_uid);

}  // namespace uplink::kubesim::testing
