// kubectl through the console end to end through the router: a user's command waits until
// the agent's long poll takes it and its result comes back; refusals by the guard and the
// namespace scope; give-ups and late results; the agent's endpoints against hostile bodies;
// the namespace scope API; cluster snapshots from uploads and the cluster plan in the reply.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/gzip.h"
#include "common/kubernetes_names.h"
#include "console/api/cluster_plan.h"
#include "kubectl/guard.h"
#include "kubectl_fixture.h"
#include "protocol/cluster_snapshot.h"
#include "protocol/commands.h"

namespace uplink::console {
namespace {

using std::chrono::seconds;
using testing::Body;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::PendingReply;
using testing::TestUser;
using testing::Text;

TEST_F(KubectlApiTest, ACommandRunsThroughTheAgentsPollAndItsResultComesBack) {
  ChooseNamespaces(R"(["ml"])");
  PendingReply user = Kubectl({"get", "pods", "-n", "ml"});
  EXPECT_FALSE(user.ready());
  EXPECT_EQ(api_->commands().stats().waiting_commands, 1u);

  json::object command = TakeOne();
  std::string command_id(command.at("id").as_string());
  EXPECT_TRUE(command_id.starts_with("cmd_"));
  EXPECT_EQ(ToJson(command.at("argv")), R"(["kubectl","get","pods","-n","ml"])");
  EXPECT_EQ(command.at("timeout_seconds").as_int64(), 30);
  EXPECT_FALSE(user.ready());

  net::Response stored =
      PostResult(command_id, ToJson(ResultJson("NAME        READY\ntrainer-0   1/1\n", 0, "warn")));
  ASSERT_EQ(stored.status, 200) << stored.body;
  EXPECT_EQ(Text(Body(stored), "status"), "stored");

  net::Response reply = user.Wait();
  ASSERT_EQ(reply.status, 200) << reply.body;
  json::object body = Body(reply);
  EXPECT_EQ(Text(body, "id"), command_id);
  EXPECT_EQ(body.at("exit_code").as_int64(), 0);
  EXPECT_EQ(Text(body, "stdout"), "NAME        READY\ntrainer-0   1/1\n");
  EXPECT_EQ(Text(body, "stderr"), "warn");
  EXPECT_EQ(body.at("duration_ms").as_int64(), 84);
  EXPECT_EQ(api_->commands().stats().waiting_commands, 0u);

  AuditEvent event = LastAudit("kubectl.run");
  EXPECT_EQ(event.outcome, "ok");
  EXPECT_EQ(event.target_id, id_);
  EXPECT_EQ(event.actor_type, "user");
  json::object detail = ParseJson(event.detail).value().as_object();
  EXPECT_EQ(ToJson(detail.at("argv")), R"(["kubectl","get","pods","-n","ml"])");
  EXPECT_EQ(detail.at("exit_code").as_int64(), 0);
  EXPECT_EQ(detail.at("duration_ms").as_int64(), 84);
  EXPECT_EQ(Text(detail, "command_id"), command_id);
  EXPECT_EQ(Outcomes("completed"), 1);

  // The same result sent again (its reply was lost) is acknowledged, not shown twice.
  net::Response again = PostResult(command_id, ToJson(ResultJson("other")));
  EXPECT_EQ(Text(Body(again), "status"), "stored");
  EXPECT_EQ(user.replies(), 1);
}

TEST_F(KubectlApiTest, AHeldPollIsAnsweredAsSoonAsAUserSendsACommand) {
  ChooseNamespaces(R"(["*"])");
  PendingReply poll =
      Poll(R"({"agent_instance":"uplink-cluster-0","wait_seconds":55,"max_commands":2})");
  EXPECT_FALSE(poll.ready());
  EXPECT_EQ(api_->commands().stats().waiting_polls, 1u);
  PendingReply user = Kubectl({"get", "nodes"});
  // Answered by the user's request itself: no timer runs between them.
  ASSERT_TRUE(poll.ready());
  json::array commands = PolledCommands(poll);
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_EQ(ToJson(commands[0].at("argv")), R"(["kubectl","get","nodes"])");
  EXPECT_FALSE(user.ready());
  std::string metrics = Send("GET", "/metrics", "").body;
  EXPECT_NE(metrics.find("# TYPE uplink_console_kubectl_pickup_seconds histogram"),
            std::string::npos);
  EXPECT_NE(metrics.find("uplink_console_kubectl_pickup_seconds_count 1"), std::string::npos);
  EXPECT_NE(metrics.find("uplink_console_kubectl_commands_waiting 1"), std::string::npos);
  EXPECT_NE(metrics.find("uplink_console_kubectl_polls_waiting 0"), std::string::npos);
}

TEST_F(KubectlApiTest, APollWithNothingQueuedIsAnsweredEmptyWhenItsWaitPasses) {
  PendingReply poll = Poll(R"({"wait_seconds":10})");
  EXPECT_FALSE(poll.ready());
  clock_.Advance(seconds(10));
  api_->commands().ExpireDue();
  EXPECT_TRUE(PolledCommands(poll).empty());
  // wait_seconds 0 and an empty body answer at once (the body's defaults hold otherwise).
  PendingReply immediate = Poll(R"({"wait_seconds":0})");
  ASSERT_TRUE(immediate.ready());
  EXPECT_TRUE(PolledCommands(immediate).empty());
}

TEST_F(KubectlApiTest, IdlePollsThatCameTogetherAreAnsweredSpreadOverTheLastFifthOfTheWait) {
  // Every cluster polling again at once, as after a console restart: 25 connections, four
  // agents each.
  std::vector<PendingReply> polls;
  for (int c = 0; c < 25; ++c) {
    const std::string token =
        Text(CreateConnection(admin_key_, "herd-" + std::to_string(c)), "token");
    for (int agent = 0; agent < 4; ++agent) {
      polls.push_back(Poll(R"({"wait_seconds":50,"agent_instance":"a)" + std::to_string(agent) +
                               "\"}",
                           token));
    }
  }
  std::map<int, int> answered_at;  // second -> polls answered then
  size_t answered = 0;
  for (int second = 1; second <= 50; ++second) {
    clock_.Advance(seconds(1));
    api_->commands().ExpireDue();
    size_t now_answered = 0;
    for (const PendingReply& poll : polls) now_answered += poll.ready() ? 1 : 0;
    if (now_answered > answered) answered_at[second] = static_cast<int>(now_answered - answered);
    answered = now_answered;
  }
  ASSERT_EQ(answered, polls.size()) << "every poll is answered by its wait";
  EXPECT_GE(answered_at.begin()->first, 40) << "none before the last fifth of its wait";
  EXPECT_GT(answered_at.size(), 1u) << "not all in the same second";
  for (const PendingReply& poll : polls) EXPECT_TRUE(PolledCommands(poll).empty());
}

TEST_F(KubectlApiTest, TheAgentsErrorIsA502NamingIt) {
  ChooseNamespaces(R"(["*"])");
  PendingReply user = Kubectl({"get", "pods", "-A"});
  json::object command = TakeOne();
  json::object error{
      {"error", {{"code", "timeout"}, {"message", "kubectl ran past 30 s and was killed"}}},
      {"duration_ms", 30000}};
  ASSERT_EQ(PostResult(std::string(command.at("id").as_string()), ToJson(error)).status, 200);
  net::Response reply = user.Wait();
  EXPECT_EQ(reply.status, 502);
  EXPECT_EQ(ErrorCode(reply), "agent_timeout");
  EXPECT_EQ(ErrorMessage(reply), "kubectl ran past 30 s and was killed");
  EXPECT_EQ(Outcomes("agent_timeout"), 1);

  PendingReply refused = Kubectl({"get", "pods", "-A"});
  command = TakeOne();
  std::string message = std::string(kubectl::RefusalText("--watch follows changes"));
  json::object refusal{{"error", {{"code", "refused"}, {"message", message}}}, {"duration_ms", 0}};
  ASSERT_EQ(PostResult(std::string(command.at("id").as_string()), ToJson(refusal), "").status, 200);
  net::Response refused_reply = refused.Wait();
  EXPECT_EQ(refused_reply.status, 502);
  EXPECT_EQ(ErrorCode(refused_reply), "agent_refused");
  EXPECT_EQ(ErrorMessage(refused_reply), message);
  EXPECT_EQ(LastAudit("kubectl.run").outcome, "refused");
}

TEST_F(KubectlApiTest, ACommandNoAgentTookIsGivenUpAfter60Seconds) {
  ChooseNamespaces(R"(["*"])");
  PendingReply user = Kubectl({"get", "nodes"});
  clock_.Advance(seconds(59));
  api_->commands().ExpireDue();
  EXPECT_FALSE(user.ready());
  clock_.Advance(seconds(1));
  api_->commands().ExpireDue();
  net::Response reply = user.Wait();
  EXPECT_EQ(reply.status, 504);
  EXPECT_EQ(ErrorCode(reply), "agent_timeout");
  EXPECT_NE(ErrorMessage(reply).find("no agent picked the command up"), std::string::npos);
  EXPECT_NE(ErrorMessage(reply).find("Waiting for agent"), std::string::npos);
  EXPECT_NE(ErrorMessage(reply).find("last asked for commands: not since the console started"),
            std::string::npos);
  EXPECT_EQ(Outcomes("not_picked_up"), 1);
  EXPECT_EQ(Text(ParseJson(LastAudit("kubectl.run").detail).value().as_object(), "error"),
            "not_picked_up");
  // Nothing stale runs later.
  EXPECT_TRUE(PolledCommands(Poll(R"({"wait_seconds":0})")).empty());
}

TEST_F(KubectlApiTest, ACommandTakenWithoutAResultIsGivenUpAndTheLateResultDiscarded) {
  ChooseNamespaces(R"(["*"])");
  PendingReply user = Kubectl({"version"});
  clock_.Advance(seconds(3));
  json::object command = TakeOne();
  WallTime taken_at = clock_.Now();
  clock_.Advance(seconds(57));
  api_->commands().ExpireDue();
  net::Response reply = user.Wait();
  EXPECT_EQ(reply.status, 504);
  EXPECT_EQ(ErrorCode(reply), "agent_timeout");
  EXPECT_NE(ErrorMessage(reply).find("the agent took the command at " + FormatRfc3339(taken_at) +
                                     " and returned nothing"),
            std::string::npos)
      << ErrorMessage(reply);
  EXPECT_EQ(Outcomes("no_result"), 1);

  net::Response late = PostResult(std::string(command.at("id").as_string()),
                                  ToJson(ResultJson("Client Version: v1.31.0\n")));
  ASSERT_EQ(late.status, 200) << late.body;
  EXPECT_EQ(Text(Body(late), "status"), "discarded");
  EXPECT_EQ(Metric("uplink_console_kubectl_late_results_total", {}), 1);
  EXPECT_EQ(user.replies(), 1);
}

TEST_F(KubectlApiTest, TheGuardRefusesBeforeAnythingIsQueuedAndTheAuditKeepsOnlyTheVerb) {
  ChooseNamespaces(R"(["*"])");
  const std::vector<std::vector<std::string>> refused = {
      {"delete", "pod", "trainer-0", "-n", "ml"},
      {"get", "secrets", "-A"},
      {"get", "pods", "--token=hunter2-secret-value"},
      {"exec", "-it", "trainer-0", "--", "sh"},
      {"get", "pods", "-w"},
  };
  for (const auto& args : refused) {
    PendingReply user = Kubectl(args);
    ASSERT_TRUE(user.ready());
    net::Response reply = user.Wait();
    EXPECT_EQ(reply.status, 403) << reply.body;
    EXPECT_EQ(ErrorCode(reply), "refused");
    EXPECT_TRUE(ErrorMessage(reply).starts_with(std::string(kubectl::kRefusalHeadline) + "\n"))
        << ErrorMessage(reply);
  }
  EXPECT_EQ(api_->commands().stats().waiting_commands, 0u);
  EXPECT_TRUE(PolledCommands(Poll(R"({"wait_seconds":0})")).empty());
  EXPECT_EQ(Outcomes("refused"), refused.size());

  AuditEvent event = LastAudit("kubectl.run");
  EXPECT_EQ(event.outcome, "refused");
  json::object detail = ParseJson(event.detail).value().as_object();
  EXPECT_EQ(Text(detail, "verb"), "get");
  EXPECT_FALSE(detail.contains("argv"));
  for (const AuditEvent& e : AllAudit()) {
    EXPECT_EQ(e.detail.find("hunter2"), std::string::npos) << e.detail;
    EXPECT_EQ(e.detail.find("trainer-0"), std::string::npos) << e.detail;
  }
  for (const std::string& line : logs_) {
    EXPECT_EQ(line.find("hunter2"), std::string::npos) << line;
    EXPECT_EQ(line.find("trainer-0"), std::string::npos) << line;
  }
}

TEST_F(KubectlApiTest, UntilNamespacesAreChosenOnlyClusterScopedReadsAreQueued) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"get", "pods", "-n", "ml"}, {"get", "pods", "-A"}, {"logs", "trainer-0"}}) {
    net::Response reply = Kubectl(args).Wait();
    EXPECT_EQ(reply.status, 403) << reply.body;
    EXPECT_EQ(ErrorCode(reply), "namespaces_not_chosen");
    EXPECT_TRUE(ErrorMessage(reply).starts_with(std::string(kubectl::kRefusalHeadline) + "\n"));
    EXPECT_NE(ErrorMessage(reply).find("uplink connections namespaces prod --set"),
              std::string::npos)
        << ErrorMessage(reply);
  }
  EXPECT_EQ(Outcomes("namespaces_not_chosen"), 3);
  EXPECT_EQ(api_->commands().stats().waiting_commands, 0u);
  std::vector<PendingReply> queued;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"get", "nodes"}, {"get", "namespaces"}, {"top", "nodes"}, {"api-resources"},
           {"api-versions"}, {"version"}, {"cluster-info"}, {"explain", "pods", "--recursive"}}) {
    queued.push_back(Kubectl(args));
    EXPECT_FALSE(queued.back().ready()) << args[0] << ": " << queued.back().Wait().body;
  }
  EXPECT_EQ(api_->commands().stats().waiting_commands, queued.size());
}

