#include "protocol/commands.h"

#include <algorithm>
#include <tuple>

#include "common/json.h"
#include "protocol/agent_api.h"
#include "protocol/field_reader.h"

namespace uplink::protocol {
namespace {

constexpr std::string_view kAgentErrorCodes[] = {kCommandRefused, kCommandTimedOut,
                                                 kCommandOutputTooLarge, kCommandFailed};
constexpr std::int64_t kMaxExitCode = 255;
constexpr size_t kMaxErrorCodeBytes = 32;

}  // namespace

json::object EncodeCommandPoll(const CommandPoll& poll) {
  return json::object{{"agent_instance", poll.agent_instance},
                      {"wait_seconds", poll.wait_seconds},
                      {"max_commands", poll.max_commands}};
}

Result<CommandPoll> DecodeCommandPoll(const json::object& body) {
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"agent_instance", "wait_seconds", "max_commands"}));
  CommandPoll poll;
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> instance,
                          fields.PlainString("agent_instance", kMaxInstanceBytes));
  poll.agent_instance = instance.value_or("");
  if (fields.Find("wait_seconds")) {
    UPLINK_ASSIGN_OR_RETURN(poll.wait_seconds,
                            fields.RequiredInt("wait_seconds", 0, kMaxPollWaitSeconds));
  }
  if (fields.Find("max_commands")) {
    UPLINK_ASSIGN_OR_RETURN(poll.max_commands,
                            fields.RequiredInt("max_commands", 1, kMaxPollCommands));
  }
  return poll;
}

json::object EncodePollReply(const PollReply& reply) {
  json::array commands;
  for (const PolledCommand& command : reply.commands) {
    commands.push_back(json::object{{"id", command.id},
                                    {"argv", json::array(command.argv.begin(), command.argv.end())},
                                    {"timeout_seconds", command.timeout_seconds}});
  }
  json::object body{{"commands", std::move(commands)}};
  if (reply.expires_at) body["expires_at"] = FormatRfc3339(*reply.expires_at);
  return body;
}

Result<PollReply> DecodePollReply(const json::value& body) {
  const json::object* object = body.if_object();
  const json::value* commands = object == nullptr ? nullptr : object->if_contains("commands");
  const json::array* entries = commands == nullptr ? nullptr : commands->if_array();
  if (entries == nullptr) return InvalidArgumentError("the poll reply has no commands array");
  if (entries->size() > static_cast<size_t>(kMaxPollCommands)) {
    return InvalidArgumentError("the poll reply holds more than " +
                                std::to_string(kMaxPollCommands) + " commands");
  }
  PollReply reply;
  for (const json::value& entry : *entries) {
    const json::object* command = entry.if_object();
    const json::value* id = command == nullptr ? nullptr : command->if_contains("id");
    if (id == nullptr || !id->is_string() || !IsCommandId(id->get_string())) continue;
    PolledCommand polled{std::string(id->get_string()), {}, kCommandTimeoutSeconds};
    const json::value* argv = command->if_contains("argv");
    const json::array* items = argv == nullptr ? nullptr : argv->if_array();
    if (items != nullptr && !items->empty() && items->size() <= kMaxCommandArgs &&
        std::all_of(items->begin(), items->end(), [](const json::value& item) {
          return item.is_string() && item.get_string().size() <= kMaxCommandArgBytes;
        })) {
      for (const json::value& item : *items) polled.argv.emplace_back(item.get_string());
    }
    if (const json::value* timeout = command->if_contains("timeout_seconds");
        timeout != nullptr && timeout->is_int64() && timeout->get_int64() > 0) {
      polled.timeout_seconds = timeout->get_int64();
    }
    reply.commands.push_back(std::move(polled));
  }
  if (const json::value* expires = object->if_contains("expires_at");
      expires != nullptr && expires->is_string()) {
    if (auto at = ParseRfc3339(expires->get_string()); at.ok()) reply.expires_at = *at;
  }
  return reply;
}

json::object EncodeCommandResult(const CommandResult& result) {
  if (!result.error_code.empty()) {
    return json::object{
        {"error", json::object{{"code", result.error_code}, {"message", result.error_message}}},
        {"duration_ms", result.duration_ms}};
  }
  return json::object{{"exit_code", result.exit_code},
                      {"stdout", result.stdout_text},
                      {"stderr", result.stderr_text},
                      {"duration_ms", result.duration_ms}};
}

Status DecodeCommandOutcome(const json::object& object, const std::string& path,
                            size_t max_stdout_bytes, size_t max_stderr_bytes, CommandResult& out) {
  FieldReader fields(object, path);
  const json::value* error = fields.Find("error");
  const bool has_exit_code = fields.Find("exit_code") != nullptr;
  if (error && has_exit_code) {
    return InvalidArgumentError(fields.FieldPath("error") + " and " +
                                fields.FieldPath("exit_code") +
                                " exclude each other: a process that ran has an exit code, one "
                                "that did not has an error");
  }
  if (!error && !has_exit_code) {
    return InvalidArgumentError(fields.FieldPath("exit_code") + " (or " +
                                fields.FieldPath("error") + ") is required");
  }
  if (error) {
    if (!error->is_object()) {
      return InvalidArgumentError(fields.FieldPath("error") + " must be an object");
    }
    FieldReader error_fields(error->get_object(), fields.FieldPath("error"));
    UPLINK_RETURN_IF_ERROR(error_fields.OnlyFields({"code", "message"}));
    UPLINK_ASSIGN_OR_RETURN(out.error_code,
                            error_fields.RequiredString("code", kMaxErrorCodeBytes));
    bool known = false;
    for (std::string_view code : kAgentErrorCodes) known = known || out.error_code == code;
    if (!known) {
      return InvalidArgumentError(error_fields.FieldPath("code") +
                                  " must be refused, timeout, output_too_large or failed");
    }
    UPLINK_ASSIGN_OR_RETURN(out.error_message,
                            error_fields.RequiredString("message", kMaxAgentErrorMessageBytes));
  } else {
    UPLINK_ASSIGN_OR_RETURN(std::int64_t exit_code,
                            fields.RequiredInt("exit_code", 0, kMaxExitCode));
    out.exit_code = static_cast<int>(exit_code);
  }
  for (auto [key, max_bytes, text] : {std::tuple{"stdout", max_stdout_bytes, &out.stdout_text},
                                      std::tuple{"stderr", max_stderr_bytes, &out.stderr_text}}) {
    UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> value, fields.String(key, max_bytes));
    if (!value && !error) return InvalidArgumentError(fields.FieldPath(key) + " is required");
    *text = std::move(value).value_or("");
  }
  UPLINK_ASSIGN_OR_RETURN(out.duration_ms,
                          fields.RequiredInt("duration_ms", 0, kMaxCommandDurationMs));
  return Status::Ok();
}

Result<CommandResult> DecodeCommandResult(const json::value& body) {
  if (!body.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  FieldReader fields(body.get_object(), "");
  UPLINK_RETURN_IF_ERROR(
      fields.OnlyFields({"exit_code", "stdout", "stderr", "duration_ms", "error"}));
  CommandResult result;
  UPLINK_RETURN_IF_ERROR(DecodeCommandOutcome(body.get_object(), "", kMaxCommandStdoutBytes,
                                              kMaxCommandStderrBytes, result));
  return result;
}

}  // namespace uplink::protocol
