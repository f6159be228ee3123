// The console's side of kubectl commands (docs/protocol.md, "kubectl commands"): users'
// commands wait in memory, per connection, until the connection's cluster role takes them
// with a long poll and posts their results back.
//
// A command is queued, then taken (handed to exactly one poll), then done (its result
// arrived) or given up (60 s after it was queued, taken or not). Whoever queued it is told
// exactly once how it ended. A poll that finds nothing waits, and is answered the moment a
// command is queued for its connection, so pickup does not wait for a timer. Nothing is kept
// across a restart: a user waits on every command, and nothing stale may run later.
//
// Among replicas (docs/architecture.md, "Replicas") the broker is given CommandPeers: a command
// queued here is announced to the other replicas, which hold a copy for the polls they hold;
// before any replica hands a command out it claims it in the database, so exactly one poll
// gets it; a result posted to a replica holding a copy is sent to the owner, where the user
// waits. Without peers nothing of this runs (no database round trip on the one-server path).
//
// Time is the injected clock's steady time; ExpireDue() gives up commands and answers polls
// whose time has passed. StartReaper() runs it on a background thread (at least once a
// second); tests call it themselves after moving a FakeClock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "console/commands/latency_histogram.h"
#include "protocol/commands.h"

namespace uplink::console {

// What the agent posted for a command (protocol/commands.h): kubectl's exit code and output,
// or an error when no process ran or its output could not be used.
using protocol::CommandResult;

// How a command ended, for whoever queued it.
struct CommandEnd {
  enum class Kind {
    kResult,       // the agent posted `result`
    kNotPickedUp,  // given up: no agent took it
    kNoResult,     // given up: taken at `taken_at`, no result came back
    kShutdown,     // the console is stopping
  };
  Kind kind = Kind::kResult;
  std::string id;
  std::optional<CommandResult> result;
  std::optional<WallTime> taken_at;
  // When the connection's agent last polled, before the command ended; none if never (since
  // the console started).
  std::optional<WallTime> last_poll_at;
};

// A command as a poll hands it out.
struct PendingCommand {
  std::string id;
  std::vector<std::string> argv;
};

struct CommandBrokerOptions {
  // Commands of one connection whose users wait (queued or taken); more are refused.
  size_t max_waiting_per_connection = 16;
  std::chrono::seconds give_up_after{60};
  // Polls held per connection; a further poll answers the oldest held one with no commands.
  size_t max_polls_per_connection = 4;
  // Ended commands are remembered this long (at most `max_remembered` of them), so that a
  // result sent again after a lost reply, or after the give-up, gets the same answer.
  std::chrono::seconds remember_ended{300};
  size_t max_remembered = 4096;
};

// What a broker among replicas tells the others and asks the database (replica_commands.h).
// Called outside the broker's lock.
class CommandPeers {
 public:
  virtual ~CommandPeers() = default;
  // True for exactly one replica's claim of `id`, false for the others; an error when the
  // database cannot be reached (the command then waits for a poll that can claim it).
  virtual Result<bool> Claim(const std::string& id) = 0;
  virtual void Queued(const std::string& connection_id, const std::string& id,
                      const std::vector<std::string>& argv) = 0;
  virtual void Taken(const std::string& id) = 0;
  // By the owner: the command ended (its result, or given up).
  virtual void Ended(const std::string& connection_id, const std::string& id, bool stored) = 0;
  // The result of another replica's command, posted here.
  virtual void ResultForOwner(const std::string& owner, const std::string& connection_id,
                              const std::string& id, const CommandResult& result) = 0;
};

class CommandBroker {
 public:
  using Done = std::function<void(CommandEnd)>;
  using PollDone = std::function<void(std::vector<PendingCommand>)>;

  enum class Delivery { kStored, kDiscarded };

  struct Stats {
    // Queued or taken, over every connection, whose users wait on this replica: copies of
    // other replicas' commands are left out, so that the gauge adds up over replicas.
    size_t waiting_commands = 0;
    size_t waiting_polls = 0;
  };

  // `clock` must outlive this object.
  explicit CommandBroker(const Clock& clock, CommandBrokerOptions options = {});
  // Stops the reaper, then ends every waiting command (kShutdown) and answers every held poll
  // with no commands.
  ~CommandBroker();
  CommandBroker(const CommandBroker&) = delete;
  CommandBroker& operator=(const CommandBroker&) = delete;

  // Queues `argv` for the connection's agent and returns the command's id; `done` is called
  // exactly once, from whichever thread ends it, never under the broker's lock.
  // ResourceExhausted when the connection already has max_waiting_per_connection commands.
  Result<std::string> Submit(const std::string& connection_id, std::vector<std::string> argv,
                             Done done);

  // Takes up to `max_commands` queued commands of the connection and calls `done` with them
  // at once; when none is queued and `wait` is positive, holds the poll until one is queued
  // (then `done` gets it) or `wait` passes (then `done` gets none). An agent holds one poll
  // at a time, so a poll from `agent_instance` (when not empty) answers that instance's held
  // poll empty: it was left by the same agent before it restarted, and a command handed to
  // it would be lost. A queued command goes to the newest held poll, the likeliest alive.
  void Poll(const std::string& connection_id, const std::string& agent_instance,
            size_t max_commands, std::chrono::seconds wait, PollDone done);