// helm, a shell, a command line without "kubectl" in front: the read-only refusal, as for
// every other command that is not read-only kubectl, never a 400 about argv[0].
TEST_F(KubectlApiTest, AnotherProgramGetsTheReadOnlyRefusal) {
  ChooseNamespaces(R"(["*"])");
  for (const char* body :
       {R"({"argv":["helm","list"]})", R"({"argv":["bash","-c","kubectl delete ns x"]})",
        R"({"argv":["get","pods"]})", R"({"argv":["/usr/bin/kubectl","get","pods"]})"}) {
    net::Response reply = KubectlRaw(body).Wait();
    EXPECT_EQ(reply.status, 403) << body << ": " << reply.body;
    EXPECT_EQ(ErrorCode(reply), "refused") << body;
    EXPECT_TRUE(ErrorMessage(reply).starts_with(std::string(kubectl::kRefusalHeadline) + "\n"))
        << ErrorMessage(reply);
    EXPECT_NE(ErrorMessage(reply).find("is not kubectl"), std::string::npos) << reply.body;
  }
  AuditEvent event = LastAudit("kubectl.run");
  EXPECT_EQ(event.outcome, "refused");
  EXPECT_EQ(Text(ParseJson(event.detail).value().as_object(), "verb"), "");
  EXPECT_EQ(api_->commands().stats().waiting_commands, 0u);
}

