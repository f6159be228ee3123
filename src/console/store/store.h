// What the console keeps: users, their API keys, connections, the last inventory each
// connection reported, and the records agents upload from their spools.
//
// Store is an interface so that a PostgreSQL implementation can replace SQLite without
// touching callers. Credentials are never stored: only their SHA-256 hash and a short,
// non-secret lookup prefix.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "console/store/runs.h"
#include "console/store/sample_series.h"
#include "console/store/workspace_store.h"
#include "protocol/inventory.h"
#include "protocol/plans.h"
#include "protocol/upload.h"

namespace uplink::console {

enum class Role { kAdmin, kMember };

struct User {
  std::string id;
  std::string email;  // stored lower-case; unique
  Role role = Role::kMember;
  // argon2id in libsodium's encoded form ("$argon2id$v=19$m=...,t=...,p=...$salt$hash"), or
  // empty for a user who can sign in only with an API key (the admin made by `init`).
  std::string password_hash;
  WallTime created_at;
  std::optional<WallTime> deactivated_at;  // a deactivated user's credentials all stop working
  // When the user proved a first two-factor code; none: no two-factor sign-in (read with the
  // user, so that authenticating a user is still one query).
  std::optional<WallTime> two_factor_enabled_at;
};

struct ApiKey {
  std::string id;
  std::string user_id;
  std::string name;           // the user's label for it, "ci", "laptop"
  std::string lookup_prefix;  // "uk_" + the first characters of the key; not secret
  std::string token_hash;     // lower-case hex SHA-256 of the whole key
  WallTime created_at;
  std::optional<WallTime> expires_at;  // none: until revoked
  std::optional<WallTime> revoked_at;
};

// A short-lived sign-in made by `uplink login` (email + password).
struct Session {
  std::string id;
  std::string user_id;
  std::string lookup_prefix;  // "skt_…"
  std::string token_hash;
  WallTime created_at;
  WallTime expires_at;
  // Set by a fresh password confirmation; until then the session may not create, rotate or
  // reveal credentials.
  std::optional<WallTime> confirmed_until;
  std::optional<WallTime> revoked_at;  // logout, password change, deactivation
};

// A one-time code that hands a connection's new token to a terminal. Redeeming it mints the
// token, so no token ever rests in the store, even encrypted.
struct Handover {
  std::string id;
  std::string connection_id;
  std::string lookup_prefix;  // "hoc_…"
  std::string code_hash;
  WallTime created_at;
  WallTime expires_at;
  std::optional<WallTime> redeemed_at;
  std::optional<WallTime> superseded_at;  // a later rotate or the revoke turned it off
};

// Who did what, when, from where; never a secret. `owner_id` is the user whose object was
// touched, so a member reads the events about their own things.
struct AuditEvent {
  std::int64_t id = 0;  // assigned by the store, increasing
  WallTime at;
  std::string actor_type;   // "user", "agent", "anonymous"
  std::string actor_id;     // user id, connection id, or empty
  std::string actor_label;  // email or token prefix, for people reading the log
  std::string credential;   // "api_key", "session", "agent_token", "handover_code", "password"
  std::string action;       // see docs/api.md, "Audit log"
  std::string target_type;  // "user", "api_key", "session", "connection"
  std::string target_id;
  std::string owner_id;
  std::string source_address;
  std::string outcome;  // "ok" or "refused"
  std::string detail;   // a JSON object, small, never secret
};

struct AuditQuery {
  std::optional<std::string> owner_id;   // only events about this user's things or by them
  std::optional<std::string> target_id;
  std::optional<std::string> action;     // exact match
  std::optional<std::int64_t> before_id; // paging: events with id < before_id
  int limit = 100;                       // newest first
};

// The inventory as the agent reports it (protocol/inventory.h).
using protocol::GpuResource;
using protocol::InventoryReport;
using protocol::Taint;
using Node = protocol::InventoryNode;

// Sums kept with the connection and updated with each report, so totals are read without
// summing node rows. The API's connection list and single connection carry the nodes as well,
// read with ListNodes.
struct InventoryTotals {
  std::int64_t nodes = 0;
  std::int64_t nodes_ready = 0;
  std::int64_t gpu_capacity = 0;
  std::int64_t gpu_allocatable = 0;
  std::int64_t gpus_ready = 0;  // allocatable GPUs on ready, schedulable nodes
};

InventoryTotals ComputeTotals(const std::vector<Node>& nodes);

struct Connection {
  std::string id;
  std::string owner_id;
  std::string agent_name;
  std::string cluster_name;
  std::string token_prefix;  // "agt_" + the first characters of the token; not secret
  std::string token_hash;
  WallTime created_at;
  WallTime expires_at;
  std::optional<WallTime> revoked_at;
  std::optional<WallTime> last_report_at;  // the last accepted inventory report
  // The last accepted agent call of any role, as the store has it: the console notes calls in
  // memory (AgentPresence) and writes them down at most every 30 s.
  std::optional<WallTime> last_seen_at;
  std::optional<std::string> cluster_uid;  // bound by the first call that names its cluster
  std::string agent_version;
  std::string selector;
  std::optional<WallTime> collected_at;
  InventoryTotals totals;
  // Read with the connection (a join), so that authenticating an agent is one query.
  std::optional<WallTime> owner_deactivated_at;
  // The console requires two-factor sign-in and the owner has not set it up: the agent is
  // refused (403 owner_needs_two_factor). Read with the connection, like the above.
  bool owner_needs_two_factor = false;
};

using ConnectionRows = std::shared_ptr<const std::vector<Connection>>;

// One running agent of a connection, as it last reported: the inventory Deployment, the
// cluster Deployment, each node of the DaemonSet.
struct AgentSeen {
  std::string role;      // "inventory", "cluster", "node", ...
  std::string instance;  // pod or node name; empty when the agent did not say
  std::string version;
  WallTime last_seen_at;
};

// What the console noted of agent calls since it last wrote them down (AgentPresence): when
// each connection's agents last called, and which agent made each call.
struct PresenceUpdate {
  std::vector<std::pair<std::string, WallTime>> connections;  // connection id, last call
  std::vector<std::pair<std::string, AgentSeen>> agents;       // connection id, agent
};

// What an agent says its spool lost (protocol/upload.h).
using protocol::AgentLosses;
using protocol::LossCount;

// One figure of a node sample: the value of one series at the sample's time.
struct SampleValue {
  SampleMetric metric = SampleMetric::kCpuSeconds;
  std::string label;  // the GPU index or the mount point; empty for node-wide metrics
  double value = 0;
};

// What the console keeps of one node sample (docs/protocol.md, "Node samples"), already
// checked: every value finite, counters not negative.
struct NodeSampleFigures {
  std::string node;
  WallTime collected_at;
  std::int64_t boot_time = 0;  // Unix seconds; 0 when the sample did not say
  std::vector<SampleValue> values;
};

// One pod's CPU and memory use as one cluster snapshot's `kubectl top pods` showed it: kept
// for an hour (kPodUsageWindow) for pod right-sizing (docs/api.md, "Pod right-sizing").
struct PodUsage {
  std::int64_t sequence = 0;  // the snapshot record's
  WallTime collected_at;      // the snapshot's, by the agent's clock
  std::string namespace_name;
  std::string pod;
  std::int64_t cpu_millicores = 0;
  std::int64_t memory_bytes = 0;
};

// One record of an upload; its payload is held by the batch.
struct UploadRecord {
  std::int64_t sequence = 0;
  WallTime appended_at;
  size_t payload_offset = 0;  // into UploadBatch::payloads
  size_t payload_size = 0;
  // A node sample (index into UploadBatch::node_samples): its figures are stored as series
  // and the record itself is not kept.
  std::optional<size_t> node_sample;
  // A cluster snapshot collected at this time: kept as the connection's latest snapshot
  // (when it is the latest), not as a record.
  std::optional<WallTime> cluster_snapshot_at;
  // An experiments record (index into UploadBatch::experiment_records): kept as runs and
  // points, not as a record.
  std::optional<size_t> experiment_record;
};

// One upload from an agent's spool, validated: sequences strictly increase within
// [first_sequence, last_sequence], every payload is a JSON object's text.
struct UploadBatch {
  std::string agent_version;
  std::string agent_instance;
  std::string stream;    // which spool of the connection, e.g. "node/gpu-node-0001"
  std::string spool_id;  // 32 hex digits; a new one means the agent's spool was recreated
  std::int64_t first_sequence = 0;
  std::int64_t last_sequence = 0;
  AgentLosses losses;
  std::vector<UploadRecord> records;
  // Every record's payload back to back: one buffer per batch rather than one per record.
  std::string payloads;
  std::vector<NodeSampleFigures> node_samples;  // of the records that are node samples
  std::vector<PodUsage> pod_usage;  // of the records that are cluster snapshots
  std::vector<ExperimentRecord> experiment_records;  // of the records that are experiments

