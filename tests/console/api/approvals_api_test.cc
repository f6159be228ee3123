// Approval rules and the kubectl commands that wait for approval, through the router: rules
// are managed by the owner or an admin and audited; a matching command is answered 202 and
// never reaches the agent until someone approves it (never the credential that asked), its
// 60 s pickup limit starts at the approval, its result is kept for the requester; rejected and
// expired commands never run; a restart keeps waiting commands and ends approved ones.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "console/api/approvals.h"
#include "kubectl/guard.h"
#include "kubectl_fixture.h"

namespace uplink::console {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::TestUser;

class ApprovalsApiTest : public KubectlApiTest {
 protected:
  void SetUp() override {
    KubectlApiTest::SetUp();
    ChooseNamespaces(R"(["*"])");
    approver_ = AddUser("approver@example.com", "admin");
  }

  net::Response AddRule(const std::string& body, const std::string& credential = "") {
    return Send("POST", Path("/approval-rules"), credential.empty() ? admin_key_ : credential,
                body);
  }

  std::string RuleId(const std::string& body) {
    net::Response added = AddRule(body);
    EXPECT_EQ(added.status, 201) << added.body;
    return Text(Body(added), "id");
  }

  net::Response Decide(const std::string& command_id, const std::string& action,
                       const std::string& credential, const std::string& body = "") {
    return Send("POST", "/api/v1/approvals/" + command_id + "/" + action, credential, body);
  }

  json::object Command(const std::string& command_id, const std::string& credential = "") {
    net::Response got = Send("GET", Path("/commands/" + command_id),
                             credential.empty() ? admin_key_ : credential);
    EXPECT_EQ(got.status, 200) << got.body;
    return Body(got);
  }

  // Sends a command that a rule matches: its 202 reply.
  json::object Waiting(const std::vector<std::string>& args) {
    net::Response reply = Kubectl(args).Wait();
    EXPECT_EQ(reply.status, 202) << reply.body;
    return Body(reply);
  }

  std::vector<std::string> Actions() {
    std::vector<std::string> actions;
    for (const AuditEvent& event : AllAudit()) actions.push_back(event.action);
    return actions;
  }

  TestUser approver_;
};

TEST_F(ApprovalsApiTest, AMatchingCommandWaitsForApprovalAndOthersRunAtOnce) {
  RuleId(R"({"verb":"get","resource":"po","namespace":"ml"})");
  json::object waiting = Waiting({"get", "pods", "-n", "ml"});
  EXPECT_EQ(Text(waiting, "status"), "waiting_for_approval");
  const std::string id = Text(waiting, "id");
  EXPECT_TRUE(id.starts_with("cmd_")) << id;
  EXPECT_NE(Text(waiting, "message").find("waiting for approval"), std::string::npos);
  EXPECT_NE(Text(waiting, "message").find("uplink approvals approve " + id), std::string::npos);
  EXPECT_EQ(Text(testing::Object(waiting, "rule"), "resource"), "pods");
  // Every spelling of the resource, and -A (which reads ml too), match the rule alike.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"get", "pod", "-n", "ml"}, {"get", "Pods.v1.", "-nml"}, {"get", "pods", "-A"}}) {
    EXPECT_EQ(Text(Waiting(args), "status"), "waiting_for_approval") << args[1];
  }
  // Another namespace, another verb, a cluster-scoped read: straight to the agent.
  std::vector<PendingReply> direct;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"get", "pods", "-n", "dev"}, {"describe", "pods", "-n", "ml"}, {"get", "nodes"}}) {
    direct.push_back(Kubectl(args));
    EXPECT_FALSE(direct.back().ready()) << args[0] << " " << args[1];
  }
  EXPECT_EQ(api_->commands().stats().waiting_commands, 3u);
  std::vector<std::string> taken;
  for (const json::value& command : PolledCommands(Poll(R"({"wait_seconds":0,"max_commands":16})"))) {
    taken.push_back(ToJson(command.at("argv")));
  }
  EXPECT_EQ(taken, (std::vector<std::string>{R"(["kubectl","get","pods","-n","dev"])",
                                             R"(["kubectl","describe","pods","-n","ml"])",
                                             R"(["kubectl","get","nodes"])"}));
  EXPECT_EQ(Outcomes("waiting_for_approval"), 4);

  net::Response listed = AsAdmin("GET", "/api/v1/approvals");
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(Body(listed).at("approvals").as_array().size(), 4u);
  AuditEvent requested = LastAudit("kubectl.approval_requested");
  EXPECT_EQ(requested.actor_label, "admin@example.com");
  EXPECT_EQ(requested.target_id, id_);
}

