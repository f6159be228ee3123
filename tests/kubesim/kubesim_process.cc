#include "kubesim_process.h"

#include <filesystem>

#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"
#include "common/yaml.h"
#include "kubesim/kubeconfig.h"

namespace uplink::kubesim::testing {
namespace {

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         std::chrono::seconds timeout) {
  return uplink::testing::RunCommand(argv, timeout, env);
}

Result<std::unique_ptr<KubesimProcess>> KubesimProcess::Start(
    const std::vector<std::string>& extra_args) {
  std::unique_ptr<KubesimProcess> process(new KubesimProcess());
  process->kubeconfig_ = process->dir_.path() + "/kubeconfig";
  std::vector<std::string> argv = {std::string(UPLINK_BIN_DIR) + "/uplink-kubesim", "--listen",
                                   "127.0.0.1:0", "--kubeconfig-out", process->kubeconfig_};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  process->process_ = std::make_unique<uplink::testing::ChildProcess>(
      argv, process->dir_.path(), std::vector<std::string>{"PATH=/usr/bin:/bin"});
  // The kubeconfig is written atomically once the server listens.
  bool written = uplink::testing::WaitFor(
      [&] { return std::filesystem::exists(process->kubeconfig_) || !process->Running(); });
  if (!process->Running()) {
    return UnavailableError("uplink-kubesim exited early: " + process->Logs());
  }
  if (!written) return DeadlineExceededError("uplink-kubesim wrote no kubeconfig: " + process->Logs());
  UPLINK_ASSIGN_OR_RETURN(std::string text, ReadFileBounded(process->kubeconfig_, 1 << 20));
  UPLINK_ASSIGN_OR_RETURN(json::value config, ParseYaml(text));
  const json::value* server = config.at("clusters").at(0).at("cluster").as_object().if_contains("server");
  if (!server || !server->is_string()) return DataLossError("kubeconfig without a server: " + text);
  process->server_url_ = std::string(server->get_string());
  return process;
}

CommandResult KubesimProcess::Kubectl(const std::vector<std::string>& args,
                                      const std::string& stdin_data) const {
  return KubectlWith(kubeconfig_, args, stdin_data);
}

Result<KubesimProcess::Access> KubesimProcess::AdminAccess() const {
  UPLINK_ASSIGN_OR_RETURN(std::string text, ReadFileBounded(kubeconfig_, 1 << 20));
  UPLINK_ASSIGN_OR_RETURN(json::value config, ParseYaml(text));
  const json::value& cluster = config.at("clusters").at(0).at("cluster");
  Access access;
  access.server_url = server_url_;
  UPLINK_ASSIGN_OR_RETURN(access.ca_pem,
                          Base64Decode(cluster.at("certificate-authority-data").as_string()));
  access.token = std::string(config.at("users").at(0).at("user").at("token").as_string());
  return access;
}

Result<std::string> KubesimProcess::WriteKubeconfigFor(const std::string& token,
                                                       const std::string& name) const {
  UPLINK_ASSIGN_OR_RETURN(Access access, AdminAccess());
  std::string path = dir_.path() + "/" + name;
  UPLINK_RETURN_IF_ERROR(WriteFileAtomic(
      path, RenderKubeconfig(server_url_, access.ca_pem, Secret(token)), 0600));
  return path;
}

CommandResult KubesimProcess::KubectlWith(const std::string& kubeconfig,
                                          const std::vector<std::string>& args,
                                          const std::string& stdin_data) const {
  TempDir home;
  std::vector<std::string> argv = {"/usr/bin/kubectl", "--kubeconfig", kubeconfig,
                                   "--cache-dir", home.path() + "/cache"};
  argv.insert(argv.end(), args.begin(), args.end());
  // The inherited environment (the dispatcher may need it) with our HOME and no KUBECONFIG.
  return uplink::testing::RunCommand(
      argv, std::chrono::seconds(60),
      uplink::testing::EnvWith({{"HOME", home.path()}, {"KUBECONFIG", ""}}), stdin_data);
}

Result<std::string> WorkspaceImage() {
  CommandResult built = uplink::testing::RunCommand(
      {std::string(UPLINK_SOURCE_DIR) + "/deploy/docker/workspace-image.sh"},
      std::chrono::seconds(900));
  if (built.exit_code != 0) return UnavailableError("workspace-image.sh failed: " + built.err);
  std::string image = Trimmed(built.out);
  if (!image.starts_with("localhost/uplink-workspace@sha256:")) {
    return DataLossError("workspace-image.sh printed no image by digest: " + built.out);
  }
  return image;
}

Result<std::string> WorkspaceSshImage() {
  UPLINK_ASSIGN_OR_RETURN(std::string base, WorkspaceImage());
  CommandResult built = uplink::testing::RunCommand(
      {std::string(UPLINK_SOURCE_DIR) + "/deploy/workspace/image.sh", base},
      std::chrono::seconds(900));
  if (built.exit_code != 0) return UnavailableError("deploy/workspace/image.sh: " + built.err);
  std::string image = Trimmed(built.out);
  if (!image.starts_with("localhost/uplink-workspace-ssh@sha256:")) {
    return DataLossError("deploy/workspace/image.sh printed no image by digest: " + built.out);
  }
  return image;
}

CommandResult Podman(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/podman", "--runtime", "/usr/sbin/runc",
                                   "--cgroup-manager", "cgroupfs"};
  argv.insert(argv.end(), args.begin(), args.end());
  return uplink::testing::RunCommand(argv, std::chrono::seconds(120));
}

Result<std::string> PodContainers(const std::string& pod_uid) {
  CommandResult listed =
      Podman({"ps", "-a", "-q", "--filter", "label=kubesim.uplink.dev/pod-uid=" + pod_uid});
  if (listed.exit_code != 0) return UnavailableError("podman ps -a: " + listed.err);
  return Trimmed(listed.out);
}

}  // namespace uplink::kubesim::testing