  std::string_view Payload(const UploadRecord& record) const {
    return std::string_view(payloads).substr(record.payload_offset, record.payload_size);
  }
};

// What one accepted upload did.
struct UploadOutcome {
  std::int64_t acked_through = 0;  // the agent may consume its spool up to here
  std::int64_t stored = 0;
  std::int64_t duplicates = 0;     // at or below the previous acked_through: not stored again
  std::int64_t lost = 0;           // sequences newly counted as never arriving
  bool new_stream = false;
  bool restarted = false;          // the spool_id changed: the stream began a new epoch
  std::int64_t epoch = 0;
  std::int64_t records_pruned = 0;  // old records this upload's transaction deleted (retention)
  // Cluster snapshots among the stored records, and whether one became the connection's
  // latest.
  std::int64_t snapshots_received = 0;
  bool snapshot_replaced = false;
  // Node samples among the stored records: their figures kept, or not kept because they
  // were collected before the raw retention or too far ahead of the console's clock, or at
  // the same time as a sample already kept for the node.
  std::int64_t samples_stored = 0;
  std::int64_t samples_too_old = 0;
  std::int64_t samples_in_future = 0;
  std::int64_t samples_same_time = 0;
  // Values left out because their node already has kMaxSeriesPerNode series.
  std::int64_t sample_values_dropped = 0;
  // What this upload's transaction did for retention (SampleRetention).
  std::int64_t samples_pruned = 0;
  std::int64_t rollups_written = 0;
  std::int64_t rollups_pruned = 0;
  // Experiment runs: upserts stored, points new to the store (a point sent again is not
  // stored twice), runs deleted, problems reported.
  std::int64_t runs_upserted = 0;
  std::int64_t run_points_stored = 0;
  std::int64_t run_points_duplicate = 0;
  std::int64_t runs_deleted = 0;
  std::int64_t run_problems = 0;
};

// A stream of a connection: one agent spool, as the console has received it.
struct StreamSummary {
  std::string stream;
  std::string spool_id;
  // Starts at 0 and grows by one at every restart (spool_id change), so it is also the
  // number of restarts. Records are kept per epoch: a new spool's sequences start again at 1.
  std::int64_t epoch = 0;
  std::int64_t acked_through = 0;  // in the current epoch
  // The three counts below cover every epoch of the stream.
  std::int64_t records_stored = 0;
  std::int64_t duplicates_ignored = 0;
  std::int64_t lost_records = 0;
  AgentLosses agent_losses;  // of the current spool only: reset at a restart
  WallTime first_upload_at;
  WallTime last_upload_at;
  std::string agent_instance;  // as of the last upload
  std::string agent_version;
};

struct StoredRecord {
  std::int64_t sequence = 0;
  WallTime appended_at;  // by the agent's clock
  WallTime received_at;  // by the console's
  std::string payload;   // a JSON object
};

struct RecordQuery {
  std::string connection_id;
  std::string stream;
  std::optional<std::int64_t> epoch;  // none: the stream's current epoch
  std::int64_t after_sequence = 0;
  int limit = 100;  // clamped to 1..kMaxRecordPage
  // A page ends early, after at least one record, once its payloads reach this many bytes.
  size_t max_payload_bytes = 8 << 20;
};

inline constexpr int kMaxRecordPage = 1000;

struct RecordPage {
  std::int64_t epoch = 0;
  std::vector<StoredRecord> records;  // in sequence order
  bool more = false;                  // records after the last one exist
};

// How long node samples are kept, by collected_at: raw for `raw_max_age`, then as 5-minute
// rollups until `max_age`. Like records, this is done by uploads inside their transaction, at
// most once per RecordRetention::interval, bounded per run.
struct SampleRetention {
  std::chrono::seconds raw_max_age{48 * 3600};
  std::chrono::seconds max_age{7 * 24 * 3600};
  // A sample collected further ahead of the console's clock is not kept.
  std::chrono::seconds max_clock_skew{300};
  // Rollups are made for a bucket this long after it ends (late samples rework it anyway).
  std::chrono::seconds rollup_delay{120};
  std::int64_t max_rollup_buckets_per_run = 2'000;  // node-buckets
  std::int64_t max_rows_per_run = 10'000;           // deleted, of each kind
};

// A node whose sample would add a series beyond this many keeps its values for the series it
// has (a node has ~60; mount points coming and going make more, forgotten after max_age).
inline constexpr std::int64_t kMaxSeriesPerNode = 4096;

// How long uploaded records are kept, by the time the console received them. Deleting is
// done by uploads, inside their transaction, at most once per `interval` and at most
// `max_records_per_run` records at a time, so that no upload waits long for it.
struct RecordRetention {
  std::chrono::seconds max_age{7 * 24 * 3600};
  std::chrono::seconds interval{60};
  std::int64_t max_records_per_run = 10'000;
  SampleRetention samples;
};

// What a connection's node role collects, and how often (docs/protocol.md, "The collection
// plan in the upload reply").
struct NodePlan {
  std::int64_t interval_seconds = 30;  // 10-3600
  // Collector names from kNodeCollectors, in that order, no repeats.
  std::vector<std::string> collectors;
  std::optional<WallTime> updated_at;  // none: the default plan, never set
};

// The node role's collectors (protocol/plans.h), and the interval of the default plan.
using protocol::kNodeCollectors;
inline constexpr std::int64_t kDefaultSampleInterval = protocol::kDefaultPlanInterval.count();

// The plan a connection has until its owner sets one: every collector, every 30 s.
NodePlan DefaultNodePlan();

// The namespaces a connection's kubectl commands and cluster plan may read (docs/api.md,
// "Namespace scope"): none until its owner chooses; {"*"} for every namespace; otherwise
// DNS-1123 labels, sorted, each once (possibly none: cluster-scoped reads only).
using NamespaceScope = std::optional<std::vector<std::string>>;

// What a connection's install commands were last generated with (docs/api.md, "Install
// commands"): the chart's workloads, the GPU runtime class and the GPU node selector the
// user chose.
struct InstallPlan {
  bool kubernetes = true;         // the cluster Deployment and node DaemonSet besides inventory
  std::string gpu_runtime_class;  // "" when the node pods need none (no GPUs)
  std::string selector;           // a valid label selector, in canonical form
  WallTime updated_at;

