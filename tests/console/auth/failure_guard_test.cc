// What a FailureGuard among replicas sends while its bus is away: charges refused during an
// outage reach the other replicas once the bus is back, unless they no longer weigh on any
// bucket, and no more than kMaxUnsentCharges of them are kept. The bus is an in-memory one
// whose outages the test decides (the PostgreSQL bus reconnects after a random delay);
// replica_guard_test.cc runs the guards over the real bus.
#include "console/auth/failure_guard.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/metrics.h"

namespace uplink::console {
namespace {

using std::chrono::seconds;

class OutageBus final : public ReplicaBus {
 public:
  const std::string& replica_id() const override { return id_; }
  Status Publish(std::string_view topic, const json::object& fields) override {
    std::lock_guard lock(mutex_);
    if (down_) return UnavailableError("the replica bus is reconnecting to PostgreSQL");
    json::object message = fields;
    message["topic"] = topic;
    sent_.push_back(std::move(message));
    return Status::Ok();
  }
  Subscription Subscribe(std::string, Handler) override { return Subscription(this, ++next_); }
  Subscription OnResync(std::function<void()> handler) override {
    std::lock_guard lock(mutex_);
    resyncs_.emplace(++next_, std::move(handler));
    return Subscription(this, next_);
  }
  Status Health() const override { return Status::Ok(); }
  void RenderMetrics(std::string&) const override {}

  void GoDown() {
    std::lock_guard lock(mutex_);
    down_ = true;
  }
  // Back without telling anyone yet, as between the connection's return and the resync.
  void ComeBackQuietly() {
    std::lock_guard lock(mutex_);
    down_ = false;
  }
  // Back, and the subscribers resync, as the bus's thread does after a reconnect.
  void ComeBack() {
    std::vector<std::function<void()>> resyncs;
    {
      std::lock_guard lock(mutex_);
      down_ = false;
      for (const auto& [id, handler] : resyncs_) resyncs.push_back(handler);
    }
    for (const auto& resync : resyncs) resync();
  }
  std::vector<std::string> SentAddresses() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> addresses;
    for (const json::object& message : sent_) {
      addresses.push_back(std::string(message.at("address").as_string()));
    }
    return addresses;
  }

 private:
  void Unsubscribe(std::uint64_t id) override {
    std::lock_guard lock(mutex_);
    resyncs_.erase(id);
  }

  const std::string id_ = "replica-under-test";
  mutable std::mutex mutex_;
  bool down_ = false;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, std::function<void()>> resyncs_;
  std::vector<json::object> sent_;
};

class FailureGuardOutageTest : public ::testing::Test {
 protected:
  void SetUp() override { guard_.JoinReplicas(bus_); }

  void Refuse(const std::string& address) {
    guard_.Refused(AuthRefusal{.kind = "api_key", .reason = "invalid_credentials",
                               .remote_address = address});
  }

  FakeClock clock_;
  metrics::Registry metrics_;
  OutageBus bus_;  // before the guard, which unsubscribes from it when destroyed
  FailureGuard guard_{clock_, AuthRateLimits{}, metrics_};
};

TEST_F(FailureGuardOutageTest, ChargesRefusedDuringAnOutageAreSentWhenTheBusIsBack) {
  Refuse("10.0.0.1");
  bus_.GoDown();
  Refuse("10.0.0.2");
  Refuse("10.0.0.3");
  EXPECT_EQ(bus_.SentAddresses(), std::vector<std::string>{"10.0.0.1"});
  bus_.ComeBack();
  EXPECT_EQ(bus_.SentAddresses(),
            (std::vector<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3"}));
  bus_.ComeBack();  // a second resync sends nothing twice
  EXPECT_EQ(bus_.SentAddresses().size(), 3u);
}

TEST_F(FailureGuardOutageTest, KeptChargesGoWithTheNextChargeIfTheResyncWasMissed) {
  bus_.GoDown();
  Refuse("10.0.0.2");
  bus_.ComeBackQuietly();
  Refuse("10.0.0.3");
  EXPECT_EQ(bus_.SentAddresses(), (std::vector<std::string>{"10.0.0.3", "10.0.0.2"}));
}

TEST_F(FailureGuardOutageTest, AChargeThatNoLongerWeighsOnAnyBucketIsNotSent) {
  bus_.GoDown();
  Refuse("10.0.0.2");
  // The slowest bucket (an email's: 10 per 15 minutes) is full again 900 s after a charge.
  clock_.Advance(seconds(899));
  Refuse("10.0.0.3");
  clock_.Advance(seconds(2));
  bus_.ComeBack();
  EXPECT_EQ(bus_.SentAddresses(), std::vector<std::string>{"10.0.0.3"});
}

TEST_F(FailureGuardOutageTest, AtMostTheNewestKMaxUnsentChargesAreKept) {
  bus_.GoDown();
  const size_t refused = FailureGuard::kMaxUnsentCharges + 10;
  for (size_t i = 0; i < refused; ++i) Refuse("10.1." + std::to_string(i / 256) + "." +
                                              std::to_string(i % 256));
  bus_.ComeBack();
  std::vector<std::string> sent = bus_.SentAddresses();
  ASSERT_EQ(sent.size(), FailureGuard::kMaxUnsentCharges);
  EXPECT_EQ(sent.front(), "10.1.0.10");  // the first ten were dropped
  EXPECT_EQ(sent.back(), "10.1." + std::to_string((refused - 1) / 256) + "." +
                             std::to_string((refused - 1) % 256));
}

}  // namespace
}  // namespace uplink::console
