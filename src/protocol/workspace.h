// Workspace execution (docs/protocol.md, "Workspace execution"): what the workspace controller
// (`uplink-agent workspace`) and the console say to each other, and the execution values
// (execution.json) the console writes for the controller and its Helm chart. One definition,
// linked by both ends.
//
// Every call carries `Authorization: Bearer exe_…` (kExecutionCredentialPrefix), the agent's
// User-Agent with role "workspace" and the Uplink-Cluster-UID header, which is required here.
//
// Requests (the console reads them) are strict: unknown fields, wrong types and values out of
// bounds are InvalidArgument naming the field by its path. Replies and execution values (the
// controller reads them) are strict about the fields they know and ignore others, so that a
// newer console can add fields; entries whose id is not one the console mints are skipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::protocol {

// ---- paths and names ------------------------------------------------------------------------
inline constexpr std::string_view kWorkspaceSyncPath = "/api/v1/agent/workspace/sync";
// POST kWorkspaceCommandsPathPrefix + id + kWorkspaceOutputSuffix: a command's output.
inline constexpr std::string_view kWorkspaceCommandsPathPrefix = "/api/v1/agent/workspace/commands/";
inline constexpr std::string_view kWorkspaceOutputSuffix = "/output";
inline constexpr std::string_view kWorkspaceOutputRoute =
    "/api/v1/agent/workspace/commands/{id}/output";
std::string WorkspaceOutputPath(std::string_view command_id);

// The role in the User-Agent and in the connection's liveness.
inline constexpr std::string_view kWorkspaceRole = "workspace";

// Error codes of this API beyond the common ones (protocol/errors.h).
// 409: the output chunk starts past what the console has; the error carries "have".
inline constexpr std::string_view kOutputGapCode = "output_gap";

// ---- ids ------------------------------------------------------------------------------------
// "res_" / "wsc_" and 16 lower-case hexadecimal digits, from 64 random bits: safe in a URL
// path, in a pod name ("ws-res-…") and in a label value.
inline constexpr std::string_view kReservationIdPrefix = "res_";
inline constexpr std::string_view kWorkspaceCommandIdPrefix = "wsc_";
inline constexpr size_t kWorkspaceIdHexDigits = 16;
bool IsReservationId(std::string_view id);
bool IsWorkspaceCommandId(std::string_view id);
std::string NewReservationId();
std::string NewWorkspaceCommandId();

// ---- limits ---------------------------------------------------------------------------------
inline constexpr std::int64_t kMaxSyncWaitSeconds = 55;
inline constexpr size_t kMaxSyncEvents = 256;
inline constexpr size_t kMaxSyncWorkspaces = 1024;
// Reservations in one reply: every one the controller must act on. The console refuses a
// reservation that would go past it, long before capacity in GPUs does.
inline constexpr size_t kMaxSyncReservations = 1024;
inline constexpr size_t kMaxSyncCommands = 16;
inline constexpr size_t kMaxEventKeyBytes = 128;
inline constexpr size_t kMaxEventReasonBytes = 1024;
inline constexpr size_t kMaxHelmReleaseBytes = 53;  // Helm's own bound on a release name
inline constexpr size_t kMaxPodPhaseBytes = 16;
inline constexpr size_t kMaxWorkspaceCodeBytes = 64 << 10;
inline constexpr std::int64_t kMaxWorkspaceCommandTimeoutSeconds = 7 * 24 * 3600;
inline constexpr size_t kMaxOutputChunkBytes = 256 << 10;  // decoded
inline constexpr std::int64_t kDefaultOutputCapBytes = 1 << 20;
inline constexpr std::int64_t kMaxOutputCapBytes = 64 << 20;
inline constexpr size_t kMaxOutputMessageBytes = 4096;
inline constexpr std::int64_t kMaxWorkspaceGpus = 1'000'000;
inline constexpr std::int64_t kMaxWorkspaceCpuMillis = std::int64_t{1} << 40;
inline constexpr std::int64_t kMaxWorkspaceBytes = std::int64_t{1} << 60;
// Request bodies as the console parses them (decompressed), and the reply as the controller
// reads it (16 commands of 64 KiB code, escaped, and 1024 reservations fit).
inline constexpr size_t kMaxSyncRequestBytes = 4 << 20;
inline constexpr size_t kMaxOutputRequestBytes = 1 << 20;
inline constexpr size_t kMaxSyncReplyBytes = 16 << 20;
inline constexpr size_t kMaxWorkspaceBodyDepth = 8;

