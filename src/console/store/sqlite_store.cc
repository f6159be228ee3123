#include "console/store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <span>
#include <unordered_map>

#include "common/json.h"
#include "common/text.h"
#include "console/store/sqlite_statement.h"

// Migration 2 drops a column (ALTER TABLE ... DROP COLUMN, SQLite 3.35) and checks JSON
// (built in since 3.38); Debian 12 ships 3.40.
static_assert(SQLITE_VERSION_NUMBER >= 3038000, "uplink-console needs SQLite 3.38 or newer");

namespace uplink::console {
namespace {

struct Migration {
  int version;
  const char* sql;
};

// Append only: a migration, once released, never changes. Times are Unix seconds.
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  is_admin INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  lookup_prefix TEXT NOT NULL,
  token_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX api_keys_by_prefix ON api_keys(lookup_prefix);
CREATE TABLE connections (
  id TEXT PRIMARY KEY,
  owner_id TEXT NOT NULL REFERENCES users(id),
  agent_name TEXT NOT NULL,
  cluster_name TEXT NOT NULL,
  token_prefix TEXT NOT NULL,
  token_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  revoked_at INTEGER,
  last_report_at INTEGER,
  cluster_uid TEXT,
  agent_version TEXT NOT NULL DEFAULT '',
  selector TEXT NOT NULL DEFAULT '',
  collected_at INTEGER,
  node_count INTEGER NOT NULL DEFAULT 0,
  nodes_ready INTEGER NOT NULL DEFAULT 0,
  gpu_capacity INTEGER NOT NULL DEFAULT 0,
  gpu_allocatable INTEGER NOT NULL DEFAULT 0,
  gpus_ready INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX connections_by_owner ON connections(owner_id, created_at);
CREATE INDEX connections_by_token_prefix ON connections(token_prefix);
-- A revoked connection frees its cluster name for a new one.
CREATE UNIQUE INDEX connections_live_cluster_name ON connections(owner_id, cluster_name)
  WHERE revoked_at IS NULL;
CREATE TABLE connection_nodes (
  id INTEGER PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  uid TEXT NOT NULL,
  ready INTEGER NOT NULL,
  unschedulable INTEGER NOT NULL,
  gpu_resource TEXT NOT NULL,
  gpu_capacity INTEGER NOT NULL,
  gpu_allocatable INTEGER NOT NULL,
  gpu_product TEXT NOT NULL,
  error TEXT
);
CREATE INDEX connection_nodes_by_connection ON connection_nodes(connection_id, position);
CREATE TABLE node_resources (
  node_id INTEGER NOT NULL REFERENCES connection_nodes(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  capacity INTEGER NOT NULL,
  allocatable INTEGER NOT NULL
);
CREATE INDEX node_resources_by_node ON node_resources(node_id);
CREATE TABLE node_taints (
  node_id INTEGER NOT NULL REFERENCES connection_nodes(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  effect TEXT NOT NULL
);
CREATE INDEX node_taints_by_node ON node_taints(node_id);
)sql"},
    {2, R"sql(
-- Roles replace is_admin. The column is dropped rather than kept in step with role: a
-- second source of truth could only drift, and no binary that reads it can open this
-- schema version anyway.
ALTER TABLE users ADD COLUMN role TEXT NOT NULL DEFAULT 'member'
  CONSTRAINT users_role CHECK (role IN ('admin', 'member'));
-- Emails compare case-insensitively from now on (ASCII, as lower() and the store do).
UPDATE users SET role = CASE WHEN is_admin != 0 THEN 'admin' ELSE 'member' END,
                 email = lower(email);
ALTER TABLE users DROP COLUMN is_admin;
ALTER TABLE users ADD COLUMN password_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN deactivated_at INTEGER;
CREATE INDEX users_by_creation ON users(created_at);

ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
-- Until now only `uplink-console init` made API keys.
UPDATE api_keys SET name = 'init';
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
ALTER TABLE api_keys ADD COLUMN revoked_at INTEGER;
CREATE INDEX api_keys_by_user ON api_keys(user_id, created_at);

CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  lookup_prefix TEXT NOT NULL,
  token_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  confirmed_until INTEGER,
  revoked_at INTEGER
);
CREATE INDEX sessions_by_prefix ON sessions(lookup_prefix);
CREATE INDEX sessions_by_user ON sessions(user_id);

-- superseded_at: a later rotate or the revoke turned the code off before it was redeemed.
CREATE TABLE handovers (
  id TEXT PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  lookup_prefix TEXT NOT NULL,
  code_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  redeemed_at INTEGER,
  superseded_at INTEGER
);
CREATE INDEX handovers_by_prefix ON handovers(lookup_prefix);
CREATE INDEX handovers_by_connection ON handovers(connection_id, created_at);

-- AUTOINCREMENT: ids are never reused, even after old events are pruned, so paging by id
-- stays correct.
CREATE TABLE audit_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  actor_type TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  actor_label TEXT NOT NULL,
  credential TEXT NOT NULL,
  action TEXT NOT NULL,
  target_type TEXT NOT NULL,
  target_id TEXT NOT NULL,
  owner_id TEXT NOT NULL,
  source_address TEXT NOT NULL,
  outcome TEXT NOT NULL CONSTRAINT audit_outcome CHECK (outcome IN ('ok', 'refused')),
  detail TEXT NOT NULL
    CONSTRAINT audit_detail CHECK (json_valid(detail) AND json_type(detail) = 'object')
);
CREATE INDEX audit_events_by_owner ON audit_events(owner_id, id);
CREATE INDEX audit_events_by_actor ON audit_events(actor_id, actor_type, id);
CREATE INDEX audit_events_by_target ON audit_events(target_id, id);
CREATE INDEX audit_events_by_action ON audit_events(action, id);

CREATE TABLE connection_agents (
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  role TEXT NOT NULL,
  instance TEXT NOT NULL,
  version TEXT NOT NULL,
  last_seen_at INTEGER NOT NULL,
  UNIQUE (connection_id, role, instance)
);
CREATE INDEX connection_agents_by_seen ON connection_agents(connection_id, last_seen_at);
)sql"},
    {3, R"sql(
-- Spool uploads (docs/protocol.md, "POST /api/v1/agent/uploads"). Records refer to their
-- stream by its integer id rather than repeating the connection id and the stream name
-- (up to 253 bytes) in every row and in the key's index.
CREATE TABLE streams (
  id INTEGER PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  stream TEXT NOT NULL,
  spool_id TEXT NOT NULL,
  -- Grows by one whenever spool_id changes, so it also counts the restarts.
  epoch INTEGER NOT NULL DEFAULT 0,
  acked_through INTEGER NOT NULL DEFAULT 0,
  records_stored INTEGER NOT NULL DEFAULT 0,
  duplicates_ignored INTEGER NOT NULL DEFAULT 0,
  lost_records INTEGER NOT NULL DEFAULT 0,
  -- The agent's cumulative losses for the current spool.
  dropped_records INTEGER NOT NULL DEFAULT 0,
  dropped_bytes INTEGER NOT NULL DEFAULT 0,
  corrupt_records INTEGER NOT NULL DEFAULT 0,
  corrupt_bytes INTEGER NOT NULL DEFAULT 0,
  rejected_records INTEGER NOT NULL DEFAULT 0,
  rejected_bytes INTEGER NOT NULL DEFAULT 0,
  first_upload_at INTEGER NOT NULL,
  last_upload_at INTEGER NOT NULL,
  agent_instance TEXT NOT NULL,
  agent_version TEXT NOT NULL,
  UNIQUE (connection_id, stream)
);
-- Every spool a stream has had, so that an older spool coming back (two shippers on one
-- stream, a restored backup) is refused instead of flipping the epoch and storing again.
CREATE TABLE stream_spools (
  stream_id INTEGER NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
  spool_id TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  PRIMARY KEY (stream_id, spool_id)
) WITHOUT ROWID;
-- A rowid table, not WITHOUT ROWID: payloads may be up to 1 MiB. Times are Unix
-- milliseconds here: agents send appended_at with milliseconds.
CREATE TABLE stream_records (
  id INTEGER PRIMARY KEY,
  stream_id INTEGER NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
  epoch INTEGER NOT NULL,
  sequence INTEGER NOT NULL,
  appended_at INTEGER NOT NULL,
  received_at INTEGER NOT NULL,
  payload TEXT NOT NULL,
  UNIQUE (stream_id, epoch, sequence)
);
-- Retention deletes the oldest records first.
CREATE INDEX stream_records_by_received ON stream_records(received_at);
)sql"},
    {4, R"sql(
-- Node samples (docs/protocol.md, "Node samples"). A node sample is not kept as a record: its
-- figures go to series, and each node's latest payload is kept whole for what is not a
-- series (GPU names, filesystems, gaps). Sample times are Unix milliseconds of collected_at
-- (the agent's clock); rollup buckets are Unix seconds.
CREATE TABLE sample_nodes (
  id INTEGER PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  node TEXT NOT NULL,
  latest_at INTEGER NOT NULL,
  latest_boot_time INTEGER NOT NULL,
  latest_payload TEXT NOT NULL,
  -- The sample before the latest, for rates between the two.
  previous_at INTEGER,
  -- The 5-minute rollups are complete for the buckets before this one; a late sample moves
  -- it back to its own bucket, so that the rollups are made again from there.
  rolled_through INTEGER NOT NULL,
  UNIQUE (connection_id, node)
);
CREATE INDEX sample_nodes_by_rollup ON sample_nodes(rolled_through);
CREATE INDEX sample_nodes_by_latest ON sample_nodes(latest_at);
-- One metric of one node: label is the GPU index, the mount point, or ''. last_seen (Unix
-- seconds) moves with the rollups; a series unseen for the whole retention is forgotten.
-- AUTOINCREMENT: samples and rollups name series by id, so an id is never given again.
CREATE TABLE sample_series (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  node_id INTEGER NOT NULL REFERENCES sample_nodes(id) ON DELETE CASCADE,
  metric TEXT NOT NULL,
  label TEXT NOT NULL,
  last_seen INTEGER NOT NULL,
  UNIQUE (node_id, metric, label)
);
CREATE INDEX sample_series_by_last_seen ON sample_series(last_seen);
-- One row per sample with its points packed as (series id, value) pairs: a row per point
-- would cost about three times the bytes and far more time to insert and to prune.
CREATE TABLE samples (
  id INTEGER PRIMARY KEY,
  node_id INTEGER NOT NULL REFERENCES sample_nodes(id) ON DELETE CASCADE,
  at INTEGER NOT NULL,
  boot_time INTEGER NOT NULL,
  points BLOB NOT NULL,
  UNIQUE (node_id, at)
);
CREATE INDEX samples_by_time ON samples(at);
-- Per node and 5-minute bucket, packed likewise: per series min, max, sum, count and last
-- (gauges) or the reset-adjusted increase and the seconds it covers (counters).
CREATE TABLE sample_rollups (
  id INTEGER PRIMARY KEY,
  node_id INTEGER NOT NULL REFERENCES sample_nodes(id) ON DELETE CASCADE,
  bucket INTEGER NOT NULL,
  aggregates BLOB NOT NULL,
  UNIQUE (node_id, bucket)
);
CREATE INDEX sample_rollups_by_bucket ON sample_rollups(bucket);
-- What a connection's node role collects; no row: the default plan.
CREATE TABLE node_plans (
  connection_id TEXT PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE,
  interval_seconds INTEGER NOT NULL,
  collectors TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
)sql"},
    {5, R"sql(
-- kubectl (docs/api.md, "kubectl"). The namespaces a connection's commands and cluster plan
-- may read; no row: not chosen yet. `namespaces` is the names joined by commas ("*" for
-- every namespace, "" for none).
CREATE TABLE namespace_scopes (
  connection_id TEXT PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE,
  namespaces TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
-- The latest cluster snapshot of each connection, and only that one: a payload is at most
-- 1 MiB (the record limit). Times are Unix milliseconds.
CREATE TABLE cluster_snapshots (
  connection_id TEXT PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE,
  stream TEXT NOT NULL,
  collected_at INTEGER NOT NULL,
  received_at INTEGER NOT NULL,
  payload TEXT NOT NULL
);
)sql"},
    {6, R"sql(
-- Two-factor sign-in (docs/security.md, "Two-factor sign-in"). One row per user who began
-- enrolment; enabled_at is set once they proved a first code. The TOTP secret is sealed with
-- the key in the data directory's two-factor.key file, never stored in the clear.
CREATE TABLE two_factor (
  user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  sealed_secret TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  enabled_at INTEGER,
  -- The TOTP step of the last accepted code: replays of it or of earlier steps are refused.
  last_used_step INTEGER NOT NULL DEFAULT 0
);
-- Only hashes: a recovery code is 80 random bits, compared, never shown again.
CREATE TABLE recovery_codes (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  code_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  used_at INTEGER
);
CREATE INDEX recovery_codes_by_user ON recovery_codes(user_id);
-- Console-wide settings: exactly one row.
CREATE TABLE console_settings (
  id INTEGER PRIMARY KEY CONSTRAINT console_settings_single_row CHECK (id = 1),
  require_two_factor INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER
);
INSERT INTO console_settings (id) VALUES (1);
)sql"},
    {7, R"sql(
-- Install commands (docs/api.md, "Install commands"): what each connection's were last
-- generated with. Times are Unix seconds.
CREATE TABLE install_plans (
  connection_id TEXT PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE,
  kubernetes INTEGER NOT NULL CHECK (kubernetes IN (0, 1)),
  gpu_runtime_class TEXT NOT NULL,
  selector TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
)sql"},
    {8, R"sql(
-- Liveness counts every accepted agent call, not only inventory reports (docs/api.md,
-- "Liveness"). Written at most every 30 s per connection; until now only reports were.
ALTER TABLE connections ADD COLUMN last_seen_at INTEGER;
UPDATE connections SET last_seen_at = last_report_at;
)sql"},
    {9, R"sql(
-- Approval rules (docs/api.md, "Approval rules"): each field a value or '*'; resource in the
-- guard's canonical form.
CREATE TABLE approval_rules (
  id TEXT PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  verb TEXT NOT NULL,
  resource TEXT NOT NULL,
  namespace TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  UNIQUE (connection_id, verb, resource, namespace)
);
-- kubectl commands that matched a rule: pending until approved, rejected or expired; an
-- approved one keeps its result for its requester. argv is a JSON array; the rule is kept as
-- it was matched (it may be removed later). Forgotten a day after they ended.
CREATE TABLE command_approvals (
  id TEXT PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  argv TEXT NOT NULL,
  rule_id TEXT NOT NULL,
  rule_verb TEXT NOT NULL,
  rule_resource TEXT NOT NULL,
  rule_namespace TEXT NOT NULL,
  requested_by TEXT NOT NULL,
  requested_by_label TEXT NOT NULL,
  requested_credential TEXT NOT NULL,
  requested_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  status TEXT NOT NULL,
  decided_at INTEGER,
  decided_by TEXT NOT NULL DEFAULT '',
  decided_by_label TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  finished_at INTEGER,
  error_code TEXT,
  error_message TEXT,
  exit_code INTEGER,
  stdout TEXT,
  stderr TEXT,
  duration_ms INTEGER,
  -- When it ended (decided, expired or finished), for forgetting it.
  ended_at INTEGER
);
CREATE INDEX command_approvals_by_connection ON command_approvals(connection_id, requested_at);
CREATE INDEX command_approvals_by_status ON command_approvals(status, expires_at);
CREATE INDEX command_approvals_by_end ON command_approvals(ended_at);
-- Each pod's `kubectl top pods` figures from every cluster snapshot of the last hour, for pod
-- right-sizing. collected_at is the snapshot's, Unix milliseconds.
CREATE TABLE pod_usage (
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  collected_at INTEGER NOT NULL,
  namespace TEXT NOT NULL,
  pod TEXT NOT NULL,
  cpu_millicores INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  PRIMARY KEY (connection_id, collected_at, namespace, pod)
) WITHOUT ROWID;
)sql"},
    {10, R"sql(
-- Experiment runs (docs/api.md, "Experiment runs"), one row per run of a connection. The
-- maps are the JSON objects the agent sent (already redacted there). Times are Unix
-- milliseconds; started_at is 0 for a run that has not said when it started (it sorts last).
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  run_id TEXT NOT NULL,
  source TEXT NOT NULL,
  experiment_id TEXT NOT NULL,
  experiment TEXT NOT NULL,
  name TEXT NOT NULL,
  user_name TEXT NOT NULL,
  status TEXT NOT NULL,
  offline INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  exit_code INTEGER,
  location TEXT NOT NULL,
  params TEXT NOT NULL,
  tags TEXT NOT NULL,
  summary TEXT NOT NULL,
  redacted TEXT NOT NULL,
  omitted INTEGER NOT NULL,
  stream TEXT NOT NULL,
  first_seen_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (connection_id, run_id)
);
CREATE INDEX runs_by_start ON runs (connection_id, started_at DESC, run_id);
-- One row per metric of a run, with its latest point (highest step, then newest), so a run's
-- latest metrics are read without scanning its points.
CREATE TABLE run_metrics (
  id INTEGER PRIMARY KEY,
  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  latest_step INTEGER NOT NULL,
  latest_value REAL,
  latest_timestamp INTEGER NOT NULL,
  points INTEGER NOT NULL,
  UNIQUE (run, key)
);
-- Every point once: a point sent again (after a lost reply or a cursor reset) is ignored.
-- value is NULL for NaN.
CREATE TABLE run_metric_points (
  metric INTEGER NOT NULL REFERENCES run_metrics(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  timestamp INTEGER NOT NULL,
  value REAL,
  PRIMARY KEY (metric, step, timestamp)
) WITHOUT ROWID;
-- Runs or files an agent could not read, each reported once; the newest 1,000 per
-- connection are kept.
CREATE TABLE run_problems (
  id INTEGER PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  source TEXT NOT NULL,
  location TEXT NOT NULL,
  error TEXT NOT NULL,
  reported_at INTEGER NOT NULL,
  UNIQUE (connection_id, source, location)
);
CREATE INDEX run_problems_by_time ON run_problems (connection_id, reported_at DESC);
)sql"},
    {11, R"sql(
-- Workspace execution (docs/api.md, "Offers", "Reservations"). An offer is one connection's
-- capacity; its review, approved nodes and execution credentials hang off it.
CREATE TABLE offers (
  id TEXT PRIMARY KEY,
  owner_id TEXT NOT NULL REFERENCES users(id),
  connection_id TEXT NOT NULL UNIQUE REFERENCES connections(id),
  gpus INTEGER NOT NULL,
  country TEXT NOT NULL,
  available_from INTEGER,
  available_until INTEGER,
  price_per_gpu_hour TEXT NOT NULL,
  currency TEXT NOT NULL,
  max_lifetime_seconds INTEGER NOT NULL,
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  execution_enabled INTEGER NOT NULL DEFAULT 0,
  workload_namespace TEXT NOT NULL DEFAULT 'uplink-workspaces',
  ssh_enabled INTEGER NOT NULL DEFAULT 0,
  kubernetes_api_cidrs TEXT NOT NULL DEFAULT '[]',
  kubernetes_api_port INTEGER NOT NULL DEFAULT 443,
  helm_release TEXT NOT NULL DEFAULT '',
  controller_namespace TEXT NOT NULL DEFAULT '',
  controller_version TEXT NOT NULL DEFAULT '',
  controller_seen_at INTEGER,
  controller_draining INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX offers_by_owner ON offers(owner_id, created_at);
-- The admin's resource review: one per offer, replaced by a new one. Figures per GPU.
CREATE TABLE offer_reviews (
  offer_id TEXT PRIMARY KEY REFERENCES offers(id) ON DELETE CASCADE,
  authority_confirmed INTEGER NOT NULL,
  hardware_compatible INTEGER NOT NULL,
  isolation_verified INTEGER NOT NULL,
  expiry_and_cleanup_checked INTEGER NOT NULL,
  disk_eviction_tested INTEGER NOT NULL,
  network_policy_enforced INTEGER NOT NULL,
  price_includes_traffic INTEGER NOT NULL,
  cpu_millis_per_gpu INTEGER NOT NULL,
  memory_bytes_per_gpu INTEGER NOT NULL,
  disk_bytes_per_gpu INTEGER NOT NULL,
  transfer_budget_bytes INTEGER NOT NULL,
  notes TEXT NOT NULL,
  reviewed_by TEXT NOT NULL,
  reviewed_by_label TEXT NOT NULL,
  reviewed_at INTEGER NOT NULL
);
CREATE TABLE offer_nodes (
  offer_id TEXT NOT NULL REFERENCES offers(id) ON DELETE CASCADE,
  node TEXT NOT NULL,
  PRIMARY KEY (offer_id, node)
) WITHOUT ROWID;
-- exe_ credentials, hashed like agent tokens; a rotation revokes the earlier one.
CREATE TABLE execution_credentials (
  id TEXT PRIMARY KEY,
  offer_id TEXT NOT NULL REFERENCES offers(id) ON DELETE CASCADE,
  lookup_prefix TEXT NOT NULL,
  token_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE INDEX execution_credentials_by_prefix ON execution_credentials(lookup_prefix);
CREATE INDEX execution_credentials_by_offer ON execution_credentials(offer_id, created_at);
CREATE TABLE reservations (
  id TEXT PRIMARY KEY,
  offer_id TEXT NOT NULL REFERENCES offers(id),
  owner_id TEXT NOT NULL REFERENCES users(id),
  gpus INTEGER NOT NULL,
  node TEXT NOT NULL,
  pod TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  cpu_millis INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  ephemeral_storage_bytes INTEGER NOT NULL,
  ended_at INTEGER
);
CREATE INDEX reservations_by_offer ON reservations(offer_id, state);
CREATE INDEX reservations_by_owner ON reservations(owner_id, created_at);
CREATE TABLE reservation_transitions (
  id INTEGER PRIMARY KEY,
  reservation_id TEXT NOT NULL REFERENCES reservations(id) ON DELETE CASCADE,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  source TEXT NOT NULL,
  at INTEGER NOT NULL
);
CREATE INDEX reservation_transitions_by_reservation ON reservation_transitions(reservation_id, id);
-- The controller's event keys applied, so that a re-sent event changes nothing.
CREATE TABLE workspace_event_keys (
  offer_id TEXT NOT NULL REFERENCES offers(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  applied_at INTEGER NOT NULL,
  PRIMARY KEY (offer_id, key)
) WITHOUT ROWID;
CREATE TABLE workspace_commands (
  id TEXT PRIMARY KEY,
  reservation_id TEXT NOT NULL REFERENCES reservations(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  code TEXT NOT NULL,
  timeout_seconds INTEGER NOT NULL,
  output_cap_bytes INTEGER NOT NULL,
  state TEXT NOT NULL,
  exit_code INTEGER,
  output_bytes INTEGER NOT NULL DEFAULT 0,
  truncated INTEGER NOT NULL DEFAULT 0,
  message TEXT NOT NULL DEFAULT '',
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER
);
CREATE INDEX workspace_commands_by_reservation ON workspace_commands(reservation_id, created_at);
-- A command's output in the chunks it arrived in: appended, never rewritten.
CREATE TABLE workspace_command_output (
  command_id TEXT NOT NULL REFERENCES workspace_commands(id) ON DELETE CASCADE,
  start INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (command_id, start)
) WITHOUT ROWID;
)sql"},
    {12, R"sql(
-- SSH access to workspaces (docs/api.md, "SSH grants"): the public keys a reservation's owner
-- allows in, each until its expiry (at most the reservation's end) or its revocation.
CREATE TABLE ssh_grants (
  id TEXT PRIMARY KEY,
  reservation_id TEXT NOT NULL REFERENCES reservations(id) ON DELETE CASCADE,
  key_type TEXT NOT NULL,
  public_key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  comment TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  revoked_at INTEGER,
  revoked_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX ssh_grants_by_reservation ON ssh_grants(reservation_id, created_at);
-- The bytes SSH may move for a reservation (the review's budget when it was placed) and has.
ALTER TABLE reservations ADD COLUMN transfer_budget_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reservations ADD COLUMN transfer_used_bytes INTEGER NOT NULL DEFAULT 0;
)sql"},
    {13, R"sql(
-- The SSH relay (docs/protocol.md, "SSH relay"): the workspace's host key, pinned at its first
-- capability report; when sshd was last reported; when the console's handover probe last read
-- sshd's identification line with that key pinned.
ALTER TABLE reservations ADD COLUMN ssh_host_key TEXT NOT NULL DEFAULT '';
ALTER TABLE reservations ADD COLUMN ssh_reported_at INTEGER;
ALTER TABLE reservations ADD COLUMN ssh_handover_at INTEGER;
)sql"},
};

constexpr const char* kUserColumns =
    "id, email, role, password_hash, created_at, deactivated_at, "
    "(SELECT enabled_at FROM two_factor WHERE two_factor.user_id = users.id)";
constexpr const char* kApiKeyColumns =
    "id, user_id, name, lookup_prefix, token_hash, created_at, expires_at, revoked_at";
constexpr const char* kSessionColumns =
    "id, user_id, lookup_prefix, token_hash, created_at, expires_at, confirmed_until, "
    "revoked_at";
constexpr const char* kHandoverColumns =
    "id, connection_id, lookup_prefix, code_hash, created_at, expires_at, redeemed_at, "
    "superseded_at";
constexpr const char* kAuditColumns =
    "id, at, actor_type, actor_id, actor_label, credential, action, target_type, target_id, "
    "owner_id, source_address, outcome, detail";
// Every connection query joins its owner, so that authenticating an agent is one query.
constexpr const char* kConnectionColumns =
    "c.id, c.owner_id, c.agent_name, c.cluster_name, c.token_prefix, c.token_hash, "
    "c.created_at, c.expires_at, c.revoked_at, c.last_report_at, c.cluster_uid, "
    "c.agent_version, c.selector, c.collected_at, c.node_count, c.nodes_ready, "
    "c.gpu_capacity, c.gpu_allocatable, c.gpus_ready, u.deactivated_at, "
    // Whether the owner lacks the two-factor sign-in the console requires: answered with the
    // row, so that the agent's cached row carries it (every write empties that cache).
    "(SELECT require_two_factor FROM console_settings WHERE id = 1) AND NOT EXISTS "
    "(SELECT 1 FROM two_factor t WHERE t.user_id = c.owner_id AND t.enabled_at IS NOT NULL), "
    "c.last_seen_at";

constexpr int kMaxAuditPage = 500;

constexpr const char* kStreamColumns =
    "stream, spool_id, epoch, acked_through, records_stored, duplicates_ignored, lost_records, "
    "dropped_records, dropped_bytes, corrupt_records, corrupt_bytes, rejected_records, "
    "rejected_bytes, first_upload_at, last_upload_at, agent_instance, agent_version";

LossCount AtLeast(LossCount stored, LossCount sent) {
  return {std::max(stored.records, sent.records), std::max(stored.bytes, sent.bytes)};
}

// What SQLite's lower() does without ICU, so that stored and queried emails agree.
std::string LowerAscii(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

std::string_view RoleName(Role role) { return role == Role::kAdmin ? "admin" : "member"; }

}  // namespace

InventoryTotals ComputeTotals(const std::vector<Node>& nodes) {
  InventoryTotals totals;
  for (const Node& node : nodes) {
    ++totals.nodes;
    totals.gpu_capacity += node.gpu_capacity;
    totals.gpu_allocatable += node.gpu_allocatable;
    if (node.ready) {
      ++totals.nodes_ready;
      if (!node.unschedulable) totals.gpus_ready += node.gpu_allocatable;
    }
  }
  return totals;
}

namespace {

User UserFromRow(const auto& row) {
  User user;
  user.id = row.Text(0);
  user.email = row.Text(1);
  user.role = row.Text(2) == "admin" ? Role::kAdmin : Role::kMember;
  user.password_hash = row.Text(3);
  user.created_at = row.Time(4);
  user.deactivated_at = row.OptionalTime(5);
  user.two_factor_enabled_at = row.OptionalTime(6);
  return user;
}

ApiKey ApiKeyFromRow(const auto& row) {
  ApiKey key;
  key.id = row.Text(0);
  key.user_id = row.Text(1);
  key.name = row.Text(2);
  key.lookup_prefix = row.Text(3);
  key.token_hash = row.Text(4);
  key.created_at = row.Time(5);
  key.expires_at = row.OptionalTime(6);
  key.revoked_at = row.OptionalTime(7);
  return key;
}

Session SessionFromRow(const auto& row) {
  Session session;
  session.id = row.Text(0);
  session.user_id = row.Text(1);
  session.lookup_prefix = row.Text(2);
  session.token_hash = row.Text(3);
  session.created_at = row.Time(4);
  session.expires_at = row.Time(5);
  session.confirmed_until = row.OptionalTime(6);
  session.revoked_at = row.OptionalTime(7);
  return session;
}

Handover HandoverFromRow(const auto& row) {
  Handover handover;
  handover.id = row.Text(0);
  handover.connection_id = row.Text(1);
  handover.lookup_prefix = row.Text(2);
  handover.code_hash = row.Text(3);
  handover.created_at = row.Time(4);
  handover.expires_at = row.Time(5);
  handover.redeemed_at = row.OptionalTime(6);
  handover.superseded_at = row.OptionalTime(7);
  return handover;
}

AuditEvent AuditEventFromRow(const auto& row) {
  AuditEvent event;
  event.id = row.Int(0);
  event.at = row.Time(1);
  event.actor_type = row.Text(2);
  event.actor_id = row.Text(3);
  event.actor_label = row.Text(4);
  event.credential = row.Text(5);
  event.action = row.Text(6);
  event.target_type = row.Text(7);
  event.target_id = row.Text(8);
  event.owner_id = row.Text(9);
  event.source_address = row.Text(10);
  event.outcome = row.Text(11);
  event.detail = row.Text(12);
  return event;
}

Connection ConnectionFromRow(const auto& row) {
  Connection c;
  c.id = row.Text(0);
  c.owner_id = row.Text(1);
  c.agent_name = row.Text(2);
  c.cluster_name = row.Text(3);
  c.token_prefix = row.Text(4);
  c.token_hash = row.Text(5);
  c.created_at = row.Time(6);
  c.expires_at = row.Time(7);
  c.revoked_at = row.OptionalTime(8);
  c.last_report_at = row.OptionalTime(9);
  c.cluster_uid = row.OptionalText(10);
  c.agent_version = row.Text(11);
  c.selector = row.Text(12);
  c.collected_at = row.OptionalTime(13);
  c.totals = {row.Int(14), row.Int(15), row.Int(16), row.Int(17), row.Int(18)};
  c.owner_deactivated_at = row.OptionalTime(19);
  c.owner_needs_two_factor = row.Int(20) != 0;
  c.last_seen_at = row.OptionalTime(21);
  return c;
}

StreamSummary StreamFromRow(const auto& row) {
  StreamSummary stream;
  stream.stream = row.Text(0);
  stream.spool_id = row.Text(1);
  stream.epoch = row.Int(2);
  stream.acked_through = row.Int(3);
  stream.records_stored = row.Int(4);
  stream.duplicates_ignored = row.Int(5);
  stream.lost_records = row.Int(6);
  stream.agent_losses = {{row.Int(7), row.Int(8)}, {row.Int(9), row.Int(10)},
                         {row.Int(11), row.Int(12)}};
  stream.first_upload_at = row.Time(13);
  stream.last_upload_at = row.Time(14);
  stream.agent_instance = row.Text(15);
  stream.agent_version = row.Text(16);
  return stream;
}

std::string SelectFrom(const char* columns, const char* table_and_tail) {
  return std::string("SELECT ") + columns + " FROM " + table_and_tail;
}

std::string ConnectionQuery(const char* tail) {
  return std::string("SELECT ") + kConnectionColumns +
         " FROM connections c JOIN users u ON u.id = c.owner_id " + tail;
}

}  // namespace

int SqliteStore::LatestSchemaVersion() { return std::span(kMigrations).back().version; }

SqliteStore::SqliteStore(sqlite3* db) : db_(db) {}

SqliteStore::~SqliteStore() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  // Create the file ourselves so that it (and SQLite's -wal and -shm files, which copy its
  // mode) is readable by the owner only.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("opening database " + path, errno);
  ::close(fd);

  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return IOError("opening database " + path + ": " + message);
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 5000);
  UPLINK_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  // FULL: a rotated or revoked token must survive a power cut; writes are rare.
  UPLINK_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  UPLINK_RETURN_IF_ERROR(store->Exec("PRAGMA foreign_keys=ON"));
  UPLINK_RETURN_IF_ERROR(store->Migrate().WithContext("migrating database " + path));
  return store;
}

Status SqliteStore::Error(std::string_view what) const {
  int code = sqlite3_extended_errcode(db_);
  std::string message = std::string(what) + ": " + sqlite3_errmsg(db_);
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return UnavailableError(std::move(message));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return DataLossError(std::move(message));
    default:
      break;
  }
  switch (code) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
      return AlreadyExistsError(std::move(message));
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return NotFoundError(std::move(message));
    case SQLITE_CONSTRAINT_CHECK:
      return InvalidArgumentError(std::move(message));
    default:
      return IOError(std::move(message));
  }
}

Status SqliteStore::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return Error("executing SQL").WithContext(message);
  }
  return Status::Ok();
}

Result<sqlite3_stmt*> SqliteStore::Prepare(const char* sql) {
  auto it = statements_.find(std::string_view(sql));
  if (it != statements_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    return Error("preparing statement");
  }
  statements_.emplace(sql, stmt);
  return stmt;
}

struct SqliteStore::PendingWrite {
  const std::function<Status()>& body;
  CredentialCache cache;
  Status status = Status::Ok();
  bool done = false;
};

Status SqliteStore::WriteTransaction(const std::function<Status()>& body,
                                     CredentialCache cache) {
  // Bodies of one group share a transaction; beyond this many they wait for the next, so
  // that one caller's wait stays bounded.
  constexpr size_t kMaxGroup = 64;
  PendingWrite mine{body, cache};
  std::unique_lock writes(writes_mutex_);
  pending_writes_.push_back(&mine);
  while (!mine.done) {
    writes_changed_.wait(writes, [&] { return mine.done || !committing_; });
    if (mine.done) break;
    // Lead a group: this write and those waiting with it, in arrival order.
    committing_ = true;
    const size_t size = std::min(pending_writes_.size(), kMaxGroup);
    std::vector<PendingWrite*> group(pending_writes_.begin(),
                                     pending_writes_.begin() + static_cast<std::ptrdiff_t>(size));
    pending_writes_.erase(pending_writes_.begin(),
                          pending_writes_.begin() + static_cast<std::ptrdiff_t>(size));
    writes.unlock();
    CommitGroup(group);
    writes.lock();
    for (PendingWrite* write : group) write->done = true;
    committing_ = false;
    writes_changed_.notify_all();
  }
  return mine.status;
}

void SqliteStore::CommitGroup(const std::vector<PendingWrite*>& group) {
  std::lock_guard lock(mutex_);
  auto fail_all = [](std::span<PendingWrite* const> writes, const Status& status) {
    for (PendingWrite* write : writes) write->status = status;
  };
  if (Status begun = Exec("BEGIN IMMEDIATE"); !begun.ok()) return fail_all(group, begun);
  std::vector<PendingWrite*> applied;  // in the open transaction, not yet committed
  for (size_t i = 0; i < group.size(); ++i) {
    PendingWrite& write = *group[i];
    if (write.cache == CredentialCache::kEmpty) connections_by_token_prefix_.clear();
    Status status = Exec("SAVEPOINT uplink_write");
    if (status.ok()) {
      try {
        status = write.body();
      } catch (const std::exception& e) {
        status = InternalError(std::string("a store write threw: ") + e.what());
      }
    }
    if (sqlite3_get_autocommit(db_) != 0) {
      // SQLite rolled the whole transaction back (an I/O error, a full disk): the writes
      // before this one in the group are undone with it. The rest get a transaction of
      // their own.
      if (status.ok()) status = UnavailableError("the store's transaction was rolled back");
      write.status = status;
      fail_all(applied, status);
      applied.clear();
      if (Status begun = Exec("BEGIN IMMEDIATE"); !begun.ok()) {
        return fail_all(std::span(group).subspan(i + 1), begun);
      }
      continue;
    }
    if (status.ok()) status = Exec("RELEASE uplink_write");
    if (!status.ok()) {
      (void)Exec("ROLLBACK TO uplink_write");
      (void)Exec("RELEASE uplink_write");
    } else {
      applied.push_back(&write);
    }
    write.status = status;
  }
  if (Status committed = Exec("COMMIT"); !committed.ok()) {
    (void)Exec("ROLLBACK");
    fail_all(applied, committed);
  }
}

Result<int> SqliteStore::Change(const char* sql, const Binder& bind, std::string_view what) {
  UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(sql));
  Statement statement(stmt);
  bind(statement);
  if (statement.Step() != SQLITE_DONE) return Error(what);
  return sqlite3_changes(db_);
}

Status SqliteStore::ForEachRow(const char* sql, const Binder& bind, const RowReader& read,
                               std::string_view what) {
  UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(sql));
  Statement query(stmt);
  bind(query);
  int rc;
  while ((rc = query.Step()) == SQLITE_ROW) read(query);
  if (rc != SQLITE_DONE) return Error(what);
  return Status::Ok();
}

Status SqliteStore::CheckExists(const char* sql, const std::string& id, std::string_view what) {
  bool found = false;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql, [&](Statement& s) { s.Bind(id); }, [&](const Statement&) { found = true; },
      "reading " + std::string(what)));
  if (!found) return NotFoundError(std::string(what) + " " + id + " does not exist");
  return Status::Ok();
}

Status SqliteStore::Migrate() {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(Exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations ("
      "version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"));
  // The version is read inside the write transaction, so two processes opening a new
  // database at once (init racing serve) apply each migration exactly once.
  UPLINK_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto apply = [&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * max_stmt,
                            Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
    std::int64_t current = 0;
    {
      Statement query(max_stmt);
      if (query.Step() != SQLITE_ROW) return Error("reading schema version");
      current = query.Int(0);
    }
    if (current > LatestSchemaVersion()) {
      return FailedPreconditionError(
          "the database has schema version " + std::to_string(current) +
          " but this uplink-console supports up to " + std::to_string(LatestSchemaVersion()) +
          "; run a newer uplink-console (or restore a backup made before the upgrade)");
    }
    for (const Migration& migration : kMigrations) {
      if (migration.version <= current) continue;
      Status status = Exec(migration.sql);
      if (!status.ok()) {
        return status.WithContext("applying schema migration " + std::to_string(migration.version));
      }
      UPLINK_ASSIGN_OR_RETURN(
          sqlite3_stmt * record,
          Prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"));
      Statement insert(record);
      insert.Bind(static_cast<std::int64_t>(migration.version))
          .Bind(std::chrono::system_clock::now());
      if (insert.Step() != SQLITE_DONE) return Error("recording schema migration");
    }
    return Status::Ok();
  };
  Status status = apply();
  if (status.ok()) status = Exec("COMMIT");
  if (!status.ok()) (void)Exec("ROLLBACK");
  return status;
}

Status SqliteStore::Ping() {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare("SELECT 1"));
  Statement query(stmt);
  if (query.Step() != SQLITE_ROW) return Error("querying the database");
  return Status::Ok();
}

// --- Audit ---------------------------------------------------------------------------------

Status SqliteStore::InsertAudit(const AuditEvent& e) {
  auto inserted = Change(
      "INSERT INTO audit_events (at, actor_type, actor_id, actor_label, credential, action, "
      "target_type, target_id, owner_id, source_address, outcome, detail) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(e.at).Bind(e.actor_type).Bind(e.actor_id).Bind(e.actor_label).Bind(e.credential);
        s.Bind(e.action).Bind(e.target_type).Bind(e.target_id).Bind(e.owner_id);
        s.Bind(e.source_address).Bind(e.outcome).Bind(e.detail.empty() ? "{}" : e.detail);
      },
      "recording audit event");
  if (!inserted.ok() && sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_CHECK) {
    return InvalidArgumentError("audit event \"" + OneLineExcerpt(e.action, 64) +
                                "\" refused: its outcome must be \"ok\" or \"refused\" and its "
                                "detail a JSON object; nothing was changed");
  }
  return inserted.status();
}

Status SqliteStore::AppendAudit(const AuditEvent& event) {
  std::lock_guard lock(mutex_);
  return InsertAudit(event);
}

Result<std::vector<AuditEvent>> SqliteStore::ListAudit(const AuditQuery& query) {
  // The SQL depends on which filters are set (16 combinations, each cached once).
  std::string filters;
  if (query.target_id) filters += " AND target_id = ?";
  if (query.action) filters += " AND action = ?";
  if (query.before_id) filters += " AND id < ?";
  auto newest = [&](const char* condition) {
    return SelectFrom(kAuditColumns, "audit_events WHERE ") + condition + filters +
           " ORDER BY id DESC LIMIT ?";
  };
  std::string sql;
  if (query.owner_id) {
    // "About their things or by them": each side walks its own index from the newest down
    // and stops after one page, rather than sorting all of the user's events for every page.
    // UNION drops an event that is both.
    sql = std::string("SELECT * FROM (") + newest("owner_id = ?") +
          ") UNION SELECT * FROM (" + newest("actor_id = ? AND actor_type = 'user'") +
          ") ORDER BY id DESC LIMIT ?";
  } else {
    sql = newest("1");
  }
  std::int64_t limit = std::clamp(query.limit, 1, kMaxAuditPage);

  std::lock_guard lock(mutex_);
  std::vector<AuditEvent> events;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(),
      [&](Statement& s) {
        auto bind_filters = [&] {
          if (query.target_id) s.Bind(*query.target_id);
          if (query.action) s.Bind(*query.action);
          if (query.before_id) s.Bind(*query.before_id);
          s.Bind(limit);
        };
        if (query.owner_id) {
          s.Bind(*query.owner_id);
          bind_filters();
          s.Bind(*query.owner_id);
          bind_filters();
          s.Bind(limit);
        } else {
          bind_filters();
        }
      },
      [&](const Statement& row) { events.push_back(AuditEventFromRow(row)); },
      "reading the audit log"));
  return events;
}

