#include "console/api/console_api.h"

#include <strings.h>

#include <map>

#include "common/crypto.h"
#include "common/files.h"
#include "common/gzip.h"
#include "common/json.h"
#include "console/api/errors.h"
#include "console/api/inventory_report.h"
#include "console/api/json_fields.h"

namespace uplink::console {
namespace {

constexpr const char* kRequestsTotal = "uplink_console_http_requests_total";
constexpr const char* kAuthFailuresTotal = "uplink_console_auth_failures_total";
constexpr const char* kReportsAcceptedTotal = "uplink_console_reports_accepted_total";
constexpr const char* kReportsRefusedTotal = "uplink_console_reports_refused_total";
constexpr const char* kConnections = "uplink_console_connections";

constexpr const char* kInventoryPath = "/api/v1/agent/inventory";

constexpr size_t kMaxNameChars = 63;
constexpr size_t kConnectionIdBytes = 8;  // 16 hex characters

net::Response JsonResponse(int status, const json::object& body) {
  return net::Response::Json(status, ToJson(body));
}

// Content codings are case-insensitive (RFC 9110 section 8.4.1): "GZIP" is gzip.
bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool IsJsonContentType(std::optional<std::string_view> content_type) {
  if (!content_type) return false;
  std::string_view media = TrimWhitespace(content_type->substr(0, content_type->find(';')));
  return media.size() == 16 && ::strncasecmp(media.data(), "application/json", 16) == 0;
}

net::Response UnsupportedMediaType() {
  return ErrorResponse(415, "unsupported_media_type",
                       "send the body as JSON with Content-Type: application/json");
}

bool IsConnectionId(std::string_view id) {
  if (id.size() != 2 * kConnectionIdBytes) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Trims, then requires 1-63 printable ASCII characters.
Result<std::string> ValidateName(std::string_view field, std::string_view raw) {
  std::string_view name = TrimWhitespace(raw);
  if (name.empty() || name.size() > kMaxNameChars) {
    return InvalidArgumentError(std::string(field) + " must be 1-" +
                                std::to_string(kMaxNameChars) + " characters long");
  }
  for (char c : name) {
    if (c < 0x20 || c > 0x7e) {
      return InvalidArgumentError(std::string(field) +
                                  " may hold only printable ASCII characters (letters, digits, "
                                  "spaces and punctuation)");
    }
  }
  return std::string(name);
}

// An empty body reads as {} so that "required" errors name the missing fields.
Result<json::object> ReadJsonObject(const net::Request& request) {
  if (request.body.empty()) return json::object();
  UPLINK_ASSIGN_OR_RETURN(json::value body,
                          ParseJson(request.body, JsonLimits{kMaxUserBodyBytes, 16}));
  if (!body.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  return std::move(body.get_object());
}

}  // namespace

size_t RequestBodyLimit(const net::Request& head) {
  if (head.method == "GET" || head.method == "HEAD") return 0;
  if (head.method == "POST" && head.Path() == kInventoryPath) return kMaxReportBytes;
  return kMaxUserBodyBytes;
}

ConsoleApi::ConsoleApi(Store& store, const Clock& clock, ConsoleOptions options)
    : store_(store), clock_(clock), options_(options) {
  metrics_.DeclareCounter(kRequestsTotal, "HTTP requests by route, method and status.");
  metrics_.DeclareCounter(kAuthFailuresTotal, "Refused credentials by kind and reason.");
  metrics_.DeclareCounter(kReportsAcceptedTotal, "Inventory reports stored.");
  metrics_.DeclareCounter(kReportsRefusedTotal,
                          "Inventory reports refused after authentication, by reason.");
  metrics_.DeclareGauge(kConnections, "Connections by status, computed at scrape time.");

  Route("GET", "/healthz", [](const net::Request&, const net::PathParams&) {
    return JsonResponse(200, {{"status", "ok"}});
  });
  Route("GET", "/readyz",
        [this](const net::Request&, const net::PathParams&) { return Readyz(); });
  Route("GET", "/metrics",
        [this](const net::Request&, const net::PathParams&) { return Metrics(); });

  auto reply = [](Result<net::Response> result) {
    return result.ok() ? std::move(result).value() : ErrorResponse(result.status());
  };
  UserRoute("POST", "/api/v1/connections",
            [this, reply](const net::Request& request, const net::PathParams&, const User& user) {
              return reply(CreateConnection(request, user));
            });
  UserRoute("GET", "/api/v1/connections",
            [this, reply](const net::Request&, const net::PathParams&, const User& user) {
              return reply(ListConnections(user));
            });
  UserRoute("GET", "/api/v1/connections/{id}",
            [this, reply](const net::Request&, const net::PathParams& params, const User& user) {
              const std::string& id = params.at("id");
              auto connection = OwnedConnection(id, user);
              if (!connection.ok()) return ErrorResponse(connection.status());
              return reply(ConnectionResponse(200, id, nullptr));
            });
  UserRoute("POST", "/api/v1/connections/{id}/rotate",
            [this, reply](const net::Request& request, const net::PathParams& params,
                          const User& user) {
              return reply(RotateToken(params.at("id"), request, user));
            });
  UserRoute("POST", "/api/v1/connections/{id}/revoke",
            [this, reply](const net::Request& request, const net::PathParams& params,
                          const User& user) {
              return reply(Revoke(params.at("id"), request, user));
            });

  Route("POST", kInventoryPath,
        [this](const net::Request& request, const net::PathParams&) {
          return ReportInventory(request);
        });

  router_.SetNotFound([this](const net::Request& request) {
    metrics_.Increment(kRequestsTotal,
                       {{"route", "unmatched"}, {"method", request.method}, {"status", "404"}});
    return ErrorResponse(404, "not_found",
                         "no such endpoint; the API is under /api/v1 (see docs/protocol.md)");
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
              [this, method, pattern, handler = std::move(handler)](
                  const net::Request& request, const net::PathParams& params) {
                net::Response response = handler(request, params);
                metrics_.Increment(kRequestsTotal, {{"route", pattern},
                                                    {"method", method},
                                                    {"status", std::to_string(response.status)}});
                return response;
              });
}

void ConsoleApi::UserRoute(const std::string& method, const std::string& pattern,
                           UserHandler handler) {
  Route(method, pattern,
        [this, handler = std::move(handler)](const net::Request& request,
                                             const net::PathParams& params) {
          AuthFailure failure = AuthFailure::kInvalidToken;
          auto user = AuthenticateUser(request, &failure);
          if (!user.ok()) {
            if (user.status().code() != StatusCode::kUnauthenticated) {
              log_.Error("authenticating a user failed", {{"error", user.status()}});
              return ErrorResponse(user.status());
            }
            std::string reason(AuthFailureCode(failure));
            metrics_.Increment(kAuthFailuresTotal, {{"kind", "api_key"}, {"reason", reason}});
            return AuthErrorResponse(user.status(), failure);
          }
          if (request.body.size() > kMaxUserBodyBytes) {
            return ErrorResponse(ResourceExhaustedError(
                "the request body is over the " + std::to_string(kMaxUserBodyBytes) +
                "-byte limit for this endpoint"));
          }
          if (!request.body.empty() && !IsJsonContentType(request.headers.Get("Content-Type"))) {
            return UnsupportedMediaType();
          }
          return handler(request, params, *user);
        });
}

Result<User> ConsoleApi::AuthenticateUser(const net::Request& request, AuthFailure* failure) {
  std::optional<Secret> token = BearerToken(request);
  if (!token) {
    *failure = AuthFailure::kMissingToken;
    return UnauthenticatedError("send your API key as \"Authorization: Bearer uk_...\"");
  }
  *failure = AuthFailure::kInvalidToken;
  Status invalid = UnauthenticatedError(
      "the API key is not valid; use the key printed by \"uplink-console init\" or create a "
      "new one");
  std::optional<std::string> prefix = LookupPrefix(*token, kApiKeyKind);
  if (!prefix) return invalid;
  UPLINK_ASSIGN_OR_RETURN(std::vector<ApiKey> candidates, store_.FindApiKeysByPrefix(*prefix));
  for (const ApiKey& key : candidates) {
    if (MatchesHash(*token, key.token_hash)) return store_.GetUser(key.user_id);
  }
  return invalid;
}

Result<Connection> ConsoleApi::AuthenticateAgent(const net::Request& request,
                                                 AuthFailure* failure) {
  std::optional<Secret> token = BearerToken(request);
  if (!token) {
    *failure = AuthFailure::kMissingToken;
    return UnauthenticatedError(
        "send the connection token as \"Authorization: Bearer agt_...\"; check that the "
        "agent's token file is mounted");
  }
  *failure = AuthFailure::kInvalidToken;
  Status invalid = UnauthenticatedError(
      "the token does not belong to any connection; copy the token of your connection (or "
      "rotate it) into the agent's Secret");
  std::optional<std::string> prefix = LookupPrefix(*token, kAgentTokenKind);
  if (!prefix) return invalid;
  UPLINK_ASSIGN_OR_RETURN(std::vector<Connection> candidates,
                          store_.FindConnectionsByTokenPrefix(*prefix));
  for (Connection& connection : candidates) {
    if (!MatchesHash(*token, connection.token_hash)) continue;
    if (connection.revoked_at) {
      *failure = AuthFailure::kRevoked;
      return UnauthenticatedError("this connection's token was revoked at " +
                                  FormatRfc3339(*connection.revoked_at) +
                                  "; create a new connection and install its token");
    }
    if (clock_.Now() >= connection.expires_at) {
      *failure = AuthFailure::kExpired;
      return UnauthenticatedError("this connection's token expired at " +
                                  FormatRfc3339(connection.expires_at) +
                                  "; rotate the token in the console and update the agent's "
                                  "Secret");
    }
    return std::move(connection);
  }
  return invalid;
}

net::Response ConsoleApi::AuthErrorResponse(const Status& status, AuthFailure failure) {
  net::Response response = ErrorResponse(401, AuthFailureCode(failure), status.message());
  response.headers.Set("WWW-Authenticate", "Bearer");
  return response;
}

Result<Connection> ConsoleApi::OwnedConnection(const std::string& id, const User& user) {
  Status not_found = NotFoundError("you have no connection with this id; list yours with "
                                   "GET /api/v1/connections");
  if (!IsConnectionId(id)) return not_found;
  auto connection = store_.GetConnection(id);
  if (!connection.ok()) {
    return connection.status().code() == StatusCode::kNotFound ? not_found : connection.status();
  }
  // Someone else's connection is indistinguishable from a missing one.
  if (connection->owner_id != user.id) return not_found;
  return connection;
}

Result<net::Response> ConsoleApi::ConnectionResponse(int http_status, const std::string& id,
                                                     const Secret* token) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, store_.GetConnection(id));
  UPLINK_ASSIGN_OR_RETURN(std::vector<Node> nodes, store_.ListNodes(id));
  json::object body = ConnectionToJson(
      connection, ComputeStatus(connection, clock_.Now(), options_.thresholds), &nodes);
  if (token) body["token"] = token->Reveal();
  net::Response response = JsonResponse(http_status, body);
  // Replies that carry a token must not be kept by any cache.
  response.headers.Set("Cache-Control", "no-store");
  return response;
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
    std::map<ConnectionStatus, int> counts;
    WallTime now = clock_.Now();
    for (const Connection& c : *connections) ++counts[ComputeStatus(c, now, options_.thresholds)];
    for (ConnectionStatus status : kAllConnectionStatuses) {
      metrics_.Set(kConnections, counts[status],
                   {{"status", std::string(ConnectionStatusName(status))}});
    }
  } else {
    log_.Warn("counting connections for /metrics failed", {{"error", connections.status()}});
  }
  net::Response response = net::Response::Text(200, metrics_.RenderText());
  response.headers.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  return response;
}

Result<net::Response> ConsoleApi::CreateConnection(const net::Request& request,
                                                   const User& user) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"agent_name", "cluster_name", "expires_at"}));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_agent, fields.RequiredString("agent_name", 1024));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_cluster, fields.RequiredString("cluster_name", 1024));
  UPLINK_ASSIGN_OR_RETURN(auto raw_expiry, fields.String("expires_at", 64));

  Connection connection;
  UPLINK_ASSIGN_OR_RETURN(connection.agent_name, ValidateName("agent_name", raw_agent));
  UPLINK_ASSIGN_OR_RETURN(connection.cluster_name, ValidateName("cluster_name", raw_cluster));
  WallTime now = clock_.Now();
  connection.expires_at = now + options_.default_token_lifetime;
  if (raw_expiry) {
    auto expiry = ParseRfc3339(*raw_expiry);
    if (!expiry.ok()) {
      return InvalidArgumentError("expires_at must be an RFC 3339 time such as "
                                  "\"2027-01-31T00:00:00Z\"");
    }
    if (*expiry <= now) return InvalidArgumentError("expires_at must be in the future");
    if (*expiry > now + options_.max_token_lifetime) {
      return InvalidArgumentError("expires_at may be at most " +
                                  std::to_string(options_.max_token_lifetime.count() / 24) +
                                  " days ahead; rotate the token before it expires instead");
    }
    connection.expires_at = *expiry;
  }
  MintedCredential credential = MintCredential(kAgentTokenKind);
  connection.id = HexEncode(RandomBytes(kConnectionIdBytes));
  connection.owner_id = user.id;
  connection.token_prefix = credential.lookup_prefix;
  connection.token_hash = credential.token_hash;
  connection.created_at = now;
  UPLINK_RETURN_IF_ERROR(store_.CreateConnection(connection));
  log_.Info("connection created", {{"connection_id", connection.id},
                                   {"user_id", user.id},
                                   {"cluster_name", connection.cluster_name},
                                   {"token_prefix", connection.token_prefix}});
  return ConnectionResponse(201, connection.id, &credential.token);
}