// ---- states ---------------------------------------------------------------------------------
// A reservation, as the console keeps it.
inline constexpr std::string_view kReservationReserved = "reserved";
inline constexpr std::string_view kReservationProvisioning = "provisioning";
inline constexpr std::string_view kReservationRunning = "running";
inline constexpr std::string_view kReservationStopping = "stopping";
inline constexpr std::string_view kReservationCompleted = "completed";
inline constexpr std::string_view kReservationCancelled = "cancelled";
inline constexpr std::string_view kReservationFailed = "failed";
inline constexpr std::string_view kReservationExpired = "expired";
// The states a controller's event may report: provisioning, running, completed, failed,
// expired.
bool IsWorkspaceEventState(std::string_view state);

// A command: queued → running → exited | timeout | failed | cancelled. The controller reports
// running, exited, timeout and failed.
inline constexpr std::string_view kCommandQueued = "queued";
inline constexpr std::string_view kCommandRunning = "running";
inline constexpr std::string_view kCommandExited = "exited";
inline constexpr std::string_view kCommandTimeout = "timeout";
inline constexpr std::string_view kCommandFailedState = "failed";
inline constexpr std::string_view kCommandCancelled = "cancelled";

inline constexpr std::string_view kShellKind = "shell";
inline constexpr std::string_view kPythonKind = "python";

// What the console wants of a reservation's workspace.
inline constexpr std::string_view kDesiredRunning = "running";
inline constexpr std::string_view kDesiredStopped = "stopped";

// ---- POST kWorkspaceSyncPath ----------------------------------------------------------------
struct WorkspaceEvent {
  std::string key;  // idempotent: the console stores each once ("res_…/running/1")
  std::string reservation_id;
  std::string state;  // IsWorkspaceEventState
  std::string reason;
  WallTime at;
  std::string pod;   // "" when none
  std::string node;  // "" when none
};

struct ObservedWorkspace {
  std::string reservation_id;
  std::string pod;
  std::string phase;  // Pending, Running, Succeeded, Failed or Unknown
  std::string node;   // "" while unscheduled
};

struct WorkspaceSync {
  std::string instance;  // the controller's pod name
  std::string version;
  std::string release;  // the Helm release; "" when not installed by Helm
  std::string namespace_name;
  bool draining = false;
  std::int64_t wait_seconds = 0;
  std::vector<WorkspaceEvent> events;
  std::vector<ObservedWorkspace> workspaces;
};

json::object EncodeWorkspaceSync(const WorkspaceSync& sync);
// Strict. Events must name a valid reservation id (the controller only reports reservations
// the console gave it); an observed workspace whose reservation id is not one is skipped (it
// describes a pod in the cluster, which the controller does not wholly control).
Result<WorkspaceSync> DecodeWorkspaceSync(const json::value& body);

// One reservation the controller must act on. Resources are the reservation's totals.
struct WorkspaceReservation {
  std::string id;
  std::int64_t gpus = 0;
  std::string node;
  std::int64_t cpu_millis = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t ephemeral_storage_bytes = 0;
  WallTime expires_at;
  std::string desired;  // kDesiredRunning or kDesiredStopped
  // The console's state of it (kReservationReserved, ...Provisioning, ...Running or
  // ...Stopping): provisioning or running means a pod was seen. Empty from a console that
  // does not say.
  std::string state;
};

// A command to run in a running reservation's workspace.
struct WorkspaceCommand {
  std::string id;
  std::string reservation_id;
  std::string kind;  // kShellKind or kPythonKind
  std::string code;
  std::int64_t timeout_seconds = 0;
  std::int64_t output_cap_bytes = kDefaultOutputCapBytes;
  // Set by the decoder when the entry has a valid id but is unusable otherwise (an unknown
  // kind, code over the bound, ...): the controller reports the command failed with this
  // message rather than running it or dropping it.
  std::string problem;
};

struct WorkspaceSyncReply {
  std::vector<std::string> acknowledged;  // event keys stored (now or before)
  bool accepting = true;                  // false: execution is disabled for the offer
  std::vector<WorkspaceReservation> reservations;
  std::vector<WorkspaceCommand> commands;
};

