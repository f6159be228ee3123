// The replica bus (LISTEN/NOTIFY) between buses on one real PostgreSQL 15 database
// (tests/support/postgres_server.h): order, its own messages skipped, the size limit, hostile
// payloads written straight onto the channel, and reconnection after the server restarts.
#include "console/replicas/replica_bus.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <mutex>
#include <string>
#include <vector>

#include "common/json.h"
#include "postgres_fixture.h"
#include "support/postgres_server.h"
#include "support/process.h"

namespace uplink::console {
namespace {

using uplink::testing::WaitFor;

// What one subscriber saw, in order.
class Inbox {
 public:
  ReplicaBus::Handler Handler() {
    return [this](const json::object& message) {
      std::lock_guard lock(mutex_);
      messages_.push_back(message);
    };
  }
  std::vector<json::object> messages() const {
    std::lock_guard lock(mutex_);
    return messages_;
  }
  size_t size() const { return messages().size(); }

 private:
  mutable std::mutex mutex_;
  std::vector<json::object> messages_;
};

class ReplicaBusTest : public testing::PostgresFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PostgresFixture::SetUp());
    where_ = location();
  }

  std::unique_ptr<PostgresReplicaBus> StartBus() {
    auto bus = PostgresReplicaBus::Start(where_);
    EXPECT_TRUE(bus.ok()) << bus.status().ToString();
    return bus.ok() ? std::move(*bus) : nullptr;
  }

  // NOTIFY with any payload at all, as anyone with a connection to the database could.
  void NotifyRaw(const std::string& payload) {
    auto conn = sql::ConnectPostgres(where_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    const char* values[] = {payload.c_str()};
    PGresult* result = PQexecParams(conn->get(), "SELECT pg_notify('uplink_replicas', $1)", 1,
                                    nullptr, values, nullptr, nullptr, 0);
    EXPECT_EQ(PQresultStatus(result), PGRES_TUPLES_OK) << PQerrorMessage(conn->get());
    PQclear(result);
  }

  static double Metric(const PostgresReplicaBus& bus, const std::string& series) {
    std::string text;
    bus.RenderMetrics(text);
    size_t at = text.find("\n" + series + " ");
    if (at == std::string::npos) return 0;
    return std::stod(text.substr(at + series.size() + 2));
  }

  sql::PostgresLocation where_;
};

TEST_F(ReplicaBusTest, DeliversInOrderToOtherReplicasAndSkipsItsOwn) {
  auto a = StartBus();
  auto b = StartBus();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->replica_id(), b->replica_id());
  Inbox a_inbox, b_inbox;
  auto a_sub = a->Subscribe("test", a_inbox.Handler());
  auto b_sub = b->Subscribe("test", b_inbox.Handler());

  constexpr int kMessages = 50;
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(a->Publish("test", json::object{{"n", i}}).ok());
  }
  ASSERT_TRUE(WaitFor([&] { return b_inbox.size() == kMessages; }));
  std::vector<json::object> got = b_inbox.messages();
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_EQ(got[i].at("n").as_int64(), i);
    EXPECT_EQ(got[i].at("topic").as_string(), "test");
    EXPECT_EQ(got[i].at("from").as_string(), a->replica_id());
  }
  // B's marker reaches A after A's own 50 (one channel, commit order): had A dispatched its
  // own, they would be in its inbox before the marker.
  ASSERT_TRUE(b->Publish("test", json::object{{"marker", true}}).ok());
  ASSERT_TRUE(WaitFor([&] { return a_inbox.size() >= 1; }));
  ASSERT_EQ(a_inbox.size(), 1u);
  EXPECT_TRUE(a_inbox.messages()[0].contains("marker"));
  EXPECT_EQ(Metric(*a, "uplink_console_replica_messages_sent_total{topic=\"test\"}"), kMessages);
  EXPECT_EQ(Metric(*b, "uplink_console_replica_messages_received_total{topic=\"test\"}"),
            kMessages);
}

TEST_F(ReplicaBusTest, RefusesAMessageOverTheNotificationLimit) {
  auto a = StartBus();
  auto b = StartBus();
  ASSERT_TRUE(a && b);
  Inbox inbox;
  auto sub = b->Subscribe("big", inbox.Handler());
  // {"body":"...","topic":"big","from":"<16 hex>"}: 44 bytes around the body.
  const size_t envelope = ToJson(json::object{{"body", ""}, {"topic", "big"},
                                              {"from", a->replica_id()}})
                              .size();
  std::string fits(kMaxReplicaMessageBytes - envelope, 'x');
  EXPECT_TRUE(a->Publish("big", json::object{{"body", fits}}).ok());
  Status over = a->Publish("big", json::object{{"body", fits + "x"}});
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("keep its body in a table"), std::string::npos) << over.message();
  ASSERT_TRUE(WaitFor([&] { return inbox.size() == 1; }));
  EXPECT_EQ(inbox.messages()[0].at("body").as_string().size(), fits.size());
}

