// SqlStore's approval rules and the kubectl commands that wait for approval (docs/api.md,
// "Approval rules"). Each change is one write transaction with its audit event, like every
// other change of the store; none touches what authentication reads.

#include <algorithm>

#include "common/json.h"
#include "common/text.h"
#include "console/store/sql_statement.h"
#include "console/store/sql_store.h"

namespace uplink::console {
namespace {

// An approved command's argv is at most 256 arguments of 4 KiB, serialized with escapes.
constexpr JsonLimits kArgvLimits{8 << 20, 2};

constexpr std::pair<ApprovalStatus, std::string_view> kStatusNames[] = {
    {ApprovalStatus::kPending, "pending"},     {ApprovalStatus::kApproved, "approved"},
    {ApprovalStatus::kRejected, "rejected"},   {ApprovalStatus::kExpired, "expired"},
    {ApprovalStatus::kCompleted, "completed"}, {ApprovalStatus::kFailed, "failed"},
};

std::string_view StatusName(ApprovalStatus status) {
  for (const auto& [value, name] : kStatusNames) {
    if (value == status) return name;
  }
  return "pending";
}

ApprovalStatus StatusFromName(std::string_view name) {
  for (const auto& [value, text] : kStatusNames) {
    if (text == name) return value;
  }
  return ApprovalStatus::kFailed;
}

std::string ArgvText(const std::vector<std::string>& argv) {
  json::array list;
  for (const std::string& arg : argv) list.emplace_back(arg);
  return ToJson(list);
}

std::vector<std::string> ArgvFromText(std::string_view text) {
  std::vector<std::string> argv;
  auto parsed = ParseJson(text, kArgvLimits);
  if (!parsed.ok() || !parsed->is_array()) return argv;
  for (const json::value& arg : parsed->get_array()) {
    if (arg.is_string()) argv.emplace_back(arg.get_string());
  }
  return argv;
}

// The columns QueryApprovals reads, in order; `output` selects kubectl's output or NULLs.
std::string ApprovalColumns(bool output) {
  return std::string(
             "a.id, a.connection_id, c.owner_id, a.argv, a.rule_id, a.rule_verb, "
             "a.rule_resource, a.rule_namespace, a.requested_by, a.requested_by_label, "
             "a.requested_credential, a.requested_at, a.expires_at, a.status, a.decided_at, "
             "a.decided_by, a.decided_by_label, a.reason, a.finished_at, a.error_code, "
             "a.error_message, a.exit_code, ") +
         (output ? "a.stdout, a.stderr" : "NULL, NULL") +
         ", a.duration_ms FROM command_approvals a JOIN connections c ON c.id = a.connection_id";
}

constexpr const char* kRuleColumns =
    "id, connection_id, verb, resource, namespace, created_at, created_by";

ApprovalRule RuleFromRow(const auto& row) {
  return ApprovalRule{row.Text(0), row.Text(1), row.Text(2), row.Text(3),
                      row.Text(4), row.Time(5), row.Text(6)};
}

json::object RuleJson(const ApprovalRule& rule) {
  return json::object{{"id", rule.id},
                      {"verb", rule.verb},
                      {"resource", rule.resource},
                      {"namespace", rule.namespace_name}};
}

}  // namespace

Result<std::vector<ApprovalRule>> SqlStore::ListApprovalRules(
    const std::string& connection_id) {
  static const std::string sql = std::string("SELECT ") + kRuleColumns +
                                 " FROM approval_rules WHERE connection_id = ? "
                                 "ORDER BY created_at, id";
  std::vector<ApprovalRule> rules;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(), [&](Statement& s) { s.Bind(connection_id); },
      [&](const Statement& row) { rules.push_back(RuleFromRow(row)); }, "reading approval rules"));
  return rules;
}