// --- Users ---------------------------------------------------------------------------------

Status SqliteStore::InsertUser(const User& user) {
  std::string email = LowerAscii(user.email);
  auto inserted = Change(
      "INSERT INTO users (id, email, role, password_hash, created_at, deactivated_at) "
      "VALUES (?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(user.id).Bind(email).Bind(RoleName(user.role)).Bind(user.password_hash);
        s.Bind(user.created_at).Bind(user.deactivated_at);
      },
      "creating user");
  if (!inserted.ok() && sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_UNIQUE) {
    return ConflictError("the email " + OneLineExcerpt(email, 254) +
                         " is taken by another user; choose another email");
  }
  return inserted.status();
}

Status SqliteStore::CreateUser(const User& user, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertUser(user));
    return InsertAudit(audit);
  });
}

Status SqliteStore::CreateUserWithApiKey(const User& user, const ApiKey& key,
                                         const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertUser(user));
    UPLINK_RETURN_IF_ERROR(InsertApiKey(key));
    return InsertAudit(audit);
  });
}

Result<User> SqliteStore::GetUser(const std::string& id) {
  static const std::string sql = SelectFrom(kUserColumns, "users WHERE id = ?");
  std::lock_guard lock(mutex_);
  std::optional<User> user;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [&](Statement& s) { s.Bind(id); },
      [&](const Statement& row) { user = UserFromRow(row); }, "reading user"));
  if (!user) return NotFoundError("user " + id + " does not exist");
  return std::move(*user);
}

