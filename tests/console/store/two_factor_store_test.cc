// The store's two-factor sign-in on a real database of each engine: enrolment, each factor used up once in the
// transaction of what it allows, recovery codes, and the settings and owner state that ride
// the cached connection rows agents are authenticated with.
#include <gtest/gtest.h>

#include <optional>

#include "common/json.h"
#include "console/store/sql_store.h"
#include "store_database.h"
#include "test_util.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using testing::StoreEngine;

const WallTime kStart = FromUnixSeconds(1'800'000'000);

AuditEvent Event(std::string action, const std::string& user_id) {
  AuditEvent event;
  event.at = kStart;
  event.actor_type = "user";
  event.actor_id = user_id;
  event.actor_label = user_id + "@example.com";
  event.credential = "session";
  event.action = std::move(action);
  event.target_type = "user";
  event.target_id = user_id;
  event.owner_id = user_id;
  event.outcome = "ok";
  return event;
}

class TwoFactorStoreTest : public ::testing::TestWithParam<StoreEngine> {
 protected:
  void SetUp() override {
    database_.emplace(GetParam());
    auto opened = database_->OpenStore();
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    for (const char* id : {"alice", "bob"}) {
      User user;
      user.id = id;
      user.email = std::string(id) + "@example.com";
      user.created_at = kStart;
      ASSERT_TRUE(store_->CreateUser(user, Event("user.create", id)).ok());
    }
    Connection connection;
    connection.id = "conn-alice";
    connection.owner_id = "alice";
    connection.agent_name = "agent";
    connection.cluster_name = "prod";
    connection.token_prefix = "agt_abcdefgh";
    connection.token_hash = std::string(64, 'a');
    connection.created_at = kStart;
    connection.expires_at = kStart + hours(24);
    ASSERT_TRUE(store_->CreateConnection(connection, Event("connection.create", "alice")).ok());
  }

  void Enable(const std::string& user_id, std::int64_t step, std::vector<RecoveryCode> codes = {}) {
    ASSERT_TRUE(store_->BeginTwoFactor({user_id, "v1.sealed-" + user_id, kStart},
                                       Event("two_factor.enroll", user_id))
                    .ok());
    Status enabled = store_->EnableTwoFactor(user_id, step, codes, Event("two_factor.enable", user_id));
    ASSERT_TRUE(enabled.ok()) << enabled.ToString();
  }

  std::int64_t Count(const std::string& sql) { return database_->Count(sql); }

  bool AgentRefused() {
    auto rows = store_->FindConnectionsByTokenPrefix("agt_abcdefgh");
    EXPECT_TRUE(rows.ok() && (*rows)->size() == 1);
    return rows.ok() && !(*rows)->empty() && (*rows)->front().owner_needs_two_factor;
  }

  std::optional<testing::TestDatabase> database_;
  std::unique_ptr<SqlStore> store_;
};

TEST_P(TwoFactorStoreTest, EnrolmentIsPendingUntilAFirstCodeAndThenCannotBeRestarted) {
  EXPECT_FALSE(store_->GetTwoFactor("alice")->has_value());
  ASSERT_TRUE(store_->BeginTwoFactor({"alice", "v1.first", kStart}, Event("two_factor.enroll", "alice")).ok());
  auto pending = store_->GetTwoFactor("alice");
  ASSERT_TRUE(pending.ok() && pending->has_value());
  EXPECT_EQ((*pending)->sealed_secret, "v1.first");
  EXPECT_FALSE((*pending)->enabled_at.has_value());
  EXPECT_FALSE(store_->GetUser("alice")->two_factor_enabled_at.has_value());
  // Beginning again replaces a pending secret.
  ASSERT_TRUE(store_->BeginTwoFactor({"alice", "v1.second", kStart}, Event("two_factor.enroll", "alice")).ok());
  EXPECT_EQ((*store_->GetTwoFactor("alice"))->sealed_secret, "v1.second");

  std::vector<RecoveryCode> codes = {{"", std::string(64, '1')}, {"", std::string(64, '2')}};
  ASSERT_TRUE(store_->EnableTwoFactor("alice", 100, codes, Event("two_factor.enable", "alice")).ok());
  auto enabled = *store_->GetTwoFactor("alice");
  EXPECT_EQ(enabled->enabled_at, kStart);
  EXPECT_EQ(enabled->last_used_step, 100);
  EXPECT_EQ(enabled->recovery_codes_left, 2);
  EXPECT_EQ(store_->GetUser("alice")->two_factor_enabled_at, kStart);
  EXPECT_EQ(store_->ListUsers()->front().two_factor_enabled_at, kStart);

  Status again = store_->BeginTwoFactor({"alice", "v1.third", kStart}, Event("two_factor.enroll", "alice"));
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*store_->GetTwoFactor("alice"))->sealed_secret, "v1.second");
  EXPECT_EQ(store_->EnableTwoFactor("alice", 200, {}, Event("two_factor.enable", "alice")).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->EnableTwoFactor("bob", 200, {}, Event("two_factor.enable", "bob")).code(),
            StatusCode::kFailedPrecondition);
  // Each change wrote its event; the refused ones wrote none.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'two_factor.enroll'"), 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'two_factor.enable'"), 1);
}