  bool SameChoice(const InstallPlan& other) const {
    return kubernetes == other.kubernetes && gpu_runtime_class == other.gpu_runtime_class &&
           selector == other.selector;
  }
};

// The latest cluster snapshot of a connection (docs/protocol.md, "Cluster snapshots").
struct ClusterSnapshot {
  std::string stream;  // "cluster/...", the cluster role's
  WallTime collected_at;  // by the agent's clock, milliseconds
  WallTime received_at;   // by the console's
  std::string payload;    // the record's payload, a JSON object as the agent sent it
};

// How long pod usage is kept: right-sizing looks at the last hour.
inline constexpr std::chrono::seconds kPodUsageWindow{3600};

// A pod's usage over a window: the `kubectl top pods` figures of every snapshot in it.
struct PodUsageSummary {
  std::string namespace_name;
  std::string pod;
  std::int64_t samples = 0;
  std::int64_t cpu_average_millicores = 0;
  std::int64_t cpu_peak_millicores = 0;
  std::int64_t memory_average_bytes = 0;
  std::int64_t memory_peak_bytes = 0;
};

// An approval rule of a connection (docs/api.md, "Approval rules"): the kubectl commands it
// matches wait for the owner's or an admin's approval instead of running. Each field is a
// value or "*"; the resource is the guard's canonical name ("pods", "deployments.apps").
struct ApprovalRule {
  std::string id;  // 16 hex digits
  std::string connection_id;
  std::string verb;
  std::string resource;
  std::string namespace_name;
  WallTime created_at;
  std::string created_by;  // user id
};

inline constexpr size_t kMaxApprovalRules = 64;  // per connection
// An ended approval (and an approved command's output) is kept this long for its requester.
inline constexpr std::chrono::hours kApprovalKeep{24};

enum class ApprovalStatus {
  kPending,    // waiting for a decision until expires_at
  kApproved,   // handed to the command broker; its result not yet back
  kRejected,
  kExpired,    // nobody decided before expires_at
  kCompleted,  // kubectl ran (any exit code)
  kFailed,     // approved, but it did not run or its result was unusable (error_code says why)
};

// What an approved command ended with: kubectl's exit code and output, or the error.
struct ApprovalResult {
  std::string error_code;  // empty when kubectl ran
  std::string error_message;
  std::int64_t exit_code = 0;
  std::string stdout_text;
  std::string stderr_text;
  std::int64_t duration_ms = 0;
};

// A kubectl command that matched an approval rule. It waits in the store, so that a console
// restart loses neither the request nor a decision, until it is approved (then it runs as
// any command and its result is kept here for the requester), rejected or expires.
struct CommandApproval {
  std::string id;  // the command's id, "cmd_" + 16 hex digits
  std::string connection_id;
  std::string owner_id;  // the connection's owner, read with it
  std::vector<std::string> argv;
  ApprovalRule rule;  // the rule it matched, as it was then
  std::string requested_by;        // user id
  std::string requested_by_label;  // email
  // The credential that asked: it may reject (withdraw) its request, never approve it.
  std::string requested_credential;
  WallTime requested_at;
  WallTime expires_at;
  ApprovalStatus status = ApprovalStatus::kPending;
  std::optional<WallTime> decided_at;
  std::string decided_by;  // user id
  std::string decided_by_label;
  std::string reason;  // a rejection's, as the decider wrote it
  std::optional<WallTime> finished_at;
  std::optional<ApprovalResult> result;
};

struct ApprovalQuery {
  std::optional<std::string> owner_id;  // only approvals on this user's connections
  std::optional<std::string> connection_id;
  bool pending_only = true;
  int limit = 100;  // newest first
};

// A node of a connection that has sent samples, as of its latest one.
struct SampleNodeState {
  std::string node;
  WallTime latest_at;
  std::int64_t latest_boot_time = 0;
  std::string latest_payload;  // the latest sample's payload as the agent sent it
  // The sample before the latest (by collected_at), when its raw figures are still kept.
  std::optional<WallTime> previous_at;
  std::int64_t previous_boot_time = 0;
  std::vector<SampleValue> previous_values;
};

// One series of a node: its raw points, or its 5-minute rollups, in time order.
struct SeriesPoints {
  SampleMetric metric = SampleMetric::kCpuSeconds;
  std::string label;
  std::vector<RawPoint> points;
};

struct SeriesRollups {
  SampleMetric metric = SampleMetric::kCpuSeconds;
  std::string label;
  std::vector<std::pair<std::int64_t, BucketAggregate>> buckets;  // by start, Unix seconds
};

struct RollupRead {
  // Rollups are complete for buckets before this one (Unix seconds): from here on, the raw
  // points are the only source.
  std::int64_t rolled_through = 0;
  std::vector<SeriesRollups> series;
};

inline constexpr int kMaxSampleNodePage = 500;

struct SampleNodePage {
  std::vector<SampleNodeState> nodes;  // by name
  bool more = false;                   // nodes after the last one exist
};

// Two-factor sign-in (docs/security.md, "Two-factor sign-in"): a user's TOTP credential.
struct TwoFactorCredential {
  std::string user_id;
  // The TOTP secret sealed by the API (SecretBox, with the user id as context): the store
  // never sees it in the clear.
  std::string sealed_secret;
  WallTime created_at;                 // when enrolment began
  std::optional<WallTime> enabled_at;  // when the first code was proved; none: not yet
  // The TOTP step of the last code accepted: codes of this step or earlier never work again.
  std::int64_t last_used_step = 0;
  std::int64_t recovery_codes_left = 0;  // unused recovery codes
};

// A recovery code as stored: only its hash.
struct RecoveryCode {
  std::string id;         // assigned by the store
  std::string code_hash;  // lower-case hex SHA-256 of the canonical code
};

// The second factor a request proved, used up in the same transaction as what it allows:
// the TOTP step of an accepted code, or the recovery code that matched.
struct SecondFactorUse {
  std::optional<std::int64_t> totp_step;
  std::string recovery_code_id;  // empty for a TOTP code
};

// Console-wide settings that admins change (docs/api.md, "Settings").
struct ConsoleSettings {
  bool require_two_factor = false;
  std::optional<WallTime> updated_at;  // none: never changed
};

// The workspace area's methods are WorkspaceStore's (workspace_store.h).
class Store : public WorkspaceStore {
 public:
  ~Store() override = default;

