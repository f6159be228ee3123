// The SQLite store's approval rules, commands waiting for approval, the namespace scope chosen
// at creation and the hour of pod usage, on a real database file: every change with its audit
// event in one transaction, decisions that happen once, expiry, and what a restart ends.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "console/store/sql_store.h"
#include "store_fixture.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

const WallTime kT0 = testing::kStoreT0;
const std::string& kConnectionId = testing::kStoreConnectionId;

AuditEvent Event(const std::string& action, WallTime at = kT0) {
  return testing::AdminEvent(action, "connection", kConnectionId, at);
}

ApprovalRule Rule(const std::string& id, const std::string& verb = "get") {
  return ApprovalRule{id, kConnectionId, verb, "pods", "ml", kT0, "u1"};
}

CommandApproval Approval(const std::string& id, WallTime at = kT0) {
  CommandApproval approval;
  approval.id = id;
  approval.connection_id = kConnectionId;
  approval.argv = {"kubectl", "get", "pods", "-n", "ml", "--selector=a=b,c in (d)"};
  approval.rule = Rule("r1");
  approval.requested_by = "u1";
  approval.requested_by_label = "a@example.com";
  approval.requested_credential = "api_key:k1";
  approval.requested_at = at;
  approval.expires_at = at + minutes(15);
  return approval;
}

class ApprovalsStoreTest : public testing::SqlStoreFixture {
 protected:
  void CreateConnection() {
    ASSERT_TRUE(store_->CreateConnection(connection_, Event("connection.create")).ok());
  }
};

TEST_P(ApprovalsStoreTest, TheScopeChosenAtCreationIsWrittenWithTheConnectionAndOneEvent) {
  const std::int64_t events = Count("SELECT COUNT(*) FROM audit_events");
  ASSERT_TRUE(store_
                  ->CreateConnectionWithScope(connection_, std::nullopt, {"dev", "ml"},
                                              Event("connection.create"))
                  .ok());
  EXPECT_EQ(store_->GetNamespaceScope(kConnectionId).value(),
            (std::vector<std::string>{"dev", "ml"}));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events"), events + 1);
  // A name already taken writes nothing: no connection, no scope, no event.
  Connection twin = connection_;
  twin.id = "00000000000000c2";
  Status taken = store_->CreateConnectionWithScope(twin, std::nullopt, {"*"},
                                                   Event("connection.create"));
  EXPECT_FALSE(taken.ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM namespace_scopes"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events"), events + 1);
  // With a handover, and with no namespaces at all (cluster-scoped reads only).
  Connection handed = connection_;
  handed.id = "00000000000000c3";
  handed.cluster_name = "other";
  Handover handover{.id = "h1",
                    .connection_id = handed.id,
                    .lookup_prefix = "hoc_h1",
                    .code_hash = "x",
                    .created_at = kT0,
                    .expires_at = kT0 + minutes(10)};
  ASSERT_TRUE(
      store_->CreateConnectionWithScope(handed, handover, {}, Event("connection.create")).ok());
  EXPECT_EQ(store_->GetNamespaceScope(handed.id).value(), std::vector<std::string>{});
  EXPECT_TRUE(store_->LatestHandover(handed.id).value().has_value());
}

TEST_P(ApprovalsStoreTest, RulesAreAddedOnceListedAndRemovedWithTheirEvents) {
  CreateConnection();
  ASSERT_TRUE(store_->AddApprovalRule(Rule("r1"), Event("connection.approval_rule_add")).ok());
  Status twice = store_->AddApprovalRule(Rule("r2"), Event("connection.approval_rule_add"));
  EXPECT_EQ(twice.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(twice.message().find("r1"), std::string::npos);
  ASSERT_TRUE(
      store_->AddApprovalRule(Rule("r3", "logs"), Event("connection.approval_rule_add")).ok());
  auto rules = store_->ListApprovalRules(kConnectionId);
  ASSERT_TRUE(rules.ok());
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0].id, "r1");
  EXPECT_EQ((*rules)[1].verb, "logs");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = "
                  "'connection.approval_rule_add'"),
            2);
  EXPECT_EQ(store_->RemoveApprovalRule(kConnectionId, "nope", Event("x")).code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(
      store_->RemoveApprovalRule(kConnectionId, "r1", Event("connection.approval_rule_remove"))
          .ok());
  EXPECT_EQ(store_->ListApprovalRules(kConnectionId)->size(), 1u);
  ApprovalRule orphan = Rule("r4");
  orphan.connection_id = "00000000000000ff";
  EXPECT_EQ(store_->AddApprovalRule(orphan, Event("x")).code(), StatusCode::kNotFound);
}

