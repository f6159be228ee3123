#include "console/api/api_objects.h"

namespace uplink::console {

std::string_view RoleName(Role role) { return role == Role::kAdmin ? "admin" : "member"; }

std::optional<Role> ParseRole(std::string_view name) {
  if (name == "admin") return Role::kAdmin;
  if (name == "member") return Role::kMember;
  return std::nullopt;
}

json::value OptionalTimeJson(const std::optional<WallTime>& t) {
  return t ? json::value(FormatRfc3339(*t)) : json::value(nullptr);
}

json::object DetailJson(const std::string& detail) {
  if (detail.empty()) return {};
  auto parsed = ParseJson(detail);
  if (!parsed.ok() || !parsed->is_object()) return {};
  return std::move(parsed->get_object());
}

json::object UserToJson(const User& user) {
  return json::object{{"id", user.id},
                      {"email", user.email},
                      {"role", RoleName(user.role)},
                      {"created_at", FormatRfc3339(user.created_at)},
                      {"deactivated_at", OptionalTimeJson(user.deactivated_at)},
                      {"has_password", !user.password_hash.empty()},
                      {"two_factor_enabled", user.two_factor_enabled_at.has_value()}};
}

json::object ApiKeyToJson(const ApiKey& key, WallTime now) {
  std::string_view status = key.revoked_at                             ? "revoked"
                            : key.expires_at && now >= *key.expires_at ? "expired"
                                                                       : "active";
  return json::object{{"id", key.id},
                      {"name", key.name},
                      {"prefix", key.lookup_prefix},
                      {"created_at", FormatRfc3339(key.created_at)},
                      {"expires_at", OptionalTimeJson(key.expires_at)},
                      {"revoked_at", OptionalTimeJson(key.revoked_at)},
                      {"status", status}};
}

json::object SessionToJson(const Session& session) {
  return json::object{{"id", session.id},
                      {"expires_at", FormatRfc3339(session.expires_at)},
                      {"confirmed_until", OptionalTimeJson(session.confirmed_until)}};
}

json::object AuditEventToJson(const AuditEvent& event) {
  return json::object{
      {"id", event.id},
      {"at", FormatRfc3339(event.at)},
      {"actor", json::object{{"type", event.actor_type},
                             {"id", event.actor_id},
                             {"label", event.actor_label},
                             {"credential", event.credential}}},
      {"action", event.action},
      {"target", json::object{{"type", event.target_type}, {"id", event.target_id}}},
      {"source_address", event.source_address},
      {"outcome", event.outcome},
      {"detail", DetailJson(event.detail)}};
}

}  // namespace uplink::console
