// The audit area of the console's store: who did what, when, from where.
//
// Every other area's change takes the AuditEvent that records it and writes both in one
// transaction; AuditStore is what reads the log, and appends to it events that record no
// change (a refused sign-in, a command run).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace uplink::console {

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

class AuditStore {
 public:
  virtual ~AuditStore() = default;

  virtual Status AppendAudit(const AuditEvent& event) = 0;
  virtual Result<std::vector<AuditEvent>> ListAudit(const AuditQuery& query) = 0;
};

}  // namespace uplink::console
