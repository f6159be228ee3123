// The SQL Store: the store's SQL and rules, written once, over a sql::Database engine (SQLite,
// the embedded default, or PostgreSQL, shared by several console replicas). Prepared
// statements are kept for the life of the store; one connection, serialised by a mutex, and
// one writer thread that runs every write transaction, many to a commit (WriteTransaction).
//
// Every change runs in a write transaction (sql::Database::BeginWrite: the engine's write
// lock) together with its audit event, so a second process on the same database (init racing
// serve, another replica) waits for the lock instead of reading a row that is about to
// change. Emails are stored lower-cased (ASCII, as SQLite's lower() does). Revoking
// something already revoked keeps the first time, changes nothing and records no audit event:
// the log shows only changes that happened.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/json_fwd.h"
#include "common/log.h"
#include "console/store/series_id_cache.h"
#include "console/store/sql/connection_pool.h"
#include "console/store/store.h"

namespace uplink::console {

struct StoredAgentToken;

namespace sql {
class Database;
class ReconnectGate;
class Statement;
}  // namespace sql

class SqlStore : public Store {
 public:
  // Applies pending schema migrations. Refuses, with FailedPrecondition, a database written
  // by a newer uplink-console. `lookups`, more connections to the same database, one caller
  // to a connection at a time, are where reads that need only committed rows run
  // (ReadOnLookup), so that they wait neither behind the write transactions of the first nor
  // behind each other, and hold no write back. On PostgreSQL authentication reads its rows
  // there too, since nothing is cached; on SQLite (read-only connections, OpenSqliteReader)
  // it reads through its cache, under the writer's lock, which keeps the cache coherent.
  // `reconnect_gate`: the one the PostgreSQL connections share, whose series RenderMetrics
  // adds.
  static Result<std::unique_ptr<SqlStore>> Open(
      std::unique_ptr<sql::Database> database,
      std::vector<std::unique_ptr<sql::Database>> lookups = {},
      std::shared_ptr<const sql::ReconnectGate> reconnect_gate = nullptr);
  // An SQLite database file, created (mode 0600) if needed, with two read-only lookups.
  static Result<std::unique_ptr<SqlStore>> OpenSqlite(const std::string& path);
  // The schema version this binary writes.
  static int LatestSchemaVersion();

  ~SqlStore() override;
  SqlStore(const SqlStore&) = delete;
  SqlStore& operator=(const SqlStore&) = delete;

  Status CheckReady(std::chrono::milliseconds writer_stuck_after) override;
  void RenderMetrics(std::string& out) const override;

  Status CreateUser(const User& user, const AuditEvent& audit) override;
  Result<User> GetUser(const std::string& id) override;
  Result<User> FindUserByEmail(const std::string& email) override;
  Result<std::vector<User>> ListUsers() override;
  Result<std::int64_t> CountUsers() override;
  Status SetUserDeactivated(const std::string& id, std::optional<WallTime> at,
                            const AuditEvent& audit) override;
  Status SetPassword(const std::string& id, const std::string& password_hash,
                     const std::string& keep_session_id, WallTime at,
                     const AuditEvent& audit) override;

  Status CreateApiKey(const ApiKey& key, const AuditEvent& audit) override;
  Status CreateUserWithApiKey(const User& user, const ApiKey& key,
                              const AuditEvent& audit) override;
  Result<ApiKey> GetApiKey(const std::string& id) override;
  Result<std::vector<ApiKey>> ListApiKeys(const std::string& user_id) override;
  Result<std::vector<ApiKey>> FindApiKeysByPrefix(const std::string& prefix) override;
  Status RevokeApiKey(const std::string& id, WallTime at, const AuditEvent& audit) override;

  Status CreateSession(const Session& session, const AuditEvent& audit) override;
  Result<std::vector<Session>> FindSessionsByPrefix(const std::string& prefix) override;
  // FailedPrecondition for a revoked session (a logout that landed first wins).
  Status ConfirmSession(const std::string& id, WallTime until, const AuditEvent& audit) override;
  Status RevokeSession(const std::string& id, WallTime at, const AuditEvent& audit) override;