Result<User> SqliteStore::FindUserByEmail(const std::string& email) {
  static const std::string sql = SelectFrom(kUserColumns, "users WHERE email = ?");
  std::string lowered = LowerAscii(email);
  std::lock_guard lock(mutex_);
  std::optional<User> user;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [&](Statement& s) { s.Bind(lowered); },
      [&](const Statement& row) { user = UserFromRow(row); }, "looking up user"));
  if (!user) return NotFoundError("no user has this email");
  return std::move(*user);
}

Result<std::vector<User>> SqliteStore::ListUsers() {
  static const std::string sql = SelectFrom(kUserColumns, "users ORDER BY created_at, rowid");
  std::lock_guard lock(mutex_);
  std::vector<User> users;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [](Statement&) {},
      [&](const Statement& row) { users.push_back(UserFromRow(row)); }, "listing users"));
  return users;
}

Result<std::int64_t> SqliteStore::CountUsers() {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare("SELECT COUNT(*) FROM users"));
  Statement query(stmt);
  if (query.Step() != SQLITE_ROW) return Error("counting users");
  return query.Int(0);
}

Status SqliteStore::RevokeLiveSessions(const std::string& user_id,
                                       const std::string& except_session_id, WallTime at) {
  return Change(
             "UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND id != ? "
             "AND revoked_at IS NULL AND expires_at > ?",
             [&](Statement& s) { s.Bind(at).Bind(user_id).Bind(except_session_id).Bind(at); },
             "revoking sessions")
      .status();
}

