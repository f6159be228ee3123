// What a user sees of a connection: the token's status, the agents' liveness, the newest
// handover, recent security events, the inventory and the upload streams, as one JSON object.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/time.h"
#include "console/store/store.h"

namespace uplink::console {

// The token's status. Revoked wins over expired, which wins over anything reports say.
enum class ConnectionStatus { kNever, kActive, kStale, kExpired, kRevoked };
inline constexpr ConnectionStatus kAllConnectionStatuses[] = {
    ConnectionStatus::kNever, ConnectionStatus::kActive, ConnectionStatus::kStale,
    ConnectionStatus::kExpired, ConnectionStatus::kRevoked};

// Whether the connection's agents are calling right now, from the last accepted call of any
// role (Connection::last_seen_at): waiting before the first one.
enum class Liveness { kWaiting, kConnected, kStale, kOffline };
inline constexpr Liveness kAllLiveness[] = {Liveness::kWaiting, Liveness::kConnected,
                                            Liveness::kStale, Liveness::kOffline};

enum class HandoverStatus { kPending, kRedeemed, kExpired, kSuperseded };

std::string_view ConnectionStatusName(ConnectionStatus status);
std::string_view LivenessName(Liveness liveness);
std::string_view HandoverStatusName(HandoverStatus status);

inline constexpr std::chrono::minutes kDefaultActiveWindow{10};

struct StatusThresholds {
  std::chrono::milliseconds stale_after{90'000};
  std::chrono::milliseconds offline_after{150'000};
};

// `active` when the last agent call is within `active_window`, `stale` when older, `never`
// without one.
ConnectionStatus ComputeStatus(const Connection& connection, WallTime now,
                               std::chrono::milliseconds active_window);
ConnectionStatus ComputeStatus(const ConnectionLifecycle& lifecycle, WallTime now,
                               std::chrono::milliseconds active_window);

Liveness ComputeLiveness(const Connection& connection, WallTime now,
                         const StatusThresholds& thresholds);
// The same rule for one agent (or anything else) last seen at `last_seen_at`.
Liveness ComputeLiveness(std::optional<WallTime> last_seen_at, WallTime now,
                         const StatusThresholds& thresholds);

// The token's expiry is shown as "expires in N days" from this long before it.
inline constexpr std::chrono::hours kExpiryWarning{14 * 24};

// Whole days left before the token expires, rounded up (1-14), when it expires within
// kExpiryWarning and is neither revoked nor expired; nullopt otherwise.
std::optional<std::int64_t> ExpiresInDays(const Connection& connection, WallTime now);

// While a handover is pending the connection holds a placeholder token whose hash nobody can
// match; its prefix is "agt_" plus the code's lookup characters, so the view can tell that no
// rotate replaced the placeholder since the code was made.
std::string PlaceholderTokenPrefix(std::string_view handover_lookup_prefix);

// Redeemed, else superseded (the connection was revoked, or a later rotate replaced the
// placeholder), else expired, else pending.
HandoverStatus ComputeHandoverStatus(const Handover& handover, const Connection& connection,
                                     WallTime now);

inline constexpr int kMaxAgentsShown = 100;
inline constexpr int kMaxSecurityEventsShown = 10;
inline constexpr std::string_view kClusterMismatchAction = "connection.cluster_mismatch";

// What the API object shows beyond the connection row.
struct ConnectionDetails {
  std::vector<Node> nodes;
  std::vector<AgentSeen> agents;            // most recent first, at most kMaxAgentsShown
  std::optional<Handover> handover;         // the newest
  std::vector<AuditEvent> security_events;  // newest first, at most kMaxSecurityEventsShown
  std::vector<StreamSummary> streams;       // by name
  std::optional<InstallPlan> install_plan;  // what install commands were last generated with
};

Result<ConnectionDetails> ReadConnectionDetails(Store& store, const std::string& connection_id);

struct ConnectionViewOptions {
  std::chrono::milliseconds active_window = kDefaultActiveWindow;
  StatusThresholds thresholds;
};

json::object ConnectionToJson(const Connection& connection, const ConnectionDetails& details,
                              WallTime now, const ConnectionViewOptions& options);

}  // namespace uplink::console