  Status CreateConnection(const Connection& connection, const AuditEvent& audit) override;
  Status CreateConnectionWithHandover(const Connection& connection, const Handover& handover,
                                      const AuditEvent& audit) override;
  Result<Connection> GetConnection(const std::string& id) override;
  Result<std::vector<Connection>> ListConnections(const std::string& owner_id) override;
  Result<std::vector<Connection>> ListAllConnections() override;
  Result<std::vector<ConnectionLifecycle>> ListConnectionLifecycles() override;
  Result<ConnectionRows> FindConnectionsByTokenPrefix(const std::string& prefix) override;
  // Earlier unredeemed handovers are marked superseded at `audit.at`.
  Status ReplaceToken(const std::string& id, const std::string& token_prefix,
                      const std::string& token_hash, WallTime expires_at,
                      const std::optional<Handover>& handover, const AuditEvent& audit) override;
  Status RevokeConnection(const std::string& id, WallTime at, const AuditEvent& audit) override;

  Result<std::vector<Handover>> FindHandoversByPrefix(const std::string& prefix) override;
  Result<std::optional<Handover>> LatestHandover(const std::string& connection_id) override;
  Result<HandoverRedemption> RedeemHandover(const std::string& handover_id, WallTime now,
                                            const std::string& token_prefix,
                                            const std::string& token_hash,
                                            const AuditEvent& audit) override;

  // Also refuses (Unauthenticated, nothing written) a report whose connection's owner was
  // deactivated meanwhile.
  Status AcceptReport(const std::string& connection_id, const std::string& token_hash,
                      const InventoryReport& report, WallTime received_at,
                      const AuditEvent& audit) override;
  void AcceptReportThen(std::string connection_id, std::string token_hash,
                        std::shared_ptr<const InventoryReport> report, WallTime received_at,
                        AuditEvent audit, std::function<void(Status)> done) override;
  Result<std::vector<Node>> ListNodes(const std::string& connection_id) override;
  // Keeps the credential cache: last-seen times are nothing authentication reads.
  Status RecordPresence(const PresenceUpdate& update) override;
  // Also refuses (Unauthenticated) a connection whose owner was deactivated meanwhile.
  Status BindCluster(const std::string& connection_id, const std::string& token_hash,
                     const std::string& cluster_uid, const AuditEvent& audit) override;
  Result<std::vector<AgentSeen>> ListAgents(const std::string& connection_id,
                                            int limit) override;

  // Also refuses (Unauthenticated, nothing written) an upload whose connection's owner was
  // deactivated meanwhile. Keeps the credential cache: an upload changes nothing
  // authentication reads.
  Result<UploadOutcome> AcceptUpload(const std::string& connection_id,
                                     const std::string& token_hash, const UploadBatch& batch,
                                     WallTime received_at, const RecordRetention& retention,
                                     const AuditEvent& audit) override;
  void AcceptUploadThen(std::string connection_id, std::string token_hash,
                        std::shared_ptr<const UploadBatch> batch, WallTime received_at,
                        RecordRetention retention, AuditEvent audit, UploadDone done) override;
  Result<std::vector<StreamSummary>> ListStreams(const std::string& connection_id) override;
  Result<RecordPage> ListStreamRecords(const RecordQuery& query) override;

  // Node samples (sql_samples.cc). Each sample is one row whose points are packed into a
  // blob of (series id, value) pairs; rollups likewise, one row per node and 5-minute bucket.
  Result<NodePlan> GetNodePlan(const std::string& connection_id) override;
  Status SetNodePlan(const std::string& connection_id, const NodePlan& plan,
                     const AuditEvent& audit) override;
  Result<SampleNodePage> ListSampleNodes(const std::string& connection_id,
                                         const std::string& after_node, int limit) override;
  Result<std::vector<SeriesPoints>> ReadSamplePoints(const std::string& connection_id,
                                                     const std::string& node,
                                                     std::span<const SampleMetric> metrics,
                                                     WallTime from, WallTime to) override;
  Result<RollupRead> ReadSampleRollups(const std::string& connection_id, const std::string& node,
                                       std::span<const SampleMetric> metrics, WallTime from,
                                       WallTime to) override;

  // Install plans (sql_install.cc).
  Result<std::optional<InstallPlan>> GetInstallPlan(const std::string& connection_id) override;
  Status SetInstallPlan(const std::string& connection_id, const InstallPlan& plan,
                        const AuditEvent& audit) override;

  // Namespace scopes and cluster snapshots (sql_cluster.cc).
  Result<NamespaceScope> GetNamespaceScope(const std::string& connection_id) override;
  Status SetNamespaceScope(const std::string& connection_id,
                           const std::vector<std::string>& namespaces,
                           const AuditEvent& audit) override;
  Result<std::optional<ClusterSnapshot>> GetClusterSnapshot(
      const std::string& connection_id) override;
  Status CreateConnectionWithScope(const Connection& connection,
                                   const std::optional<Handover>& handover,
                                   const std::vector<std::string>& namespaces,
                                   const AuditEvent& audit) override;
  Result<std::vector<PodUsageSummary>> SummarizePodUsage(const std::string& connection_id,
                                                         WallTime since) override;