Result<net::Response> ConsoleApi::ListConnections(const User& user) {
  UPLINK_ASSIGN_OR_RETURN(std::vector<Connection> connections, store_.ListConnections(user.id));
  WallTime now = clock_.Now();
  json::array list;
  for (const Connection& c : connections) {
    UPLINK_ASSIGN_OR_RETURN(std::vector<Node> nodes, store_.ListNodes(c.id));
    list.push_back(ConnectionToJson(c, ComputeStatus(c, now, options_.thresholds), &nodes));
  }
  return JsonResponse(200, {{"connections", std::move(list)}});
}

Result<net::Response> ConsoleApi::RotateToken(const std::string& id, const net::Request& request,
                                              const User& user) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, user));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request));
  UPLINK_RETURN_IF_ERROR(FieldReader(body, "").OnlyFields({}));
  if (connection.revoked_at) {
    return FailedPreconditionError("this connection was revoked and cannot get a new token; "
                                   "create a new connection");
  }
  WallTime now = clock_.Now();
  // A future expiry carries over; an expired connection gets a fresh default lifetime.
  WallTime expires_at = connection.expires_at > now ? connection.expires_at
                                                    : now + options_.default_token_lifetime;
  MintedCredential credential = MintCredential(kAgentTokenKind);
  UPLINK_RETURN_IF_ERROR(
      store_.ReplaceToken(id, credential.lookup_prefix, credential.token_hash, expires_at));
  log_.Info("connection token rotated", {{"connection_id", id},
                                         {"user_id", user.id},
                                         {"old_token_prefix", connection.token_prefix},
                                         {"token_prefix", credential.lookup_prefix}});
  return ConnectionResponse(200, id, &credential.token);
}

