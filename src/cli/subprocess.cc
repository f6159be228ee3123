#include "cli/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/pipe.h"

extern char** environ;

namespace uplink::cli {
namespace {

// Writing to a helper that already exited must be an EPIPE error, not the end of uplink.
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, &previous_);
  }
  ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &previous_, nullptr); }

 private:
  struct sigaction previous_ {};
};

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

}  // namespace

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, std::string_view input,
                                 std::chrono::milliseconds timeout, size_t max_output) {
  if (argv.empty()) return InternalError("RunProcess without a program");
  Pipe in, out, err;
  if (!in.ok() || !out.ok() || !err.ok()) return ErrnoError("creating pipes", errno);
  IgnoreSigpipe ignore_sigpipe;

  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "UPLINK_API_KEY=", 15) != 0) env_strings.emplace_back(*e);
  }
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.read_end(), 0);
  posix_spawn_file_actions_adddup2(&actions, out.write_end(), 1);
  posix_spawn_file_actions_adddup2(&actions, err.write_end(), 2);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  in.Close(0);
  out.Close(1);
  err.Close(1);
  if (rc != 0) return NotFoundError("cannot run " + argv[0] + ": " + std::strerror(rc));

  if (input.empty()) in.Close(1);
  if (in.write_end() >= 0) ::fcntl(in.write_end(), F_SETFL, O_NONBLOCK);
  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  char buf[16384];
  while (out.read_end() >= 0 || err.read_end() >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[3] = {
        {out.read_end(), POLLIN, 0}, {err.read_end(), POLLIN, 0}, {in.write_end(), POLLOUT, 0}};
    if (::poll(fds, 3, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      int saved = errno;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return ErrnoError("waiting for " + argv[0], saved);
    }
    if (fds[2].fd >= 0 && fds[2].revents != 0) {
      ssize_t n = ::write(in.write_end(), input.data(), input.size());
      if (n > 0) input.remove_prefix(static_cast<size_t>(n));
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || input.empty()) in.Close(1);
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      std::string& sink = i == 0 ? result.out : result.err;
      if (n <= 0) {
        (i == 0 ? out : err).Close(0);
      } else if (sink.size() < max_output) {
        sink.append(buf, std::min(static_cast<size_t>(n), max_output - sink.size()));
      }
    }
  }
  in.Close(1);
  if (timed_out) {
    // Grandchildren may still hold the pipes open; closing our ends lets them fail on write.
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return DeadlineExceededError(argv[0] + " did not finish within " +
                                 std::to_string(timeout.count() / 1000) + " s and was stopped");
  }
  // Both outputs are closed; the program normally exits at the same moment, but one that
  // closed them early still gets only the time that is left.
  int status = 0;
  while (true) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return ErrnoError("waiting for " + argv[0], errno);
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return DeadlineExceededError(argv[0] + " did not finish within " +
                                   std::to_string(timeout.count() / 1000) + " s and was stopped");
    }
    ::usleep(5000);
  }
  result.exit_code = DecodeWaitStatus(status);
  return result;
}

std::optional<std::string> FindOnPath(std::string_view name, std::string_view path_list) {
  while (true) {
    size_t colon = path_list.find(':');
    std::string_view dir = path_list.substr(0, colon);
    // An empty entry means the current directory; a program is never picked up from there.
    if (!dir.empty() && dir.front() == '/') {
      std::string candidate = std::string(dir) + "/" + std::string(name);
      struct stat st {};
      if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          ::access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
    if (colon == std::string_view::npos) return std::nullopt;
    path_list.remove_prefix(colon + 1);
  }
}

}  // namespace uplink::cli