  // Approval rules and approvals (sql_approvals.cc).
  Result<std::vector<ApprovalRule>> ListApprovalRules(const std::string& connection_id) override;
  Status AddApprovalRule(const ApprovalRule& rule, const AuditEvent& audit) override;
  Status RemoveApprovalRule(const std::string& connection_id, const std::string& rule_id,
                            const AuditEvent& audit) override;
  Status CreateApproval(const CommandApproval& approval, size_t max_pending,
                        const AuditEvent& audit) override;
  Result<CommandApproval> GetApproval(const std::string& id) override;
  Result<std::vector<CommandApproval>> ListApprovals(const ApprovalQuery& query) override;
  Result<CommandApproval> DecideApproval(const std::string& id, bool approve,
                                         const std::string& reason,
                                         const AuditEvent& audit) override;
  Status FinishApproval(const std::string& id, const ApprovalResult& result,
                        const AuditEvent& audit) override;
  Result<std::int64_t> EndApprovals(WallTime now, bool abandon_approved,
                                    const AuditEvent& expired_event,
                                    const AuditEvent& abandoned_event) override;

  // Two-factor sign-in and console settings (sql_two_factor.cc). The settings are cached
  // (authenticating every user request reads them) until SetConsoleSettings.
  Result<std::optional<TwoFactorCredential>> GetTwoFactor(const std::string& user_id) override;
  Result<std::vector<RecoveryCode>> ListUnusedRecoveryCodes(const std::string& user_id) override;
  Status BeginTwoFactor(const TwoFactorCredential& pending, const AuditEvent& audit) override;
  Status EnableTwoFactor(const std::string& user_id, std::int64_t step,
                         const std::vector<RecoveryCode>& codes,
                         const AuditEvent& audit) override;
  Status DisableTwoFactor(const std::string& user_id, const std::optional<SecondFactorUse>& use,
                          const AuditEvent& audit) override;
  Status ReplaceRecoveryCodes(const std::string& user_id, const SecondFactorUse& use,
                              const std::vector<RecoveryCode>& codes,
                              const AuditEvent& audit) override;
  Status CreateSessionWithSecondFactor(const Session& session, const SecondFactorUse& use,
                                       const AuditEvent& audit) override;
  Result<ConsoleSettings> GetConsoleSettings() override;
  Status SetConsoleSettings(const ConsoleSettings& settings, const AuditEvent& audit) override;

  // Experiment runs (sql_runs.cc).
  Result<RunPage> ListRuns(const RunQuery& query) override;
  Result<RunFacets> ListRunFacets(const std::string& connection_id) override;
  Result<StoredRun> GetRun(const std::string& connection_id, const std::string& run_id) override;
  Result<std::vector<RunMetric>> ListRunMetrics(const std::string& connection_id,
                                                const std::string& run_id) override;
  Result<std::vector<RunHistory>> ReadRunHistory(const std::string& connection_id,
                                                 const std::string& run_id,
                                                 const std::vector<std::string>& metrics,
                                                 size_t max_points) override;
  Result<std::vector<RunProblem>> ListRunProblems(const std::string& connection_id,
                                                  int limit) override;