Status SqliteStore::SetUserDeactivated(const std::string& id, std::optional<WallTime> at,
                                       const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(int changed,
                            Change("UPDATE users SET deactivated_at = ? WHERE id = ?",
                                   [&](Statement& s) { s.Bind(at).Bind(id); },
                                   "deactivating user"));
    if (changed == 0) return NotFoundError("user " + id + " does not exist");
    if (at) {
      // Checked inside the transaction, so two admins deactivating each other at once cannot
      // both succeed and leave nobody able to administer the console.
      UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt,
                              Prepare("SELECT COUNT(*) FROM users WHERE role = 'admin' AND "
                                      "deactivated_at IS NULL"));
      Statement query(stmt);
      if (query.Step() != SQLITE_ROW) return Error("counting active admins");
      if (query.Int(0) == 0) {
        return FailedPreconditionError(
            "this would leave no active admin; make another user an admin first");
      }
      // Reactivation leaves sessions revoked: the user signs in again.
      UPLINK_RETURN_IF_ERROR(RevokeLiveSessions(id, "", *at));
    }
    return InsertAudit(audit);
  });
}

Status SqliteStore::SetPassword(const std::string& id, const std::string& password_hash,
                                const std::string& keep_session_id, WallTime at,
                                const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(int changed,
                            Change("UPDATE users SET password_hash = ? WHERE id = ?",
                                   [&](Statement& s) { s.Bind(password_hash).Bind(id); },
                                   "changing password"));
    if (changed == 0) return NotFoundError("user " + id + " does not exist");
    UPLINK_RETURN_IF_ERROR(RevokeLiveSessions(id, keep_session_id, at));
    return InsertAudit(audit);
  });
}

