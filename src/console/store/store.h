// What the console keeps, as one interface composed of one interface per area:
//   IdentityStore (identity_store.h)     users, API keys, sessions, two-factor, settings
//   ConnectionStore (connection_store.h) connections, tokens, handovers, inventory, agents
//   StreamStore (stream_store.h)         uploads: records, node samples, snapshots, runs
//   CommandStore (command_store.h)       approval rules and commands waiting for approval
//   AuditStore (audit_store.h)           the audit log
//   WorkspaceStore (workspace_store.h)   offers, reservations, workspace commands, SSH
// Code that uses one area takes that area's interface. A second implementation (PostgreSQL)
// implements them all; the domain rules it must follow are plain functions in
// console/store/rules/, so that it only moves rows in and out.
#pragma once

#include <chrono>

#include "common/status.h"
#include "console/store/audit_store.h"
#include "console/store/command_store.h"
#include "console/store/connection_store.h"
#include "console/store/identity_store.h"
#include "console/store/stream_store.h"
#include "console/store/workspace_store.h"

namespace uplink::console {

// Every method that changes something takes the audit event that records it and writes
// both in one transaction: the log never misses a change, and never shows one that did not
// happen. The store fills in the event's id.
class Store : public IdentityStore,
              public ConnectionStore,
              public StreamStore,
              public CommandStore,
              public AuditStore,
              public WorkspaceStore {
 public:
  ~Store() override = default;

  // Readiness (/readyz): the database answers a read, and no write group has been running for
  // `writer_stuck_after` or longer (a disk or database that stopped answering the writer
  // while reads still answer). Does not wait for the writer.
  virtual Status CheckReady(std::chrono::milliseconds writer_stuck_after) = 0;
  // The store's own series for /metrics (on PostgreSQL, its connections' reconnects).
  virtual void RenderMetrics(std::string& out) const = 0;
};

}  // namespace uplink::console
