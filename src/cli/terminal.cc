#include "cli/terminal.h"

#include <fcntl.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

namespace uplink::cli {
namespace {

constexpr size_t kMaxAnswerBytes = 4096;

// What a signal handler needs to put echo back: async-signal-safe state only.
volatile sig_atomic_t g_echo_fd = -1;
termios g_saved_termios;
// Signals that end the process. Ctrl-Z (SIGTSTP) is left alone: the read goes on, still
// without echo, after the job is resumed.
constexpr int kRestoreSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
struct sigaction g_previous[sizeof kRestoreSignals / sizeof kRestoreSignals[0]];

void RestoreEchoAndReraise(int signal_number) {
  if (g_echo_fd >= 0) ::tcsetattr(g_echo_fd, TCSAFLUSH, &g_saved_termios);
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

class TtyTerminal : public Terminal {
 public:
  explicit TtyTerminal(std::string device) : device_(std::move(device)) {}
  ~TtyTerminal() override {
    if (fd_ >= 0) ::close(fd_);
  }

  bool Available() override {
    if (fd_ < 0 && !tried_) {
      tried_ = true;
      fd_ = ::open(device_.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    }
    return fd_ >= 0;
  }

  Result<Secret> ReadSecret(std::string_view prompt) override {
    if (!Available()) return NoTerminal();
    termios saved{};
    if (::tcgetattr(fd_, &saved) != 0) return ErrnoError("reading the terminal's settings", errno);
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    quiet.c_lflag |= ECHONL | ICANON;
    g_saved_termios = saved;
    for (size_t i = 0; i < std::size(kRestoreSignals); ++i) {
      struct sigaction action {};
      action.sa_handler = RestoreEchoAndReraise;
      sigemptyset(&action.sa_mask);
      ::sigaction(kRestoreSignals[i], &action, &g_previous[i]);
    }
    g_echo_fd = fd_;
    Result<Secret> answer = InternalError("not read");
    if (::tcsetattr(fd_, TCSAFLUSH, &quiet) != 0) {
      answer = ErrnoError("turning off the terminal's echo", errno);
    } else {
      auto line = ReadAnswer(prompt);
      answer = line.ok() ? Result<Secret>(Secret(std::move(*line))) : Result<Secret>(line.status());
      ::tcsetattr(fd_, TCSAFLUSH, &saved);
    }
    g_echo_fd = -1;
    for (size_t i = 0; i < std::size(kRestoreSignals); ++i) {
      ::sigaction(kRestoreSignals[i], &g_previous[i], nullptr);
    }
    return answer;
  }

  Result<std::string> ReadLine(std::string_view prompt) override {
    if (!Available()) return NoTerminal();
    return ReadAnswer(prompt);
  }

  Status Show(std::string_view text) override {
    if (!Available()) return NoTerminal();
    WriteAll(text);
    return Status::Ok();
  }

 private:
  static Status NoTerminal() { return FailedPreconditionError("there is no terminal to ask on"); }

  Result<std::string> ReadAnswer(std::string_view prompt) {
    WriteAll(prompt);
    std::string line;
    while (true) {
      char c;
      ssize_t n = ::read(fd_, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError("reading from the terminal", errno);
      if (n == 0) {
        if (line.empty()) return InvalidArgumentError("no answer: the terminal input ended");
        break;
      }
      if (c == '\n') break;
      if (line.size() >= kMaxAnswerBytes) {
        Secret discard(std::move(line));  // wiped when it goes
        return InvalidArgumentError("the answer is longer than " + std::to_string(kMaxAnswerBytes) +
                                    " bytes");
      }
      line += c;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }

  void WriteAll(std::string_view text) {
    while (!text.empty()) {
      ssize_t n = ::write(fd_, text.data(), text.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      text.remove_prefix(static_cast<size_t>(n));
    }
  }

  std::string device_;
  int fd_ = -1;
  bool tried_ = false;
};

}  // namespace

std::unique_ptr<Terminal> OpenTerminal(std::string device) {
  return std::make_unique<TtyTerminal>(std::move(device));
}

Result<std::string> ReadLineFrom(std::istream& in, std::string_view what, size_t max_bytes) {
  std::string line;
  char c;
  bool any = false;
  while (in.get(c)) {
    any = true;
    if (c == '\n') break;
    if (line.size() >= max_bytes) {
      Secret discard(std::move(line));
      return InvalidArgumentError(std::string(what) + " is longer than " +
                                  std::to_string(max_bytes) + " bytes");
    }
    line += c;
  }
  if (!any) return InvalidArgumentError(std::string(what) + " is missing: stdin is empty");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace uplink::cli