Status SqlStore::AddApprovalRule(const ApprovalRule& rule, const AuditEvent& audit) {
  return WriteTransaction(
      [&]() -> Status {
        std::int64_t count = 0;
        std::string same;
        UPLINK_RETURN_IF_ERROR(ForEachRow(
            "SELECT COUNT(*), COALESCE(MAX(CASE WHEN verb = ? AND resource = ? AND "
            "namespace = ? THEN id END), '') FROM approval_rules WHERE connection_id = ?",
            [&](Statement& s) {
              s.Bind(rule.verb).Bind(rule.resource).Bind(rule.namespace_name);
              s.Bind(rule.connection_id);
            },
            [&](const Statement& row) {
              count = row.Int(0);
              same = row.Text(1);
            },
            "counting approval rules"));
        if (!same.empty()) {
          return AlreadyExistsError("this connection already has that rule (" + same + ")");
        }
        if (count >= static_cast<std::int64_t>(kMaxApprovalRules)) {
          return ResourceExhaustedError("this connection has " + std::to_string(count) +
                                        " approval rules, the most it may have; remove one "
                                        "first, or use '*' to cover several in one rule");
        }
        auto inserted = Change(
            "INSERT INTO approval_rules (id, connection_id, verb, resource, namespace, "
            "created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [&](Statement& s) {
              s.Bind(rule.id).Bind(rule.connection_id).Bind(rule.verb).Bind(rule.resource);
              s.Bind(rule.namespace_name).Bind(rule.created_at).Bind(rule.created_by);
            },
            "adding approval rule");
        if (!inserted.ok() && db_->LastFailure() == sql::Failure::kForeignKey) {
          return NotFoundError("connection " + rule.connection_id + " does not exist");
        }
        UPLINK_RETURN_IF_ERROR(inserted.status());
        return InsertAudit(audit);
      },
      CredentialCache::kKeep);
}

Status SqlStore::RemoveApprovalRule(const std::string& connection_id,
                                       const std::string& rule_id, const AuditEvent& audit) {
  return WriteTransaction(
      [&]() -> Status {
        UPLINK_ASSIGN_OR_RETURN(
            int removed,
            Change("DELETE FROM approval_rules WHERE connection_id = ? AND id = ?",
                   [&](Statement& s) { s.Bind(connection_id).Bind(rule_id); },
                   "removing approval rule"));
        if (removed == 0) return NotFoundError("this connection has no approval rule " + rule_id);
        return InsertAudit(audit);
      },
      CredentialCache::kKeep);
}

Status SqlStore::CreateApproval(const CommandApproval& approval, size_t max_pending,
                                   const AuditEvent& audit) {
  return WriteTransaction(
      [&]() -> Status {
        std::int64_t pending = 0;
        UPLINK_RETURN_IF_ERROR(ForEachRow(
            "SELECT COUNT(*) FROM command_approvals WHERE connection_id = ? AND "
            "status = 'pending' AND expires_at > ?",
            [&](Statement& s) { s.Bind(approval.connection_id).Bind(approval.requested_at); },
            [&](const Statement& row) { pending = row.Int(0); }, "counting approvals"));
        if (pending >= static_cast<std::int64_t>(max_pending)) {
          return ResourceExhaustedError(
              std::to_string(pending) +
              " commands of this connection already wait for approval; the owner or an admin "
              "decides them with 'uplink approvals list', or they expire");
        }
        auto inserted = Change(
            "INSERT INTO command_approvals (id, connection_id, argv, rule_id, rule_verb, "
            "rule_resource, rule_namespace, requested_by, requested_by_label, "
            "requested_credential, requested_at, expires_at, status) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
            [&](Statement& s) {
              s.Bind(approval.id).Bind(approval.connection_id).Bind(ArgvText(approval.argv));
              s.Bind(approval.rule.id).Bind(approval.rule.verb).Bind(approval.rule.resource);
              s.Bind(approval.rule.namespace_name).Bind(approval.requested_by);
              s.Bind(approval.requested_by_label).Bind(approval.requested_credential);
              s.Bind(approval.requested_at).Bind(approval.expires_at);
            },
            "recording the approval request");
        if (!inserted.ok() && db_->LastFailure() == sql::Failure::kForeignKey) {
          return NotFoundError("connection " + approval.connection_id + " does not exist");
        }
        UPLINK_RETURN_IF_ERROR(inserted.status());
        return InsertAudit(audit);
      },
      CredentialCache::kKeep);
}

