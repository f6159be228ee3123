#include "console/api/kubectl_results.h"

#include <optional>
#include <string>
#include <tuple>

#include "common/text.h"
#include "console/api/json_fields.h"

namespace uplink::console {
namespace {

constexpr std::string_view kAgentErrorCodes[] = {"refused", "timeout", "output_too_large",
                                                 "failed"};
constexpr std::int64_t kMaxExitCode = 255;
constexpr size_t kMaxErrorCodeBytes = 32;
constexpr size_t kMaxTimeBytes = 64;

struct OutputLimits {
  size_t stdout_bytes;
  size_t stderr_bytes;
};

// exit_code with stdout and stderr, or error (with optional stdout and stderr), and
// duration_ms: what a command result and a snapshot result share.
Status ReadOutcome(const FieldReader& fields, const OutputLimits& limits, CommandResult& out) {
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
  for (auto [key, max_bytes, text] :
       {std::tuple{"stdout", limits.stdout_bytes, &out.stdout_text},
        std::tuple{"stderr", limits.stderr_bytes, &out.stderr_text}}) {
    UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> value, fields.String(key, max_bytes));
    if (!value && !error) return InvalidArgumentError(fields.FieldPath(key) + " is required");
    *text = std::move(value).value_or("");
  }
  UPLINK_ASSIGN_OR_RETURN(out.duration_ms,
                          fields.RequiredInt("duration_ms", 0, kMaxCommandDurationMs));
  return Status::Ok();
}

// Printable ASCII, so that a result's name is safe in any table or log line.
bool IsPrintableAscii(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

Status ReadSnapshotArgv(const FieldReader& fields) {
  const json::value* argv = fields.Find("argv");
  std::string path = fields.FieldPath("argv");
  if (!argv) return InvalidArgumentError(path + " is required");
  if (!argv->is_array()) return InvalidArgumentError(path + " must be an array of strings");
  const json::array& list = argv->get_array();
  if (list.empty() || list.size() > kMaxSnapshotArgs) {
    return InvalidArgumentError(path + " must hold 1 to " + std::to_string(kMaxSnapshotArgs) +
                                " strings");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    std::string item = path + "[" + std::to_string(i) + "]";
    if (!list[i].is_string()) return InvalidArgumentError(item + " must be a string");
    std::string_view arg = list[i].get_string();
    if (arg.size() > kMaxSnapshotArgBytes) {
      return InvalidArgumentError(item + " is " + std::to_string(arg.size()) +
                                  " bytes long; the limit is " +
                                  std::to_string(kMaxSnapshotArgBytes));
    }
    if (arg.find('\0') != std::string_view::npos) {
      return InvalidArgumentError(item + " must not contain NUL");
    }
  }
  if (list[0].get_string() != "kubectl") {
    return InvalidArgumentError(path + "[0] must be \"kubectl\"");
  }
  return Status::Ok();
}

Status ReadSnapshotResult(const json::value& value, const std::string& path) {
  if (!value.is_object()) return InvalidArgumentError(path + " must be an object");
  FieldReader fields(value.get_object(), path);
  UPLINK_ASSIGN_OR_RETURN(std::string name, fields.RequiredString("name", kMaxSnapshotNameBytes));
  if (name.empty() || !IsPrintableAscii(name)) {
    return InvalidArgumentError(fields.FieldPath("name") +
                                " must be 1-253 printable ASCII characters, such as "
                                "\"logs/ml/trainer-0\"");
  }
  UPLINK_RETURN_IF_ERROR(ReadSnapshotArgv(fields));
  CommandResult outcome;
  UPLINK_RETURN_IF_ERROR(
      ReadOutcome(fields, OutputLimits{kMaxSnapshotOutputBytes, kMaxSnapshotOutputBytes}, outcome));
  return fields.Bool("truncated").status();
}

}  // namespace

Result<CommandResult> ParseCommandResult(const json::value& body) {
  if (!body.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  FieldReader fields(body.get_object(), "");
  UPLINK_RETURN_IF_ERROR(
      fields.OnlyFields({"exit_code", "stdout", "stderr", "duration_ms", "error"}));
  CommandResult result;
  UPLINK_RETURN_IF_ERROR(
      ReadOutcome(fields, OutputLimits{kMaxCommandStdoutBytes, kMaxCommandStderrBytes}, result));
  return result;
}

bool IsClusterSnapshotPayload(const json::object& payload) {
  const json::value* kind = payload.if_contains("kind");
  return kind && kind->is_string() && kind->get_string() == kClusterSnapshotKind;
}

Result<WallTime> ParseClusterSnapshot(const json::object& payload, std::string_view path) {
  FieldReader fields(payload, std::string(path));
  UPLINK_ASSIGN_OR_RETURN(std::string collected_at,
                          fields.RequiredString("collected_at", kMaxTimeBytes));
  auto time = ParseRfc3339(collected_at);
  if (!time.ok()) {
    return InvalidArgumentError(fields.FieldPath("collected_at") +
                                " must be an RFC 3339 time such as \"2026-11-30T03:20:00Z\"");
  }
  const json::value* results = fields.Find("results");
  std::string results_path = fields.FieldPath("results");
  if (!results) return InvalidArgumentError(results_path + " is required");
  if (!results->is_array()) return InvalidArgumentError(results_path + " must be an array");
  const json::array& list = results->get_array();
  if (list.size() > kMaxSnapshotResults) {
    return InvalidArgumentError(results_path + " has " + std::to_string(list.size()) +
                                " entries; the limit is " + std::to_string(kMaxSnapshotResults));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    UPLINK_RETURN_IF_ERROR(
        ReadSnapshotResult(list[i], results_path + "[" + std::to_string(i) + "]"));
  }
  return *time;
}

}  // namespace uplink::console
