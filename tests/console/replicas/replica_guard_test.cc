// Failed-authentication limits across replicas: two FailureGuards joined by real replica
// buses on one real PostgreSQL database reach each limit at the same total number of
// failures as one guard alone, however the failures are split between them.
#include <gtest/gtest.h>

#include <functional>

#include "common/json.h"
#include "common/metrics.h"
#include "console/auth/failure_guard.h"
#include "console/replicas/replica_bus.h"
#include "postgres_fixture.h"
#include "support/postgres_server.h"
#include "support/process.h"

namespace uplink::console {
namespace {

using uplink::testing::WaitFor;

constexpr char kChargesSeries[] = "uplink_console_auth_replica_charges_total";

// One replica's guard; the clock stands still, so no bucket refills during a test.
struct Replica {
  Replica(const Clock& clock, ReplicaBus* bus) : guard(clock, AuthRateLimits{}, metrics) {
    if (bus != nullptr) guard.JoinReplicas(*bus);
  }
  double charges() const { return metrics.Get(kChargesSeries); }
  metrics::Registry metrics;
  FailureGuard guard;
};

class ReplicaGuardTest : public testing::PostgresFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PostgresFixture::SetUp());
    for (auto* bus : {&bus_a_, &bus_b_}) {
      auto started = PostgresReplicaBus::Start(location());
      ASSERT_TRUE(started.ok()) << started.status().ToString();
      *bus = std::move(*started);
    }
    a_ = std::make_unique<Replica>(clock_, bus_a_.get());
    b_ = std::make_unique<Replica>(clock_, bus_b_.get());
  }

  // Failures until the first 429, the `i`th going to replicas[i % size], each waited for on
  // every other replica (the limit holds once a charge has arrived, which takes one
  // notification; waiting makes the count exact). `refuse` makes one refusal and returns
  // whether it was answered 429; `limited` checks before a credential is looked at.
  static int FailuresUntilLimited(
      const std::vector<Replica*>& replicas,
      const std::function<bool(FailureGuard&)>& refuse,
      const std::function<bool(FailureGuard&)>& limited) {
    for (int attempt = 0; attempt < 1000; ++attempt) {
      Replica& here = *replicas[attempt % replicas.size()];
      if (limited(here.guard)) return attempt;
      std::vector<double> before;
      for (Replica* other : replicas) before.push_back(other->charges());
      if (refuse(here.guard)) return attempt;
      for (size_t i = 0; i < replicas.size(); ++i) {
        if (replicas[i] == &here) continue;
        EXPECT_TRUE(WaitFor([&] { return replicas[i]->charges() > before[i]; }));
      }
    }
    return -1;
  }

  FakeClock clock_;
  std::unique_ptr<PostgresReplicaBus> bus_a_, bus_b_;
  std::unique_ptr<Replica> a_, b_;
};

TEST_F(ReplicaGuardTest, APrefixLimitHoldsAtTheSameTotalOverTwoReplicas) {
  auto refuse = [](FailureGuard& guard) {
    return guard
        .Refused(AuthRefusal{.kind = "agent_token",
                             .reason = "invalid_token",
                             .remote_address = "10.0.0.1",
                             .lookup_prefix = "upl_c_abcdef12",
                             .credential_matched = true})
        .has_value();
  };
  auto never = [](FailureGuard&) { return false; };
  Replica alone(clock_, nullptr);
  const int one = FailuresUntilLimited({&alone}, refuse, never);
  EXPECT_EQ(one, AuthRateLimits{}.per_prefix.burst);
  EXPECT_EQ(FailuresUntilLimited({a_.get(), b_.get()}, refuse, never), one);
}

TEST_F(ReplicaGuardTest, AnAddressLimitHoldsAtTheSameTotalOverTwoReplicas) {
  // Garbage tokens from one address, no prefix: only the address bucket is charged.
  auto refuse = [](FailureGuard& guard) {
    guard.Refused(AuthRefusal{.kind = "api_key", .reason = "invalid_credentials",
                              .remote_address = "2001:db8::7"});
    return false;
  };
  // Another host of the same /64: the same bucket on either replica.
  auto limited = [](FailureGuard& guard) {
    return guard.CheckAddress("2001:db8::99").has_value();
  };
  Replica alone(clock_, nullptr);
  const int one = FailuresUntilLimited({&alone}, refuse, limited);
  EXPECT_EQ(one, AuthRateLimits{}.per_address.burst);
  EXPECT_EQ(FailuresUntilLimited({a_.get(), b_.get()}, refuse, limited), one);
}