Result<std::vector<CommandApproval>> SqlStore::QueryApprovals(sql::Database& database,
                                                              const std::string& sql,
                                                              const Binder& bind) {
  std::vector<CommandApproval> approvals;
  UPLINK_RETURN_IF_ERROR(ForEachRowOn(
      database, sql.c_str(), bind,
      [&](const Statement& row) {
        CommandApproval a;
        a.id = row.Text(0);
        a.connection_id = row.Text(1);
        a.owner_id = row.Text(2);
        a.argv = ArgvFromText(row.Text(3));
        a.rule = ApprovalRule{row.Text(4), a.connection_id, row.Text(5), row.Text(6),
                              row.Text(7), WallTime{},      ""};
        a.requested_by = row.Text(8);
        a.requested_by_label = row.Text(9);
        a.requested_credential = row.Text(10);
        a.requested_at = row.Time(11);
        a.expires_at = row.Time(12);
        a.status = StatusFromName(row.Text(13));
        a.decided_at = row.OptionalTime(14);
        a.decided_by = row.Text(15);
        a.decided_by_label = row.Text(16);
        a.reason = row.Text(17);
        a.finished_at = row.OptionalTime(18);
        if (a.finished_at) {
          a.result = ApprovalResult{row.Text(19), row.Text(20), row.Int(21),
                                    row.Text(22), row.Text(23), row.Int(24)};
        }
        approvals.push_back(std::move(a));
      },
      "reading approvals"));
  return approvals;
}

Result<CommandApproval> SqlStore::GetApproval(const std::string& id) {
  static const std::string sql = "SELECT " + ApprovalColumns(true) + " WHERE a.id = ?";
  UPLINK_ASSIGN_OR_RETURN(auto found, ReadOnLookup([&](sql::Database& database) {
                            return QueryApprovals(database, sql, [&](Statement& s) { s.Bind(id); });
                          }));
  if (found.empty()) return NotFoundError("there is no command " + OneLineExcerpt(id, 64));
  return std::move(found.front());
}

Result<std::vector<CommandApproval>> SqlStore::ListApprovals(const ApprovalQuery& query) {
  // Lists leave kubectl's output out: a page of them could be hundreds of MiB.
  std::string sql = "SELECT " + ApprovalColumns(false) + " WHERE TRUE";
  if (query.owner_id) sql += " AND c.owner_id = ?";
  if (query.connection_id) sql += " AND a.connection_id = ?";
  if (query.pending_only) sql += " AND a.status = 'pending'";
  sql += " ORDER BY a.requested_at DESC, a.id DESC LIMIT ?";
  return ReadOnLookup([&](sql::Database& database) {
    return QueryApprovals(database, sql, [&](Statement& s) {
      if (query.owner_id) s.Bind(*query.owner_id);
      if (query.connection_id) s.Bind(*query.connection_id);
      s.Bind(static_cast<std::int64_t>(std::clamp(query.limit, 1, 500)));
    });
  });
}

Result<CommandApproval> SqlStore::DecideApproval(const std::string& id, bool approve,
                                                    const std::string& reason,
                                                    const AuditEvent& audit) {
  static const std::string sql = "SELECT " + ApprovalColumns(false) + " WHERE a.id = ?";
  std::optional<CommandApproval> decided;
  UPLINK_RETURN_IF_ERROR(WriteTransaction(
      [&]() -> Status {
        UPLINK_ASSIGN_OR_RETURN(auto found,
                                QueryApprovals(*db_, sql, [&](Statement& s) { s.Bind(id); }));
        if (found.empty()) return NotFoundError("there is no command " + OneLineExcerpt(id, 64));
        const CommandApproval& current = found.front();
        if (current.status != ApprovalStatus::kPending) {
          return FailedPreconditionError(
              "this command is " + std::string(StatusName(current.status)) +
              (current.decided_at ? " (decided " + FormatRfc3339(*current.decided_at) + " by " +
                                        OneLineExcerpt(current.decided_by_label, 254) + ")"
                                  : std::string()) +
              "; only a command waiting for approval can be approved or rejected");
        }
        if (current.expires_at <= audit.at) {
          return FailedPreconditionError("this command's approval expired at " +
                                         FormatRfc3339(current.expires_at) +
                                         "; run the command again to ask anew");
        }
        UPLINK_RETURN_IF_ERROR(
            Change("UPDATE command_approvals SET status = ?, decided_at = ?, decided_by = ?, "
                   "decided_by_label = ?, reason = ?, ended_at = ? WHERE id = ?",
                   [&](Statement& s) {
                     s.Bind(approve ? "approved" : "rejected").Bind(audit.at);
                     s.Bind(audit.actor_id).Bind(audit.actor_label).Bind(reason);
                     s.Bind(approve ? std::nullopt : std::optional<WallTime>(audit.at)).Bind(id);
                   },
                   "deciding the approval")
                .status());
        UPLINK_RETURN_IF_ERROR(InsertAudit(audit));
        decided = current;
        decided->status = approve ? ApprovalStatus::kApproved : ApprovalStatus::kRejected;
        decided->decided_at = audit.at;
        decided->decided_by = audit.actor_id;
        decided->decided_by_label = audit.actor_label;
        decided->reason = reason;
        return Status::Ok();
      },
      CredentialCache::kKeep));
  return std::move(*decided);
}

