#include "agent/command_support.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include "agent/console_client.h"
#include "agent/shipper.h"
#include "common/files.h"
#include "common/log.h"
#include "common/text.h"
#include "common/time.h"

namespace uplink::agent {

int Fail(const std::string& message, int code) {
  (void)WriteStderr("uplink-agent: " + message + "\n");
  return code;
}

bool WriteFd(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool WriteStdout(std::string_view text) { return WriteFd(STDOUT_FILENO, text); }
bool WriteStderr(std::string_view text) { return WriteFd(STDERR_FILENO, text); }

LineRead ReadLine(std::FILE* input, std::string& line, size_t max_bytes) {
  line.clear();
  bool any = false;
  while (true) {
    const int c = ::getc_unlocked(input);
    if (c == EOF) break;
    any = true;
    if (c == '\n') break;
    if (line.size() == max_bytes) {
      ::ungetc(c, input);
      return LineRead::kTooLong;
    }
    line += static_cast<char>(c);
  }
  return any ? LineRead::kLine : LineRead::kEnd;
}

void SkipLine(std::FILE* input) {
  int c;
  do {
    c = ::getc_unlocked(input);
  } while (c != EOF && c != '\n');
}

std::optional<int> ParseFlagsOrExit(FlagSet& flags, const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") {
      return WriteStdout(flags.Usage()) ? 0 : 1;
    }
  }
  if (Status parsed = flags.Parse(args); !parsed.ok()) {
    return Fail(parsed.message() + "\n" + flags.Usage(), kExitUsage);
  }
  return std::nullopt;
}

void RegisterConsoleFlags(FlagSet& flags, std::string* console_url, std::string* token_file,
                          std::string* console_ca_file, const std::string& console_help) {
  flags.String("console", console_url, console_help);
  flags.String("token-file", token_file, "file holding the connection token (agt_...)");
  flags.String("console-ca-file", console_ca_file,
               "PEM CA bundle for the console's certificate (default: system store)");
}

void RegisterClusterUidFileFlag(FlagSet& flags, std::string* cluster_uid_file) {
  flags.String("cluster-uid-file", cluster_uid_file,
               "file holding the cluster's identity (the kube-system namespace's UID), re-read "
               "before every upload and sent with it; the chart mounts the inventory role's "
               "status ConfigMap for this (default: none: uploads are bound by the token alone)");
}

Status CheckConsoleFlags(const std::string& console_url, const std::string& token_file) {
  if (console_url.empty()) {
    return InvalidArgumentError(
        "--console is required: the console URL, e.g. --console https://console.example "
        "(or UPLINK_CONSOLE)");
  }
  UPLINK_RETURN_IF_ERROR(ValidateConsoleUrl(console_url));
  if (token_file.empty()) {
    return InvalidArgumentError(
        "--token-file is required: the file holding the connection token, usually the "
        "mounted connection Secret (or UPLINK_TOKEN_FILE)");
  }
  if (auto token = ReadFileBounded(token_file, 4096); !token.ok()) {
    return InvalidArgumentError("--token-file: " + token.status().message() +
                                "; mount the connection Secret there or fix the path");
  }
  return Status::Ok();
}

void RegisterStreamFlags(FlagSet& flags, std::string* stream, std::string* instance,
                         const std::string& stream_help) {
  flags.String("stream", stream, stream_help);
  flags.String("instance", instance,
               "this agent's name in the console (default: $POD_NAME, else the host name)");
}

Status CheckStreamFlags(const FlagSet& flags, std::string& stream, const std::string& instance,
                        const std::string& default_stream, const std::string& default_from) {
  if (instance.size() > 253) {
    return InvalidArgumentError("--instance must be at most 253 characters");
  }
  if (stream.empty()) stream = default_stream;
  if (Status valid = ValidateStreamName(stream); !valid.ok()) {
    return InvalidArgumentError(
        "--stream '" + OneLineExcerpt(stream, 64) + "': " + valid.message() +
        (flags.WasSet("stream") ? "" : "; the default comes from " + default_from +
                                           ", so pass --stream"));
  }
  return Status::Ok();
}

StopSignal& ProcessStopSignal() {
  static StopSignal stop;
  return stop;
}

void HandleStopSignals(StopSignal& stop, int forced_exit_code, std::chrono::seconds grace) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals, &stop, forced_exit_code, grace] {
    int received = 0;
    sigwait(&signals, &received);
    log::Logger("agent").Info("stopping", {{"signal", received == SIGINT ? "SIGINT" : "SIGTERM"}});
    stop.Stop();
    std::this_thread::sleep_for(grace);
    log::Logger("agent").Info("exiting without waiting for the current request",
                              {{"exit_code", forced_exit_code}});
    std::_Exit(forced_exit_code);
  }).detach();
}

std::string DefaultInstanceName() {
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') return pod;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

void SpoolFlags::Register(FlagSet& flags) {
  flags.String("state-dir", &state_dir, "the spool's directory (created when missing)");
  flags.Int("max-bytes", &max_bytes,
            "the spool's size cap in bytes; at the cap the oldest records are dropped");
  flags.Bool("reserve-disk", &reserve_disk,
             "hold the spool's whole cap on disk, written ahead in idle time: a console "
             "outage then needs no free space, and appends overwrite blocks that exist "
             "(faster to sync); false: the spool takes disk as it grows");
}

Status SpoolFlags::Check() const {
  if (state_dir.empty()) {
    return InvalidArgumentError(
        "--state-dir is required: the spool's directory, e.g. --state-dir "
        "/var/lib/uplink/spool (or UPLINK_STATE_DIR)");
  }
  if (max_bytes < kMinSpoolBytes) {
    return InvalidArgumentError("--max-bytes must be at least " + std::to_string(kMinSpoolBytes) +
                                " (64 KiB)");
  }
  return Status::Ok();
}

bool HoldsSpool(const std::string& dir) {
  auto entries = spool::PosixFileSystem().ListDir(dir);
  if (!entries.ok()) return false;
  for (const std::string& name : *entries) {
    if (name == "STATE" || name.ends_with(".seg") || name.ends_with(".rseg")) return true;
  }
  return false;
}

Result<std::unique_ptr<spool::Spool>> OpenSpool(const SpoolFlags& flags) {
  spool::SpoolOptions options;
  options.max_bytes = static_cast<std::uint64_t>(flags.max_bytes);
  options.reserve_disk = flags.reserve_disk;
  auto opened = spool::Spool::Open(spool::PosixFileSystem(), flags.state_dir, options,
                                   SystemClock());
  if (!opened.ok() && opened.status().code() == StatusCode::kFailedPrecondition) {
    return FailedPreconditionError(
        "the spool in " + flags.state_dir +
        " is in use by another process (another uplink-agent holds its lock); stop that "
        "process first, or run this again once it has finished");
  }
  if (!opened.ok()) return opened.status().WithContext("opening the spool in " + flags.state_dir);
  return opened;
}

}  // namespace uplink::agent
