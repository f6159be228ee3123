#include "kubesim/exec.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "common/json.h"
#include "common/log.h"
#include "common/subprocess.h"

namespace uplink::kubesim {
namespace {

const log::Logger kLog("kubesim.exec");

constexpr char kStdin = 0;
constexpr char kStdout = 1;
constexpr char kStderr = 2;
constexpr char kError = 3;
constexpr char kResize = 4;
constexpr char kCloseSignal = static_cast<char>(255);
// Output travels in messages well within the WebSocket's 64 KiB.
constexpr size_t kChunkBytes = 32 * 1024;

bool IsTrue(const std::optional<std::string>& value) {
  return value && (*value == "true" || *value == "1");
}

// Go's %v of a []string: "[sh -c exit 3]".
std::string GoList(const std::vector<std::string>& items) {
  std::string text = "[";
  for (size_t i = 0; i < items.size(); ++i) text += (i ? " " : "") + items[i];
  return text + "]";
}

std::string SuccessStatus() { return R"({"metadata":{},"status":"Success"})"; }

std::string ExitStatus(const std::vector<std::string>& command, int code) {
  json::object status{
      {"metadata", json::object()},
      {"status", "Failure"},
      {"message", "command terminated with non-zero exit code: error executing command " +
                      GoList(command) + ", exit code " + std::to_string(code)},
      {"reason", "NonZeroExitCode"},
      {"details",
       json::object{{"causes", json::array{json::object{{"reason", "ExitCode"},
                                                        {"message", std::to_string(code)}}}}}}};
  return ToJson(status);
}

std::string InternalErrorStatus(const std::string& message) {
  json::object status{{"metadata", json::object()},
                      {"status", "Failure"},
                      {"message", "Internal error occurred: error executing command in "
                                  "container: " + message},
                      {"reason", "InternalError"},
                      {"details", json::object{{"causes", json::array{json::object{
                                                   {"message", "error executing command in "
                                                               "container: " + message}}}}}},
                      {"code", 500}};
  return ToJson(status);
}

bool Send(net::WebSocket& socket, char channel, std::string_view data) {
  std::string message(1, channel);
  message.append(data);
  return socket.Write(message).ok();
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Writes all of `data` to `fd`; false when the process no longer reads it.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data.remove_prefix(static_cast<size_t>(written));
  }
  return true;
}

// Reaps a process nobody waits for any more.
void ReapLater(pid_t pid) {
  std::thread([pid] {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }).detach();
}

}  // namespace

Result<ExecRequest> ParseExecRequest(const net::Request& request) {
  ExecRequest exec;
  for (auto& [key, value] : request.QueryParams()) {
    if (key == "command") exec.command.push_back(value);
  }
  exec.container = request.Query("container").value_or("");
  exec.stdin = IsTrue(request.Query("stdin"));
  exec.stdout = IsTrue(request.Query("stdout"));
  exec.stderr = IsTrue(request.Query("stderr"));
  exec.tty = IsTrue(request.Query("tty"));
  if (exec.command.empty() || exec.command.front().empty()) {
    return InvalidArgumentError("you must specify at least one command for the container");
  }
  if (!exec.stdin && !exec.stdout && !exec.stderr) {
    return InvalidArgumentError("you must specify at least 1 of stdin, stdout, stderr");
  }
  if (exec.tty && exec.stderr) {
    return InvalidArgumentError("tty and stderr cannot both be true");
  }
  return exec;
}

void ServeExec(std::unique_ptr<net::WebSocket> socket, const ExecRequest& request,
               const Result<ExecCommand>& command) {
  const bool v5 = socket->subprotocol() == kExecProtocolV5;
  // The API server's first message says the streams are ready.
  Send(*socket, request.stdout ? kStdout : request.stderr ? kStderr : kError, "");
  auto finish = [&](const std::string& status) {
    Send(*socket, kError, status);
    (void)socket->Close(net::kCloseNormal, "");
  };
  if (!command.ok()) {
    finish(InternalErrorStatus(command.status().message()));
    return;
  }
  SpawnOptions spawn;
  spawn.argv = command->argv;
  spawn.environment = command->environment;
  spawn.working_directory = command->working_directory;
  spawn.pipe_stdin = request.stdin;
  spawn.pipe_stdout = request.stdout;
  spawn.pipe_stderr = request.stderr;
  Result<SpawnedProcess> spawned = SpawnProcess(spawn);
  if (!spawned.ok()) {
    finish(InternalErrorStatus(spawned.status().message()));
    return;
  }
  SpawnedProcess child = *spawned;
  std::atomic<int> stdin_fd{child.stdin_fd};
  std::atomic<bool> client_gone{false};

  // The client's messages: stdin, its end, resizes, and the close.
  std::thread reader([&] {
    // A process that stops reading its stdin must not take the simulator down with SIGPIPE.
    sigset_t sigpipe;
    sigemptyset(&sigpipe);
    sigaddset(&sigpipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);
    auto close_stdin = [&] {
      int fd = stdin_fd.exchange(-1);
      if (fd >= 0) ::close(fd);
    };
    for (;;) {
      Result<net::WebSocketMessage> message = socket->Read();
      if (!message.ok() || message->type == net::WebSocketMessage::Type::kClose) break;
      if (message->data.empty()) continue;
      char channel = message->data[0];
      std::string_view payload = std::string_view(message->data).substr(1);
      if (channel == kStdin) {
        int fd = stdin_fd.load();
        if (fd >= 0 && !WriteAll(fd, payload)) close_stdin();
      } else if (v5 && channel == kCloseSignal && !payload.empty() && payload[0] == kStdin) {
        close_stdin();
      } else if (channel != kResize) {
        kLog.Debug("exec message on an unknown channel ignored",
                   {{"channel", static_cast<int>(static_cast<unsigned char>(channel))}});
      }
    }
    client_gone = true;
    close_stdin();
  });

  // The process's output, until it closes both streams or the client goes.
  int outputs[2] = {child.stdout_fd, child.stderr_fd};
  const char channels[2] = {kStdout, kStderr};
  std::string buffer(kChunkBytes, '\0');
  while ((outputs[0] >= 0 || outputs[1] >= 0) && !client_gone) {
    pollfd fds[2] = {{outputs[0], POLLIN, 0}, {outputs[1], POLLIN, 0}};
    if (::poll(fds, 2, 100) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (outputs[i] < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(outputs[i], buffer.data(), buffer.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        CloseFd(outputs[i]);
        continue;
      }
      if (!Send(*socket, channels[i], std::string_view(buffer.data(), static_cast<size_t>(n)))) {
        client_gone = true;
        break;
      }
    }
  }
  CloseFd(outputs[0]);
  CloseFd(outputs[1]);

  // Its exit, unless the client is gone: then it is left to finish on its own.
  int wait_status = 0;
  bool exited = false;
  while (!client_gone) {
    pid_t done = ::waitpid(child.pid, &wait_status, WNOHANG);
    if (done == child.pid) {
      exited = true;
      break;
    }
    if (done < 0 && errno != EINTR) break;
    ::usleep(5000);
  }
  if (!exited) {
    ReapLater(child.pid);
    socket->Abort();
    reader.join();
    return;
  }
  int code = ExitCodeOf(wait_status);
  finish(code == 0 ? SuccessStatus() : ExitStatus(request.command, code));
  reader.join();
}

}  // namespace uplink::kubesim
