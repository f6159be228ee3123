#include "console/api/console_api.h"

#include <map>

#include "common/cluster_identity.h"
#include "console/api/api_objects.h"
#include "console/api/errors.h"
#include "console/api/inventory_report.h"
#include "console/api/kubectl_results.h"
#include "console/web/web_assets.h"

namespace uplink::console {
namespace {

constexpr const char* kRequestsTotal = "uplink_console_http_requests_total";
constexpr const char* kConnections = "uplink_console_connections";
constexpr const char* kConnectionsLiveness = "uplink_console_connections_liveness";

constexpr const char* kInventoryPath = "/api/v1/agent/inventory";
constexpr const char* kUploadsPath = "/api/v1/agent/uploads";
constexpr std::string_view kCommandsPathPrefix = "/api/v1/agent/commands/";
constexpr std::string_view kCommandResultSuffix = "/result";

constexpr std::int64_t kDefaultAuditLimit = 100;
constexpr std::int64_t kMaxAuditLimit = 500;
constexpr std::int64_t kMaxQueryInt = 999'999'999'999'999'999;  // 18 digits: no overflow

// Every action the audit log records (docs/api.md, "Audit log").
constexpr std::string_view kAuditActions[] = {"user.create",
                                              "user.deactivate",
                                              "user.reactivate",
                                              "user.password",
                                              "api_key.create",
                                              "api_key.revoke",
                                              "session.create",
                                              "session.refused",
                                              "session.confirm",
                                              "session.logout",
                                              "connection.create",
                                              "connection.rotate",
                                              "connection.revoke",
                                              "connection.bind",
                                              "connection.cluster_mismatch",
                                              "connection.token_refused",
                                              "handover.redeem",
                                              "handover.refused",
                                              "stream.restart",
                                              "connection.node_plan",
                                              "connection.namespaces",
                                              "connection.install_plan",
                                              "kubectl.run",
                                              "two_factor.enroll",
                                              "two_factor.enable",
                                              "two_factor.disable",
                                              "two_factor.reset",
                                              "two_factor.recovery_codes",
                                              "two_factor.recovery_code_used",
                                              "two_factor.refused",
                                              "settings.update",
                                              "connection.approval_rule_add",
                                              "connection.approval_rule_remove",
                                              "kubectl.approval_requested",
                                              "kubectl.approve",
                                              "kubectl.reject",
                                              "kubectl.approval_expired"};

// 413 and 415 for user API bodies; the server has already refused bodies over the route's
// limit, so the size check matters only for routers used without that server.
std::optional<net::Response> CheckUserBody(const net::Request& request) {
  if (request.body.size() > kMaxUserBodyBytes) {
    return ErrorResponse(ResourceExhaustedError("the request body is over the " +
                                                std::to_string(kMaxUserBodyBytes) +
                                                "-byte limit for this endpoint"));
  }
  if (!request.body.empty() && !IsJsonContentType(request.headers.Get("Content-Type"))) {
    return ErrorResponse(415, "unsupported_media_type",
                         "send the body as JSON with Content-Type: application/json");
  }
  return std::nullopt;
}

}  // namespace

size_t RequestBodyLimit(const net::Request& head) {
  return RouteBodyLimit(head, kDefaultMaxUploadBytes);
}

size_t RouteBodyLimit(const net::Request& head, size_t max_upload_bytes) {
  if (head.method == "GET" || head.method == "HEAD") return 0;
  if (head.method == "POST") {
    std::string path = head.Path();
    if (path == kInventoryPath) return kMaxReportBytes;
    if (path == kUploadsPath) return max_upload_bytes;
    if (path.starts_with(kCommandsPathPrefix) && path.ends_with(kCommandResultSuffix)) {
      return kMaxCommandResultBytes;
    }
  }
  return kMaxUserBodyBytes;
}

ConsoleApi::ConsoleApi(Store& store, const Clock& clock, ConsoleOptions options)
    : store_(store),
      clock_(clock),
      options_(options),
      started_at_(clock.Now()),
      hasher_(options.password_hashing),
      two_factor_box_(options.two_factor_key),
      guard_(clock, options.rate_limits, metrics_),
      auth_(store, clock, guard_),
      commands_(clock, CommandBrokerOptions{.give_up_after = options.command_timeout}) {
  metrics_.DeclareCounter(kRequestsTotal, "HTTP requests by route, method and status.");
  metrics_.DeclareCounter(kReportsAcceptedTotal, "Inventory reports stored.");
  metrics_.DeclareCounter(kReportsRefusedTotal,
                          "Inventory reports refused after authentication, by reason.");
  metrics_.DeclareCounter(kUploadsAcceptedTotal, "Spool uploads accepted.");
  metrics_.DeclareCounter(kUploadsRefusedTotal,
                          "Spool uploads refused after authentication, by error code.");
  metrics_.DeclareCounter(kUploadRecordsStoredTotal, "Uploaded records stored.");
  metrics_.DeclareCounter(kUploadDuplicatesTotal,
                          "Uploaded records already acknowledged, so not stored again.");
  metrics_.DeclareCounter(kUploadRecordsLostTotal,
                          "Record sequences that never arrived, counted when a later one is "
                          "acknowledged.");
  metrics_.DeclareCounter(kStreamRestartsTotal, "Streams whose agent spool was recreated.");
  metrics_.DeclareCounter(kRecordsPrunedTotal, "Uploaded records deleted by retention.");
  metrics_.DeclareCounter(kNodeSamplesStoredTotal, "Node samples whose figures were stored.");
  metrics_.DeclareCounter(kNodeSamplesRefusedTotal,
                          "Node samples refused (invalid: the upload was answered 422) or "
                          "acknowledged without keeping their figures (too_old, in_future, "
                          "same_time), by reason.");
  metrics_.DeclareCounter(kNodeSampleValuesDroppedTotal,
                          "Node sample values not stored because their node has too many "
                          "series.");
  metrics_.DeclareCounter(kNodeSamplesPrunedTotal, "Raw node samples deleted by retention.");
  metrics_.DeclareCounter(kNodeRollupsWrittenTotal,
                          "5-minute node sample rollups written (or rewritten after a late "
                          "sample).");
  metrics_.DeclareCounter(kNodeRollupsPrunedTotal, "Node sample rollups deleted by retention.");
  metrics_.DeclareCounter(kKubectlCommandsTotal,
                          "kubectl commands from users, by how they ended (docs/api.md, "
                          "\"kubectl\").");
  metrics_.DeclareCounter(kKubectlLateResultsTotal,
                          "Command results that arrived after the console gave the command up "
                          "(discarded).");
  metrics_.DeclareGauge(kKubectlCommandsWaiting,
                        "kubectl commands whose users wait: queued or taken by an agent.");
  metrics_.DeclareGauge(kKubectlPollsWaiting, "Agent polls held until a command is queued.");
  metrics_.DeclareCounter(kClusterSnapshotsStoredTotal,
                          "Cluster snapshots that became their connection's latest.");
  metrics_.DeclareCounter(kRunItemsTotal,
                          "Experiment run items stored, by kind: upserts, points (new ones), "
                          "duplicate_points (already stored), deleted, problems.");
  metrics_.DeclareGauge(kConnections, "Connections by token status, computed at scrape time.");
  metrics_.DeclareGauge(kConnectionsLiveness,
                        "Connections whose token works (neither revoked nor expired), by the "
                        "liveness of their agent, computed at scrape time.");
  metrics_.DeclareCounter(kKubectlApprovalsTotal,
                          "kubectl commands sent to approval by a rule (requested) and how "
                          "people decided them (approved, rejected).");
  RegisterRoutes();
  commands_.StartReaper();
  presence_.StartFlusher(store_, options_.presence_flush_interval);
  // A console that stopped took its queued commands along: what was approved but never
  // answered ends now, so that nothing stale runs later.
  EndApprovals(/*abandon_approved=*/true);
  approval_sweeper_ = std::thread([this] { ApprovalSweeperLoop(); });
}

void ConsoleApi::RegisterRoutes() {
  Route("GET", "/healthz", [](const net::Request&, const net::PathParams&) {
    return JsonResponse(200, {{"status", "ok"}});
  });
  Route("GET", "/readyz", [this](const net::Request&, const net::PathParams&) { return Readyz(); });
  Route("GET", "/metrics",
        [this](const net::Request&, const net::PathParams&) { return Metrics(); });

  // Sessions and the caller.
  PublicRoute("POST", "/api/v1/sessions",
              [this](const net::Request& request) { return SignIn(request); });
  UserRoute("GET", "/api/v1/me", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams&, const RequestContext& caller) {
              return Me(caller);
            });
  UserRoute("POST", "/api/v1/session/confirm", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams&,
                   const RequestContext& caller) { return ConfirmSession(request, caller); });
  UserRoute("POST", "/api/v1/session/logout", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams&,
                   const RequestContext& caller) { return Logout(request, caller); });

  // Users.
  UserRoute("GET", "/api/v1/users", Access::kAdmin,
            [this](const net::Request& request, const net::PathParams&, const RequestContext&) {
              return ListUsers(request);
            });
  // Sensitive: a user made with a password is a lasting credential, which a stolen session
  // must not be able to mint.
  UserRoute("POST", "/api/v1/users", Access::kSensitiveAdmin,
            [this](const net::Request& request, const net::PathParams&,
                   const RequestContext& caller) { return CreateUser(request, caller); });
  UserRoute("GET", "/api/v1/users/{id}", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams& params,
                   const RequestContext& caller) { return ShowUser(params.at("id"), caller); });
  UserRoute("POST", "/api/v1/users/{id}/deactivate", Access::kAdmin,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return SetDeactivated(params.at("id"), request, caller, true);
            });
  UserRoute("POST", "/api/v1/users/{id}/reactivate", Access::kAdmin,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return SetDeactivated(params.at("id"), request, caller, false);
            });
  // Sensitive only for an admin setting another user's password: checked inside.
  UserRoute("POST", "/api/v1/users/{id}/password", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return ChangePassword(params.at("id"), request, caller);
            });

  // API keys.
  UserRoute("GET", "/api/v1/api-keys", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams&, const RequestContext& caller) {
              return ListApiKeys(caller);
            });
  UserRoute("POST", "/api/v1/api-keys", Access::kSensitive,
            [this](const net::Request& request, const net::PathParams&,
                   const RequestContext& caller) { return CreateApiKey(request, caller); });
  UserRoute("POST", "/api/v1/api-keys/{id}/revoke", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return RevokeApiKey(params.at("id"), request, caller);
            });

  // Connections and handovers.
  UserRoute("POST", "/api/v1/connections", Access::kSensitive,
            [this](const net::Request& request, const net::PathParams&,
                   const RequestContext& caller) { return CreateConnection(request, caller); });
  UserRoute("GET", "/api/v1/connections", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams&, const RequestContext& caller) {
              return ListConnections(caller);
            });
  UserRoute(
      "GET", "/api/v1/connections/{id}", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return ShowConnection(params.at("id"), caller);
      });
  UserRoute("POST", "/api/v1/connections/{id}/rotate", Access::kSensitive,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return RotateToken(params.at("id"), request, caller);
            });
  UserRoute("POST", "/api/v1/connections/{id}/revoke", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return RevokeConnection(params.at("id"), request, caller);
            });
  UserRoute("GET", "/api/v1/connections/{id}/records", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return ListStreamRecords(params.at("id"), request, caller);
            });
  // Node samples and the node role's plan.
  UserRoute("GET", "/api/v1/connections/{id}/nodes", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return ListSampleNodes(params.at("id"), request, caller);
            });
  UserRoute("GET", "/api/v1/connections/{id}/nodes/{node}/series", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return NodeSeries(params.at("id"), params.at("node"), request, caller);
            });
  UserRoute("GET", "/api/v1/connections/{id}/node-plan", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams& params,
                   const RequestContext& caller) { return ShowNodePlan(params.at("id"), caller); });
  UserRoute("PUT", "/api/v1/connections/{id}/node-plan", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return SetNodePlan(params.at("id"), request, caller);
            });
  // kubectl: commands, the namespace scope and the latest cluster snapshot.
  AsyncUserRoute("POST", "/api/v1/connections/{id}/kubectl", Access::kAnyUser,
                 [this](const net::Request& request, const net::PathParams& params,
                        const RequestContext& caller, net::Reply reply) {
                   RunKubectl(params.at("id"), request, caller, std::move(reply));
                 });
  UserRoute("GET", "/api/v1/connections/{id}/namespaces", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams& params,
                   const RequestContext& caller) {
              return ShowNamespaces(params.at("id"), caller);
            });
  UserRoute("PUT", "/api/v1/connections/{id}/namespaces", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return SetNamespaces(params.at("id"), request, caller);
            });
  // Approval rules and the commands that wait for approval (approvals_api.cc).
  UserRoute("GET", "/api/v1/connections/{id}/approval-rules", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams& params,
                   const RequestContext& caller) {
              return ListApprovalRules(params.at("id"), caller);
            });
  UserRoute("POST", "/api/v1/connections/{id}/approval-rules", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return AddApprovalRule(params.at("id"), request, caller);
            });
  UserRoute("DELETE", "/api/v1/connections/{id}/approval-rules/{rule}", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams& params,
                   const RequestContext& caller) {
              return RemoveApprovalRule(params.at("id"), params.at("rule"), caller);
            });
  UserRoute("GET", "/api/v1/connections/{id}/commands/{command}", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams& params,
                   const RequestContext& caller) {
              return ShowCommand(params.at("id"), params.at("command"), caller);
            });
  UserRoute("GET", "/api/v1/approvals", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams&,
                   const RequestContext& caller) { return ListApprovals(request, caller); });
  UserRoute("POST", "/api/v1/approvals/{command}/approve", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return DecideApproval(params.at("command"), request, caller, true);
            });
  UserRoute("POST", "/api/v1/approvals/{command}/reject", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return DecideApproval(params.at("command"), request, caller, false);
            });
  UserRoute("GET", "/api/v1/connections/{id}/right-sizing", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams& params,
                   const RequestContext& caller) {
              return ShowRightSizing(params.at("id"), caller);
            });
  // Experiment runs.
  UserRoute("GET", "/api/v1/connections/{id}/runs", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return ListRuns(params.at("id"), request, caller);
            });
  UserRoute("GET", "/api/v1/connections/{id}/runs/{run_id}", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return ShowRun(params.at("id"), params.at("run_id"), request, caller);
            });
  UserRoute("GET", "/api/v1/connections/{id}/cluster", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams& params,
                   const RequestContext& caller) {
              return ShowClusterSnapshot(params.at("id"), caller);
            });
  // Install commands and the agent's chart as a public Helm repository (install_api.cc).
  UserRoute("POST", "/api/v1/connections/{id}/install", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams& params,
                   const RequestContext& caller) {
              return GenerateInstall(params.at("id"), request, caller);
            });
  Route("GET", std::string(kChartRepositoryPath) + "/{file}",
        [this](const net::Request& request, const net::PathParams& params) {
          return ServeChart(request, params.at("file"));
        });
  // The web console's session cookie (web_api.cc).
  PublicRoute("POST", "/api/v1/web/sign-in",
              [this](const net::Request& request) { return WebSignIn(request); });
  UserRoute("GET", "/api/v1/web/session", Access::kAnyUser,
            [this](const net::Request&, const net::PathParams&, const RequestContext& caller) {
              return WebSession(caller);
            });
  UserRoute("POST", "/api/v1/web/sign-out", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams&,
                   const RequestContext& caller) { return WebSignOut(request, caller); });
  PublicRoute("POST", "/api/v1/handovers/redeem",
              [this](const net::Request& request) { return RedeemHandover(request); });
  RegisterTwoFactorRoutes();

  UserRoute("GET", "/api/v1/audit", Access::kAnyUser,
            [this](const net::Request& request, const net::PathParams&,
                   const RequestContext& caller) { return ListAudit(request, caller); });

  // The agent's calls (docs/protocol.md).
  AgentRoute("POST", kInventoryPath,
             [this](const net::Request& request, const Connection& connection) {
               return ReportInventory(request, connection);
             });
  AgentRoute("POST", kUploadsPath,
             [this](const net::Request& request, const Connection& connection) {
               return ReceiveUpload(request, connection);
             });
  AsyncAgentRoute("POST", "/api/v1/agent/commands/poll",
                  [this](const net::Request& request, const net::PathParams&,
                         const Connection& connection, net::Reply reply) {
                    PollCommands(request, connection, std::move(reply));
                  });
  AsyncAgentRoute("POST", "/api/v1/agent/commands/{id}/result",
                  [this](const net::Request& request, const net::PathParams& params,
                         const Connection& connection, net::Reply reply) {
                    reply(Reply(ReceiveCommandResult(params.at("id"), request, connection)));
                  });
  AgentRoute(
      "GET", "/api/v1/agent/whoami",
      [this](const net::Request&, const Connection& connection) { return WhoAmI(connection); });

  router_.SetNotFound([this](const net::Request& request) {
    // Every other page is the web console's: index.html for its client routes, or an asset.
    if (IsWebRequest(request)) {
      net::Response page = ServeWebFile(request, EmbeddedWebFile);
      metrics_.Increment(kRequestsTotal, {{"route", "web"},
                                          {"method", request.method},
                                          {"status", std::to_string(page.status)}});
      return page;
    }
    metrics_.Increment(kRequestsTotal,
                       {{"route", "unmatched"}, {"method", request.method}, {"status", "404"}});
    return ErrorResponse(404, "not_found",
                         "no such endpoint; the API is under /api/v1 (see docs/api.md)");
  });
  router_.SetMethodNotAllowed([this](const net::Request& request, std::string allowed) {
    metrics_.Increment(kRequestsTotal,
                       {{"route", "unmatched"}, {"method", request.method}, {"status", "405"}});
    return ErrorResponse(405, "method_not_allowed", "this endpoint accepts " + allowed);
  });
}

