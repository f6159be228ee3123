// Every HTTP route of uplink-console: the user API (docs/api.md), the agent API
// (docs/protocol.md) and the operational endpoints (/healthz, /readyz, /metrics).
//
// The routes' handlers live by area: accounts_api.cc (sessions, users, API keys),
// connections_api.cc (connections, handovers), nodes_api.cc (node metrics and the node plan),
// kubectl_api.cc (kubectl commands, namespace scope, cluster snapshots), runs_api.cc
// (experiment runs), agent_api.cc (the
// agent's calls), and this class's own file (routing, authentication order, audit log,
// operations).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "console/api/authentication.h"
#include "console/api/connection_view.h"
#include "console/api/json_fields.h"
#include "console/api/upload_batch.h"
#include "console/auth/password.h"
#include "console/commands/command_broker.h"
#include "console/store/store.h"
#include "net/router.h"

namespace uplink::console {

struct ConsoleOptions {
  StatusThresholds thresholds;  // liveness: stale and offline after this much silence
  std::chrono::milliseconds active_window = kDefaultActiveWindow;  // status: active vs stale
  std::chrono::seconds report_interval{60};  // told to agents; the protocol allows 10-3600
  std::chrono::hours default_token_lifetime{90 * 24};
  std::chrono::hours max_token_lifetime{366 * 24};
  AuthRateLimits rate_limits;
  PasswordHashingOptions password_hashing;
  std::chrono::hours session_lifetime{12};
  std::chrono::minutes confirmation_window{5};
  std::chrono::minutes handover_lifetime{10};
  // The largest spool upload, compressed and decompressed.
  size_t max_upload_bytes = kDefaultMaxUploadBytes;
  // Uploaded records are deleted this long after the console received them.
  std::chrono::seconds record_retention{7 * 24 * 3600};
  // Node samples are kept raw this long after they were collected, then as 5-minute rollups
  // until `sample_retention`.
  std::chrono::seconds sample_raw_retention{48 * 3600};
  std::chrono::seconds sample_retention{7 * 24 * 3600};
  // How long a user's kubectl command waits for its result before the console gives up.
  std::chrono::seconds command_timeout{60};
  // Whether the web console's session cookie is marked Secure: false only when the console
  // serves plain HTTP on loopback, where a browser would not send a Secure cookie back.
  bool secure_cookies = true;
};

// The body limit for a request, from its method, path and headers alone (net::ServerOptions::
// body_limit_for): only the agent's inventory report (kMaxReportBytes), spool uploads
// (`max_upload_bytes`) and command results (kMaxCommandResultBytes) may be large; every other
// route takes at most kMaxUserBodyBytes, and GET and HEAD take no body. Applied before the
// body is read, so an unauthenticated client cannot make the console buffer a large one.
size_t RouteBodyLimit(const net::Request& head, size_t max_upload_bytes);
// RouteBodyLimit with the default upload limit.
size_t RequestBodyLimit(const net::Request& head);

class ConsoleApi {
 public:
  // `store` and `clock` must outlive this object. Starts the thread that gives up kubectl
  // commands after options.command_timeout; destroying this object ends the commands still
  // waiting.
  ConsoleApi(Store& store, const Clock& clock, ConsoleOptions options);
  ConsoleApi(const ConsoleApi&) = delete;
  ConsoleApi& operator=(const ConsoleApi&) = delete;

  // Serves every route; valid as long as this object. Some routes answer later, from another
  // thread (kubectl commands and the agent's long poll).
  const net::Router& router() const { return router_; }
  const metrics::Registry& metrics() const { return metrics_; }
  // The kubectl commands in flight; tests move a FakeClock and call ExpireDue().
  CommandBroker& commands() { return commands_; }

 private:
  // Who may call a user route. kSensitive: any user, but a session token needs a fresh
  // password confirmation.
  // kSensitive: an API key, or a session with a fresh password confirmation (docs/api.md).
  enum class Access { kAnyUser, kSensitive, kAdmin, kSensitiveAdmin };
  using UserHandler = std::function<Result<net::Response>(
      const net::Request&, const net::PathParams&, const RequestContext&)>;
  using AgentHandler = std::function<Result<net::Response>(const net::Request&, const Connection&)>;
  // A handler that answers through `reply`, exactly once, now or later from any thread.
  using AsyncUserHandler = std::function<void(const net::Request&, const net::PathParams&,
                                              const RequestContext&, net::Reply)>;
  using AsyncAgentHandler =
      std::function<void(const net::Request&, const net::PathParams&, const Connection&,
                         net::Reply)>;