// --- API keys ------------------------------------------------------------------------------

Status SqliteStore::InsertApiKey(const ApiKey& key) {
  auto inserted = Change(
      "INSERT INTO api_keys (id, user_id, name, lookup_prefix, token_hash, created_at, "
      "expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(key.id).Bind(key.user_id).Bind(key.name).Bind(key.lookup_prefix);
        s.Bind(key.token_hash).Bind(key.created_at).Bind(key.expires_at).Bind(key.revoked_at);
      },
      "creating API key");
  if (!inserted.ok() && sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_FOREIGNKEY) {
    return NotFoundError("user " + key.user_id + " does not exist");
  }
  return inserted.status();
}

Status SqliteStore::CreateApiKey(const ApiKey& key, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertApiKey(key));
    return InsertAudit(audit);
  });
}

Result<ApiKey> SqliteStore::GetApiKey(const std::string& id) {
  static const std::string sql = SelectFrom(kApiKeyColumns, "api_keys WHERE id = ?");
  std::lock_guard lock(mutex_);
  std::optional<ApiKey> key;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [&](Statement& s) { s.Bind(id); },
      [&](const Statement& row) { key = ApiKeyFromRow(row); }, "reading API key"));
  if (!key) return NotFoundError("API key " + id + " does not exist");
  return std::move(*key);
}

Result<std::vector<ApiKey>> SqliteStore::ListApiKeys(const std::string& user_id) {
  static const std::string sql =
      SelectFrom(kApiKeyColumns, "api_keys WHERE user_id = ? ORDER BY created_at, rowid");
  std::lock_guard lock(mutex_);
  std::vector<ApiKey> keys;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [&](Statement& s) { s.Bind(user_id); },
      [&](const Statement& row) { keys.push_back(ApiKeyFromRow(row)); }, "listing API keys"));
  return keys;
}

Result<std::vector<ApiKey>> SqliteStore::FindApiKeysByPrefix(const std::string& prefix) {
  static const std::string sql = SelectFrom(kApiKeyColumns, "api_keys WHERE lookup_prefix = ?");
  std::lock_guard lock(mutex_);
  std::vector<ApiKey> keys;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [&](Statement& s) { s.Bind(prefix); },
      [&](const Statement& row) { keys.push_back(ApiKeyFromRow(row)); }, "looking up API key"));
  return keys;
}

Status SqliteStore::RevokeApiKey(const std::string& id, WallTime at, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) { s.Bind(at).Bind(id); }, "revoking API key"));
    if (changed == 0) return CheckExists("SELECT 1 FROM api_keys WHERE id = ?", id, "API key");
    return InsertAudit(audit);
  });
}

// --- Sessions ------------------------------------------------------------------------------

Status SqliteStore::InsertSession(const Session& session) {
  auto inserted = Change(
      "INSERT INTO sessions (id, user_id, lookup_prefix, token_hash, created_at, expires_at, "
      "confirmed_until, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(session.id).Bind(session.user_id).Bind(session.lookup_prefix);
        s.Bind(session.token_hash).Bind(session.created_at).Bind(session.expires_at);
        s.Bind(session.confirmed_until).Bind(session.revoked_at);
      },
      "creating session");
  if (!inserted.ok() && sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_FOREIGNKEY) {
    return NotFoundError("user " + session.user_id + " does not exist");
  }
  return inserted.status();
}

Status SqliteStore::CreateSession(const Session& session, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertSession(session));
    return InsertAudit(audit);
  });
}

Result<std::vector<Session>> SqliteStore::FindSessionsByPrefix(const std::string& prefix) {
  static const std::string sql = SelectFrom(kSessionColumns, "sessions WHERE lookup_prefix = ?");
  std::lock_guard lock(mutex_);
  std::vector<Session> sessions;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [&](Statement& s) { s.Bind(prefix); },
      [&](const Statement& row) { sessions.push_back(SessionFromRow(row)); },
      "looking up session"));
  return sessions;
}

Status SqliteStore::ConfirmSession(const std::string& id, WallTime until,
                                   const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE sessions SET confirmed_until = ? WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) { s.Bind(until).Bind(id); }, "confirming session"));
    if (changed == 0) {
      UPLINK_RETURN_IF_ERROR(CheckExists("SELECT 1 FROM sessions WHERE id = ?", id, "session"));
      return FailedPreconditionError("this session was revoked; sign in again with "
                                     "\"uplink login\"");
    }
    return InsertAudit(audit);
  });
}

Status SqliteStore::RevokeSession(const std::string& id, WallTime at, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) { s.Bind(at).Bind(id); }, "revoking session"));
    if (changed == 0) return CheckExists("SELECT 1 FROM sessions WHERE id = ?", id, "session");
    return InsertAudit(audit);
  });
}

// --- Connections and handovers -------------------------------------------------------------

Status SqliteStore::InsertConnection(const Connection& c) {
  auto inserted = Change(
      "INSERT INTO connections (id, owner_id, agent_name, cluster_name, token_prefix, "
      "token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(c.id).Bind(c.owner_id).Bind(c.agent_name).Bind(c.cluster_name);
        s.Bind(c.token_prefix).Bind(c.token_hash).Bind(c.created_at).Bind(c.expires_at);
      },
      "creating connection");
  if (!inserted.ok()) {
    int code = sqlite3_extended_errcode(db_);
    if (code == SQLITE_CONSTRAINT_UNIQUE) {
      return ConflictError("a connection for cluster \"" + OneLineExcerpt(c.cluster_name, 63) +
                           "\" already exists; rotate its token, or revoke it first");
    }
    if (code == SQLITE_CONSTRAINT_FOREIGNKEY) {
      return NotFoundError("user " + c.owner_id + " does not exist");
    }
  }
  return inserted.status();
}

Status SqliteStore::InsertHandover(const Handover& h) {
  auto inserted = Change(
      "INSERT INTO handovers (id, connection_id, lookup_prefix, code_hash, created_at, "
      "expires_at, redeemed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      [&](Statement& s) {
        s.Bind(h.id).Bind(h.connection_id).Bind(h.lookup_prefix).Bind(h.code_hash);
        s.Bind(h.created_at).Bind(h.expires_at).Bind(h.redeemed_at);
      },
      "creating handover");
  if (!inserted.ok() && sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_FOREIGNKEY) {
    return NotFoundError("connection " + h.connection_id + " does not exist");
  }
  return inserted.status();
}

Status SqliteStore::SupersedePendingHandovers(const std::string& connection_id, WallTime at) {
  return Change(
             "UPDATE handovers SET superseded_at = ? WHERE connection_id = ? "
             "AND redeemed_at IS NULL AND superseded_at IS NULL",
             [&](Statement& s) { s.Bind(at).Bind(connection_id); }, "superseding handovers")
      .status();
}

Status SqliteStore::CreateConnection(const Connection& connection, const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertConnection(connection));
    return InsertAudit(audit);
  });
}

Status SqliteStore::CreateConnectionWithHandover(const Connection& connection,
                                                 const Handover& handover,
                                                 const AuditEvent& audit) {
  if (handover.connection_id != connection.id) {
    return InvalidArgumentError("the handover is for connection " + handover.connection_id +
                                ", not for the new connection " + connection.id);
  }
  return WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(InsertConnection(connection));
    UPLINK_RETURN_IF_ERROR(InsertHandover(handover));
    return InsertAudit(audit);
  });
}