TEST_F(KubectlApiTest, CommandsOutsideTheChosenNamespacesAreRefused) {
  ChooseNamespaces(R"(["ml","dev"])");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"get", "pods", "-n", "kube-system"}, {"get", "pods", "-A"}, {"get", "pods"}}) {
    net::Response reply = Kubectl(args).Wait();
    EXPECT_EQ(reply.status, 403) << reply.body;
    EXPECT_EQ(ErrorCode(reply), "namespace_not_allowed");
    EXPECT_TRUE(ErrorMessage(reply).starts_with(std::string(kubectl::kRefusalHeadline) + "\n"));
  }
  // In scope, and cluster-scoped reads, are queued.
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"get", "pods", "-n", "dev"},
                                             {"logs", "-n", "ml", "trainer-0", "--tail=50"},
                                             {"get", "nodes"},
                                             {"api-resources"}}) {
    PendingReply user = Kubectl(args);
    EXPECT_FALSE(user.ready()) << args[0] << " " << args[1];
  }
  EXPECT_EQ(api_->commands().stats().waiting_commands, 4u);
}

TEST_F(KubectlApiTest, SixteenCommandsMayWaitPerConnection) {
  ChooseNamespaces(R"(["*"])");
  std::vector<PendingReply> waiting;
  for (int i = 0; i < 16; ++i) waiting.push_back(Kubectl({"get", "nodes"}));
  net::Response refused = Kubectl({"get", "nodes"}).Wait();
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(ErrorCode(refused), "too_many_commands");
  EXPECT_EQ(Outcomes("too_many_commands"), 1);
  for (const PendingReply& pending : waiting) EXPECT_FALSE(pending.ready());
}

TEST_F(KubectlApiTest, RevokedExpiredAndForeignConnectionsTakeNoCommands) {
  ChooseNamespaces(R"(["*"])");
  TestUser member = AddUser("member@example.com");
  net::Response foreign = Kubectl({"get", "nodes"}, member.api_key).Wait();
  EXPECT_EQ(foreign.status, 404);
  EXPECT_EQ(ErrorCode(foreign), "not_found");

  clock_.Advance(std::chrono::hours(24 * 91));  // past the default 90-day expiry
  net::Response expired = Kubectl({"get", "nodes"}).Wait();
  EXPECT_EQ(expired.status, 409);
  EXPECT_EQ(ErrorCode(expired), "connection_expired");

  ASSERT_EQ(AsAdmin("POST", Path("/revoke")).status, 200);
  net::Response revoked = Kubectl({"get", "nodes"}).Wait();
  EXPECT_EQ(revoked.status, 409);
  EXPECT_EQ(ErrorCode(revoked), "connection_revoked");
  EXPECT_EQ(api_->commands().stats().waiting_commands, 0u);
}

TEST_F(KubectlApiTest, TheOwnerMayRunCommandsOnTheirConnection) {
  TestUser member = AddUser("member@example.com");
  json::object created = CreateConnection(member.api_key, "member-cluster");
  std::string member_connection = Text(created, "id");
  net::Response set = Send("PUT", "/api/v1/connections/" + member_connection + "/namespaces",
                           member.api_key, R"({"namespaces":["*"]})");
  ASSERT_EQ(set.status, 200) << set.body;
  PendingReply pending;
  api_->router().Dispatch(
      UserRequest("POST", "/api/v1/connections/" + member_connection + "/kubectl", member.api_key,
                  R"({"argv":["kubectl","get","nodes"]})"),
      pending.Callback());
  EXPECT_FALSE(pending.ready());
  // Another connection's agent does not see it.
  EXPECT_TRUE(PolledCommands(Poll(R"({"wait_seconds":0})")).empty());
  PendingReply own;
  api_->router().Dispatch(
      AgentRequest("/api/v1/agent/commands/poll", R"({"wait_seconds":0})", Text(created, "token")),
      own.Callback());
  EXPECT_EQ(PolledCommands(own).size(), 1u);
}

