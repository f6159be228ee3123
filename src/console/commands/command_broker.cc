#include "console/commands/command_broker.h"

#include <algorithm>

#include "common/thread_name.h"
#include "protocol/agent_api.h"

namespace uplink::console {
namespace {

// The reaper looks at least this often, so that a clock that jumps (a FakeClock) is noticed.
constexpr std::chrono::seconds kMaxReaperSleep{1};

}  // namespace

void CommandBroker::Calls::Run() {
  for (auto& [done, end] : ends) done(std::move(end));
  for (auto& [done, commands] : polls) done(std::move(commands));
}

CommandBroker::CommandBroker(const Clock& clock, CommandBrokerOptions options)
    : clock_(clock), options_(options) {}

CommandBroker::~CommandBroker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  reaper_wake_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  Calls calls;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, command] : commands_) {
      if (!command.done) continue;  // another replica's: its owner tells its user
      const ConnectionState& state = connections_[command.connection_id];
      calls.ends.emplace_back(std::move(command.done),
                              CommandEnd{CommandEnd::Kind::kShutdown, id, std::nullopt,
                                         command.taken_at, state.last_poll_at});
    }
    commands_.clear();
    give_ups_.clear();
    for (auto& [connection_id, state] : connections_) {
      while (!state.polls.empty()) {
        calls.polls.emplace_back(ReleaseLocked(state, state.polls.begin()),
                                 std::vector<PendingCommand>{});
      }
    }
  }
  calls.Run();
}

Result<std::string> CommandBroker::Submit(const std::string& connection_id,
                                          std::vector<std::string> argv, Done done) {
  Calls calls;
  std::string id;
  std::vector<std::string> announced;
  {
    std::lock_guard lock(mutex_);
    ConnectionState& state = connections_[connection_id];
    if (state.waiting >= options_.max_waiting_per_connection) {
      return ResourceExhaustedError(
          std::to_string(state.waiting) +
          " commands of this connection are already waiting for its agent; wait for one to "
          "finish (each ends within " +
          std::to_string(options_.give_up_after.count()) + " s)");
    }
    do {
      id = protocol::NewCommandId();
    } while (commands_.contains(id) || ended_.contains(id));
    if (peers_ != nullptr) announced = argv;
    AddLocked(id, Command{connection_id, std::move(argv), clock_.SteadyNow(), {}, std::nullopt,
                          std::move(done), "", peers_ == nullptr});
    ++state.waiting;
    state.queued.push_back(id);
    if (peers_ == nullptr && !state.polls.empty()) {
      const size_t max = state.polls.back().max_commands;
      PollDone poll = ReleaseLocked(state, std::prev(state.polls.end()));
      calls.polls.emplace_back(std::move(poll), TakeLocked(state, max));
    }
  }
  calls.Run();
  if (peers_ != nullptr) {
    // Announced first, so that a poll held on another replica may claim it at once.
    peers_->Queued(connection_id, id, announced);
    HandToHeldPoll(connection_id);
  }
  return id;
}

void CommandBroker::ClaimQueued(const std::string& connection_id, size_t max) {
  std::vector<std::string> unclaimed;
  {
    std::lock_guard lock(mutex_);
    for (const std::string& id : connections_[connection_id].queued) {
      if (unclaimed.size() >= max) break;
      if (!commands_.at(id).claimed) unclaimed.push_back(id);
    }
  }
  for (const std::string& id : unclaimed) {
    Result<bool> claimed = peers_->Claim(id);
    if (!claimed.ok()) continue;  // stays unclaimed: a later poll tries again
    std::lock_guard lock(mutex_);
    auto found = commands_.find(id);
    if (found == commands_.end() || found->second.taken_at) continue;
    if (*claimed) {
      found->second.claimed = true;
    } else {  // another replica handed it out
      ConnectionState& state = connections_[connection_id];
      state.queued.erase(std::find(state.queued.begin(), state.queued.end(), id));
      found->second.taken_at = clock_.Now();
    }
  }
}