Status SqlStore::FinishApproval(const std::string& id, const ApprovalResult& result,
                                   const AuditEvent& audit) {
  return WriteTransaction(
      [&]() -> Status {
        UPLINK_ASSIGN_OR_RETURN(
            int changed,
            Change("UPDATE command_approvals SET status = ?, finished_at = ?, ended_at = ?, "
                   "error_code = ?, error_message = ?, exit_code = ?, stdout = ?, stderr = ?, "
                   "duration_ms = ? WHERE id = ? AND status = 'approved'",
                   [&](Statement& s) {
                     s.Bind(result.error_code.empty() ? "completed" : "failed");
                     s.Bind(audit.at).Bind(audit.at).Bind(result.error_code);
                     s.Bind(result.error_message).Bind(result.exit_code);
                     s.BindUnowned(result.stdout_text).BindUnowned(result.stderr_text);
                     s.Bind(result.duration_ms).Bind(id);
                   },
                   "recording the approved command's result"));
        if (changed == 0) {
          return FailedPreconditionError("command " + OneLineExcerpt(id, 64) +
                                         " is not an approved command waiting for its result");
        }
        return InsertAudit(audit);
      },
      CredentialCache::kKeep);
}

Result<std::int64_t> SqlStore::EndApprovals(WallTime now, bool abandon_approved,
                                               const AuditEvent& expired_event,
                                               const AuditEvent& abandoned_event) {
  static const std::string due_sql =
      "SELECT " + ApprovalColumns(false) +
      " WHERE (a.status = 'pending' AND a.expires_at <= ?) OR (a.status = 'approved' AND ? <> 0)";
  std::int64_t ended = 0;
  UPLINK_RETURN_IF_ERROR(WriteTransaction(
      [&]() -> Status {
        UPLINK_ASSIGN_OR_RETURN(auto due, QueryApprovals(*db_, due_sql, [&](Statement& s) {
                                  s.Bind(now).Bind(abandon_approved);
                                }));
        for (const CommandApproval& approval : due) {
          const bool expired = approval.status == ApprovalStatus::kPending;
          AuditEvent event = expired ? expired_event : abandoned_event;
          event.target_type = "connection";
          event.target_id = approval.connection_id;
          event.owner_id = approval.owner_id;
          json::object detail{{"command_id", approval.id},
                              {"requested_by", approval.requested_by_label},
                              {"rule", RuleJson(approval.rule)}};
          if (expired) {
            detail["expired_at"] = FormatRfc3339(approval.expires_at);
          } else {
            json::array argv;
            for (const std::string& arg : approval.argv) argv.emplace_back(arg);
            detail["argv"] = std::move(argv);
            detail["error"] = "console_restarted";
          }
          event.detail = ToJson(detail);
          UPLINK_RETURN_IF_ERROR(
              Change(expired ? "UPDATE command_approvals SET status = 'expired', ended_at = "
                               "expires_at WHERE id = ?"
                             : "UPDATE command_approvals SET status = 'failed', finished_at = ?, "
                               "ended_at = ?, error_code = 'console_restarted', error_message = "
                               "'the console restarted after the approval, before the result "
                               "came back; nothing runs later: run the command again' "
                               "WHERE id = ?",
                     [&](Statement& s) {
                       if (!expired) s.Bind(now).Bind(now);
                       s.Bind(approval.id);
                     },
                     "ending an approval")
                  .status());
          UPLINK_RETURN_IF_ERROR(InsertAudit(event));
          ++ended;
        }
        return Change("DELETE FROM command_approvals WHERE ended_at < ?",
                      [&](Statement& s) { s.Bind(now - kApprovalKeep); },
                      "forgetting old approvals")
            .status();
      },
      CredentialCache::kKeep));
  return ended;
}

}  // namespace uplink::console