TEST_P(TwoFactorStoreTest, ACodeStepIsUsedUpOnceAndNeverBeforeTheLastOne) {
  Enable("alice", 100);
  Session session;
  session.id = "s1";
  session.user_id = "alice";
  session.lookup_prefix = "skt_s1";
  session.token_hash = "h1";
  session.created_at = kStart;
  session.expires_at = kStart + hours(12);
  ASSERT_TRUE(store_->CreateSessionWithSecondFactor(session, {101, ""}, Event("session.create", "alice")).ok());
  EXPECT_EQ((*store_->GetTwoFactor("alice"))->last_used_step, 101);
  // The same step again, or an earlier one: refused, and no session is made.
  for (std::int64_t step : {101, 100}) {
    session.id = "s-" + std::to_string(step);
    session.lookup_prefix = "skt_" + session.id;
    Status replay = store_->CreateSessionWithSecondFactor(session, {step, ""}, Event("session.create", "alice"));
    EXPECT_EQ(replay.code(), StatusCode::kFailedPrecondition) << step;
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sessions"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'session.create'"), 1);
  // A user without an enabled two-factor has no step to use.
  session.user_id = "bob";
  Status none = store_->CreateSessionWithSecondFactor(session, {500, ""}, Event("session.create", "bob"));
  EXPECT_EQ(none.code(), StatusCode::kFailedPrecondition);
}