void ConsoleApi::Route(const std::string& method, const std::string& pattern,
                       net::Handler handler) {
  router_.Add(method, pattern,
              [this, method, pattern, handler = std::move(handler)](const net::Request& request,
                                                                    const net::PathParams& params) {
                net::Response response = handler(request, params);
                metrics_.Increment(kRequestsTotal, {{"route", pattern},
                                                    {"method", method},
                                                    {"status", std::to_string(response.status)}});
                return response;
              });
}

net::Response ConsoleApi::Reply(Result<net::Response> result) {
  if (result.ok()) return std::move(result).value();
  if (HttpStatusFor(result.status().code()) >= 500) {
    log_.Error("a request failed", {{"error", result.status()}});
  }
  return ErrorResponse(result.status());
}

void ConsoleApi::PublicRoute(const std::string& method, const std::string& pattern,
                             std::function<Result<net::Response>(const net::Request&)> handler) {
  Route(method, pattern,
        [this, handler = std::move(handler)](const net::Request& request, const net::PathParams&) {
          if (auto refused = CheckUserBody(request)) return std::move(*refused);
          return Reply(handler(request));
        });
}

std::variant<RequestContext, net::Response> ConsoleApi::AdmitUser(const net::Request& request,
                                                                  std::string_view pattern,
                                                                  Access access) {
  UserAuthentication authentication = auth_.AuthenticateUser(request);
  if (auto* refusal = std::get_if<net::Response>(&authentication)) return std::move(*refusal);
  RequestContext& caller = std::get<RequestContext>(authentication);
  if (auto refused = CheckUserBody(request)) return std::move(*refused);
  if (auto refused = RequireTwoFactorEnrollment(caller, request.method, pattern)) {
    return std::move(*refused);
  }
  bool admin_only = access == Access::kAdmin || access == Access::kSensitiveAdmin;
  if (admin_only && !caller.is_admin()) {
    return ErrorResponse(403, "forbidden",
                         "this call needs the admin role; ask an admin to make it");
  }
  if (access == Access::kSensitive || access == Access::kSensitiveAdmin) {
    if (auto refused = RequireConfirmation(caller)) return std::move(*refused);
  }
  return std::move(caller);
}

