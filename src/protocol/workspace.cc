#include "protocol/workspace.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

#include "common/crypto.h"
#include "common/json.h"
#include "common/kubernetes_names.h"
#include "protocol/agent_api.h"
#include "protocol/field_reader.h"

namespace uplink::protocol {
namespace {

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool OneOf(std::string_view value, std::initializer_list<std::string_view> allowed) {
  return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

// An event key: 1-128 characters of [A-Za-z0-9._:/-].
bool IsEventKey(std::string_view key) {
  return !key.empty() && key.size() <= kMaxEventKeyBytes &&
         std::all_of(key.begin(), key.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
         });
}

std::string Indexed(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

Result<const json::object*> ObjectAt(const json::value& value, const std::string& path) {
  if (!value.is_object()) return InvalidArgumentError(path + " must be an object");
  return &value.get_object();
}

// The array at `key`; an empty one when absent and not `required`.
Result<const json::array*> ArrayField(const FieldReader& fields, std::string_view key,
                                      size_t max_items, bool required) {
  static const json::array kEmpty;
  const json::value* value = fields.Find(key);
  if (value == nullptr) {
    if (required) return InvalidArgumentError(fields.FieldPath(key) + " is required");
    return &kEmpty;
  }
  if (!value->is_array()) return InvalidArgumentError(fields.FieldPath(key) + " must be an array");
  if (value->get_array().size() > max_items) {
    return InvalidArgumentError(fields.FieldPath(key) + " has " +
                                std::to_string(value->get_array().size()) +
                                " entries; the limit is " + std::to_string(max_items));
  }
  return &value->get_array();
}

Result<std::string> OptionalString(const FieldReader& fields, std::string_view key,
                                   size_t max_bytes) {
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> text, fields.String(key, max_bytes));
  return std::move(text).value_or("");
}

// An object name (pod, node) that is empty or a DNS subdomain.
Result<std::string> OptionalObjectName(const FieldReader& fields, std::string_view key) {
  UPLINK_ASSIGN_OR_RETURN(std::string name, OptionalString(fields, key, kMaxDnsSubdomainBytes));
  if (!name.empty() && !IsDnsSubdomain(name)) {
    return InvalidArgumentError(fields.FieldPath(key) +
                                " must be a Kubernetes object name (lower-case letters, digits, "
                                "'-' and '.')");
  }
  return name;
}

Result<WallTime> RequiredTime(const FieldReader& fields, std::string_view key) {
  UPLINK_ASSIGN_OR_RETURN(std::string text, fields.RequiredString(key, kMaxTimeBytes));
  auto at = ParseRfc3339(text);
  if (!at.ok()) return InvalidArgumentError(fields.FieldPath(key) + " must be an RFC 3339 time");
  return *at;
}

Result<bool> OptionalBool(const FieldReader& fields, std::string_view key, bool fallback) {
  UPLINK_ASSIGN_OR_RETURN(std::optional<bool> flag, fields.Bool(key));
  return flag.value_or(fallback);
}

Result<std::int64_t> OptionalInt(const FieldReader& fields, std::string_view key,
                                 std::int64_t min, std::int64_t max, std::int64_t fallback) {
  if (fields.Find(key) == nullptr) return fallback;
  return fields.RequiredInt(key, min, max);
}

// The id at `key` of an entry, when it is a string `valid` accepts.
std::optional<std::string> IdOf(const json::value& entry, std::string_view key,
                                bool (*valid)(std::string_view)) {
  const json::object* object = entry.if_object();
  const json::value* id = object == nullptr ? nullptr : object->if_contains(key);
  if (id == nullptr || !id->is_string() || !valid(id->get_string())) return std::nullopt;
  return std::string(id->get_string());
}

Result<WorkspaceEvent> DecodeEvent(const json::value& value, const std::string& path) {
  UPLINK_ASSIGN_OR_RETURN(const json::object* object, ObjectAt(value, path));
  FieldReader fields(*object, path);
  UPLINK_RETURN_IF_ERROR(
      fields.OnlyFields({"key", "reservation_id", "state", "reason", "at", "pod", "node"}));
  WorkspaceEvent event;
  UPLINK_ASSIGN_OR_RETURN(event.key, fields.RequiredString("key", kMaxEventKeyBytes));
  if (!IsEventKey(event.key)) {
    return InvalidArgumentError(fields.FieldPath("key") +
                                " must be 1-128 characters of letters, digits and ._:/-");
  }
  UPLINK_ASSIGN_OR_RETURN(event.reservation_id,
                          fields.RequiredString("reservation_id", kMaxEventKeyBytes));
  if (!IsReservationId(event.reservation_id)) {
    return InvalidArgumentError(fields.FieldPath("reservation_id") +
                                " must be a reservation id (res_ and 16 hex digits)");
  }
  UPLINK_ASSIGN_OR_RETURN(event.state, fields.RequiredString("state", kMaxPodPhaseBytes));
  if (!IsWorkspaceEventState(event.state)) {
    return InvalidArgumentError(fields.FieldPath("state") +
                                " must be provisioning, running, completed, failed or expired");
  }
  UPLINK_ASSIGN_OR_RETURN(event.reason, OptionalString(fields, "reason", kMaxEventReasonBytes));
  UPLINK_ASSIGN_OR_RETURN(event.at, RequiredTime(fields, "at"));
  UPLINK_ASSIGN_OR_RETURN(event.pod, OptionalObjectName(fields, "pod"));
  UPLINK_ASSIGN_OR_RETURN(event.node, OptionalObjectName(fields, "node"));
  return event;
}

Result<ObservedWorkspace> DecodeObserved(const json::object& object, const std::string& path) {
  FieldReader fields(object, path);
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"reservation_id", "pod", "phase", "node"}));
  ObservedWorkspace workspace;
  workspace.reservation_id = std::string(object.at("reservation_id").get_string());
  UPLINK_ASSIGN_OR_RETURN(workspace.pod, OptionalObjectName(fields, "pod"));
  if (workspace.pod.empty()) return InvalidArgumentError(fields.FieldPath("pod") + " is required");
  UPLINK_ASSIGN_OR_RETURN(workspace.phase, fields.RequiredString("phase", kMaxPodPhaseBytes));
  if (!OneOf(workspace.phase, {"Pending", "Running", "Succeeded", "Failed", "Unknown"})) {
    return InvalidArgumentError(fields.FieldPath("phase") +
                                " must be Pending, Running, Succeeded, Failed or Unknown");
  }
  UPLINK_ASSIGN_OR_RETURN(workspace.node, OptionalObjectName(fields, "node"));
  return workspace;
}