Result<std::vector<Connection>> SqliteStore::QueryConnections(const char* sql,
                                                              const std::string& key) {
  std::vector<Connection> connections;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql,
      [&](Statement& s) {
        if (!key.empty()) s.Bind(key);
      },
      [&](const Statement& row) { connections.push_back(ConnectionFromRow(row)); },
      "reading connections"));
  return connections;
}

Result<Connection> SqliteStore::ReadConnection(const std::string& id) {
  static const std::string sql = ConnectionQuery("WHERE c.id = ?");
  UPLINK_ASSIGN_OR_RETURN(auto found, QueryConnections(sql.c_str(), id));
  if (found.empty()) return NotFoundError("connection " + id + " does not exist");
  return std::move(found.front());
}

Result<Connection> SqliteStore::GetConnection(const std::string& id) {
  std::lock_guard lock(mutex_);
  return ReadConnection(id);
}

Result<std::vector<Connection>> SqliteStore::ListConnections(const std::string& owner_id) {
  static const std::string sql =
      ConnectionQuery("WHERE c.owner_id = ? ORDER BY c.created_at, c.rowid");
  std::lock_guard lock(mutex_);
  return QueryConnections(sql.c_str(), owner_id);
}

Result<std::vector<Connection>> SqliteStore::ListAllConnections() {
  static const std::string sql = ConnectionQuery("ORDER BY c.created_at, c.rowid");
  std::lock_guard lock(mutex_);
  return QueryConnections(sql.c_str(), "");
}

Result<ConnectionRows> SqliteStore::FindConnectionsByTokenPrefix(
    const std::string& prefix) {
  static const std::string sql = ConnectionQuery("WHERE c.token_prefix = ?");
  // Bounds the cache: prefixes are 48 random bits, so only well-formed tokens that match a
  // connection are kept, and there are far fewer live connections than this.
  constexpr size_t kMaxCachedPrefixes = 65536;
  std::lock_guard lock(mutex_);
  if (auto cached = connections_by_token_prefix_.find(prefix);
      cached != connections_by_token_prefix_.end()) {
    return cached->second;
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<Connection> found, QueryConnections(sql.c_str(), prefix));
  auto connections = std::make_shared<const std::vector<Connection>>(std::move(found));
  if (!connections->empty()) {
    if (connections_by_token_prefix_.size() >= kMaxCachedPrefixes) {
      connections_by_token_prefix_.clear();
    }
    connections_by_token_prefix_.emplace(prefix, connections);
  }
  return ConnectionRows(std::move(connections));
}

Status SqliteStore::ReplaceToken(const std::string& id, const std::string& token_prefix,
                                 const std::string& token_hash, WallTime expires_at,
                                 const std::optional<Handover>& handover,
                                 const AuditEvent& audit) {
  if (handover && handover->connection_id != id) {
    return InvalidArgumentError("the handover is for connection " + handover->connection_id +
                                ", not for connection " + id);
  }
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE connections SET token_prefix = ?, token_hash = ?, expires_at = ? "
               "WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) {
                 s.Bind(token_prefix).Bind(token_hash).Bind(expires_at).Bind(id);
               },
               "replacing token"));
    if (changed == 0) {
      // Either it does not exist or a revoke got there first; a revoked connection stays dead.
      UPLINK_RETURN_IF_ERROR(
          CheckExists("SELECT 1 FROM connections WHERE id = ?", id, "connection"));
      return FailedPreconditionError("this connection was revoked and cannot get a new token; "
                                     "create a new connection");
    }
    // An older code would otherwise mint a token over the one just made.
    UPLINK_RETURN_IF_ERROR(SupersedePendingHandovers(id, audit.at));
    if (handover) UPLINK_RETURN_IF_ERROR(InsertHandover(*handover));
    return InsertAudit(audit);
  });
}

Status SqliteStore::RevokeConnection(const std::string& id, WallTime at,
                                     const AuditEvent& audit) {
  return WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        int changed,
        Change("UPDATE connections SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
               [&](Statement& s) { s.Bind(at).Bind(id); }, "revoking connection"));
    if (changed == 0) {
      return CheckExists("SELECT 1 FROM connections WHERE id = ?", id, "connection");
    }
    UPLINK_RETURN_IF_ERROR(SupersedePendingHandovers(id, at));
    return InsertAudit(audit);
  });
}

Result<std::vector<Handover>> SqliteStore::FindHandoversByPrefix(const std::string& prefix) {
  static const std::string sql =
      SelectFrom(kHandoverColumns, "handovers WHERE lookup_prefix = ?");
  std::lock_guard lock(mutex_);
  std::vector<Handover> handovers;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [&](Statement& s) { s.Bind(prefix); },
      [&](const Statement& row) { handovers.push_back(HandoverFromRow(row)); },
      "looking up handover"));
  return handovers;
}

Result<std::optional<Handover>> SqliteStore::LatestHandover(const std::string& connection_id) {
  static const std::string sql = SelectFrom(
      kHandoverColumns,
      "handovers WHERE connection_id = ? ORDER BY created_at DESC, rowid DESC LIMIT 1");
  std::lock_guard lock(mutex_);
  std::optional<Handover> latest;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) { latest = HandoverFromRow(row); }, "reading handover"));
  return latest;
}

Result<Connection> SqliteStore::RedeemHandover(const std::string& handover_id, WallTime now,
                                               const std::string& token_prefix,
                                               const std::string& token_hash,
                                               const AuditEvent& audit) {
  std::optional<Connection> redeemed;
  Status refusal;
  Status status = WriteTransaction([&]() -> Status {
    struct State {
      std::string connection_id;
      WallTime expires_at;
      bool redeemed = false;
      bool superseded = false;
      bool connection_revoked = false;
      bool owner_deactivated = false;
    };
    std::optional<State> state;
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT h.connection_id, h.expires_at, h.redeemed_at IS NOT NULL, "
        "h.superseded_at IS NOT NULL, c.revoked_at IS NOT NULL, u.deactivated_at IS NOT NULL "
        "FROM handovers h JOIN connections c ON c.id = h.connection_id "
        "JOIN users u ON u.id = c.owner_id WHERE h.id = ?",
        [&](Statement& s) { s.Bind(handover_id); },
        [&](const Statement& row) {
          state = State{row.Text(0), row.Time(1), row.Int(2) != 0, row.Int(3) != 0,
                        row.Int(4) != 0, row.Int(5) != 0};
        },
        "reading handover"));
    if (!state) return NotFoundError("handover " + handover_id + " does not exist");

    // The prefix before the colon is the API's error code (see Store::RedeemHandover).
    if (state->redeemed) {
      refusal = FailedPreconditionError(
          "handover_redeemed: this handover code was already used, and works only once; "
          "rotate the connection's token to get a new one");
    } else if (state->connection_revoked) {
      refusal = FailedPreconditionError(
          "handover_superseded: the connection was revoked, so this handover code no longer "
          "works; a revoked connection cannot be rotated, so create a new connection");
    } else if (state->superseded) {
      refusal = FailedPreconditionError(
          "handover_superseded: a later rotate replaced this handover code; rotate the "
          "connection's token again to get a new one");
    } else if (state->expires_at <= now) {
      refusal = FailedPreconditionError(
          "handover_expired: this handover code has expired; rotate the connection's token "
          "to get a new one");
    } else if (state->owner_deactivated) {
      // Checked here, not before the transaction, so a deactivation that lands meanwhile wins.
      refusal = FailedPreconditionError(
          "owner_deactivated: the connection's owner is deactivated; an admin must reactivate "
          "them before this code can be used");
    }
    if (!refusal.ok()) {
      AuditEvent refused = audit;
      refused.action = "handover.refused";
      refused.outcome = "refused";
      std::string_view code = std::string_view(refusal.message());
      refused.detail = ToJson(json::object{{"reason", code.substr(0, code.find(':'))}});
      return InsertAudit(refused);
    }

    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE handovers SET redeemed_at = ? WHERE id = ?",
               [&](Statement& s) { s.Bind(now).Bind(handover_id); }, "redeeming handover")
            .status());
    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE connections SET token_prefix = ?, token_hash = ? WHERE id = ?",
               [&](Statement& s) {
                 s.Bind(token_prefix).Bind(token_hash).Bind(state->connection_id);
               },
               "installing the handed-over token")
            .status());
    UPLINK_RETURN_IF_ERROR(InsertAudit(audit));
    UPLINK_ASSIGN_OR_RETURN(redeemed, ReadConnection(state->connection_id));
    return Status::Ok();
  });
  if (!status.ok()) return status;
  if (!refusal.ok()) return refusal;
  return std::move(*redeemed);
}

// --- Reports -------------------------------------------------------------------------------

Status SqliteStore::AcceptReport(const std::string& connection_id, const std::string& token_hash,
                                 const InventoryReport& report, WallTime received_at,
                                 const AuditEvent& audit) {
  Status refusal;
  // IMMEDIATE: two reports racing for the first binding must not both see it unset. A report
  // changes nothing authentication reads (token, expiry, revocation, owner), so it keeps the
  // credential cache, except for the first binding, which callers see on the connection.
  Status status = WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> bound,
                            CheckTokenLive(connection_id, token_hash, received_at, "report"));
    if (bound && *bound != report.cluster_uid) {
      // Commits only the refusal's audit event.
      refusal = RefuseClusterMismatch(audit, report.cluster_uid, *bound);
      return refusal.code() == StatusCode::kConflict ? Status::Ok() : refusal;
    }

    InventoryTotals totals = ComputeTotals(report.nodes);
    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE connections SET cluster_uid = ?, last_report_at = ?, "
               "last_seen_at = max(coalesce(last_seen_at, 0), ?), agent_version = ?, "
               "selector = ?, collected_at = ?, node_count = ?, nodes_ready = ?, "
               "gpu_capacity = ?, gpu_allocatable = ?, gpus_ready = ? WHERE id = ?",
               [&](Statement& s) {
                 s.Bind(report.cluster_uid).Bind(received_at).Bind(received_at);
                 s.Bind(report.agent_version);
                 s.Bind(report.selector).Bind(report.collected_at).Bind(totals.nodes);
                 s.Bind(totals.nodes_ready).Bind(totals.gpu_capacity);
                 s.Bind(totals.gpu_allocatable).Bind(totals.gpus_ready).Bind(connection_id);
               },
               "updating connection")
            .status());
    if (!bound) {
      connections_by_token_prefix_.clear();
      AuditEvent bind = audit;
      bind.action = "connection.bind";
      bind.outcome = "ok";
      bind.detail = ToJson(json::object{{"cluster_uid", report.cluster_uid}});
      UPLINK_RETURN_IF_ERROR(InsertAudit(bind));
    }
    UPLINK_RETURN_IF_ERROR(RecordAgent(
        connection_id,
        AgentSeen{"inventory", report.agent_instance, report.agent_version, received_at}));
    // An offer waiting for its cluster's inventory is connected now.
    UPLINK_RETURN_IF_ERROR(MarkOfferConnected(connection_id, audit));

    UPLINK_RETURN_IF_ERROR(Change("DELETE FROM connection_nodes WHERE connection_id = ?",
                                  [&](Statement& s) { s.Bind(connection_id); },
                                  "replacing nodes")
                               .status());
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * node_stmt,
        Prepare("INSERT INTO connection_nodes (connection_id, position, name, uid, ready, "
                "unschedulable, gpu_resource, gpu_capacity, gpu_allocatable, gpu_product, "
                "error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * resource_stmt,
        Prepare("INSERT INTO node_resources (node_id, name, capacity, allocatable) "
                "VALUES (?, ?, ?, ?)"));
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * taint_stmt,
        Prepare("INSERT INTO node_taints (node_id, key, value, effect) VALUES (?, ?, ?, ?)"));
    std::int64_t position = 0;
    for (const Node& node : report.nodes) {
      {
        Statement insert(node_stmt);
        insert.Bind(connection_id).Bind(position++).Bind(node.name).Bind(node.uid);
        insert.Bind(node.ready).Bind(node.unschedulable).Bind(node.gpu_resource);
        insert.Bind(node.gpu_capacity).Bind(node.gpu_allocatable).Bind(node.gpu_product);
        insert.Bind(node.error);
        if (insert.Step() != SQLITE_DONE) return Error("storing node " + node.name);
      }
      std::int64_t node_id = sqlite3_last_insert_rowid(db_);
      for (const GpuResource& resource : node.resources) {
        Statement insert(resource_stmt);
        insert.Bind(node_id).Bind(resource.name).Bind(resource.capacity).Bind(
            resource.allocatable);
        if (insert.Step() != SQLITE_DONE) return Error("storing resources of " + node.name);
      }
      for (const Taint& taint : node.taints) {
        Statement insert(taint_stmt);
        insert.Bind(node_id).Bind(taint.key).Bind(taint.value).Bind(taint.effect);
        if (insert.Step() != SQLITE_DONE) return Error("storing taints of " + node.name);
      }
    }
    return Status::Ok();
  }, CredentialCache::kKeep);
  if (!status.ok()) return status;
  return refusal;
}

