// The agent's calls (docs/protocol.md): the inventory report, spool uploads and whoami. The
// connection token is checked by AgentRoute before these run.

#include "common/cluster_identity.h"
#include "common/files.h"
#include "common/gzip.h"
#include "common/text.h"
#include "console/api/console_api.h"
#include "console/api/errors.h"
#include "console/api/inventory_report.h"
#include "console/api/kubectl_results.h"
#include "console/api/upload_batch.h"

namespace uplink::console {
namespace {

// The metric label of a refused upload: its reply's error code.
std::string_view UploadRefusalReason(int http_status) {
  switch (http_status) {
    case 400: return "invalid_request";
    case 401: return "invalid_token";
    case 404: return "not_found";
    case 409: return "spool_replaced";
    case 413: return "too_large";
    case 415: return "unsupported_media_type";
    case 422: return "invalid_record";
    case 503: return "unavailable";
    default: return "internal";
  }
}

// The agent behind an upload: its role is the stream's first part ("node/gpu-node-0001"),
// its instance the one it names, else the rest of the stream.
AgentIdentity UploadingAgent(const UploadBatch& batch) {
  std::string_view stream = batch.stream;
  size_t slash = stream.find('/');
  std::string_view role = stream.substr(0, slash);
  std::string_view instance = batch.agent_instance;
  if (instance.empty() && slash != std::string_view::npos) instance = stream.substr(slash + 1);
  return AgentIdentity{role, instance, batch.agent_version};
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
  std::string decompressed;
  auto decoded = AgentJsonBody(request, kMaxReportBytes, decompressed);
  if (auto* refusal = std::get_if<net::Response>(&decoded)) return std::move(*refusal);
  const std::string_view body = std::get<std::string_view>(decoded);
  UPLINK_ASSIGN_OR_RETURN(json::value document, ParseJson(body, JsonLimits{kMaxReportBytes, 16}));
  UPLINK_ASSIGN_OR_RETURN(InventoryReport report, ParseInventoryReport(document));

  // The store records connection.bind or connection.cluster_mismatch with its own detail;
  // who reported, from where, is known here.
  WallTime now = clock_.Now();
  AuditEvent audit = AgentEvent(connection, request.remote_address, now, "connection.bind", "ok");
  audit.detail = ToJson(json::object{{"cluster_uid", report.cluster_uid}});
  UPLINK_RETURN_IF_ERROR(
      store_.AcceptReport(connection.id, connection.token_hash, report, now, audit));
  // A report that named its cluster in the header was bound (and logged) before this.
  if (!connection.cluster_uid && !request.headers.Get(kClusterUidHeader)) {
    log_.Info("connection bound to its cluster",
              {{"connection_id", connection.id}, {"cluster_uid", report.cluster_uid}});
  }
  log_.Debug("report accepted", {{"connection_id", connection.id}, {"nodes", report.nodes.size()}});
  return JsonResponse(200, {{"accepted", true},
                            {"connection_id", connection.id},
                            {"report_interval_seconds", options_.report_interval.count()},
                            {"expires_at", FormatRfc3339(connection.expires_at)}});
}

Result<net::Response> ConsoleApi::ReceiveUpload(const net::Request& request,
                                                const Connection& connection) {
  auto reply = AcceptUpload(request, connection);
  int http_status = reply.ok() ? reply->status : HttpStatusFor(reply.status().code());
  if (http_status == 200) {
    metrics_.Increment(kUploadsAcceptedTotal);
    return reply;
  }
  metrics_.Increment(kUploadsRefusedTotal, {{"reason", UploadRefusalReason(http_status)}});
  if (!reply.ok() && reply.status().code() == StatusCode::kUnauthenticated) {
    // A rotate, revoke or deactivation landed while the upload was on its way.
    return UnauthorizedResponse("invalid_token", reply.status().message());
  }
  if (http_status < 500) {
    // Either a reply built here (415, 422) or an error the caller turns into one.
    std::string error = reply.ok() ? OneLineExcerpt(reply->body, 512) : reply.status().ToString();
    log_.Warn("agent upload refused",
              {{"connection_id", connection.id}, {"status", http_status}, {"error", error}});
  }
  if (!reply.ok() && reply.status().code() == StatusCode::kConflict) {
    // The store's only conflict here: an earlier spool of the stream came back.
    return ErrorResponse(409, "spool_replaced", reply.status().message());
  }
  return reply;
}

Result<net::Response> ConsoleApi::AcceptUpload(const net::Request& request,
                                               const Connection& connection) {
  // The server refuses larger bodies before reading them; this covers a router used without it.
  if (request.body.size() > options_.max_upload_bytes) {
    return ResourceExhaustedError("the upload is " + std::to_string(request.body.size()) +
                                  " bytes; the limit is " +
                                  std::to_string(options_.max_upload_bytes) +
                                  "; send fewer records per upload");
  }
  UploadBatch batch;
  {
    // The body, its decompressed copy and the parsed document are gone before the store
    // transaction: only the batch is held while it runs.
    std::string decompressed;
    auto decoded = AgentJsonBody(request, options_.max_upload_bytes, decompressed);
    if (auto* refusal = std::get_if<net::Response>(&decoded)) return std::move(*refusal);
    const std::string_view body = std::get<std::string_view>(decoded);
    UPLINK_ASSIGN_OR_RETURN(
        json::value document,
        ParseJson(body, JsonLimits{options_.max_upload_bytes, kMaxUploadDocumentDepth}));
    UPLINK_ASSIGN_OR_RETURN(ParsedUpload parsed, ParseUploadBatch(document));
    if (auto* invalid = std::get_if<InvalidRecord>(&parsed)) {
      if (invalid->node_sample) {
        metrics_.Increment(kNodeSamplesRefusedTotal, {{"reason", "invalid"}});
      }
      return InvalidRecordResponse(invalid->sequence, invalid->message);
    }
    batch = std::move(std::get<UploadBatch>(parsed));
  }

  WallTime now = clock_.Now();
  // Written by the store only when the stream restarts, with its own action and detail.
  AuditEvent audit = AgentEvent(connection, request.remote_address, now, "stream.restart", "ok");
  RecordRetention retention;
  retention.max_age = options_.record_retention;
  retention.samples.raw_max_age = options_.sample_raw_retention;
  retention.samples.max_age = options_.sample_retention;
  UPLINK_ASSIGN_OR_RETURN(
      UploadOutcome outcome,
      store_.AcceptUpload(connection.id, connection.token_hash, batch, now, retention, audit));

  metrics_.Increment(kUploadRecordsStoredTotal, {}, static_cast<double>(outcome.stored));
  metrics_.Increment(kUploadDuplicatesTotal, {}, static_cast<double>(outcome.duplicates));
  metrics_.Increment(kUploadRecordsLostTotal, {}, static_cast<double>(outcome.lost));
  if (outcome.records_pruned > 0) {
    metrics_.Increment(kRecordsPrunedTotal, {}, static_cast<double>(outcome.records_pruned));
  }
  // Committed: what forwards it may drop what it cannot take, never the upload.
  if (options_.upload_sink != nullptr) {
    options_.upload_sink->UploadStored(connection, batch, outcome);
  }
  CountNodeSamples(outcome, connection, batch.stream);
  if (outcome.snapshot_replaced) metrics_.Increment(kClusterSnapshotsStoredTotal);
  CountRunItems(outcome);
  if (outcome.restarted) {
    metrics_.Increment(kStreamRestartsTotal);
    log_.Warn("stream restarted: the agent's spool was recreated",
              {{"connection_id", connection.id},
               {"stream", batch.stream},
               {"spool_id", batch.spool_id},
               {"epoch", outcome.epoch}});
  }
  if (outcome.lost > 0) {
    log_.Info("records lost before reaching the console", {{"connection_id", connection.id},
                                                           {"stream", batch.stream},
                                                           {"lost", outcome.lost}});
  }
  if (log::Enabled(log::Level::kDebug)) {
    log_.Debug("upload accepted", {{"connection_id", connection.id},
                                   {"stream", batch.stream},
                                   {"stored", outcome.stored},
                                   {"duplicates", outcome.duplicates}});
  }
  presence_.Seen(connection.id, UploadingAgent(batch), now);
  json::object reply{{"stream", batch.stream},
                     {"acked_through", outcome.acked_through},
                     {"stored", outcome.stored},
                     {"duplicates", outcome.duplicates},
                     {"expires_at", FormatRfc3339(connection.expires_at)}};
  if (batch.stream.starts_with(kNodeStreamPrefix)) {
    // The upload is stored whatever happens here: without a plan the agent keeps its last.
    auto plan = store_.GetNodePlan(connection.id);
    if (plan.ok()) {
      json::array collectors;
      for (const std::string& name : plan->collectors) collectors.push_back(json::value(name));
      reply["plan"] = json::object{{"interval_seconds", plan->interval_seconds},
                                   {"collectors", std::move(collectors)}};
    } else {
      log_.Warn("reading the node plan for an upload reply failed",
                {{"connection_id", connection.id}, {"error", plan.status()}});
    }
  } else if (batch.stream.starts_with(kClusterStreamPrefix)) {
    if (auto plan = ClusterPlan(connection)) reply["plan"] = std::move(*plan);
  }
  return JsonResponse(200, reply);
}

void ConsoleApi::CountNodeSamples(const UploadOutcome& outcome, const Connection& connection,
                                  const std::string& stream) {
  auto add = [&](const char* name, std::int64_t count, const metrics::Labels& labels = {}) {
    if (count > 0) metrics_.Increment(name, labels, static_cast<double>(count));
  };
  add(kNodeSamplesStoredTotal, outcome.samples_stored);
  add(kNodeSamplesRefusedTotal, outcome.samples_too_old, {{"reason", "too_old"}});
  add(kNodeSamplesRefusedTotal, outcome.samples_in_future, {{"reason", "in_future"}});
  add(kNodeSamplesRefusedTotal, outcome.samples_same_time, {{"reason", "same_time"}});
  add(kNodeSampleValuesDroppedTotal, outcome.sample_values_dropped);
  add(kNodeSamplesPrunedTotal, outcome.samples_pruned);
  add(kNodeRollupsWrittenTotal, outcome.rollups_written);
  add(kNodeRollupsPrunedTotal, outcome.rollups_pruned);
  if (outcome.samples_too_old > 0 || outcome.samples_in_future > 0) {
    // Acknowledged, so the agent does not send them again, but their figures are not kept.
    log_.Warn("node samples outside the kept time range were not stored",
              {{"connection_id", connection.id},
               {"stream", stream},
               {"too_old", outcome.samples_too_old},
               {"in_future", outcome.samples_in_future}});
  }
  if (outcome.sample_values_dropped > 0) {
    log_.Warn("node sample values dropped: the node has too many series",
              {{"connection_id", connection.id},
               {"stream", stream},
               {"dropped", outcome.sample_values_dropped}});
  }
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
