// --runtime podman: every container a real OCI container run by podman with runc, as locked
// down as its pod asks: user and groups, runAsNonRoot checked against the image, read-only
// root, no new privileges, capabilities, seccomp, memory and CPU limits, emptyDir as sized
// tmpfs, the service account token files when mounted, and no network at all under a
// default-deny egress NetworkPolicy.
#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "common/crypto.h"
#include "common/log.h"
#include "common/subprocess.h"
#include "common/files.h"
#include "kubesim/resources.h"
#include "kubesim/runtime_impl.h"

namespace uplink::kubesim {
namespace {

const log::Logger kLog("kubesim.podman");

constexpr std::string_view kPodLabel = "kubesim.uplink.dev/pod-uid";
constexpr std::string_view kInstanceLabel = "kubesim.uplink.dev/instance";

// The container's setting, else the pod's (container security contexts override the pod's).
const json::value* Setting(const json::object& pod_context, const json::object& container_context,
                           std::string_view key) {
  const json::value* value = container_context.if_contains(key);
  if (value && !value->is_null()) return value;
  value = pod_context.if_contains(key);
  return value && !value->is_null() ? value : nullptr;
}

// A process limit for containers: `cap`, or the hard limit this process has when it is lower
// (podman's defaults may exceed it, and then no container starts).
std::int64_t BoundedLimit(int resource, std::int64_t cap) {
  rlimit limit{};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_max == RLIM_INFINITY) return cap;
  return std::min<std::int64_t>(cap, static_cast<std::int64_t>(limit.rlim_max));
}

// "name_namespace(uid)", how the kubelet names a pod in container errors.
std::string PodForMessages(const json::object& pod) {
  return StringAtPath(pod, "metadata.name") + "_" + StringAtPath(pod, "metadata.namespace") + "(" +
         StringAtPath(pod, "metadata.uid") + ")";
}

std::string JsonArray(const std::vector<std::string>& items) {
  json::array array;
  for (const std::string& item : items) array.emplace_back(item);
  return ToJson(array);
}

std::vector<std::string> Strings(const json::object& container, std::string_view key) {
  std::vector<std::string> strings;
  for (const json::value& item : ArrayAt(container, key)) {
    if (item.is_string()) strings.emplace_back(item.get_string());
  }
  return strings;
}

struct Container {
  std::string pod_uid;
  std::thread waiter;  // runs `podman wait` until the container exits or is removed
  std::optional<ContainerExit> exit;
};

class PodmanRuntime final : public PodRuntime {
 public:
  PodmanRuntime(std::string podman, std::string storage, std::string files)
      : podman_(std::move(podman)),
        storage_(std::move(storage)),
        files_(std::move(files)),
        instance_(HexEncode(RandomBytes(8))) {}

  ~PodmanRuntime() override {
    // Nothing this simulator started outlives it.
    Result<ProcessResult> removed =
        Podman({"rm", "--force", "--time", "0", "--filter",
                "label=" + std::string(kInstanceLabel) + "=" + instance_});
    if (!removed.ok()) kLog.Warn("removing containers", {{"error", removed.status()}});
    std::lock_guard lock(mutex_);
    for (auto& [id, container] : containers_) {
      if (container.waiter.joinable()) container.waiter.join();
    }
    std::error_code ignored;
    std::filesystem::remove_all(files_, ignored);
  }

  std::string_view name() const override { return "podman"; }

