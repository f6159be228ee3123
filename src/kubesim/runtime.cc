#include "kubesim/runtime.h"

#include <mutex>
#include <set>

#include "common/crypto.h"
#include "kubesim/runtime_impl.h"

namespace uplink::kubesim {
namespace {

// Containers that run nothing: running from Start until Stop, which they obey at once.
class SimulatedRuntime final : public PodRuntime {
 public:
  std::string_view name() const override { return "simulated"; }

  Result<std::string> Start(const ContainerStart& start) override {
    UPLINK_RETURN_IF_ERROR(ContainerEnvironment(start.pod, start.container).status());
    std::lock_guard lock(mutex_);
    std::string id = HexEncode(RandomBytes(32));
    running_.insert(id);
    return id;
  }

  std::optional<ContainerExit> Exited(const std::string& id) override {
    std::lock_guard lock(mutex_);
    if (running_.count(id)) return std::nullopt;
    // Stopped: a process ignoring SIGTERM as PID 1 does ends with SIGKILL.
    return ContainerExit{137, "Error", SystemClock().Now()};
  }

  void Stop(const std::string& id, std::chrono::seconds) override {
    std::lock_guard lock(mutex_);
    running_.erase(id);
  }

  void RemovePod(const std::string&) override {}

  Result<ExecCommand> Exec(const std::string&, const std::vector<std::string>&, bool) override {
    return FailedPreconditionError(
        "uplink-kubesim --runtime simulated runs no processes, so there is nothing to exec "
        "into: start it with --runtime process or --runtime podman");
  }

  std::string ContainerId(const std::string& id) const override { return "containerd://" + id; }
  std::string ImageId(const std::string& image) override {
    std::string repository = image.substr(0, image.find('@'));
    return repository + "@sha256:" + Sha256Hex(image);
  }

 private:
  std::mutex mutex_;
  std::set<std::string> running_;
};

}  // namespace

std::string StringAtPath(const json::object& object, std::string_view path) {
  const json::object* scope = &object;
  while (true) {
    size_t dot = path.find('.');
    if (dot == std::string_view::npos) return StringAt(*scope, path);
    scope = &ObjectAt(*scope, path.substr(0, dot));
    path.remove_prefix(dot + 1);
  }
}

std::string PodDirectoryName(const json::object& pod) {
  return StringAtPath(pod, "metadata.namespace") + "_" + StringAtPath(pod, "metadata.name") + "_" +
         StringAtPath(pod, "metadata.uid");
}

Result<std::vector<std::pair<std::string, std::string>>> ContainerEnvironment(
    const json::object& pod, const json::object& container) {
  static const std::set<std::string> kFields = {
      "metadata.name",      "metadata.namespace", "metadata.uid",  "spec.nodeName",
      "spec.serviceAccountName", "status.podIP",  "status.hostIP"};
  std::vector<std::pair<std::string, std::string>> environment;
  const json::value* env = container.if_contains("env");
  if (!env || !env->is_array()) return environment;
  for (const json::value& entry : env->get_array()) {
    if (!entry.is_object()) continue;
    const json::object& variable = entry.get_object();
    std::string name = StringAt(variable, "name");
    const json::object& from = ObjectAt(variable, "valueFrom");
    if (from.empty()) {
      environment.emplace_back(name, StringAt(variable, "value"));
      continue;
    }
    std::string field = StringAtPath(from, "fieldRef.fieldPath");
    if (!kFields.count(field)) {
      return FailedPreconditionError("uplink-kubesim does not resolve the value of environment "
                                     "variable " + name + " (only literal values and the "
                                     "downward API's pod name, namespace, uid, node, service "
                                     "account and IPs)");
    }
    environment.emplace_back(name, StringAtPath(pod, field));
  }
  return environment;
}

Result<std::unique_ptr<PodRuntime>> MakeRuntime(const RuntimeOptions& options) {
  if (options.kind == "simulated") return MakeSimulatedRuntime();
  if (options.kind == "process") return MakeProcessRuntime(options.state_directory);
  if (options.kind == "podman") return MakePodmanRuntime(options.podman, options.podman_storage);
  return InvalidArgumentError("--runtime must be simulated, process or podman, not \"" +
                              options.kind.substr(0, 32) + "\"");
}

std::unique_ptr<PodRuntime> MakeSimulatedRuntime() { return std::make_unique<SimulatedRuntime>(); }

}  // namespace uplink::kubesim
