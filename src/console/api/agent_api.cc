// The agent's calls (docs/protocol.md): the inventory report and whoami. The connection token
// is checked by AgentRoute before these run.
#include <strings.h>

#include "common/files.h"
#include "common/gzip.h"
#include "console/api/console_api.h"
#include "console/api/errors.h"
#include "console/api/inventory_report.h"

namespace uplink::console {
namespace {

// Content codings are case-insensitive (RFC 9110 section 8.4.1): "GZIP" is gzip.
bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

Result<net::Response> ConsoleApi::ReportInventory(const net::Request& request,
                                                  const Connection& connection) {
  auto accepted = AcceptInventory(request, connection);
  if (accepted.ok()) {
    if (accepted->status != 200) {
      metrics_.Increment(kReportsRefusedTotal, {{"reason", "unsupported_media_type"}});
    } else {
      metrics_.Increment(kReportsAcceptedTotal);
    }
    return accepted;
  }
  const Status& status = accepted.status();
  bool mismatch = status.code() == StatusCode::kConflict;
  metrics_.Increment(
      kReportsRefusedTotal,
      {{"reason", mismatch ? std::string_view("cluster_mismatch") : StatusCodeName(status.code())}});
  if (mismatch) {
    // A valid token used on another cluster: a copied Secret or a reinstalled cluster. The
    // store recorded it in the audit log; the connection shows it under security_events.
    log_.Warn("security: report from another cluster refused",
              {{"event", "cluster_mismatch"},
               {"connection_id", connection.id},
               {"bound_cluster_uid", connection.cluster_uid.value_or("")},
               {"remote_address", request.remote_address}});
    return ErrorResponse(409, "cluster_mismatch", status.message());
  }
  if (status.code() == StatusCode::kUnauthenticated) {
    // A rotate, revoke or deactivation landed while the report was on its way.
    return UnauthorizedResponse("invalid_token",
                                "the connection's token was rotated or revoked, or its owner "
                                "deactivated, while this report was being sent; nothing was "
                                "stored");
  }
  if (HttpStatusFor(status.code()) < 500) {
    log_.Warn("agent report refused", {{"connection_id", connection.id}, {"error", status}});
  }
  return status;
}

Result<net::Response> ConsoleApi::AcceptInventory(const net::Request& request,
                                                  const Connection& connection) {
  if (!IsJsonContentType(request.headers.Get("Content-Type"))) {
    return ErrorResponse(415, "unsupported_media_type",
                         "send the body as JSON with Content-Type: application/json");
  }
  std::string decompressed;
  std::string_view body = request.body;
  std::string_view encoding = TrimWhitespace(request.headers.Get("Content-Encoding").value_or(""));
  if (EqualsIgnoreCase(encoding, "gzip")) {
    auto inflated = GzipDecompress(request.body, kMaxReportBytes);
    if (!inflated.ok()) return inflated.status().WithContext("decompressing the gzip body");
    decompressed = std::move(inflated).value();
    body = decompressed;
  } else if (!encoding.empty() && !EqualsIgnoreCase(encoding, "identity")) {
    return ErrorResponse(415, "unsupported_media_type", "Content-Encoding must be gzip or absent");
  }
  UPLINK_ASSIGN_OR_RETURN(json::value document, ParseJson(body, JsonLimits{kMaxReportBytes, 16}));
  UPLINK_ASSIGN_OR_RETURN(InventoryReport report, ParseInventoryReport(document));

  // The store records connection.bind or connection.cluster_mismatch with its own detail;
  // who reported, from where, is known here.
  WallTime now = clock_.Now();
  AuditEvent audit;
  audit.at = now;
  audit.actor_type = "agent";
  audit.actor_id = connection.id;
  audit.actor_label = connection.token_prefix;
  audit.credential = "agent_token";
  audit.action = "connection.bind";
  audit.target_type = "connection";
  audit.target_id = connection.id;
  audit.owner_id = connection.owner_id;
  audit.source_address = request.remote_address;
  audit.outcome = "ok";
  audit.detail = ToJson(json::object{{"cluster_uid", report.cluster_uid}});
  UPLINK_RETURN_IF_ERROR(
      store_.AcceptReport(connection.id, connection.token_hash, report, now, audit));
  if (!connection.cluster_uid) {
    log_.Info("connection bound to its cluster",
              {{"connection_id", connection.id}, {"cluster_uid", report.cluster_uid}});
  }
  log_.Debug("report accepted", {{"connection_id", connection.id}, {"nodes", report.nodes.size()}});
  return JsonResponse(200, {{"accepted", true},
                            {"connection_id", connection.id},
                            {"report_interval_seconds", options_.report_interval.count()}});
}

Result<net::Response> ConsoleApi::WhoAmI(const Connection& connection) {
  // The authenticated no-op every agent can call: the reply is built in a stack arena rather
  // than with an allocation per field.
  unsigned char arena[1024];
  json::monotonic_resource resource(arena, sizeof arena);
  const json::object reply({{"connection_id", connection.id},
                            {"agent_name", connection.agent_name},
                            {"cluster_name", connection.cluster_name},
                            {"expires_at", FormatRfc3339(connection.expires_at)},
                            {"report_interval_seconds", options_.report_interval.count()}},
                           &resource);
  return JsonResponse(200, reply);
}

}  // namespace uplink::console
