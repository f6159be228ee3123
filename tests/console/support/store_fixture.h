// What the store's area tests start from: a store on a fresh database of the test's engine
// (TEST_P, instantiated with kStoreEngines), the admin
// `u1` created in it, and the connection `00000000000000c1` of that user ready to be created
// (each area creates it its own way: alone, with a namespace scope, or with an offer).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "console/store/sql_store.h"
#include "store_database.h"
#include "test_util.h"

namespace uplink::console::testing {

inline const WallTime kStoreT0 = FromUnixSeconds(1'800'000'000);
inline const std::string kStoreConnectionId = "00000000000000c1";

// An event the admin `u1` caused on `target_type` `target_id`.
inline AuditEvent AdminEvent(const std::string& action, const std::string& target_type,
                             const std::string& target_id, WallTime at = kStoreT0) {
  return AuditEvent{.at = at,
                    .actor_type = "user",
                    .actor_id = "u1",
                    .actor_label = "a@example.com",
                    .credential = "api_key",
                    .action = action,
                    .target_type = target_type,
                    .target_id = target_id,
                    .owner_id = "u1",
                    .outcome = "ok",
                    .detail = "{}"};
}

class SqlStoreFixture : public ::testing::TestWithParam<StoreEngine> {
 protected:
  void SetUp() override {
    database_.emplace(GetParam());
    auto opened = database_->OpenStore();
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    User user{.id = "u1", .email = "a@example.com", .role = Role::kAdmin, .created_at = kStoreT0};
    ASSERT_TRUE(store_->CreateUser(user, AdminEvent("user.create", "user", "u1")).ok());
    connection_.id = kStoreConnectionId;
    connection_.owner_id = "u1";
    connection_.agent_name = "uplink-agent";
    connection_.cluster_name = "prod";
    connection_.token_prefix = "agt_00000000";
    connection_.token_hash = std::string(64, 'a');
    connection_.created_at = kStoreT0;
    connection_.expires_at = kStoreT0 + std::chrono::hours(24);
  }

  // The first column of the first row of `sql`, read past the store.
  std::int64_t Count(const std::string& sql) { return database_->Count(sql); }

  std::optional<TestDatabase> database_;
  std::unique_ptr<SqlStore> store_;
  Connection connection_;
};

}  // namespace uplink::console::testing