  // A trivial query, for readiness.
  virtual Status Ping() = 0;

  // Every method that changes something takes the audit event that records it and writes
  // both in one transaction: the log never misses a change, and never shows one that did not
  // happen. The store fills in the event's id.

  // Conflict when the email is taken.
  virtual Status CreateUser(const User& user, const AuditEvent& audit) = 0;
  virtual Result<User> GetUser(const std::string& id) = 0;
  // NotFound when there is none; `email` is compared lower-cased.
  virtual Result<User> FindUserByEmail(const std::string& email) = 0;
  virtual Result<std::vector<User>> ListUsers() = 0;
  virtual Result<std::int64_t> CountUsers() = 0;
  // Sets or clears deactivated_at. Deactivating also revokes the user's sessions.
  virtual Status SetUserDeactivated(const std::string& id, std::optional<WallTime> at,
                                    const AuditEvent& audit) = 0;
  // Replaces the password hash and revokes every session of the user except `keep_session_id`
  // (empty: all).
  virtual Status SetPassword(const std::string& id, const std::string& password_hash,
                             const std::string& keep_session_id, WallTime at,
                             const AuditEvent& audit) = 0;

  virtual Status CreateApiKey(const ApiKey& key, const AuditEvent& audit) = 0;
  // Both or neither: `init` must never leave a user whose only key was lost.
  virtual Status CreateUserWithApiKey(const User& user, const ApiKey& key,
                                      const AuditEvent& audit) = 0;
  virtual Result<ApiKey> GetApiKey(const std::string& id) = 0;
  virtual Result<std::vector<ApiKey>> ListApiKeys(const std::string& user_id) = 0;
  // Every key with this lookup prefix (normally one; prefixes are not unique by design).
  virtual Result<std::vector<ApiKey>> FindApiKeysByPrefix(const std::string& prefix) = 0;
  // Sets revoked_at unless already set.
  virtual Status RevokeApiKey(const std::string& id, WallTime at, const AuditEvent& audit) = 0;

