// What every `uplink-agent` command shares: exit codes, usage errors, the console flags, the
// stop signal, the instance name and opening a spool from its flags.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/stop_signal.h"
#include "common/flags.h"
#include "common/status.h"
#include "spool/spool.h"

namespace uplink::agent {

inline constexpr int kExitUsage = 2;
// After SIGTERM the current cycle may be inside a request (up to 30 s); Kubernetes gives a
// pod 30 s in all, so leave without waiting for it.
inline constexpr std::chrono::seconds kStopGrace{3};
// The shipper's last attempt takes up to 5 s (ShipperOptions::stop_budget), and a request
// already in flight may overrun it; leaving then loses nothing, since the spool keeps every
// record until the console has acknowledged it.
inline constexpr std::chrono::seconds kShipStopGrace{8};
inline constexpr std::int64_t kDefaultSpoolBytes = 512ll << 20;
// The smallest cap the spool takes (two segments of 32 KiB).
inline constexpr std::int64_t kMinSpoolBytes = 64ll << 10;

// Prints "uplink-agent: MESSAGE" to stderr and returns `code`.
int Fail(const std::string& message, int code = 1);

// The agent writes with write(2) and reads with stdio, never iostreams: std::cout's static
// initialiser builds every locale facet of the statically linked libstdc++, about 0.3 MiB of
// resident pages in a process that runs on every node.

// Writes all of `text` to a file descriptor, stdout or stderr at once, unbuffered: what is
// printed is out before the next step, even if the process is killed right after. False when
// the write fails.
bool WriteFd(int fd, std::string_view text);
bool WriteStdout(std::string_view text);
bool WriteStderr(std::string_view text);

enum class LineRead { kLine, kEnd, kTooLong };

// One line of `input` without its newline, at most `max_bytes`; the last line needs no
// newline. kTooLong as soon as a line runs past `max_bytes`, with the rest of it unread
// (SkipLine drops it), so an endless line costs no more than the bound.
LineRead ReadLine(std::FILE* input, std::string& line, size_t max_bytes);

// Reads and drops the rest of the current line, its newline included.
void SkipLine(std::FILE* input);

// Parses a command's flags: prints the usage for --help or -h (exit code 0), or the error and
// the usage for bad flags (kExitUsage); nullopt when the command goes on.
std::optional<int> ParseFlagsOrExit(FlagSet& flags, const std::vector<std::string>& args);

// Registers --console, --token-file and --console-ca-file, which every role that talks to
// the console takes; `console_help` says what happens without --console, if anything.
void RegisterConsoleFlags(FlagSet& flags, std::string* console_url, std::string* token_file,
                          std::string* console_ca_file,
                          const std::string& console_help = "console URL, https://HOST[:PORT]");

// --cluster-uid-file, for a command that ships to the console but cannot read the cluster's
// identity from Kubernetes (ConsoleClientOptions::cluster_uid_file).
void RegisterClusterUidFileFlag(FlagSet& flags, std::string* cluster_uid_file);

// --console and --token-file, which every role that talks to the console takes.
Status CheckConsoleFlags(const std::string& console_url, const std::string& token_file);

// --stream and --instance, which every command that ships a spool takes; `stream_help` says
// what the stream defaults to.
void RegisterStreamFlags(FlagSet& flags, std::string* stream, std::string* instance,
                         const std::string& stream_help);

// Checks --instance (at most 253 characters) and --stream, which an empty value sets to
// `default_stream`, built from the flag `default_from`. The usage error, if any.
Status CheckStreamFlags(const FlagSet& flags, std::string& stream, const std::string& instance,
                        const std::string& default_stream, const std::string& default_from);

// The stop request lives as long as the process: the detached signal thread may use it after
// the command has returned.
StopSignal& ProcessStopSignal();

// SIGINT and SIGTERM are blocked in every thread and taken by one waiting thread, which asks
// the agent to stop; if the agent is still busy after `grace` the process exits with
// `forced_exit_code` (1 in --once mode: nothing was accepted). Call before starting threads.
void HandleStopSignals(StopSignal& stop, int forced_exit_code,
                       std::chrono::seconds grace = kStopGrace);

// The pod's name from the downward API (the chart sets POD_NAME), else the host name, which
// in a pod is also the pod's name.
std::string DefaultInstanceName();

// The flags of a spool: its directory and its cap.
struct SpoolFlags {
  std::string state_dir;
  std::int64_t max_bytes = kDefaultSpoolBytes;
  bool reserve_disk = true;

  void Register(FlagSet& flags);
  // InvalidArgument naming the flag.
  Status Check() const;
};

// True if `dir` holds a spool's state or a segment.
bool HoldsSpool(const std::string& dir);

// Opens (creating if needed) the spool the flags name; a spool another process holds is a
// FailedPrecondition that says so.
Result<std::unique_ptr<spool::Spool>> OpenSpool(const SpoolFlags& flags);

}  // namespace uplink::agent