Result<WorkspaceReservation> DecodeReservation(const json::object& object,
                                               const std::string& path) {
  FieldReader fields(object, path);
  WorkspaceReservation reservation;
  reservation.id = std::string(object.at("id").get_string());
  UPLINK_ASSIGN_OR_RETURN(reservation.gpus, fields.RequiredInt("gpus", 1, kMaxWorkspaceGpus));
  UPLINK_ASSIGN_OR_RETURN(reservation.node, OptionalObjectName(fields, "node"));
  if (reservation.node.empty()) {
    return InvalidArgumentError(fields.FieldPath("node") + " is required");
  }
  UPLINK_ASSIGN_OR_RETURN(reservation.cpu_millis,
                          fields.RequiredInt("cpu_millis", 0, kMaxWorkspaceCpuMillis));
  UPLINK_ASSIGN_OR_RETURN(reservation.memory_bytes,
                          fields.RequiredInt("memory_bytes", 0, kMaxWorkspaceBytes));
  UPLINK_ASSIGN_OR_RETURN(reservation.ephemeral_storage_bytes,
                          fields.RequiredInt("ephemeral_storage_bytes", 0, kMaxWorkspaceBytes));
  UPLINK_ASSIGN_OR_RETURN(reservation.expires_at, RequiredTime(fields, "expires_at"));
  UPLINK_ASSIGN_OR_RETURN(reservation.desired, fields.RequiredString("desired", 16));
  if (!OneOf(reservation.desired, {kDesiredRunning, kDesiredStopped})) {
    return InvalidArgumentError(fields.FieldPath("desired") + " must be running or stopped");
  }
  // Any short text: a state this agent does not know only means no pod is known to have run.
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> state, fields.PlainString("state", 32));
  reservation.state = state.value_or("");
  return reservation;
}

