// Real processes for end-to-end tests: started on loopback with free ports, always stopped
// (SIGTERM, then SIGKILL) and reaped when the test ends, even when it fails.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace uplink::testing {

// A directory under $TMPDIR removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1 if killed by a signal or timed out
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv[0] (an absolute path) with no shell and waits, killing it after `timeout`.
// `env` replaces the environment when given.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60),
                         const std::optional<std::vector<std::string>>& env = std::nullopt,
                         const std::string& stdin_data = "");

class ChildProcess {
 public:
  // Starts argv with stdout and stderr sent to files in `log_dir` (named after argv[0]).
  ChildProcess(std::vector<std::string> argv, const std::string& log_dir,
               const std::optional<std::vector<std::string>>& env = std::nullopt);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  // SIGTERM, up to `grace`, then SIGKILL; returns the exit code (-signal if killed).
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Waits for the process to exit on its own; nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  std::string Stdout() const;
  std::string Stderr() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string stdout_path_;
  std::string stderr_path_;
};

// Polls `condition` every 50 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout = std::chrono::seconds(20));

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

std::string ReadFileOrEmpty(const std::string& path);

// A KiB figure of /proc/PID/status (`field` is "VmRSS", "VmHWM", ...); -1 when absent.
long ProcessStatusKib(pid_t pid, const std::string& field);
// CPU seconds a process has used (utime + stime of /proc/PID/stat); -1 when unreadable.
double ProcessCpuSeconds(pid_t pid);
void WriteFileOrDie(const std::string& path, const std::string& content, unsigned mode = 0600);

// Runs `body` in a forked child that has a mount namespace of its own, every mount private, so
// a test may mount and unmount without touching the machine (it needs root, as CI runs
// tests). Returns `body`'s result as the child's exit status: 0 for success, a code of the
// test's own otherwise; kNoMountNamespace when the namespace could not be made.
inline constexpr int kNoMountNamespace = 99;
int RunInOwnMountNamespace(const std::function<int()>& body);

// The environment of this process plus/overriding the given NAME=VALUE entries.
std::vector<std::string> EnvWith(const std::map<std::string, std::string>& overrides);

}  // namespace uplink::testing