TEST_P(TwoFactorStoreTest, ARecoveryCodeWorksOnceAndItsUseIsAudited) {
  Enable("alice", 100, {{"", std::string(64, '1')}, {"", std::string(64, '2')}});
  auto codes = store_->ListUnusedRecoveryCodes("alice");
  ASSERT_TRUE(codes.ok());
  ASSERT_EQ(codes->size(), 2u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM recovery_codes WHERE code_hash LIKE '1111%'"), 1);
  SecondFactorUse use{std::nullopt, codes->front().id};
  AuditEvent replaced = Event("two_factor.recovery_codes", "alice");
  ASSERT_TRUE(store_->ReplaceRecoveryCodes("alice", use, {{"", std::string(64, '3')}}, replaced).ok());
  auto used = store_->ListAudit({.action = "two_factor.recovery_code_used"});
  ASSERT_EQ(used->size(), 1u);
  EXPECT_EQ(used->front().detail,
            R"({"for":"two_factor.recovery_codes","recovery_codes_left":1})");
  EXPECT_EQ(used->front().target_id, "alice");
  // The replacement dropped both old codes: the one used, and the one that was left.
  auto left = store_->ListUnusedRecoveryCodes("alice");
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ(left->front().code_hash, std::string(64, '3'));
  EXPECT_EQ(store_->ReplaceRecoveryCodes("alice", use, {}, replaced).code(),
            StatusCode::kFailedPrecondition);
  // Bob cannot use Alice's code.
  Status foreign = store_->DisableTwoFactor("bob", SecondFactorUse{std::nullopt, left->front().id},
                                            Event("two_factor.disable", "bob"));
  EXPECT_NE(foreign.code(), StatusCode::kOk);
  EXPECT_EQ(store_->ListUnusedRecoveryCodes("alice")->size(), 1u);
}

TEST_P(TwoFactorStoreTest, DisablingForgetsTheSecretAndTheCodesAndAResetNeedsNoFactor) {
  Enable("alice", 100, {{"", std::string(64, '1')}});
  EXPECT_EQ(store_->DisableTwoFactor("alice", SecondFactorUse{100, ""}, Event("two_factor.disable", "alice")).code(),
            StatusCode::kFailedPrecondition);  // a replayed step turns nothing off
  EXPECT_TRUE(store_->GetTwoFactor("alice")->has_value());
  ASSERT_TRUE(store_->DisableTwoFactor("alice", SecondFactorUse{102, ""}, Event("two_factor.disable", "alice")).ok());
  EXPECT_FALSE(store_->GetTwoFactor("alice")->has_value());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM recovery_codes"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM two_factor"), 0);
  EXPECT_EQ(store_->DisableTwoFactor("alice", std::nullopt, Event("two_factor.reset", "alice")).code(),
            StatusCode::kNotFound);
  Enable("bob", 7);
  ASSERT_TRUE(store_->DisableTwoFactor("bob", std::nullopt, Event("two_factor.reset", "bob")).ok());
  EXPECT_FALSE(store_->GetUser("bob")->two_factor_enabled_at.has_value());
}

TEST_P(TwoFactorStoreTest, TheRequirementAndTheOwnersEnrolmentRideTheCachedConnectionRow) {
  EXPECT_FALSE(store_->GetConsoleSettings()->require_two_factor);
  EXPECT_FALSE(AgentRefused());
  ConsoleSettings on{true, std::nullopt};
  AuditEvent changed = Event("settings.update", "bob");
  changed.at = kStart + hours(1);
  ASSERT_TRUE(store_->SetConsoleSettings(on, changed).ok());
  auto settings = store_->GetConsoleSettings();
  EXPECT_TRUE(settings->require_two_factor);
  EXPECT_EQ(settings->updated_at, kStart + hours(1));
  // The write emptied the cache of connection rows: the very next lookup sees the refusal.
  EXPECT_TRUE(AgentRefused());
  EXPECT_TRUE(store_->GetConnection("conn-alice")->owner_needs_two_factor);
  // A pending enrolment is not enough; an enabled one is.
  ASSERT_TRUE(store_->BeginTwoFactor({"alice", "v1.s", kStart}, Event("two_factor.enroll", "alice")).ok());
  EXPECT_TRUE(AgentRefused());
  ASSERT_TRUE(store_->EnableTwoFactor("alice", 5, {}, Event("two_factor.enable", "alice")).ok());
  EXPECT_FALSE(AgentRefused());
  ASSERT_TRUE(store_->DisableTwoFactor("alice", std::nullopt, Event("two_factor.reset", "alice")).ok());
  EXPECT_TRUE(AgentRefused());
  ASSERT_TRUE(store_->SetConsoleSettings({false, std::nullopt}, Event("settings.update", "bob")).ok());
  EXPECT_FALSE(AgentRefused());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'settings.update'"), 2);
}

TEST_P(TwoFactorStoreTest, SettingsSurviveReopeningTheDatabase) {
  ASSERT_TRUE(store_->SetConsoleSettings({true, std::nullopt}, Event("settings.update", "bob")).ok());
  store_.reset();
  auto reopened = database_->OpenStore();
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE((*reopened)->GetConsoleSettings()->require_two_factor);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM console_settings"), 1);
}

INSTANTIATE_TEST_SUITE_P(Engines, TwoFactorStoreTest, testing::kStoreEngines,
                         testing::StoreEngineName);

}  // namespace
}  // namespace uplink::console
