// The SQLite text of each schema migration (sql::Migration). Times are Unix seconds unless a
// column says otherwise.
#include <sqlite3.h>

#include "console/store/sql/database.h"

// Migration 2 drops a column (ALTER TABLE ... DROP COLUMN, SQLite 3.35) and checks JSON
// (built in since 3.38); the store's SQL uses RETURNING (3.35). Debian 12 ships 3.40.
static_assert(SQLITE_VERSION_NUMBER >= 3038000, "uplink-console needs SQLite 3.38 or newer");

namespace uplink::console::sql {
namespace {

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
    {14, R"sql(
-- Replicas on one database (docs/architecture.md, "Replicas"): which replica handed a kubectl
-- command out (exactly one: the primary key decides), and a command's argv or result too large
-- for a notification, read by the replica that needs it.
CREATE TABLE command_claims (
  id TEXT PRIMARY KEY,
  replica TEXT NOT NULL,
  claimed_at INTEGER NOT NULL
);
CREATE INDEX command_claims_by_time ON command_claims(claimed_at);
CREATE TABLE command_bodies (
  command_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('argv', 'result')),
  body TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (command_id, kind)
);
CREATE INDEX command_bodies_by_time ON command_bodies(created_at);
)sql"},
    {15, R"sql(
-- The SHA-256 of the last report's nodes as the protocol encodes them: a report whose nodes
-- are the same (most are: one a minute per cluster) rewrites none of their rows.
ALTER TABLE connections ADD COLUMN nodes_digest TEXT;
)sql"},
    {16, R"sql(
-- Changes, to a fresh random value, in every transaction that adds or deletes any of the
-- node's series: a console keeps a node's series ids between uploads only while it is the
-- value they were read at (console/store/series_id_cache.h).
ALTER TABLE sample_nodes ADD COLUMN series_version INTEGER NOT NULL DEFAULT 0;
)sql"},
};

}  // namespace

std::span<const Migration> SqliteMigrations() { return kMigrations; }

}  // namespace uplink::console::sql