TEST_F(ApprovalsApiTest, AnApprovedCommandRunsAndItsPickupLimitStartsAtTheApproval) {
  RuleId(R"({"verb":"logs","namespace":"ml"})");
  const std::string id = Text(Waiting({"logs", "-n", "ml", "trainer-0", "--tail=5"}), "id");
  EXPECT_TRUE(PolledCommands(Poll(R"({"wait_seconds":0})")).empty()) << "it must not run yet";
  // Far longer than a command may wait for its agent: a waiting command has not started.
  clock_.Advance(minutes(10));
  api_->commands().ExpireDue();
  api_->EndDueApprovals();
  EXPECT_EQ(Text(Command(id), "status"), "waiting_for_approval");

  net::Response approved = Decide(id, "approve", approver_.api_key);
  ASSERT_EQ(approved.status, 200) << approved.body;
  EXPECT_EQ(Text(Body(approved), "status"), "approved");
  EXPECT_EQ(Text(testing::Object(Body(approved), "decided_by"), "email"), "approver@example.com");
  // The 60 s start now: 59 s later it is still there to take.
  clock_.Advance(seconds(59));
  api_->commands().ExpireDue();
  json::object command = TakeOne();
  EXPECT_EQ(ToJson(command.at("argv")), R"(["kubectl","logs","-n","ml","trainer-0","--tail=5"])");
  ASSERT_EQ(PostResult(std::string(command.at("id").as_string()),
                       ToJson(ResultJson("step 1000 loss 0.12\n", 0)))
                .status,
            200);

  json::object done = Command(id);
  EXPECT_EQ(Text(done, "status"), "completed");
  EXPECT_EQ(done.at("exit_code").as_int64(), 0);
  EXPECT_EQ(Text(done, "stdout"), "step 1000 loss 0.12\n");
  EXPECT_EQ(Outcomes("completed"), 1);

  AuditEvent decision = LastAudit("kubectl.approve");
  EXPECT_EQ(decision.actor_label, "approver@example.com");
  EXPECT_EQ(decision.at, clock_.Now() - seconds(59));
  EXPECT_EQ(Text(ParseJson(decision.detail).value().as_object(), "command_id"), id);
  AuditEvent run = LastAudit("kubectl.run");
  EXPECT_EQ(run.actor_label, "admin@example.com") << "the run is the requester's";
  EXPECT_EQ(ParseJson(run.detail).value().as_object().at("exit_code").as_int64(), 0);
}

TEST_F(ApprovalsApiTest, AnApprovedCommandNoAgentTakesFailsAfterSixtySecondsFromTheApproval) {
  RuleId(R"({})");
  const std::string id = Text(Waiting({"get", "nodes"}), "id");
  ASSERT_EQ(Decide(id, "approve", approver_.api_key).status, 200);
  clock_.Advance(seconds(61));
  api_->commands().ExpireDue();
  json::object failed = Command(id);
  EXPECT_EQ(Text(failed, "status"), "failed");
  EXPECT_EQ(Text(testing::Object(failed, "error"), "code"), "not_picked_up");
  EXPECT_EQ(Outcomes("not_picked_up"), 1);
}