  // Workspace execution (sql_workspace.cc).
  Status CreateOffer(const Offer& offer, const Connection& connection,
                     const AuditEvent& connection_audit, const AuditEvent& offer_audit) override;
  Result<Offer> GetOffer(const std::string& id) override;
  Result<std::vector<Offer>> ListOffers(const std::string& owner_id) override;
  Status SaveOfferReview(const std::string& offer_id, OfferState expected,
                         const OfferReview& review, OfferState state,
                         const AuditEvent& audit) override;
  Status SetOfferState(const std::string& offer_id, OfferState expected, OfferState state,
                       const AuditEvent& audit) override;
  Status EnableExecution(const std::string& offer_id, const ExecutionSettings& settings,
                         const std::optional<ExecutionCredential>& credential,
                         const AuditEvent& audit) override;
  Status DisableExecution(const std::string& offer_id, bool revoke_credential,
                          const AuditEvent& audit) override;
  Result<std::vector<ExecutionCredential>> FindExecutionCredentialsByPrefix(
      const std::string& lookup_prefix) override;
  Status BindExecutionCluster(const std::string& offer_id, const std::string& credential_hash,
                              const std::string& cluster_uid, const AuditEvent& audit) override;
  Result<Reservation> CreateReservation(const Reservation& reservation,
                                        const std::vector<PlacementCandidate>& candidates,
                                        const AuditEvent& audit) override;
  Result<Reservation> GetReservation(const std::string& id) override;
  Result<std::vector<Reservation>> ListReservations(const ReservationQuery& query) override;
  Result<Reservation> StopReservation(const std::string& id, const std::string& reason,
                                      const AuditEvent& audit) override;
  Result<Reservation> ExtendReservation(const std::string& id, WallTime expires_at,
                                        const AuditEvent& audit) override;
  Result<std::int64_t> ExpireOverdueReservations(WallTime now, std::chrono::seconds grace,
                                                 const AuditEvent& audit) override;
  Result<std::vector<std::string>> ApplyWorkspaceSync(const std::string& offer_id,
                                                      const protocol::WorkspaceSync& sync,
                                                      WallTime now,
                                                      const AuditEvent& audit) override;
  Result<WorkspaceWork> ReadWorkspaceWork(const std::string& offer_id,
                                          size_t max_commands) override;
  Status CreateSshGrant(const SshGrant& grant, const AuditEvent& audit) override;
  Result<std::vector<SshGrant>> ListSshGrants(const std::string& reservation_id) override;
  Result<SshHostKeyCheck> RecordSshCapability(const std::string& reservation_id,
                                              const std::string& host_key,
                                              const AuditEvent& audit) override;
  Status RecordSshHandover(const std::string& reservation_id, const std::string& host_key,
                           WallTime at) override;
  Status AddTransferUsed(const std::string& reservation_id, std::int64_t bytes) override;
  Result<SshGrant> RevokeSshGrant(const std::string& reservation_id, const std::string& grant_id,
                                  const std::string& by, const AuditEvent& audit) override;
  Status CreateWorkspaceCommand(const WorkspaceCommandRecord& command,
                                const AuditEvent& audit) override;
  Result<WorkspaceCommandRecord> GetWorkspaceCommand(const std::string& id) override;
  Result<std::vector<WorkspaceCommandRecord>> ListWorkspaceCommands(
      const std::string& reservation_id, int limit) override;
  Result<std::string> ReadCommandOutput(const std::string& id, std::int64_t offset,
                                        size_t max_bytes) override;
  Result<OutputAck> AppendCommandOutput(const std::string& offer_id,
                                        const std::string& command_id,
                                        const protocol::WorkspaceOutput& output,
                                        WallTime now) override;

  Status AppendAudit(const AuditEvent& event) override;
  Result<std::vector<AuditEvent>> ListAudit(const AuditQuery& query) override;

 private:
  class Statement;
  using Binder = std::function<void(Statement&)>;
  using RowReader = std::function<void(const Statement&)>;

  SqlStore(std::unique_ptr<sql::Database> database,
           std::vector<std::unique_ptr<sql::Database>> lookups,
           std::shared_ptr<const sql::ReconnectGate> reconnect_gate);

  Status Migrate();
  Status Exec(const char* sql);
  Result<sql::Statement*> Prepare(std::string_view sql);
  // The last failure of the database, as a Status saying `what` failed.
  Status Error(std::string_view what) const { return ErrorOf(*db_, what); }
  static Status ErrorOf(const sql::Database& database, std::string_view what);

