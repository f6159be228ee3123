// The kubectl command broker on a FakeClock: pickup wakes a held poll at once, a command is
// handed out once, give-up at 60 s, late and repeated results, bounds, shutdown.
#include "console/commands/command_broker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace uplink::console {
namespace {

using std::chrono::seconds;

const std::string kConnection = "0123456789abcdef";
const std::string kOther = "fedcba9876543210";

std::vector<std::string> Argv(const std::string& name = "pods") {
  return {"kubectl", "get", name, "-n", "ml"};
}

// What a poll was answered with, if it was. The state is shared with the callback, which
// may outlive the slot (the broker answers what is left when it is destroyed).
class PollSlot {
 public:
  CommandBroker::PollDone Callback() {
    return
        [state = state_](std::vector<PendingCommand> taken) { state->commands = std::move(taken); };
  }
  const std::optional<std::vector<PendingCommand>>& commands() const { return state_->commands; }

 private:
  struct State {
    std::optional<std::vector<PendingCommand>> commands;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// How a command ended, if it did, and how often its owner was told.
class EndSlot {
 public:
  CommandBroker::Done Callback() {
    return [state = state_](CommandEnd end) {
      state->end = std::move(end);
      ++state->calls;
    };
  }
  const std::optional<CommandEnd>& ended() const { return state_->end; }
  int calls() const { return state_->calls; }

 private:
  struct State {
    std::optional<CommandEnd> end;
    int calls = 0;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

CommandResult Output(const std::string& text, int exit_code = 0) {
  CommandResult result;
  result.exit_code = exit_code;
  result.stdout_text = text;
  result.duration_ms = 12;
  return result;
}

class CommandBrokerTest : public ::testing::Test {
 protected:
  std::string Submit(EndSlot& slot, const std::string& connection = kConnection,
                     const std::string& name = "pods") {
    auto id = broker_.Submit(connection, Argv(name), slot.Callback());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.value_or("");
  }