  virtual Status CreateSession(const Session& session, const AuditEvent& audit) = 0;
  virtual Result<std::vector<Session>> FindSessionsByPrefix(const std::string& prefix) = 0;
  virtual Status ConfirmSession(const std::string& id, WallTime until,
                                const AuditEvent& audit) = 0;
  // Sets revoked_at unless already set.
  virtual Status RevokeSession(const std::string& id, WallTime at, const AuditEvent& audit) = 0;

  // Conflict when the owner already has a connection that is not revoked with this
  // cluster_name.
  virtual Status CreateConnection(const Connection& connection, const AuditEvent& audit) = 0;
  // The connection and its first handover code, together (a connection whose token is to be
  // handed over is created with an unusable token hash that nobody knows).
  virtual Status CreateConnectionWithHandover(const Connection& connection,
                                              const Handover& handover,
                                              const AuditEvent& audit) = 0;
  virtual Result<Connection> GetConnection(const std::string& id) = 0;
  virtual Result<std::vector<Connection>> ListConnections(const std::string& owner_id) = 0;
  virtual Result<std::vector<Connection>> ListAllConnections() = 0;
  // Shared and immutable, so that authenticating an agent from a cache copies nothing.
  virtual Result<ConnectionRows> FindConnectionsByTokenPrefix(const std::string& prefix) = 0;
  // Replaces the token (the old one stops matching at once) and its expiry, and, when
  // `handover` is given, records it (any earlier unredeemed handover of the connection stops
  // working). Refused (FailedPrecondition) once the connection is revoked, whatever the caller
  // read.
  virtual Status ReplaceToken(const std::string& id, const std::string& token_prefix,
                              const std::string& token_hash, WallTime expires_at,
                              const std::optional<Handover>& handover,
                              const AuditEvent& audit) = 0;
  // Sets revoked_at unless already set; unredeemed handovers stop working.
  virtual Status RevokeConnection(const std::string& id, WallTime at,
                                  const AuditEvent& audit) = 0;