TEST_F(KubectlApiTest, MalformedCommandBodiesAre400) {
  ChooseNamespaces(R"(["*"])");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "argv is required"},
      {R"({"argv":"kubectl get pods"})", "argv must be an array"},
      {R"({"argv":[]})", "argv must hold 1 to"},
      {R"({"argv":["kubectl",7]})", "argv[1] must be a string"},
      {R"({"argv":["kubectl","get","po\u0000ds"]})", "must not contain NUL"},
      {R"({"argv":["kubectl"],"namespace":"ml"})", "unknown field \"namespace\""},
      {R"({"argv":["kubectl","get","pods")", "invalid_request"},
      {R"({"argv":["kubectl",")" + std::string(5000, 'x') + R"("]})", "over 4096 bytes"},
      {"[1,2,3]", "JSON object"},
  };
  for (const auto& [body, says] : cases) {
    net::Response reply = KubectlRaw(body).Wait();
    EXPECT_EQ(reply.status, 400) << body.substr(0, 80) << ": " << reply.body;
    EXPECT_TRUE(ErrorMessage(reply).find(says) != std::string::npos || ErrorCode(reply) == says)
        << body.substr(0, 80) << ": " << reply.body;
  }
  json::array many{"kubectl"};
  for (int i = 0; i < 300; ++i) many.emplace_back("x");
  EXPECT_EQ(KubectlRaw(ToJson(json::object{{"argv", many}})).Wait().status, 400);
  // Without a credential: 401, as every user route.
  PendingReply anonymous;
  net::Request request = UserRequest("POST", Path("/kubectl"), "", R"({"argv":["kubectl"]})");
  request.headers.Remove("Authorization");
  api_->router().Dispatch(std::move(request), anonymous.Callback());
  EXPECT_EQ(anonymous.Wait().status, 401);
  EXPECT_EQ(api_->commands().stats().waiting_commands, 0u);
}

TEST_F(KubectlApiTest, PollBodiesAreReadStrictly) {
  const std::vector<std::pair<std::string, int>> cases = {
      {R"({"wait_seconds":56})", 400},
      {R"({"wait_seconds":-1})", 400},
      {R"({"wait_seconds":"5"})", 400},
      {R"({"wait_seconds":1.5})", 400},
      {R"({"max_commands":0})", 400},
      {R"({"max_commands":17})", 400},
      {R"({"max_commands":1e400})", 400},
      {R"({"agent_instance":7})", 400},
      {R"({"agent_instance":")" + std::string(254, 'a') + "\"}", 400},
      {R"({"agent_instance":"pod\u0000x","wait_seconds":0})", 400},
      {R"({"agent_instance":"pod\tx","wait_seconds":0})", 400},
      {R"({"wait":5})", 400},
      {R"({"wait_seconds":5)", 400},
      {"[]", 400},
      {R"({"wait_seconds":0,"max_commands":16})", 200},
  };
  for (const auto& [body, status] : cases) {
    net::Response reply = Poll(body).Wait();
    EXPECT_EQ(reply.status, status) << body << ": " << reply.body;
  }
  net::Request wrong_type = AgentRequest("/api/v1/agent/commands/poll", "{}", token_);
  wrong_type.headers.Set("Content-Type", "text/plain");
  PendingReply typed;
  api_->router().Dispatch(std::move(wrong_type), typed.Callback());
  EXPECT_EQ(typed.Wait().status, 415);
  EXPECT_EQ(Poll(R"({"wait_seconds":0})", "agt_notatoken").Wait().status, 401);
  EXPECT_EQ(api_->commands().stats().waiting_polls, 0u);
}

TEST_F(KubectlApiTest, ResultBodiesAreReadStrictly) {
  ChooseNamespaces(R"(["*"])");
  PendingReply user = Kubectl({"get", "nodes"});
  std::string id(TakeOne().at("id").as_string());
  const std::string huge_stdout(protocol::kMaxCommandStdoutBytes + 1, 'x');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "JSON"},
      {"not json", "invalid"},
      {R"({"exit_code":0,"stdout":"a","stderr":"")", "invalid"},
      {"[]", "JSON object"},
      {R"({"exit_code":0,"stdout":"","stderr":"","duration_ms":1,"error":{"code":"failed","message":"m"}})",
       "exclude each other"},
      {R"({"stdout":"","stderr":"","duration_ms":1})", "exit_code (or error) is required"},
      {R"({"exit_code":256,"stdout":"","stderr":"","duration_ms":1})", "exit_code must be between"},
      {R"({"exit_code":-1,"stdout":"","stderr":"","duration_ms":1})", "exit_code must be between"},
      {R"({"exit_code":"0","stdout":"","stderr":"","duration_ms":1})", "must be an integer"},
      {R"({"exit_code":0.5,"stdout":"","stderr":"","duration_ms":1})", "must be an integer"},
      {R"({"exit_code":18446744073709551615,"stdout":"","stderr":"","duration_ms":1})",
       "exit_code must be between"},
      {R"({"exit_code":0,"stderr":"","duration_ms":1})", "stdout is required"},
      {R"({"exit_code":0,"stdout":7,"stderr":"","duration_ms":1})", "stdout must be a string"},
      {R"({"exit_code":0,"stdout":"","stderr":"","duration_ms":-5})", "duration_ms must be"},
      {R"({"exit_code":0,"stdout":"","stderr":"","duration_ms":99999999999})",
       "duration_ms must be"},
      {R"({"exit_code":0,"stdout":"","stderr":""})", "duration_ms is required"},
      {R"({"exit_code":0,"stdout":"","stderr":"","duration_ms":1,"pid":4})",
       "unknown field \"pid\""},
      {R"({"error":"boom","duration_ms":1})", "error must be an object"},
      {R"({"error":{"code":"exploded","message":"m"},"duration_ms":1})", "error.code must be"},
      {R"({"error":{"code":"failed"},"duration_ms":1})", "error.message is required"},
      {R"({"error":{"code":"failed","message":"m","hint":"x"},"duration_ms":1})",
       "unknown field \"error.hint\""},
      {R"({"exit_code":0,"stdout":")" + huge_stdout + R"(","stderr":"","duration_ms":1})",
       "stdout is " + std::to_string(huge_stdout.size()) + " bytes long"},
      {std::string(100, '[') + std::string(100, ']'), "deep"},
      {std::string("{\"exit_code\":0,\"stdout\":\"\xff\xfe\",\"stderr\":\"\",\"duration_ms\":1}"),
       "invalid"},
  };
  for (const auto& [body, says] : cases) {
    net::Response reply = PostResult(id, body);
    EXPECT_EQ(reply.status, 400) << body.substr(0, 80) << ": " << reply.body.substr(0, 300);
    EXPECT_EQ(ErrorCode(reply), "invalid_request") << body.substr(0, 80);
    EXPECT_NE(ErrorMessage(reply).find(says), std::string::npos)
        << body.substr(0, 80) << ": " << ErrorMessage(reply);
  }
  EXPECT_FALSE(user.ready()) << "a refused result ends nothing";

  // Transport: a body that is not gzip, a gzip bomb, another encoding or type.
  EXPECT_EQ(PostResult(id, "not gzip at all", "").status, 400);
  net::Request garbage =
      AgentRequest("/api/v1/agent/commands/" + id + "/result", "\x1f\x8b garbage", token_);
  garbage.headers.Set("Content-Encoding", "gzip");
  EXPECT_EQ(testing::Call(api_->router(), std::move(garbage)).status, 400);
  std::string bomb_json = R"({"exit_code":0,"stdout":")" +
                          std::string(protocol::kMaxCommandResultBytes, 'a') +
                          R"(","stderr":"","duration_ms":1})";
  net::Response bomb = PostResult(id, bomb_json);
  EXPECT_EQ(bomb.status, 413) << bomb.body;
  EXPECT_EQ(PostResult(id, ToJson(ResultJson("x")), "br").status, 415);
  net::Request typed =
      AgentRequest("/api/v1/agent/commands/" + id + "/result", ToJson(ResultJson("x")), token_);
  typed.headers.Set("Content-Type", "text/plain");
  EXPECT_EQ(testing::Call(api_->router(), std::move(typed)).status, 415);

  // A valid result still lands.
  net::Response stored = PostResult(id, ToJson(ResultJson("NAME\n", 1, "oops")), "identity");
  EXPECT_EQ(stored.status, 200) << stored.body;
  net::Response reply = user.Wait();
  EXPECT_EQ(Body(reply).at("exit_code").as_int64(), 1);
  EXPECT_EQ(Text(Body(reply), "stderr"), "oops");
}