  FakeClock clock_;
  CommandBroker broker_{clock_};
};

TEST_F(CommandBrokerTest, AHeldPollIsAnsweredTheMomentACommandIsQueued) {
  PollSlot poll;
  broker_.Poll(kConnection, "", 4, seconds(50), poll.Callback());
  EXPECT_FALSE(poll.commands());
  EXPECT_EQ(broker_.stats().waiting_polls, 1u);

  EndSlot end;
  std::string id = Submit(end);
  // Answered inside Submit, without the clock moving: no timer is involved.
  ASSERT_TRUE(poll.commands());
  ASSERT_EQ(poll.commands()->size(), 1u);
  EXPECT_EQ((*poll.commands())[0].id, id);
  EXPECT_EQ((*poll.commands())[0].argv, Argv());
  EXPECT_TRUE(id.starts_with("cmd_"));
  EXPECT_EQ(id.size(), 20u);
  EXPECT_EQ(broker_.stats().waiting_polls, 0u);
  EXPECT_EQ(broker_.stats().waiting_commands, 1u);
  EXPECT_FALSE(end.ended());
  EXPECT_EQ(broker_.pickup_latency().count(), 1u);
  EXPECT_EQ(broker_.pickup_latency().CumulativeCount(0), 1u);  // within the first bucket
}

TEST_F(CommandBrokerTest, QueuedCommandsAreHandedOutAtOnceUpToTheAgentsFreeSlots) {
  EndSlot a, b, c;
  std::string first = Submit(a, kConnection, "pods");
  std::string second = Submit(b, kConnection, "deployments");
  std::string third = Submit(c, kConnection, "events");
  clock_.Advance(std::chrono::milliseconds(40));

  PollSlot poll;
  broker_.Poll(kConnection, "", 2, seconds(50), poll.Callback());
  ASSERT_TRUE(poll.commands());
  ASSERT_EQ(poll.commands()->size(), 2u);
  EXPECT_EQ((*poll.commands())[0].id, first);  // oldest first
  EXPECT_EQ((*poll.commands())[1].id, second);

  PollSlot next;
  broker_.Poll(kConnection, "", 4, seconds(50), next.Callback());
  ASSERT_TRUE(next.commands());
  ASSERT_EQ(next.commands()->size(), 1u);
  EXPECT_EQ((*next.commands())[0].id, third);
  // 40 ms each: counted in the 50 ms bucket, not in the 25 ms one.
  const auto& latency = broker_.pickup_latency();
  EXPECT_EQ(latency.count(), 3u);
  EXPECT_EQ(latency.CumulativeCount(4), 0u);  // le 0.025
  EXPECT_EQ(latency.CumulativeCount(5), 3u);  // le 0.05
}

TEST_F(CommandBrokerTest, OneCommandGoesToOneOfTwoHeldPolls) {
  PollSlot first, second;
  broker_.Poll(kConnection, "", 4, seconds(50), first.Callback());
  broker_.Poll(kConnection, "", 4, seconds(50), second.Callback());
  EndSlot a;
  std::string id = Submit(a);
  ASSERT_TRUE(second.commands());  // the newest poll: its agent is the likeliest alive
  EXPECT_EQ(second.commands()->size(), 1u);
  EXPECT_FALSE(first.commands());

  EndSlot b;
  std::string other = Submit(b);
  ASSERT_TRUE(first.commands());
  ASSERT_EQ(first.commands()->size(), 1u);
  EXPECT_EQ((*first.commands())[0].id, other);
  EXPECT_NE(id, other);
}

// An agent killed while its poll was held leaves that poll behind; when it comes back (the
// same pod name) its new poll replaces the old one, so no command goes to a dead connection.
TEST_F(CommandBrokerTest, ARestartedAgentsNewPollReplacesItsOldOne) {
  PollSlot before_restart, other_agent, after_restart;
  broker_.Poll(kConnection, "cluster-agent-0", 4, seconds(50), before_restart.Callback());
  broker_.Poll(kConnection, "cluster-agent-1", 4, seconds(50), other_agent.Callback());
  broker_.Poll(kConnection, "cluster-agent-0", 4, seconds(50), after_restart.Callback());
  ASSERT_TRUE(before_restart.commands());
  EXPECT_TRUE(before_restart.commands()->empty());  // answered empty at once
  EXPECT_FALSE(other_agent.commands());
  EXPECT_EQ(broker_.stats().waiting_polls, 2u);
  EndSlot end;
  Submit(end);
  ASSERT_TRUE(after_restart.commands());
  EXPECT_EQ(after_restart.commands()->size(), 1u);
  EXPECT_FALSE(other_agent.commands());
}

TEST_F(CommandBrokerTest, ConcurrentPollsNeverGetTheSameCommand) {
  constexpr int kCommands = 400;
  std::atomic<bool> done{false};
  std::mutex mutex;
  std::multiset<std::string> handed_out;
  auto poller = [&] {
    while (!done) {
      broker_.Poll(kConnection, "", 3, seconds(0), [&](std::vector<PendingCommand> taken) {
        std::lock_guard lock(mutex);
        for (const PendingCommand& command : taken) handed_out.insert(command.id);
      });
    }
  };
  std::thread a(poller), b(poller), c(poller);
  std::set<std::string> submitted;
  for (int i = 0; i < kCommands; ++i) {
    // Keep under the queue bound: wait until the pollers took what is queued.
    while (broker_.stats().waiting_commands >= 16) {
      std::vector<std::string> to_finish;
      {
        std::lock_guard lock(mutex);
        to_finish.assign(handed_out.begin(), handed_out.end());
      }
      for (const std::string& id : to_finish) {
        (void)broker_.Deliver(kConnection, id, Output("x"));
      }
      std::this_thread::yield();
    }
    auto id = broker_.Submit(kConnection, Argv(), [](CommandEnd) {});
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    submitted.insert(*id);
  }
  // Every command gets taken eventually; bounded by a generous hang guard.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(mutex);
      if (handed_out.size() >= submitted.size()) break;
    }
    std::this_thread::yield();
  }
  done = true;
  a.join();
  b.join();
  c.join();
  std::lock_guard lock(mutex);
  EXPECT_EQ(handed_out.size(), submitted.size());
  EXPECT_EQ(std::set<std::string>(handed_out.begin(), handed_out.end()), submitted);
}

TEST_F(CommandBrokerTest, ACommandNobodyTookIsGivenUpAfter60Seconds) {
  PollSlot earlier;
  broker_.Poll(kConnection, "", 4, seconds(0), earlier.Callback());  // the agent was seen once
  WallTime polled_at = clock_.Now();
  clock_.Advance(seconds(5));
  EndSlot end;
  std::string id = Submit(end);
  clock_.Advance(seconds(59));
  broker_.ExpireDue();
  EXPECT_FALSE(end.ended());
  clock_.Advance(seconds(1));
  broker_.ExpireDue();
  ASSERT_TRUE(end.ended());
  EXPECT_EQ(end.ended()->kind, CommandEnd::Kind::kNotPickedUp);
  EXPECT_EQ(end.ended()->id, id);
  EXPECT_FALSE(end.ended()->taken_at);
  ASSERT_TRUE(end.ended()->last_poll_at);
  EXPECT_EQ(*end.ended()->last_poll_at, polled_at);
  EXPECT_EQ(broker_.stats().waiting_commands, 0u);

  // A poll after the give-up does not get it.
  PollSlot later;
  broker_.Poll(kConnection, "", 4, seconds(0), later.Callback());
  ASSERT_TRUE(later.commands());
  EXPECT_TRUE(later.commands()->empty());
  broker_.ExpireDue();
  EXPECT_EQ(end.calls(), 1);
}

TEST_F(CommandBrokerTest, ACommandTakenWithoutAResultIsGivenUpAndItsLateResultDiscarded) {
  EndSlot end;
  std::string id = Submit(end);
  clock_.Advance(seconds(2));
  PollSlot poll;
  broker_.Poll(kConnection, "", 4, seconds(50), poll.Callback());
  WallTime taken_at = clock_.Now();
  ASSERT_TRUE(poll.commands());
  clock_.Advance(seconds(58));
  broker_.ExpireDue();
  ASSERT_TRUE(end.ended());
  EXPECT_EQ(end.ended()->kind, CommandEnd::Kind::kNoResult);
  ASSERT_TRUE(end.ended()->taken_at);
  EXPECT_EQ(*end.ended()->taken_at, taken_at);

  auto late = broker_.Deliver(kConnection, id, Output("too late"));
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(*late, CommandBroker::Delivery::kDiscarded);
  // Sent again after a lost reply: the same answer, and nobody is told twice.
  auto again = broker_.Deliver(kConnection, id, Output("too late"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, CommandBroker::Delivery::kDiscarded);
  EXPECT_EQ(end.calls(), 1);
}

TEST_F(CommandBrokerTest, AResultEndsTheCommandOnceAndARepeatIsAcknowledged) {
  EndSlot end;
  std::string id = Submit(end);
  PollSlot poll;
  broker_.Poll(kConnection, "", 4, seconds(50), poll.Callback());
  auto stored = broker_.Deliver(kConnection, id, Output("NAME  READY\n", 3));
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, CommandBroker::Delivery::kStored);
  ASSERT_TRUE(end.ended());
  EXPECT_EQ(end.ended()->kind, CommandEnd::Kind::kResult);
  ASSERT_TRUE(end.ended()->result);
  EXPECT_EQ(end.ended()->result->stdout_text, "NAME  READY\n");
  EXPECT_EQ(end.ended()->result->exit_code, 3);
  EXPECT_TRUE(end.ended()->taken_at);

  auto repeated = broker_.Deliver(kConnection, id, Output("other"));
  ASSERT_TRUE(repeated.ok());
  EXPECT_EQ(*repeated, CommandBroker::Delivery::kStored);
  EXPECT_EQ(end.calls(), 1);
  EXPECT_EQ(end.ended()->result->stdout_text, "NAME  READY\n");  // the first result stands
  clock_.Advance(seconds(120));
  broker_.ExpireDue();
  EXPECT_EQ(end.calls(), 1);
}

TEST_F(CommandBrokerTest, ResultsForUnknownUntakenOrOtherConnectionsCommandsAreNotFound) {
  EndSlot end;
  std::string id = Submit(end);
  // Queued but never handed out: no agent can have a result for it.
  EXPECT_EQ(broker_.Deliver(kConnection, id, Output("x")).status().code(), StatusCode::kNotFound);
  PollSlot poll;
  broker_.Poll(kConnection, "", 4, seconds(0), poll.Callback());
  EXPECT_EQ(broker_.Deliver(kOther, id, Output("x")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(broker_.Deliver(kConnection, "cmd_0000000000000000", Output("x")).status().code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(end.ended());
  ASSERT_TRUE(broker_.Deliver(kConnection, id, Output("x")).ok());
  // Ended, but still another connection's.
  EXPECT_EQ(broker_.Deliver(kOther, id, Output("x")).status().code(), StatusCode::kNotFound);
}

TEST_F(CommandBrokerTest, EndedCommandsAreForgottenAfterFiveMinutes) {
  EndSlot end;
  std::string id = Submit(end);
  PollSlot poll;
  broker_.Poll(kConnection, "", 4, seconds(0), poll.Callback());
  ASSERT_TRUE(broker_.Deliver(kConnection, id, Output("x")).ok());
  clock_.Advance(seconds(299));
  broker_.ExpireDue();
  EXPECT_TRUE(broker_.Deliver(kConnection, id, Output("x")).ok());
  clock_.Advance(seconds(1));
  broker_.ExpireDue();
  EXPECT_EQ(broker_.Deliver(kConnection, id, Output("x")).status().code(), StatusCode::kNotFound);
}

TEST_F(CommandBrokerTest, SixteenCommandsMayWaitPerConnection) {
  std::vector<EndSlot> ends(17);
  std::vector<std::string> ids;
  for (int i = 0; i < 16; ++i) ids.push_back(Submit(ends[i]));
  auto refused = broker_.Submit(kConnection, Argv(), ends[16].Callback());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("16 commands"), std::string::npos);
  // Other connections have their own bound.
  EndSlot other;
  EXPECT_TRUE(broker_.Submit(kOther, Argv(), other.Callback()).ok());
  // Taken commands still wait for their results, so they still count.
  PollSlot poll;
  broker_.Poll(kConnection, "", 16, seconds(0), poll.Callback());
  ASSERT_EQ(poll.commands()->size(), 16u);
  EXPECT_FALSE(broker_.Submit(kConnection, Argv(), ends[16].Callback()).ok());
  ASSERT_TRUE(broker_.Deliver(kConnection, ids[0], Output("x")).ok());
  EXPECT_TRUE(broker_.Submit(kConnection, Argv(), ends[16].Callback()).ok());
}

TEST_F(CommandBrokerTest, AHeldPollIsAnsweredEmptyWhenItsWaitPasses) {
  PollSlot poll;
  broker_.Poll(kConnection, "", 4, seconds(50), poll.Callback());
  clock_.Advance(seconds(49));
  broker_.ExpireDue();
  EXPECT_FALSE(poll.commands());
  clock_.Advance(seconds(1));
  broker_.ExpireDue();
  ASSERT_TRUE(poll.commands());
  EXPECT_TRUE(poll.commands()->empty());
  EXPECT_EQ(broker_.stats().waiting_polls, 0u);
}

TEST_F(CommandBrokerTest, PollsWithShorterWaitsBehindLongerOnesAreAnsweredInTime) {
  PollSlot longer, shorter;
  broker_.Poll(kConnection, "", 4, seconds(50), longer.Callback());
  broker_.Poll(kConnection, "", 4, seconds(5), shorter.Callback());
  clock_.Advance(seconds(5));
  broker_.ExpireDue();
  EXPECT_TRUE(shorter.commands());
  EXPECT_FALSE(longer.commands());
}

TEST_F(CommandBrokerTest, PollsOfManyConnectionsAreEachAnsweredOnceWhenTheirOwnWaitPasses) {
  // Polls of many connections with waits of 1-30 s; every tenth connection gets a command
  // first, which answers its poll early and must not answer it again when its wait passes.
  constexpr int kConnections = 300;
  std::vector<int> answers(kConnections, 0);
  std::vector<size_t> commands_taken(kConnections, 0);
  std::vector<EndSlot> ends(kConnections);
  auto connection = [](int i) { return "connection-" + std::to_string(i); };
  auto wait = [](int i) { return seconds(1 + i % 30); };
  for (int i = 0; i < kConnections; ++i) {
    broker_.Poll(connection(i), "", 4, wait(i),
                 [&, i](std::vector<PendingCommand> taken) {
                   ++answers[i];
                   commands_taken[i] += taken.size();
                 });
  }
  for (int i = 0; i < kConnections; i += 10) Submit(ends[i], connection(i));
  EXPECT_EQ(broker_.stats().waiting_polls, static_cast<size_t>(kConnections - kConnections / 10));
  for (int second = 1; second <= 30; ++second) {
    clock_.Advance(seconds(1));
    broker_.ExpireDue();
    for (int i = 0; i < kConnections; ++i) {
      const bool early = i % 10 == 0;
      const bool due = wait(i) <= seconds(second);
      EXPECT_EQ(answers[i], early || due ? 1 : 0) << "connection " << i << " at " << second << " s";
    }
  }
  EXPECT_EQ(broker_.stats().waiting_polls, 0u);
  for (int i = 0; i < kConnections; ++i) {
    EXPECT_EQ(commands_taken[i], i % 10 == 0 ? 1u : 0u) << i;
  }
  // The commands taken without a result are given up at 60 s, each once.
  clock_.Advance(seconds(29));
  broker_.ExpireDue();
  EXPECT_EQ(broker_.stats().waiting_commands, static_cast<size_t>(kConnections / 10));
  clock_.Advance(seconds(1));
  broker_.ExpireDue();
  EXPECT_EQ(broker_.stats().waiting_commands, 0u);
  for (int i = 0; i < kConnections; i += 10) {
    ASSERT_TRUE(ends[i].ended()) << i;
    EXPECT_EQ(ends[i].ended()->kind, CommandEnd::Kind::kNoResult);
    EXPECT_EQ(ends[i].calls(), 1);
  }
}

TEST_F(CommandBrokerTest, APollWithoutWaitIsAnsweredAtOnce) {
  PollSlot poll;
  broker_.Poll(kConnection, "", 4, seconds(0), poll.Callback());
  ASSERT_TRUE(poll.commands());
  EXPECT_TRUE(poll.commands()->empty());
  EXPECT_EQ(broker_.stats().waiting_polls, 0u);
}

TEST_F(CommandBrokerTest, AFifthHeldPollOfAConnectionReleasesTheOldest) {
  std::vector<PollSlot> polls(5);
  for (PollSlot& poll : polls) broker_.Poll(kConnection, "", 4, seconds(50), poll.Callback());
  ASSERT_TRUE(polls[0].commands());
  EXPECT_TRUE(polls[0].commands()->empty());
  for (size_t i = 1; i < polls.size(); ++i) EXPECT_FALSE(polls[i].commands());
  EXPECT_EQ(broker_.stats().waiting_polls, 4u);
}

TEST_F(CommandBrokerTest, CommandsOfOneConnectionNeverReachAnother) {
  PollSlot other_poll;
  broker_.Poll(kOther, "", 4, seconds(50), other_poll.Callback());
  EndSlot end;
  Submit(end);
  EXPECT_FALSE(other_poll.commands());
  PollSlot poll;
  broker_.Poll(kConnection, "", 4, seconds(0), poll.Callback());
  EXPECT_EQ(poll.commands()->size(), 1u);
}

TEST_F(CommandBrokerTest, DestroyingTheBrokerEndsWaitingCommandsAndReleasesPolls) {
  EndSlot queued, taken;
  PollSlot held;
  {
    CommandBroker broker(clock_);
    ASSERT_TRUE(broker.Submit(kConnection, Argv(), taken.Callback()).ok());
    PollSlot poll;
    broker.Poll(kConnection, "", 4, seconds(0), poll.Callback());
    ASSERT_TRUE(broker.Submit(kConnection, Argv(), queued.Callback()).ok());
    broker.Poll(kOther, "", 4, seconds(50), held.Callback());
  }
  ASSERT_TRUE(queued.ended());
  EXPECT_EQ(queued.ended()->kind, CommandEnd::Kind::kShutdown);
  ASSERT_TRUE(taken.ended());
  EXPECT_EQ(taken.ended()->kind, CommandEnd::Kind::kShutdown);
  EXPECT_TRUE(taken.ended()->taken_at);
  ASSERT_TRUE(held.commands());
  EXPECT_TRUE(held.commands()->empty());
}

TEST(CommandBrokerReaper, GivesUpOnItsOwnThread) {
  CommandBrokerOptions options;
  options.give_up_after = seconds(1);
  CommandBroker broker(SystemClock(), options);
  broker.StartReaper();
  std::promise<CommandEnd> ended;
  ASSERT_TRUE(
      broker.Submit(kConnection, Argv(), [&](CommandEnd end) { ended.set_value(std::move(end)); })
          .ok());
  auto future = ended.get_future();
  // A hang guard only: the reaper gives up after about a second.
  ASSERT_EQ(future.wait_for(seconds(60)), std::future_status::ready);
  EXPECT_EQ(future.get().kind, CommandEnd::Kind::kNotPickedUp);
}

TEST(LatencyHistogramText, RendersCumulativeBucketsSumAndCount) {
  LatencyHistogram histogram;
  histogram.Observe(std::chrono::milliseconds(3));
  histogram.Observe(std::chrono::milliseconds(80));
  histogram.Observe(std::chrono::seconds(45));
  std::string text = histogram.RenderText("x_seconds", "Help.");
  EXPECT_NE(text.find("# TYPE x_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_bucket{le=\"0.001\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_bucket{le=\"0.1\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_bucket{le=\"30\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_sum 45.083\n"), std::string::npos);
  EXPECT_NE(text.find("x_seconds_count 3\n"), std::string::npos);
}

}  // namespace
}  // namespace uplink::console