void CommandBroker::HandToHeldPoll(const std::string& connection_id) {
  size_t max = 0;
  {
    std::lock_guard lock(mutex_);
    ConnectionState& state = connections_[connection_id];
    if (state.polls.empty() || state.queued.empty()) return;
    max = state.polls.back().max_commands;
  }
  ClaimQueued(connection_id, max);
  Calls calls;
  {
    std::lock_guard lock(mutex_);
    ConnectionState& state = connections_[connection_id];
    if (state.polls.empty()) return;  // the claimed commands wait for the next poll
    std::vector<PendingCommand> taken = TakeLocked(state, state.polls.back().max_commands);
    if (taken.empty()) return;
    calls.polls.emplace_back(ReleaseLocked(state, std::prev(state.polls.end())),
                             std::move(taken));
  }
  Finish(calls);
}

bool CommandBroker::HasUnclaimedLocked(const ConnectionState& state) const {
  return std::any_of(state.queued.begin(), state.queued.end(),
                     [this](const std::string& id) { return !commands_.at(id).claimed; });
}

void CommandBroker::Finish(Calls& calls) {
  if (peers_ != nullptr) {
    // Before the poll's reply: the owner knows a command was taken before its result can come.
    for (const auto& [done, commands] : calls.polls) {
      for (const PendingCommand& command : commands) peers_->Taken(command.id);
    }
    for (const auto& [connection_id, id, stored] : calls.ended) {
      peers_->Ended(connection_id, id, stored);
    }
  }
  calls.Run();
}

void CommandBroker::AddFromReplica(const std::string& owner, const std::string& connection_id,
                                   const std::string& id, std::vector<std::string> argv) {
  {
    std::lock_guard lock(mutex_);
    if (commands_.contains(id) || ended_.contains(id)) return;
    AddLocked(id, Command{connection_id, std::move(argv), clock_.SteadyNow(), {}, std::nullopt,
                          Done(), owner, false});
    connections_[connection_id].queued.push_back(id);
  }
  HandToHeldPoll(connection_id);
}

void CommandBroker::TakenOnReplica(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto found = commands_.find(id);
  if (found == commands_.end() || found->second.taken_at) return;
  ConnectionState& state = connections_[found->second.connection_id];
  state.queued.erase(std::find(state.queued.begin(), state.queued.end(), id));
  found->second.taken_at = clock_.Now();
}

void CommandBroker::EndedOnReplica(const std::string& id, bool stored) {
  std::lock_guard lock(mutex_);
  auto found = commands_.find(id);
  if (found == commands_.end() || found->second.owner.empty()) return;
  EndLocked(id, stored ? Delivery::kStored : Delivery::kDiscarded);
}

void CommandBroker::ResultFromReplica(const std::string& connection_id, const std::string& id,
                                      CommandResult result) {
  Calls calls;
  {
    std::lock_guard lock(mutex_);
    auto found = commands_.find(id);
    if (found == commands_.end() || found->second.connection_id != connection_id) return;
    const bool owned = found->second.owner.empty();
    Command command = EndLocked(id, Delivery::kStored);
    if (!owned) return;
    calls.ends.emplace_back(std::move(command.done),
                            CommandEnd{CommandEnd::Kind::kResult, id, std::move(result),
                                       command.taken_at,
                                       connections_[connection_id].last_poll_at});
    calls.ended.emplace_back(connection_id, id, true);
  }
  Finish(calls);
}

