#include "console/api/agent_api.h"

#include <optional>

#include "common/files.h"
#include "common/gzip.h"
#include "common/text.h"
#include "console/api/upload_batch.h"
#include "console/replies.h"
#include "protocol/agent_api.h"
#include "protocol/inventory.h"
#include "protocol/upload.h"
#include "protocol/whoami.h"

namespace uplink::console {
namespace {

constexpr const char* kReportsAcceptedTotal = "uplink_console_reports_accepted_total";
constexpr const char* kReportsRefusedTotal = "uplink_console_reports_refused_total";
constexpr const char* kUploadsAcceptedTotal = "uplink_console_uploads_accepted_total";
constexpr const char* kUploadsRefusedTotal = "uplink_console_uploads_refused_total";
constexpr const char* kUploadRecordsStoredTotal = "uplink_console_upload_records_stored_total";
constexpr const char* kUploadDuplicatesTotal = "uplink_console_upload_duplicates_total";
constexpr const char* kUploadRecordsLostTotal = "uplink_console_upload_records_lost_total";
constexpr const char* kStreamRestartsTotal = "uplink_console_stream_restarts_total";
constexpr const char* kRecordsPrunedTotal = "uplink_console_records_pruned_total";

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

AgentApi::AgentApi(const ApiContext& context, NodesApi& nodes, KubectlApi& kubectl, RunsApi& runs)
    : ApiArea(context), nodes_(nodes), kubectl_(kubectl), runs_(runs) {
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
}

void AgentApi::Register(Routes& routes) {
  routes.AsyncAgentRoute(
      "POST", std::string(protocol::kInventoryPath),
      [this](const net::Request& request, const net::PathParams&, const Connection& connection,
             net::Reply reply) { ReportInventory(request, connection, std::move(reply)); },
      kReportsRefusedTotal);
  routes.AsyncAgentRoute(
      "POST", std::string(protocol::kUploadsPath),
      [this](const net::Request& request, const net::PathParams&, const Connection& connection,
             net::Reply reply) { ReceiveUpload(request, connection, std::move(reply)); },
      kUploadsRefusedTotal);
  routes.AgentRoute(
      "GET", std::string(protocol::kWhoAmIPath),
      [this](const net::Request&, const Connection& connection) { return WhoAmI(connection); });
}

void AgentApi::ReportInventory(const net::Request& request, const Connection& connection,
                               net::Reply reply) {
  AcceptInventory(request, connection,
                  [this, connection_id = connection.id, remote_address = request.remote_address,
                   cluster_uid = connection.cluster_uid,
                   reply = std::move(reply)](Result<net::Response> accepted) {
                    reply(Reply(CountReport(connection_id, remote_address, cluster_uid,
                                            std::move(accepted))));
                  });
}

Result<net::Response> AgentApi::CountReport(const std::string& connection_id,
                                            const std::string& remote_address,
                                            const std::optional<std::string>& bound_cluster_uid,
                                            Result<net::Response> accepted) {
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
               {"connection_id", connection_id},
               {"bound_cluster_uid", bound_cluster_uid.value_or("")},
               {"remote_address", remote_address}});
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
    log_.Warn("agent report refused", {{"connection_id", connection_id}, {"error", status}});
  }
  return status;
}