TEST_F(KubectlApiTest, ResultsForUnknownOrOtherConnectionsCommandsAre404) {
  ChooseNamespaces(R"(["*"])");
  PendingReply user = Kubectl({"get", "nodes"});
  std::string id(TakeOne().at("id").as_string());
  json::object other = CreateConnection(admin_key_, "other");
  std::string body = ToJson(ResultJson("x"));
  for (const std::string& bad :
       {std::string("cmd_0000000000000000"), std::string("cmd_XYZ"), std::string("nope"),
        std::string("cmd_") + std::string(200, 'a')}) {
    net::Response reply = PostResult(bad, body);
    EXPECT_EQ(reply.status, 404) << bad;
    EXPECT_EQ(ErrorCode(reply), "unknown_command") << bad;
  }
  net::Response foreign = PostResult(id, body, "gzip", Text(other, "token"));
  EXPECT_EQ(foreign.status, 404);
  EXPECT_EQ(ErrorCode(foreign), "unknown_command");
  EXPECT_FALSE(user.ready());
  net::Request anonymous = AgentRequest("/api/v1/agent/commands/" + id + "/result", body, "");
  EXPECT_EQ(testing::Call(api_->router(), std::move(anonymous)).status, 401);
}

TEST_F(KubectlApiTest, TheResultRouteAcceptsLargeBodiesAndThePollRouteDoesNot) {
  net::Request head;
  head.method = "POST";
  head.target = "/api/v1/agent/commands/cmd_0123456789abcdef/result";
  EXPECT_EQ(RouteBodyLimit(head, protocol::kDefaultMaxUploadBytes),
            protocol::kMaxCommandResultBytes);
  head.target = "/api/v1/agent/commands/poll";
  EXPECT_EQ(RouteBodyLimit(head, protocol::kDefaultMaxUploadBytes), kMaxUserBodyBytes);
  head.target = Path("/kubectl");
  EXPECT_EQ(RouteBodyLimit(head, protocol::kDefaultMaxUploadBytes), kMaxUserBodyBytes);
}

TEST_F(KubectlApiTest, TheNamespaceScopeIsReadAndSetByTheOwnerOrAnAdmin) {
  net::Response initial = AsAdmin("GET", Path("/namespaces"));
  ASSERT_EQ(initial.status, 200) << initial.body;
  EXPECT_TRUE(Body(initial).at("namespaces").is_null());

  net::Response set = SetScope(R"({"namespaces":["ml","dev","a-1"]})");
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(ToJson(Body(set).at("namespaces")), R"(["a-1","dev","ml"])");
  EXPECT_EQ(ToJson(Body(AsAdmin("GET", Path("/namespaces"))).at("namespaces")),
            R"(["a-1","dev","ml"])");
  AuditEvent event = LastAudit("connection.namespaces");
  EXPECT_EQ(event.target_id, id_);
  json::object detail = ParseJson(event.detail).value().as_object();
  EXPECT_EQ(ToJson(detail.at("namespaces")), R"(["a-1","dev","ml"])");
  EXPECT_TRUE(detail.at("previous_namespaces").is_null());
  EXPECT_EQ(Body(AsAdmin("GET", "/api/v1/audit?action=connection.namespaces"))
                .at("events")
                .as_array()
                .size(),
            1u);

  ASSERT_EQ(SetScope(R"({"namespaces":["*"]})").status, 200);
  EXPECT_EQ(ToJson(Body(AsAdmin("GET", Path("/namespaces"))).at("namespaces")), R"(["*"])");
  ASSERT_EQ(SetScope(R"({"namespaces":[]})").status, 200);
  EXPECT_EQ(ToJson(Body(AsAdmin("GET", Path("/namespaces"))).at("namespaces")), "[]");

  TestUser member = AddUser("member@example.com");
  EXPECT_EQ(Send("GET", Path("/namespaces"), member.api_key).status, 404);
  EXPECT_EQ(SetScope(R"({"namespaces":["*"]})", member.api_key).status, 404);
  EXPECT_EQ(Send("GET", "/api/v1/connections/nonexistent0000/namespaces", admin_key_).status, 404);
}

