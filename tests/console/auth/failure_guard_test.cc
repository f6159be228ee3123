// FailureGuards among replicas over a bus with outages: charges refused while a replica's bus
// is away reach the others once it is back; a replica whose bus was away (or that just
// started) gets the charges the others made meanwhile, each charged once and weighing what it
// would have weighed had it been heard at once; stale charges are neither sent nor charged;
// what is kept stays bounded; messages no replica sends charge nothing. The bus is an
// in-memory one whose outages and deliveries the test decides (the PostgreSQL bus reconnects
// after a random delay); replica_guard_test.cc runs the guards over the real bus.
#include "console/auth/failure_guard.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/metrics.h"

namespace uplink::console {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kCharges[] = "uplink_console_auth_replica_charges_total";
constexpr char kRecovered[] = "uplink_console_auth_replica_charges_recovered_total";
constexpr char kDuplicates[] = "uplink_console_auth_replica_charges_duplicates_total";
constexpr char kInvalid[] = "uplink_console_auth_replica_messages_invalid_total";

// Replica buses in one process, as LISTEN/NOTIFY behaves: a message reaches every other bus
// that is up, later (when the test delivers), and one whose bus is down never gets it; a bus
// that comes back resyncs its subscribers. Single-threaded, as the tests are.
class BusNetwork {
 public:
  class Bus final : public ReplicaBus {
   public:
    Bus(BusNetwork& network, std::string id) : network_(network), id_(std::move(id)) {}
    const std::string& replica_id() const override { return id_; }
    Status Publish(std::string_view topic, const json::object& fields) override {
      if (down_) return UnavailableError("the replica bus is reconnecting to PostgreSQL");
      json::object message = fields;
      message["topic"] = topic;
      message["from"] = id_;
      if (ToJson(message).size() > kMaxReplicaMessageBytes) {
        return InvalidArgumentError("over the notification limit");
      }
      for (Bus* other : network_.buses_) {
        if (other != this && !other->down_) other->inbox_.push_back(message);
      }
      return Status::Ok();
    }
    Subscription Subscribe(std::string topic, Handler handler) override {
      topics_.emplace(++next_, std::pair{std::move(topic), std::move(handler)});
      return Subscription(this, next_);
    }
    Subscription OnResync(std::function<void()> handler) override {
      resyncs_.emplace(++next_, std::move(handler));
      return Subscription(this, next_);
    }
    Status Health() const override { return Status::Ok(); }
    void RenderMetrics(std::string&) const override {}

    // Lost: what was on its way to it is gone too.
    void GoDown() {
      down_ = true;
      inbox_.clear();
    }
    // Back without telling anyone yet, as between the connection's return and the resync.
    void ComeBackQuietly() { down_ = false; }
    // Back, and the subscribers resync, as the bus's thread does after a reconnect.
    void ComeBack() {
      down_ = false;
      std::vector<std::function<void()>> resyncs;
      for (const auto& [id, handler] : resyncs_) resyncs.push_back(handler);
      for (const auto& resync : resyncs) resync();
    }
    // A message as anyone who can connect to the database may send it.
    void Receive(json::object message) { inbox_.push_back(std::move(message)); }

   private:
    friend class BusNetwork;
    void Unsubscribe(std::uint64_t id) override {
      topics_.erase(id);
      resyncs_.erase(id);
    }
    // Hands one waiting message to its topic's handlers; false when none waits.
    bool DeliverOne() {
      if (inbox_.empty()) return false;
      json::object message = std::move(inbox_.front());
      inbox_.pop_front();
      std::vector<Handler> handlers;
      for (const auto& [id, subscribed] : topics_) {
        if (subscribed.first == StringAt(message, "topic")) handlers.push_back(subscribed.second);
      }
      for (const Handler& handler : handlers) handler(message);
      return true;
    }

    BusNetwork& network_;
    const std::string id_;
    bool down_ = false;
    std::uint64_t next_ = 0;
    std::map<std::uint64_t, std::pair<std::string, Handler>> topics_;
    std::map<std::uint64_t, std::function<void()>> resyncs_;
    std::deque<json::object> inbox_;
  };

  Bus& Join(std::string id) {
    buses_.push_back(new Bus(*this, std::move(id)));
    owned_.emplace_back(buses_.back());
    return *buses_.back();
  }
  // Until no message waits anywhere.
  void Deliver() {
    for (bool delivered = true; delivered;) {
      delivered = false;
      for (Bus* bus : buses_) delivered = bus->DeliverOne() || delivered;
    }
  }

