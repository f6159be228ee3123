// --runtime process: every container a local process in its pod's directory.
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>

#include "common/crypto.h"
#include "common/subprocess.h"
#include "kubesim/runtime_impl.h"

namespace uplink::kubesim {
namespace {

constexpr std::string_view kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct Process {
  pid_t pid = -1;
  std::string pod_uid;
  std::string pod_directory;
  std::string working_directory;
  std::vector<std::string> environment;
  std::string path;  // the container's PATH, for finding exec'd programs
  std::optional<ContainerExit> exit;
  std::optional<SteadyTime> kill_at;  // SIGKILL then, unless it has exited
};

std::string EnvValue(const std::vector<std::string>& environment, std::string_view name) {
  for (const std::string& entry : environment) {
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=') {
      return entry.substr(name.size() + 1);
    }
  }
  return "";
}

std::vector<std::string> Strings(const json::object& container, std::string_view key) {
  std::vector<std::string> strings;
  const json::value* list = container.if_contains(key);
  if (!list || !list->is_array()) return strings;
  for (const json::value& item : list->get_array()) {
    if (item.is_string()) strings.emplace_back(item.get_string());
  }
  return strings;
}

class ProcessRuntime final : public PodRuntime {
 public:
  explicit ProcessRuntime(std::string directory) : directory_(std::move(directory)) {}
  ~ProcessRuntime() override {
    std::lock_guard lock(mutex_);
    for (auto& [id, process] : processes_) {
      if (!process.exit) Reap(process);
    }
  }

  std::string_view name() const override { return "process"; }

  Result<std::string> Start(const ContainerStart& start) override {
    UPLINK_ASSIGN_OR_RETURN(auto variables, ContainerEnvironment(start.pod, start.container));
    Process process;
    process.pod_uid = StringAtPath(start.pod, "metadata.uid");
    process.pod_directory = directory_ + "/" + PodDirectoryName(start.pod);
    std::string working_directory = StringAt(start.container, "workingDir");
    process.working_directory = process.pod_directory + working_directory;
    std::error_code ec;
    std::filesystem::create_directories(process.working_directory, ec);
    if (ec) {
      return InternalError("creating " + process.working_directory + ": " + ec.message());
    }
    process.environment = {"PATH=" + std::string(kDefaultPath),
                           "HOSTNAME=" + StringAtPath(start.pod, "metadata.name"),
                           "HOME=" + process.pod_directory};
    for (auto& [name, value] : variables) {
      std::erase_if(process.environment, [&](const std::string& entry) {
        return entry.starts_with(name + "=");
      });
      process.environment.push_back(name + "=" + value);
    }
    process.path = EnvValue(process.environment, "PATH");
    // The command, then its arguments; with neither the container idles until stopped, as an
    // image's long-running entrypoint would.
    std::vector<std::string> argv = Strings(start.container, "command");
    for (std::string& arg : Strings(start.container, "args")) argv.push_back(std::move(arg));
    if (argv.empty()) argv = {"sleep", "infinity"};
    UPLINK_ASSIGN_OR_RETURN(argv[0], Resolve(argv[0], process.path));
    SpawnOptions spawn;
    spawn.argv = std::move(argv);
    spawn.environment = process.environment;
    spawn.working_directory = process.working_directory;
    spawn.output_file =
        process.pod_directory + "/" + StringAt(start.container, "name") + ".log";
    UPLINK_ASSIGN_OR_RETURN(SpawnedProcess child, SpawnProcess(spawn));
    process.pid = child.pid;
    std::string id = HexEncode(RandomBytes(32));
    std::lock_guard lock(mutex_);
    processes_.emplace(id, std::move(process));
    return id;
  }

  std::optional<ContainerExit> Exited(const std::string& id) override {
    std::lock_guard lock(mutex_);
    auto it = processes_.find(id);
    if (it == processes_.end()) return ContainerExit{137, "Error", SystemClock().Now()};
    Process& process = it->second;
    if (process.exit) return process.exit;
    int status = 0;
    pid_t done = ::waitpid(process.pid, &status, WNOHANG);
    if (done == process.pid) {
      int code = ExitCodeOf(status);
      process.exit = ContainerExit{code, code == 0 ? "Completed" : "Error", SystemClock().Now()};
      return process.exit;
    }
    if (process.kill_at && std::chrono::steady_clock::now() >= *process.kill_at) {
      ::kill(-process.pid, SIGKILL);
    }
    return std::nullopt;
  }

  void Stop(const std::string& id, std::chrono::seconds grace) override {
    std::lock_guard lock(mutex_);
    auto it = processes_.find(id);
    if (it == processes_.end() || it->second.exit) return;
    ::kill(-it->second.pid, grace.count() > 0 ? SIGTERM : SIGKILL);
    it->second.kill_at = std::chrono::steady_clock::now() + grace;
  }

  void RemovePod(const std::string& pod_uid) override {
    std::string directory;
    {
      std::lock_guard lock(mutex_);
      for (auto it = processes_.begin(); it != processes_.end();) {
        if (it->second.pod_uid != pod_uid) {
          ++it;
          continue;
        }
        if (!it->second.exit) Reap(it->second);
        directory = it->second.pod_directory;
        it = processes_.erase(it);
      }
    }
    if (!directory.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(directory, ignored);
    }
  }

  Result<ExecCommand> Exec(const std::string& id, const std::vector<std::string>& command,
                           bool) override {
    std::lock_guard lock(mutex_);
    auto it = processes_.find(id);
    if (it == processes_.end() || it->second.exit) {
      return FailedPreconditionError("the container is not running");
    }
    ExecCommand exec{command, it->second.environment, it->second.working_directory};
    UPLINK_ASSIGN_OR_RETURN(exec.argv[0], Resolve(command[0], it->second.path));
    return exec;
  }

  std::string ContainerId(const std::string& id) const override { return "process://" + id; }
  std::string ImageId(const std::string& image) override {
    return image.substr(0, image.find('@')) + "@sha256:" + Sha256Hex(image);
  }

 private:
  static Result<std::string> Resolve(const std::string& program, const std::string& path) {
    std::optional<std::string> found = FindProgram(program, path);
    if (!found) {
      return NotFoundError("exec: \"" + program + "\": executable file not found in $PATH");
    }
    return *found;
  }

  // Kills the process group and waits for the leader.
  static void Reap(Process& process) {
    ::kill(-process.pid, SIGKILL);
    while (::waitpid(process.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    process.exit = ContainerExit{137, "Error", SystemClock().Now()};
  }

  const std::string directory_;
  std::mutex mutex_;
  std::map<std::string, Process> processes_;
};

}  // namespace

Result<std::unique_ptr<PodRuntime>> MakeProcessRuntime(const std::string& state_directory) {
  if (state_directory.empty()) {
    return InvalidArgumentError("--runtime process needs --state-dir: where pod directories go");
  }
  std::error_code ec;
  std::filesystem::create_directories(state_directory, ec);
  if (ec) return InvalidArgumentError("creating --state-dir " + state_directory + ": " + ec.message());
  return std::unique_ptr<PodRuntime>(std::make_unique<ProcessRuntime>(state_directory));
}

}  // namespace uplink::kubesim