  virtual Result<std::vector<Handover>> FindHandoversByPrefix(const std::string& prefix) = 0;
  // The newest handover of the connection, if any.
  virtual Result<std::optional<Handover>> LatestHandover(const std::string& connection_id) = 0;
  // In one transaction: refuses (FailedPrecondition, message saying which) a handover that is
  // already redeemed, expired at `now`, superseded by a later rotate, or whose connection is
  // revoked; otherwise marks it redeemed and installs the minted token (the expiry stays),
  // writing `audit`. Returns the connection as it now is.
  //
  // A refusal's message starts with exactly one of "handover_redeemed:",
  // "handover_expired:" or "handover_superseded:" (a revoked connection counts as
  // superseded), the API's 410 error code, or "owner_deactivated:" (403; the code still works
  // once the owner is reactivated), followed by a message for people that says what to do;
  // the API sends the code and the text after ": " as the message. A refusal writes
  // nothing but `audit` with action "handover.refused", outcome "refused" and detail
  // {"reason": "<that code>"}, so the caller does not record it again.
  virtual Result<Connection> RedeemHandover(const std::string& handover_id, WallTime now,
                                            const std::string& token_prefix,
                                            const std::string& token_hash,
                                            const AuditEvent& audit) = 0;

  // In one transaction: checks that the token the report was authenticated with is still
  // the connection's live token (a rotate or revoke that lands while a large report is being
  // received must win: Unauthenticated, nothing written), binds cluster_uid on the first
  // report (writing `audit` with action "connection.bind"), refuses (Conflict, nothing
  // written but `audit` with action "connection.cluster_mismatch" and outcome "refused")
  // a report from another cluster, replaces the node list, records the time and the agent
  // (role "inventory", report.agent_instance).
  virtual Status AcceptReport(const std::string& connection_id, const std::string& token_hash,
                              const InventoryReport& report, WallTime received_at,
                              const AuditEvent& audit) = 0;
  virtual Result<std::vector<Node>> ListNodes(const std::string& connection_id) = 0;

  // Liveness and the cluster binding on every agent call (docs/api.md, "Liveness").
  // In one transaction, moves each connection's last_seen_at and each agent's last_seen_at
  // forward (never back), adding agents not seen before. Writes no audit event: a call is not
  // a change anyone made. Connections that no longer exist are skipped.
  virtual Status RecordPresence(const PresenceUpdate& update) = 0;
  // In one transaction: checks the token as AcceptReport does (Unauthenticated, nothing
  // written); binds an unbound connection to `cluster_uid`, writing `audit` (action
  // "connection.bind"); does nothing for a connection already bound to it; refuses (Conflict,
  // nothing written but `audit` with action "connection.cluster_mismatch", outcome "refused"
  // and detail {"cluster_uid", "bound_cluster_uid"} plus what `audit.detail` held) a
  // connection bound to another cluster.
  virtual Status BindCluster(const std::string& connection_id, const std::string& token_hash,
                             const std::string& cluster_uid, const AuditEvent& audit) = 0;

  // The agents of a connection, most recently seen first, at most `limit`.
  virtual Result<std::vector<AgentSeen>> ListAgents(const std::string& connection_id,
                                                    int limit) = 0;

  // In one transaction (docs/protocol.md, "POST /api/v1/agent/uploads"): checks the token as
  // AcceptReport does (Unauthenticated, nothing written); finds or creates the stream
  // (connection, batch.stream); when its spool_id changed, starts a new epoch at
  // acked_through 0 and writes `audit` with action "stream.restart"; stores the records above
  // acked_through (a node sample as its figures, not as a record), counts the others as
  // duplicates and every missing sequence up to last_sequence as lost; keeps the larger of
  // the stored and sent agent losses; moves acked_through to last_sequence (never back).
  // Then, when `retention` is due, deletes old records and rolls up and prunes node samples.
  // Writes no other audit event: records are data, not changes to credentials.
  virtual Result<UploadOutcome> AcceptUpload(const std::string& connection_id,
                                             const std::string& token_hash,
                                             const UploadBatch& batch, WallTime received_at,
                                             const RecordRetention& retention,
                                             const AuditEvent& audit) = 0;
  // The connection's streams, by name.
  virtual Result<std::vector<StreamSummary>> ListStreams(const std::string& connection_id) = 0;
  // NotFound when the connection has no such stream; InvalidArgument for an epoch the stream
  // never had.
  virtual Result<RecordPage> ListStreamRecords(const RecordQuery& query) = 0;

