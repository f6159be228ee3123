// `uplink approvals ...`, `uplink kubectl` waiting for an approval, and the namespace scope
// chosen by `uplink connections create` (flag or question), against a scripted console.
#include <gtest/gtest.h>

#include <atomic>

#include "cli_harness.h"

namespace uplink::cli {
namespace {

using testing::Cli;
using testing::ConnectionJson;
using testing::ErrorReply;
using testing::FakeConsole;

constexpr char kKey[] = "uk_KKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKK";
constexpr char kId[] = "0123456789abcdef";
constexpr char kCommand[] = "cmd_5f2a9c0e4b7d13a6";
const std::string kConnection = std::string("/api/v1/connections/") + kId;

json::object Body(const net::Request& request) {
  auto parsed = ParseJson(request.body);
  return parsed.ok() && parsed->is_object() ? parsed->get_object() : json::object{};
}

json::object Approval(const std::string& status, const std::string& message) {
  return json::object{
      {"id", kCommand},
      {"connection_id", kId},
      {"argv", json::array{"kubectl", "logs", "-n", "payments", "api-0"}},
      {"status", status},
      {"message", message},
      {"rule", {{"id", "a1b2c3d4e5f60718"}, {"verb", "logs"}, {"resource", "*"},
                {"namespace", "payments"}}},
      {"requested_by", {{"id", "u1"}, {"email", "dev@example.com"}}},
      {"requested_at", "2027-01-15T08:00:00Z"},
      {"expires_at", "2027-01-15T08:15:00Z"}};
}

class ApprovalCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    cli_.env["UPLINK_API_KEY"] = kKey;
    console_.OnJson(
        "GET", "/api/v1/connections", 200,
        json::object{{"connections", json::array{ConnectionJson(kId, "prod", "active")}}});
  }
  testing::CliResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--console", console_.url()});
    return cli_.Run(args);
  }

  Cli cli_;
  FakeConsole console_;
};

