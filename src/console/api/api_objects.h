// The JSON objects of the user API (docs/api.md) other than connections: users, API keys,
// sessions and audit events. None of them carries a credential or a hash.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/time.h"
#include "console/store/store.h"

namespace uplink::console {

std::string_view RoleName(Role role);
// nullopt for anything but "admin" and "member".
std::optional<Role> ParseRole(std::string_view name);

json::value OptionalTimeJson(const std::optional<WallTime>& t);

// An audit event's stored detail, a JSON object; an empty or unreadable one reads as {}.
json::object DetailJson(const std::string& detail);

json::object UserToJson(const User& user);
// `status` is active, expired (at `now`) or revoked.
json::object ApiKeyToJson(const ApiKey& key, WallTime now);
json::object SessionToJson(const Session& session);
json::object AuditEventToJson(const AuditEvent& event);

}  // namespace uplink::console