  // Node samples (docs/api.md, "Node metrics"). AcceptUpload stores the figures of the
  // batch's node samples (those above acked_through) in its transaction, each node's latest
  // sample with them, and rolls up and prunes them by `retention.samples`.

  // The connection's plan, or DefaultNodePlan() when none was set.
  virtual Result<NodePlan> GetNodePlan(const std::string& connection_id) = 0;
  // Replaces the plan (updated_at is set from `audit.at`), writing `audit`.
  virtual Status SetNodePlan(const std::string& connection_id, const NodePlan& plan,
                             const AuditEvent& audit) = 0;
  // The nodes of the connection that sent samples, by name, after `after_node`, at most
  // `limit` (clamped to 1..kMaxSampleNodePage).
  virtual Result<SampleNodePage> ListSampleNodes(const std::string& connection_id,
                                                 const std::string& after_node, int limit) = 0;
  // The raw points of the node's series of `metrics` collected in [from, to). NotFound when
  // the connection has no samples from `node`.
  virtual Result<std::vector<SeriesPoints>> ReadSamplePoints(
      const std::string& connection_id, const std::string& node,
      std::span<const SampleMetric> metrics, WallTime from, WallTime to) = 0;
  // The 5-minute rollups of those series for buckets starting in [from, to). NotFound as above.
  virtual Result<RollupRead> ReadSampleRollups(const std::string& connection_id,
                                               const std::string& node,
                                               std::span<const SampleMetric> metrics,
                                               WallTime from, WallTime to) = 0;

  // kubectl (docs/api.md, "kubectl"). AcceptUpload keeps the batch's newest cluster snapshot
  // (above acked_through) as the connection's, unless the kept one was collected later.
  virtual Result<NamespaceScope> GetNamespaceScope(const std::string& connection_id) = 0;
  // Replaces the scope, writing `audit`. NotFound when the connection does not exist.
  virtual Status SetNamespaceScope(const std::string& connection_id,
                                   const std::vector<std::string>& namespaces,
                                   const AuditEvent& audit) = 0;
  virtual Result<std::optional<ClusterSnapshot>> GetClusterSnapshot(
      const std::string& connection_id) = 0;
  // As CreateConnection, or CreateConnectionWithHandover when `handover` is given, with the
  // namespace scope chosen at creation: one transaction, one audit event.
  virtual Status CreateConnectionWithScope(const Connection& connection,
                                           const std::optional<Handover>& handover,
                                           const std::vector<std::string>& namespaces,
                                           const AuditEvent& audit) = 0;
  // Each pod's usage in the pod_usage of the snapshots AcceptUpload stored, collected at or
  // after `since`, by namespace and pod. AcceptUpload keeps kPodUsageWindow and a little more.
  virtual Result<std::vector<PodUsageSummary>> SummarizePodUsage(
      const std::string& connection_id, WallTime since) = 0;

  // Approval rules and the commands that wait for approval (sqlite_approvals.cc).
  virtual Result<std::vector<ApprovalRule>> ListApprovalRules(
      const std::string& connection_id) = 0;
  // AlreadyExists (its message names the rule) for a rule the connection has already;
  // ResourceExhausted beyond kMaxApprovalRules; NotFound for a connection that does not exist.
  virtual Status AddApprovalRule(const ApprovalRule& rule, const AuditEvent& audit) = 0;
  // NotFound unless the connection has the rule.
  virtual Status RemoveApprovalRule(const std::string& connection_id, const std::string& rule_id,
                                    const AuditEvent& audit) = 0;
  // ResourceExhausted when the connection already has `max_pending` pending approvals.
  virtual Status CreateApproval(const CommandApproval& approval, size_t max_pending,
                                const AuditEvent& audit) = 0;
  // NotFound when there is none (or it was forgotten, kApprovalKeep after it ended).
  virtual Result<CommandApproval> GetApproval(const std::string& id) = 0;
  virtual Result<std::vector<CommandApproval>> ListApprovals(const ApprovalQuery& query) = 0;
  // Approves or rejects a pending approval at `audit.at`, decided by `audit`'s actor.
  // FailedPrecondition, saying what it is now, when it is no longer pending or its expiry has
  // passed. Returns the approval as it now is.
  virtual Result<CommandApproval> DecideApproval(const std::string& id, bool approve,
                                                 const std::string& reason,
                                                 const AuditEvent& audit) = 0;
  // An approved command's end at `audit.at`: completed when `result` has no error_code,
  // failed otherwise. FailedPrecondition unless it is approved.
  virtual Status FinishApproval(const std::string& id, const ApprovalResult& result,
                                const AuditEvent& audit) = 0;
  // In one transaction: marks every pending approval whose expiry is at or before `now` as
  // expired, and, when `abandon_approved` (at start-up: the commands of a console that
  // stopped are gone), every approved one as failed with "console_restarted", writing a copy
  // of `expired_event` or `abandoned_event` for each (target, owner and detail filled in);
  // forgets approvals that ended more than kApprovalKeep ago. Returns how many it ended.
  virtual Result<std::int64_t> EndApprovals(WallTime now, bool abandon_approved,
                                            const AuditEvent& expired_event,
                                            const AuditEvent& abandoned_event) = 0;