// A command whose id is valid; what else is wrong goes into `problem`.
WorkspaceCommand DecodeCommand(const json::object& object, const std::string& path) {
  FieldReader fields(object, path);
  WorkspaceCommand command;
  command.id = std::string(object.at("id").get_string());
  auto problem = [&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(command.reservation_id,
                            fields.RequiredString("reservation_id", kMaxEventKeyBytes));
    if (!IsReservationId(command.reservation_id)) {
      return InvalidArgumentError(fields.FieldPath("reservation_id") +
                                  " must be a reservation id");
    }
    UPLINK_ASSIGN_OR_RETURN(command.kind, fields.RequiredString("kind", 16));
    if (!OneOf(command.kind, {kShellKind, kPythonKind})) {
      return InvalidArgumentError(fields.FieldPath("kind") + " must be shell or python");
    }
    UPLINK_ASSIGN_OR_RETURN(command.code, fields.RequiredString("code", kMaxWorkspaceCodeBytes));
    UPLINK_ASSIGN_OR_RETURN(
        command.timeout_seconds,
        fields.RequiredInt("timeout_seconds", 1, kMaxWorkspaceCommandTimeoutSeconds));
    UPLINK_ASSIGN_OR_RETURN(command.output_cap_bytes,
                            OptionalInt(fields, "output_cap_bytes", 0, kMaxOutputCapBytes,
                                        kDefaultOutputCapBytes));
    return Status::Ok();
  }();
  if (!problem.ok()) command.problem = problem.message();
  return command;
}

Result<std::vector<std::string>> StringList(const FieldReader& fields, std::string_view key,
                                            size_t max_items, size_t max_bytes,
                                            bool (*valid)(std::string_view),
                                            std::string_view expected) {
  UPLINK_ASSIGN_OR_RETURN(const json::array* items, ArrayField(fields, key, max_items, false));
  std::vector<std::string> out;
  for (size_t i = 0; i < items->size(); ++i) {
    const json::value& item = (*items)[i];
    std::string path = Indexed(fields.FieldPath(key), i);
    if (!item.is_string() || item.get_string().size() > max_bytes || !valid(item.get_string())) {
      return InvalidArgumentError(path + " must be " + std::string(expected));
    }
    out.emplace_back(item.get_string());
  }
  return out;
}

}  // namespace

std::string WorkspaceOutputPath(std::string_view command_id) {
  std::string path(kWorkspaceCommandsPathPrefix);
  path += command_id;
  path += kWorkspaceOutputSuffix;
  return path;
}

bool IsReservationId(std::string_view id) {
  return IsPrefixedHexId(id, kReservationIdPrefix, kWorkspaceIdHexDigits);
}
bool IsWorkspaceCommandId(std::string_view id) {
  return IsPrefixedHexId(id, kWorkspaceCommandIdPrefix, kWorkspaceIdHexDigits);
}
std::string NewReservationId() {
  return NewPrefixedHexId(kReservationIdPrefix, kWorkspaceIdHexDigits);
}
std::string NewWorkspaceCommandId() {
  return NewPrefixedHexId(kWorkspaceCommandIdPrefix, kWorkspaceIdHexDigits);
}

bool IsWorkspaceEventState(std::string_view state) {
  return OneOf(state, {kReservationProvisioning, kReservationRunning, kReservationCompleted,
                       kReservationFailed, kReservationExpired});
}

bool IsFinalCommandState(std::string_view state) {
  return OneOf(state, {kCommandExited, kCommandTimeout, kCommandFailedState, kCommandCancelled});
}

// ---- sync -----------------------------------------------------------------------------------

json::object EncodeWorkspaceSync(const WorkspaceSync& sync) {
  json::array events;
  for (const WorkspaceEvent& event : sync.events) {
    events.push_back(json::object{{"key", event.key},
                                  {"reservation_id", event.reservation_id},
                                  {"state", event.state},
                                  {"reason", event.reason},
                                  {"at", FormatRfc3339(event.at)},
                                  {"pod", event.pod},
                                  {"node", event.node}});
  }
  json::array workspaces;
  for (const ObservedWorkspace& workspace : sync.workspaces) {
    workspaces.push_back(json::object{{"reservation_id", workspace.reservation_id},
                                      {"pod", workspace.pod},
                                      {"phase", workspace.phase},
                                      {"node", workspace.node}});
  }
  return json::object{{"instance", sync.instance},
                      {"version", sync.version},
                      {"release", sync.release},
                      {"namespace", sync.namespace_name},
                      {"draining", sync.draining},
                      {"wait_seconds", sync.wait_seconds},
                      {"events", std::move(events)},
                      {"workspaces", std::move(workspaces)}};
}