// --- Uploads -------------------------------------------------------------------------------

Result<std::optional<std::string>> SqliteStore::CheckTokenLive(const std::string& connection_id,
                                                               const std::string& token_hash,
                                                               WallTime at, std::string_view what) {
  bool found = false;
  bool token_live = false;
  std::optional<std::string> bound;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT c.token_hash, c.revoked_at IS NULL AND c.expires_at > ? "
      "AND u.deactivated_at IS NULL, c.cluster_uid FROM connections c "
      "JOIN users u ON u.id = c.owner_id WHERE c.id = ?",
      [&](Statement& s) { s.Bind(at).Bind(connection_id); },
      [&](const Statement& row) {
        found = true;
        // Both hashes come from this database, so a plain comparison leaks nothing.
        token_live = row.Text(0) == token_hash && row.Int(1) != 0;
        bound = row.OptionalText(2);
      },
      "reading connection"));
  if (!found) return NotFoundError("connection " + connection_id + " does not exist");
  if (!token_live) {
    return UnauthenticatedError("the connection's token was rotated, revoked or expired, or its "
                                "owner deactivated, while this " + std::string(what) +
                                " was being received; nothing was stored");
  }
  return bound;
}

Status SqliteStore::RefuseClusterMismatch(const AuditEvent& audit, const std::string& cluster_uid,
                                          const std::string& bound) {
  AuditEvent mismatch = audit;
  mismatch.action = "connection.cluster_mismatch";
  mismatch.outcome = "refused";
  json::object detail;
  if (auto given = ParseJson(audit.detail.empty() ? "{}" : audit.detail);
      given.ok() && given->is_object()) {
    detail = std::move(given->get_object());
  }
  detail["cluster_uid"] = cluster_uid;
  detail["bound_cluster_uid"] = bound;
  mismatch.detail = ToJson(detail);
  UPLINK_RETURN_IF_ERROR(InsertAudit(mismatch));
  // The bound UID stays out of the message: the sender may not own that cluster. The
  // connection's owner reads it in the audit log.
  return ConflictError("this connection's token is bound to another cluster (a different "
                       "kube-system UID); create a separate connection for each cluster");
}

Result<std::int64_t> SqliteStore::PruneRecords(WallTime now, const RecordRetention& retention) {
  // A clock that went back runs it again rather than waiting for the old time to return.
  if (last_prune_ && now >= *last_prune_ && now - *last_prune_ < retention.interval) return 0;
  last_prune_ = now;
  UPLINK_ASSIGN_OR_RETURN(
      int deleted,
      Change("DELETE FROM stream_records WHERE id IN (SELECT id FROM stream_records "
             "WHERE received_at < ? ORDER BY received_at LIMIT ?)",
             [&](Statement& s) {
               s.Bind(ToUnixMillis(now - retention.max_age)).Bind(retention.max_records_per_run);
             },
             "deleting old records"));
  return deleted;
}

Status SqliteStore::RememberSpool(std::int64_t stream_id, const std::string& spool_id,
                                  std::int64_t epoch) {
  return Change("INSERT INTO stream_spools (stream_id, spool_id, epoch) VALUES (?, ?, ?)",
                [&](Statement& s) { s.Bind(stream_id).Bind(spool_id).Bind(epoch); },
                "recording a stream's spool")
      .status();
}

Result<UploadOutcome> SqliteStore::AcceptUpload(const std::string& connection_id,
                                                const std::string& token_hash,
                                                const UploadBatch& batch, WallTime received_at,
                                                const RecordRetention& retention,
                                                const AuditEvent& audit) {
  UploadOutcome outcome;
  Status status = WriteTransaction([&]() -> Status {
    UPLINK_RETURN_IF_ERROR(
        CheckTokenLive(connection_id, token_hash, received_at, "upload").status());

    struct Existing {
      std::int64_t id;
      std::string spool_id;
      std::int64_t epoch;
      std::int64_t acked_through;
      AgentLosses losses;
    };
    std::optional<Existing> existing;
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT id, spool_id, epoch, acked_through, dropped_records, dropped_bytes, "
        "corrupt_records, corrupt_bytes, rejected_records, rejected_bytes FROM streams "
        "WHERE connection_id = ? AND stream = ?",
        [&](Statement& s) { s.Bind(connection_id).Bind(batch.stream); },
        [&](const Statement& row) {
          existing = Existing{row.Int(0),
                              row.Text(1),
                              row.Int(2),
                              row.Int(3),
                              {{row.Int(4), row.Int(5)},
                               {row.Int(6), row.Int(7)},
                               {row.Int(8), row.Int(9)}}};
        },
        "reading stream"));

    std::int64_t stream_id = 0;
    std::int64_t acked_through = 0;  // before this upload, in the epoch it goes to
    AgentLosses losses = batch.losses;
    if (!existing) {
      UPLINK_RETURN_IF_ERROR(
          Change("INSERT INTO streams (connection_id, stream, spool_id, first_upload_at, "
                 "last_upload_at, agent_instance, agent_version) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 [&](Statement& s) {
                   s.Bind(connection_id).Bind(batch.stream).Bind(batch.spool_id);
                   s.Bind(received_at).Bind(received_at).Bind(batch.agent_instance);
                   s.Bind(batch.agent_version);
                 },
                 "creating stream")
              .status());
      stream_id = sqlite3_last_insert_rowid(db_);
      outcome.new_stream = true;
      UPLINK_RETURN_IF_ERROR(RememberSpool(stream_id, batch.spool_id, 0));
    } else if (existing->spool_id != batch.spool_id) {
      stream_id = existing->id;
      std::optional<std::int64_t> earlier_epoch;
      UPLINK_RETURN_IF_ERROR(ForEachRow(
          "SELECT epoch FROM stream_spools WHERE stream_id = ? AND spool_id = ?",
          [&](Statement& s) { s.Bind(stream_id).Bind(batch.spool_id); },
          [&](const Statement& row) { earlier_epoch = row.Int(0); }, "reading stream spools"));
      if (earlier_epoch) {
        return ConflictError(
            "spool " + batch.spool_id + " was replaced on stream " + batch.stream +
            " by spool " + existing->spool_id + " (epoch " + std::to_string(existing->epoch) +
            "); two shippers may share this stream: give each its own --stream, or remove "
            "this spool directory");
      }
      // The agent's spool was recreated: its sequences start again, so its records go to a
      // new epoch and nothing of the old one is overwritten.
      outcome.restarted = true;
      outcome.epoch = existing->epoch + 1;
      UPLINK_RETURN_IF_ERROR(RememberSpool(stream_id, batch.spool_id, outcome.epoch));
      AuditEvent restart = audit;
      restart.action = "stream.restart";
      restart.outcome = "ok";
      restart.detail = ToJson(json::object{{"stream", batch.stream},
                                           {"spool_id", batch.spool_id},
                                           {"previous_spool_id", existing->spool_id},
                                           {"previous_acked_through", existing->acked_through},
                                           {"epoch", outcome.epoch}});
      UPLINK_RETURN_IF_ERROR(InsertAudit(restart));
    } else {
      stream_id = existing->id;
      outcome.epoch = existing->epoch;
      acked_through = existing->acked_through;
      losses = {AtLeast(existing->losses.dropped, batch.losses.dropped),
                AtLeast(existing->losses.corrupt, batch.losses.corrupt),
                AtLeast(existing->losses.rejected, batch.losses.rejected)};
    }

    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * insert_stmt,
        Prepare("INSERT INTO stream_records (stream_id, epoch, sequence, appended_at, "
                "received_at, payload) VALUES (?, ?, ?, ?, ?, ?)"));
    std::int64_t received_millis = ToUnixMillis(received_at);
    std::vector<const UploadRecord*> new_samples;
    std::vector<const UploadRecord*> new_snapshots;
    std::vector<const UploadRecord*> new_experiments;
    for (const UploadRecord& record : batch.records) {
      if (record.sequence <= acked_through) {
        ++outcome.duplicates;
        continue;
      }
      ++outcome.stored;
      if (record.node_sample) {
        new_samples.push_back(&record);
        continue;
      }
      if (record.cluster_snapshot_at) {
        new_snapshots.push_back(&record);
        continue;
      }
      if (record.experiment_record) {
        new_experiments.push_back(&record);
        continue;
      }
      Statement insert(insert_stmt);
      insert.Bind(stream_id).Bind(outcome.epoch).Bind(record.sequence);
      insert.Bind(ToUnixMillis(record.appended_at)).Bind(received_millis);
      insert.BindUnowned(batch.Payload(record));
      if (insert.Step() != SQLITE_DONE) {
        return Error("storing record " + std::to_string(record.sequence));
      }
    }
    UPLINK_RETURN_IF_ERROR(StoreNodeSamples(connection_id, batch, new_samples, received_at,
                                            retention.samples, outcome));
    UPLINK_RETURN_IF_ERROR(
        StoreClusterSnapshot(connection_id, batch, new_snapshots, received_at, outcome));
    UPLINK_RETURN_IF_ERROR(
        StoreExperimentRecords(connection_id, batch, new_experiments, received_at, outcome));
    // Every sequence after acked_through up to last_sequence either arrived now or never will.
    if (batch.last_sequence > acked_through) {
      outcome.lost = batch.last_sequence - acked_through - outcome.stored;
      outcome.acked_through = batch.last_sequence;
    } else {
      outcome.acked_through = acked_through;
    }

    UPLINK_RETURN_IF_ERROR(
        Change("UPDATE streams SET spool_id = ?, epoch = ?, acked_through = ?, "
               "records_stored = records_stored + ?, "
               "duplicates_ignored = duplicates_ignored + ?, lost_records = lost_records + ?, "
               "dropped_records = ?, dropped_bytes = ?, corrupt_records = ?, corrupt_bytes = ?, "
               "rejected_records = ?, rejected_bytes = ?, last_upload_at = ?, "
               "agent_instance = ?, agent_version = ? WHERE id = ?",
               [&](Statement& s) {
                 s.Bind(batch.spool_id).Bind(outcome.epoch).Bind(outcome.acked_through);
                 s.Bind(outcome.stored).Bind(outcome.duplicates).Bind(outcome.lost);
                 s.Bind(losses.dropped.records).Bind(losses.dropped.bytes);
                 s.Bind(losses.corrupt.records).Bind(losses.corrupt.bytes);
                 s.Bind(losses.rejected.records).Bind(losses.rejected.bytes);
                 s.Bind(received_at).Bind(batch.agent_instance).Bind(batch.agent_version);
                 s.Bind(stream_id);
               },
               "updating stream")
            .status());
    UPLINK_ASSIGN_OR_RETURN(outcome.records_pruned, PruneRecords(received_at, retention));
    return MaintainSamples(received_at, retention.interval, retention.samples, outcome);
  }, CredentialCache::kKeep);
  if (!status.ok()) return status;
  return outcome;
}