  // Two-factor sign-in. Using up a second factor fails with FailedPrecondition, writing
  // nothing, when its TOTP step is not after the last one used (a replay, or a code raced by
  // another request) or its recovery code was used meanwhile. Using a recovery code also
  // writes an audit event "two_factor.recovery_code_used" (like `audit`, with
  // {"for": audit.action, "recovery_codes_left": N} as its detail).

  // Nullopt for a user who never began enrolment (or whose two-factor was turned off).
  virtual Result<std::optional<TwoFactorCredential>> GetTwoFactor(const std::string& user_id) = 0;
  virtual Result<std::vector<RecoveryCode>> ListUnusedRecoveryCodes(
      const std::string& user_id) = 0;
  // Begins (or begins again) enrolment with a new sealed secret. FailedPrecondition when the
  // user's two-factor is already enabled.
  virtual Status BeginTwoFactor(const TwoFactorCredential& pending, const AuditEvent& audit) = 0;
  // Enables the pending credential: the code of `step` was proved, and `codes` become the
  // user's recovery codes. FailedPrecondition when there is nothing pending (never begun,
  // already enabled, or turned off meanwhile).
  virtual Status EnableTwoFactor(const std::string& user_id, std::int64_t step,
                                 const std::vector<RecoveryCode>& codes,
                                 const AuditEvent& audit) = 0;
  // Turns two-factor off and forgets the secret and recovery codes, using up `use` first
  // (none: an admin's reset). NotFound when the user has no two-factor credential.
  virtual Status DisableTwoFactor(const std::string& user_id,
                                  const std::optional<SecondFactorUse>& use,
                                  const AuditEvent& audit) = 0;
  // Uses up `use`, then replaces every recovery code of the user with `codes`.
  virtual Status ReplaceRecoveryCodes(const std::string& user_id, const SecondFactorUse& use,
                                      const std::vector<RecoveryCode>& codes,
                                      const AuditEvent& audit) = 0;
  // CreateSession for a password sign-in that also proved `use`, which it uses up.
  virtual Status CreateSessionWithSecondFactor(const Session& session, const SecondFactorUse& use,
                                               const AuditEvent& audit) = 0;

  virtual Result<ConsoleSettings> GetConsoleSettings() = 0;
  // Replaces the settings (updated_at from `audit.at`), writing `audit`.
  virtual Status SetConsoleSettings(const ConsoleSettings& settings, const AuditEvent& audit) = 0;

  // Install commands (docs/api.md): the connection's plan, if commands were ever generated.
  virtual Result<std::optional<InstallPlan>> GetInstallPlan(const std::string& connection_id) = 0;
  // Replaces the plan, writing `audit`. NotFound when the connection does not exist.
  virtual Status SetInstallPlan(const std::string& connection_id, const InstallPlan& plan,
                                const AuditEvent& audit) = 0;

  // Experiment runs (docs/api.md, "Experiment runs"). AcceptUpload stores the batch's
  // experiments records (above acked_through) in its transaction: upserts, new points only,
  // deletions and problems. Reads are per connection; NotFound for a run it does not have.
  virtual Result<RunPage> ListRuns(const RunQuery& query) = 0;
  virtual Result<RunFacets> ListRunFacets(const std::string& connection_id) = 0;
  virtual Result<StoredRun> GetRun(const std::string& connection_id,
                                   const std::string& run_id) = 0;
  virtual Result<std::vector<RunMetric>> ListRunMetrics(const std::string& connection_id,
                                                        const std::string& run_id) = 0;
  // The history of `metrics` of the run (empty: every metric), each thinned to at most
  // `max_points`.
  virtual Result<std::vector<RunHistory>> ReadRunHistory(const std::string& connection_id,
                                                         const std::string& run_id,
                                                         const std::vector<std::string>& metrics,
                                                         size_t max_points) = 0;
  // The newest problems the connection's agents reported, newest first.
  virtual Result<std::vector<RunProblem>> ListRunProblems(const std::string& connection_id,
                                                          int limit) = 0;

  virtual Status AppendAudit(const AuditEvent& event) = 0;
  virtual Result<std::vector<AuditEvent>> ListAudit(const AuditQuery& query) = 0;
};

}  // namespace uplink::console
