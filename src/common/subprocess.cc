#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/pipe.h"

extern char** environ;

namespace uplink {
namespace {

// Short polls, so that a cancel is seen promptly.
constexpr int kMaxPollMs = 100;

std::string TimeoutText(std::chrono::milliseconds timeout) {
  if (timeout.count() % 1000 == 0) return std::to_string(timeout.count() / 1000) + " s";
  return std::to_string(timeout.count()) + " ms";
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

// The child leads its own process group, so this reaches anything it started too.
void KillAndReap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

// Writing to a child that already exited must be an EPIPE error, not the end of this process.
// SIGPIPE from write() goes to the writing thread, so blocking it here (and taking back a
// SIGPIPE this raised) leaves every other thread's signal handling as it was.
class SigpipeBlockedInThisThread {
 public:
  SigpipeBlockedInThisThread() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &sigpipe_, &previous_);
  }
  ~SigpipeBlockedInThisThread() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec no_wait{0, 0};
      while (sigtimedwait(&sigpipe_, nullptr, &no_wait) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeBlockedInThisThread(const SigpipeBlockedInThisThread&) = delete;
  SigpipeBlockedInThisThread& operator=(const SigpipeBlockedInThisThread&) = delete;

 private:
  sigset_t sigpipe_;
  sigset_t previous_;
  bool was_pending_ = false;
};

// The child leads a process group of its own, with no signal blocked and SIGPIPE at its
// default action whatever this process does with it.
class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes,
                             POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t signals;
    sigemptyset(&signals);
    posix_spawnattr_setsigmask(&attributes, &signals);
    sigaddset(&signals, SIGPIPE);
    posix_spawnattr_setsigdefault(&attributes, &signals);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
};

// argv and the environment as the arrays posix_spawn takes, owning their strings.
class SpawnArguments {
 public:
  SpawnArguments(const std::vector<std::string>& argv,
                 const std::optional<std::vector<std::string>>& environment)
      : argv_(argv), inherit_(!environment) {
    if (environment) environment_ = *environment;
    argv_pointers_ = Pointers(argv_);
    environment_pointers_ = Pointers(environment_);
  }
  char* const* argv() { return argv_pointers_.data(); }
  char* const* environment() { return inherit_ ? environ : environment_pointers_.data(); }

 private:
  static std::vector<char*> Pointers(std::vector<std::string>& strings) {
    std::vector<char*> pointers;
    pointers.reserve(strings.size() + 1);
    for (std::string& s : strings) pointers.push_back(s.data());
    pointers.push_back(nullptr);
    return pointers;
  }

  std::vector<std::string> argv_;
  std::vector<std::string> environment_;
  bool inherit_;
  std::vector<char*> argv_pointers_;
  std::vector<char*> environment_pointers_;
};

}  // namespace

Result<ProcessResult> RunProcess(const ProcessOptions& options) {
  if (options.argv.empty()) return InternalError("RunProcess without a program");
  const std::string& program = options.argv.front();
  const bool has_input = !options.input.empty();
  Pipe in, out, err;
  if (!in.ok() || !out.ok() || !err.ok()) return ErrnoError("creating pipes", errno);
  if (!has_input) {
    in.Close(0);
    in.Close(1);
  }

  SpawnArguments arguments(options.argv, options.environment);
  SpawnSetup setup;
  if (has_input) {
    posix_spawn_file_actions_adddup2(&setup.actions, in.read_end(), 0);
  } else {
    posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&setup.actions, out.write_end(), 1);
  posix_spawn_file_actions_adddup2(&setup.actions, err.write_end(), 2);

  SigpipeBlockedInThisThread sigpipe_blocked;
  pid_t pid = -1;
  int spawned = ::posix_spawn(&pid, program.c_str(), &setup.actions, &setup.attributes,
                              arguments.argv(), arguments.environment());
  in.Close(0);
  out.Close(1);
  err.Close(1);
  if (spawned != 0) return NotFoundError("cannot run " + program + ": " + std::strerror(spawned));
  if (has_input) ::fcntl(in.write_end(), F_SETFL, O_NONBLOCK);

  auto stopped = [&]() -> Status {
    return UnavailableError(program + " was stopped: uplink is shutting down");
  };
  auto timed_out = [&]() -> Status {
    return DeadlineExceededError(program + " did not finish within " +
                                 TimeoutText(options.timeout) + " and was killed");
  };

  ProcessResult result;
  std::string_view input = options.input;
  size_t err_dropped = 0;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  char buffer[16384];
  while (out.read_end() >= 0 || err.read_end() >= 0) {
    if (options.cancel != nullptr && options.cancel->load()) {
      KillAndReap(pid);
      return stopped();
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      KillAndReap(pid);
      return timed_out();
    }
    int wait_ms = static_cast<int>(std::min<std::int64_t>(left.count(), kMaxPollMs));
    pollfd fds[3] = {{out.read_end(), POLLIN, 0},
                     {err.read_end(), POLLIN, 0},
                     {in.write_end(), POLLOUT, 0}};
    if (::poll(fds, 3, wait_ms) < 0 && errno != EINTR) {
      int saved = errno;
      KillAndReap(pid);
      return ErrnoError("waiting for " + program, saved);
    }
    if (fds[2].fd >= 0 && fds[2].revents != 0) {
      ssize_t n = ::write(in.write_end(), input.data(), input.size());
      if (n > 0) input.remove_prefix(static_cast<size_t>(n));
      // EPIPE: the program exited or closed its stdin without reading it all, which is its
      // business; its exit code says how it went.
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || input.empty()) in.Close(1);
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        (i == 0 ? out : err).Close(0);
        continue;
      }
      const size_t count = static_cast<size_t>(n);
      if (i == 0) {
        if (result.out.size() + count > options.max_output_bytes) {
          KillAndReap(pid);
          return ResourceExhaustedError(program + " wrote more than " +
                                        std::to_string(options.max_output_bytes) +
                                        " bytes of output and was killed");
        }
        result.out.append(buffer, count);
      } else {
        size_t kept = std::min(count, options.max_error_bytes - result.err.size());
        result.err.append(buffer, kept);
        err_dropped += count - kept;
      }
    }
  }
  in.Close(1);
  // Both outputs are closed; the program exits at about the same moment, but one that closed
  // them early still gets only the time that is left.
  int status = 0;
  while (true) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return ErrnoError("waiting for " + program, errno);
    if (options.cancel != nullptr && options.cancel->load()) {
      KillAndReap(pid);
      return stopped();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      KillAndReap(pid);
      return timed_out();
    }
    ::usleep(2000);
  }
  if (err_dropped > 0) {
    result.err += "\n[" + std::to_string(err_dropped) + " more bytes of stderr were not kept]\n";
  }
  result.exit_code = DecodeWaitStatus(status);
  return result;
}