  // The agent's result for command `id` of the connection: kStored when it ended the command
  // (or had already, for a result sent again), kDiscarded when the command was given up.
  // NotFound when the connection has no such command handed out (a wrong id, another
  // connection's, one ended long ago, or one of before a restart).
  Result<Delivery> Deliver(const std::string& connection_id, const std::string& id,
                           CommandResult result);

  // Gives up commands older than give_up_after and answers polls whose wait has passed.
  void ExpireDue();

  // Runs ExpireDue on a background thread until this object is destroyed.
  void StartReaper();

  // Joins the other replicas through `peers`, which must outlive this object; before serving.
  void SetPeers(CommandPeers* peers) { peers_ = peers; }
  // From another replica (`owner`): a command queued there; this replica holds a copy for
  // its polls until the owner says it ended or it is given up here too.
  void AddFromReplica(const std::string& owner, const std::string& connection_id,
                      const std::string& id, std::vector<std::string> argv);
  // Another replica handed command `id` out.
  void TakenOnReplica(const std::string& id);
  // The owner ended command `id`; a result posted here later gets `stored`'s answer.
  void EndedOnReplica(const std::string& id, bool stored);
  // A result posted to another replica for command `id` (ends it here, where it is owned).
  void ResultFromReplica(const std::string& connection_id, const std::string& id,
                         CommandResult result);

  Stats stats() const;
  // Queued to taken, for every command taken.
  const LatencyHistogram& pickup_latency() const { return pickup_latency_; }

 private:
  // When each held poll is due, and each command is given up, in time order, so that the
  // reaper finds what is due without visiting every connection: with ten thousand agents
  // holding polls, due times come a millisecond apart.
  using Deadlines = std::multimap<SteadyTime, std::string>;  // to a connection id or command id

  struct Command {
    std::string connection_id;
    std::vector<std::string> argv;
    SteadyTime queued_at;
    Deadlines::iterator give_up;  // in give_ups_
    std::optional<WallTime> taken_at;
    Done done;   // empty for another replica's command
    std::string owner;  // the replica it was queued on; empty: this one
    bool claimed = true;  // among replicas: this replica may hand it out
  };
  struct HeldPoll {
    std::string agent_instance;
    size_t max_commands = 1;
    Deadlines::iterator deadline;  // in poll_deadlines_, to its connection's id
    PollDone done;
  };
  struct ConnectionState {
    std::deque<std::string> queued;  // ids, oldest first
    std::deque<HeldPoll> polls;      // oldest first; the newest is answered first
    size_t waiting = 0;              // commands queued or taken
    std::optional<WallTime> last_poll_at;
  };
  struct Ended {
    std::string connection_id;
    Delivery delivery = Delivery::kStored;
    SteadyTime at;
  };
  // Calls made once the lock is released.
  struct Calls {
    std::vector<std::pair<Done, CommandEnd>> ends;
    std::vector<std::pair<PollDone, std::vector<PendingCommand>>> polls;
    // Among replicas, what the owner ended: connection, id, whether a result was stored.
    std::vector<std::tuple<std::string, std::string, bool>> ended;
    void Run();
  };

  // Among replicas: claims up to `max` unclaimed queued commands of the connection (outside
  // mutex_, a database round trip each); those another replica has are marked taken.
  void ClaimQueued(const std::string& connection_id, size_t max);
  // Hands queued, claimed commands to the connection's newest held poll, if any.
  void HandToHeldPoll(const std::string& connection_id);
  // Runs `calls` outside mutex_, telling peers which commands were handed out.
  void Finish(Calls& calls);
  // Under mutex_: whether `state` has commands waiting for a claim.
  bool HasUnclaimedLocked(const ConnectionState& state) const;
  // Under mutex_: hands out up to `max` queued commands of `state`, marking them taken.
  std::vector<PendingCommand> TakeLocked(ConnectionState& state, size_t max);
  // Under mutex_: removes command `id` and remembers how a late result is to be answered.
  Command EndLocked(const std::string& id, Delivery delivery);
  // Under mutex_: adds a command, its give-up time indexed.
  void AddLocked(const std::string& id, Command command);
  // Under mutex_: holds a poll of `state` (a connection's) until `deadline`.
  void HoldLocked(ConnectionState& state, const std::string& connection_id, HeldPoll poll,
                  SteadyTime deadline);
  // Under mutex_: removes a held poll of `state`, with its deadline, and returns its `done`.
  PollDone ReleaseLocked(ConnectionState& state, std::deque<HeldPoll>::iterator poll);
  void ReaperLoop();

  const Clock& clock_;
  const CommandBrokerOptions options_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Command> commands_;  // waiting, by id
  std::unordered_map<std::string, ConnectionState> connections_;
  Deadlines give_ups_;       // command ids
  Deadlines poll_deadlines_;  // connection ids, one entry per held poll
  std::unordered_map<std::string, Ended> ended_;
  std::deque<std::string> ended_order_;  // oldest first
  size_t held_polls_ = 0;
  LatencyHistogram pickup_latency_;

  std::condition_variable reaper_wake_;
  bool stopping_ = false;
  std::thread reaper_;
  CommandPeers* peers_ = nullptr;
};

}  // namespace uplink::console
