// kubectl commands across replicas: two CommandBrokers joined by real replica buses and claims
// on one real PostgreSQL database. A command queued on A reaches a poll held on B, exactly one
// poll gets it when both hold one, B's result ends it on A, A's give-up drops B's copy, and
// bodies too large for a notification go through the database.
#include "console/replicas/replica_commands.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>

#include "common/json.h"
#include "postgres_fixture.h"
#include "support/postgres_server.h"
#include "support/process.h"

namespace uplink::console {
namespace {

using uplink::testing::WaitFor;

constexpr char kConnection[] = "conn_0123456789abcdef";

// Something handed over on another thread, waited for.
template <typename T>
class Mailbox {
 public:
  void Put(T value) {
    std::lock_guard lock(mutex_);
    values_.push_back(std::move(value));
  }
  std::vector<T> values() const {
    std::lock_guard lock(mutex_);
    return values_;
  }
  T WaitOne() {
    EXPECT_TRUE(WaitFor([&] { return !values().empty(); }));
    std::lock_guard lock(mutex_);
    return values_.empty() ? T{} : values_.front();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<T> values_;
};

struct Replica {
  std::unique_ptr<PostgresReplicaBus> bus;
  std::unique_ptr<CommandClaims> claims;
  std::unique_ptr<CommandBroker> broker;
  std::unique_ptr<ReplicaCommands> commands;
  ~Replica() {
    if (commands) commands->Leave();
    broker.reset();
  }
};

class ReplicaCommandsTest : public testing::PostgresFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PostgresFixture::SetUp());
    where_ = location();
    auto db = sql::OpenPostgresDatabase(where_);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    for (const sql::Migration& migration : sql::PostgresMigrations()) {
      ASSERT_TRUE((*db)->Exec(migration.sql).ok()) << migration.version << (*db)->LastMessage();
    }
    schema_ = std::move(*db);
    Start(a_);
    Start(b_);
  }

  void Start(Replica& replica) {
    auto bus = PostgresReplicaBus::Start(where_);
    ASSERT_TRUE(bus.ok()) << bus.status().ToString();
    replica.bus = std::move(*bus);
    auto db = sql::OpenPostgresDatabase(where_);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    replica.claims = std::make_unique<CommandClaims>(std::move(*db));
    replica.broker = std::make_unique<CommandBroker>(clock_);
    replica.commands =
        std::make_unique<ReplicaCommands>(*replica.bus, *replica.claims, *replica.broker, clock_);
  }

  // Returns once `to` has handled everything `from` sent before this call (one channel,
  // dispatched in order).
  static void Fence(Replica& from, Replica& to) { Fence(*from.bus, to); }
  static void Fence(ReplicaBus& from, Replica& to) {
    std::atomic<bool> seen{false};
    auto sub = to.bus->Subscribe("fence", [&](const json::object&) { seen = true; });
    ASSERT_TRUE(from.Publish("fence", json::object{}).ok());
    ASSERT_TRUE(WaitFor([&] { return seen.load(); }));
  }

  static void HoldPoll(Replica& replica, Mailbox<std::vector<PendingCommand>>& box) {
    replica.broker->Poll(kConnection, "agent-1", 4, std::chrono::seconds(50),
                         [&box](std::vector<PendingCommand> commands) { box.Put(commands); });
  }

  static std::string Submit(Replica& replica, std::vector<std::string> argv,
                            Mailbox<CommandEnd>& box) {
    auto id = replica.broker->Submit(kConnection, std::move(argv),
                                     [&box](CommandEnd end) { box.Put(std::move(end)); });
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : "";
  }

  std::int64_t Rows(const std::string& table) {
    auto count = schema_->Prepare("SELECT COUNT(*) FROM " + table);
    EXPECT_TRUE(count.ok());
    EXPECT_EQ((*count)->Step(), sql::Statement::StepResult::kRow);
    std::int64_t rows = (*count)->Int(0);
    (*count)->Reset();
    return rows;
  }