TEST_F(ApprovalsApiTest, TheCredentialThatAskedCannotApproveButMayWithdraw) {
  RuleId(R"({"verb":"get"})");
  const std::string id = Text(Waiting({"get", "nodes"}), "id");
  // The list says so to whoever asked, and only to them.
  auto asked_by_you = [&](const std::string& credential) {
    net::Response listed = Send("GET", "/api/v1/approvals", credential);
    EXPECT_EQ(listed.status, 200) << listed.body;
    const json::array approvals = Body(listed).at("approvals").as_array();
    EXPECT_EQ(approvals.size(), 1u) << listed.body;
    return !approvals.empty() && approvals[0].at("asked_by_you").as_bool();
  };
  EXPECT_TRUE(asked_by_you(admin_key_));
  EXPECT_FALSE(asked_by_you(approver_.api_key));
  net::Response own = Decide(id, "approve", admin_key_);
  EXPECT_EQ(own.status, 403) << own.body;
  EXPECT_EQ(ErrorCode(own), "own_request");
  EXPECT_EQ(Text(Command(id), "status"), "waiting_for_approval");
  net::Response withdrawn = Decide(id, "reject", admin_key_, R"({"reason":"wrong cluster"})");
  ASSERT_EQ(withdrawn.status, 200) << withdrawn.body;
  json::object rejected = Command(id);
  EXPECT_EQ(Text(rejected, "status"), "rejected");
  EXPECT_EQ(Text(rejected, "reason"), "wrong cluster");
  EXPECT_NE(Text(rejected, "message").find("wrong cluster"), std::string::npos);
  // Decided is decided.
  net::Response again = Decide(id, "approve", approver_.api_key);
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(ErrorCode(again), "not_waiting");
  EXPECT_TRUE(PolledCommands(Poll(R"({"wait_seconds":0})")).empty());
  EXPECT_EQ(LastAudit("kubectl.reject").actor_label, "admin@example.com");
}

TEST_F(ApprovalsApiTest, AWaitingCommandExpiresAfterFifteenMinutesAndNeverRuns) {
  RuleId(R"({"resource":"nodes"})");
  const std::string id = Text(Waiting({"top", "nodes"}), "id");
  clock_.Advance(minutes(15));
  // Expired as soon as its time passed, before the sweep records it.
  EXPECT_EQ(Text(Command(id), "status"), "expired");
  net::Response late = Decide(id, "approve", approver_.api_key);
  EXPECT_EQ(late.status, 409) << late.body;
  EXPECT_NE(ErrorMessage(late).find("expired"), std::string::npos) << late.body;
  api_->EndDueApprovals();
  AuditEvent expired = LastAudit("kubectl.approval_expired");
  EXPECT_EQ(expired.actor_type, "system");
  EXPECT_EQ(expired.target_id, id_);
  EXPECT_EQ(Text(ParseJson(expired.detail).value().as_object(), "command_id"), id);
  EXPECT_EQ(Text(Command(id), "status"), "expired");
  net::Response listed = AsAdmin("GET", "/api/v1/approvals");
  EXPECT_TRUE(Body(listed).at("approvals").as_array().empty());
  EXPECT_TRUE(PolledCommands(Poll(R"({"wait_seconds":0})")).empty());
  // A day later it is forgotten; the audit log keeps what happened.
  clock_.Advance(std::chrono::hours(25));
  api_->EndDueApprovals();
  EXPECT_EQ(Send("GET", Path("/commands/" + id), admin_key_).status, 404);
}

TEST_F(ApprovalsApiTest, ARestartKeepsWaitingCommandsAndEndsApprovedOnesThatNeverRan) {
  RuleId(R"({})");
  const std::string waiting = Text(Waiting({"get", "nodes"}), "id");
  const std::string crashed = Text(Waiting({"version"}), "id");
  const std::string stopped = Text(Waiting({"api-versions"}), "id");
  ASSERT_EQ(Decide(crashed, "approve", approver_.api_key).status, 200);
  // A console that starts on the data of one that died: what that one had approved is gone
  // from memory, so it ends now rather than ever running later.
  { ConsoleApi after_crash(*store_, clock_, Options()); }
  auto lost = store_->GetApproval(crashed);
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(lost->status, ApprovalStatus::kFailed);
  EXPECT_EQ(lost->result->error_code, "console_restarted");
  EXPECT_EQ(LastAudit("kubectl.run").actor_type, "system");
  // A console that stops ends what it holds; a restart keeps what waits for a decision.
  ASSERT_EQ(Decide(stopped, "approve", approver_.api_key).status, 200);
  api_.reset();
  StartApi(Options());
  EXPECT_EQ(Text(testing::Object(Command(stopped), "error"), "code"), "shutdown");
  EXPECT_EQ(Text(Command(waiting), "status"), "waiting_for_approval");
  ASSERT_EQ(Decide(waiting, "approve", approver_.api_key).status, 200);
  EXPECT_EQ(PolledCommands(Poll(R"({"wait_seconds":0})")).size(), 1u);
}

