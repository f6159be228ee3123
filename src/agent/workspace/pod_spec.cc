#include "agent/workspace/pod_spec.h"

#include <algorithm>

#include "common/json.h"

namespace uplink::agent::workspace {
namespace {

constexpr std::int64_t kWorkspaceUid = 1000;
// Bounds a reservation's resources are checked against before anything is created.
constexpr std::int64_t kMaxCpuMillis = 1024ll * 1000;
constexpr std::int64_t kMaxBytes = 1ll << 50;  // 1 PiB

// Keeps the container alive until it is told to stop, and stops at once when told: PID 1 of a
// container ignores SIGTERM unless it traps it.
constexpr std::string_view kHoldCommand = "trap 'exit 0' TERM; sleep infinity & wait";

json::object Resources(const DesiredReservation& r) {
  json::object amounts{{"cpu", std::to_string(r.cpu_millis) + "m"},
                       {"memory", std::to_string(r.memory_bytes)},
                       {"ephemeral-storage", std::to_string(r.ephemeral_storage_bytes)}};
  if (r.gpus > 0) amounts[kGpuResource] = std::to_string(r.gpus);
  // Requests equal to limits: the Guaranteed class, and nothing borrowed from neighbours.
  return json::object{{"requests", amounts}, {"limits", amounts}};
}

}  // namespace

std::string PodNameFor(std::string_view reservation_id) {
  std::string name = "ws-" + std::string(reservation_id);
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::optional<std::int64_t> ActiveDeadlineSeconds(const ExecutionConfig& config,
                                                  WallTime expires_at, WallTime now) {
  if (expires_at <= now) return std::nullopt;
  std::int64_t left = std::chrono::ceil<std::chrono::seconds>(expires_at - now).count();
  return std::min(left, config.max_lifetime_seconds);
}

Result<json::object> BuildWorkspacePod(const ExecutionConfig& config,
                                       const DesiredReservation& r, WallTime now) {
  if (!config.IsApprovedNode(r.node)) {
    return InvalidArgumentError("node " + r.node +
                                " is not an approved node of the execution configuration");
  }
  if (r.gpus < 0 || r.gpus > config.capacity_gpus) {
    return InvalidArgumentError(std::to_string(r.gpus) + " GPUs is more than the capacity limit (" +
                                std::to_string(config.capacity_gpus) + ")");
  }
  if (r.cpu_millis <= 0 || r.cpu_millis > kMaxCpuMillis || r.memory_bytes <= 0 ||
      r.memory_bytes > kMaxBytes || r.ephemeral_storage_bytes <= config.tmp_size_bytes ||
      r.ephemeral_storage_bytes > kMaxBytes) {
    return InvalidArgumentError(
        "the reservation's CPU, memory or ephemeral storage is out of bounds (ephemeral storage "
        "must be more than /tmp's " + std::to_string(config.tmp_size_bytes) + " bytes)");
  }
  std::optional<std::int64_t> deadline = ActiveDeadlineSeconds(config, r.expires_at, now);
  if (!deadline) return InvalidArgumentError("the reservation has expired");

  // /tmp has its fixed size; scratch gets the rest, so both together stay within the limit.
  const std::int64_t scratch_bytes = r.ephemeral_storage_bytes - config.tmp_size_bytes;
  json::object container{
      {"name", kContainerName},
      {"image", config.workspace_image},
      {"imagePullPolicy", "IfNotPresent"},
      {"command", json::array{"sh", "-c", kHoldCommand}},
      {"workingDir", kScratchPath},
      {"resources", Resources(r)},
      {"securityContext",
       json::object{{"runAsNonRoot", true},
                    {"runAsUser", kWorkspaceUid},
                    {"runAsGroup", kWorkspaceUid},
                    {"privileged", false},
                    {"allowPrivilegeEscalation", false},
                    {"readOnlyRootFilesystem", true},
                    {"capabilities", json::object{{"drop", json::array{"ALL"}}}},
                    {"seccompProfile", json::object{{"type", "RuntimeDefault"}}}}},
      {"volumeMounts", json::array{json::object{{"name", "scratch"}, {"mountPath", kScratchPath}},
                                   json::object{{"name", "tmp"}, {"mountPath", "/tmp"}}}}};
  json::object spec{
      {"nodeName", r.node},
      {"restartPolicy", "Never"},
      {"activeDeadlineSeconds", *deadline},
      {"terminationGracePeriodSeconds", kTerminationGraceSeconds},
      {"automountServiceAccountToken", false},
      {"enableServiceLinks", false},
      {"hostNetwork", false},
      {"hostPID", false},
      {"hostIPC", false},
      {"priorityClassName", config.priority_class_name},
      {"securityContext",
       json::object{{"runAsNonRoot", true},
                    {"runAsUser", kWorkspaceUid},
                    {"runAsGroup", kWorkspaceUid},
                    {"fsGroup", kWorkspaceUid},
                    {"seccompProfile", json::object{{"type", "RuntimeDefault"}}}}},
      {"containers", json::array{std::move(container)}},
      {"volumes",
       json::array{
           json::object{{"name", "scratch"},
                        {"emptyDir", json::object{{"sizeLimit", std::to_string(scratch_bytes)}}}},
           json::object{{"name", "tmp"},
                        {"emptyDir", json::object{{"sizeLimit",
                                                   std::to_string(config.tmp_size_bytes)}}}}}}};
  if (!config.runtime_class_name.empty()) spec["runtimeClassName"] = config.runtime_class_name;
  if (!config.host_users) spec["hostUsers"] = false;

  return json::object{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       json::object{{"name", PodNameFor(r.id)},
                    {"namespace", config.namespace_name},
                    {"labels", json::object{{kManagedByLabel, kManagedByValue},
                                            {kReservationLabel, r.id}}},
                    {"annotations",
                     json::object{{kExpiresAtAnnotation, FormatRfc3339(r.expires_at)}}}}},
      {"spec", std::move(spec)}};
}

}  // namespace uplink::agent::workspace