Result<std::vector<StreamSummary>> SqliteStore::ListStreams(const std::string& connection_id) {
  static const std::string sql =
      SelectFrom(kStreamColumns, "streams WHERE connection_id = ? ORDER BY stream");
  std::lock_guard lock(mutex_);
  std::vector<StreamSummary> streams;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql.c_str(), [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) { streams.push_back(StreamFromRow(row)); }, "listing streams"));
  return streams;
}

Result<RecordPage> SqliteStore::ListStreamRecords(const RecordQuery& query) {
  std::int64_t limit = std::clamp(query.limit, 1, kMaxRecordPage);
  std::lock_guard lock(mutex_);
  std::optional<std::pair<std::int64_t, std::int64_t>> stream;  // id, current epoch
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT id, epoch FROM streams WHERE connection_id = ? AND stream = ?",
      [&](Statement& s) { s.Bind(query.connection_id).Bind(query.stream); },
      [&](const Statement& row) { stream.emplace(row.Int(0), row.Int(1)); }, "reading stream"));
  if (!stream) {
    return NotFoundError("connection " + query.connection_id + " has no stream \"" +
                         OneLineExcerpt(query.stream, 253) + "\"");
  }
  RecordPage page;
  page.epoch = query.epoch.value_or(stream->second);
  if (page.epoch < 0 || page.epoch > stream->second) {
    return InvalidArgumentError("epoch must be from 0 to " + std::to_string(stream->second) +
                                ", the stream's current epoch");
  }
  size_t payload_bytes = 0;
  // One row more than asked says whether there is a next page.
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT sequence, appended_at, received_at, payload FROM stream_records "
      "WHERE stream_id = ? AND epoch = ? AND sequence > ? ORDER BY sequence LIMIT ?",
      [&](Statement& s) {
        s.Bind(stream->first).Bind(page.epoch).Bind(query.after_sequence).Bind(limit + 1);
      },
      [&](const Statement& row) {
        if (page.more) return;
        if (static_cast<std::int64_t>(page.records.size()) == limit ||
            (!page.records.empty() && payload_bytes >= query.max_payload_bytes)) {
          page.more = true;
          return;
        }
        StoredRecord record{row.Int(0), FromUnixMillis(row.Int(1)), FromUnixMillis(row.Int(2)),
                            row.Text(3)};
        payload_bytes += record.payload.size();
        page.records.push_back(std::move(record));
      },
      "reading records"));
  return page;
}

Status SqliteStore::RecordPresence(const PresenceUpdate& update) {
  if (update.connections.empty() && update.agents.empty()) return Status::Ok();
  return WriteTransaction([&]() -> Status {
    for (const auto& [id, at] : update.connections) {
      UPLINK_RETURN_IF_ERROR(
          Change("UPDATE connections SET last_seen_at = max(coalesce(last_seen_at, 0), ?) "
                 "WHERE id = ?",
                 [&](Statement& s) { s.Bind(at).Bind(id); }, "recording when agents called")
              .status());
    }
    for (const auto& [id, agent] : update.agents) UPLINK_RETURN_IF_ERROR(RecordAgent(id, agent));
    return Status::Ok();
  }, CredentialCache::kKeep);
}

Status SqliteStore::RecordAgent(const std::string& connection_id, const AgentSeen& agent) {
  // A connection deleted meanwhile has no agents to record: skipped, not an error. An older
  // sighting (a flush retried after a newer one) moves nothing back.
  return Change("INSERT INTO connection_agents (connection_id, role, instance, version, "
                "last_seen_at) SELECT id, ?, ?, ?, ? FROM connections WHERE id = ? "
                "ON CONFLICT (connection_id, role, instance) DO UPDATE SET "
                "version = CASE WHEN excluded.last_seen_at >= last_seen_at "
                "THEN excluded.version ELSE version END, "
                "last_seen_at = max(last_seen_at, excluded.last_seen_at)",
                [&](Statement& s) {
                  s.Bind(agent.role).Bind(agent.instance).Bind(agent.version);
                  s.Bind(agent.last_seen_at).Bind(connection_id);
                },
                "recording an agent")
      .status();
}

Status SqliteStore::BindCluster(const std::string& connection_id, const std::string& token_hash,
                                const std::string& cluster_uid, const AuditEvent& audit) {
  Status refusal;
  Status status = WriteTransaction([&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> bound,
                            CheckTokenLive(connection_id, token_hash, audit.at, "call"));
    return BindOrRefuse(connection_id, bound, cluster_uid, audit,
                        json::object{{"cluster_uid", cluster_uid}}, refusal);
  }, CredentialCache::kKeep);
  if (!status.ok()) return status;
  return refusal;
}

Status SqliteStore::BindOrRefuse(const std::string& connection_id,
                                 const std::optional<std::string>& bound,
                                 const std::string& cluster_uid, const AuditEvent& audit,
                                 const json::object& bind_detail, Status& refusal) {
  if (bound && *bound == cluster_uid) return Status::Ok();
  if (bound) {
    // Commits only the refusal's audit event.
    refusal = RefuseClusterMismatch(audit, cluster_uid, *bound);
    return refusal.code() == StatusCode::kConflict ? Status::Ok() : refusal;
  }
  UPLINK_RETURN_IF_ERROR(Change("UPDATE connections SET cluster_uid = ? WHERE id = ?",
                                [&](Statement& s) { s.Bind(cluster_uid).Bind(connection_id); },
                                "binding the connection to its cluster")
                             .status());
  // Authentication hands out the connection row: the next call must see the binding.
  connections_by_token_prefix_.clear();
  AuditEvent bind = audit;
  bind.action = "connection.bind";
  bind.outcome = "ok";
  bind.detail = ToJson(bind_detail);
  return InsertAudit(bind);
}

Result<std::vector<AgentSeen>> SqliteStore::ListAgents(const std::string& connection_id,
                                                       int limit) {
  std::lock_guard lock(mutex_);
  std::vector<AgentSeen> agents;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      "SELECT role, instance, version, last_seen_at FROM connection_agents "
      "WHERE connection_id = ? ORDER BY last_seen_at DESC, rowid DESC LIMIT ?",
      [&](Statement& s) {
        s.Bind(connection_id).Bind(static_cast<std::int64_t>(std::max(limit, 0)));
      },
      [&](const Statement& row) {
        agents.push_back({row.Text(0), row.Text(1), row.Text(2), row.Time(3)});
      },
      "listing agents"));
  return agents;
}

Result<std::vector<Node>> SqliteStore::ListNodes(const std::string& connection_id) {
  std::lock_guard lock(mutex_);
  // One snapshot across the three reads, so a report landing in between cannot mix lists.
  UPLINK_RETURN_IF_ERROR(Exec("BEGIN"));
  auto body = [&]() -> Result<std::vector<Node>> {
    std::vector<Node> nodes;
    std::unordered_map<std::int64_t, size_t> index_by_id;
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT id, name, uid, ready, unschedulable, gpu_resource, gpu_capacity, "
        "gpu_allocatable, gpu_product, error FROM connection_nodes "
        "WHERE connection_id = ? ORDER BY position",
        [&](Statement& s) { s.Bind(connection_id); },
        [&](const Statement& row) {
          Node node;
          node.name = row.Text(1);
          node.uid = row.Text(2);
          node.ready = row.Int(3) != 0;
          node.unschedulable = row.Int(4) != 0;
          node.gpu_resource = row.Text(5);
          node.gpu_capacity = row.Int(6);
          node.gpu_allocatable = row.Int(7);
          node.gpu_product = row.Text(8);
          node.error = row.OptionalText(9);
          index_by_id.emplace(row.Int(0), nodes.size());
          nodes.push_back(std::move(node));
        },
        "reading nodes"));
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT r.node_id, r.name, r.capacity, r.allocatable FROM node_resources r "
        "JOIN connection_nodes n ON n.id = r.node_id WHERE n.connection_id = ? "
        "ORDER BY r.rowid",
        [&](Statement& s) { s.Bind(connection_id); },
        [&](const Statement& row) {
          auto it = index_by_id.find(row.Int(0));
          if (it == index_by_id.end()) return;
          nodes[it->second].resources.push_back({row.Text(1), row.Int(2), row.Int(3)});
        },
        "reading node resources"));
    UPLINK_RETURN_IF_ERROR(ForEachRow(
        "SELECT t.node_id, t.key, t.value, t.effect FROM node_taints t "
        "JOIN connection_nodes n ON n.id = t.node_id WHERE n.connection_id = ? "
        "ORDER BY t.rowid",
        [&](Statement& s) { s.Bind(connection_id); },
        [&](const Statement& row) {
          auto it = index_by_id.find(row.Int(0));
          if (it == index_by_id.end()) return;
          nodes[it->second].taints.push_back({row.Text(1), row.Text(2), row.Text(3)});
        },
        "reading node taints"));
    return nodes;
  };
  auto nodes = body();
  (void)Exec(nodes.ok() ? "COMMIT" : "ROLLBACK");
  return nodes;
}

}  // namespace uplink::console
