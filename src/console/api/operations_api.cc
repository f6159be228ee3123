#include "console/api/operations_api.h"

#include "console/api/api_objects.h"
#include "console/api/json_fields.h"
#include "console/replies.h"

namespace uplink::console {
namespace {

constexpr std::int64_t kDefaultAuditLimit = 100;
constexpr std::int64_t kMaxAuditLimit = 500;
// 18 digits: the most a query has ever taken.
constexpr std::int64_t kMaxQueryInt = 999'999'999'999'999'999;

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
                                              "kubectl.approval_expired",
                                              "offer.create",
                                              "offer.connected",
                                              "offer.review",
                                              "offer.suspend",
                                              "offer.resume",
                                              "offer.execution_create",
                                              "offer.execution_rotate",
                                              "offer.execution_disable",
                                              "offer.execution_revoke",
                                              "offer.execution_refused",
                                              "reservation.create",
                                              "reservation.extend",
                                              "reservation.command",
                                              "reservation.provisioning",
                                              "reservation.running",
                                              "reservation.stopping",
                                              "reservation.completed",
                                              "reservation.cancelled",
                                              "reservation.failed",
                                              "reservation.expired"};

}  // namespace

OperationsApi::OperationsApi(const ApiContext& context) : ApiArea(context) {}

void OperationsApi::Register(Routes& routes) {
  routes.Route("GET", "/healthz", [](const net::Request&, const net::PathParams&) {
    return JsonResponse(200, {{"status", "ok"}});
  });
  routes.Route("GET", "/readyz",
               [this](const net::Request&, const net::PathParams&) { return Readyz(); });
  routes.Route("GET", "/metrics",
               [this](const net::Request&, const net::PathParams&) { return Metrics(); });
  routes.UserRoute("GET", "/api/v1/audit", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) { return ListAudit(request, caller); });
}

void OperationsApi::AddToScrape(std::function<std::string()> scrape) {
  scrapes_.push_back(std::move(scrape));
}

net::Response OperationsApi::Readyz() {
  Status store = store_.CheckReady(options_.store_writer_stuck_after);
  if (!store.ok()) {
    log_.Warn("not ready: the store", {{"error", store}});
    return ErrorResponse(503, "not_ready", "the store is not ready: " + store.message());
  }
  // A replica that cannot hear the others would keep serving credentials they revoked.
  if (options_.replica_bus != nullptr) {
    Status bus = options_.replica_bus->Health();
    if (!bus.ok()) {
      log_.Warn("not ready: the replica bus is disconnected", {{"error", bus}});
      return ErrorResponse(503, "not_ready", bus.message());
    }
  }
  return JsonResponse(200, {{"status", "ready"}});
}

net::Response OperationsApi::Metrics() {
  std::string extra;
  for (const auto& scrape : scrapes_) extra += scrape();
  net::Response response = net::Response::Text(200, metrics_.RenderText() + extra);
  response.headers.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  return response;
}

Result<net::Response> OperationsApi::ListAudit(const net::Request& request,
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
