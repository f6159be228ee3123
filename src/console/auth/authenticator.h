// Who is calling: user credentials (API keys "uk_…", session tokens "skt_…", or the web
// console's session cookie) and agent connection tokens ("agt_…"). Every refusal goes through
// the FailureGuard (failure_guard.h), which counts, logs and rate-limits it; the audit events
// name the caller.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/json.h"
#include "common/log.h"
#include "common/time.h"
#include "console/auth/failure_guard.h"
#include "console/store/store.h"
#include "net/http.h"

namespace uplink::console {

enum class CredentialKind { kApiKey, kSession };
std::string_view CredentialKindName(CredentialKind kind);  // "api_key", "session"

// The authenticated caller of a user route.
struct RequestContext {
  User user;
  CredentialKind credential_kind = CredentialKind::kApiKey;
  std::string credential_id;
  std::string credential_prefix;
  std::optional<WallTime> credential_expires_at;
  std::optional<Session> session;  // set for session tokens
  std::string source_address;
  // Set when the session token came in the browser's session cookie rather than a bearer
  // header: the CSRF token the page must send on state-changing calls (web_session.h).
  std::optional<std::string> cookie_csrf_token;

  bool is_admin() const { return user.role == Role::kAdmin; }
};

// An audit event with the caller as its actor.
AuditEvent CallerEvent(const RequestContext& caller, WallTime at, std::string action,
                       std::string target_type, std::string target_id, std::string owner_id,
                       const json::object& detail = {});

// An audit event with a connection's agent as its actor and the connection as its target.
AuditEvent AgentEvent(const Connection& connection, const std::string& source_address, WallTime at,
                      std::string action, std::string outcome);

// The caller, or the reply that refuses them.
using UserAuthentication = std::variant<RequestContext, net::Response>;
// The agent's connection points into the store's shared rows: nothing is copied per request.
using AgentAuthentication = std::variant<std::shared_ptr<const Connection>, net::Response>;

class Authenticator {
 public:
  // Every argument must outlive this object.
  Authenticator(Store& store, const Clock& clock, FailureGuard& guard);

  // An API key or session token that is known, whose user is not deactivated, and that is
  // not revoked or expired (401 missing_token, invalid_token, deactivated, revoked, expired).
  // Without a bearer header, the session token may come in the browser's session cookie; a
  // state-changing call made so must carry the session's CSRF token (403 csrf_failed).
  UserAuthentication AuthenticateUser(const net::Request& request);

  // A connection token that is known, not revoked, not expired (401), and whose owner is not
  // deactivated (403 owner_deactivated) and has the two-factor sign-in the console requires
  // (403 owner_needs_two_factor). Refusing a token that matched a connection writes a
  // connection.token_refused audit event.
  AgentAuthentication AuthenticateAgent(const net::Request& request);

 private:
  struct Refusal {
    std::string_view reason;
    std::string message;
  };
  UserAuthentication AuthenticateApiKey(const Secret& token, const std::string& address);
  UserAuthentication AuthenticateSession(const Secret& token, const std::string& address);
  // A session token from the session cookie, with the CSRF check of a state-changing call.
  UserAuthentication AuthenticateCookie(const net::Request& request, const Secret& token);
  // The caller, or the refusal: the user's deactivation first, then `refusal` (the
  // credential's own revocation or expiry).
  UserAuthentication CallerFor(const std::string& user_id, RequestContext context,
                               const std::optional<Refusal>& refusal, std::string_view kind,
                               const std::string& address);
  net::Response RefuseUser(std::string_view kind, const std::string& address,
                           std::string_view lookup_prefix, const Refusal& refusal);
  net::Response RefuseAgent(const net::Request& request, const Connection* matched,
                            std::string_view lookup_prefix, const Refusal& refusal);
  net::Response StoreFailure(std::string_view what, const Status& status);

  Store& store_;
  const Clock& clock_;
  FailureGuard& guard_;
  log::Logger log_{"console.auth"};
};

}  // namespace uplink::console
