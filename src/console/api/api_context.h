// What the areas of the API share (console_api.h composes them): the store, the clock, the
// options, the metrics, the failed-authentication guard and the agents' presence, and the
// checks more than one area makes. Each area (accounts_api.h, connections_api.h, ...) is a
// class built on ApiArea that registers its own routes (routes.h).
#pragma once

#include <optional>
#include <string>

#include "common/log.h"
#include "common/metrics.h"
#include "common/secret.h"
#include "common/status.h"
#include "common/time.h"
#include "console/api/agent_presence.h"
#include "console/api/connection_view.h"
#include "console/api/console_options.h"
#include "console/auth/authenticator.h"
#include "console/auth/failure_guard.h"
#include "console/auth/password.h"
#include "console/store/store.h"
#include "net/http.h"

namespace uplink::console {

// The console's shared parts. ConsoleApi owns them; each outlives every area.
struct ApiContext {
  Store& store;
  const Clock& clock;
  const ConsoleOptions& options;
  metrics::Registry& metrics;
  FailureGuard& guard;
  PasswordHasher& hasher;
  AgentPresence& presence;
};

// The base of each area's handler class: the shared parts under short names, and the checks
// more than one area makes.
class ApiArea {
 public:
  ApiArea(const ApiArea&) = delete;
  ApiArea& operator=(const ApiArea&) = delete;

 protected:
  explicit ApiArea(const ApiContext& context);
  ~ApiArea() = default;

  // The reply for a handler's result: its response, or the error's (a 5xx is logged).
  net::Response Reply(Result<net::Response> result);
  // Appends the audit event of a refusal; a store failure is logged, not returned, so that the
  // refusal stands whether or not it could be recorded.
  void RecordRefusal(const AuditEvent& event);
  // The 403 confirmation_required reply for a session without a fresh confirmation.
  std::optional<net::Response> RequireConfirmation(const RequestContext& caller) const;
  // True when the console requires two-factor sign-in and `user` has not set it up.
  Result<bool> NeedsTwoFactorEnrollment(const User& user);
  // The 429 or 401 reply when `password` is not `user`'s; nullopt when it is.
  std::optional<net::Response> CheckOwnPassword(const User& user, const Secret& password,
                                                const std::string& remote_address);
  // NotFound unless the caller is `id` or an admin.
  Result<User> VisibleUser(const std::string& id, const RequestContext& caller);
  // NotFound unless the caller owns it.
  Result<Connection> OwnedConnection(const std::string& id, const RequestContext& caller);
  // NotFound unless the caller owns it or is an admin: for what operates the connection
  // (plans, namespace scope, approval rules, snapshots), which is not its owner's data.
  Result<Connection> OperatedConnection(const std::string& id, const RequestContext& caller);
  // The connection as users see it: the store's row with the agent calls noted since the
  // last flush.
  Connection WithPresence(Connection connection) const;
  ConnectionViewOptions ViewOptions() const;

  Store& store_;
  const Clock& clock_;
  const ConsoleOptions& options_;
  metrics::Registry& metrics_;
  FailureGuard& guard_;
  PasswordHasher& hasher_;
  AgentPresence& presence_;
  log::Logger log_{"console.api"};
};

}  // namespace uplink::console
