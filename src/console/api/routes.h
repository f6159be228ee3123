// How every route of the console is admitted and counted, whichever area registers it: user
// routes authenticate the caller, check the body's type, the two-factor requirement and the
// route's access; agent routes authenticate the connection token and its cluster binding
// (docs/protocol.md, "Cluster identity"); every reply is counted by route and status.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "console/api/api_context.h"
#include "console/api/json_fields.h"
#include "console/auth/authenticator.h"
#include "net/router.h"

namespace uplink::console {

// The body limit for a request, from its method, path and headers alone (net::ServerOptions::
// body_limit_for): only the agent's inventory report (protocol::kMaxReportBytes), spool uploads
// (`max_upload_bytes`), command results (protocol::kMaxCommandResultBytes), the workspace
// controller's sync and output, and a workspace command's code may be large;
// every other route takes at most kMaxUserBodyBytes, and GET and HEAD take no body. Applied
// before the body is read, so an unauthenticated client cannot make the console buffer a large
// one.
size_t RouteBodyLimit(const net::Request& head, size_t max_upload_bytes);
// RouteBodyLimit with the default upload limit.
size_t RequestBodyLimit(const net::Request& head);

// Who may call a user route. kSensitive: an API key, or a session with a fresh password
// confirmation (docs/api.md).
enum class Access { kAnyUser, kSensitive, kAdmin, kSensitiveAdmin };

// What a route's handler does that decides where it runs. kHashesPassword: it hashes or
// verifies a password (~0.1 s of CPU and 64 MiB), so it runs on the password hasher's own
// threads (PasswordHasher::Submit), never on an HTTP thread; a burst beyond their queue is
// answered 503 busy with Retry-After.
enum class Work { kQuick, kHashesPassword };

class Routes : private ApiArea {
 public:
  using PublicHandler = std::function<Result<net::Response>(const net::Request&)>;
  using UserHandler = std::function<Result<net::Response>(
      const net::Request&, const net::PathParams&, const RequestContext&)>;
  using AgentHandler = std::function<Result<net::Response>(const net::Request&, const Connection&)>;
  // A handler that answers through `reply`, exactly once, now or later from any thread.
  using AsyncUserHandler = std::function<void(const net::Request&, const net::PathParams&,
                                              const RequestContext&, net::Reply)>;
  using AsyncAgentHandler = std::function<void(const net::Request&, const net::PathParams&,
                                               const Connection&, net::Reply)>;

  // Routes go to `router`; `auth` checks the callers. Both must outlive this object.
  Routes(const ApiContext& context, Authenticator& auth, net::Router& router);

  // A request the server ended without a response (net::ServerOptions::on_request_lost).
  void CountLost(std::string_view reason);
  // net::ServerOptions::on_connection's events, as the open gauge and the outcome counter.
  void CountConnection(std::string_view event);
  // A route whose replies are counted by route and status.
  void Route(const std::string& method, const std::string& pattern, net::Handler handler,
             Work work = Work::kQuick);
  // A route without a bearer credential that reads a JSON body (sign-in, handover redeem).
  void PublicRoute(const std::string& method, const std::string& pattern, PublicHandler handler,
                   Work work = Work::kQuick);
  // Authenticates the caller, checks the body's type, then `access`.
  void UserRoute(const std::string& method, const std::string& pattern, Access access,
                 UserHandler handler, Work work = Work::kQuick);
  // Authenticates the agent's connection token and its cluster binding; a 2xx reply counts
  // for the connection's liveness. A call refused because it comes from another cluster is
  // counted in `refusals_metric` (reason cluster_mismatch) when one is named.
  void AgentRoute(const std::string& method, const std::string& pattern, AgentHandler handler,
                  std::string_view refusals_metric = {});
  // As Route, UserRoute and AgentRoute, for handlers that answer later. An async agent
  // handler notes its call as accepted itself: a held poll answers later.
  void AsyncRoute(const std::string& method, const std::string& pattern, net::AsyncHandler handler);
  void AsyncUserRoute(const std::string& method, const std::string& pattern, Access access,
                      AsyncUserHandler handler);
  void AsyncAgentRoute(const std::string& method, const std::string& pattern,
                       AsyncAgentHandler handler, std::string_view refusals_metric = {});

  // The replies to what no route takes: the web console's pages and assets, else 404 or 405.
  void SetFallbacks();

 private:
  // The caller of a user route, or the reply that refuses them (authentication, body, access,
  // two-factor enrolment).
  std::variant<RequestContext, net::Response> AdmitUser(const net::Request& request,
                                                        std::string_view pattern, Access access);
  // 403 two_factor_enrollment_required when the console requires two-factor sign-in, the
  // caller has not set it up, and the route is not one that setting it up needs.
  std::optional<net::Response> RequireTwoFactorEnrollment(const RequestContext& caller,
                                                          std::string_view method,
                                                          std::string_view pattern);
  // The cluster binding on every agent call (docs/protocol.md, "Cluster identity"): a call
  // whose Uplink-Cluster-UID header names another cluster than the connection's is refused
  // (409, audited); the first call that names one binds an unbound connection. The reply that
  // refuses the call, or nullopt.
  std::optional<net::Response> CheckClusterIdentity(const net::Request& request,
                                                    const Connection& connection,
                                                    std::string_view route,
                                                    std::string_view refusals_metric);
  void CountReply(std::string_view route, std::string_view method, int status);

  Authenticator& auth_;
  net::Router& router_;
};

}  // namespace uplink::console
