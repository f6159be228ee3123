// Running a helper program (kubectl, nvidia-smi) the one way uplink does it: argv passed as
// is to posix_spawn (no shell), the child in a process group of its own, its output bounded,
// and a deadline after which the whole group is killed and the child reaped.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "common/status.h"

namespace uplink {

struct ProcessOptions {
  // argv[0] is the program's path (a name is not looked up; see FindProgram).
  std::vector<std::string> argv;
  // NAME=VALUE entries. When set, the child gets exactly these and inherits nothing; when
  // not, it gets this process's environment.
  std::optional<std::vector<std::string>> environment;
  // Written to the child's stdin, which is then closed. Empty: stdin is /dev/null.
  std::string input;
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  // More than this on stdout is a failure (ResourceExhausted), never a cut-short success.
  size_t max_output_bytes = 1 << 20;
  // stderr is for messages: its start is kept and the rest counted, so that a chatty
  // failure still says what went wrong.
  size_t max_error_bytes = 64 << 10;
  // Polled while the child runs; when it becomes true the child is stopped (Unavailable).
  const std::atomic<bool>* cancel = nullptr;
};

struct ProcessResult {
  int exit_code = -1;  // -N when killed by signal N
  std::string out;
  // At most max_error_bytes, then a line saying how many bytes were not kept.
  std::string err;
};

// Runs the program and waits for it. Errors, each after the child's whole process group was
// SIGKILLed and the child reaped: DeadlineExceeded past `timeout`, ResourceExhausted when
// stdout passes `max_output_bytes`, Unavailable on cancel. NotFound when argv[0] cannot be
// executed. A program that exits without reading all of its input is not an error.
Result<ProcessResult> RunProcess(const ProcessOptions& options);

// A program left running with its standard streams as the caller asked: for long-lived
// children whose input and output flow while they run (a simulated container, an exec
// session). The child leads a process group of its own; the caller reaps it.
struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the program's path
  // As ProcessOptions::environment: exactly these NAME=VALUE entries when set.
  std::optional<std::vector<std::string>> environment;
  std::string working_directory;  // empty: this process's
  // A pipe for each stream asked for; otherwise stdin is /dev/null and stdout and stderr go
  // to `output_file` (appended) when it is set, else to /dev/null.
  bool pipe_stdin = false;
  bool pipe_stdout = false;
  bool pipe_stderr = false;
  std::string output_file;
};

struct SpawnedProcess {
  pid_t pid = -1;
  // Our ends of the pipes asked for (close-on-exec), -1 for the others. The caller closes them.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// NotFound when argv[0] cannot be executed (the working directory missing included).
Result<SpawnedProcess> SpawnProcess(const SpawnOptions& options);

// The exit code of a waitpid status: the code, or 128 + N when signal N ended the process (as
// shells and container runtimes report it).
int ExitCodeOf(int wait_status);

// `name` when it holds a '/' and is an executable file, else the first executable file
// `name` in the colon-separated absolute directories of `path_list` ($PATH). Relative and
// empty entries (the current directory) are never searched.
std::optional<std::string> FindProgram(std::string_view name, std::string_view path_list);

// This process's environment as NAME=VALUE entries, without the variables named in
// `without`: for helpers that need the user's environment but never a credential of ours.
std::vector<std::string> InheritedEnvironment(const std::vector<std::string_view>& without);

}  // namespace uplink