 private:
  std::vector<Bus*> buses_;
  std::vector<std::unique_ptr<Bus>> owned_;
};

// One replica: its bus and its guard (which unsubscribes from the bus when it ends first).
struct Replica {
  Replica(BusNetwork& network, const Clock& clock, std::string id)
      : bus(network.Join(std::move(id))), guard(clock, AuthRateLimits{}, metrics) {
    guard.JoinReplicas(bus);
  }
  double Metric(const char* name) const { return metrics.Get(name); }
  BusNetwork::Bus& bus;
  metrics::Registry metrics;
  FailureGuard guard;
};

void RefuseFrom(FailureGuard& guard, const std::string& address) {
  guard.Refused(AuthRefusal{.kind = "api_key", .reason = "invalid_credentials",
                            .remote_address = address});
}

// Failures from `address` this guard takes before it refuses the address with 429.
int FailuresLeft(FailureGuard& guard, const std::string& address) {
  for (int failures = 0; failures < 1000; ++failures) {
    if (guard.CheckAddress(address).has_value()) return failures;
    RefuseFrom(guard, address);
  }
  return -1;
}

// The addresses of the charges `observer` heard, in order.
class ChargeObserver {
 public:
  explicit ChargeObserver(BusNetwork::Bus& bus)
      : one_(bus.Subscribe("auth_failure", [this](const json::object& m) { Add(m); })),
        several_(bus.Subscribe("auth_failures", [this](const json::object& m) {
          for (const json::value& charge : ArrayAt(m, "charges")) Add(charge.as_object());
        })) {}
  const std::vector<std::string>& addresses() const { return addresses_; }

 private:
  void Add(const json::object& charge) { addresses_.push_back(StringAt(charge, "address")); }
  std::vector<std::string> addresses_;
  ReplicaBus::Subscription one_, several_;
};

class FailureGuardReplicasTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  BusNetwork network_;  // before the replicas, whose guards unsubscribe from it
};

// What a replica sends while its bus is away.

class FailureGuardOutageTest : public FailureGuardReplicasTest {
 protected:
  std::vector<std::string> SentAddresses() {
    network_.Deliver();
    return observer_.addresses();
  }
  void Refuse(const std::string& address) { RefuseFrom(a_.guard, address); }

  Replica a_{network_, clock_, "a"};
  ChargeObserver observer_{network_.Join("observer")};
};

