// Test helpers: run uplink-kubesim as a child process and run commands (kubectl) against it,
// always with bounded waits, and always killing what was started.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace uplink::kubesim::testing {

// A fresh directory under TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1 if killed (timeout or signal)
  std::string out;
  std::string err;
};

// Runs argv[0] (an absolute path) with `env` as its whole environment; kills it after
// `timeout`. stdin is /dev/null.
CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         std::chrono::seconds timeout = std::chrono::seconds(60));

// uplink-kubesim from UPLINK_BIN_DIR, started on 127.0.0.1:0 with a kubeconfig in its own
// temporary directory. The destructor sends SIGTERM, then SIGKILL if it has not exited.
class KubesimProcess {
 public:
  // `extra_args` are appended to --listen/--kubeconfig-out. Waits (bounded) for the
  // kubeconfig to appear.
  static Result<std::unique_ptr<KubesimProcess>> Start(const std::vector<std::string>& extra_args);
  ~KubesimProcess();

  const std::string& kubeconfig() const { return kubeconfig_; }
  const std::string& server_url() const { return server_url_; }
  const std::string& dir() const { return dir_.path(); }
  bool Running();
  // SIGTERM and wait; the exit code, or -1 if it had to be killed.
  int Stop();
  // Everything the process wrote to stderr so far (its JSON log lines).
  std::string Logs() const;

  // kubectl --kubeconfig <ours> --cache-dir <fresh> args..., with a temporary HOME.
  CommandResult Kubectl(const std::vector<std::string>& args) const;

 private:
  KubesimProcess() = default;
  TempDir dir_;
  pid_t pid_ = -1;
  std::string kubeconfig_;
  std::string server_url_;
};

}  // namespace uplink::kubesim::testing