Result<net::Response> ConsoleApi::Revoke(const std::string& id, const net::Request& request,
                                         const User& user) {
  UPLINK_ASSIGN_OR_RETURN(Connection connection, OwnedConnection(id, user));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request));
  UPLINK_RETURN_IF_ERROR(FieldReader(body, "").OnlyFields({}));
  UPLINK_RETURN_IF_ERROR(store_.RevokeConnection(id, clock_.Now()));
  log_.Info("connection revoked", {{"connection_id", id}, {"user_id", user.id}});
  return ConnectionResponse(200, id, nullptr);
}

net::Response ConsoleApi::ReportInventory(const net::Request& request) {
  AuthFailure failure = AuthFailure::kInvalidToken;
  auto connection = AuthenticateAgent(request, &failure);
  if (!connection.ok()) {
    if (connection.status().code() != StatusCode::kUnauthenticated) {
      log_.Error("authenticating an agent failed", {{"error", connection.status()}});
      return ErrorResponse(connection.status());
    }
    metrics_.Increment(kAuthFailuresTotal, {{"kind", "agent_token"},
                                            {"reason", std::string(AuthFailureCode(failure))}});
    log_.Warn("agent report refused: token not accepted",
              {{"reason", AuthFailureCode(failure)}, {"remote_address", request.remote_address}});
    return AuthErrorResponse(connection.status(), failure);
  }
  auto accepted = AcceptInventory(request, *connection);
  if (accepted.ok()) {
    if (accepted->status != 200) {
      metrics_.Increment(kReportsRefusedTotal, {{"reason", "unsupported_media_type"}});
    }
    return std::move(accepted).value();
  }

  const Status& status = accepted.status();
  std::string reason(status.code() == StatusCode::kConflict ? "cluster_mismatch"
                                                            : StatusCodeName(status.code()));
  metrics_.Increment(kReportsRefusedTotal, {{"reason", reason}});
  if (status.code() == StatusCode::kConflict) {
    // A valid token used on another cluster: a copied Secret or a reinstalled cluster.
    log_.Warn("security: report from another cluster refused",
              {{"event", "cluster_mismatch"},
               {"connection_id", connection->id},
               {"bound_cluster_uid", connection->cluster_uid.value_or("")},
               {"remote_address", request.remote_address}});
    return ErrorResponse(409, "cluster_mismatch", status.message());
  }
  if (HttpStatusFor(status.code()) >= 500) {
    log_.Error("storing a report failed", {{"connection_id", connection->id}, {"error", status}});
  } else {
    log_.Warn("agent report refused",
              {{"connection_id", connection->id}, {"error", status}});
  }
  return ErrorResponse(status);
}

