// The cluster role's command poller against a loopback console that answers polls and takes
// results as the test scripts it, and a stand-in kubectl that records each run: what a poll
// asks for, that each command runs once and its result reaches the console (read back with
// the console's own decoders), how refusals and failed posts are handled, and that stopping
// cuts a held poll short.
#include "agent/cluster/command_poller.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/cluster/kubectl_runner.h"
#include "agent/console_client.h"
#include "common/gzip.h"
#include "common/json.h"
#include "common/metrics.h"
#include "common/time.h"
#include "protocol/agent_api.h"
#include "protocol/commands.h"
#include "protocol/errors.h"
#include "support/fake_http.h"
#include "support/process.h"

namespace uplink::agent::cluster {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kFirstId[] = "cmd_00000000000000a1";
constexpr char kSecondId[] = "cmd_00000000000000a2";

protocol::PolledCommand Command(const std::string& id, std::vector<std::string> argv) {
  return protocol::PolledCommand{.id = id, .argv = std::move(argv)};
}

net::Response PollReply(std::vector<protocol::PolledCommand> commands) {
  return net::Response::Json(
      200, ToJson(protocol::EncodePollReply(protocol::PollReply{.commands = std::move(commands)})));
}

net::Response ErrorReply(int status, const std::string& code) {
  return net::Response::Json(
      status, ToJson(protocol::EncodeErrorBody({.code = code, .message = "scripted refusal"})));
}

class CommandPollerTest : public ::testing::Test {
 protected:
  CommandPollerTest() {
    uplink::testing::WriteFileOrDie(token_file_, "agt_commands\n");
    uplink::testing::WriteFileOrDie(kubeconfig_, "apiVersion: v1\nkind: Config\n");
    // The stand-in kubectl appends its arguments (after --kubeconfig) to a log, one run a
    // line, and prints what `get` was asked for.
    uplink::testing::WriteFileOrDie(
        kubectl_,
        "#!/bin/sh\n"
        "shift\n"
        "echo \"$*\" >> " + dir_.File("runs") + "\n"
        "echo \"listed $3\"\n",
        0755);
    DeclareCommandMetrics(registry_);
    console_.SetHandler([this](const net::Request& request) { return Answer(request); });
  }

  ~CommandPollerTest() override { poller_.reset(); }

  // For tests that read the delay PollOnce returns and never wait it: full jitter draws from
  // [0, base], which at 10 ms truncates to 0 one time in ten; over an hour, never in practice.
  void UseLongBackoff() {
    backoff_ = BackoffOptions{.base = std::chrono::hours(1), .cap = std::chrono::hours(1)};
  }

  // Starts the poller against the console; `options` as the test needs.
  CommandPoller& Start(CommandPollerOptions options = {}) {
    options.instance = "cluster-0";
    options.wait = seconds(0);
    options.backoff = backoff_;
    poll_client_ = Client(poll_timeout_);
    result_client_ = Client(std::chrono::seconds(10));
    auto runner = KubectlRunner::Create(KubectlRunnerOptions{.kubectl_path = kubectl_,
                                                             .kubeconfig_path = kubeconfig_,
                                                             .cache_dir = dir_.File("cache")});
    EXPECT_TRUE(runner.ok()) << runner.status().ToString();
    runner_ = std::move(runner).value();
    poller_ = std::make_unique<CommandPoller>(options, *poll_client_, *result_client_, *runner_,
                                              clock_, registry_);
    return *poller_;
  }

  std::unique_ptr<ConsoleClient> Client(std::chrono::milliseconds request_timeout) {
    auto client = ConsoleClient::Create(ConsoleClientOptions{.base_url = console_.url(),
                                                             .token_file = token_file_,
                                                             .role = "cluster",
                                                             .request_timeout = request_timeout});
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return std::move(client).value();
  }