TEST_F(ReplicaBusTest, DropsHostilePayloadsAndKeepsServing) {
  auto bus = StartBus();
  ASSERT_TRUE(bus);
  Inbox inbox;
  auto sub = bus->Subscribe("credentials", inbox.Handler());
  NotifyRaw("not json at all");
  NotifyRaw("[1, 2, 3]");
  NotifyRaw("{}");
  NotifyRaw(R"({"topic": 5})");
  NotifyRaw(R"({"topic": "credentials", "from": 7})");
  NotifyRaw(R"({"topic": "credentials", "x": )" + std::string(40, '[') + std::string(40, ']') +
            "}");
  NotifyRaw(R"({"topic": "somebody-elses"})");
  NotifyRaw(R"({"topic": "credentials", "pad": ")" + std::string(7'900, 'p') + R"("})");
  // The store's own message carries no "from": every replica acts on it, its sender included.
  NotifyRaw(R"({"topic":"credentials"})");
  ASSERT_TRUE(WaitFor([&] { return inbox.size() >= 2; }));
  // The last two: the 7,9xx-byte one (PostgreSQL's limit, not ours, applies to a raw NOTIFY)
  // and the plain one; both are well-formed.
  std::vector<json::object> got = inbox.messages();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].contains("pad"));
  EXPECT_EQ(got[1].size(), 1u);
  EXPECT_EQ(Metric(*bus, "uplink_console_replica_messages_dropped_total{reason=\"not_json_object\"}"),
            3);  // not JSON, an array, too deep
  EXPECT_EQ(Metric(*bus, "uplink_console_replica_messages_dropped_total{reason=\"no_topic\"}"), 3);
  EXPECT_EQ(Metric(*bus, "uplink_console_replica_messages_dropped_total{reason=\"unknown_topic\"}"),
            1);
  EXPECT_TRUE(bus->Health().ok());
}

class ReplicaBusRestartTest : public ReplicaBusTest {
 protected:
  bool RestartsTheServer() const override { return true; }
};

TEST_F(ReplicaBusRestartTest, ReconnectsAfterTheServerRestartsAndTellsSubscribersToResync) {
  auto a = StartBus();
  auto b = StartBus();
  ASSERT_TRUE(a && b);
  std::atomic<int> a_resyncs{0};
  auto resync = a->OnResync([&] { ++a_resyncs; });
  Inbox inbox;
  auto sub = a->Subscribe("test", inbox.Handler());

  ASSERT_TRUE(server_->Restart().ok()) << server_->Log();
  ASSERT_TRUE(WaitFor([&] { return a_resyncs.load() == 1; })) << server_->Log();
  EXPECT_TRUE(a->Health().ok());
  EXPECT_EQ(Metric(*a, "uplink_console_replica_bus_reconnects_total"), 1);
  // B may still be reconnecting: Unavailable until it has, then delivered.
  ASSERT_TRUE(WaitFor([&] { return b->Publish("test", json::object{{"after", "restart"}}).ok(); }));
  ASSERT_TRUE(WaitFor([&] { return inbox.size() == 1; }));
  EXPECT_EQ(inbox.messages()[0].at("after").as_string(), "restart");
}

TEST_F(ReplicaBusTest, ResyncsAfterALostConnectionOnceHealthyAgain) {
  auto bus = StartBus();
  ASSERT_TRUE(bus);
  std::atomic<int> resyncs{0};
  std::atomic<bool> healthy_in_resync{false};
  auto resync = bus->OnResync([&] {
    healthy_in_resync = bus->Health().ok();
    ++resyncs;
  });
  bus->DropConnectionForTest();
  ASSERT_TRUE(WaitFor([&] { return resyncs.load() == 1; }));
  EXPECT_TRUE(healthy_in_resync.load());
}

TEST_F(ReplicaBusTest, AnEndedSubscriptionGetsNothingMore) {
  auto a = StartBus();
  auto b = StartBus();
  ASSERT_TRUE(a && b);
  Inbox ended, kept;
  auto kept_sub = b->Subscribe("test", kept.Handler());
  {
    auto ended_sub = b->Subscribe("test", ended.Handler());
    ASSERT_TRUE(a->Publish("test", json::object{{"n", 1}}).ok());
    ASSERT_TRUE(WaitFor([&] { return ended.size() == 1; }));
  }
  ASSERT_TRUE(a->Publish("test", json::object{{"n", 2}}).ok());
  ASSERT_TRUE(WaitFor([&] { return kept.size() == 2; }));
  EXPECT_EQ(ended.size(), 1u);
}

}  // namespace
}  // namespace uplink::console