  static constexpr const char* kReportsAcceptedTotal = "uplink_console_reports_accepted_total";
  static constexpr const char* kReportsRefusedTotal = "uplink_console_reports_refused_total";
  static constexpr const char* kUploadsAcceptedTotal = "uplink_console_uploads_accepted_total";
  static constexpr const char* kUploadsRefusedTotal = "uplink_console_uploads_refused_total";
  static constexpr const char* kUploadRecordsStoredTotal =
      "uplink_console_upload_records_stored_total";
  static constexpr const char* kUploadDuplicatesTotal =
      "uplink_console_upload_duplicates_total";
  static constexpr const char* kUploadRecordsLostTotal = "uplink_console_upload_records_lost_total";
  static constexpr const char* kStreamRestartsTotal = "uplink_console_stream_restarts_total";
  static constexpr const char* kRecordsPrunedTotal = "uplink_console_records_pruned_total";
  static constexpr const char* kNodeSamplesStoredTotal =
      "uplink_console_node_samples_stored_total";
  static constexpr const char* kNodeSamplesRefusedTotal =
      "uplink_console_node_samples_refused_total";
  static constexpr const char* kNodeSampleValuesDroppedTotal =
      "uplink_console_node_sample_values_dropped_total";
  static constexpr const char* kNodeSamplesPrunedTotal =
      "uplink_console_node_samples_pruned_total";
  static constexpr const char* kNodeRollupsWrittenTotal =
      "uplink_console_node_rollups_written_total";
  static constexpr const char* kNodeRollupsPrunedTotal =
      "uplink_console_node_rollups_pruned_total";
  static constexpr const char* kKubectlCommandsTotal = "uplink_console_kubectl_commands_total";
  static constexpr const char* kKubectlLateResultsTotal =
      "uplink_console_kubectl_late_results_total";
  static constexpr const char* kKubectlCommandsWaiting =
      "uplink_console_kubectl_commands_waiting";
  static constexpr const char* kKubectlPollsWaiting = "uplink_console_kubectl_polls_waiting";
  static constexpr const char* kKubectlPickupSeconds = "uplink_console_kubectl_pickup_seconds";
  static constexpr const char* kClusterSnapshotsStoredTotal =
      "uplink_console_cluster_snapshots_stored_total";
  static constexpr const char* kRunItemsTotal = "uplink_console_run_items_total";

  void RegisterRoutes();
  // Registers a route whose replies are counted by route and status.
  void Route(const std::string& method, const std::string& pattern, net::Handler handler);
  // A route without a bearer credential that reads a JSON body (sign-in, handover redeem).
  void PublicRoute(const std::string& method, const std::string& pattern,
                   std::function<Result<net::Response>(const net::Request&)> handler);
  // Authenticates the caller, checks the body's type, then `access`.
  void UserRoute(const std::string& method, const std::string& pattern, Access access,
                 UserHandler handler);
  // Authenticates the agent's connection token.
  void AgentRoute(const std::string& method, const std::string& pattern, AgentHandler handler);
  // As Route, UserRoute and AgentRoute, for handlers that answer later.
  void AsyncRoute(const std::string& method, const std::string& pattern,
                  net::AsyncHandler handler);
  void AsyncUserRoute(const std::string& method, const std::string& pattern, Access access,
                      AsyncUserHandler handler);
  void AsyncAgentRoute(const std::string& method, const std::string& pattern,
                       AsyncAgentHandler handler);
  // The caller of a user route, or the reply that refuses it (authentication, body, access).
  std::variant<RequestContext, net::Response> AdmitUser(const net::Request& request,
                                                        Access access);
  net::Response Reply(Result<net::Response> result);

  // The 403 confirmation_required reply for a session without a fresh confirmation.
  std::optional<net::Response> RequireConfirmation(const RequestContext& caller) const;
  ConnectionViewOptions ViewOptions() const;
  // Appends the audit event of a refusal; a store failure is logged, not returned.
  void RecordRefusal(const AuditEvent& event);

  // operations and audit (console_api.cc)
  net::Response Readyz();
  net::Response Metrics();
  Result<net::Response> ListAudit(const net::Request& request, const RequestContext& caller);