TEST_F(ReplicaGuardTest, AnEmailLimitHoldsAtTheSameTotalOverTwoReplicas) {
  int address = 0;  // a botnet: every failure from a new address, so only the email limits
  auto refuse = [&address](FailureGuard& guard) {
    std::string from = "10.1.0." + std::to_string(++address);
    guard.Refused(AuthRefusal{.kind = "password", .reason = "invalid_credentials",
                              .remote_address = from, .email = "victim@example.com"});
    return false;
  };
  auto limited = [](FailureGuard& guard) {
    return guard.CheckEmail("victim@example.com").has_value();
  };
  Replica alone(clock_, nullptr);
  const int one = FailuresUntilLimited({&alone}, refuse, limited);
  EXPECT_EQ(one, AuthRateLimits{}.per_email.burst);
  EXPECT_EQ(FailuresUntilLimited({a_.get(), b_.get()}, refuse, limited), one);
}

TEST_F(ReplicaGuardTest, AChargeFromAnotherReplicaCarriesNoCredential) {
  // Another subscriber on the channel sees what a replica sends: bucket keys only.
  std::mutex mutex;
  std::vector<std::string> seen;
  auto sub = bus_b_->Subscribe("auth_failure", [&](const json::object& message) {
    std::lock_guard lock(mutex);
    seen.push_back(ToJson(message));
  });
  a_->guard.Refused(AuthRefusal{.kind = "api_key", .reason = "invalid_credentials",
                                .remote_address = "192.0.2.9", .lookup_prefix = "upl_k_1234abcd"});
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mutex);
    return !seen.empty();
  }));
  std::lock_guard lock(mutex);
  auto parsed = ParseJson(seen[0]);
  ASSERT_TRUE(parsed.ok());
  json::object expected{{"address", "192.0.2.9"}, {"prefix", "upl_k_1234abcd"},
                        {"seq", 1},           {"age_ms", 0},
                        {"topic", "auth_failure"}, {"from", bus_a_->replica_id()}};
  EXPECT_EQ(parsed->as_object(), expected);
}

TEST_F(ReplicaGuardTest, AReplicaThatStartsLaterGetsTheChargesMadeBeforeIt) {
  // More charges than fit in one notification: they come in several, each under the limit.
  constexpr int kAddresses = 600;
  for (int i = 0; i < kAddresses; ++i) {
    a_->guard.Refused(AuthRefusal{.kind = "api_key", .reason = "invalid_credentials",
                                  .remote_address = "10.3." + std::to_string(i / 256) + "." +
                                                    std::to_string(i % 256)});
  }
  for (int i = 0; i < 29; ++i) {
    a_->guard.Refused(AuthRefusal{.kind = "api_key", .reason = "invalid_credentials",
                                  .remote_address = "10.3.0.0"});
  }
  ASSERT_TRUE(WaitFor([&] { return b_->charges() == kAddresses + 29; }));
  // A replica started now (or restarted) heard none of them; it asks as it joins.
  auto started = PostgresReplicaBus::Start(location());
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  Replica late(clock_, started->get());
  ASSERT_TRUE(WaitFor([&] {
    return late.metrics.Get("uplink_console_auth_replica_charges_recovered_total") ==
           kAddresses + 29;
  }));
  EXPECT_TRUE(late.guard.CheckAddress("10.3.0.0").has_value()) << "its 30 are spent";
  EXPECT_FALSE(late.guard.CheckAddress("10.3.0.1").has_value());
  // b heard each once already, and charges none twice (it may have heard some a third time:
  // a answers b's own request, made as b joined, whenever a's bus thread gets to it).
  ASSERT_TRUE(WaitFor([&] {
    return b_->metrics.Get("uplink_console_auth_replica_charges_duplicates_total") >=
           kAddresses + 29;
  }));
  EXPECT_EQ(b_->charges(), kAddresses + 29);
}

}  // namespace
}  // namespace uplink::console