  enum class CredentialCache { kEmpty, kKeep };
  // Runs `body` in a write transaction (BeginWrite) under mutex_, on the store's writer
  // thread: committed when it returns ok, rolled back otherwise, and returns once it is
  // durable. The credential cache is emptied first unless the caller knows the transaction
  // changes nothing authentication reads.
  //
  // Group commit: each commit waits for an fsync, so the writer runs the bodies that arrive
  // while one group commits together as the next group, each in a savepoint of one
  // transaction (a failing body rolls back only its own work; a write alone in its group
  // needs none), made durable by one COMMIT.
  // Every write goes through the one writer thread so that a group can be as large as the
  // writes waiting, not as the threads able to wait: an HTTP thread that waited for its own
  // group would cap a group at the server's few threads (2.3 writes per fsync measured under
  // load, against 22 with the uploads' writes queued). Readers never see a group before it
  // is committed, since the writer holds mutex_ throughout.
  Status WriteTransaction(const std::function<Status()>& body,
                          CredentialCache cache = CredentialCache::kEmpty);
  // As WriteTransaction without waiting: `done` gets the status on the writer thread once the
  // group is durable or the body failed. `done` runs between groups, so it must be short; it
  // may read the store, and a write from it runs at once, in a group of its own. An exception
  // from `done` is logged and the writer goes on.
  //
  // `body` may run twice: it must change nothing but the database and outputs it sets afresh
  // on each run. That lets the writer start it while the answers to the previous write's
  // deferred statements are still on their way (one round trip per write rather than two on
  // PostgreSQL); should they bring a failure, both are rolled back and this one runs again.
  void WriteTransactionThen(std::function<Status()> body, std::function<void(Status)> done,
                            CredentialCache cache = CredentialCache::kEmpty);
  struct PendingWrite;
  // The writer thread: runs the pending writes, a group at a time, until the store closes.
  void RunWriter();
  // Runs `group` in one transaction under mutex_, setting each one's status.
  void CommitGroup(const std::vector<PendingWrite*>& group);