void ConsoleApi::UserRoute(const std::string& method, const std::string& pattern, Access access,
                           UserHandler handler) {
  Route(method, pattern,
        [this, pattern, access, handler = std::move(handler)](const net::Request& request,
                                                              const net::PathParams& params) {
          auto admitted = AdmitUser(request, pattern, access);
          if (auto* refusal = std::get_if<net::Response>(&admitted)) return std::move(*refusal);
          return Reply(handler(request, params, std::get<RequestContext>(admitted)));
        });
}

void ConsoleApi::AsyncRoute(const std::string& method, const std::string& pattern,
                            net::AsyncHandler handler) {
  router_.AddAsync(
      method, pattern,
      [this, method, pattern, handler = std::move(handler)](
          const net::Request& request, const net::PathParams& params, net::Reply reply) {
        handler(request, params,
                [this, method, pattern, reply = std::move(reply)](net::Response response) {
                  metrics_.Increment(kRequestsTotal,
                                     {{"route", pattern},
                                      {"method", method},
                                      {"status", std::to_string(response.status)}});
                  reply(std::move(response));
                });
      });
}

void ConsoleApi::AsyncUserRoute(const std::string& method, const std::string& pattern,
                                Access access, AsyncUserHandler handler) {
  AsyncRoute(method, pattern,
             [this, pattern, access, handler = std::move(handler)](
                 const net::Request& request, const net::PathParams& params, net::Reply reply) {
               auto admitted = AdmitUser(request, pattern, access);
               if (auto* refusal = std::get_if<net::Response>(&admitted)) {
                 reply(std::move(*refusal));
                 return;
               }
               handler(request, params, std::get<RequestContext>(admitted), std::move(reply));
             });
}