void CommandBroker::Poll(const std::string& connection_id, const std::string& agent_instance,
                         size_t max_commands, std::chrono::seconds wait, PollDone done) {
  max_commands = std::max<size_t>(max_commands, 1);
  if (peers_ != nullptr) ClaimQueued(connection_id, max_commands);
  Calls calls;
  bool held_with_unclaimed = false;
  {
    std::lock_guard lock(mutex_);
    ConnectionState& state = connections_[connection_id];
    state.last_poll_at = clock_.Now();
    if (!agent_instance.empty()) {
      for (auto held = state.polls.begin(); held != state.polls.end();) {
        if (held->agent_instance != agent_instance) {
          ++held;
          continue;
        }
        calls.polls.emplace_back(ReleaseLocked(state, held), std::vector<PendingCommand>{});
        held = state.polls.begin();  // released polls leave the deque: look again from the start
      }
    }
    std::vector<PendingCommand> taken = TakeLocked(state, max_commands);
    if (!taken.empty() || wait <= std::chrono::seconds(0)) {
      calls.polls.emplace_back(std::move(done), std::move(taken));
    } else {
      if (state.polls.size() >= options_.max_polls_per_connection) {
        calls.polls.emplace_back(ReleaseLocked(state, state.polls.begin()),
                                 std::vector<PendingCommand>{});
      }
      HoldLocked(state, connection_id, HeldPoll{agent_instance, max_commands, {}, std::move(done)},
                 clock_.SteadyNow() + wait);
      // A command announced since the claims above found no held poll: claim it now.
      held_with_unclaimed = peers_ != nullptr && HasUnclaimedLocked(state);
    }
  }
  Finish(calls);
  if (held_with_unclaimed) HandToHeldPoll(connection_id);
}

std::vector<PendingCommand> CommandBroker::TakeLocked(ConnectionState& state, size_t max) {
  std::vector<PendingCommand> taken;
  SteadyTime now = clock_.SteadyNow();
  for (auto queued = state.queued.begin(); queued != state.queued.end() && taken.size() < max;) {
    Command& command = commands_.at(*queued);
    if (!command.claimed) {
      ++queued;
      continue;
    }
    std::string id = std::move(*queued);
    queued = state.queued.erase(queued);
    command.taken_at = clock_.Now();
    pickup_latency_.Observe(now - command.queued_at);
    taken.push_back(PendingCommand{std::move(id), command.argv});
  }
  return taken;
}

CommandBroker::Command CommandBroker::EndLocked(const std::string& id, Delivery delivery) {
  auto found = commands_.find(id);
  Command command = std::move(found->second);
  commands_.erase(found);
  give_ups_.erase(command.give_up);
  ConnectionState& state = connections_[command.connection_id];
  if (command.owner.empty()) --state.waiting;
  if (!command.taken_at) {
    state.queued.erase(std::find(state.queued.begin(), state.queued.end(), id));
  }
  ended_[id] = Ended{command.connection_id, delivery, clock_.SteadyNow()};
  ended_order_.push_back(id);
  while (ended_order_.size() > options_.max_remembered) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
  return command;
}

void CommandBroker::AddLocked(const std::string& id, Command command) {
  command.give_up = give_ups_.emplace(command.queued_at + options_.give_up_after, id);
  commands_.emplace(id, std::move(command));
}

void CommandBroker::HoldLocked(ConnectionState& state, const std::string& connection_id,
                               HeldPoll poll, SteadyTime deadline) {
  poll.deadline = poll_deadlines_.emplace(deadline, connection_id);
  state.polls.push_back(std::move(poll));
  ++held_polls_;
}

CommandBroker::PollDone CommandBroker::ReleaseLocked(ConnectionState& state,
                                                     std::deque<HeldPoll>::iterator poll) {
  PollDone done = std::move(poll->done);
  poll_deadlines_.erase(poll->deadline);
  state.polls.erase(poll);
  --held_polls_;
  return done;
}

