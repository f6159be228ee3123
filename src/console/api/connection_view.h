// What a user sees of a connection: its status, computed from stored times, and its JSON.
#pragma once

#include <chrono>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/time.h"
#include "console/store/store.h"

namespace uplink::console {

enum class ConnectionStatus { kNever, kActive, kStale, kOffline, kExpired, kRevoked };
inline constexpr ConnectionStatus kAllConnectionStatuses[] = {
    ConnectionStatus::kNever,   ConnectionStatus::kActive,  ConnectionStatus::kStale,
    ConnectionStatus::kOffline, ConnectionStatus::kExpired, ConnectionStatus::kRevoked};

std::string_view ConnectionStatusName(ConnectionStatus status);

struct StatusThresholds {
  std::chrono::milliseconds stale_after{90'000};
  std::chrono::milliseconds offline_after{150'000};
};

// Revoked wins over expired, which wins over anything reports say.
ConnectionStatus ComputeStatus(const Connection& connection, WallTime now,
                               const StatusThresholds& thresholds);

// The API object, with totals always and `nodes` when given (both the connection list and a
// single connection pass them); `nodes` is omitted only when null.
json::object ConnectionToJson(const Connection& connection, ConnectionStatus status,
                              const std::vector<Node>* nodes);

}  // namespace uplink::console
