// The cluster role's kubectl: every argv passes the read-only guard first (a refusal never
// starts a process), then runs by absolute path without a shell, with the agent's own
// in-cluster kubeconfig, a clean environment (no KUBECONFIG, a PATH holding nothing, so no
// plugin can be found), a timeout and a bound on its output, several at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/status.h"
#include "kube/credentials.h"

namespace uplink::agent::cluster {

struct KubectlRunnerOptions {
  std::string kubectl_path;  // absolute
  // The agent's own kubeconfig (WriteInClusterKubeconfig): passed as --kubeconfig after the
  // guard has passed the argv. It names the token file; no token is ever in an argv.
  std::string kubeconfig_path;
  // kubectl's HOME (its discovery cache goes under it); created when missing. Absolute.
  std::string cache_dir;
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  size_t max_output_bytes = 4 << 20;
  size_t max_concurrent = 4;
};

struct KubectlRun {
  int exit_code = -1;  // kubectl's; -N when killed by signal N
  std::string stdout_text;
  std::string stderr_text;  // at most 64 KiB, then a line saying how much was not kept
  std::int64_t duration_ms = 0;
};

class KubectlRunner {
 public:
  // InvalidArgument for a relative path, NotFound for a kubectl or kubeconfig that is not
  // there, an I/O error when the cache directory cannot be made.
  static Result<std::unique_ptr<KubectlRunner>> Create(KubectlRunnerOptions options);

  // Checks argv (argv[0] "kubectl") with the guard, waits for a free slot, runs kubectl and
  // waits for it. Thread-safe. PermissionDenied with the guard's reason on a refusal (show it
  // with kubectl::RefusalText); DeadlineExceeded past the timeout and ResourceExhausted
  // beyond the output bound, each after kubectl was killed; Unavailable when `*cancel`
  // becomes true, waiting or running.
  Result<KubectlRun> Run(const std::vector<std::string>& argv,
                         const std::atomic<bool>* cancel = nullptr);

  const KubectlRunnerOptions& options() const { return options_; }

 private:
  explicit KubectlRunner(KubectlRunnerOptions options, std::string empty_path_dir);

  // False when cancelled before a slot was free.
  bool AcquireSlot(const std::atomic<bool>* cancel);
  void ReleaseSlot();

  const KubectlRunnerOptions options_;
  const std::string empty_path_dir_;
  std::mutex mutex_;
  std::condition_variable slot_freed_;
  size_t running_ = 0;
};

// The kubeconfig the agent's kubectl uses: the API server from KUBERNETES_SERVICE_HOST and
// _PORT, the service account's CA file and `tokenFile:` its token file (kubectl re-reads
// the rotated token), namespace "default". Checked with kube::LoadInCluster first, so a pod
// without a mounted token or CA fails here with a clear message.
Result<std::string> InClusterKubeconfig(const EnvLookup& env = ProcessEnv(),
                                        const kube::InClusterPaths& paths = {});

// Writes InClusterKubeconfig to `path` (atomically, mode 0600).
Status WriteInClusterKubeconfig(const std::string& path, const EnvLookup& env = ProcessEnv(),
                                const kube::InClusterPaths& paths = {});

}  // namespace uplink::agent::cluster
