#include "console/api/api_context.h"

#include "console/api/json_fields.h"
#include "console/replies.h"

namespace uplink::console {

ApiArea::ApiArea(const ApiContext& context)
    : store_(context.store),
      clock_(context.clock),
      options_(context.options),
      metrics_(context.metrics),
      guard_(context.guard),
      hasher_(context.hasher),
      presence_(context.presence) {}

net::Response ApiArea::Reply(Result<net::Response> result) {
  if (result.ok()) return std::move(result).value();
  if (HttpStatusFor(result.status().code()) >= 500) {
    log_.Error("a request failed", {{"error", result.status()}});
  }
  return ErrorResponse(result.status());
}

void ApiArea::RecordRefusal(const AuditEvent& event) {
  // A store error must not turn a 401 into a 500 that tells an email exists.
  if (Status appended = store_.AppendAudit(event); !appended.ok()) {
    log_.Error("recording a refusal in the audit log failed",
               {{"action", event.action}, {"error", appended}});
  }
}

std::optional<net::Response> ApiArea::RequireConfirmation(const RequestContext& caller) const {
  if (caller.credential_kind == CredentialKind::kApiKey) return std::nullopt;
  const std::optional<WallTime>& until = caller.session->confirmed_until;
  if (until && *until > clock_.Now()) return std::nullopt;
  return ErrorResponse(
      403, "confirmation_required",
      "session tokens cannot create, rotate or hand over agent tokens or create API keys, or "
      "set another user's password, without a fresh confirmation; confirm your password "
      "(uplink login --confirm, or POST /api/v1/session/confirm) or use an API key");
}

Result<bool> ApiArea::NeedsTwoFactorEnrollment(const User& user) {
  UPLINK_ASSIGN_OR_RETURN(ConsoleSettings settings, store_.GetConsoleSettings());
  return settings.require_two_factor && !user.two_factor_enabled_at;
}

std::optional<net::Response> ApiArea::CheckOwnPassword(const User& user, const Secret& password,
                                                       const std::string& remote_address) {
  if (auto limited = guard_.CheckEmail(user.email)) return std::move(*limited);
  if (hasher_.Verify(password, user.password_hash)) return std::nullopt;
  guard_.Refused({"password", "invalid_credentials", remote_address, "", user.email, true});
  return UnauthorizedResponse("invalid_credentials",
                              "the password is wrong; try again, or ask an admin to set a new "
                              "one");
}

Result<User> ApiArea::VisibleUser(const std::string& id, const RequestContext& caller) {
  Status not_found = NotFoundError(
      "there is no user with this id that you may see; admins list users with "
      "GET /api/v1/users");
  if (!IsPlausibleId(id) || (!caller.is_admin() && id != caller.user.id)) return not_found;
  auto user = store_.GetUser(id);
  if (!user.ok() && user.status().code() == StatusCode::kNotFound) return not_found;
  return user;
}

Result<Connection> ApiArea::OwnedConnection(const std::string& id, const RequestContext& caller) {
  Status not_found = NotFoundError(
      "you have no connection with this id; list yours with "
      "GET /api/v1/connections");
  if (!IsPlausibleId(id)) return not_found;
  auto connection = store_.GetConnection(id);
  if (!connection.ok()) {
    return connection.status().code() == StatusCode::kNotFound ? not_found : connection.status();
  }
  // Someone else's connection is indistinguishable from a missing one.
  if (connection->owner_id != caller.user.id) return not_found;
  return connection;
}

Result<Connection> ApiArea::OperatedConnection(const std::string& id,
                                               const RequestContext& caller) {
  if (!caller.is_admin()) return OwnedConnection(id, caller);
  Status not_found = NotFoundError(
      "there is no connection with this id; list them with "
      "GET /api/v1/connections");
  if (!IsPlausibleId(id)) return not_found;
  auto connection = store_.GetConnection(id);
  if (!connection.ok() && connection.status().code() == StatusCode::kNotFound) return not_found;
  return connection;
}

Connection ApiArea::WithPresence(Connection connection) const {
  presence_.Overlay(connection);
  return connection;
}

ConnectionViewOptions ApiArea::ViewOptions() const {
  return ConnectionViewOptions{options_.active_window, options_.thresholds};
}

}  // namespace uplink::console
