// kubectl commands from the console (docs/protocol.md, "kubectl commands"): the cluster role's
// long poll (POST /api/v1/agent/commands/poll) and the console's reply with the commands it
// hands out, and one command's result (POST /api/v1/agent/commands/{id}/result).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"
#include "kubectl/guard.h"

namespace uplink::protocol {

// ---- the poll -------------------------------------------------------------------------------
inline constexpr std::int64_t kDefaultPollWaitSeconds = 50;
inline constexpr std::int64_t kMaxPollWaitSeconds = 55;
inline constexpr std::int64_t kDefaultPollCommands = 4;
inline constexpr std::int64_t kMaxPollCommands = 16;

struct CommandPoll {
  std::string agent_instance;
  std::int64_t wait_seconds = kDefaultPollWaitSeconds;  // how long the console may hold it
  std::int64_t max_commands = kDefaultPollCommands;     // how many it may hand out at once
};

json::object EncodeCommandPoll(const CommandPoll& poll);
// Strict: unknown fields, wrong types and values out of bounds are InvalidArgument naming the
// field; absent fields take their defaults.
Result<CommandPoll> DecodeCommandPoll(const json::object& body);

// ---- the poll's reply -----------------------------------------------------------------------
// kubectl runs at most this long on the agent.
inline constexpr std::int64_t kCommandTimeoutSeconds = 30;
// The argv of a command: what the read-only guard allows, which the console checked before
// it queued the command.
inline constexpr size_t kMaxCommandArgs = kubectl::kMaxArguments;
inline constexpr size_t kMaxCommandArgBytes = kubectl::kMaxArgumentBytes;

struct PolledCommand {
  std::string id;  // IsCommandId
  // Empty when the reply's argv was not a usable list of strings: the command is then refused
  // and its refusal reported, rather than dropped.
  std::vector<std::string> argv;
  std::int64_t timeout_seconds = kCommandTimeoutSeconds;
};

struct PollReply {
  std::vector<PolledCommand> commands;
  std::optional<WallTime> expires_at;
};

json::object EncodePollReply(const PollReply& reply);
// The commands of a reply. InvalidArgument when it has no commands array or more than
// kMaxPollCommands; an entry without a valid id is skipped.
Result<PollReply> DecodePollReply(const json::value& body);

// ---- a command's result ---------------------------------------------------------------------
// The decompressed body of a command result.
inline constexpr size_t kMaxCommandResultBytes = 16 << 20;
// A result body is flat: the object, the error object inside it.
inline constexpr size_t kMaxCommandResultDepth = 4;
// kubectl's stdout beyond this is the agent's output_too_large failure, never a result.
inline constexpr size_t kMaxCommandStdoutBytes = 4 << 20;
inline constexpr size_t kMaxCommandStderrBytes = 4 << 20;
inline constexpr size_t kMaxAgentErrorMessageBytes = 4096;
// kubectl runs for at most 30 s; a duration is refused only when it is absurd.
inline constexpr std::int64_t kMaxCommandDurationMs = 3'600'000;

// Why a command has no exit code: the agent's guard refused it, it ran out of time, its
// output was over the bound, or it could not run at all.
inline constexpr std::string_view kCommandRefused = "refused";
inline constexpr std::string_view kCommandTimedOut = "timeout";
inline constexpr std::string_view kCommandOutputTooLarge = "output_too_large";
inline constexpr std::string_view kCommandFailed = "failed";

struct CommandResult {
  // kCommandRefused, kCommandTimedOut, kCommandOutputTooLarge or kCommandFailed; empty when
  // kubectl ran.
  std::string error_code;
  std::string error_message;
  int exit_code = 0;
  std::string stdout_text;
  std::string stderr_text;
  std::int64_t duration_ms = 0;
};

// {exit_code, stdout, stderr, duration_ms}, or {error: {code, message}, duration_ms}.
json::object EncodeCommandResult(const CommandResult& result);
// The body of a command result, strictly: InvalidArgument naming the field for anything else
// (an unknown field, a wrong type, a value out of bounds, both or neither of exit_code and
// error).
Result<CommandResult> DecodeCommandResult(const json::value& body);
// The outcome fields of `object` (whose path is `path`), which a command result and a cluster
// snapshot's result share: exit_code with stdout and stderr, or error (stdout and stderr
// optional), and duration_ms. Other fields are the caller's to check.
Status DecodeCommandOutcome(const json::object& object, const std::string& path,
                            size_t max_stdout_bytes, size_t max_stderr_bytes, CommandResult& out);

}  // namespace uplink::protocol