TEST_F(ApprovalsApiTest, ApprovalChecksTheScopeAndTheConnectionAgain) {
  RuleId(R"({"namespace":"ml"})");
  const std::string id = Text(Waiting({"get", "pods", "-n", "ml"}), "id");
  ChooseNamespaces(R"(["dev"])");
  net::Response narrowed = Decide(id, "approve", approver_.api_key);
  EXPECT_EQ(narrowed.status, 403) << narrowed.body;
  EXPECT_EQ(ErrorCode(narrowed), "namespace_not_allowed");
  EXPECT_TRUE(ErrorMessage(narrowed).starts_with(std::string(kubectl::kRefusalHeadline)));
  ChooseNamespaces(R"(["ml"])");
  ASSERT_EQ(AsAdmin("POST", Path("/revoke")).status, 200);
  net::Response revoked = Decide(id, "approve", approver_.api_key);
  EXPECT_EQ(revoked.status, 409) << revoked.body;
  EXPECT_EQ(ErrorCode(revoked), "connection_unavailable");
  EXPECT_EQ(Text(Command(id), "status"), "waiting_for_approval");
}

TEST_F(ApprovalsApiTest, OnlyTheOwnerOrAnAdminSeesAndDecides) {
  TestUser owner = AddUser("owner@example.com");
  TestUser other = AddUser("other@example.com");
  json::object created = CreateConnection(owner.api_key, "owned", R"(,"namespaces":["*"])");
  const std::string connection = Text(created, "id");
  ASSERT_EQ(Send("POST", "/api/v1/connections/" + connection + "/approval-rules", owner.api_key,
                 R"({"verb":"get"})")
                .status,
            201);
  PendingReply asked;
  api_->router().Dispatch(UserRequest("POST", "/api/v1/connections/" + connection + "/kubectl",
                                      owner.api_key, R"({"argv":["kubectl","get","nodes"]})"),
                          asked.Callback());
  const std::string id = Text(Body(asked.Wait()), "id");
  // Another member neither sees nor decides it; the owner's list has it, the admin's too.
  EXPECT_TRUE(Body(Send("GET", "/api/v1/approvals", other.api_key)).at("approvals").as_array().empty());
  EXPECT_EQ(Decide(id, "approve", other.api_key).status, 404);
  EXPECT_EQ(Decide(id, "reject", other.api_key).status, 404);
  EXPECT_EQ(Send("GET", "/api/v1/connections/" + connection + "/commands/" + id, other.api_key)
                .status,
            404);
  EXPECT_EQ(Body(Send("GET", "/api/v1/approvals", owner.api_key)).at("approvals").as_array().size(),
            1u);
  EXPECT_EQ(Body(AsAdmin("GET", "/api/v1/approvals?connection_id=" + connection))
                .at("approvals")
                .as_array()
                .size(),
            1u);
  // The command is not another connection's.
  EXPECT_EQ(Send("GET", Path("/commands/" + id), admin_key_).status, 404);
  ASSERT_EQ(Decide(id, "approve", admin_key_).status, 200) << "an admin approves it";
}