Result<WorkspaceSync> DecodeWorkspaceSync(const json::value& body) {
  if (!body.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  FieldReader fields(body.get_object(), "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"instance", "version", "release", "namespace",
                                            "draining", "wait_seconds", "events", "workspaces"}));
  WorkspaceSync sync;
  UPLINK_ASSIGN_OR_RETURN(sync.instance, OptionalString(fields, "instance", kMaxInstanceBytes));
  UPLINK_ASSIGN_OR_RETURN(sync.version, OptionalString(fields, "version", kMaxAgentVersionBytes));
  UPLINK_ASSIGN_OR_RETURN(sync.release, OptionalString(fields, "release", kMaxHelmReleaseBytes));
  if (!sync.release.empty() && !IsDnsSubdomain(sync.release)) {
    return InvalidArgumentError(
        "release must be a Helm release name (lower-case letters, digits, '-' and '.')");
  }
  UPLINK_ASSIGN_OR_RETURN(sync.namespace_name,
                          fields.RequiredString("namespace", kMaxDnsLabelBytes));
  if (!IsDnsLabel(sync.namespace_name)) {
    return InvalidArgumentError("namespace must be a Kubernetes namespace name");
  }
  UPLINK_ASSIGN_OR_RETURN(sync.draining, OptionalBool(fields, "draining", false));
  UPLINK_ASSIGN_OR_RETURN(sync.wait_seconds,
                          OptionalInt(fields, "wait_seconds", 0, kMaxSyncWaitSeconds, 0));
  UPLINK_ASSIGN_OR_RETURN(const json::array* events,
                          ArrayField(fields, "events", kMaxSyncEvents, false));
  for (size_t i = 0; i < events->size(); ++i) {
    UPLINK_ASSIGN_OR_RETURN(WorkspaceEvent event, DecodeEvent((*events)[i], Indexed("events", i)));
    sync.events.push_back(std::move(event));
  }
  UPLINK_ASSIGN_OR_RETURN(const json::array* workspaces,
                          ArrayField(fields, "workspaces", kMaxSyncWorkspaces, false));
  for (size_t i = 0; i < workspaces->size(); ++i) {
    std::string path = Indexed("workspaces", i);
    UPLINK_ASSIGN_OR_RETURN(const json::object* object, ObjectAt((*workspaces)[i], path));
    if (!IdOf((*workspaces)[i], "reservation_id", IsReservationId)) continue;
    UPLINK_ASSIGN_OR_RETURN(ObservedWorkspace workspace, DecodeObserved(*object, path));
    sync.workspaces.push_back(std::move(workspace));
  }
  return sync;
}

json::object EncodeWorkspaceSyncReply(const WorkspaceSyncReply& reply) {
  json::array reservations;
  for (const WorkspaceReservation& reservation : reply.reservations) {
    reservations.push_back(json::object{{"id", reservation.id},
                                        {"gpus", reservation.gpus},
                                        {"node", reservation.node},
                                        {"cpu_millis", reservation.cpu_millis},
                                        {"memory_bytes", reservation.memory_bytes},
                                        {"ephemeral_storage_bytes",
                                         reservation.ephemeral_storage_bytes},
                                        {"expires_at", FormatRfc3339(reservation.expires_at)},
                                        {"desired", reservation.desired},
                                        {"state", reservation.state}});
  }
  json::array commands;
  for (const WorkspaceCommand& command : reply.commands) {
    commands.push_back(json::object{{"id", command.id},
                                    {"reservation_id", command.reservation_id},
                                    {"kind", command.kind},
                                    {"code", command.code},
                                    {"timeout_seconds", command.timeout_seconds},
                                    {"output_cap_bytes", command.output_cap_bytes}});
  }
  return json::object{
      {"acknowledged", json::array(reply.acknowledged.begin(), reply.acknowledged.end())},
      {"accepting", reply.accepting},
      {"reservations", std::move(reservations)},
      {"commands", std::move(commands)}};
}

