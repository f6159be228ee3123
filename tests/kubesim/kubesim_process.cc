#include "kubesim_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/files.h"
#include "common/yaml.h"

namespace uplink::kubesim::testing {
namespace {

std::atomic<int> next_dir{0};

std::string ReadAll(const std::string& path) {
  return ReadFileBounded(path, 16 << 20).value_or("");
}

// fork + exec with stdout/stderr to files. Returns the pid, or -1.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& out_path, const std::string& err_path) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& entry : env) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: only async-signal-safe calls until exec.
  int in = open("/dev/null", O_RDONLY);
  int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (in < 0 || out < 0 || err < 0) _exit(126);
  dup2(in, 0);
  dup2(out, 1);
  dup2(err, 2);
  execve(args[0], args.data(), envp.data());
  _exit(127);
}

// Waits up to `timeout` for the child; returns its exit code, -1 if it was killed by a
// signal, or nullopt if it is still running.
std::optional<int> WaitFor(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (done < 0) return -1;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  WaitFor(pid, std::chrono::seconds(10));
  return -1;
}

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/kubesim-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         std::chrono::seconds timeout) {
  TempDir dir;
  std::string out_path = dir.path() + "/out", err_path = dir.path() + "/err";
  CommandResult result;
  pid_t pid = Spawn(argv, env, out_path, err_path);
  if (pid < 0) return result;
  std::optional<int> code = WaitFor(pid, timeout);
  result.exit_code = code ? *code : KillAndReap(pid);
  result.out = ReadAll(out_path);
  result.err = ReadAll(err_path);
  if (!code) result.err += "\n[killed after " + std::to_string(timeout.count()) + "s]";
  return result;
}

Result<std::unique_ptr<KubesimProcess>> KubesimProcess::Start(
    const std::vector<std::string>& extra_args) {
  std::unique_ptr<KubesimProcess> process(new KubesimProcess());
  process->kubeconfig_ = process->dir_.path() + "/kubeconfig";
  std::vector<std::string> argv = {std::string(UPLINK_BIN_DIR) + "/uplink-kubesim", "--listen",
                                   "127.0.0.1:0", "--kubeconfig-out", process->kubeconfig_};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  process->pid_ = Spawn(argv, {"PATH=/usr/bin:/bin"}, process->dir_.path() + "/stdout",
                        process->dir_.path() + "/stderr");
  if (process->pid_ < 0) return InternalError("fork failed");
  // The kubeconfig is written atomically once the server listens.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!std::filesystem::exists(process->kubeconfig_)) {
    if (!process->Running()) {
      return UnavailableError("uplink-kubesim exited early: " + process->Logs());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceededError("uplink-kubesim wrote no kubeconfig in 20s: " + process->Logs());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  UPLINK_ASSIGN_OR_RETURN(std::string text, ReadFileBounded(process->kubeconfig_, 1 << 20));
  UPLINK_ASSIGN_OR_RETURN(json::value config, ParseYaml(text));
  const json::value* server = config.at("clusters").at(0).at("cluster").as_object().if_contains("server");
  if (!server || !server->is_string()) return DataLossError("kubeconfig without a server: " + text);
  process->server_url_ = std::string(server->get_string());
  return process;
}

KubesimProcess::~KubesimProcess() { Stop(); }

bool KubesimProcess::Running() {
  if (pid_ < 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == 0) return true;
  pid_ = -1;
  return false;
}

int KubesimProcess::Stop() {
  if (pid_ < 0) return -1;
  kill(pid_, SIGTERM);
  std::optional<int> code = WaitFor(pid_, std::chrono::seconds(10));
  int result = code ? *code : KillAndReap(pid_);
  pid_ = -1;
  return result;
}

std::string KubesimProcess::Logs() const { return ReadAll(dir_.path() + "/stderr"); }

CommandResult KubesimProcess::Kubectl(const std::vector<std::string>& args) const {
  TempDir home;
  std::vector<std::string> argv = {"/usr/bin/kubectl", "--kubeconfig", kubeconfig_,
                                   "--cache-dir", home.path() + "/cache"};
  argv.insert(argv.end(), args.begin(), args.end());
  // The inherited environment (the dispatcher may need it) with our HOME and no KUBECONFIG.
  std::vector<std::string> env = {"HOME=" + home.path()};
  for (char** entry = environ; *entry; ++entry) {
    std::string_view text = *entry;
    if (!text.starts_with("HOME=") && !text.starts_with("KUBECONFIG=")) env.emplace_back(text);
  }
  return RunCommand(argv, env);
}

}  // namespace uplink::kubesim::testing
