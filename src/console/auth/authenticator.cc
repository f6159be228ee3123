#include "console/auth/authenticator.h"

#include "console/auth/credentials.h"
#include "console/auth/web_session.h"
#include "console/replies.h"
#include "net/websocket.h"

namespace uplink::console {
namespace {

constexpr std::string_view kApiKeyKindName = "api_key";
constexpr std::string_view kSessionKindName = "session";
constexpr std::string_view kAgentTokenKindName = "agent_token";

// The first row whose hash matches the presented credential.
template <typename Row>
std::optional<Row> MatchingRow(std::vector<Row> rows, const Secret& token) {
  for (Row& row : rows) {
    if (MatchesHash(token, row.token_hash)) return std::move(row);
  }
  return std::nullopt;
}

// The connection whose token hash matches, sharing ownership of the rows it lives in.
std::shared_ptr<const Connection> MatchingConnection(const ConnectionRows& rows,
                                                     const Secret& token) {
  for (const Connection& row : *rows) {
    if (MatchesHash(token, row.token_hash)) return {rows, &row};
  }
  return nullptr;
}

}  // namespace

std::string_view CredentialKindName(CredentialKind kind) {
  return kind == CredentialKind::kSession ? kSessionKindName : kApiKeyKindName;
}

AuditEvent CallerEvent(const RequestContext& caller, WallTime at, std::string action,
                       std::string target_type, std::string target_id, std::string owner_id,
                       const json::object& detail) {
  AuditEvent event;
  event.at = at;
  event.actor_type = "user";
  event.actor_id = caller.user.id;
  event.actor_label = caller.user.email;
  event.credential = std::string(CredentialKindName(caller.credential_kind));
  event.action = std::move(action);
  event.target_type = std::move(target_type);
  event.target_id = std::move(target_id);
  event.owner_id = std::move(owner_id);
  event.source_address = caller.source_address;
  event.outcome = "ok";
  event.detail = ToJson(detail);
  return event;
}

AuditEvent AgentEvent(const Connection& connection, const std::string& source_address, WallTime at,
                      std::string action, std::string outcome) {
  AuditEvent event;
  event.at = at;
  event.actor_type = "agent";
  event.actor_id = connection.id;
  event.actor_label = connection.token_prefix;
  event.credential = std::string(kAgentTokenKindName);
  event.action = std::move(action);
  event.target_type = "connection";
  event.target_id = connection.id;
  event.owner_id = connection.owner_id;
  event.source_address = source_address;
  event.outcome = std::move(outcome);
  return event;
}

Authenticator::Authenticator(Store& store, const Clock& clock, FailureGuard& guard)
    : store_(store), clock_(clock), guard_(guard) {}

net::Response Authenticator::StoreFailure(std::string_view what, const Status& status) {
  log_.Error(what, {{"error", status}});
  return ErrorResponse(status);
}

net::Response Authenticator::RefuseUser(std::string_view kind, const std::string& address,
                                        std::string_view lookup_prefix, const Refusal& refusal) {
  bool is_failure = refusal.reason != "missing_token" && refusal.reason != "deactivated";
  // Only a credential that matched can be revoked or expired.
  bool matched = refusal.reason == "revoked" || refusal.reason == "expired";
  auto limited =
      guard_.Refused({kind, refusal.reason, address, lookup_prefix, "", is_failure, matched});
  if (limited) return std::move(*limited);
  return UnauthorizedResponse(refusal.reason, refusal.message);
}

UserAuthentication Authenticator::AuthenticateUser(const net::Request& request) {
  const std::string& address = request.remote_address;
  if (auto limited = guard_.CheckAddress(address)) return std::move(*limited);
  std::optional<Secret> token = BearerToken(request);
  if (!token) {
    if (std::optional<Secret> cookie = SessionCookieToken(request)) {
      return AuthenticateCookie(request, *cookie);
    }
    return RefuseUser(kApiKeyKindName, address, "",
                      {"missing_token",
                       "send your API key or session token as \"Authorization: Bearer uk_...\" "
                       "(or skt_...); \"uplink login\" signs in"});
  }
  if (token->Reveal().starts_with(protocol::kSessionPrefix)) {
    return AuthenticateSession(*token, address);
  }
  return AuthenticateApiKey(*token, address);
}

UserAuthentication Authenticator::AuthenticateCookie(const net::Request& request,
                                                     const Secret& token) {
  UserAuthentication authentication = AuthenticateSession(token, request.remote_address);
  auto* caller = std::get_if<RequestContext>(&authentication);
  if (!caller) return authentication;
  // A browser sends the cookie with a WebSocket handshake from any page of the same site and
  // no CSRF header can ride along; the web console opens none, and the SSH relay's clients
  // (uplink ssh) send a bearer token.
  if (net::IsWebSocketUpgrade(request)) {
    guard_.Refused({kSessionKindName, "cookie_websocket", request.remote_address,
                    caller->credential_prefix, "", false});
    return ErrorResponse(403, "cookie_websocket",
                         "the web console's session cookie does not open WebSockets; send a "
                         "bearer token (\"uplink ssh\" does)");
  }
  if (IsStateChanging(request.method)) {
    std::optional<std::string_view> presented = request.headers.Get(kCsrfHeaderName);
    if (!presented || !CsrfTokenMatches(token, *presented)) {
      // Not a guess at a credential (the cookie was valid): counted and logged, no bucket.
      guard_.Refused({kSessionKindName, "csrf_failed", request.remote_address,
                      caller->credential_prefix, "", false});
      return ErrorResponse(403, "csrf_failed",
                           "a call with the session cookie that changes something must send "
                           "the session's CSRF token in the X-CSRF-Token header; reload the page");
    }
  }
  caller->cookie_csrf_token = CsrfTokenFor(token);
  return authentication;
}

UserAuthentication Authenticator::AuthenticateApiKey(const Secret& token,
                                                     const std::string& address) {
  // Built only when needed: the message costs two allocations on every request otherwise.
  auto invalid = [] {
    return Refusal{"invalid_token",
                   "the API key is not valid; use the key printed by \"uplink-console init\" or "
                   "create a new one"};
  };
  std::optional<std::string> prefix = LookupPrefix(token, protocol::kApiKeyPrefix);
  if (!prefix) return RefuseUser(kApiKeyKindName, address, "", invalid());
  auto candidates = store_.FindApiKeysByPrefix(*prefix);
  if (!candidates.ok()) return StoreFailure("looking up an API key failed", candidates.status());
  std::optional<ApiKey> key = MatchingRow(std::move(candidates).value(), token);
  if (!key) return RefuseUser(kApiKeyKindName, address, *prefix, invalid());
  RequestContext context;
  context.credential_kind = CredentialKind::kApiKey;
  context.credential_id = key->id;
  context.credential_prefix = key->lookup_prefix;
  context.credential_expires_at = key->expires_at;
  std::optional<Refusal> refusal;
  if (key->revoked_at) {
    refusal = Refusal{"revoked", "this API key was revoked at " + FormatRfc3339(*key->revoked_at) +
                                     "; use another key or create a new one"};
  } else if (key->expires_at && clock_.Now() >= *key->expires_at) {
    refusal = Refusal{"expired", "this API key expired at " + FormatRfc3339(*key->expires_at) +
                                     "; use another key or create a new one"};
  }
  return CallerFor(key->user_id, std::move(context), refusal, kApiKeyKindName, address);
}

UserAuthentication Authenticator::AuthenticateSession(const Secret& token,
                                                      const std::string& address) {
  // Built only when needed: the message costs two allocations on every request otherwise.
  auto invalid = [] {
    return Refusal{"invalid_token",
                   "the session token is not valid; sign in again with \"uplink login\""};
  };
  std::optional<std::string> prefix = LookupPrefix(token, protocol::kSessionPrefix);
  if (!prefix) return RefuseUser(kSessionKindName, address, "", invalid());
  auto candidates = store_.FindSessionsByPrefix(*prefix);
  if (!candidates.ok()) return StoreFailure("looking up a session failed", candidates.status());
  std::optional<Session> session = MatchingRow(std::move(candidates).value(), token);
  if (!session) return RefuseUser(kSessionKindName, address, *prefix, invalid());
  RequestContext context;
  context.credential_kind = CredentialKind::kSession;
  context.credential_id = session->id;
  context.credential_prefix = session->lookup_prefix;
  context.credential_expires_at = session->expires_at;
  std::optional<Refusal> refusal;
  if (session->revoked_at) {
    refusal = Refusal{"revoked", "this session ended at " + FormatRfc3339(*session->revoked_at) +
                                     " (sign-out, password change or deactivation); sign in "
                                     "again with \"uplink login\""};
  } else if (clock_.Now() >= session->expires_at) {
    refusal = Refusal{"expired", "this session expired at " + FormatRfc3339(session->expires_at) +
                                     "; sign in again with \"uplink login\""};
  }
  std::string user_id = session->user_id;
  context.session = std::move(session);
  return CallerFor(user_id, std::move(context), refusal, kSessionKindName, address);
}

UserAuthentication Authenticator::CallerFor(const std::string& user_id, RequestContext context,
                                            const std::optional<Refusal>& refusal,
                                            std::string_view kind, const std::string& address) {
  auto user = store_.GetUser(user_id);
  if (!user.ok()) return StoreFailure("reading a credential's user failed", user.status());
  // Deactivation is named first: it is why the user's sessions were revoked, and what an
  // admin must undo.
  if (user->deactivated_at) {
    return RefuseUser(
        kind, address, context.credential_prefix,
        {"deactivated", "your account was deactivated at " + FormatRfc3339(*user->deactivated_at) +
                            "; ask an admin to reactivate it"});
  }
  if (refusal) return RefuseUser(kind, address, context.credential_prefix, *refusal);
  context.user = std::move(user).value();
  context.source_address = address;
  return context;
}

net::Response Authenticator::RefuseAgent(const net::Request& request, const Connection* matched,
                                         std::string_view lookup_prefix, const Refusal& refusal) {
  // The owner's state, not the token, is refused: no guess at a credential.
  bool owner_refused =
      refusal.reason == "owner_deactivated" || refusal.reason == "owner_needs_two_factor";
  bool is_failure = refusal.reason != "missing_token" && !owner_refused;
  auto limited = guard_.Refused({kAgentTokenKindName, refusal.reason, request.remote_address,
                                 lookup_prefix, "", is_failure, matched != nullptr});
  // Rate-limited refusals are counted, not audited, so a forgotten agent cannot grow the
  // audit log faster than its prefix's bucket refills.
  if (limited) return std::move(*limited);
  if (matched) {
    // A real token refused: the connection's owner reads why in the audit log.
    AuditEvent event = AgentEvent(*matched, request.remote_address, clock_.Now(),
                                  "connection.token_refused", "refused");
    event.detail = ToJson(json::object{{"reason", refusal.reason}});
    if (Status appended = store_.AppendAudit(event); !appended.ok()) {
      log_.Error("recording a refused agent token failed",
                 {{"connection_id", matched->id}, {"error", appended}});
    }
  }
  if (owner_refused) return ErrorResponse(403, refusal.reason, refusal.message);
  return UnauthorizedResponse(refusal.reason, refusal.message);
}

AgentAuthentication Authenticator::AuthenticateAgent(const net::Request& request) {
  if (auto limited = guard_.CheckAddress(request.remote_address)) return std::move(*limited);
  std::optional<Secret> token = BearerToken(request);
  if (!token) {
    return RefuseAgent(request, nullptr, "",
                       {"missing_token",
                        "send the connection token as \"Authorization: Bearer agt_...\"; check "
                        "that the agent's token file is mounted"});
  }
  // Built only when needed: the message costs two allocations on every request otherwise.
  auto invalid = [] {
    return Refusal{"invalid_token",
                   "the token does not belong to any connection; copy the token of your "
                   "connection (or rotate it) into the agent's Secret"};
  };
  std::optional<std::string> prefix = LookupPrefix(*token, protocol::kAgentTokenPrefix);
  if (!prefix) return RefuseAgent(request, nullptr, "", invalid());
  auto candidates = store_.FindConnectionsByTokenPrefix(*prefix);
  if (!candidates.ok()) {
    return StoreFailure("looking up a connection token failed", candidates.status());
  }
  std::shared_ptr<const Connection> connection = MatchingConnection(*candidates, *token);
  if (!connection) return RefuseAgent(request, nullptr, *prefix, invalid());
  if (connection->revoked_at) {
    return RefuseAgent(request, &*connection, *prefix,
                       {"revoked", "this connection's token was revoked at " +
                                       FormatRfc3339(*connection->revoked_at) +
                                       "; create a new connection and install its token"});
  }
  if (clock_.Now() >= connection->expires_at) {
    return RefuseAgent(
        request, &*connection, *prefix,
        {"expired", "this connection's token expired at " + FormatRfc3339(connection->expires_at) +
                        "; rotate the token in the console and update the "
                        "agent's Secret"});
  }
  if (connection->owner_deactivated_at) {
    return RefuseAgent(
        request, &*connection, *prefix,
        {"owner_deactivated", "the owner of this connection was deactivated at " +
                                  FormatRfc3339(*connection->owner_deactivated_at) +
                                  "; an admin must reactivate them before the agent can report"});
  }
  if (connection->owner_needs_two_factor) {
    return RefuseAgent(request, &*connection, *prefix,
                       {"owner_needs_two_factor",
                        "this console requires two-factor sign-in and the owner of this "
                        "connection has not set it up; the agent works again as soon as they do "
                        "('uplink two-factor enroll', or the web console's Two-factor page)"});
  }
  return connection;
}

}  // namespace uplink::console