void ConsoleApi::AsyncAgentRoute(const std::string& method, const std::string& pattern,
                                 AsyncAgentHandler handler) {
  AsyncRoute(method, pattern,
             [this, pattern, handler = std::move(handler)](
                 const net::Request& request, const net::PathParams& params, net::Reply reply) {
               AgentAuthentication authentication = auth_.AuthenticateAgent(request);
               if (auto* refusal = std::get_if<net::Response>(&authentication)) {
                 reply(std::move(*refusal));
                 return;
               }
               const Connection& connection =
                   *std::get<std::shared_ptr<const Connection>>(authentication);
               if (auto refused = CheckClusterIdentity(request, connection, pattern)) {
                 reply(std::move(*refused));
                 return;
               }
               // The handler notes the call as accepted itself: a held poll answers later.
               handler(request, params, connection, std::move(reply));
             });
}

void ConsoleApi::AgentRoute(const std::string& method, const std::string& pattern,
                            AgentHandler handler) {
  Route(method, pattern,
        [this, pattern, handler = std::move(handler)](const net::Request& request,
                                                      const net::PathParams&) {
          AgentAuthentication authentication = auth_.AuthenticateAgent(request);
          if (auto* refusal = std::get_if<net::Response>(&authentication)) {
            return std::move(*refusal);
          }
          const Connection& connection =
              *std::get<std::shared_ptr<const Connection>>(authentication);
          if (auto refused = CheckClusterIdentity(request, connection, pattern)) {
            return std::move(*refused);
          }
          net::Response response = Reply(handler(request, connection));
          if (response.status >= 200 && response.status <= 299) {
            presence_.Seen(connection.id, clock_.Now());
          }
          return response;
        });
}

