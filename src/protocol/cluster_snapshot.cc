#include "protocol/cluster_snapshot.h"

#include "common/json.h"
#include "protocol/agent_api.h"
#include "protocol/field_reader.h"

namespace uplink::protocol {
namespace {

// Printable ASCII, so that a result's name is safe in any table or log line.
bool IsPrintableAscii(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

Result<std::vector<std::string>> ReadSnapshotArgv(const FieldReader& fields) {
  const json::value* argv = fields.Find("argv");
  std::string path = fields.FieldPath("argv");
  if (!argv) return InvalidArgumentError(path + " is required");
  if (!argv->is_array()) return InvalidArgumentError(path + " must be an array of strings");
  const json::array& list = argv->get_array();
  if (list.empty() || list.size() > kMaxSnapshotArgs) {
    return InvalidArgumentError(path + " must hold 1 to " + std::to_string(kMaxSnapshotArgs) +
                                " strings");
  }
  std::vector<std::string> args;
  args.reserve(list.size());
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
    args.emplace_back(arg);
  }
  if (args.front() != "kubectl") {
    return InvalidArgumentError(path + "[0] must be \"kubectl\"");
  }
  return args;
}

Result<SnapshotResult> ReadSnapshotResult(const json::value& value, const std::string& path) {
  if (!value.is_object()) return InvalidArgumentError(path + " must be an object");
  FieldReader fields(value.get_object(), path);
  SnapshotResult result;
  UPLINK_ASSIGN_OR_RETURN(result.name, fields.RequiredString("name", kMaxSnapshotNameBytes));
  if (result.name.empty() || !IsPrintableAscii(result.name)) {
    return InvalidArgumentError(fields.FieldPath("name") +
                                " must be 1-253 printable ASCII characters, such as "
                                "\"logs/ml/trainer-0\"");
  }
  UPLINK_ASSIGN_OR_RETURN(result.argv, ReadSnapshotArgv(fields));
  UPLINK_RETURN_IF_ERROR(DecodeCommandOutcome(value.get_object(), path, kMaxSnapshotOutputBytes,
                                              kMaxSnapshotOutputBytes, result.outcome));
  UPLINK_ASSIGN_OR_RETURN(std::optional<bool> truncated, fields.Bool("truncated"));
  result.truncated = truncated.value_or(false);
  return result;
}

}  // namespace

json::object EncodeSnapshotResult(const SnapshotResult& result) {
  json::object encoded = EncodeCommandResult(result.outcome);
  if (result.truncated) encoded["truncated"] = true;
  encoded["name"] = result.name;
  encoded["argv"] = json::array(result.argv.begin(), result.argv.end());
  return encoded;
}

json::object EncodeClusterSnapshot(const ClusterSnapshot& snapshot) {
  json::array results;
  results.reserve(snapshot.results.size());
  for (const SnapshotResult& result : snapshot.results) {
    results.push_back(EncodeSnapshotResult(result));
  }
  return json::object{{"kind", kClusterSnapshotKind},
                      {"collected_at", FormatRfc3339(snapshot.collected_at)},
                      {"results", std::move(results)}};
}

bool IsClusterSnapshotPayload(const json::object& payload) {
  const json::value* kind = payload.if_contains("kind");
  return kind && kind->is_string() && kind->get_string() == kClusterSnapshotKind;
}

Result<ClusterSnapshot> DecodeClusterSnapshot(const json::object& payload, std::string_view path) {
  FieldReader fields(payload, std::string(path));
  UPLINK_ASSIGN_OR_RETURN(std::string collected_at,
                          fields.RequiredString("collected_at", kMaxTimeBytes));
  auto time = ParseRfc3339(collected_at);
  if (!time.ok()) {
    return InvalidArgumentError(fields.FieldPath("collected_at") +
                                " must be an RFC 3339 time such as \"2026-11-30T03:20:00Z\"");
  }
  ClusterSnapshot snapshot;
  snapshot.collected_at = *time;
  const json::value* results = fields.Find("results");
  std::string results_path = fields.FieldPath("results");
  if (!results) return InvalidArgumentError(results_path + " is required");
  if (!results->is_array()) return InvalidArgumentError(results_path + " must be an array");
  const json::array& list = results->get_array();
  if (list.size() > kMaxSnapshotResults) {
    return InvalidArgumentError(results_path + " has " + std::to_string(list.size()) +
                                " entries; the limit is " + std::to_string(kMaxSnapshotResults));
  }
  snapshot.results.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    UPLINK_ASSIGN_OR_RETURN(
        SnapshotResult result,
        ReadSnapshotResult(list[i], results_path + "[" + std::to_string(i) + "]"));
    snapshot.results.push_back(std::move(result));
  }
  return snapshot;
}

}  // namespace uplink::protocol
