// The commands area of the console's store: approval rules, and the kubectl commands that
// wait in the store for an approval (sql_approvals.cc).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "console/store/audit_store.h"

namespace uplink::console {

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

class CommandStore {
 public:
  virtual ~CommandStore() = default;

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
};

}  // namespace uplink::console