TEST_F(KubectlApiTest, NamespaceListsAreValidated) {
  json::array too_many;
  for (int i = 0; i < 257; ++i) too_many.emplace_back("ns-" + std::to_string(i));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{}", "namespaces is required"},
      {R"({"namespaces":null})", "must be an array"},
      {R"({"namespaces":"ml"})", "must be an array"},
      {R"({"namespaces":["ML"]})", "not a namespace name"},
      {R"({"namespaces":["-ml"]})", "not a namespace name"},
      {R"({"namespaces":["ml-"]})", "not a namespace name"},
      {R"({"namespaces":["m_l"]})", "not a namespace name"},
      {R"({"namespaces":["m.l"]})", "not a namespace name"},
      {R"({"namespaces":[""]})", "not a namespace name"},
      {R"({"namespaces":[")" + std::string(64, 'a') + "\"]}", "not a namespace name"},
      {R"({"namespaces":["ml\u0000x"]})", "not a namespace name"},
      {R"({"namespaces":[7]})", "namespaces[0] must be a string"},
      {R"({"namespaces":["*","ml"]})", "must be the only entry"},
      {R"({"namespaces":["ml","dev","ml"]})", "names \"ml\" twice"},
      {ToJson(json::object{{"namespaces", too_many}}), "the limit is 256"},
      {R"({"namespaces":["ml"],"all":true})", "unknown field \"all\""},
  };
  for (const auto& [body, says] : cases) {
    net::Response reply = SetScope(body);
    EXPECT_EQ(reply.status, 400) << body.substr(0, 60) << ": " << reply.body;
    EXPECT_NE(ErrorMessage(reply).find(says), std::string::npos)
        << body.substr(0, 60) << ": " << ErrorMessage(reply);
  }
  json::array most;
  for (int i = 0; i < 256; ++i) most.emplace_back("ns-" + std::to_string(i));
  EXPECT_EQ(SetScope(ToJson(json::object{{"namespaces", most}})).status, 200);
  EXPECT_TRUE(IsDnsLabel(std::string(63, 'a')));
  EXPECT_TRUE(IsDnsLabel("0"));
}