Result<SpawnedProcess> SpawnProcess(const SpawnOptions& options) {
  if (options.argv.empty()) return InternalError("SpawnProcess without a program");
  const std::string& program = options.argv.front();
  Pipe in, out, err;
  if (!in.ok() || !out.ok() || !err.ok()) return ErrnoError("creating pipes", errno);
  SpawnArguments arguments(options.argv, options.environment);
  SpawnSetup setup;
  if (options.pipe_stdin) {
    posix_spawn_file_actions_adddup2(&setup.actions, in.read_end(), 0);
  } else {
    posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  }
  const char* sink = options.output_file.empty() ? "/dev/null" : options.output_file.c_str();
  const int sink_flags = O_WRONLY | O_CREAT | O_APPEND;
  if (options.pipe_stdout) {
    posix_spawn_file_actions_adddup2(&setup.actions, out.write_end(), 1);
  } else {
    posix_spawn_file_actions_addopen(&setup.actions, 1, sink, sink_flags, 0600);
  }
  if (options.pipe_stderr) {
    posix_spawn_file_actions_adddup2(&setup.actions, err.write_end(), 2);
  } else {
    posix_spawn_file_actions_addopen(&setup.actions, 2, sink, sink_flags, 0600);
  }
  if (!options.working_directory.empty()) {
    posix_spawn_file_actions_addchdir_np(&setup.actions, options.working_directory.c_str());
  }
  SpawnedProcess child;
  int spawned = ::posix_spawn(&child.pid, program.c_str(), &setup.actions, &setup.attributes,
                              arguments.argv(), arguments.environment());
  if (spawned != 0) return NotFoundError("cannot run " + program + ": " + std::strerror(spawned));
  // Keep our ends; the child's ends close with the Pipes.
  auto keep = [](Pipe& pipe, int end) {
    int fd = ::dup(end == 0 ? pipe.read_end() : pipe.write_end());
    if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
  };
  if (options.pipe_stdin) child.stdin_fd = keep(in, 1);
  if (options.pipe_stdout) child.stdout_fd = keep(out, 0);
  if (options.pipe_stderr) child.stderr_fd = keep(err, 0);
  return child;
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

std::optional<std::string> FindProgram(std::string_view name, std::string_view path_list) {
  auto executable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string_view::npos) {
    std::string path(name);
    return executable(path) ? std::optional<std::string>(path) : std::nullopt;
  }
  while (true) {
    size_t colon = path_list.find(':');
    std::string_view dir = path_list.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') {
      std::string candidate = std::string(dir) + "/" + std::string(name);
      if (executable(candidate)) return candidate;
    }
    if (colon == std::string_view::npos) return std::nullopt;
    path_list.remove_prefix(colon + 1);
  }
}

std::vector<std::string> InheritedEnvironment(const std::vector<std::string_view>& without) {
  std::vector<std::string> entries;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    if (std::find(without.begin(), without.end(), name) == without.end()) {
      entries.emplace_back(entry);
    }
  }
  return entries;
}

}  // namespace uplink