void AgentApi::AcceptInventory(const net::Request& request, const Connection& connection,
                               Answer answer) {
  std::string decompressed;
  auto decoded = AgentJsonBody(request, protocol::kMaxReportBytes, decompressed);
  if (auto* refusal = std::get_if<net::Response>(&decoded)) return answer(std::move(*refusal));
  const std::string_view body = std::get<std::string_view>(decoded);
  auto document =
      ParseJson(body, JsonLimits{protocol::kMaxReportBytes, protocol::kMaxReportDepth});
  if (!document.ok()) return answer(document.status());
  auto decoded_report = protocol::DecodeInventoryReport(*document);
  if (!decoded_report.ok()) return answer(decoded_report.status());
  auto report = std::make_shared<const InventoryReport>(std::move(decoded_report).value());

  // The store records connection.bind or connection.cluster_mismatch with its own detail;
  // who reported, from where, is known here.
  WallTime now = clock_.Now();
  AuditEvent audit = AgentEvent(connection, request.remote_address, now, "connection.bind", "ok");
  audit.detail = ToJson(json::object{{"cluster_uid", report->cluster_uid}});
  // A report that named its cluster in the header was bound (and logged) before this.
  const bool binds = !connection.cluster_uid && !request.headers.Get(protocol::kClusterUidHeader);
  StartStoreWrite();
  store_.AcceptReportThen(
      connection.id, connection.token_hash, report, now, std::move(audit),
      [this, connection_id = connection.id, expires_at = connection.expires_at, report, binds,
       now, answer = std::move(answer)](Status stored) {
        AnswerStoreWrite(answer, [&]() -> Result<net::Response> {
          if (!stored.ok()) return stored;
          presence_.Seen(connection_id, now);
          if (binds) {
            log_.Info("connection bound to its cluster",
                      {{"connection_id", connection_id}, {"cluster_uid", report->cluster_uid}});
          }
          log_.Debug("report accepted",
                     {{"connection_id", connection_id}, {"nodes", report->nodes.size()}});
          return JsonResponse(200, protocol::EncodeInventoryReply(protocol::InventoryReply{
                                       .accepted = true,
                                       .connection_id = connection_id,
                                       .report_interval_seconds = options_.report_interval.count(),
                                       .expires_at = expires_at}));
        });
      });
}

AgentApi::~AgentApi() { FinishStoreWrites(); }

void AgentApi::FinishStoreWrites() {
  std::unique_lock lock(writes_mutex_);
  writes_answered_.wait(lock, [this] { return writes_in_store_ == 0; });
}

void AgentApi::StartStoreWrite() {
  std::lock_guard lock(writes_mutex_);
  ++writes_in_store_;
}

void AgentApi::StoreWriteAnswered() {
  std::lock_guard lock(writes_mutex_);
  if (--writes_in_store_ == 0) writes_answered_.notify_all();
}

void AgentApi::AnswerStoreWrite(const Answer& answer,
                                const std::function<Result<net::Response>()>& build) {
  struct CountAnswered {
    AgentApi& api;
    ~CountAnswered() { api.StoreWriteAnswered(); }
  } count_answered{*this};
  std::optional<Result<net::Response>> response;
  try {
    response.emplace(build());
  } catch (const std::exception& e) {
    log_.Error("building the answer to a stored report or upload failed", {{"error", e.what()}});
    response.emplace(InternalError(
        "the console failed while answering; send again (records already stored are "
        "acknowledged as duplicates)"));
  }
  answer(std::move(*response));
}

void AgentApi::ReceiveUpload(const net::Request& request, const Connection& connection,
                             net::Reply reply) {
  AcceptUpload(request, connection,
               [this, connection_id = connection.id,
                reply = std::move(reply)](Result<net::Response> accepted) {
                 reply(Reply(CountUpload(connection_id, std::move(accepted))));
               });
}

Result<net::Response> AgentApi::CountUpload(const std::string& connection_id,
                                            Result<net::Response> reply) {
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
              {{"connection_id", connection_id}, {"status", http_status}, {"error", error}});
  }
  if (!reply.ok() && reply.status().code() == StatusCode::kConflict) {
    // The store's only conflict here: an earlier spool of the stream came back.
    return ErrorResponse(409, "spool_replaced", reply.status().message());
  }
  return reply;
}

