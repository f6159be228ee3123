// uplink_test_postgres start|stop DIR: the ctest fixture `postgres`, one PostgreSQL server for
// every test of a run that needs one (see postgres_server.h). `start` returns once the server
// answers, leaving a keeper process that stops it on SIGTERM; `stop` sends that and waits.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "support/postgres_server.h"
#include "support/process.h"

namespace {

using uplink::testing::PostgresServer;
using uplink::testing::ReadFileOrEmpty;
using uplink::testing::WaitFor;
using uplink::testing::WriteFileOrDie;

// Whether `pid` is still a keeper: a keeper.pid left by a crashed run may name a process that
// has since taken its number.
bool IsKeeper(pid_t pid) {
  const std::string command_line = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/cmdline");
  return command_line.find("uplink_test_postgres") != std::string::npos;
}

int Stop(const std::string& dir) {
  const std::string pid_text = ReadFileOrEmpty(dir + "/keeper.pid");
  if (!pid_text.empty() && IsKeeper(static_cast<pid_t>(std::stol(pid_text)))) {
    const pid_t keeper = static_cast<pid_t>(std::stol(pid_text));
    ::kill(keeper, SIGTERM);
    if (!WaitFor([&] { return ::kill(keeper, 0) != 0; }, std::chrono::minutes(1))) {
      std::fprintf(stderr, "the test PostgreSQL server's keeper %d did not stop\n", keeper);
      return 1;
    }
  }
  std::filesystem::remove_all(dir);
  return 0;
}

int Start(const std::string& dir) {
  // A keeper left by an interrupted run is stopped first: its server, losing the directory,
  // would remove the new server's socket (same path) as it shut down.
  if (int stopped = Stop(dir); stopped != 0) return stopped;
  std::filesystem::create_directories(dir);
  const std::string failed = dir + "/failed";
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pid_t keeper = ::fork();
  if (keeper == 0) {
    ::setsid();
    // Off ctest's pipes, which it reads until every holder closes them.
    const int log = ::open((dir + "/keeper.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    const int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    auto server = PostgresServer::Serve(dir);
    if (!server.ok()) {
      WriteFileOrDie(failed, server.status().ToString() + "\n");
      ::_exit(1);
    }
    // Only now: initdb's exit, before, would end the wait below at once. (A SIGCHLD raised
    // while unblocked is discarded, its default action being to ignore it.)
    sigaddset(&stop, SIGCHLD);  // the server died: nothing left to keep
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    WriteFileOrDie(dir + "/keeper.pid", std::to_string(::getpid()));
    int signal_number = 0;
    sigwait(&stop, &signal_number);
    server->reset();
    ::_exit(0);
  }
  bool settled = WaitFor(
      [&] {
        return std::filesystem::exists(dir + "/keeper.pid") || std::filesystem::exists(failed) ||
               ::waitpid(keeper, nullptr, WNOHANG) == keeper;
      },
      std::chrono::minutes(2));
  if (!settled || !std::filesystem::exists(dir + "/keeper.pid")) {
    std::fprintf(stderr, "the test PostgreSQL server did not start: %s\n",
                 ReadFileOrEmpty(failed).c_str());
    ::kill(keeper, SIGTERM);
    return 1;
  }
  std::printf("test PostgreSQL server ready in %s\n", dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc == 3 ? argv[1] : "";
  if (command == "start") return Start(argv[2]);
  if (command == "stop") return Stop(argv[2]);
  std::fprintf(stderr, "usage: uplink_test_postgres start|stop DIR\n");
  return 2;
}