  FakeClock clock_;
  sql::PostgresLocation where_;
  std::unique_ptr<sql::Database> schema_;
  Replica a_, b_;
};

CommandResult Output(std::string stdout_text) {
  CommandResult result;
  result.exit_code = 0;
  result.stdout_text = std::move(stdout_text);
  result.duration_ms = 12;
  return result;
}

TEST_F(ReplicaCommandsTest, ACommandQueuedOnAReachesAPollHeldOnBAndItsResultEndsItOnA) {
  Mailbox<std::vector<PendingCommand>> polled;
  HoldPoll(b_, polled);
  Mailbox<CommandEnd> ended;
  std::string id = Submit(a_, {"get", "pods", "-A"}, ended);
  std::vector<PendingCommand> got = polled.WaitOne();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, id);
  EXPECT_EQ(got[0].argv, (std::vector<std::string>{"get", "pods", "-A"}));
  // B holds a copy; the user waits on A, the only replica that counts the command.
  EXPECT_EQ(a_.broker->stats().waiting_commands, 1u);
  EXPECT_EQ(b_.broker->stats().waiting_commands, 0u);

  auto delivered = b_.broker->Deliver(kConnection, id, Output("NAME READY\n"));
  ASSERT_TRUE(delivered.ok()) << delivered.status().ToString();
  EXPECT_EQ(*delivered, CommandBroker::Delivery::kStored);
  CommandEnd end = ended.WaitOne();
  EXPECT_EQ(end.kind, CommandEnd::Kind::kResult);
  EXPECT_EQ(end.id, id);
  ASSERT_TRUE(end.result.has_value());
  EXPECT_EQ(end.result->stdout_text, "NAME READY\n");
  EXPECT_TRUE(end.taken_at.has_value());
  // Sent again after a lost reply: the same answer on B.
  EXPECT_EQ(*b_.broker->Deliver(kConnection, id, Output("again")), CommandBroker::Delivery::kStored);
  Fence(a_, b_);
  EXPECT_EQ(ended.values().size(), 1u);
  EXPECT_EQ(a_.broker->stats().waiting_commands, 0u);
  EXPECT_EQ(b_.broker->stats().waiting_commands, 0u);
}

TEST_F(ReplicaCommandsTest, ExactlyOnePollGetsACommandWhenBothReplicasHoldOne) {
  for (int round = 0; round < 10; ++round) {
    Mailbox<std::vector<PendingCommand>> on_a, on_b;
    HoldPoll(a_, on_a);
    HoldPoll(b_, on_b);
    Mailbox<CommandEnd> ended;
    std::string id = Submit(round % 2 == 0 ? a_ : b_, {"get", "nodes"}, ended);
    Fence(a_, b_);
    Fence(b_, a_);
    std::vector<std::vector<PendingCommand>> answers = on_a.values();
    for (const auto& answer : on_b.values()) answers.push_back(answer);
    ASSERT_EQ(answers.size(), 1u) << "round " << round;
    ASSERT_EQ(answers[0].size(), 1u);
    EXPECT_EQ(answers[0][0].id, id);
    // The loser's poll is still held; the next command is its.
    Mailbox<CommandEnd> next;
    std::string next_id = Submit(a_, {"get", "ns"}, next);
    Fence(a_, b_);
    Fence(b_, a_);
    EXPECT_EQ(on_a.values().size() + on_b.values().size(), 2u);
    for (Replica* replica : {&a_, &b_}) {
      for (const std::string& done : {id, next_id}) {
        (void)replica->broker->Deliver(kConnection, done, Output(""));
      }
    }
    // Both ends reach their owner (through the bus when delivered on the other replica)
    // before this round's mailboxes go.
    EXPECT_EQ(ended.WaitOne().id, id);
    EXPECT_EQ(next.WaitOne().id, next_id);
    Fence(a_, b_);
    Fence(b_, a_);
    EXPECT_EQ(ended.values().size(), 1u);
    EXPECT_EQ(next.values().size(), 1u);
  }
}