Result<WorkspaceSyncReply> DecodeWorkspaceSyncReply(const json::value& body) {
  if (!body.is_object()) return InvalidArgumentError("the sync reply must be a JSON object");
  FieldReader fields(body.get_object(), "");
  WorkspaceSyncReply reply;
  UPLINK_ASSIGN_OR_RETURN(reply.acknowledged,
                          StringList(fields, "acknowledged", kMaxSyncEvents, kMaxEventKeyBytes,
                                     IsEventKey, "an event key"));
  UPLINK_ASSIGN_OR_RETURN(reply.accepting, fields.RequiredBool("accepting"));
  UPLINK_ASSIGN_OR_RETURN(const json::array* reservations,
                          ArrayField(fields, "reservations", kMaxSyncReservations, true));
  for (size_t i = 0; i < reservations->size(); ++i) {
    if (!IdOf((*reservations)[i], "id", IsReservationId)) continue;
    UPLINK_ASSIGN_OR_RETURN(WorkspaceReservation reservation,
                            DecodeReservation((*reservations)[i].get_object(),
                                              Indexed("reservations", i)));
    reply.reservations.push_back(std::move(reservation));
  }
  UPLINK_ASSIGN_OR_RETURN(const json::array* commands,
                          ArrayField(fields, "commands", kMaxSyncCommands, true));
  for (size_t i = 0; i < commands->size(); ++i) {
    if (!IdOf((*commands)[i], "id", IsWorkspaceCommandId)) continue;
    reply.commands.push_back(DecodeCommand((*commands)[i].get_object(), Indexed("commands", i)));
  }
  return reply;
}

// ---- output ---------------------------------------------------------------------------------

json::object EncodeWorkspaceOutput(const WorkspaceOutput& output) {
  json::object body{{"offset", output.offset},
                    {"data_base64", Base64Encode(output.data)},
                    {"state", output.state},
                    {"exit_code", nullptr},
                    {"truncated", output.truncated},
                    {"message", output.message}};
  if (output.exit_code) body["exit_code"] = *output.exit_code;
  return body;
}

Result<WorkspaceOutput> DecodeWorkspaceOutput(const json::value& body) {
  if (!body.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  FieldReader fields(body.get_object(), "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields(
      {"offset", "data_base64", "state", "exit_code", "truncated", "message"}));
  WorkspaceOutput output;
  UPLINK_ASSIGN_OR_RETURN(output.offset, fields.RequiredInt("offset", 0, kMaxOutputCapBytes));
  constexpr size_t kMaxChunkBase64Bytes = (kMaxOutputChunkBytes + 2) / 3 * 4;
  UPLINK_ASSIGN_OR_RETURN(std::string encoded,
                          OptionalString(fields, "data_base64", kMaxChunkBase64Bytes));
  auto data = Base64Decode(encoded);
  if (!data.ok()) return InvalidArgumentError("data_base64 must be standard base64");
  output.data = std::move(*data);
  if (output.data.size() > kMaxOutputChunkBytes) {
    return InvalidArgumentError("data_base64 holds more than " +
                                std::to_string(kMaxOutputChunkBytes) + " bytes");
  }
  UPLINK_ASSIGN_OR_RETURN(output.state, fields.RequiredString("state", 16));
  if (!OneOf(output.state, {kCommandRunning, kCommandExited, kCommandTimeout,
                            kCommandFailedState})) {
    return InvalidArgumentError("state must be running, exited, timeout or failed");
  }
  const json::value* exit_code = fields.Find("exit_code");
  const bool has_exit_code = exit_code != nullptr && !exit_code->is_null();
  if (output.state == kCommandExited) {
    UPLINK_ASSIGN_OR_RETURN(std::int64_t code, fields.RequiredInt("exit_code", 0, 255));
    output.exit_code = static_cast<int>(code);
  } else if (has_exit_code) {
    return InvalidArgumentError("exit_code is only for state exited; send null");
  }
  UPLINK_ASSIGN_OR_RETURN(output.truncated, OptionalBool(fields, "truncated", false));
  UPLINK_ASSIGN_OR_RETURN(output.message,
                          OptionalString(fields, "message", kMaxOutputMessageBytes));
  return output;
}

json::object EncodeWorkspaceOutputReply(const WorkspaceOutputReply& reply) {
  return json::object{{"have", reply.have}, {"final", reply.final}};
}

Result<WorkspaceOutputReply> DecodeWorkspaceOutputReply(const json::value& body) {
  if (!body.is_object()) return InvalidArgumentError("the output reply must be a JSON object");
  FieldReader fields(body.get_object(), "");
  WorkspaceOutputReply reply;
  UPLINK_ASSIGN_OR_RETURN(reply.have, fields.RequiredInt("have", 0, kMaxOutputCapBytes));
  UPLINK_ASSIGN_OR_RETURN(reply.final, fields.RequiredBool("final"));
  return reply;
}