  Result<std::string> Start(const ContainerStart& start) override {
    const json::object& pod = start.pod;
    const json::object& container = start.container;
    const json::object& spec = ObjectAt(pod, "spec");
    const std::string container_name = StringAt(container, "name");
    const std::string pod_uid = StringAtPath(pod, "metadata.uid");
    UPLINK_ASSIGN_OR_RETURN(auto variables, ContainerEnvironment(pod, container));
    std::string image = StringAt(container, "image");
    Result<ProcessResult> exists = Podman({"image", "exists", image});
    if (!exists.ok()) return exists.status();
    if (exists->exit_code != 0) {
      return UnavailableError("image \"" + image + "\" is not in podman's storage (uplink-kubesim "
                              "pulls from no registry): build or load it first");
    }

    std::vector<std::string> args = {"run", "--detach", "--pull", "never"};
    // Unique per start: a restarted container is a new one beside the exited one.
    args.push_back("--name=kubesim-" + StringAtPath(pod, "metadata.namespace") + "-" +
                   StringAtPath(pod, "metadata.name") + "-" + container_name + "-" +
                   pod_uid.substr(0, 8) + "-" + HexEncode(RandomBytes(3)));
    args.push_back("--label=" + std::string(kPodLabel) + "=" + pod_uid);
    args.push_back("--label=" + std::string(kInstanceLabel) + "=" + instance_);
    args.push_back("--hostname=" + StringAtPath(pod, "metadata.name"));
    args.push_back("--network=" + std::string(start.egress_denied ? "none" : "bridge"));
    std::int64_t files = BoundedLimit(RLIMIT_NOFILE, 65536);
    std::int64_t processes = BoundedLimit(RLIMIT_NPROC, 8192);
    args.push_back("--ulimit=nofile=" + std::to_string(files) + ":" + std::to_string(files));
    args.push_back("--ulimit=nproc=" + std::to_string(processes) + ":" + std::to_string(processes));
    const json::value* grace = spec.if_contains("terminationGracePeriodSeconds");
    if (grace && grace->is_int64()) {
      args.push_back("--stop-timeout=" + std::to_string(grace->get_int64()));
    }
    UPLINK_RETURN_IF_ERROR(AddSecurity(pod, container, image, args));
    AddResources(container, args);
    UPLINK_RETURN_IF_ERROR(AddVolumes(pod, container, args));
    // Values go through podman's environment, never its command line.
    std::vector<std::string> environment = InheritedEnvironment({});
    for (auto& [name, value] : variables) {
      args.push_back("--env=" + name);
      environment.push_back(name + "=" + value);
    }
    std::string working_directory = StringAt(container, "workingDir");
    if (!working_directory.empty()) args.push_back("--workdir=" + working_directory);
    std::vector<std::string> command = Strings(container, "command");
    if (!command.empty()) args.push_back("--entrypoint=" + JsonArray(command));
    args.push_back(image);
    for (std::string& arg : Strings(container, "args")) args.push_back(std::move(arg));

    UPLINK_ASSIGN_OR_RETURN(ProcessResult run, Podman(args, environment));
    if (run.exit_code != 0) {
      return InternalError("podman could not start the container: " +
                           std::string(TrimWhitespace(run.err)).substr(0, 500));
    }
    std::string id(TrimWhitespace(run.out));
    std::lock_guard lock(mutex_);
    Container& record = containers_[id];
    record.pod_uid = pod_uid;
    record.waiter = std::thread([this, id] { Wait(id); });
    return id;
  }

  std::optional<ContainerExit> Exited(const std::string& id) override {
    std::lock_guard lock(mutex_);
    auto it = containers_.find(id);
    if (it == containers_.end()) return ContainerExit{137, "Error", SystemClock().Now()};
    return it->second.exit;
  }

  void Stop(const std::string& id, std::chrono::seconds grace) override {
    Result<ProcessResult> stopped =
        Podman({"stop", "--time", std::to_string(grace.count()), id}, std::nullopt,
               grace + std::chrono::seconds(60));
    if (!stopped.ok() || stopped->exit_code != 0) {
      kLog.Warn("stopping a container", {{"container", id.substr(0, 12)},
                                         {"error", stopped.ok() ? stopped->err : stopped.status().message()}});
    }
  }

  void RemovePod(const std::string& pod_uid) override {
    Result<ProcessResult> removed =
        Podman({"rm", "--force", "--time", "0", "--volumes", "--filter",
                "label=" + std::string(kPodLabel) + "=" + pod_uid});
    if (!removed.ok() || removed->exit_code != 0) {
      kLog.Warn("removing a pod's containers",
                {{"pod_uid", pod_uid},
                 {"error", removed.ok() ? removed->err : removed.status().message()}});
    }
    std::vector<std::thread> waiters;
    {
      std::lock_guard lock(mutex_);
      for (auto it = containers_.begin(); it != containers_.end();) {
        if (it->second.pod_uid != pod_uid) {
          ++it;
          continue;
        }
        if (it->second.waiter.joinable()) waiters.push_back(std::move(it->second.waiter));
        it = containers_.erase(it);
      }
    }
    for (std::thread& waiter : waiters) waiter.join();
    std::error_code ignored;
    std::filesystem::remove_all(files_ + "/" + pod_uid, ignored);
  }

  Result<ExecCommand> Exec(const std::string& id, const std::vector<std::string>& command,
                           bool stdin) override {
    {
      std::lock_guard lock(mutex_);
      auto it = containers_.find(id);
      if (it == containers_.end() || it->second.exit) {
        return FailedPreconditionError("the container is not running");
      }
    }
    ExecCommand exec;
    exec.argv = BaseArgs();
    exec.argv.push_back("exec");
    if (stdin) exec.argv.push_back("--interactive");
    exec.argv.push_back(id);
    exec.argv.insert(exec.argv.end(), command.begin(), command.end());
    exec.environment = InheritedEnvironment({});
    return exec;
  }