TEST_F(ApprovalCommands, KubectlSaysItWaitsThenPrintsTheOutputOnceApproved) {
  console_.OnJson("POST", kConnection + "/kubectl", 202,
                  Approval("waiting_for_approval",
                           "waiting for approval: it matches the approval rule a1b2c3d4e5f60718 "
                           "(kubectl logs in namespace payments)."));
  std::atomic<int> asked{0};
  console_.On("GET", kConnection + "/commands/" + kCommand, [&](const net::Request&) {
    json::object reply = Approval("approved", "approved by ops@example.com; sent to the agent");
    if (++asked >= 2) {
      reply = Approval("completed", "approved by ops@example.com and run");
      reply["exit_code"] = 0;
      reply["stdout"] = "GET /health 200\n";
      reply["stderr"] = "";
    }
    return net::Response::Json(200, ToJson(reply));
  });
  auto r = Run({"kubectl", "prod", "--", "logs", "-n", "payments", "api-0"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "GET /health 200\n");
  EXPECT_NE(r.err.find("uplink: waiting for approval: it matches the approval rule"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("approved by ops@example.com"), std::string::npos) << r.err;
  EXPECT_EQ(asked.load(), 2);
}

TEST_F(ApprovalCommands, ARejectedOrExpiredCommandExits4WithTheReason) {
  console_.OnJson("POST", kConnection + "/kubectl", 202,
                  Approval("waiting_for_approval", "waiting for approval"));
  console_.OnJson("GET", kConnection + "/commands/" + kCommand, 200,
                  Approval("rejected", "rejected by ops@example.com: not during the incident"));
  auto rejected = Run({"kubectl", "prod", "--", "logs", "-n", "payments", "api-0"});
  EXPECT_EQ(rejected.code, 4);
  EXPECT_NE(rejected.err.find("did not run: rejected by ops@example.com: not during the incident"),
            std::string::npos)
      << rejected.err;
  EXPECT_TRUE(rejected.out.empty());

  console_.OnJson("GET", kConnection + "/commands/" + kCommand, 200,
                  Approval("expired", "nobody approved it before 2027-01-15T08:15:00Z"));
  auto expired = Run({"kubectl", "prod", "--", "logs", "-n", "payments", "api-0"});
  EXPECT_EQ(expired.code, 4);
  EXPECT_NE(expired.err.find("nobody approved it"), std::string::npos) << expired.err;

  json::object failed = Approval("failed", "x");
  failed["error"] = json::object{{"code", "not_picked_up"}, {"message", "no agent picked it up"}};
  console_.OnJson("GET", kConnection + "/commands/" + kCommand, 200, failed);
  auto lost = Run({"kubectl", "prod", "--", "logs", "-n", "payments", "api-0"});
  EXPECT_EQ(lost.code, 1);
  EXPECT_NE(lost.err.find("no agent picked it up"), std::string::npos) << lost.err;

  console_.OnJson("GET", kConnection + "/commands/" + kCommand, 200,
                  Approval("\x1b[2Jodd", "x"));
  auto odd = Run({"kubectl", "prod", "--", "logs", "-n", "payments", "api-0"});
  EXPECT_EQ(odd.code, 1);
  EXPECT_EQ(odd.err.find('\x1b'), std::string::npos) << "no control characters reach the screen";
}

TEST_F(ApprovalCommands, ListShowsWhatWaitsAndWhoAsked) {
  console_.OnJson("GET", "/api/v1/approvals", 200,
                  json::object{{"approvals", json::array{Approval("waiting_for_approval", "")}}});
  auto r = Run({"approvals", "list"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(kCommand), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prod"), std::string::npos) << "the cluster by name: " << r.out;
  EXPECT_NE(r.out.find("dev@example.com"), std::string::npos);
  EXPECT_NE(r.out.find("kubectl logs -n payments api-0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("logs * payments"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("uplink approvals approve COMMAND_ID"), std::string::npos);
  auto sent = console_.RequestsTo("GET", "/api/v1/approvals");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].target, "/api/v1/approvals?status=waiting_for_approval");

  console_.OnJson("GET", "/api/v1/approvals", 200, json::object{{"approvals", json::array{}}});
  auto all = Run({"approvals", "list", "--all", "--connection", "prod"});
  EXPECT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("in the last 24 hours"), std::string::npos) << all.out;
  EXPECT_EQ(console_.RequestsTo("GET", "/api/v1/approvals").back().target,
            std::string("/api/v1/approvals?status=all&connection_id=") + kId);
}

TEST_F(ApprovalCommands, ApproveAndRejectSayWhatHappened) {
  json::object approved = Approval("approved", "approved by ops@example.com; sent to the agent");
  approved["decided_by"] = json::object{{"id", "u2"}, {"email", "ops@example.com"}};
  console_.OnJson("POST", std::string("/api/v1/approvals/") + kCommand + "/approve", 200,
                  approved);
  auto r = Run({"approvals", "approve", kCommand});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("approved by ops@example.com; sent to the agent"), std::string::npos);

  console_.OnJson("POST", std::string("/api/v1/approvals/") + kCommand + "/reject", 200,
                  Approval("rejected", "rejected"));
  auto rejected = Run({"approvals", "reject", kCommand, "--reason", "not now"});
  EXPECT_EQ(rejected.code, 0) << rejected.err;
  auto sent = console_.RequestsTo("POST", std::string("/api/v1/approvals/") + kCommand + "/reject");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(ToJson(Body(sent[0])), R"({"reason":"not now"})");

  console_.On("POST", std::string("/api/v1/approvals/") + kCommand + "/approve",
              [](const net::Request&) {
                return ErrorReply(403, "own_request",
                                  "the credential that asked for this command cannot approve it");
              });
  auto own = Run({"approvals", "approve", kCommand});
  EXPECT_EQ(own.code, 4);
  EXPECT_NE(own.err.find("cannot approve it"), std::string::npos) << own.err;
  EXPECT_EQ(Run({"approvals", "approve"}).code, 2);
}

TEST_F(ApprovalCommands, RulesAreListedAddedAndRemoved) {
  console_.OnJson("GET", kConnection + "/approval-rules", 200,
                  json::object{{"connection_id", kId}, {"rules", json::array{}}});
  auto empty = Run({"approvals", "rules", "prod"});
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_NE(empty.out.find("No approval rules"), std::string::npos) << empty.out;

  console_.OnJson("POST", kConnection + "/approval-rules", 201,
                  json::object{{"id", "a1b2c3d4e5f60718"}, {"verb", "get"},
                               {"resource", "pods"}, {"namespace", "ml"}});
  auto added = Run({"approvals", "add-rule", "prod", "--verb", "get", "--resource", "po",
                    "--namespace", "ml"});
  EXPECT_EQ(added.code, 0) << added.err;
  EXPECT_NE(added.out.find("kubectl get on pods in namespace ml now waits for approval"),
            std::string::npos)
      << added.out;
  auto sent = console_.RequestsTo("POST", kConnection + "/approval-rules");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(ToJson(Body(sent[0])), R"({"verb":"get","resource":"po","namespace":"ml"})");

  console_.OnJson("DELETE", kConnection + "/approval-rules/a1b2c3d4e5f60718", 200,
                  json::object{{"id", "a1b2c3d4e5f60718"}});
  auto removed = Run({"approvals", "remove-rule", "prod", "a1b2c3d4e5f60718"});
  EXPECT_EQ(removed.code, 0) << removed.err;
  EXPECT_NE(removed.out.find("Removed approval rule a1b2c3d4e5f60718"), std::string::npos);
  EXPECT_EQ(Run({"approvals", "remove-rule", "prod"}).code, 2);
}

class CreateWithScope : public ApprovalCommands {
 protected:
  void SetUp() override {
    ApprovalCommands::SetUp();
    json::object created = ConnectionJson(kId, "gpu-a");
    created["token"] = "agt_" + std::string(43, 'T');
    console_.OnJson("POST", "/api/v1/connections", 201, created);
  }
  // The body of the latest create.
  json::object Sent() {
    auto sent = console_.RequestsTo("POST", "/api/v1/connections");
    EXPECT_FALSE(sent.empty());
    return sent.empty() ? json::object{} : Body(sent.back());
  }
};

TEST_F(CreateWithScope, TheFlagSetsTheNamespaces) {
  auto r = Run({"connections", "create", "gpu-a", "--read-namespaces", "ml, dev,,"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ToJson(Sent().at("namespaces")), R"(["ml","dev"])");
}

TEST_F(CreateWithScope, OnATerminalItIsAsked) {
  cli_.terminal.available = true;
  cli_.terminal.answers = {"*"};
  auto r = Run({"connections", "create", "gpu-a"});
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(cli_.terminal.prompts.size(), 1u);
  EXPECT_NE(cli_.terminal.prompts[0].find("Namespaces 'uplink kubectl'"), std::string::npos);
  EXPECT_EQ(ToJson(Sent().at("namespaces")), R"(["*"])");
}

TEST_F(CreateWithScope, EnterChoosesLaterAndNoneMeansClusterScopedReadsOnly) {
  cli_.terminal.available = true;
  cli_.terminal.answers = {""};
  EXPECT_EQ(Run({"connections", "create", "gpu-a"}).code, 0);
  EXPECT_FALSE(Sent().contains("namespaces"));
  cli_.terminal.answers = {"none"};
  EXPECT_EQ(Run({"connections", "create", "gpu-a"}).code, 0);
  EXPECT_EQ(ToJson(Sent().at("namespaces")), "[]");
}

TEST_F(CreateWithScope, WithoutATerminalNothingIsAskedOrChosen) {
  auto r = Run({"connections", "create", "gpu-a"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(cli_.terminal.prompts.empty());
  EXPECT_FALSE(Sent().contains("namespaces"));
  auto none = Run({"connections", "create", "gpu-a", "--read-namespaces", ""});
  EXPECT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(ToJson(Sent().at("namespaces")), "[]");
}

}  // namespace
}  // namespace uplink::cli