Result<CommandBroker::Delivery> CommandBroker::Deliver(const std::string& connection_id,
                                                       const std::string& id,
                                                       CommandResult result) {
  Status unknown = NotFoundError(
      "this connection has no command " + (id.size() <= 64 ? id : std::string("with that id")) +
      " waiting for a result (the console may have restarted since it was handed out); drop "
      "the result");
  Calls calls;
  std::string owner;
  {
    std::lock_guard lock(mutex_);
    auto waiting = commands_.find(id);
    // Among replicas a command may have been handed out by another: it counts as taken.
    if (waiting == commands_.end() || waiting->second.connection_id != connection_id ||
        (!waiting->second.taken_at && peers_ == nullptr)) {
      auto ended = ended_.find(id);
      if (ended == ended_.end() || ended->second.connection_id != connection_id) return unknown;
      return ended->second.delivery;
    }
    owner = waiting->second.owner;
    Command command = EndLocked(id, Delivery::kStored);
    if (owner.empty()) {
      calls.ends.emplace_back(std::move(command.done),
                              CommandEnd{CommandEnd::Kind::kResult, id, result, command.taken_at,
                                         connections_[connection_id].last_poll_at});
      if (peers_ != nullptr) calls.ended.emplace_back(connection_id, id, true);
    }
  }
  if (!owner.empty()) peers_->ResultForOwner(owner, connection_id, id, result);
  Finish(calls);
  return Delivery::kStored;
}

void CommandBroker::ExpireDue() {
  Calls calls;
  {
    std::lock_guard lock(mutex_);
    SteadyTime now = clock_.SteadyNow();
    while (!give_ups_.empty() && give_ups_.begin()->first <= now) {
      const std::string id = give_ups_.begin()->second;
      Command command = EndLocked(id, Delivery::kDiscarded);
      if (!command.done) continue;  // another replica's copy: its owner gives it up there
      if (peers_ != nullptr) calls.ended.emplace_back(command.connection_id, id, false);
      CommandEnd::Kind kind =
          command.taken_at ? CommandEnd::Kind::kNoResult : CommandEnd::Kind::kNotPickedUp;
      calls.ends.emplace_back(std::move(command.done),
                              CommandEnd{kind, id, std::nullopt, command.taken_at,
                                         connections_[command.connection_id].last_poll_at});
    }
    while (!poll_deadlines_.empty() && poll_deadlines_.begin()->first <= now) {
      const Deadlines::iterator due = poll_deadlines_.begin();
      ConnectionState& state = connections_.at(due->second);
      auto poll = std::find_if(state.polls.begin(), state.polls.end(),
                               [&](const HeldPoll& held) { return held.deadline == due; });
      calls.polls.emplace_back(ReleaseLocked(state, poll), std::vector<PendingCommand>{});
    }
    while (!ended_order_.empty()) {
      auto oldest = ended_.find(ended_order_.front());
      if (oldest != ended_.end() && now - oldest->second.at < options_.remember_ended) break;
      if (oldest != ended_.end()) ended_.erase(oldest);
      ended_order_.pop_front();
    }
  }
  Finish(calls);
}

void CommandBroker::StartReaper() {
  std::lock_guard lock(mutex_);
  if (reaper_.joinable() || stopping_) return;
  reaper_ = std::thread([this] {
    NameThisThread("command-reaper");
    ReaperLoop();
  });
}

void CommandBroker::ReaperLoop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    // The earliest deadline by the clock, but never more than kMaxReaperSleep of real time.
    SteadyTime now = clock_.SteadyNow();
    SteadyTime next = now + kMaxReaperSleep;
    if (!give_ups_.empty()) next = std::min(next, give_ups_.begin()->first);
    if (!poll_deadlines_.empty()) next = std::min(next, poll_deadlines_.begin()->first);
    if (next > now) reaper_wake_.wait_for(lock, next - now);
    if (stopping_) break;
    lock.unlock();
    ExpireDue();
    lock.lock();
  }
}

CommandBroker::Stats CommandBroker::stats() const {
  std::lock_guard lock(mutex_);
  const auto owned = std::count_if(commands_.begin(), commands_.end(),
                                   [](const auto& entry) { return entry.second.owner.empty(); });
  return Stats{static_cast<size_t>(owned), held_polls_};
}

}  // namespace uplink::console