  std::string ContainerId(const std::string& id) const override { return "podman://" + id; }

  std::string ImageId(const std::string& image) override {
    std::lock_guard lock(image_ids_mutex_);
    auto cached = image_ids_.find(image);
    if (cached != image_ids_.end()) return cached->second;
    Result<ProcessResult> inspected = Podman({"image", "inspect", "--format", "{{.Digest}}", image});
    std::string digest = inspected.ok() ? std::string(TrimWhitespace(inspected->out)) : "";
    std::string id = image.substr(0, image.find('@')) + (digest.empty() ? "" : "@" + digest);
    image_ids_[image] = id;
    return id;
  }

 private:
  std::vector<std::string> BaseArgs() const {
    std::vector<std::string> args = {podman_, "--runtime", "/usr/sbin/runc", "--cgroup-manager",
                                     "cgroupfs"};
    if (!storage_.empty()) {
      args.insert(args.end(), {"--root", storage_ + "/root", "--runroot", storage_ + "/run"});
    }
    return args;
  }

  Result<ProcessResult> Podman(const std::vector<std::string>& args,
                               std::optional<std::vector<std::string>> environment = std::nullopt,
                               std::chrono::milliseconds timeout = std::chrono::minutes(2)) const {
    ProcessOptions options;
    options.argv = BaseArgs();
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.environment = std::move(environment);
    options.timeout = timeout;
    return RunProcess(options);
  }

  // The waiter thread: `podman wait` until the container exits, then how it ended.
  void Wait(const std::string& id) {
    ContainerExit exit{137, "Error", SystemClock().Now()};
    Result<ProcessResult> waited = Podman({"wait", id}, std::nullopt, std::chrono::hours(24 * 365));
    if (waited.ok() && waited->exit_code == 0) {
      std::string code(TrimWhitespace(waited->out));
      if (!code.empty() && code.find_first_not_of("0123456789-") == std::string::npos) {
        exit.exit_code = std::atoi(code.c_str());
      }
      Result<ProcessResult> state =
          Podman({"inspect", "--format", "{{.State.OOMKilled}}", id});
      bool oom = state.ok() && TrimWhitespace(state->out) == "true";
      exit.reason = oom ? "OOMKilled" : exit.exit_code == 0 ? "Completed" : "Error";
    }
    exit.finished_at = SystemClock().Now();
    std::lock_guard lock(mutex_);
    auto it = containers_.find(id);
    if (it != containers_.end()) it->second.exit = exit;
  }

  Status AddSecurity(const json::object& pod, const json::object& container,
                     const std::string& image, std::vector<std::string>& args) {
    const json::object& pod_context = ObjectAt(ObjectAt(pod, "spec"), "securityContext");
    const json::object& context = ObjectAt(container, "securityContext");
    const json::value* user = Setting(pod_context, context, "runAsUser");
    const json::value* group = Setting(pod_context, context, "runAsGroup");
    const json::value* non_root = Setting(pod_context, context, "runAsNonRoot");
    const std::string where = "(pod: \"" + PodForMessages(pod) + "\", container: " +
                              StringAt(container, "name") + ")";
    if (non_root && non_root->is_bool() && non_root->get_bool()) {
      if (user && user->is_int64()) {
        if (user->get_int64() == 0) {
          return FailedPreconditionError("container's runAsUser breaks non-root policy " + where);
        }
      } else {
        // The image decides the user: it must be a number, and not 0.
        Result<ProcessResult> inspected =
            Podman({"image", "inspect", "--format", "{{.Config.User}}", image});
        if (!inspected.ok()) return inspected.status();
        std::string image_user(TrimWhitespace(inspected->out));
        image_user = image_user.substr(0, image_user.find(':'));
        if (!image_user.empty() && image_user.find_first_not_of("0123456789") != std::string::npos) {
          return FailedPreconditionError("container has runAsNonRoot and image has non-numeric "
                                         "user (" + image_user + "), cannot verify user is non-root " +
                                         where);
        }
        if (image_user.empty() || std::atoll(image_user.c_str()) == 0) {
          return FailedPreconditionError("container has runAsNonRoot and image will run as root " +
                                         where);
        }
      }
    }
    if (user && user->is_int64()) {
      std::string spec = std::to_string(user->get_int64());
      if (group && group->is_int64()) spec += ":" + std::to_string(group->get_int64());
      args.push_back("--user=" + spec);
    }
    for (const char* key : {"supplementalGroups"}) {
      for (const json::value& extra : ArrayAt(pod_context, key)) {
        if (extra.is_int64()) args.push_back("--group-add=" + std::to_string(extra.get_int64()));
      }
    }
    if (const json::value* fs_group = pod_context.if_contains("fsGroup");
        fs_group && fs_group->is_int64()) {
      args.push_back("--group-add=" + std::to_string(fs_group->get_int64()));
    }
    const json::value* read_only = context.if_contains("readOnlyRootFilesystem");
    if (read_only && read_only->is_bool() && read_only->get_bool()) {
      // As on a kubelet: nothing writable but what the pod mounts.
      args.insert(args.end(), {"--read-only", "--read-only-tmpfs=false"});
    }
    const json::value* escalation = context.if_contains("allowPrivilegeEscalation");
    if (escalation && escalation->is_bool() && !escalation->get_bool()) {
      args.push_back("--security-opt=no-new-privileges");
    }
    const json::value* privileged = context.if_contains("privileged");
    if (privileged && privileged->is_bool() && privileged->get_bool()) {
      args.push_back("--privileged");
    }
    const json::object& capabilities = ObjectAt(context, "capabilities");
    for (const std::string& drop : Strings(capabilities, "drop")) args.push_back("--cap-drop=" + drop);
    for (const std::string& add : Strings(capabilities, "add")) args.push_back("--cap-add=" + add);
    // A kubelet runs containers Unconfined unless the pod asks for the runtime's profile.
    const json::value* seccomp = Setting(pod_context, context, "seccompProfile");
    std::string seccomp_type = seccomp && seccomp->is_object()
                                   ? StringAt(seccomp->get_object(), "type")
                                   : "Unconfined";
    if (seccomp_type == "Localhost") {
      return FailedPreconditionError("uplink-kubesim does not load Localhost seccomp profiles " +
                                     where);
    }
    if (seccomp_type != "RuntimeDefault") args.push_back("--security-opt=seccomp=unconfined");
    return Status::Ok();
  }