void AgentApi::AcceptUpload(const net::Request& request, const Connection& connection,
                            Answer answer) {
  // The server refuses larger bodies before reading them; this covers a router used without it.
  if (request.body.size() > options_.max_upload_bytes) {
    return answer(ResourceExhaustedError(
        "the upload is " + std::to_string(request.body.size()) + " bytes; the limit is " +
        std::to_string(options_.max_upload_bytes) + "; send fewer records per upload"));
  }
  auto batch = std::make_shared<UploadBatch>();
  {
    // The body, its decompressed copy and the parsed document are gone before the store
    // transaction: only the batch is held while it waits and runs.
    std::string decompressed;
    auto decoded = AgentJsonBody(request, options_.max_upload_bytes, decompressed);
    if (auto* refusal = std::get_if<net::Response>(&decoded)) return answer(std::move(*refusal));
    const std::string_view body = std::get<std::string_view>(decoded);
    // Decoding copies what it keeps: the document's strings and containers need not be
    // allocated and freed one by one (most of the console's malloc and free under load). The
    // parser sizes each container once, so the arena holds about the document, no more.
    json::monotonic_resource arena(2 * body.size());
    auto document =
        ParseJson(body, JsonLimits{options_.max_upload_bytes, protocol::kMaxUploadDocumentDepth},
                  &arena);
    if (!document.ok()) return answer(document.status());
    auto decoded_upload = protocol::DecodeUpload(*document);
    if (!decoded_upload.ok()) return answer(decoded_upload.status());
    if (auto* invalid = std::get_if<protocol::InvalidRecord>(&*decoded_upload)) {
      if (invalid->kind == protocol::PayloadKind::kNodeSample) nodes_.CountInvalidSample();
      return answer(InvalidRecordResponse(invalid->sequence, invalid->message));
    }
    *batch = StoreBatchOf(std::move(std::get<protocol::DecodedUpload>(*decoded_upload)));
  }

  WallTime now = clock_.Now();
  // Written by the store only when the stream restarts, with its own action and detail.
  AuditEvent audit = AgentEvent(connection, request.remote_address, now, "stream.restart", "ok");
  RecordRetention retention;
  retention.max_age = options_.record_retention;
  retention.samples.raw_max_age = options_.sample_raw_retention;
  retention.samples.max_age = options_.sample_retention;
  StartStoreWrite();
  // The HTTP thread goes back to other requests meanwhile; the store runs the upload in its
  // next group commit and answers on its writer thread.
  store_.AcceptUploadThen(
      connection.id, connection.token_hash, batch, now, retention, std::move(audit),
      [this, connection, batch, now, answer = std::move(answer)](Result<UploadOutcome> outcome) {
        AnswerStoreWrite(answer, [&]() -> Result<net::Response> {
          if (!outcome.ok()) return outcome.status();
          return UploadStored(connection, *batch, *outcome, now);
        });
      });
}

net::Response AgentApi::UploadStored(const Connection& connection, const UploadBatch& batch,
                                     const UploadOutcome& outcome, WallTime now) {
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
  nodes_.CountNodeSamples(outcome, connection, batch.stream);
  kubectl_.CountSnapshots(outcome);
  runs_.CountRunItems(outcome);
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
  json::object reply =
      protocol::EncodeUploadReply(protocol::UploadReply{.stream = batch.stream,
                                                        .acked_through = outcome.acked_through,
                                                        .stored = outcome.stored,
                                                        .duplicates = outcome.duplicates,
                                                        .expires_at = connection.expires_at});
  if (batch.stream.starts_with(protocol::kNodeStreamPrefix)) {
    reply["plan"] = NodesApi::UploadPlan(outcome.node_plan);
  } else if (batch.stream.starts_with(protocol::kClusterStreamPrefix)) {
    reply["plan"] = KubectlApi::UploadPlan(outcome.namespace_scope);
  }
  return JsonResponse(200, reply);
}

Result<net::Response> AgentApi::WhoAmI(const Connection& connection) {
  // The authenticated no-op every agent can call: the reply is built in a stack arena rather
  // than with an allocation per field.
  unsigned char arena[1024];
  json::monotonic_resource resource(arena, sizeof arena);
  const json::object reply = protocol::EncodeWhoAmIReply(
      protocol::WhoAmIReply{.connection_id = connection.id,
                            .agent_name = connection.agent_name,
                            .cluster_name = connection.cluster_name,
                            .expires_at = connection.expires_at,
                            .report_interval_seconds = options_.report_interval.count()},
      &resource);
  return JsonResponse(200, reply);
}

}  // namespace uplink::console