std::optional<net::Response> ConsoleApi::CheckClusterIdentity(const net::Request& request,
                                                              const Connection& connection,
                                                              std::string_view route) {
  // Without the header (the node role before it knows its cluster, agents older than the
  // header) the call is taken on the token alone (docs/security.md, "Cluster binding").
  std::optional<std::string_view> uid = request.headers.Get(kClusterUidHeader);
  if (!uid) return std::nullopt;
  if (!IsClusterUid(*uid)) {
    return ErrorResponse(400, "invalid_request",
                         std::string(kClusterUidHeader) +
                             " must be the kube-system namespace's metadata.uid: 1-128 "
                             "printable ASCII characters without spaces");
  }
  if (connection.cluster_uid == *uid) return std::nullopt;
  // Unbound, or bound to another cluster: the store decides in one transaction, so that two
  // first calls from different clusters cannot both bind.
  AuditEvent audit =
      AgentEvent(connection, request.remote_address, clock_.Now(), "connection.bind", "ok");
  audit.detail = ToJson(json::object{{"call", route}});
  Status bound = store_.BindCluster(connection.id, connection.token_hash, std::string(*uid), audit);
  if (bound.ok()) {
    if (!connection.cluster_uid) {
      log_.Info("connection bound to its cluster",
                {{"connection_id", connection.id}, {"cluster_uid", *uid}, {"call", route}});
    }
    return std::nullopt;
  }
  if (bound.code() == StatusCode::kConflict) {
    // A valid token used on another cluster: a copied Secret or a reinstalled cluster. The
    // store recorded it in the audit log; the connection shows it under security_events.
    if (route == kInventoryPath) {
      metrics_.Increment(kReportsRefusedTotal, {{"reason", "cluster_mismatch"}});
    } else if (route == kUploadsPath) {
      metrics_.Increment(kUploadsRefusedTotal, {{"reason", "cluster_mismatch"}});
    }
    log_.Warn("security: call from another cluster refused",
              {{"event", "cluster_mismatch"},
               {"connection_id", connection.id},
               {"call", route},
               {"bound_cluster_uid", connection.cluster_uid.value_or("")},
               {"remote_address", request.remote_address}});
    return ErrorResponse(409, "cluster_mismatch", bound.message());
  }
  if (bound.code() == StatusCode::kUnauthenticated) {
    return UnauthorizedResponse("invalid_token", bound.message());
  }
  log_.Error("checking the cluster binding failed",
             {{"connection_id", connection.id}, {"error", bound}});
  return ErrorResponse(bound);
}