  // The scripted console: polls get the next scripted reply (then empty ones), results are
  // decoded as the console decodes them and answered with the next scripted status (then 200).
  net::Response Answer(const net::Request& request) {
    std::lock_guard lock(mutex_);
    if (request.Path() == protocol::kCommandPollPath) {
      auto body = ParseJson(request.body);
      EXPECT_TRUE(body.ok() && body->is_object()) << request.body;
      if (body.ok() && body->is_object()) {
        auto poll = protocol::DecodeCommandPoll(body->as_object());
        EXPECT_TRUE(poll.ok()) << poll.status().ToString();
        if (poll.ok()) polls_.push_back(*poll);
      }
      if (poll_replies_.empty()) return PollReply({});
      net::Response reply = poll_replies_.front();
      poll_replies_.erase(poll_replies_.begin());
      return reply;
    }
    auto text = GzipDecompress(request.body, protocol::kMaxCommandResultBytes);
    EXPECT_TRUE(text.ok()) << "a result is always compressed";
    auto body = ParseJson(text.value_or(""));
    EXPECT_TRUE(body.ok()) << text.value_or("");
    auto result = protocol::DecodeCommandResult(body.value_or(nullptr));
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    result_posts_.push_back(request.Path());
    if (!result_statuses_.empty()) {
      const int status = result_statuses_.front();
      result_statuses_.erase(result_statuses_.begin());
      if (status != 200) return ErrorReply(status, "scripted");
    }
    if (result.ok()) results_.emplace_back(request.Path(), *result);
    return net::Response::Json(200, R"({"accepted":true})");
  }

  void ScriptPolls(std::vector<net::Response> replies) {
    std::lock_guard lock(mutex_);
    poll_replies_ = std::move(replies);
  }
  void ScriptResultStatuses(std::vector<int> statuses) {
    std::lock_guard lock(mutex_);
    result_statuses_ = std::move(statuses);
  }
  std::vector<protocol::CommandPoll> Polls() {
    std::lock_guard lock(mutex_);
    return polls_;
  }
  std::vector<std::pair<std::string, protocol::CommandResult>> Results() {
    std::lock_guard lock(mutex_);
    return results_;
  }
  std::vector<std::string> ResultPosts() {
    std::lock_guard lock(mutex_);
    return result_posts_;
  }
  std::string Runs() { return uplink::testing::ReadFileOrEmpty(dir_.File("runs")); }

  uplink::testing::TempDir dir_;
  std::string token_file_ = dir_.File("token");
  std::string kubeconfig_ = dir_.File("kubeconfig");
  std::string kubectl_ = dir_.File("kubectl");
  // How long the poll client waits for a reply: a held poll ends no sooner unless cut short.
  std::chrono::milliseconds poll_timeout_ = std::chrono::seconds(10);
  BackoffOptions backoff_{.base = milliseconds(10), .cap = milliseconds(20)};
  FakeClock clock_;
  metrics::Registry registry_;
  uplink::testing::FakeHttp console_;

  std::mutex mutex_;
  std::vector<net::Response> poll_replies_;
  std::vector<int> result_statuses_;
  std::vector<protocol::CommandPoll> polls_;
  std::vector<std::pair<std::string, protocol::CommandResult>> results_;
  std::vector<std::string> result_posts_;

  std::unique_ptr<ConsoleClient> poll_client_;
  std::unique_ptr<ConsoleClient> result_client_;
  std::unique_ptr<KubectlRunner> runner_;
  std::unique_ptr<CommandPoller> poller_;
};

TEST_F(CommandPollerTest, APolledCommandRunsAndItsResultReachesTheConsole) {
  ScriptPolls({PollReply({Command(kFirstId, {"kubectl", "get", "pods", "-A"})})});
  CommandPoller& poller = Start();
  EXPECT_EQ(poller.PollOnce(), milliseconds(0));
  poller.WaitForCommands();

  EXPECT_EQ(Runs(), "get pods -A\n");
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].first, protocol::CommandResultPath(kFirstId));
  EXPECT_EQ(results[0].second.error_code, "");
  EXPECT_EQ(results[0].second.exit_code, 0);
  EXPECT_EQ(results[0].second.stdout_text, "listed -A\n");
  EXPECT_EQ(registry_.Get("uplink_agent_kubectl_commands_total", {{"outcome", "ok"}}), 1);
  EXPECT_EQ(registry_.Get("uplink_agent_command_polls_total", {{"result", "commands"}}), 1);
  auto polls = Polls();
  ASSERT_EQ(polls.size(), 1u);
  EXPECT_EQ(polls[0].agent_instance, "cluster-0");
  EXPECT_EQ(polls[0].wait_seconds, 0);
}

TEST_F(CommandPollerTest, ACommandHandedOutTwiceRunsOnce) {
  ScriptPolls({PollReply({Command(kFirstId, {"kubectl", "get", "nodes"})}),
               PollReply({Command(kFirstId, {"kubectl", "get", "nodes"}),
                          Command(kSecondId, {"kubectl", "get", "pods"})})});
  CommandPoller& poller = Start();
  poller.PollOnce();
  poller.WaitForCommands();
  poller.PollOnce();
  poller.WaitForCommands();

  EXPECT_EQ(Runs(), "get nodes\nget pods\n");
  EXPECT_EQ(Results().size(), 2u);
}