json::object EncodeWorkspaceSyncReply(const WorkspaceSyncReply& reply);
// InvalidArgument naming the field for a reply without its arrays, with too many entries or
// with a reservation whose fields are wrong; a reservation or command without a valid id is
// skipped; a command with a valid id and anything else wrong carries `problem`.
Result<WorkspaceSyncReply> DecodeWorkspaceSyncReply(const json::value& body);

// ---- POST WorkspaceOutputPath(id) ----------------------------------------------------------
struct WorkspaceOutput {
  std::int64_t offset = 0;  // where `data` starts in the command's output
  std::string data;         // raw bytes (base64 on the wire), ≤ kMaxOutputChunkBytes
  std::string state;        // running, or final: exited, timeout, failed
  std::optional<int> exit_code;  // exactly when state is exited
  bool truncated = false;        // output beyond the cap was not sent
  std::string message;           // why, for failed (and timeout)
};

json::object EncodeWorkspaceOutput(const WorkspaceOutput& output);
Result<WorkspaceOutput> DecodeWorkspaceOutput(const json::value& body);
bool IsFinalCommandState(std::string_view state);

struct WorkspaceOutputReply {
  std::int64_t have = 0;  // bytes of output the console holds
  bool final = false;     // the console holds a final state
};

json::object EncodeWorkspaceOutputReply(const WorkspaceOutputReply& reply);
// InvalidArgument unless `have` is a whole number from 0 up and `final` a boolean.
Result<WorkspaceOutputReply> DecodeWorkspaceOutputReply(const json::value& body);

// The 409 output_gap error body: {"error": {"code": "output_gap", "message", "have"}}.
json::object EncodeOutputGap(std::int64_t have);
// `have` of an output_gap error body; nullopt for any other body.
std::optional<std::int64_t> DecodeOutputGap(const json::value& body);

// ---- execution.json -------------------------------------------------------------------------
// What the console writes for the offer's owner (POST /api/v1/offers/{id}/execution), which
// `helm upgrade … -f execution.json` passes to the chart and `uplink-agent workspace --config`
// reads: {"execution": {...}} in the chart's camelCase.
inline constexpr size_t kMaxExecutionNodes = 1024;
inline constexpr size_t kMaxExecutionCidrs = 64;
inline constexpr size_t kMaxImageReferenceBytes = 512;
inline constexpr size_t kMaxExecutionValuesBytes = 1 << 20;
inline constexpr std::int64_t kMaxLifetimeSecondsBound = 90 * 24 * 3600;

struct ExecutionValues {
  bool enabled = true;
  // The cluster reference: which offer, connection and cluster these values are for.
  std::string offer_id;
  std::string connection_id;
  std::string cluster_name;
  std::string cluster_uid;
  std::string workspace_image;  // REPOSITORY@sha256:<64 hex>
  bool ssh_enabled = false;
  std::int64_t capacity_gpus = 0;
  std::int64_t max_lifetime_seconds = 0;
  std::vector<std::string> nodes;  // approved node names
  std::string namespace_name;
  // Per GPU, from the review: what the quota and each workspace get.
  std::int64_t cpu_millis_per_gpu = 0;
  std::int64_t memory_bytes_per_gpu = 0;
  std::int64_t ephemeral_storage_bytes_per_gpu = 0;
  // Egress the controller needs: the Kubernetes API and the console over HTTPS.
  std::vector<std::string> kubernetes_api_cidrs;
  std::int64_t kubernetes_api_port = 443;
  std::vector<std::string> console_cidrs;
  std::int64_t console_port = 443;
};

// {"execution": {...}}
json::object EncodeExecutionValues(const ExecutionValues& values);
// The "execution" object of a values file; other top-level keys and unknown keys inside are
// ignored (the chart has its own), known ones are checked: InvalidArgument naming the field
// ("execution.workspaceImage must be pinned by digest ...").
Result<ExecutionValues> DecodeExecutionValues(const json::value& body);

// REPOSITORY@sha256:<64 lower-case hex>.
bool IsImageByDigest(std::string_view reference);
// An IPv4 or IPv6 network in CIDR notation ("10.0.0.0/8", "fd00::/8", "192.0.2.7/32").
bool IsCidr(std::string_view text);

}  // namespace uplink::protocol