Connection ConsoleApi::WithPresence(Connection connection) const {
  presence_.Overlay(connection);
  return connection;
}

std::optional<net::Response> ConsoleApi::RequireConfirmation(const RequestContext& caller) const {
  if (caller.credential_kind == CredentialKind::kApiKey) return std::nullopt;
  const std::optional<WallTime>& until = caller.session->confirmed_until;
  if (until && *until > clock_.Now()) return std::nullopt;
  return ErrorResponse(
      403, "confirmation_required",
      "session tokens cannot create, rotate or hand over agent tokens or create API keys, or "
      "set another user's password, without a fresh confirmation; confirm your password "
      "(uplink login --confirm, or POST /api/v1/session/confirm) or use an API key");
}

ConnectionViewOptions ConsoleApi::ViewOptions() const {
  return ConnectionViewOptions{options_.active_window, options_.thresholds};
}

net::Response ConsoleApi::Readyz() {
  Status ping = store_.Ping();
  if (!ping.ok()) {
    log_.Warn("not ready: the store does not answer", {{"error", ping}});
    return ErrorResponse(503, "not_ready", "the store does not answer: " + ping.message());
  }
  return JsonResponse(200, {{"status", "ready"}});
}

net::Response ConsoleApi::Metrics() {
  auto connections = store_.ListAllConnections();
  if (connections.ok()) {
    std::map<ConnectionStatus, int> by_status;
    std::map<Liveness, int> by_liveness;
    WallTime now = clock_.Now();
    for (const Connection& stored : *connections) {
      Connection c = WithPresence(stored);
      ConnectionStatus status = ComputeStatus(c, now, options_.active_window);
      ++by_status[status];
      if (status != ConnectionStatus::kRevoked && status != ConnectionStatus::kExpired) {
        ++by_liveness[ComputeLiveness(c, now, options_.thresholds)];
      }
    }
    for (ConnectionStatus status : kAllConnectionStatuses) {
      metrics_.Set(kConnections, by_status[status],
                   {{"status", std::string(ConnectionStatusName(status))}});
    }
    for (Liveness liveness : kAllLiveness) {
      metrics_.Set(kConnectionsLiveness, by_liveness[liveness],
                   {{"liveness", std::string(LivenessName(liveness))}});
    }
  } else {
    log_.Warn("counting connections for /metrics failed", {{"error", connections.status()}});
  }
  CommandBroker::Stats commands = commands_.stats();
  metrics_.Set(kKubectlCommandsWaiting, static_cast<double>(commands.waiting_commands));
  metrics_.Set(kKubectlPollsWaiting, static_cast<double>(commands.waiting_polls));
  std::string text = metrics_.RenderText() +
                     commands_.pickup_latency().RenderText(
                         kKubectlPickupSeconds,
                         "Seconds from a kubectl command being queued to an agent taking it.");
  if (options_.upload_sink != nullptr) options_.upload_sink->RenderMetrics(text);
  net::Response response = net::Response::Text(200, std::move(text));
  response.headers.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  return response;
}

