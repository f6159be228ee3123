// Every HTTP route of uplink-console: the user API (connections), the agent API
// (docs/protocol.md) and the operational endpoints (/healthz, /readyz, /metrics).
#pragma once

#include <chrono>
#include <string>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "console/api/connection_view.h"
#include "console/auth/credentials.h"
#include "console/store/store.h"
#include "net/router.h"

namespace uplink::console {

struct ConsoleOptions {
  StatusThresholds thresholds;
  std::chrono::seconds report_interval{60};  // told to agents; the protocol allows 10-3600
  std::chrono::hours default_token_lifetime{90 * 24};
  std::chrono::hours max_token_lifetime{366 * 24};
};

inline constexpr size_t kMaxUserBodyBytes = 64 << 10;

// The body limit for a request, from its method, path and headers alone (net::ServerOptions::
// body_limit_for): only the agent's inventory report may be large (kMaxReportBytes); every
// other route takes at most kMaxUserBodyBytes, and GET and HEAD take no body. Applied before
// the body is read, so an unauthenticated client cannot make the console buffer a large one.
size_t RequestBodyLimit(const net::Request& head);

class ConsoleApi {
 public:
  // `store` and `clock` must outlive this object.
  ConsoleApi(Store& store, const Clock& clock, ConsoleOptions options);
  ConsoleApi(const ConsoleApi&) = delete;
  ConsoleApi& operator=(const ConsoleApi&) = delete;

  // Serves every route; valid as long as this object.
  const net::Router& router() const { return router_; }
  const metrics::Registry& metrics() const { return metrics_; }

 private:
  using UserHandler = std::function<net::Response(const net::Request&, const net::PathParams&,
                                                  const User&)>;

  // Registers a route whose replies are counted by route and status.
  void Route(const std::string& method, const std::string& pattern, net::Handler handler);
  // A user route: authenticates the API key and checks the body's size and type first.
  void UserRoute(const std::string& method, const std::string& pattern, UserHandler handler);

  Result<User> AuthenticateUser(const net::Request& request, AuthFailure* failure);
  Result<Connection> AuthenticateAgent(const net::Request& request, AuthFailure* failure);
  net::Response AuthErrorResponse(const Status& status, AuthFailure failure);
  Result<Connection> OwnedConnection(const std::string& id, const User& user);
  Result<net::Response> ConnectionResponse(int http_status, const std::string& id,
                                           const Secret* token);

  net::Response Readyz();
  net::Response Metrics();
  Result<net::Response> CreateConnection(const net::Request& request, const User& user);
  Result<net::Response> ListConnections(const User& user);
  Result<net::Response> RotateToken(const std::string& id, const net::Request& request,
                                    const User& user);
  Result<net::Response> Revoke(const std::string& id, const net::Request& request,
                               const User& user);
  net::Response ReportInventory(const net::Request& request);
  Result<net::Response> AcceptInventory(const net::Request& request, const Connection& connection);

  Store& store_;
  const Clock& clock_;
  ConsoleOptions options_;
  log::Logger log_{"console.api"};
  metrics::Registry metrics_;
  net::Router router_;
};

}  // namespace uplink::console