Result<net::Response> ConsoleApi::AcceptInventory(const net::Request& request,
                                                  const Connection& connection) {
  if (!IsJsonContentType(request.headers.Get("Content-Type"))) return UnsupportedMediaType();
  std::string decompressed;
  std::string_view body = request.body;
  std::string_view encoding = TrimWhitespace(request.headers.Get("Content-Encoding").value_or(""));
  if (EqualsIgnoreCase(encoding, "gzip")) {
    auto inflated = GzipDecompress(request.body, kMaxReportBytes);
    if (!inflated.ok()) return inflated.status().WithContext("decompressing the gzip body");
    decompressed = std::move(inflated).value();
    body = decompressed;
  } else if (!encoding.empty() && !EqualsIgnoreCase(encoding, "identity")) {
    return ErrorResponse(415, "unsupported_media_type",
                         "Content-Encoding must be gzip or absent");
  }
  UPLINK_ASSIGN_OR_RETURN(json::value document, ParseJson(body, JsonLimits{kMaxReportBytes, 16}));
  UPLINK_ASSIGN_OR_RETURN(InventoryReport report, ParseInventoryReport(document));
  UPLINK_RETURN_IF_ERROR(
      store_.AcceptReport(connection.id, connection.token_hash, report, clock_.Now()));
  metrics_.Increment(kReportsAcceptedTotal);
  if (!connection.cluster_uid) {
    log_.Info("connection bound to its cluster",
              {{"connection_id", connection.id}, {"cluster_uid", report.cluster_uid}});
  }
  log_.Debug("report accepted",
             {{"connection_id", connection.id}, {"nodes", report.nodes.size()}});
  return JsonResponse(200, {{"accepted", true},
                            {"connection_id", connection.id},
                            {"report_interval_seconds", options_.report_interval.count()}});
}

}  // namespace uplink::console