TEST_F(CommandPollerTest, APollAsksForNoMoreCommandsThanCanStart) {
  CommandPoller& poller = Start(CommandPollerOptions{.max_concurrent = 3});
  poller.PollOnce();
  auto polls = Polls();
  ASSERT_EQ(polls.size(), 1u);
  EXPECT_EQ(polls[0].max_commands, 3);
}

TEST_F(CommandPollerTest, AnArgvTheGuardRefusesNeverRunsAndTheRefusalIsReported) {
  ScriptPolls({PollReply({Command(kFirstId, {"kubectl", "delete", "pod", "web-0"})})});
  CommandPoller& poller = Start();
  poller.PollOnce();
  poller.WaitForCommands();

  EXPECT_EQ(Runs(), "");
  auto results = Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].second.error_code, protocol::kCommandRefused);
  EXPECT_EQ(registry_.Get("uplink_agent_kubectl_commands_total", {{"outcome", "refused"}}), 1);
}

TEST_F(CommandPollerTest, RefusedPollsMakeTheRoleUnreadyUntilAPollSucceeds) {
  UseLongBackoff();
  ScriptPolls({ErrorReply(401, "revoked")});
  CommandPoller& poller = Start();
  EXPECT_TRUE(poller.CheckReadiness().ready);

  EXPECT_GT(poller.PollOnce(), milliseconds(0)) << "a failed poll backs off";
  Readiness refused = poller.CheckReadiness();
  EXPECT_FALSE(refused.ready);
  EXPECT_NE(refused.reason.find("revoked"), std::string::npos) << refused.reason;
  EXPECT_EQ(registry_.Get("uplink_agent_command_polls_total", {{"result", "refused"}}), 1);

  EXPECT_EQ(poller.PollOnce(), milliseconds(0));
  EXPECT_TRUE(poller.CheckReadiness().ready);
}

TEST_F(CommandPollerTest, AnUnavailableConsoleIsNotARefusal) {
  UseLongBackoff();
  ScriptPolls({ErrorReply(503, "unavailable")});
  CommandPoller& poller = Start();
  EXPECT_GT(poller.PollOnce(), milliseconds(0));
  EXPECT_TRUE(poller.CheckReadiness().ready);
  EXPECT_EQ(registry_.Get("uplink_agent_command_polls_total", {{"result", "failed"}}), 1);
}

TEST_F(CommandPollerTest, AResultTheConsoleCouldNotTakeIsPostedAgain) {
  ScriptPolls({PollReply({Command(kFirstId, {"kubectl", "get", "nodes"})})});
  ScriptResultStatuses({503, 503});
  CommandPoller& poller = Start();
  poller.PollOnce();
  poller.WaitForCommands();

  EXPECT_EQ(ResultPosts().size(), 3u);
  EXPECT_EQ(Results().size(), 1u);
  EXPECT_EQ(registry_.Get("uplink_agent_command_results_dropped_total"), 0);
}

TEST_F(CommandPollerTest, AResultTheConsoleRefusesIsDroppedNotRetried) {
  ScriptPolls({PollReply({Command(kFirstId, {"kubectl", "get", "nodes"})})});
  ScriptResultStatuses({404});
  CommandPoller& poller = Start();
  poller.PollOnce();
  poller.WaitForCommands();

  EXPECT_EQ(ResultPosts().size(), 1u);
  EXPECT_TRUE(Results().empty());
  EXPECT_EQ(registry_.Get("uplink_agent_command_results_dropped_total"), 1);
}

TEST_F(CommandPollerTest, StoppingCutsAHeldPollShort) {
  console_.SetSilent(true);  // the poll is held and never answered
  poll_timeout_ = std::chrono::hours(1);  // so that only cutting it short ends it
  CommandPoller& poller = Start();
  StopSignal stop;
  std::thread run([&] { poller.Run(stop); });
  ASSERT_TRUE(uplink::testing::WaitFor([&] { return console_.request_count() > 0; }))
      << "the poller never polled";
  stop.Stop();
  run.join();  // returns only because the held poll was cut short
  EXPECT_EQ(console_.request_count(), 1u);
}

}  // namespace
}  // namespace uplink::agent::cluster
