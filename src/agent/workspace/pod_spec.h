// The workspace Pod, built from the execution configuration and one reservation: a pure
// function, so that every guarantee of docs/security.md ("Workspace pods") is checked by a
// unit test and by the chart's admission policy tests against the same object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agent/workspace/config.h"
#include "common/json.h"
#include "common/time.h"
#include "protocol/workspace.h"

namespace uplink::agent::workspace {

// Labels and annotations the controller puts on its pods, and selects them by.
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kManagedByValue = "uplink-workspace";
inline constexpr std::string_view kReservationLabel = "uplink.dev/reservation";
inline constexpr std::string_view kExpiresAtAnnotation = "uplink.dev/expires-at";
inline constexpr std::string_view kWorkspaceSelector =
    "app.kubernetes.io/managed-by=uplink-workspace";
inline constexpr std::string_view kContainerName = "workspace";
inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";
// Where commands run and their markers live (the scratch emptyDir).
inline constexpr std::string_view kScratchPath = "/scratch";
// Seconds a stopped workspace gets between SIGTERM and SIGKILL.
inline constexpr std::int64_t kTerminationGraceSeconds = 5;

// What the console wants of a reservation's workspace (the sync reply's reservations).
using DesiredReservation = protocol::WorkspaceReservation;

// "ws-res-0123456789abcdef" for "res_0123456789abcdef": a valid pod name from an id.
std::string PodNameFor(std::string_view reservation_id);

// The Pod object to create. Fails (InvalidArgument, saying why) when the reservation cannot be
// run under this configuration: a node that is not approved, no time left, resources out of
// bounds.
Result<json::object> BuildWorkspacePod(const ExecutionConfig& config,
                                       const DesiredReservation& reservation, WallTime now);

// The seconds activeDeadlineSeconds gets: the time left until the reservation expires,
// rounded up, at most the maximum lifetime; nullopt when no time is left.
std::optional<std::int64_t> ActiveDeadlineSeconds(const ExecutionConfig& config,
                                                  WallTime expires_at, WallTime now);

}  // namespace uplink::agent::workspace
