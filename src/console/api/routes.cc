#include "console/api/routes.h"

#include <algorithm>

#include "console/api/json_fields.h"
#include "console/api/reservations_api.h"
#include "console/replies.h"
#include "console/web/web_assets.h"
#include "protocol/agent_api.h"
#include "protocol/commands.h"
#include "protocol/inventory.h"
#include "protocol/upload.h"
#include "protocol/workspace.h"

namespace uplink::console {
namespace {

constexpr const char* kRequestsTotal = "uplink_console_http_requests_total";
constexpr const char* kRequestsLostTotal = "uplink_console_http_requests_lost_total";
constexpr const char* kConnectionsOpen = "uplink_console_http_connections_open";
constexpr const char* kConnectionsTotal = "uplink_console_http_connections_total";

// What a caller who must set up two-factor may still do: see who they are, end or confirm
// their session, read the setting, set it up, and list their own connections, which show
// their agents refused and why (nothing else of them: no nodes, kubectl, records or changes).
constexpr std::string_view kOpenBeforeTwoFactor[] = {
    "GET /api/v1/me",
    "GET /api/v1/connections",
    "GET /api/v1/connections/{id}",
    "POST /api/v1/session/confirm",
    "POST /api/v1/session/logout",
    "GET /api/v1/web/session",
    "POST /api/v1/web/sign-out",
    "GET /api/v1/two-factor",
    "POST /api/v1/two-factor/enrollment",
    "POST /api/v1/two-factor/enrollment/confirm",
    "GET /api/v1/settings",
};

bool OpenBeforeTwoFactor(std::string_view method, std::string_view pattern) {
  for (std::string_view route : kOpenBeforeTwoFactor) {
    if (route.size() == method.size() + 1 + pattern.size() && route.starts_with(method) &&
        route[method.size()] == ' ' && route.ends_with(pattern)) {
      return true;
    }
  }
  return false;
}

// 413 and 415 for user API bodies; the server has already refused bodies over the route's
// limit, so the size check matters only for routers used without that server.
std::optional<net::Response> CheckUserBody(const net::Request& request) {
  const size_t limit = std::max(kMaxUserBodyBytes, RequestBodyLimit(request));
  if (request.body.size() > limit) {
    return ErrorResponse(ResourceExhaustedError("the request body is over the " +
                                                std::to_string(limit) +
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
  return RouteBodyLimit(head, protocol::kDefaultMaxUploadBytes);
}

size_t RouteBodyLimit(const net::Request& head, size_t max_upload_bytes) {
  if (head.method == "GET" || head.method == "HEAD") return 0;
  if (head.method == "POST") {
    std::string path = head.Path();
    if (path == protocol::kInventoryPath) return protocol::kMaxReportBytes;
    if (path == protocol::kUploadsPath) return max_upload_bytes;
    if (path.starts_with(protocol::kCommandsPathPrefix) &&
        path.ends_with(protocol::kCommandResultSuffix)) {
      return protocol::kMaxCommandResultBytes;
    }
    if (path == protocol::kWorkspaceSyncPath) return protocol::kMaxSyncRequestBytes;
    if (path.starts_with(protocol::kWorkspaceCommandsPathPrefix) &&
        path.ends_with(protocol::kWorkspaceOutputSuffix)) {
      return protocol::kMaxOutputRequestBytes;
    }
    if (path.starts_with("/api/v1/reservations/") && path.ends_with("/commands")) {
      return kMaxCommandRequestBytes;
    }
  }
  return kMaxUserBodyBytes;
}

Routes::Routes(const ApiContext& context, Authenticator& auth, net::Router& router)
    : ApiArea(context), auth_(auth), router_(router) {
  metrics_.DeclareCounter(kRequestsTotal, "HTTP requests by route, method and status.");
  metrics_.DeclareCounter(kRequestsLostTotal,
                          "HTTP requests that ended without a response, by reason: "
                          "read_timeout, client_closed (mid-request) or write_failed.");
  metrics_.DeclareGauge(kConnectionsOpen, "HTTP connections open now (long polls included).");
  metrics_.DeclareCounter(kConnectionsTotal,
                          "HTTP connections by outcome: accepted, or refused (closed at once "
                          "at --max-connections).");
}

void Routes::CountLost(std::string_view reason) {
  metrics_.Increment(kRequestsLostTotal, {{"reason", reason}});
}

void Routes::CountConnection(std::string_view event) {
  if (event == "closed") {
    metrics_.Increment(kConnectionsOpen, {}, -1);
    return;
  }
  if (event == "accepted") metrics_.Increment(kConnectionsOpen);
  metrics_.Increment(kConnectionsTotal, {{"outcome", event}});
}

void Routes::CountReply(std::string_view route, std::string_view method, int status) {
  metrics_.Increment(kRequestsTotal,
                     {{"route", route}, {"method", method}, {"status", std::to_string(status)}});
}

void Routes::SetFallbacks() {
  router_.SetNotFound([this](const net::Request& request) {
    // Every other page is the web console's: index.html for its client routes, or an asset.
    if (IsWebRequest(request)) {
      net::Response page = ServeWebFile(request, EmbeddedWebFile);
      CountReply("web", request.method, page.status);
      return page;
    }
    CountReply("unmatched", request.method, 404);
    return ErrorResponse(404, "not_found",
                         "no such endpoint; the API is under /api/v1 (see docs/api.md)");
  });
  router_.SetMethodNotAllowed([this](const net::Request& request, std::string allowed) {
    CountReply("unmatched", request.method, 405);
    return ErrorResponse(405, "method_not_allowed", "this endpoint accepts " + allowed);
  });
}

void Routes::Route(const std::string& method, const std::string& pattern, net::Handler handler,
                   Work work) {
  if (work == Work::kHashesPassword) {
    AsyncRoute(method, pattern,
               [this, handler = std::move(handler)](const net::Request& request,
                                                    const net::PathParams& params,
                                                    net::Reply reply) {
                 bool queued = hasher_.Submit([handler, request, params, reply] {
                   reply(handler(request, params));
                 });
                 if (queued) return;
                 net::Response busy = ErrorResponse(
                     503, "busy",
                     "too many sign-ins and password checks at once; try again in a second");
                 busy.headers.Set("Retry-After", "1");
                 reply(std::move(busy));
               });
    return;
  }
  router_.Add(method, pattern,
              [this, method, pattern, handler = std::move(handler)](const net::Request& request,
                                                                    const net::PathParams& params) {
                net::Response response = handler(request, params);
                CountReply(pattern, method, response.status);
                return response;
              });
}

void Routes::PublicRoute(const std::string& method, const std::string& pattern,
                         PublicHandler handler, Work work) {
  Route(
      method, pattern,
      [this, handler = std::move(handler)](const net::Request& request, const net::PathParams&) {
        if (auto refused = CheckUserBody(request)) return std::move(*refused);
        return Reply(handler(request));
      },
      work);
}

std::optional<net::Response> Routes::RequireTwoFactorEnrollment(const RequestContext& caller,
                                                                std::string_view method,
                                                                std::string_view pattern) {
  if (OpenBeforeTwoFactor(method, pattern)) return std::nullopt;
  auto needs = NeedsTwoFactorEnrollment(caller.user);
  if (!needs.ok()) return Reply(needs.status());
  if (!*needs) return std::nullopt;
  return ErrorResponse(403, "two_factor_enrollment_required",
                       "this console requires two-factor sign-in and you have not set it up; "
                       "until you do, your credentials can do nothing else. Set it up with "
                       "'uplink two-factor enroll' or on the web console's Two-factor page");
}

std::variant<RequestContext, net::Response> Routes::AdmitUser(const net::Request& request,
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

void Routes::UserRoute(const std::string& method, const std::string& pattern, Access access,
                       UserHandler handler, Work work) {
  Route(
      method, pattern,
      [this, pattern, access, handler = std::move(handler)](const net::Request& request,
                                                            const net::PathParams& params) {
        auto admitted = AdmitUser(request, pattern, access);
        if (auto* refusal = std::get_if<net::Response>(&admitted)) return std::move(*refusal);
        return Reply(handler(request, params, std::get<RequestContext>(admitted)));
      },
      work);
}

void Routes::AsyncRoute(const std::string& method, const std::string& pattern,
                        net::AsyncHandler handler) {
  router_.AddAsync(
      method, pattern,
      [this, method, pattern, handler = std::move(handler)](
          const net::Request& request, const net::PathParams& params, net::Reply reply) {
        handler(request, params,
                [this, method, pattern, reply = std::move(reply)](net::Response response) {
                  CountReply(pattern, method, response.status);
                  reply(std::move(response));
                });
      });
}

void Routes::AsyncUserRoute(const std::string& method, const std::string& pattern, Access access,
                            AsyncUserHandler handler) {
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

void Routes::AsyncAgentRoute(const std::string& method, const std::string& pattern,
                             AsyncAgentHandler handler, std::string_view refusals_metric) {
  AsyncRoute(method, pattern,
             [this, pattern, refusals_metric, handler = std::move(handler)](
                 const net::Request& request, const net::PathParams& params, net::Reply reply) {
               AgentAuthentication authentication = auth_.AuthenticateAgent(request);
               if (auto* refusal = std::get_if<net::Response>(&authentication)) {
                 reply(std::move(*refusal));
                 return;
               }
               const Connection& connection =
                   *std::get<std::shared_ptr<const Connection>>(authentication);
               if (auto refused =
                       CheckClusterIdentity(request, connection, pattern, refusals_metric)) {
                 reply(std::move(*refused));
                 return;
               }
               handler(request, params, connection, std::move(reply));
             });
}

void Routes::AgentRoute(const std::string& method, const std::string& pattern, AgentHandler handler,
                        std::string_view refusals_metric) {
  Route(method, pattern,
        [this, pattern, refusals_metric, handler = std::move(handler)](const net::Request& request,
                                                                       const net::PathParams&) {
          AgentAuthentication authentication = auth_.AuthenticateAgent(request);
          if (auto* refusal = std::get_if<net::Response>(&authentication)) {
            return std::move(*refusal);
          }
          const Connection& connection =
              *std::get<std::shared_ptr<const Connection>>(authentication);
          if (auto refused = CheckClusterIdentity(request, connection, pattern, refusals_metric)) {
            return std::move(*refused);
          }
          net::Response response = Reply(handler(request, connection));
          if (response.status >= 200 && response.status <= 299) {
            presence_.Seen(connection.id, clock_.Now());
          }
          return response;
        });
}

std::optional<net::Response> Routes::CheckClusterIdentity(const net::Request& request,
                                                          const Connection& connection,
                                                          std::string_view route,
                                                          std::string_view refusals_metric) {
  // Without the header (the node role before it knows its cluster, agents older than the
  // header) the call is taken on the token alone (docs/security.md, "Cluster binding").
  std::optional<std::string_view> uid = request.headers.Get(protocol::kClusterUidHeader);
  if (!uid) return std::nullopt;
  if (!protocol::IsClusterUid(*uid)) {
    return ErrorResponse(400, "invalid_request",
                         std::string(protocol::kClusterUidHeader) +
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
    if (!refusals_metric.empty()) {
      metrics_.Increment(refusals_metric, {{"reason", "cluster_mismatch"}});
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

}  // namespace uplink::console
