// What a console is told at start (uplink-console serve's flags, or a test's choices): the
// options every area of the API reads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/secret.h"
#include "console/api/connection_view.h"
#include "console/api/install_plan.h"
#include "console/api/upload_sink.h"
#include "console/auth/failure_guard.h"
#include "console/auth/password.h"
#include "console/replicas/replica_commands.h"
#include "protocol/ssh.h"
#include "protocol/upload.h"
#include "protocol/workspace.h"

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
  size_t max_upload_bytes = protocol::kDefaultMaxUploadBytes;
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
  // /readyz answers 503 once one store write group has run this long: a disk or database
  // that stopped answering the writer while reads still answer. Above PostgreSQL's 15 s
  // statement deadline, which fails a group on its own.
  std::chrono::milliseconds store_writer_stuck_after{30'000};
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
  // Workspace execution (docs/api.md, "Offers"): the console's addresses as the workspace
  // controller's egress policy allows them (serve --workspace-console-cidrs), the longest
  // reservation an offer allows unless its supplier says otherwise, the output kept of one
  // command, and how long past its expiry an active reservation whose end the controller did
  // not report is marked expired.
  std::vector<std::string> workspace_console_cidrs;
  std::int64_t workspace_console_port = 443;
  std::chrono::seconds default_max_lifetime{24 * 3600};
  std::int64_t workspace_output_cap_bytes = protocol::kDefaultOutputCapBytes;
  std::chrono::seconds reservation_expiry_grace{120};
  // The SSH relay (serve --ssh-channels-per-grant, --ssh-idle-timeout): channels one grant
  // may have open at once, and how long a channel may carry no byte before it is closed.
  std::int64_t ssh_channels_per_grant = protocol::kDefaultChannelsPerGrant;
  std::int64_t ssh_channels_per_reservation = protocol::kDefaultChannelsPerReservation;
  std::chrono::seconds ssh_idle_timeout = protocol::kDefaultSshIdleTimeout;
  // Told of every stored upload (serve --remote-write-url forwards node samples); not owned,
  // outlives the ConsoleApi. Null: nothing beyond the store.
  UploadSink* upload_sink = nullptr;
  // Replicas on one PostgreSQL store (docs/architecture.md, "Replicas"): the bus to the others
  // and the command claims, both set or both null (SQLite: one console, no bus). Not owned;
  // both outlive the ConsoleApi.
  ReplicaBus* replica_bus = nullptr;
  CommandClaims* command_claims = nullptr;
};

}  // namespace uplink::console
