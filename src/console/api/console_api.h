// Every HTTP route of uplink-console: the user API (docs/api.md), the agent API
// (docs/protocol.md) and the operational endpoints (/healthz, /readyz, /metrics).
//
// The routes' handlers live by area: accounts_api.cc (sessions, users, API keys),
// connections_api.cc (connections, handovers), nodes_api.cc (node metrics and the node plan),
// kubectl_api.cc (kubectl commands, namespace scope, cluster snapshots), two_factor_api.cc
// (two-factor sign-in and the console settings), runs_api.cc (experiment runs),
// agent_api.cc (the agent's calls), and this class's own file (routing, authentication
// order, audit log, operations).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "console/api/agent_presence.h"
#include "console/api/authentication.h"
#include "console/api/connection_view.h"
#include "console/api/install_plan.h"
#include "console/api/json_fields.h"
#include "console/api/upload_batch.h"
#include "console/api/upload_sink.h"
#include "console/auth/password.h"
#include "console/auth/secret_box.h"
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
  // How often the agent calls noted in memory are written to the store (AgentPresence): the
  // most a console restart can make a connection's last call look older than it was.
  std::chrono::milliseconds presence_flush_interval{30'000};
  // How long a command that matched an approval rule waits for a decision, and how many of
  // a connection's may wait at once.
  std::chrono::seconds approval_lifetime{15 * 60};
  size_t max_pending_approvals = 16;
  // Whether the web console's session cookie is marked Secure: false only when the console
  // serves plain HTTP on loopback, where a browser would not send a Secure cookie back.
  bool secure_cookies = true;
  // The key that seals two-factor secrets (secret_box.h): `serve` reads it from the data
  // directory's two-factor.key. Empty: a key for this process only (tests), so secrets
  // enrolled under it do not survive a restart.
  Secret two_factor_key;
  // The agent images install commands pin by digest (serve --agent-image ...).
  AgentImages agent_images;
  // Told of every stored upload (serve --remote-write-url forwards node samples); not owned,
  // outlives the ConsoleApi. Null: nothing beyond the store.
  UploadSink* upload_sink = nullptr;
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
  // The agent calls noted in memory; tests call Flush().
  AgentPresence& presence() { return presence_; }
  // Ends approvals whose expiry passed and forgets old ones (docs/api.md, "Approval rules");
  // a thread does it every few seconds, tests call it after moving a FakeClock.
  void EndDueApprovals();
  // Stops that thread; commands still waiting end as the broker's destructor says.
  ~ConsoleApi();

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
  static constexpr const char* kKubectlApprovalsTotal = "uplink_console_kubectl_approvals_total";
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
  // The caller of a user route, or the reply that refuses it (authentication, body, access,
  // two-factor enrolment).
  std::variant<RequestContext, net::Response> AdmitUser(const net::Request& request,
                                                        std::string_view pattern, Access access);
  net::Response Reply(Result<net::Response> result);

  // The 403 confirmation_required reply for a session without a fresh confirmation.
  std::optional<net::Response> RequireConfirmation(const RequestContext& caller) const;
  ConnectionViewOptions ViewOptions() const;
  // Appends the audit event of a refusal; a store failure is logged, not returned.
  void RecordRefusal(const AuditEvent& event);
  // The cluster binding on every agent call (docs/protocol.md, "Cluster identity"): a call
  // whose Uplink-Cluster-UID header names another cluster than the connection's is refused
  // (409, audited); the first call that names one binds an unbound connection. The reply that
  // refuses the call, or nullopt.
  std::optional<net::Response> CheckClusterIdentity(const net::Request& request,
                                                    const Connection& connection,
                                                    std::string_view route);
  // The connection as users see it: the store's row with the agent calls noted since the
  // last flush.
  Connection WithPresence(Connection connection) const;

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

  // two-factor sign-in and the console settings (two_factor_api.cc)
  void RegisterTwoFactorRoutes();
  // 403 two_factor_enrollment_required when the console requires two-factor sign-in, the
  // caller has not set it up, and the route (`method` `pattern`) is not one that setting it
  // up needs.
  std::optional<net::Response> RequireTwoFactorEnrollment(const RequestContext& caller,
                                                          std::string_view method,
                                                          std::string_view pattern);
  // True when the console requires two-factor sign-in and `user` has not set it up.
  Result<bool> NeedsTwoFactorEnrollment(const User& user);
  // The second factor of a password sign-in (`code` or `recovery_code` from its body): nullopt
  // when the user has none; the reply that refuses the sign-in (two_factor_required, a wrong
  // code, 429), audited as `refusal` when it is a failure.
  std::variant<std::optional<SecondFactorUse>, net::Response> SignInSecondFactor(
      const User& user, const FieldReader& fields, const net::Request& request,
      AuditEvent refusal);
  Result<net::Response> TwoFactorStatus(const RequestContext& caller);
  Result<net::Response> BeginTwoFactor(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ConfirmTwoFactor(const net::Request& request, const RequestContext& caller);
  Result<net::Response> DisableTwoFactor(const net::Request& request, const RequestContext& caller);
  Result<net::Response> RegenerateRecoveryCodes(const net::Request& request,
                                                const RequestContext& caller);
  Result<net::Response> ResetTwoFactor(const std::string& id, const net::Request& request,
                                       const RequestContext& caller);
  Result<net::Response> ShowSettings(const RequestContext& caller);
  Result<net::Response> UpdateSettings(const net::Request& request, const RequestContext& caller);
  // Checks `code` or `recovery_code` of a body against `credential`: what to use up, or the
  // refusal (400, 401 invalid_two_factor_code audited as `refusal` with its reason, 429).
  std::variant<SecondFactorUse, net::Response> CheckSecondFactor(
      const User& user, const TwoFactorCredential& credential, const FieldReader& fields,
      const net::Request& request, AuditEvent refusal);
  // The caller's `password` (when they have one) and, when two-factor is enabled, a second
  // factor, for turning it off or replacing recovery codes (`during` names which in audit
  // events): what to use up, or the refusal.
  std::variant<std::optional<SecondFactorUse>, net::Response> ProveOwnFactors(
      const RequestContext& caller, const TwoFactorCredential& credential,
      const FieldReader& fields, const net::Request& request, std::string_view during);

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

  // the agent's chart repository and install commands (install_api.cc)
  net::Response ServeChart(const net::Request& request, std::string_view file);
  Result<net::Response> GenerateInstall(const std::string& id, const net::Request& request,
                                        const RequestContext& caller);

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
  Result<net::Response> ShowRightSizing(const std::string& id, const RequestContext& caller);
  void PollCommands(const net::Request& request, const Connection& connection, net::Reply reply);
  Result<net::Response> ReceiveCommandResult(const std::string& command_id,
                                             const net::Request& request,
                                             const Connection& connection);
  // The plan of the upload reply of a cluster/ stream; nullopt (logged) when the scope
  // cannot be read: the agent keeps its last plan.
  std::optional<json::object> ClusterPlan(const Connection& connection);

  // How a kubectl command ended, for its reply, its metric and its audit event.
  struct CommandOutcome {
    std::string outcome;   // the metric's label: completed, agent_timeout, not_picked_up, ...
    int http_status = 200;
    std::string error_code;  // the reply's, when http_status is not 200
    std::string message;
  };
  CommandOutcome OutcomeOf(CommandEnd& end) const;
  // `event` (a kubectl.run) with the command's detail; counts the outcome and logs it.
  AuditEvent CommandEndedEvent(AuditEvent event, const std::string& command_id,
                               const std::vector<std::string>& argv, const CommandEnd& end,
                               const CommandOutcome& outcome);

  // approval rules and commands waiting for approval (approvals_api.cc)
  // Records a command that matched `rule` as waiting for approval; the 202 reply.
  net::Response RequestApproval(const Connection& connection, const RequestContext& caller,
                                const std::vector<std::string>& argv, const ApprovalRule& rule);
  Result<net::Response> ListApprovalRules(const std::string& id, const RequestContext& caller);
  Result<net::Response> AddApprovalRule(const std::string& id, const net::Request& request,
                                        const RequestContext& caller);
  Result<net::Response> RemoveApprovalRule(const std::string& id, const std::string& rule_id,
                                           const RequestContext& caller);
  Result<net::Response> ListApprovals(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ShowCommand(const std::string& id, const std::string& command_id,
                                    const RequestContext& caller);
  Result<net::Response> DecideApproval(const std::string& command_id, const net::Request& request,
                                       const RequestContext& caller, bool approve);
  // Queues an approved command; its end is recorded with the approval.
  void RunApproved(const Connection& connection, const CommandApproval& approval);
  void ApprovalSweeperLoop();
  // Ends expired approvals; with `abandon_approved` (at start-up), approved commands too.
  void EndApprovals(bool abandon_approved);

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
  WallTime started_at_;  // the chart repository's index says its chart was added then
  log::Logger log_{"console.api"};
  metrics::Registry metrics_;
  PasswordHasher hasher_;
  SecretBox two_factor_box_;
  FailureGuard guard_;
  Authenticator auth_;
  net::Router router_;
  AgentPresence presence_;
  // Ends expired approvals; stopped by the destructor before anything below goes.
  std::mutex sweeper_mutex_;
  std::condition_variable sweeper_wake_;
  bool sweeper_stopping_ = false;
  std::thread approval_sweeper_;
  // Last: destroyed first, while what its callbacks use (store, metrics, log) still exists.
  CommandBroker commands_;
};

}  // namespace uplink::console