TEST_F(KubectlApiTest, TheClusterPlanFollowsTheNamespaceScope) {
  // Before namespaces are chosen: the cluster-scoped reads only.
  json::object plan = UploadPlan();
  EXPECT_EQ(plan.at("interval_seconds").as_int64(), 30);
  EXPECT_EQ(PlanNames(plan), (std::vector<std::string>{"nodes", "namespaces", "top_nodes"}));
  EXPECT_EQ(ToJson(plan.at("failing_pod_logs")), R"({"tail_lines":50,"max_pods":5})");
  EXPECT_EQ(ToJson(plan.at("commands").as_array()[0].at("argv")),
            R"(["kubectl","get","nodes","-o","wide"])");

  ChooseNamespaces(R"(["*"])");
  plan = UploadPlan();
  EXPECT_EQ(PlanNames(plan),
            (std::vector<std::string>{"nodes", "namespaces", "top_nodes", "pods", "warning_events",
                                      "deployments", "statefulsets", "top_pods",
                                      "pod_resources"}));
  const json::array& commands = plan.at("commands").as_array();
  EXPECT_EQ(ToJson(commands[3].at("argv")), R"(["kubectl","get","pods","-A","-o","wide"])");
  EXPECT_EQ(ToJson(commands[4].at("argv")),
            R"(["kubectl","get","events","-A","--field-selector","type=Warning"])");
  // Of the pods' specs, only the containers' requests and limits (pod right-sizing).
  const std::string resources = ToJson(commands[8].at("argv"));
  EXPECT_TRUE(resources.starts_with(R"(["kubectl","get","pods","-A","-o","jsonpath=)")) << resources;
  EXPECT_NE(resources.find(".resources.requests.cpu"), std::string::npos);
  EXPECT_NE(resources.find(".resources.limits.memory"), std::string::npos);
  EXPECT_EQ(resources.find("env"), std::string::npos);
  EXPECT_EQ(resources.find(".spec}"), std::string::npos);

  ChooseNamespaces(R"(["ml","dev"])");
  plan = UploadPlan();
  EXPECT_EQ(PlanNames(plan),
            (std::vector<std::string>{"nodes", "namespaces", "top_nodes", "pods/dev", "pods/ml",
                                      "warning_events/dev", "warning_events/ml", "deployments/dev",
                                      "deployments/ml", "statefulsets/dev", "statefulsets/ml",
                                      "top_pods/dev", "top_pods/ml", "pod_resources/dev",
                                      "pod_resources/ml"}));
  EXPECT_EQ(ToJson(plan.at("commands").as_array()[4].at("argv")),
            R"(["kubectl","get","pods","-n","ml","-o","wide"])");

  // A long list is cut so that a snapshot holds every result and the failing pods' logs.
  json::array many;
  for (int i = 0; i < 100; ++i) many.emplace_back("ns-" + std::to_string(1000 + i));
  ChooseNamespaces(ToJson(many));
  plan = UploadPlan();
  EXPECT_EQ(plan.at("commands").as_array().size(), kMaxPlanCommands);
  EXPECT_EQ(PlanNames(plan)[3], "pods/ns-1000");
  EXPECT_EQ(PlanNames(plan).back(), "pods/ns-1055");

  // Other streams' replies carry no cluster plan.
  net::Response node = Upload({}, 1, "node/gpu-node-0001");
  ASSERT_EQ(node.status, 200);
  EXPECT_NE(ToJson(Body(node).at("plan")).find("collectors"), std::string::npos);
}

TEST_F(KubectlApiTest, EveryPlanEntryPassesTheGuardAndItsScope) {
  for (const std::string& scope :
       {std::string("null"), std::string(R"(["*"])"), std::string(R"(["ml","kube-system"])")}) {
    if (scope != "null") ChooseNamespaces(scope);
    NamespaceScope chosen;
    if (scope != "null") {
      auto list = ParseNamespaceList(ParseJson(scope).value());
      ASSERT_TRUE(list.ok());
      chosen = *list;
    }
    json::object plan = UploadPlan();
    for (const json::value& entry : plan.at("commands").as_array()) {
      std::vector<std::string> argv;
      for (const json::value& arg : entry.at("argv").as_array()) {
        argv.emplace_back(arg.as_string());
      }
      auto command = kubectl::CheckKubectlArgv(argv);
      ASSERT_TRUE(command.ok()) << ToJson(entry) << ": " << command.status().ToString();
      if (chosen) {
        EXPECT_TRUE(kubectl::CheckNamespaceScope(*command, chosen).ok()) << ToJson(entry);
      }
    }
  }
}

TEST_F(KubectlApiTest, TheLatestClusterSnapshotIsKeptAndServed) {
  net::Response none = AsAdmin("GET", Path("/cluster"));
  EXPECT_EQ(none.status, 404);
  EXPECT_EQ(ErrorCode(none), "no_snapshot");

  json::array nodes_argv{"kubectl", "get", "nodes", "-o", "wide"};
  json::object first = SnapshotJson(
      "2026-11-30T03:20:00Z",
      json::array{SnapshotResult("nodes", nodes_argv, "gpu-node-0001   Ready\n"),
                  json::object{{"name", "top_pods"},
                               {"argv", json::array{"kubectl", "top", "pods", "-A"}},
                               {"error", {{"code", "refused"}, {"message", "not allowed"}}},
                               {"duration_ms", 0}}});
  clock_.Advance(std::chrono::milliseconds(250));
  WallTime received_at = clock_.Now();
  ASSERT_EQ(Upload({first}).status, 200);
  net::Response shown = AsAdmin("GET", Path("/cluster"));
  ASSERT_EQ(shown.status, 200) << shown.body;
  json::object body = Body(shown);
  EXPECT_EQ(Text(body, "collected_at"), "2026-11-30T03:20:00.000Z");
  EXPECT_EQ(Text(body, "received_at"), FormatRfc3339Millis(received_at));
  EXPECT_EQ(Text(body, "stream"), kClusterStream);
  ASSERT_EQ(body.at("results").as_array().size(), 2u);
  EXPECT_EQ(Text(body.at("results").as_array()[0].as_object(), "stdout"),
            "gpu-node-0001   Ready\n");
  EXPECT_EQ(Metric("uplink_console_cluster_snapshots_stored_total", {}), 1);

  // Not listed as a record, but counted as one stored.
  net::Response records = AsAdmin("GET", Path("/records?stream=" + kClusterStream.substr(0, 7) +
                                              "%2F" + kClusterStream.substr(8)));
  ASSERT_EQ(records.status, 200) << records.body;
  EXPECT_TRUE(Body(records).at("records").as_array().empty());
  json::object connection = ShowConnection(admin_key_, id_);
  EXPECT_EQ(connection.at("streams").as_array()[0].at("records_stored").as_int64(), 1);

  // A later snapshot replaces it; one collected earlier (sent late) does not.
  json::object second = SnapshotJson("2026-11-30T03:20:30Z",
                                     json::array{SnapshotResult("nodes", nodes_argv, "two\n")});
  json::object older = SnapshotJson("2026-11-30T03:19:30Z",
                                    json::array{SnapshotResult("nodes", nodes_argv, "old\n")});
  ASSERT_EQ(Upload({second}, 2).status, 200);
  ASSERT_EQ(Upload({older}, 3).status, 200);
  body = Body(AsAdmin("GET", Path("/cluster")));
  EXPECT_EQ(Text(body, "collected_at"), "2026-11-30T03:20:30.000Z");
  EXPECT_EQ(Text(body.at("results").as_array()[0].as_object(), "stdout"), "two\n");
  EXPECT_EQ(testing::RawCount(DatabasePath(dir_.path()), "SELECT COUNT(*) FROM cluster_snapshots"),
            1);
  // Within one upload, the newest wins whatever the order.
  json::object third = SnapshotJson("2026-11-30T03:21:00Z",
                                    json::array{SnapshotResult("nodes", nodes_argv, "three\n")});
  ASSERT_EQ(Upload({third, older}, 4).status, 200);
  EXPECT_EQ(Text(Body(AsAdmin("GET", Path("/cluster"))).at("results").as_array()[0].as_object(),
                 "stdout"),
            "three\n");

  TestUser member = AddUser("member@example.com");
  EXPECT_EQ(Send("GET", Path("/cluster"), member.api_key).status, 404);
}

TEST_F(KubectlApiTest, HostileSnapshotsAreRefusedNamingTheRecord) {
  json::array argv{"kubectl", "get", "nodes"};
  auto with = [&](json::object result) {
    return SnapshotJson("2026-11-30T03:20:00Z", json::array{std::move(result)});
  };
  json::array too_many;
  for (size_t i = 0; i <= protocol::kMaxSnapshotResults; ++i) {
    too_many.push_back(SnapshotResult("n", argv));
  }
  json::object no_time{{"kind", "cluster_snapshot"}, {"results", json::array{}}};
  json::object no_results{{"kind", "cluster_snapshot"}, {"collected_at", "2026-11-30T03:20:00Z"}};
  json::object both = SnapshotResult("nodes", argv);
  both["error"] = json::object{{"code", "failed"}, {"message", "m"}};
  json::object neither = SnapshotResult("nodes", argv);
  neither.erase("exit_code");
  json::object long_output =
      SnapshotResult("nodes", argv, std::string(protocol::kMaxSnapshotOutputBytes + 1, 'x'));
  json::object control_name = SnapshotResult("no\x1b[2Jdes", argv);
  json::object empty_name = SnapshotResult("", argv);
  json::object not_kubectl = SnapshotResult("nodes", json::array{"sh", "-c", "id"});
  json::object empty_argv = SnapshotResult("nodes", json::array{});
  json::object nul_arg = SnapshotResult("nodes", json::array{"kubectl", std::string("ge\0t", 4)});
  json::object bad_truncated = SnapshotResult("nodes", argv);
  bad_truncated["truncated"] = "yes";
  json::object bad_duration = SnapshotResult("nodes", argv);
  bad_duration["duration_ms"] = -1;
  json::object bad_error = SnapshotResult("nodes", argv);
  bad_error.erase("exit_code");
  bad_error["error"] = json::object{{"code", "nope"}, {"message", "m"}};
  const std::vector<std::pair<json::object, std::string>> cases = {
      {SnapshotJson("yesterday", {}), "collected_at must be an RFC 3339 time"},
      {no_time, "collected_at is required"},
      {no_results, "results is required"},
      {SnapshotJson("2026-11-30T03:20:00Z", json::array{}), ""},  // fine: nothing collected
      {json::object{{"kind", "cluster_snapshot"},
                    {"collected_at", "2026-11-30T03:20:00Z"},
                    {"results", "none"}},
       "results must be an array"},
      {SnapshotJson("2026-11-30T03:20:00Z", too_many), "the limit is 64"},
      {SnapshotJson("2026-11-30T03:20:00Z", json::array{7}), "results[0] must be an object"},
      {with(both), "exclude each other"},
      {with(neither), "exit_code (or records[0].payload.results[0].error) is required"},
      {with(long_output), "the limit is 262144"},
      {with(control_name), "name must be 1-253 printable ASCII"},
      {with(empty_name), "name must be 1-253 printable ASCII"},
      {with(not_kubectl), "argv[0] must be \"kubectl\""},
      {with(empty_argv), "argv must hold 1 to 256"},
      {with(nul_arg), "must not contain NUL"},
      {with(bad_truncated), "truncated must be true or false"},
      {with(bad_duration), "duration_ms must be between"},
      {with(bad_error), "error.code must be"},
  };
  std::int64_t sequence = 1;
  for (const auto& [payload, says] : cases) {
    net::Response reply = Upload({payload}, sequence);
    if (says.empty()) {
      EXPECT_EQ(reply.status, 200) << reply.body;
      ++sequence;
      continue;
    }
    EXPECT_EQ(reply.status, 422) << says << ": " << reply.body.substr(0, 300);
    EXPECT_EQ(ErrorCode(reply), "invalid_record");
    EXPECT_NE(ErrorMessage(reply).find("records[0].payload."), std::string::npos)
        << ErrorMessage(reply);
    EXPECT_NE(ErrorMessage(reply).find(says), std::string::npos) << ErrorMessage(reply);
  }
  // A snapshot belongs on a cluster role's stream.
  net::Response misplaced = Upload({SnapshotJson("2026-11-30T03:20:00Z", {})}, 1, "node/gpu-1");
  EXPECT_EQ(misplaced.status, 422);
  EXPECT_NE(ErrorMessage(misplaced).find("belongs on a cluster role's stream"), std::string::npos);
  // Unknown fields are left for newer agents.
  json::object newer = SnapshotResult("nodes", argv);
  newer["cpu_ms"] = 12;
  json::object payload = with(newer);
  payload["agent_build"] = "abc";
  EXPECT_EQ(Upload({payload}, sequence).status, 200);
}

TEST(CommandResultParsing, AnErrorResultMayCarryOutputAndAResultNeedsBothStreams) {
  auto parsed = protocol::DecodeCommandResult(ParseJson(R"({"error":{"code":"output_too_large",)"
                                                        R"("message":"stdout over 4 MiB"},)"
                                                        R"("stderr":"partial","duration_ms":12})")
                                                  .value());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->error_code, "output_too_large");
  EXPECT_EQ(parsed->stderr_text, "partial");
  auto missing = protocol::DecodeCommandResult(
      ParseJson(R"({"exit_code":0,"stdout":"","duration_ms":1})").value());
  EXPECT_EQ(missing.status().message(), "stderr is required");
}