Result<net::Response> ConsoleApi::ListAudit(const net::Request& request,
                                            const RequestContext& caller) {
  AuditQuery query;
  std::int64_t limit = kDefaultAuditLimit;
  for (const auto& [key, value] : request.QueryParams()) {
    if (key == "limit") {
      UPLINK_ASSIGN_OR_RETURN(limit, ParseQueryInt("limit", value, 1, kMaxAuditLimit));
    } else if (key == "before") {
      UPLINK_ASSIGN_OR_RETURN(query.before_id, ParseQueryInt("before", value, 1, kMaxQueryInt));
    } else if (key == "connection_id") {
      if (!IsPlausibleId(value)) {
        return InvalidArgumentError(
            "connection_id must be a connection's id, as "
            "GET /api/v1/connections lists them");
      }
      query.target_id = value;
    } else if (key == "action") {
      bool known = false;
      std::string names;
      for (std::string_view action : kAuditActions) {
        known = known || action == value;
        names += names.empty() ? "" : ", ";
        names += action;
      }
      if (!known) return InvalidArgumentError("action must be one of " + names);
      query.action = value;
    } else {
      return InvalidArgumentError("unknown query parameter \"" + key.substr(0, 64) +
                                  "\"; the audit log takes limit, before, connection_id and "
                                  "action");
    }
  }
  // Members read what they did and what happened to their things; admins read everything.
  if (!caller.is_admin()) query.owner_id = caller.user.id;
  // One more than asked says whether there is a next page.
  query.limit = static_cast<int>(limit) + 1;
  UPLINK_ASSIGN_OR_RETURN(std::vector<AuditEvent> events, store_.ListAudit(query));
  json::value next_before = nullptr;
  if (events.size() > static_cast<size_t>(limit)) {
    events.resize(limit);
    next_before = events.back().id;
  }
  json::array list;
  for (const AuditEvent& event : events) list.push_back(AuditEventToJson(event));
  return JsonResponse(200, {{"events", std::move(list)}, {"next_before", next_before}});
}

}  // namespace uplink::console