  static void AddResources(const json::object& container, std::vector<std::string>& args) {
    ResourceList limits = ContainerLimits(container);
    ResourceList requests = ContainerRequests(container);
    if (auto memory = limits.find("memory"); memory != limits.end()) {
      args.push_back("--memory=" + std::to_string(memory->second.milli / 1000));
    }
    if (auto cpu = limits.find("cpu"); cpu != limits.end()) {
      char cpus[32];
      std::snprintf(cpus, sizeof(cpus), "%.3f", static_cast<double>(cpu->second.milli) / 1000.0);
      args.push_back(std::string("--cpus=") + cpus);
    }
    if (auto cpu = requests.find("cpu"); cpu != requests.end()) {
      // The kubelet's shares: 1024 per CPU requested, at least 2.
      std::int64_t shares = std::max<std::int64_t>(2, cpu->second.milli * 1024 / 1000);
      args.push_back("--cpu-shares=" + std::to_string(shares));
    }
  }

  Status AddVolumes(const json::object& pod, const json::object& container,
                    std::vector<std::string>& args) {
    const json::object& spec = ObjectAt(pod, "spec");
    const std::string pod_uid = StringAtPath(pod, "metadata.uid");
    for (const json::value& entry : ArrayAt(container, "volumeMounts")) {
      if (!entry.is_object()) continue;
      const json::object& mount = entry.get_object();
      std::string name = StringAt(mount, "name");
      std::string path = StringAt(mount, "mountPath");
      const json::value* read_only_value = mount.if_contains("readOnly");
      bool read_only = read_only_value && read_only_value->is_bool() && read_only_value->get_bool();
      const json::object* volume = nullptr;
      for (const json::value& candidate : ArrayAt(spec, "volumes")) {
        if (candidate.is_object() && StringAt(candidate.get_object(), "name") == name) {
          volume = &candidate.get_object();
        }
      }
      if (!volume) continue;  // validation refused such a pod
      if (volume->contains("emptyDir")) {
        // A sized tmpfs for the one container that mounts it; shared with other containers of
        // the pod it is a directory of its own, as tmpfs volumes cannot be sized here.
        if (MountCount(spec, name) == 1) {
          std::string option = "--mount=type=tmpfs,destination=" + path + ",tmpfs-mode=1777";
          const json::object& empty_dir = ObjectAt(*volume, "emptyDir");
          if (const json::value* size = empty_dir.if_contains("sizeLimit"); size && size->is_string()) {
            Result<Amount> bytes = Amount::Parse(size->get_string());
            if (bytes.ok()) option += ",tmpfs-size=" + std::to_string(bytes->milli / 1000);
          }
          if (read_only) option += ",ro=true";
          args.push_back(option);
        } else {
          std::string directory = files_ + "/" + pod_uid + "/volumes/" + name;
          UPLINK_RETURN_IF_ERROR(MakeDirectory(directory, std::filesystem::perms(01777)));
          args.push_back("--volume=" + directory + ":" + path + (read_only ? ":ro" : ""));
        }
      } else if (volume->contains("projected")) {
        UPLINK_ASSIGN_OR_RETURN(std::string directory, WriteProjected(pod, *volume));
        args.push_back("--volume=" + directory + ":" + path + ":ro");
      } else if (volume->contains("hostPath")) {
        args.push_back("--volume=" + StringAt(ObjectAt(*volume, "hostPath"), "path") + ":" + path +
                       (read_only ? ":ro" : ""));
      } else {
        return FailedPreconditionError("uplink-kubesim --runtime podman mounts emptyDir, "
                                       "projected and hostPath volumes only; volume " + name +
                                       " is of another type");
      }
    }
    return Status::Ok();
  }