  // The helpers below expect the caller to hold mutex_.
  // Inside a write transaction: empties the credential caches.
  void ForgetCachedCredentials();
  // Runs `read` on a lookup connection when the store has them, so that a request's read
  // neither queues behind the writer's group (its round trips, its COMMIT's fsync) nor holds
  // the writer back for its own length; otherwise on the store's own connection, taking
  // mutex_ (so its caller must not hold it). `read` sees committed rows only, as it would
  // under mutex_, which the writer holds through each group.
  template <typename Read>
  auto ReadOnLookup(const Read& read) -> decltype(read(std::declval<sql::Database&>())) {
    if (!lookups_.empty()) return read(*lookups_.Borrow());
    std::lock_guard lock(mutex_);
    return read(*db_);
  }
  // Runs `read` on a lookup connection (ReadOnLookup) in one snapshot (BeginSnapshot), so
  // that a write committing between its statements cannot mix two states in its answer.
  template <typename Read>
  auto ReadSnapshotOnLookup(const Read& read) -> decltype(read(std::declval<sql::Database&>())) {
    return ReadOnLookup([&](sql::Database& database) -> decltype(read(database)) {
      UPLINK_RETURN_IF_ERROR(database.BeginSnapshot());
      auto result = read(database);
      (void)database.Exec(result.ok() ? "COMMIT" : "ROLLBACK");
      return result;
    });
  }
  // Whether authentication reads on lookups_ (nothing cached, lookups to read on).
  bool AuthenticatesOnLookups() const { return !caches_credentials_ && !lookups_.empty(); }
  // Runs a statement that returns no rows; the number of rows it changed.
  Result<int> Change(std::string_view sql, const Binder& bind, std::string_view what);
  // As Change, inside a write's body, for a statement whose change count nothing needs: on
  // PostgreSQL it is sent without waiting, and its answer comes with the next statement's or
  // with the write's RELEASE or COMMIT (sql::Database::Defer). Its failure fails the write.
  Status Defer(std::string_view sql, const Binder& bind, std::string_view what);
  Status ForEachRow(std::string_view sql, const Binder& bind, const RowReader& read,
                    std::string_view what) {
    return ForEachRowOn(*db_, sql, bind, read, what);
  }
  static Status ForEachRowOn(sql::Database& database, std::string_view sql, const Binder& bind,
                             const RowReader& read, std::string_view what);
  // ForEachRow on a lookup connection (ReadOnLookup): one statement's read of committed rows;
  // the caller must not hold mutex_.
  Status ForEachRowOnLookup(std::string_view sql, const Binder& bind, const RowReader& read,
                            std::string_view what) {
    return ReadOnLookup(
        [&](sql::Database& database) { return ForEachRowOn(database, sql, bind, read, what); });
  }
  // Multi-row statements take the largest of a few fixed row counts that `remaining` fills
  // (32, 8, 1), so that few statement texts are prepared and kept.
  static size_t RowsPerStatement(size_t remaining);
  // "(?, ?), (?, ?)": `rows` tuples of `columns` placeholders.
  static std::string PlaceholderRows(size_t rows, size_t columns);
  // Runs an INSERT ... RETURNING id; the new row's id.
  Result<std::int64_t> InsertReturningId(std::string_view sql, const Binder& bind,
                                         std::string_view what);
  Status InsertUser(const User& user);
  Status InsertApiKey(const ApiKey& key);
  Status InsertSession(const Session& session);
  Status InsertConnection(const Connection& connection);
  Status InsertHandover(const Handover& handover);
  Status InsertAudit(const AuditEvent& event);
  // InsertAudit for an event the store composed (its outcome and detail known to pass the
  // table's checks), deferred: it waits for no answer of its own.
  Status DeferAudit(const AuditEvent& event);
  static void BindAudit(Statement& statement, const AuditEvent& event);
  Status SupersedePendingHandovers(const std::string& connection_id, WallTime at);
  // NotFound ("<what> <id> does not exist") unless `sql` ("SELECT 1 ... WHERE id = ?") finds a row.
  Status CheckExists(std::string_view sql, const std::string& id, std::string_view what);
  static Result<std::vector<Connection>> QueryConnections(sql::Database& database,
                                                          std::string_view sql,
                                                          const std::string& key);
  static Result<Connection> ReadConnection(sql::Database& database, const std::string& id);
  // Revokes the user's sessions that are neither revoked nor expired at `at`, except one.
  Status RevokeLiveSessions(const std::string& user_id, const std::string& except_session_id,
                            WallTime at);
  // Adds each agent to its connection's, or moves its last_seen_at (and version) forward; one
  // row per (connection, role, instance).
  Status RecordAgents(std::span<const std::pair<std::string_view, const AgentSeen*>> agents);
  // Records that `spool_id` feeds the stream from `epoch` on.
  Status RememberSpool(std::int64_t stream_id, const std::string& spool_id, std::int64_t epoch);
  // Inside a write transaction: token, expiry, revocation and owner still as authenticated
  // (Unauthenticated naming `what` otherwise). The cluster UID the connection is bound to, if
  // any.
  Result<std::optional<std::string>> CheckTokenLive(const std::string& connection_id,
                                                    const std::string& token_hash, WallTime at,
                                                    std::string_view what);
  // The columns of a connection `c` (joined with its owner `u`) that TokenStillLive decides on,
  // and the token they make when a row starts with them.
  static constexpr std::string_view kAgentTokenColumns =
      "c.token_hash, c.expires_at, c.revoked_at IS NOT NULL, u.deactivated_at IS NOT NULL";
  static StoredAgentToken AgentTokenFromRow(const Statement& row);
  // What CheckTokenLive decides of the token it read (`stored`; none if the connection is
  // gone), for a write that reads it with more in one query.
  static Status TokenStillLive(const std::optional<StoredAgentToken>& stored,
                               const std::string& connection_id, const std::string& token_hash,
                               WallTime at, std::string_view what);
  // Inside a write transaction: writes `audit` as the refusal of a call from `cluster_uid` to
  // a connection bound to `bound`, and returns the Conflict that refuses it.
  Status RefuseClusterMismatch(const AuditEvent& audit, const std::string& cluster_uid,
                               const std::string& bound);
  // Inside a write transaction: nothing when the connection is bound (`bound`) to
  // `cluster_uid`; the refusal, into `refusal`, when bound to another; else binds it, writing
  // `audit` as connection.bind with `bind_detail`.
  Status BindOrRefuse(const std::string& connection_id, const std::optional<std::string>& bound,
                      const std::string& cluster_uid, const AuditEvent& audit,
                      const json::object& bind_detail, Status& refusal);
  // Two-factor (sql_two_factor.cc), inside a write transaction: uses up `use` for `audit`
  // (see Store), and replaces the user's recovery codes with `codes`.
  Status UseSecondFactor(const std::string& user_id, const SecondFactorUse& use,
                         const AuditEvent& audit);
  Status InsertRecoveryCodes(const std::string& user_id, const std::vector<RecoveryCode>& codes,
                             WallTime at);
  // Deletes up to `retention.max_records_per_run` records received before now - max_age,
  // unless the last run was less than `retention.interval` ago; how many it deleted.
  Result<std::int64_t> PruneRecords(WallTime now, const RecordRetention& retention);