TEST_F(KubectlApiTest, TheNamespaceScopeIsChosenWithTheConnection) {
  json::object created = CreateConnection(admin_key_, "scoped", R"(,"namespaces":["ml","dev"])");
  EXPECT_EQ(ToJson(created.at("namespaces")), R"(["dev","ml"])");
  const std::string id = Text(created, "id");
  net::Response scope = AsAdmin("GET", "/api/v1/connections/" + id + "/namespaces");
  EXPECT_EQ(ToJson(Body(scope).at("namespaces")), R"(["dev","ml"])");
  AuditEvent event = LastAudit("connection.create");
  EXPECT_EQ(ToJson(ParseJson(event.detail).value().at("namespaces")), R"(["dev","ml"])");
  // Left out, or null: chosen later; [] is cluster-scoped reads only.
  EXPECT_TRUE(CreateConnection(admin_key_, "later").at("namespaces").is_null());
  EXPECT_TRUE(CreateConnection(admin_key_, "later2", R"(,"namespaces":null)")
                  .at("namespaces")
                  .is_null());
  EXPECT_EQ(ToJson(CreateConnection(admin_key_, "none", R"(,"namespaces":[])").at("namespaces")),
            "[]");
  // A bad list creates nothing.
  for (const std::string& bad :
       {std::string(R"(["ML"])"), std::string(R"(["*","ml"])"), std::string(R"("ml")"),
        std::string(R"([7])"), std::string(R"(["ml","ml"])")}) {
    net::Response refused =
        AsAdmin("POST", "/api/v1/connections",
                R"({"agent_name":"a","cluster_name":"bad","namespaces":)" + bad + "}");
    EXPECT_EQ(refused.status, 400) << bad << ": " << refused.body;
  }
  json::object listed = Body(AsAdmin("GET", "/api/v1/connections"));
  for (const json::value& c : listed.at("connections").as_array()) {
    EXPECT_NE(c.at("cluster_name"), "bad");
  }
}

// The snapshots' top pods feed an hour of usage; the latest snapshot's pod_resources give the
// requests and limits; GET right-sizing puts them side by side.
TEST_F(KubectlApiTest, PodRightSizingReadsTheLatestSpecsAndAnHourOfUsage) {
  ChooseNamespaces(R"(["ml"])");
  EXPECT_EQ(ErrorCode(AsAdmin("GET", Path("/right-sizing"))), "no_snapshot");
  auto snapshot = [](WallTime at, const std::string& cpu, const std::string& resources) {
    return SnapshotJson(
        FormatRfc3339(at),
        json::array{SnapshotResult("top_pods/ml", json::array{"kubectl", "top", "pods", "-n", "ml"},
                                   "NAME       CPU(cores)   MEMORY(bytes)\n"
                                   "trainer-0  " + cpu + "        900Mi\n"
                                   "idle-0     5m           40Mi\n"),
                    SnapshotResult("pod_resources/ml",
                                   json::array{"kubectl", "get", "pods", "-n", "ml", "-o", "x"},
                                   resources)});
  };
  const std::string specs =
      "ml\ttrainer-0\tRunning\ttrainer|1|1Gi|2|1Gi\n"
      "ml\tidle-0\tRunning\tweb|2|4Gi||\n"
      "ml\tnew-0\tPending\tweb|1|1Gi||\n";
  std::vector<json::object> payloads;
  // Two hours ago (forgotten), then 12 snapshots 30 s apart ending now.
  payloads.push_back(snapshot(clock_.Now() - std::chrono::hours(2), "9000m", specs));
  for (int i = 11; i >= 0; --i) {
    payloads.push_back(snapshot(clock_.Now() - seconds(30 * i), i == 3 ? "1500m" : "800m", specs));
  }
  ASSERT_EQ(Upload(payloads).status, 200);
  // The same records again (a lost reply) count once.
  ASSERT_EQ(Upload(payloads).status, 200);

  net::Response got = AsAdmin("GET", Path("/right-sizing"));
  ASSERT_EQ(got.status, 200) << got.body;
  json::object reply = Body(got);
  EXPECT_EQ(reply.at("window_seconds").as_int64(), 3600);
  const json::array& pods = reply.at("pods").as_array();
  ASSERT_EQ(pods.size(), 3u) << got.body;
  const json::object& trainer = pods[0].as_object();
  EXPECT_EQ(trainer.at("pod"), "trainer-0");
  EXPECT_EQ(trainer.at("samples").as_int64(), 12);
  EXPECT_EQ(trainer.at("cpu").at("peak_millicores").as_int64(), 1500);
  EXPECT_EQ(trainer.at("cpu").at("average_millicores").as_int64(), 858);
  EXPECT_EQ(trainer.at("verdict"), "under_provisioned") << "peak 1500m over a 1-core request";
  EXPECT_EQ(pods[1].at("pod"), "idle-0");
  EXPECT_EQ(pods[1].at("verdict"), "over_provisioned");
  EXPECT_EQ(pods[2].at("pod"), "new-0");
  EXPECT_EQ(pods[2].at("verdict"), "unknown");
  // A member without the connection sees nothing of it.
  TestUser member = AddUser("member@example.com");
  EXPECT_EQ(Send("GET", Path("/right-sizing"), member.api_key).status, 404);
}

}  // namespace
}  // namespace uplink::console