TEST_F(ReplicaCommandsTest, AGiveUpOnTheOwnerDropsTheOtherReplicasCopy) {
  Mailbox<CommandEnd> ended;
  std::string id = Submit(a_, {"get", "pods"}, ended);
  Fence(a_, b_);
  clock_.Advance(std::chrono::seconds(61));
  a_.broker->ExpireDue();
  EXPECT_EQ(ended.WaitOne().kind, CommandEnd::Kind::kNotPickedUp);
  Fence(a_, b_);
  Mailbox<std::vector<PendingCommand>> polled;
  b_.broker->Poll(kConnection, "agent-1", 4, std::chrono::seconds(0),
                  [&](std::vector<PendingCommand> commands) { polled.Put(commands); });
  EXPECT_TRUE(polled.WaitOne().empty());
  auto late = b_.broker->Deliver(kConnection, id, Output(""));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(*late, CommandBroker::Delivery::kDiscarded);
}

TEST_F(ReplicaCommandsTest, AnArgvAndAResultTooLargeForANotificationGoThroughTheDatabase) {
  Mailbox<std::vector<PendingCommand>> polled;
  HoldPoll(b_, polled);
  std::vector<std::string> argv = {"get", "pods", "-l", std::string(4000, 'a') + "=x",
                                   "--field-selector", std::string(4000, 'b') + "=y"};
  Mailbox<CommandEnd> ended;
  std::string id = Submit(a_, argv, ended);
  std::vector<PendingCommand> got = polled.WaitOne();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].argv, argv);
  std::string big(200'000, 'o');
  ASSERT_TRUE(b_.broker->Deliver(kConnection, id, Output(big)).ok());
  CommandEnd end = ended.WaitOne();
  ASSERT_TRUE(end.result.has_value());
  EXPECT_EQ(end.result->stdout_text, big);
  // The owner read and deleted the result's row and, once ended, the argv's.
  EXPECT_EQ(Rows("command_bodies"), 0);
  EXPECT_EQ(Rows("command_claims"), 1);
}

TEST_F(ReplicaCommandsTest, HostileCommandMessagesAreDroppedAndTheBridgeKeepsWorking) {
  auto rogue = PostgresReplicaBus::Start(where_);
  ASSERT_TRUE(rogue.ok());
  for (const json::object& message :
       {json::object{{"connection", kConnection}, {"id", "not-an-id"}, {"argv", {"get"}}},
        json::object{{"connection", kConnection}, {"id", "cmd_0123456789abcdef"}, {"argv", 5}},
        json::object{{"connection", ""}, {"id", "cmd_0123456789abcdef"}, {"argv", {"get"}}},
        json::object{{"connection", kConnection}, {"id", "cmd_0123456789abcdef"},
                     {"argv_row", true}},  // no such row
        json::object{{"id", "cmd_0123456789abcdef"}, {"argv", {1, 2}}}}) {
    ASSERT_TRUE((*rogue)->Publish("command_queued", message).ok());
  }
  ASSERT_TRUE((*rogue)
                  ->Publish("command_result", json::object{{"connection", kConnection},
                                                           {"id", "cmd_0123456789abcdef"},
                                                           {"owner", a_.bus->replica_id()},
                                                           {"result", "garbage"}})
                  .ok());
  ASSERT_TRUE((*rogue)->Publish("command_ended", json::object{{"id", 7}, {"stored", "yes"}}).ok());
  Fence(**rogue, b_);
  // Nothing was queued from them: B's poll gets only A's real command.
  Mailbox<std::vector<PendingCommand>> polled;
  HoldPoll(b_, polled);
  Mailbox<CommandEnd> ended;
  std::string id = Submit(a_, {"version"}, ended);
  std::vector<PendingCommand> got = polled.WaitOne();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, id);
  ASSERT_TRUE(b_.broker->Deliver(kConnection, id, Output("v1")).ok());
  EXPECT_EQ(ended.WaitOne().kind, CommandEnd::Kind::kResult);
}

}  // namespace
}  // namespace uplink::console