  // Keeps the newest of `records` (cluster snapshots of `batch` above acked_through) as the
  // connection's snapshot unless the kept one was collected later; inside the upload's
  // transaction (sql_cluster.cc).
  Status StoreClusterSnapshot(const std::string& connection_id, const UploadBatch& batch,
                              const std::vector<const UploadRecord*>& records, WallTime now,
                              UploadOutcome& outcome);
  // Inside the upload's transaction: the pod usage of `records` (sql_cluster.cc).
  Status StorePodUsage(const std::string& connection_id, const UploadBatch& batch,
                       const std::vector<const UploadRecord*>& records, WallTime now);
  // Inside a write transaction: replaces the connection's namespace scope (sql_cluster.cc).
  Status WriteNamespaceScope(const std::string& connection_id,
                             const std::vector<std::string>& namespaces, WallTime at);
  // The approvals `where` selects, with the connection's owner (sql_approvals.cc).
  static Result<std::vector<CommandApproval>> QueryApprovals(sql::Database& database,
                                                             const std::string& where,
                                                             const Binder& bind);

  // Stores the experiments records of `batch` above acked_through, inside the upload's
  // transaction (sql_runs.cc).
  Status StoreExperimentRecords(const std::string& connection_id, const UploadBatch& batch,
                                const std::vector<const UploadRecord*>& records, WallTime now,
                                UploadOutcome& outcome);
  // The id of the connection's run row, created as a placeholder when `create` and missing.
  Result<std::optional<std::int64_t>> RunRowId(const std::string& connection_id,
                                               const std::string& run_id, const std::string& stream,
                                               WallTime now, bool create);

  // Node samples (sql_samples.cc); the caller holds mutex_ inside a write transaction
  // unless it says otherwise.
  struct SeriesName {
    SampleMetric metric;
    std::string label;
  };
  using SeriesById = std::unordered_map<std::int64_t, SeriesName>;
  // AcceptReport's transaction, given the digest of the report's nodes: a report from
  // another cluster commits only its audit event and leaves its Conflict in `refusal`.
  Status StoreReport(const std::string& connection_id, const std::string& token_hash,
                     const InventoryReport& report, const std::string& nodes_digest,
                     WallTime received_at, const AuditEvent& audit, Status& refusal);
  // AcceptUpload's transaction: what it stored, refused or counted goes to `outcome`.
  Status StoreUpload(const std::string& connection_id, const std::string& token_hash,
                     const UploadBatch& batch, WallTime received_at,
                     const RecordRetention& retention, const AuditEvent& audit,
                     UploadOutcome& outcome);
  // A node's row of sample_nodes, as a write reads it before adding samples.
  struct SampleNodeRow {
    std::int64_t id = 0;
    std::optional<std::int64_t> latest_at;
    std::optional<std::int64_t> previous_at;
    std::int64_t rolled_through = 0;
    std::int64_t series_version = 0;
  };
  // A plan from node_plans' interval_seconds, collectors and updated_at, read from `column`
  // on; DefaultNodePlan() where they are NULL (a LEFT JOIN that found no row).
  static NodePlan NodePlanFromRow(const Statement& row, int column);
  // A scope from namespace_scopes' namespaces at `column`; none where it is NULL.
  static NamespaceScope NamespaceScopeFromRow(const Statement& row, int column);
  // One node's row read ahead, with the upload's token in one query (nullopt: it has none).
  struct ReadAheadSampleNode {
    std::string node;
    std::optional<SampleNodeRow> row;
  };
  // Stores the figures of `records` (node samples of `batch` above acked_through); the row of
  // `read_ahead`'s node, when given, is not read again.
  Status StoreNodeSamples(const std::string& connection_id, const UploadBatch& batch,
                          const std::vector<const UploadRecord*>& records, WallTime now,
                          const SampleRetention& retention,
                          const std::optional<ReadAheadSampleNode>& read_ahead,
                          UploadOutcome& outcome);
  // Rolls up and prunes, unless the last run was less than `interval` ago.
  Status MaintainSamples(WallTime now, std::chrono::seconds interval,
                         const SampleRetention& retention, UploadOutcome& outcome);
  Status RollUpSamples(WallTime now, const SampleRetention& retention, UploadOutcome& outcome);
  // Recomputes the node's rollups for the buckets in [start, end) (Unix seconds).
  Status RollUpNode(std::int64_t node_id, std::int64_t start, std::int64_t end,
                    std::int64_t max_gap_ms, UploadOutcome& outcome);
  // Inserts a series for each of `values` (the node has none of them yet) and reads the
  // node's series, theirs included, into `series`.
  Status InsertSeries(std::int64_t node_id, std::span<const SampleValue* const> values,
                      std::int64_t now_seconds, NodeSeriesIds& series);
  // Series of the node whose metric this binary knows.
  static Result<SeriesById> LoadSeries(sql::Database& database, std::int64_t node_id);
  // The node's series ids as of its row's `series_version`: cached, or read and cached.
  Result<NodeSeriesIds*> SeriesIdsOf(std::int64_t node_id, std::int64_t series_version);
  // Every series row of the node, into `entry` (its version left as it was).
  Status ReadSeriesIds(std::int64_t node_id, NodeSeriesIds& entry);
  // The id of the connection's node, or NotFound.
  static Result<std::int64_t> SampleNodeId(sql::Database& database,
                                           const std::string& connection_id,
                                           const std::string& node);