TEST_F(ApprovalsApiTest, RulesAreCheckedCanonicalisedAndAudited) {
  net::Response added = AddRule(R"({"verb":"get","resource":"deploy","namespace":"ml"})");
  ASSERT_EQ(added.status, 201) << added.body;
  json::object rule = Body(added);
  EXPECT_EQ(Text(rule, "resource"), "deployments.apps");
  // The same rule in another spelling is the same rule.
  net::Response twice = AddRule(R"({"verb":"get","resource":"Deployment.apps","namespace":"ml"})");
  EXPECT_EQ(twice.status, 409) << twice.body;
  EXPECT_NE(ErrorMessage(twice).find(Text(rule, "id")), std::string::npos);
  for (const auto& [body, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"verb":"delete"})", "not one of the read-only verbs"},
           {R"({"resource":"secrets"})", "secrets are never read"},
           {R"({"resource":"cm"})", "configmaps"},
           {R"({"resource":"all"})", "category"},
           {R"({"resource":"widgets.example.com"})", "unknown resource type"},
           {R"({"namespace":"ML"})", "not a namespace name"},
           {R"({"resource":"nodes","namespace":"ml"})", "never match"},
           {R"({"verb":"version","namespace":"ml"})", "reads no namespace"},
           {R"({"verb":""})", "is empty"},
           {R"({"verb":7})", "verb"},
           {R"({"verb":"get","user":"x"})", "unknown field"},
           {R"([1])", "JSON object"},
           {R"({"resource":")" + std::string(300, 'p') + R"("})", "resource"}}) {
    net::Response refused = AddRule(body);
    EXPECT_EQ(refused.status, 400) << body.substr(0, 60) << ": " << refused.body;
    EXPECT_NE(ErrorMessage(refused).find(says), std::string::npos)
        << body.substr(0, 60) << ": " << refused.body;
  }
  net::Response listed = AsAdmin("GET", Path("/approval-rules"));
  ASSERT_EQ(Body(listed).at("rules").as_array().size(), 1u) << listed.body;
  TestUser member = AddUser("member@example.com");
  EXPECT_EQ(AddRule(R"({})", member.api_key).status, 404);
  EXPECT_EQ(Send("GET", Path("/approval-rules"), member.api_key).status, 404);

  net::Response removed =
      Send("DELETE", Path("/approval-rules/" + Text(rule, "id")), approver_.api_key);
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(Send("DELETE", Path("/approval-rules/" + Text(rule, "id")), admin_key_).status, 404);
  EXPECT_TRUE(Body(AsAdmin("GET", Path("/approval-rules"))).at("rules").as_array().empty());
  EXPECT_EQ(LastAudit("connection.approval_rule_add").actor_label, "admin@example.com");
  AuditEvent removal = LastAudit("connection.approval_rule_remove");
  EXPECT_EQ(removal.actor_label, "approver@example.com");
  EXPECT_EQ(Text(ParseJson(removal.detail).value().as_object(), "resource"), "deployments.apps");
  for (size_t i = 0; i < kMaxApprovalRules; ++i) {
    ASSERT_EQ(AddRule(R"({"namespace":"ns-)" + std::to_string(i) + "\"}").status, 201) << i;
  }
  net::Response full = AddRule(R"({"namespace":"one-more"})");
  EXPECT_EQ(full.status, 409) << full.body;
}

TEST_F(ApprovalsApiTest, SixteenCommandsMayWaitForApprovalPerConnection) {
  RuleId(R"({})");
  for (int i = 0; i < 16; ++i) Waiting({"get", "nodes"});
  net::Response refused = Kubectl({"get", "nodes"}).Wait();
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(ErrorCode(refused), "too_many_commands");
}

TEST_F(ApprovalsApiTest, DecisionBodiesAndQueriesAreReadStrictly) {
  RuleId(R"({})");
  const std::string id = Text(Waiting({"get", "nodes"}), "id");
  for (const std::string& body :
       {std::string(R"({"reason":"a\nb"})"), std::string(R"({"reason":7})"),
        std::string(R"({"why":"x"})"), R"({"reason":")" + std::string(501, 'r') + "\"}"}) {
    EXPECT_EQ(Decide(id, "reject", approver_.api_key, body).status, 400) << body.substr(0, 40);
  }
  EXPECT_EQ(Decide("cmd_0000000000000000", "approve", approver_.api_key).status, 404);
  EXPECT_EQ(Decide("../../users", "approve", approver_.api_key).status, 404);
  EXPECT_EQ(AsAdmin("GET", "/api/v1/approvals?status=pending").status, 400);
  EXPECT_EQ(AsAdmin("GET", "/api/v1/approvals?limit=0").status, 400);
  EXPECT_EQ(AsAdmin("GET", "/api/v1/approvals?sort=x").status, 400);
  EXPECT_EQ(Text(Command(id), "status"), "waiting_for_approval");
}

}  // namespace
}  // namespace uplink::console