TEST_P(ApprovalsStoreTest, AnApprovalIsDecidedOnceAndFinishedWithItsResult) {
  CreateConnection();
  ASSERT_TRUE(store_->CreateApproval(Approval("cmd_1"), 16, Event("kubectl.approval_requested"))
                  .ok());
  auto read = store_->GetApproval("cmd_1");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->argv, Approval("cmd_1").argv) << "argv round-trips exactly";
  EXPECT_EQ(read->owner_id, "u1");
  EXPECT_EQ(read->status, ApprovalStatus::kPending);
  EXPECT_EQ(read->rule.resource, "pods");

  AuditEvent approve = Event("kubectl.approve", kT0 + minutes(1));
  approve.actor_id = "u9";
  approve.actor_label = "approver@example.com";
  auto decided = store_->DecideApproval("cmd_1", true, "", approve);
  ASSERT_TRUE(decided.ok()) << decided.status().ToString();
  EXPECT_EQ(decided->status, ApprovalStatus::kApproved);
  EXPECT_EQ(decided->decided_by_label, "approver@example.com");
  Status again = store_->DecideApproval("cmd_1", false, "no", Event("kubectl.reject")).status();
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.message().find("approved"), std::string::npos);
  EXPECT_NE(again.message().find("approver@example.com"), std::string::npos);

  const std::string output(3 << 20, 'o');
  ASSERT_TRUE(store_
                  ->FinishApproval("cmd_1", ApprovalResult{.exit_code = 3, .stdout_text = output},
                                   Event("kubectl.run", kT0 + minutes(2)))
                  .ok());
  auto finished = store_->GetApproval("cmd_1");
  EXPECT_EQ(finished->status, ApprovalStatus::kCompleted);
  EXPECT_EQ(finished->result->exit_code, 3);
  EXPECT_EQ(finished->result->stdout_text.size(), output.size());
  EXPECT_EQ(store_->FinishApproval("cmd_1", {}, Event("kubectl.run")).code(),
            StatusCode::kFailedPrecondition);
  // Lists leave the output out.
  auto listed = store_->ListApprovals({.pending_only = false});
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE(listed->front().result->stdout_text.empty());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action LIKE 'kubectl.%'"), 3);
}

TEST_P(ApprovalsStoreTest, PendingApprovalsAreBoundedAndExpireAndEndedOnesAreForgotten) {
  CreateConnection();
  ASSERT_TRUE(store_->CreateApproval(Approval("cmd_1"), 2, Event("r")).ok());
  ASSERT_TRUE(store_->CreateApproval(Approval("cmd_2"), 2, Event("r")).ok());
  EXPECT_EQ(store_->CreateApproval(Approval("cmd_3"), 2, Event("r")).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(store_->ListApprovals({.owner_id = "u1"})->size(), 2u);
  EXPECT_TRUE(store_->ListApprovals({.owner_id = "u2"})->empty());
  // Past its expiry, a decision is refused even before the sweep.
  EXPECT_EQ(store_->DecideApproval("cmd_1", true, "", Event("a", kT0 + minutes(15))).status().code(),
            StatusCode::kFailedPrecondition);
  AuditEvent expired{.at = kT0 + minutes(16), .actor_type = "system",
                     .action = "kubectl.approval_expired", .outcome = "ok"};
  AuditEvent abandoned = expired;
  abandoned.action = "kubectl.run";
  auto ended = store_->EndApprovals(kT0 + minutes(16), false, expired, abandoned);
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ(*ended, 2);
  EXPECT_EQ(store_->GetApproval("cmd_2")->status, ApprovalStatus::kExpired);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'kubectl.approval_expired' "
                  "AND owner_id = 'u1' AND target_id = '" + kConnectionId + "'"),
            2);
  EXPECT_EQ(*store_->EndApprovals(kT0 + minutes(17), false, expired, abandoned), 0);
  // A new one may wait now; the ended ones are forgotten a day after they ended.
  ASSERT_TRUE(store_->CreateApproval(Approval("cmd_3", kT0 + minutes(20)), 2, Event("r")).ok());
  EXPECT_TRUE(store_->EndApprovals(kT0 + minutes(15) + hours(24) + seconds(1), false, expired,
                                   abandoned)
                  .ok());
  EXPECT_EQ(store_->GetApproval("cmd_1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetApproval("cmd_3")->status, ApprovalStatus::kExpired);
}

TEST_P(ApprovalsStoreTest, AtStartUpApprovedCommandsWithoutAResultEnd) {
  CreateConnection();
  ASSERT_TRUE(store_->CreateApproval(Approval("cmd_1"), 16, Event("r")).ok());
  ASSERT_TRUE(store_->CreateApproval(Approval("cmd_2"), 16, Event("r")).ok());
  ASSERT_TRUE(store_->DecideApproval("cmd_1", true, "", Event("a", kT0 + seconds(5))).ok());
  AuditEvent expired{.at = kT0 + minutes(1), .actor_type = "system",
                     .action = "kubectl.approval_expired", .outcome = "ok"};
  AuditEvent abandoned = expired;
  abandoned.action = "kubectl.run";
  abandoned.outcome = "refused";
  EXPECT_EQ(*store_->EndApprovals(kT0 + minutes(1), false, expired, abandoned), 0);
  EXPECT_EQ(*store_->EndApprovals(kT0 + minutes(1), true, expired, abandoned), 1);
  auto lost = store_->GetApproval("cmd_1");
  EXPECT_EQ(lost->status, ApprovalStatus::kFailed);
  EXPECT_EQ(lost->result->error_code, "console_restarted");
  EXPECT_EQ(store_->GetApproval("cmd_2")->status, ApprovalStatus::kPending);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'kubectl.run' AND "
                  "outcome = 'refused' AND detail LIKE '%console_restarted%'"),
            1);
}

TEST_P(ApprovalsStoreTest, AnApprovalNeedsAConnectionThatExists) {
  CreateConnection();
  ASSERT_TRUE(store_->CreateApproval(Approval("cmd_1"), 16, Event("r")).ok());
  CommandApproval orphan = Approval("cmd_2");
  orphan.connection_id = "00000000000000ff";
  EXPECT_EQ(store_->CreateApproval(orphan, 16, Event("r")).code(), StatusCode::kNotFound);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM command_approvals"), 1);
}

INSTANTIATE_TEST_SUITE_P(Engines, ApprovalsStoreTest, testing::kStoreEngines, testing::StoreEngineName);

}  // namespace
}  // namespace uplink::console