json::object EncodeOutputGap(std::int64_t have) {
  return json::object{
      {"error", json::object{{"code", kOutputGapCode},
                             {"message", "the chunk starts past the " + std::to_string(have) +
                                             " bytes the console has; resend from there"},
                             {"have", have}}}};
}

std::optional<std::int64_t> DecodeOutputGap(const json::value& body) {
  const json::object* object = body.if_object();
  const json::value* error = object == nullptr ? nullptr : object->if_contains("error");
  const json::object* fields = error == nullptr ? nullptr : error->if_object();
  if (fields == nullptr) return std::nullopt;
  const json::value* code = fields->if_contains("code");
  const json::value* have = fields->if_contains("have");
  if (code == nullptr || !code->is_string() || code->get_string() != kOutputGapCode ||
      have == nullptr || !have->is_int64() || have->get_int64() < 0) {
    return std::nullopt;
  }
  return have->get_int64();
}

// ---- execution.json -------------------------------------------------------------------------

bool IsImageByDigest(std::string_view reference) {
  constexpr std::string_view kDigest = "@sha256:";
  size_t at = reference.find(kDigest);
  if (at == 0 || at == std::string_view::npos || reference.size() > kMaxImageReferenceBytes) {
    return false;
  }
  std::string_view repository = reference.substr(0, at);
  std::string_view hex = reference.substr(at + kDigest.size());
  return hex.size() == 64 && std::all_of(hex.begin(), hex.end(), IsLowerHex) &&
         std::all_of(repository.begin(), repository.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '.' || c == '_' ||
                  c == '/' || c == '-' || c == ':';
         });
}

bool IsCidr(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos || text.size() > 64) return false;
  std::string address(text.substr(0, slash));
  std::string_view bits = text.substr(slash + 1);
  int prefix = -1;
  auto [end, error] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
  if (error != std::errc() || end != bits.data() + bits.size() || bits.empty() ||
      (bits.size() > 1 && bits[0] == '0')) {
    return false;
  }
  unsigned char buffer[16];
  if (inet_pton(AF_INET, address.c_str(), buffer) == 1) return prefix >= 0 && prefix <= 32;
  if (inet_pton(AF_INET6, address.c_str(), buffer) == 1) return prefix >= 0 && prefix <= 128;
  return false;
}

json::object EncodeExecutionValues(const ExecutionValues& values) {
  return json::object{
      {"execution",
       json::object{
           {"enabled", values.enabled},
           {"cluster",
            json::object{{"offerId", values.offer_id},
                         {"connectionId", values.connection_id},
                         {"name", values.cluster_name},
                         {"uid", values.cluster_uid}}},
           {"workspaceImage", values.workspace_image},
           {"sshEnabled", values.ssh_enabled},
           {"capacityGpus", values.capacity_gpus},
           {"maxLifetimeSeconds", values.max_lifetime_seconds},
           {"nodes", json::array(values.nodes.begin(), values.nodes.end())},
           {"namespace", values.namespace_name},
           {"resourcesPerGpu",
            json::object{{"cpuMillis", values.cpu_millis_per_gpu},
                         {"memoryBytes", values.memory_bytes_per_gpu},
                         {"ephemeralStorageBytes", values.ephemeral_storage_bytes_per_gpu}}},
           {"kubernetesApi",
            json::object{{"cidrs", json::array(values.kubernetes_api_cidrs.begin(),
                                               values.kubernetes_api_cidrs.end())},
                         {"port", values.kubernetes_api_port}}},
           {"console", json::object{{"cidrs", json::array(values.console_cidrs.begin(),
                                                          values.console_cidrs.end())},
                                    {"port", values.console_port}}}}}};
}