TEST_F(FailureGuardOutageTest, ChargesRefusedDuringAnOutageAreSentWhenTheBusIsBack) {
  Refuse("10.0.0.1");
  a_.bus.GoDown();
  Refuse("10.0.0.2");
  Refuse("10.0.0.3");
  EXPECT_EQ(SentAddresses(), std::vector<std::string>{"10.0.0.1"});
  a_.bus.ComeBack();
  EXPECT_EQ(SentAddresses(), (std::vector<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3"}));
  a_.bus.ComeBack();  // a second resync sends nothing twice
  EXPECT_EQ(SentAddresses().size(), 3u);
}

TEST_F(FailureGuardOutageTest, KeptChargesGoWithTheNextChargeIfTheResyncWasMissed) {
  a_.bus.GoDown();
  Refuse("10.0.0.2");
  a_.bus.ComeBackQuietly();
  Refuse("10.0.0.3");
  EXPECT_EQ(SentAddresses(), (std::vector<std::string>{"10.0.0.3", "10.0.0.2"}));
}

TEST_F(FailureGuardOutageTest, AChargeThatNoLongerWeighsOnAnyBucketIsNotSent) {
  a_.bus.GoDown();
  Refuse("10.0.0.2");
  // The slowest bucket (an email's: 10 per 15 minutes) is full again 900 s after a charge.
  clock_.Advance(seconds(899));
  Refuse("10.0.0.3");
  clock_.Advance(seconds(2));
  a_.bus.ComeBack();
  EXPECT_EQ(SentAddresses(), std::vector<std::string>{"10.0.0.3"});
}

TEST_F(FailureGuardOutageTest, AtMostTheNewestKMaxKeptChargesAreKept) {
  a_.bus.GoDown();
  const size_t refused = FailureGuard::kMaxKeptCharges + 10;
  for (size_t i = 0; i < refused; ++i) {
    Refuse("10.1." + std::to_string(i / 256) + "." + std::to_string(i % 256));
  }
  a_.bus.ComeBack();
  std::vector<std::string> sent = SentAddresses();
  ASSERT_EQ(sent.size(), FailureGuard::kMaxKeptCharges);
  EXPECT_EQ(sent.front(), "10.1.0.10");  // the first ten were dropped
  EXPECT_EQ(sent.back(), "10.1." + std::to_string((refused - 1) / 256) + "." +
                             std::to_string((refused - 1) % 256));
}

TEST_F(FailureGuardOutageTest, AChargeTooLargeForANotificationDoesNotHoldBackTheOthers) {
  a_.bus.GoDown();
  const std::string huge_email(kMaxReplicaMessageBytes, 'x');
  a_.guard.Refused(AuthRefusal{.kind = "password", .reason = "invalid_credentials",
                               .remote_address = "10.0.0.1", .email = huge_email});
  Refuse("10.0.0.2");
  a_.bus.ComeBack();
  EXPECT_EQ(SentAddresses(), std::vector<std::string>{"10.0.0.2"});
  a_.bus.ComeBack();  // and it is not tried again
  EXPECT_EQ(SentAddresses(), std::vector<std::string>{"10.0.0.2"});
}

// What a replica gets when its bus was away.

TEST_F(FailureGuardReplicasTest, AReplicaWhoseBusWasAwayEndsAsIfItHadHeardTheCharges) {
  Replica a(network_, clock_, "a");
  Replica b(network_, clock_, "b");
  metrics::Registry alone_metrics;
  FailureGuard alone(clock_, AuthRateLimits{}, alone_metrics);  // hears every failure
  network_.Deliver();
  b.bus.GoDown();
  for (int i = 0; i < 20; ++i) {
    RefuseFrom(a.guard, "192.0.2.7");
    RefuseFrom(alone, "192.0.2.7");
    clock_.Advance(milliseconds(100));
  }
  network_.Deliver();
  EXPECT_EQ(b.Metric(kCharges), 0) << "b missed them";
  clock_.Advance(seconds(5));  // the outage lasts; the buckets refill meanwhile
  b.bus.ComeBack();
  network_.Deliver();
  EXPECT_EQ(b.Metric(kRecovered), 20);
  EXPECT_EQ(b.Metric(kCharges), 20);
  // 30 per minute: 20 taken over 2 s, the first 7 s ago, 3.5 refilled since: 13.5 left, and b
  // refuses at the same attempt as a replica that heard every failure when it was made.
  const int left = FailuresLeft(alone, "192.0.2.7");
  EXPECT_EQ(left, 13);
  EXPECT_EQ(FailuresLeft(b.guard, "192.0.2.7"), left);
}

TEST_F(FailureGuardReplicasTest, AReplicaThatJustStartedGetsTheChargesMadeBeforeIt) {
  Replica a(network_, clock_, "a");
  for (int i = 0; i < 30; ++i) RefuseFrom(a.guard, "192.0.2.8");
  network_.Deliver();
  Replica b(network_, clock_, "b");  // a restarted replica: nothing heard yet
  network_.Deliver();
  EXPECT_EQ(b.Metric(kRecovered), 30);
  EXPECT_TRUE(b.guard.CheckAddress("192.0.2.8").has_value());
}

TEST_F(FailureGuardReplicasTest, AChargeHeardAlreadyIsNotChargedAgainWhenSentForAnother) {
  Replica a(network_, clock_, "a");
  Replica b(network_, clock_, "b");
  Replica c(network_, clock_, "c");
  network_.Deliver();
  for (int i = 0; i < 10; ++i) RefuseFrom(a.guard, "192.0.2.9");
  network_.Deliver();
  c.bus.GoDown();
  c.bus.ComeBack();  // c asks; a sends its ten again, to everyone
  network_.Deliver();
  EXPECT_EQ(b.Metric(kCharges), 10);
  EXPECT_EQ(b.Metric(kDuplicates), 10);
  EXPECT_EQ(c.Metric(kDuplicates), 10);
  EXPECT_EQ(b.Metric(kRecovered), 0);
  EXPECT_EQ(FailuresLeft(b.guard, "192.0.2.9"), 20);
  EXPECT_EQ(FailuresLeft(c.guard, "192.0.2.9"), 20);
}

TEST_F(FailureGuardReplicasTest, ChargesSentAfterTheSendersOutageAndAgainOnRequestCountOnce) {
  Replica a(network_, clock_, "a");
  Replica b(network_, clock_, "b");
  network_.Deliver();
  a.bus.GoDown();
  for (int i = 0; i < 5; ++i) RefuseFrom(a.guard, "192.0.2.10");
  a.bus.ComeBackQuietly();
  RefuseFrom(a.guard, "192.0.2.10");  // sent, and the five kept with it
  network_.Deliver();
  EXPECT_EQ(b.Metric(kRecovered), 5);
  a.bus.ComeBack();  // the resync a missed: it asks and sends what is unsent (nothing)
  b.bus.GoDown();
  b.bus.ComeBack();  // b asks; a sends all six again
  network_.Deliver();
  EXPECT_EQ(b.Metric(kCharges), 6);
  EXPECT_EQ(b.Metric(kDuplicates), 6);
  EXPECT_EQ(FailuresLeft(b.guard, "192.0.2.10"), 24);
}

TEST_F(FailureGuardReplicasTest, StaleChargesAreNeitherSentAgainNorCharged) {
  Replica a(network_, clock_, "a");
  Replica b(network_, clock_, "b");
  ChargeObserver observer(network_.Join("observer"));
  network_.Deliver();
  b.bus.GoDown();
  a.guard.Refused(AuthRefusal{.kind = "password", .reason = "invalid_credentials",
                              .remote_address = "192.0.2.11", .email = "victim@example.com"});
  network_.Deliver();
  clock_.Advance(seconds(901));  // past the slowest bucket's 900 s
  b.bus.ComeBack();
  network_.Deliver();
  EXPECT_EQ(observer.addresses().size(), 1u) << "sent once, as it was made; not again";
  EXPECT_EQ(b.Metric(kCharges), 0);
  // Nor is one that another replica sends this old.
  b.bus.Receive(json::object{
      {"topic", "auth_failures"}, {"from", "d"},
      {"charges", json::array{json::object{
                      {"email", "victim@example.com"}, {"seq", 1}, {"age_ms", 900'001}}}}});
  network_.Deliver();
  EXPECT_EQ(b.Metric(kCharges), 0);
  EXPECT_EQ(b.Metric(kInvalid), 0) << "stale, not malformed";
}

TEST_F(FailureGuardReplicasTest, WhatIsKeptStaysBoundedUnderManyCharges) {
  Replica a(network_, clock_, "a");
  Replica b(network_, clock_, "b");
  Replica c(network_, clock_, "c");
  network_.Deliver();
  for (int i = 0; i < 10'000; ++i) {
    const std::string address = "10.2." + std::to_string(i / 256) + "." + std::to_string(i % 256);
    RefuseFrom(a.guard, address);
    RefuseFrom(c.guard, address);
    if (i % 100 == 0) network_.Deliver();
  }
  network_.Deliver();
  EXPECT_EQ(a.guard.kept_charges(), FailureGuard::kMaxKeptCharges);
  EXPECT_EQ(b.Metric(kCharges), 20'000);
  EXPECT_EQ(b.guard.remembered_charges(), FailureGuard::kMaxRememberedCharges);
  // The newest each sends again are among those b remembers: none is charged twice.
  b.bus.GoDown();
  b.bus.ComeBack();
  network_.Deliver();
  EXPECT_EQ(b.Metric(kCharges), 20'000);
  EXPECT_EQ(b.Metric(kDuplicates), 2 * FailureGuard::kMaxKeptCharges);
  EXPECT_EQ(b.guard.remembered_charges(), FailureGuard::kMaxRememberedCharges);
}

TEST_F(FailureGuardReplicasTest, RememberedChargesAreForgottenOnceTheyNoLongerWeigh) {
  Replica a(network_, clock_, "a");
  Replica b(network_, clock_, "b");
  network_.Deliver();
  RefuseFrom(a.guard, "192.0.2.12");
  network_.Deliver();
  EXPECT_EQ(b.guard.remembered_charges(), 1u);
  clock_.Advance(seconds(3600));
  RefuseFrom(a.guard, "192.0.2.13");
  network_.Deliver();
  EXPECT_EQ(b.guard.remembered_charges(), 1u);
  EXPECT_EQ(a.guard.kept_charges(), 1u) << "the old one was dropped as the new one was kept";
}

// A replica of the version before charges had identities (a rolling upgrade) sends a charge
// without "seq" and "age_ms": each is charged as it is heard, as that version charges.
TEST_F(FailureGuardReplicasTest, AChargeFromAReplicaOfTheEarlierVersionIsChargedWhenHeard) {
  Replica b(network_, clock_, "b");
  network_.Deliver();
  const json::object legacy{{"topic", "auth_failure"}, {"from", "old"}, {"address", "192.0.2.30"}};
  b.bus.Receive(legacy);
  b.bus.Receive(legacy);
  network_.Deliver();
  EXPECT_EQ(b.Metric(kCharges), 2);
  EXPECT_EQ(b.Metric(kInvalid), 0);
  EXPECT_EQ(b.guard.remembered_charges(), 0u);
  EXPECT_EQ(FailuresLeft(b.guard, "192.0.2.30"), 28);
}

// Messages no replica sends: each is counted and logged, and charges nothing.
TEST_F(FailureGuardReplicasTest, MessagesNoReplicaSendsChargeNothing) {
  Replica b(network_, clock_, "b");
  ChargeObserver observer(network_.Join("observer"));
  network_.Deliver();
  auto charge = [](json::object fields) {
    json::object charge{{"address", "192.0.2.20"}, {"seq", 1}, {"age_ms", 0}};
    for (const auto& [key, value] : fields) {
      if (value.is_null()) {
        charge.erase(key);
      } else {
        charge[key] = value;
      }
    }
    return charge;
  };
  auto one = [&](json::object fields, json::value from = "d") {
    json::object message = charge(std::move(fields));
    message["topic"] = "auth_failure";
    if (!from.is_null()) message["from"] = from;
    return message;
  };
  auto several = [](json::value charges, json::object extra = {}) {
    json::object message{{"topic", "auth_failures"}, {"from", "d"}, {"charges", charges}};
    for (const auto& [key, value] : extra) message[key] = value;
    return message;
  };
  json::array too_many;
  for (size_t i = 1; i <= FailureGuard::kMaxChargesPerMessage + 1; ++i) {
    too_many.push_back(json::object{{"address", "192.0.2.21"}, {"seq", i}, {"age_ms", 0}});
  }
  const std::vector<json::object> hostile = {
      one({}, nullptr),                                // no "from": no identity
      one({}, 7),                                      // "from" not a string
      one({{"seq", nullptr}}),                         // no sequence
      one({{"seq", "1"}}),                             // a sequence as a string
      one({{"seq", 0}}),                               // sequences start at 1
      one({{"seq", -5}}),                              //
      one({{"seq", 1.5}}),                             //
      one({{"seq", 1e30}}),                            //
      one({{"age_ms", nullptr}}),                      // no age
      one({{"age_ms", -1}}),                           //
      one({{"age_ms", json::array{}}}),                //
      one({{"address", 3}}),                           // a key that is not a string
      one({{"address", ""}}),                          // an empty key
      one({{"address", nullptr}}),                     // no key at all
      one({{"password", "hunter2"}}),                  // an unknown field
      several(json::array{}),                          // nothing in it
      several("charges"),                              // not an array
      several(json::array{1, 2}),                      // not objects
      several(json::array{charge({{"seq", 2}}), charge({{"seq", "x"}})}),  // one bad: none
      several(json::array{charge({})}, {{"extra", true}}),                 // an unknown field
      several(json::array{charge({{"topic", "auth_failure"}})}),  // envelope fields inside
      several(too_many),                                          // more than a replica sends
      json::object{{"topic", "auth_resync"}, {"from", "d"}, {"all", true}},
      json::object{{"topic", "auth_resync"}},
  };
  for (const json::object& message : hostile) b.bus.Receive(message);
  network_.Deliver();
  EXPECT_EQ(b.Metric(kInvalid), static_cast<double>(hostile.size()));
  EXPECT_EQ(b.Metric(kCharges), 0);
  EXPECT_EQ(b.guard.remembered_charges(), 0u);
  EXPECT_EQ(FailuresLeft(b.guard, "192.0.2.20"), 30);
  EXPECT_EQ(FailuresLeft(b.guard, "192.0.2.21"), 30);

  // Well-formed but bogus: a sequence far out and an age far in the past are taken as they
  // are (a charge at most, once; none when stale).
  b.bus.Receive(one({{"seq", std::numeric_limits<std::uint64_t>::max()}}));
  b.bus.Receive(one({{"seq", std::numeric_limits<std::uint64_t>::max()}}));
  b.bus.Receive(one({{"seq", 2}, {"age_ms", std::numeric_limits<std::uint64_t>::max()}}));
  network_.Deliver();
  EXPECT_EQ(b.Metric(kCharges), 1);
  EXPECT_EQ(b.Metric(kDuplicates), 1);
  EXPECT_EQ(b.Metric(kInvalid), static_cast<double>(hostile.size()));
}

}  // namespace
}  // namespace uplink::console