  // sessions, users, API keys (accounts_api.cc)
  Result<net::Response> SignIn(const net::Request& request);
  Result<net::Response> Me(const RequestContext& caller);
  Result<net::Response> ConfirmSession(const net::Request& request, const RequestContext& caller);
  Result<net::Response> Logout(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ListUsers(const net::Request& request);
  Result<net::Response> CreateUser(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ShowUser(const std::string& id, const RequestContext& caller);
  Result<net::Response> SetDeactivated(const std::string& id, const net::Request& request,
                                       const RequestContext& caller, bool deactivate);
  Result<net::Response> ChangePassword(const std::string& id, const net::Request& request,
                                       const RequestContext& caller);
  Result<net::Response> ListApiKeys(const RequestContext& caller);
  Result<net::Response> CreateApiKey(const net::Request& request, const RequestContext& caller);
  Result<net::Response> RevokeApiKey(const std::string& id, const net::Request& request,
                                     const RequestContext& caller);
  // NotFound unless the caller is `id` or an admin.
  Result<User> VisibleUser(const std::string& id, const RequestContext& caller);
  // The 429 or 401 reply when `password` is not `user`'s; nullopt when it is.
  std::optional<net::Response> CheckOwnPassword(const User& user, const Secret& password,
                                                const std::string& remote_address);

  // the web console's session cookie (web_api.cc)
  Result<net::Response> WebSignIn(const net::Request& request);
  Result<net::Response> WebSession(const RequestContext& caller);
  Result<net::Response> WebSignOut(const net::Request& request, const RequestContext& caller);

  // connections, handovers and uploaded records (connections_api.cc)
  Result<net::Response> CreateConnection(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ListConnections(const RequestContext& caller);
  Result<net::Response> ShowConnection(const std::string& id, const RequestContext& caller);
  Result<net::Response> RotateToken(const std::string& id, const net::Request& request,
                                    const RequestContext& caller);
  Result<net::Response> RevokeConnection(const std::string& id, const net::Request& request,
                                         const RequestContext& caller);
  Result<net::Response> RedeemHandover(const net::Request& request);
  Result<net::Response> ListStreamRecords(const std::string& id, const net::Request& request,
                                          const RequestContext& caller);
  // NotFound unless the caller owns it.
  Result<Connection> OwnedConnection(const std::string& id, const RequestContext& caller);
  // The connection as it is now, with `extra` fields (a token, a handover code) added.
  Result<net::Response> ConnectionReply(int http_status, const std::string& id,
                                        json::object extra = {});

  // node samples and the node plan (nodes_api.cc)
  Result<net::Response> ListSampleNodes(const std::string& id, const net::Request& request,
                                        const RequestContext& caller);
  Result<net::Response> NodeSeries(const std::string& id, const std::string& node,
                                   const net::Request& request, const RequestContext& caller);
  Result<net::Response> ShowNodePlan(const std::string& id, const RequestContext& caller);
  Result<net::Response> SetNodePlan(const std::string& id, const net::Request& request,
                                    const RequestContext& caller);
  // NotFound unless the caller owns it or is an admin (the plan is operations, not data).
  Result<Connection> PlanConnection(const std::string& id, const RequestContext& caller);
  // Counts what an accepted upload did with node samples.
  void CountNodeSamples(const UploadOutcome& outcome, const Connection& connection,
                        const std::string& stream);

  // kubectl commands, namespace scope and cluster snapshots (kubectl_api.cc)
  void RunKubectl(const std::string& id, const net::Request& request,
                  const RequestContext& caller, net::Reply reply);
  // The reply to a command that ended, audited and counted.
  net::Response KubectlEnded(const Connection& connection, const RequestContext& caller,
                             const std::vector<std::string>& argv, CommandEnd end);
  // Audits and counts a command refused before it was queued; returns `response`.
  net::Response KubectlRefused(const Connection& connection, const RequestContext& caller,
                               std::string_view outcome, std::string_view verb,
                               std::string_view reason, net::Response response);
  Result<net::Response> ShowNamespaces(const std::string& id, const RequestContext& caller);
  Result<net::Response> SetNamespaces(const std::string& id, const net::Request& request,
                                      const RequestContext& caller);
  Result<net::Response> ShowClusterSnapshot(const std::string& id, const RequestContext& caller);
  void PollCommands(const net::Request& request, const Connection& connection, net::Reply reply);
  Result<net::Response> ReceiveCommandResult(const std::string& command_id,
                                             const net::Request& request,
                                             const Connection& connection);
  // The plan of the upload reply of a cluster/ stream; nullopt (logged) when the scope
  // cannot be read: the agent keeps its last plan.
  std::optional<json::object> ClusterPlan(const Connection& connection);

  // experiment runs (runs_api.cc)
  Result<net::Response> ListRuns(const std::string& id, const net::Request& request,
                                 const RequestContext& caller);
  Result<net::Response> ShowRun(const std::string& id, const std::string& run_id,
                                const net::Request& request, const RequestContext& caller);
  // Counts what an accepted upload did with experiment runs.
  void CountRunItems(const UploadOutcome& outcome);

  // the agent's calls (agent_api.cc)
  Result<net::Response> ReportInventory(const net::Request& request, const Connection& connection);
  Result<net::Response> AcceptInventory(const net::Request& request, const Connection& connection);
  Result<net::Response> WhoAmI(const Connection& connection);
  // Counts the outcome of AcceptUpload.
  Result<net::Response> ReceiveUpload(const net::Request& request, const Connection& connection);
  Result<net::Response> AcceptUpload(const net::Request& request, const Connection& connection);

  Store& store_;
  const Clock& clock_;
  ConsoleOptions options_;
  log::Logger log_{"console.api"};
  metrics::Registry metrics_;
  PasswordHasher hasher_;
  FailureGuard guard_;
  Authenticator auth_;
  net::Router router_;
  // Last: destroyed first, while what its callbacks use (store, metrics, log) still exists.
  CommandBroker commands_;
};

}  // namespace uplink::console
