// Who is calling: user credentials (API keys "uk_…", session tokens "skt_…") and agent
// connection tokens ("agt_…"), and the limits on failed attempts (docs/api.md, "Rate
// limiting of failed authentication").
//
// Every refusal is counted, logged with its reason, kind, source address and the presented
// credential's non-secret lookup prefix (never the credential), and takes a token from the
// source address's bucket and from the lookup prefix's or the email's. An address whose bucket
// is empty is refused before any credential is looked at; a prefix's bucket is consulted only
// after verification failed, so knowing a token's prefix never locks its holder out.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "console/auth/rate_limiter.h"
#include "console/store/store.h"
#include "net/http.h"

namespace uplink::console {

struct AuthRateLimits {
  RateLimit per_address{30, 30.0 / 60};  // 30 per minute
  RateLimit per_prefix{10, 10.0 / 60};   // 10 per minute
  RateLimit per_email{10, 10.0 / 900};   // 10 per 15 minutes
};

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
AuditEvent AgentEvent(const Connection& connection, const std::string& source_address,
                      WallTime at, std::string action, std::string outcome);

// One refused attempt to authenticate.
struct AuthRefusal {
  std::string_view kind;    // "api_key", "session", "agent_token", "handover_code", "password"
  std::string_view reason;  // the reply's error code
  std::string_view remote_address;
  std::string_view lookup_prefix;  // of a well-formed credential; empty otherwise
  std::string_view email;          // of a sign-in or password check; empty otherwise
  // False for refusals that are no guess at a credential (none presented, a deactivated
  // owner): counted and logged, but they take nothing from any bucket.
  bool is_failure = true;
  // A real credential that is revoked or expired: no guess either, so it takes nothing from
  // the address bucket (a cluster of forgotten agents behind one NAT must not lock out the
  // good ones there), only from its prefix's.
  bool credential_matched = false;
};

class FailureGuard {
 public:
  // `clock` and `metrics` must outlive this object.
  FailureGuard(const Clock& clock, const AuthRateLimits& limits, metrics::Registry& metrics);

  // The 429 reply when `address` has used up its failures; checked before any credential.
  std::optional<net::Response> CheckAddress(std::string_view address);
  // The 429 reply when `email` has used up its failures; checked before the password.
  std::optional<net::Response> CheckEmail(std::string_view email);

  // Counts, logs and charges a refusal. Returns the 429 reply to send instead of the refusal
  // when the prefix's bucket was already empty.
  std::optional<net::Response> Refused(const AuthRefusal& refusal);

 private:
  // The 429 reply when `wait` is set: "<what>; wait N seconds, then <then>".
  std::optional<net::Response> Limited(std::string_view scope,
                                       std::optional<std::chrono::seconds> wait,
                                       std::string_view what, std::string_view then);

  metrics::Registry& metrics_;
  RateLimiter by_address_;
  RateLimiter by_prefix_;
  RateLimiter by_email_;
  log::Logger log_{"console.auth"};
};

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