  static int MountCount(const json::object& spec, const std::string& volume) {
    int count = 0;
    for (const char* key : {"initContainers", "containers"}) {
      for (const json::value& container : ArrayAt(spec, key)) {
        if (!container.is_object()) continue;
        for (const json::value& mount : ArrayAt(container.get_object(), "volumeMounts")) {
          if (mount.is_object() && StringAt(mount.get_object(), "name") == volume) ++count;
        }
      }
    }
    return count;
  }

  static Status MakeDirectory(const std::string& directory, std::filesystem::perms mode) {
    std::error_code ec;
    std::filesystem::create_directories(directory, ec);
    if (!ec) std::filesystem::permissions(directory, mode, ec);
    if (ec) return InternalError("creating " + directory + ": " + ec.message());
    return Status::Ok();
  }

  // A projected volume's files. The service account token is a placeholder, never a
  // credential: nothing in a simulated pod can call the API with it.
  Result<std::string> WriteProjected(const json::object& pod, const json::object& volume) {
    std::string directory = files_ + "/" + StringAtPath(pod, "metadata.uid") + "/projected/" +
                            StringAt(volume, "name");
    UPLINK_RETURN_IF_ERROR(MakeDirectory(directory, std::filesystem::perms(0755)));
    auto write = [&](const std::string& file, const std::string& content) {
      std::ofstream(directory + "/" + file) << content;
      std::error_code ignored;
      std::filesystem::permissions(directory + "/" + file, std::filesystem::perms(0644), ignored);
    };
    for (const json::value& entry : ArrayAt(ObjectAt(volume, "projected"), "sources")) {
      if (!entry.is_object()) continue;
      const json::object& source = entry.get_object();
      if (source.contains("serviceAccountToken")) {
        write(StringAt(ObjectAt(source, "serviceAccountToken"), "path"),
              "uplink-kubesim-placeholder-token-" + HexEncode(RandomBytes(8)));
      }
      for (const json::value& item : ArrayAt(ObjectAt(source, "configMap"), "items")) {
        if (item.is_object()) write(StringAt(item.get_object(), "path"), "");
      }
      for (const json::value& item : ArrayAt(ObjectAt(source, "downwardAPI"), "items")) {
        if (!item.is_object()) continue;
        write(StringAt(item.get_object(), "path"),
              StringAtPath(pod, StringAtPath(item.get_object(), "fieldRef.fieldPath")));
      }
    }
    return directory;
  }

  const std::string podman_;
  const std::string storage_;
  const std::string files_;     // per-pod files (projected volumes, shared emptyDirs)
  const std::string instance_;  // labels what this simulator started
  mutable std::mutex mutex_;
  std::map<std::string, Container> containers_;
  std::mutex image_ids_mutex_;
  std::map<std::string, std::string> image_ids_;
};

}  // namespace

Result<std::unique_ptr<PodRuntime>> MakePodmanRuntime(const std::string& podman,
                                                      const std::string& storage) {
  if (!FindProgram(podman, "")) {
    return InvalidArgumentError("--runtime podman needs podman at " + podman + ": run make deps");
  }
  if (!FindProgram("/usr/sbin/runc", "")) {
    return InvalidArgumentError("--runtime podman needs runc at /usr/sbin/runc: run make deps");
  }
  std::string base = std::filesystem::temp_directory_path().string() + "/uplink-kubesim-podman-XXXXXX";
  if (::mkdtemp(base.data()) == nullptr) {
    return InternalError("creating a directory for pod files under " +
                         std::filesystem::temp_directory_path().string());
  }
  return std::unique_ptr<PodRuntime>(std::make_unique<PodmanRuntime>(podman, storage, base));
}

}  // namespace uplink::kubesim