Result<ExecutionValues> DecodeExecutionValues(const json::value& body) {
  const json::object* top = body.if_object();
  const json::value* execution = top == nullptr ? nullptr : top->if_contains("execution");
  if (execution == nullptr) {
    return InvalidArgumentError("the values have no \"execution\" object; use the execution.json "
                                "the console wrote for the offer");
  }
  UPLINK_ASSIGN_OR_RETURN(const json::object* object, ObjectAt(*execution, "execution"));
  FieldReader fields(*object, "execution");
  ExecutionValues values;
  UPLINK_ASSIGN_OR_RETURN(values.enabled, fields.RequiredBool("enabled"));
  if (const json::value* cluster = fields.Find("cluster")) {
    std::string path = fields.FieldPath("cluster");
    UPLINK_ASSIGN_OR_RETURN(const json::object* cluster_object, ObjectAt(*cluster, path));
    FieldReader cluster_fields(*cluster_object, path);
    UPLINK_ASSIGN_OR_RETURN(values.offer_id, OptionalString(cluster_fields, "offerId", 64));
    UPLINK_ASSIGN_OR_RETURN(values.connection_id,
                            OptionalString(cluster_fields, "connectionId", 64));
    UPLINK_ASSIGN_OR_RETURN(values.cluster_name, OptionalString(cluster_fields, "name", 253));
    UPLINK_ASSIGN_OR_RETURN(values.cluster_uid,
                            OptionalString(cluster_fields, "uid", kMaxClusterUidBytes));
  }
  UPLINK_ASSIGN_OR_RETURN(values.workspace_image,
                          fields.RequiredString("workspaceImage", kMaxImageReferenceBytes));
  if (!IsImageByDigest(values.workspace_image)) {
    return InvalidArgumentError("execution.workspaceImage must be pinned by digest "
                                "(REPOSITORY@sha256:<64 hex digits>)");
  }
  UPLINK_ASSIGN_OR_RETURN(values.ssh_enabled, OptionalBool(fields, "sshEnabled", false));
  UPLINK_ASSIGN_OR_RETURN(values.capacity_gpus,
                          fields.RequiredInt("capacityGpus", 1, kMaxWorkspaceGpus));
  UPLINK_ASSIGN_OR_RETURN(values.max_lifetime_seconds,
                          fields.RequiredInt("maxLifetimeSeconds", 60, kMaxLifetimeSecondsBound));
  UPLINK_ASSIGN_OR_RETURN(values.nodes,
                          StringList(fields, "nodes", kMaxExecutionNodes, kMaxDnsSubdomainBytes,
                                     IsDnsSubdomain, "a node name"));
  if (values.nodes.empty()) {
    return InvalidArgumentError("execution.nodes must name at least one approved node");
  }
  UPLINK_ASSIGN_OR_RETURN(values.namespace_name,
                          fields.RequiredString("namespace", kMaxDnsLabelBytes));
  if (!IsDnsLabel(values.namespace_name)) {
    return InvalidArgumentError("execution.namespace must be a Kubernetes namespace name");
  }
  if (const json::value* per_gpu = fields.Find("resourcesPerGpu")) {
    std::string path = fields.FieldPath("resourcesPerGpu");
    UPLINK_ASSIGN_OR_RETURN(const json::object* per_gpu_object, ObjectAt(*per_gpu, path));
    FieldReader per_gpu_fields(*per_gpu_object, path);
    UPLINK_ASSIGN_OR_RETURN(values.cpu_millis_per_gpu,
                            per_gpu_fields.RequiredInt("cpuMillis", 0, kMaxWorkspaceCpuMillis));
    UPLINK_ASSIGN_OR_RETURN(values.memory_bytes_per_gpu,
                            per_gpu_fields.RequiredInt("memoryBytes", 0, kMaxWorkspaceBytes));
    UPLINK_ASSIGN_OR_RETURN(
        values.ephemeral_storage_bytes_per_gpu,
        per_gpu_fields.RequiredInt("ephemeralStorageBytes", 0, kMaxWorkspaceBytes));
  }
  for (auto [key, cidrs, port] :
       {std::tuple{"kubernetesApi", &values.kubernetes_api_cidrs, &values.kubernetes_api_port},
        std::tuple{"console", &values.console_cidrs, &values.console_port}}) {
    const json::value* egress = fields.Find(key);
    if (egress == nullptr) continue;
    std::string path = fields.FieldPath(key);
    UPLINK_ASSIGN_OR_RETURN(const json::object* egress_object, ObjectAt(*egress, path));
    FieldReader egress_fields(*egress_object, path);
    UPLINK_ASSIGN_OR_RETURN(*cidrs, StringList(egress_fields, "cidrs", kMaxExecutionCidrs, 64,
                                               IsCidr, "a network in CIDR notation"));
    UPLINK_ASSIGN_OR_RETURN(*port, OptionalInt(egress_fields, "port", 1, 65535, 443));
  }
  return values;
}

}  // namespace uplink::protocol
