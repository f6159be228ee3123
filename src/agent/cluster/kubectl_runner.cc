#include "agent/cluster/kubectl_runner.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "common/files.h"
#include "common/json.h"
#include "common/subprocess.h"
#include "kubectl/guard.h"

namespace uplink::agent::cluster {
namespace {

constexpr char kEmptyPathDirName[] = "empty-path";

Status CheckAbsolute(const std::string& path, std::string_view what) {
  if (path.empty() || path.front() != '/') {
    return InvalidArgumentError(std::string(what) + " must be an absolute path, not '" + path +
                                "'");
  }
  return Status::Ok();
}

// A YAML double-quoted scalar: JSON string syntax is a subset of it.
std::string YamlString(std::string_view text) { return json::serialize(json::string(text)); }

}  // namespace

KubectlRunner::KubectlRunner(KubectlRunnerOptions options, std::string empty_path_dir)
    : options_(std::move(options)), empty_path_dir_(std::move(empty_path_dir)) {}

Result<std::unique_ptr<KubectlRunner>> KubectlRunner::Create(KubectlRunnerOptions options) {
  UPLINK_RETURN_IF_ERROR(CheckAbsolute(options.kubectl_path, "the kubectl path"));
  UPLINK_RETURN_IF_ERROR(CheckAbsolute(options.kubeconfig_path, "the kubeconfig path"));
  UPLINK_RETURN_IF_ERROR(CheckAbsolute(options.cache_dir, "the kubectl cache directory"));
  if (!FindProgram(options.kubectl_path, "")) {
    return NotFoundError(options.kubectl_path + " is not an executable file");
  }
  struct stat info {};
  if (::stat(options.kubeconfig_path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return NotFoundError("the kubeconfig " + options.kubeconfig_path + " is not a file");
  }
  if (options.timeout.count() <= 0 || options.max_output_bytes == 0 ||
      options.max_concurrent == 0) {
    return InvalidArgumentError("the kubectl timeout, output bound and concurrency must be > 0");
  }
  // kubectl searches PATH for plugins; Go reads an empty PATH entry as the current
  // directory, so PATH names a directory of ours that holds nothing and cannot be written.
  const std::string empty_path_dir = options.cache_dir + "/" + kEmptyPathDirName;
  std::error_code error;
  std::filesystem::create_directories(empty_path_dir, error);
  if (error) return IOError("creating " + empty_path_dir + ": " + error.message());
  if (::chmod(empty_path_dir.c_str(), 0500) != 0) {
    return ErrnoError("chmod " + empty_path_dir, errno);
  }
  if (!std::filesystem::is_empty(empty_path_dir, error) || error) {
    return FailedPreconditionError(empty_path_dir + " must be an empty directory: kubectl's " +
                                   "PATH points there so that it finds no plugin");
  }
  return std::unique_ptr<KubectlRunner>(new KubectlRunner(std::move(options), empty_path_dir));
}

bool KubectlRunner::AcquireSlot(const std::atomic<bool>* cancel) {
  std::unique_lock lock(mutex_);
  while (running_ >= options_.max_concurrent) {
    if (cancel != nullptr && cancel->load()) return false;
    // A cancel is a plain flag, not a notification: look at it every so often.
    slot_freed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  ++running_;
  return true;
}

void KubectlRunner::ReleaseSlot() {
  {
    std::lock_guard lock(mutex_);
    --running_;
  }
  slot_freed_.notify_one();
}

Result<KubectlRun> KubectlRunner::Run(const std::vector<std::string>& argv,
                                      const std::atomic<bool>* cancel) {
  UPLINK_RETURN_IF_ERROR(kubectl::CheckKubectlArgv(argv).status());
  ProcessOptions process{
      .argv = {options_.kubectl_path, "--kubeconfig=" + options_.kubeconfig_path},
      .environment = std::vector<std::string>{"HOME=" + options_.cache_dir,
                                              "PATH=" + empty_path_dir_,
                                              // kubectl 1.33+ reads preferences and aliases
                                              // from a kuberc file unless told not to.
                                              "KUBERC=off"},
      .timeout = options_.timeout,
      .max_output_bytes = options_.max_output_bytes,
      .cancel = cancel};
  process.argv.insert(process.argv.end(), argv.begin() + 1, argv.end());

  if (!AcquireSlot(cancel)) {
    return UnavailableError("kubectl was not started: the agent is shutting down");
  }
  const auto started = std::chrono::steady_clock::now();
  Result<ProcessResult> result = RunProcess(process);
  ReleaseSlot();
  const auto duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  if (!result.ok()) {
    if (result.status().code() == StatusCode::kResourceExhausted) {
      return ResourceExhaustedError(result.status().message() +
                                    "; narrow the command (a selector, --tail, -o jsonpath=...)");
    }
    return result.status();
  }
  return KubectlRun{.exit_code = result->exit_code,
                    .stdout_text = std::move(result->out),
                    .stderr_text = std::move(result->err),
                    .duration_ms = duration.count()};
}

Result<std::string> InClusterKubeconfig(const EnvLookup& env, const kube::InClusterPaths& paths) {
  UPLINK_ASSIGN_OR_RETURN(kube::KubeCredentials credentials, kube::LoadInCluster(env, paths));
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: in-cluster\n"
         "  cluster:\n"
         "    server: " + YamlString(credentials.server) + "\n"
         "    certificate-authority: " + YamlString(paths.ca_cert) + "\n"
         "users:\n"
         "- name: uplink-agent\n"
         "  user:\n"
         "    tokenFile: " + YamlString(credentials.token_file) + "\n"
         "contexts:\n"
         "- name: in-cluster\n"
         "  context:\n"
         "    cluster: in-cluster\n"
         "    user: uplink-agent\n"
         "    namespace: default\n"
         "current-context: in-cluster\n";
}

Status WriteInClusterKubeconfig(const std::string& path, const EnvLookup& env,
                                const kube::InClusterPaths& paths) {
  UPLINK_ASSIGN_OR_RETURN(std::string kubeconfig, InClusterKubeconfig(env, paths));
  return WriteFileAtomic(path, kubeconfig, 0600).WithContext("writing the kubectl kubeconfig");
}

}  // namespace uplink::agent::cluster