  // Workspace execution (sql_workspace.cc): reads on `database` (the writer's inside a write,
  // a lookup's otherwise), the rest under mutex_.
  static Result<std::vector<Offer>> QueryOffers(sql::Database& database, const std::string& tail,
                                                const Binder& bind);
  static Result<Offer> ReadOffer(sql::Database& database, const std::string& id);
  // FailedPrecondition, saying what it is now, unless the offer is in `expected`.
  Status MoveOfferState(const std::string& offer_id, OfferState expected, OfferState state,
                        WallTime at);
  // Inside AcceptReport's transaction: the connection's draft offer (read with the report's
  // token) becomes connected.
  Status MarkOfferConnected(const std::string& connection_id, const std::string& offer_id,
                            const std::string& owner_id, const AuditEvent& audit);
  Result<std::int64_t> CountActiveReservations(const std::string& offer_id);
  static Result<std::vector<Reservation>> QueryReservations(sql::Database& database,
                                                            const std::string& tail,
                                                            const Binder& bind);
  static Result<Reservation> ReadReservation(sql::Database& database, const std::string& id);
  // Moves the reservation to `state`, recording the transition and a copy of `audit` (action
  // "reservation.<state>"); a final state ends its open commands.
  Status TransitionReservation(const Reservation& reservation, std::string_view state,
                               std::string_view reason, std::string_view source, WallTime at,
                               const AuditEvent& audit);
  static Result<WorkspaceCommandRecord> ReadWorkspaceCommand(sql::Database& database,
                                                             const std::string& id);

  std::mutex mutex_;
  // Write transactions waiting for the writer thread (WriteTransaction), under writes_mutex_:
  // writes_queued_ wakes the writer, writes_finished_ the callers that wait.
  std::mutex writes_mutex_;
  std::condition_variable writes_queued_;
  std::condition_variable writes_finished_;
  std::deque<std::shared_ptr<PendingWrite>> pending_writes_;
  bool closing_ = false;
  std::thread writer_;
  // When the write group in progress began (steady clock, nanoseconds since its epoch); 0
  // between groups. Read by CheckReady without taking mutex_, which the group holds.
  std::atomic<std::int64_t> group_started_ns_{0};
  log::Logger log_{"store"};
  std::unique_ptr<sql::Database> db_;
  // Connections by token prefix, for authenticating agents without a query per request.
  // Emptied by every write transaction of this object, so a rotate, revoke or deactivation is
  // seen by the very next request. Writes by another process would not empty it: on SQLite the
  // console holds its data directory's lock (LockDataDirectory) so that none happen while it
  // serves. On PostgreSQL, where replicas write too, nothing is cached (caches_credentials_):
  // a revoke through one replica must be refused by every other on its very next request, and
  // a notification, however fast, arrives after the revoke's reply.
  const bool caches_credentials_;
  // ReadOnLookup's reads, and authentication's when nothing is cached (see Open), one
  // connection per caller at a time.
  sql::ConnectionPool lookups_;
  const std::shared_ptr<const sql::ReconnectGate> reconnect_gate_;
  // Guards the credential caches (connections_by_token_prefix_, settings_) alone, so that an
  // agent's token or the console's settings (read for every person's request) are found
  // without waiting for mutex_, which a write group holds through its COMMIT (an fsync on
  // SQLite). Entries are added and removed only under mutex_ too (lock order: mutex_, then
  // this): an entry added after a write emptied the cache was read after that write committed.
  std::mutex credential_cache_mutex_;
  std::unordered_map<std::string, ConnectionRows> connections_by_token_prefix_;
  std::optional<ConsoleSettings> settings_;  // GetConsoleSettings' cache
  std::optional<WallTime> last_prune_;  // when PruneRecords last ran, under mutex_
  std::optional<WallTime> last_sample_maintenance_;  // when MaintainSamples last ran, under mutex_
  SeriesIdCache series_ids_;  // node series ids between uploads (sql_samples.cc), under mutex_
};

}  // namespace uplink::console
