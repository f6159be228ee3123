#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>

#include "commit_held_database.h"
#include "common/json.h"
#include "console/setup.h"
#include "console/store/sql/sqlite_database.h"
#include "console/store/sql_store.h"
#include "store_database.h"
#include "support/process.h"
#include "test_util.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::CommitHeldDatabase;
using testing::RawCount;
using testing::ScratchDir;
using testing::StoreEngine;

const WallTime kT0 = FromUnixSeconds(1'800'000'000);
const std::string kTokenHash(64, 'a');
const std::string kConnectionId = "00000000000000c1";

// Runs SQL on an SQLite database file behind the store's back.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

User MakeUser(const std::string& id, const std::string& email, Role role = Role::kMember) {
  User user;
  user.id = id;
  user.email = email;
  user.role = role;
  user.created_at = kT0;
  return user;
}

// An event by user u1 through an API key; `owner` is whose thing it touched.
AuditEvent MakeAudit(const std::string& action, const std::string& target_id = "",
                     const std::string& owner = "u1") {
  AuditEvent event;
  event.at = kT0;
  event.actor_type = "user";
  event.actor_id = "u1";
  event.actor_label = "a@example.com";
  event.credential = "api_key";
  event.action = action;
  event.target_type = "connection";
  event.target_id = target_id;
  event.owner_id = owner;
  event.source_address = "192.0.2.7";
  event.outcome = "ok";
  event.detail = "{}";
  return event;
}

ApiKey MakeApiKey(const std::string& id, const std::string& user_id, const std::string& prefix,
                  WallTime created_at = kT0) {
  ApiKey key;
  key.id = id;
  key.user_id = user_id;
  key.name = "key " + id;
  key.lookup_prefix = prefix;
  key.token_hash = "hash-" + id;
  key.created_at = created_at;
  return key;
}

Session MakeSession(const std::string& id, const std::string& user_id,
                    WallTime expires_at = kT0 + hours(12)) {
  Session session;
  session.id = id;
  session.user_id = user_id;
  session.lookup_prefix = "skt_" + id;
  session.token_hash = "hash-" + id;
  session.created_at = kT0;
  session.expires_at = expires_at;
  return session;
}

Connection MakeConnection(const std::string& id, const std::string& owner,
                          const std::string& cluster_name) {
  Connection c;
  c.id = id;
  c.owner_id = owner;
  c.agent_name = "agent";
  c.cluster_name = cluster_name;
  c.token_prefix = "agt_" + id.substr(0, 8);
  c.token_hash = kTokenHash;
  c.created_at = kT0;
  c.expires_at = kT0 + hours(24);
  return c;
}

Handover MakeHandover(const std::string& id, const std::string& connection_id,
                      WallTime created_at = kT0) {
  Handover handover;
  handover.id = id;
  handover.connection_id = connection_id;
  handover.lookup_prefix = "hoc_" + id;
  handover.code_hash = "code-hash-" + id;
  handover.created_at = created_at;
  handover.expires_at = created_at + minutes(10);
  return handover;
}

Node MakeNode(int i, bool ready = true) {
  Node node;
  node.name = "gpu-node-" + std::to_string(i);
  node.uid = "uid-" + std::to_string(i);
  node.ready = ready;
  node.gpu_resource = "nvidia.com/gpu";
  node.gpu_capacity = 8;
  node.gpu_allocatable = 8;
  node.gpu_product = "NVIDIA-H100-80GB-HBM3";
  node.resources = {{"nvidia.com/gpu", 8, 8}};
  node.taints = {{"nvidia.com/gpu", "", "NoSchedule"}};
  return node;
}

InventoryReport MakeReport(const std::string& cluster_uid, int node_count,
                           const std::string& instance = "inventory-7d9f-abcde") {
  InventoryReport report;
  report.agent_version = "0.1.0";
  report.agent_instance = instance;
  report.cluster_uid = cluster_uid;
  report.selector = "nvidia.com/gpu.present=true";
  report.collected_at = kT0;
  for (int i = 0; i < node_count; ++i) report.nodes.push_back(MakeNode(i));
  return report;
}

// The template the agent API passes with every report: the store writes it only as a
// binding or a refusal.
AuditEvent ReportAudit(const std::string& connection_id = kConnectionId) {
  AuditEvent event;
  event.at = kT0;
  event.actor_type = "agent";
  event.actor_id = connection_id;
  event.actor_label = "agt_00000000";
  event.credential = "agent_token";
  event.action = "connection.report";
  event.target_type = "connection";
  event.target_id = connection_id;
  event.owner_id = "u1";
  event.outcome = "ok";
  return event;
}

class SqlStoreTest : public ::testing::TestWithParam<StoreEngine> {
 protected:
  // The test's engine: its parameter, unless a fixture is for one engine only.
  virtual StoreEngine Engine() const { return GetParam(); }

  void SetUp() override {
    database_.emplace(Engine());
    auto opened = database_->OpenStore();
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    ASSERT_TRUE(store_->CreateUser(MakeUser("u1", "a@example.com", Role::kAdmin),
                                   MakeAudit("user.create", "u1"))
                    .ok());
    ASSERT_TRUE(
        store_->CreateUser(MakeUser("u2", "b@example.com"), MakeAudit("user.create", "u2", "u2"))
            .ok());
  }

  std::int64_t Count(const std::string& sql) { return database_->Count(sql); }
  std::int64_t AuditCount() { return Count("SELECT COUNT(*) FROM audit_events"); }

  std::vector<AuditEvent> Audit(AuditQuery query = {}) {
    auto events = store_->ListAudit(query);
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    return events.value_or(std::vector<AuditEvent>{});
  }

  AuditEvent NewestAudit() {
    auto events = Audit({.limit = 1});
    return events.empty() ? AuditEvent{} : events.front();
  }

  void CreateConnection(const std::string& id = kConnectionId, const std::string& owner = "u1",
                        const std::string& cluster_name = "prod") {
    ASSERT_TRUE(store_
                    ->CreateConnection(MakeConnection(id, owner, cluster_name),
                                       MakeAudit("connection.create", id, owner))
                    .ok());
  }

  Status Report(const InventoryReport& report, WallTime at,
                const std::string& token_hash = kTokenHash) {
    return store_->AcceptReport(kConnectionId, token_hash, report, at, ReportAudit());
  }

  // Opens held_store_, a second store on the test database, whose writer's COMMIT can be
  // held: what may, and what must not, wait for the writer meanwhile.
  void OpenHeldStore() {
    auto opened = testing::OpenStoreWithHeldCommits(*database_, held_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    held_store_ = std::move(opened).value();
  }

  // Starts `write` on held_store_ in the background, caught in its COMMIT (as an fsync or a
  // slow network holds one) until ReleaseHeldWrite().
  void HoldInItsCommit(std::function<Status(SqlStore&)> write) {
    std::promise<void> reached;
    held_->HoldNextCommit(&reached, release_.get_future().share());
    held_write_ = std::async(std::launch::async,
                             [this, write = std::move(write)] { return write(*held_store_); });
    if (reached.get_future().wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      FAIL() << "the write never reached its COMMIT: " << ReleaseHeldWrite().ToString();
    }
  }

  // A connection, held_store_, and a first report of the connection held in its COMMIT.
  void HoldAReportInItsCommit() {
    CreateConnection();
    ASSERT_NO_FATAL_FAILURE(OpenHeldStore());
    ASSERT_NO_FATAL_FAILURE(HoldInItsCommit(ReportAt(kT0)));
  }

  static std::function<Status(SqlStore&)> ReportAt(WallTime at) {
    return [at](SqlStore& store) {
      return store.AcceptReport(kConnectionId, kTokenHash, MakeReport("uid-a", 1), at,
                                ReportAudit());
    };
  }

  // Lets the held COMMIT through; the write's outcome.
  Status ReleaseHeldWrite() {
    if (!released_) release_.set_value();
    released_ = true;
    return held_write_.get();
  }

  void TearDown() override {
    if (held_write_.valid()) (void)ReleaseHeldWrite();
  }

  std::optional<testing::TestDatabase> database_;
  std::unique_ptr<SqlStore> store_;
  std::unique_ptr<SqlStore> held_store_;
  testing::CommitHeldDatabase* held_ = nullptr;  // held_store_'s writer's connection
  std::promise<void> release_;
  bool released_ = false;
  std::future<Status> held_write_;
};

// Checks of SQLite's own file.
class SqliteFileTest : public SqlStoreTest {
 protected:
  StoreEngine Engine() const override { return StoreEngine::kSqlite; }
};

// --- Opening and migrations ------------------------------------------------------------------

TEST_P(SqlStoreTest, OpeningAnEmptyFileAppliesEveryMigrationAndRecordsIt) {
  EXPECT_EQ(Count("SELECT MAX(version) FROM schema_migrations"),
            SqlStore::LatestSchemaVersion());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM schema_migrations"),
            SqlStore::LatestSchemaVersion());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM users"), 2);
}

TEST_F(SqliteFileTest, DatabaseFileIsReadableByItsOwnerOnlyAndUsesWal) {
  const std::string& path = database_->sqlite_path();
  struct stat info;
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST_P(SqlStoreTest, ReopeningKeepsDataAndDoesNotReapplyMigrations) {
  CreateConnection();
  store_.reset();
  auto reopened = database_->OpenStore();
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(Count("SELECT COUNT(*) FROM schema_migrations"),
            SqlStore::LatestSchemaVersion());
  auto connection = (*reopened)->GetConnection(kConnectionId);
  ASSERT_TRUE(connection.ok());
  EXPECT_EQ(connection->cluster_name, "prod");
  EXPECT_EQ(*(*reopened)->CountUsers(), 2);
}

TEST_P(SqlStoreTest, DatabaseFromANewerBinaryIsRefusedWithAClearError) {
  store_.reset();
  database_->Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)");
  auto reopened = database_->OpenStore();
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(reopened.status().message().find("schema version 999"), std::string::npos);
  EXPECT_NE(reopened.status().message().find("newer uplink-console"), std::string::npos);
}

// The schema uplink-console 0.1 wrote (schema version 1), frozen here so that the upgrade
// is tested from what is really on disk, not from the migration list it is part of.
constexpr const char* kVersion1Schema = R"sql(
CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
INSERT INTO schema_migrations VALUES (1, 1700000000);
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  is_admin INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  lookup_prefix TEXT NOT NULL,
  token_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX api_keys_by_prefix ON api_keys(lookup_prefix);
CREATE TABLE connections (
  id TEXT PRIMARY KEY,
  owner_id TEXT NOT NULL REFERENCES users(id),
  agent_name TEXT NOT NULL,
  cluster_name TEXT NOT NULL,
  token_prefix TEXT NOT NULL,
  token_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  revoked_at INTEGER,
  last_report_at INTEGER,
  cluster_uid TEXT,
  agent_version TEXT NOT NULL DEFAULT '',
  selector TEXT NOT NULL DEFAULT '',
  collected_at INTEGER,
  node_count INTEGER NOT NULL DEFAULT 0,
  nodes_ready INTEGER NOT NULL DEFAULT 0,
  gpu_capacity INTEGER NOT NULL DEFAULT 0,
  gpu_allocatable INTEGER NOT NULL DEFAULT 0,
  gpus_ready INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX connections_by_owner ON connections(owner_id, created_at);
CREATE INDEX connections_by_token_prefix ON connections(token_prefix);
CREATE UNIQUE INDEX connections_live_cluster_name ON connections(owner_id, cluster_name)
  WHERE revoked_at IS NULL;
CREATE TABLE connection_nodes (
  id INTEGER PRIMARY KEY,
  connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  uid TEXT NOT NULL,
  ready INTEGER NOT NULL,
  unschedulable INTEGER NOT NULL,
  gpu_resource TEXT NOT NULL,
  gpu_capacity INTEGER NOT NULL,
  gpu_allocatable INTEGER NOT NULL,
  gpu_product TEXT NOT NULL,
  error TEXT
);
CREATE INDEX connection_nodes_by_connection ON connection_nodes(connection_id, position);
CREATE TABLE node_resources (
  node_id INTEGER NOT NULL REFERENCES connection_nodes(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  capacity INTEGER NOT NULL,
  allocatable INTEGER NOT NULL
);
CREATE INDEX node_resources_by_node ON node_resources(node_id);
CREATE TABLE node_taints (
  node_id INTEGER NOT NULL REFERENCES connection_nodes(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  effect TEXT NOT NULL
);
CREATE INDEX node_taints_by_node ON node_taints(node_id);
)sql";

TEST(SqlStoreMigrationTest, AVersion1DatabaseIsUpgradedWithItsRowsAndSensibleDefaults) {
  ScratchDir dir;
  std::string path = dir.File("console.db");
  RawExec(path, kVersion1Schema);
  RawExec(path,
          "INSERT INTO users VALUES ('admin1', 'Admin@Example.COM', 1, 1700000000);"
          "INSERT INTO users VALUES ('member1', 'member@example.com', 0, 1700000001);"
          "INSERT INTO api_keys VALUES ('key1', 'admin1', 'uk_AbCdEfGh', 'hash1', 1700000000);"
          "INSERT INTO connections (id, owner_id, agent_name, cluster_name, token_prefix, "
          "token_hash, created_at, expires_at, cluster_uid, node_count, last_report_at) "
          "VALUES ('conn1', 'admin1', 'gpu-agent', 'prod-a', 'agt_12345678', 'thash', "
          "1700000000, 1800000000, 'uid-a', 4, 1700000100);");

  auto opened = SqlStore::OpenSqlite(path);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  SqlStore& store = **opened;
  EXPECT_EQ(RawCount(path, "SELECT MAX(version) FROM schema_migrations"),
            SqlStore::LatestSchemaVersion());

  auto admin = store.GetUser("admin1");
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  EXPECT_EQ(admin->role, Role::kAdmin);
  EXPECT_EQ(admin->email, "admin@example.com");
  EXPECT_EQ(admin->password_hash, "");
  EXPECT_FALSE(admin->deactivated_at.has_value());
  EXPECT_EQ(admin->created_at, FromUnixSeconds(1700000000));
  EXPECT_EQ(store.GetUser("member1")->role, Role::kMember);
  EXPECT_EQ(store.FindUserByEmail("ADMIN@example.com")->id, "admin1");
  // is_admin is gone, so it cannot disagree with role.
  EXPECT_EQ(RawCount(path, "SELECT COUNT(*) FROM pragma_table_info('users') "
                           "WHERE name = 'is_admin'"),
            0);

  auto key = store.GetApiKey("key1");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->name, "init");
  EXPECT_EQ(key->lookup_prefix, "uk_AbCdEfGh");
  EXPECT_FALSE(key->expires_at.has_value());
  EXPECT_FALSE(key->revoked_at.has_value());

  auto connection = store.GetConnection("conn1");
  ASSERT_TRUE(connection.ok());
  EXPECT_EQ(connection->cluster_uid, "uid-a");
  EXPECT_EQ(connection->totals.nodes, 4);
  // Liveness counts every call from schema 6 on; until then only reports were seen.
  EXPECT_EQ(connection->last_seen_at, FromUnixSeconds(1700000100));
  EXPECT_FALSE(connection->owner_deactivated_at.has_value());
  EXPECT_FALSE(store.LatestHandover("conn1")->has_value());
  EXPECT_TRUE(store.ListAgents("conn1", 100)->empty());
  EXPECT_TRUE(store.ListAudit({})->empty());

  // The upgraded database takes every new kind of row.
  EXPECT_TRUE(store.CreateSession(MakeSession("s1", "admin1"), MakeAudit("session.create")).ok());
  EXPECT_EQ(store.CreateUser(MakeUser("u3", "MEMBER@example.com"), MakeAudit("user.create"))
                .code(),
            StatusCode::kConflict);
}

// --- Users -----------------------------------------------------------------------------------

TEST_P(SqlStoreTest, UsersRoundTripAndAreListedInCreationOrder) {
  User carol = MakeUser("u3", "carol@example.com", Role::kAdmin);
  carol.password_hash = "$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA";
  carol.created_at = kT0 + seconds(5);
  carol.deactivated_at = kT0 + seconds(6);
  ASSERT_TRUE(store_->CreateUser(carol, MakeAudit("user.create", "u3", "u3")).ok());

  auto read = store_->GetUser("u3");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->email, carol.email);
  EXPECT_EQ(read->role, Role::kAdmin);
  EXPECT_EQ(read->password_hash, carol.password_hash);
  EXPECT_EQ(read->created_at, carol.created_at);
  EXPECT_EQ(read->deactivated_at, carol.deactivated_at);
  EXPECT_EQ(store_->GetUser("u2")->role, Role::kMember);

  auto users = store_->ListUsers();
  ASSERT_TRUE(users.ok());
  ASSERT_EQ(users->size(), 3u);
  EXPECT_EQ((*users)[0].id, "u1");
  EXPECT_EQ((*users)[1].id, "u2");
  EXPECT_EQ((*users)[2].id, "u3");
  EXPECT_EQ(*store_->CountUsers(), 3);
  EXPECT_EQ(store_->GetUser("nobody").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->FindUserByEmail("nobody@example.com").status().code(),
            StatusCode::kNotFound);
}

TEST_P(SqlStoreTest, EmailsAreStoredLowerCaseAndComparedCaseInsensitively) {
  ASSERT_TRUE(
      store_->CreateUser(MakeUser("u3", "Mixed.Case@Example.COM"), MakeAudit("user.create"))
          .ok());
  EXPECT_EQ(store_->GetUser("u3")->email, "mixed.case@example.com");
  auto found = store_->FindUserByEmail("MIXED.case@example.com");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->id, "u3");

  std::int64_t audit_before = AuditCount();
  Status taken =
      store_->CreateUser(MakeUser("u4", "mixed.CASE@example.com"), MakeAudit("user.create"));
  EXPECT_EQ(taken.code(), StatusCode::kConflict);
  EXPECT_NE(taken.message().find("taken"), std::string::npos) << taken.message();
  EXPECT_EQ(AuditCount(), audit_before) << "a refused create left an audit event";
  EXPECT_EQ(store_->GetUser("u4").status().code(), StatusCode::kNotFound);
}

TEST_P(SqlStoreTest, TheLastActiveAdminCannotBeDeactivatedAndNothingIsWritten) {
  std::int64_t audit_before = AuditCount();
  Status refused = store_->SetUserDeactivated("u1", kT0, MakeAudit("user.deactivate", "u1", "u1"));
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("no active admin"), std::string::npos) << refused.message();
  EXPECT_FALSE(store_->GetUser("u1")->deactivated_at.has_value());
  EXPECT_EQ(AuditCount(), audit_before);

  // With a second admin, one of them may go, and then the other may not.
  ASSERT_TRUE(store_->CreateUser(MakeUser("u3", "c@example.com", Role::kAdmin),
                                 MakeAudit("user.create", "u3", "u3"))
                  .ok());
  EXPECT_TRUE(store_->SetUserDeactivated("u1", kT0, MakeAudit("user.deactivate", "u1", "u1")).ok());
  EXPECT_EQ(store_->SetUserDeactivated("u3", kT0, MakeAudit("user.deactivate", "u3", "u3")).code(),
            StatusCode::kFailedPrecondition);
}

TEST_P(SqlStoreTest, DeactivationRevokesLiveSessionsAndReactivationDoesNotRestoreThem) {
  ASSERT_TRUE(store_->CreateSession(MakeSession("s1", "u2"), MakeAudit("session.create")).ok());
  Session revoked_earlier = MakeSession("s2", "u2");
  revoked_earlier.revoked_at = kT0 + seconds(1);
  ASSERT_TRUE(store_->CreateSession(revoked_earlier, MakeAudit("session.create")).ok());
  Session expired = MakeSession("s3", "u2", kT0 + seconds(2));
  ASSERT_TRUE(store_->CreateSession(expired, MakeAudit("session.create")).ok());
  ASSERT_TRUE(store_->CreateSession(MakeSession("s4", "u1"), MakeAudit("session.create")).ok());
  CreateConnection(kConnectionId, "u2");

  const WallTime at = kT0 + minutes(1);
  ASSERT_TRUE(store_->SetUserDeactivated("u2", at, MakeAudit("user.deactivate", "u2", "u2")).ok());
  EXPECT_EQ(store_->GetUser("u2")->deactivated_at, at);
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s1")->at(0).revoked_at, at);
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s2")->at(0).revoked_at, kT0 + seconds(1))
      << "an earlier revocation keeps its time";
  EXPECT_FALSE(store_->FindSessionsByPrefix("skt_s3")->at(0).revoked_at.has_value())
      << "an expired session is not live";
  EXPECT_FALSE(store_->FindSessionsByPrefix("skt_s4")->at(0).revoked_at.has_value())
      << "another user's session was revoked";
  EXPECT_EQ(store_->GetConnection(kConnectionId)->owner_deactivated_at, at);
  EXPECT_EQ(NewestAudit().action, "user.deactivate");

  ASSERT_TRUE(store_
                  ->SetUserDeactivated("u2", std::nullopt,
                                       MakeAudit("user.reactivate", "u2", "u2"))
                  .ok());
  EXPECT_FALSE(store_->GetUser("u2")->deactivated_at.has_value());
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s1")->at(0).revoked_at, at);
  EXPECT_FALSE(store_->GetConnection(kConnectionId)->owner_deactivated_at.has_value());
  EXPECT_EQ(NewestAudit().action, "user.reactivate");

  std::int64_t audit_before = AuditCount();
  EXPECT_EQ(store_->SetUserDeactivated("nobody", at, MakeAudit("user.deactivate")).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(AuditCount(), audit_before);
}

TEST_P(SqlStoreTest, SetPasswordRevokesEverySessionButTheOneKept) {
  for (const char* id : {"s1", "s2", "s3"}) {
    ASSERT_TRUE(store_->CreateSession(MakeSession(id, "u2"), MakeAudit("session.create")).ok());
  }
  const WallTime at = kT0 + minutes(1);
  ASSERT_TRUE(store_->SetPassword("u2", "$argon2id$new", "s2", at, MakeAudit("user.password"))
                  .ok());
  EXPECT_EQ(store_->GetUser("u2")->password_hash, "$argon2id$new");
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s1")->at(0).revoked_at, at);
  EXPECT_FALSE(store_->FindSessionsByPrefix("skt_s2")->at(0).revoked_at.has_value());
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s3")->at(0).revoked_at, at);
  EXPECT_EQ(NewestAudit().action, "user.password");

  // Without a session to keep (an admin, or an API key, changing it) every one goes.
  ASSERT_TRUE(store_->SetPassword("u2", "$argon2id$newer", "", at + seconds(1),
                                  MakeAudit("user.password"))
                  .ok());
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s2")->at(0).revoked_at, at + seconds(1));
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s1")->at(0).revoked_at, at);

  std::int64_t audit_before = AuditCount();
  EXPECT_EQ(store_->SetPassword("nobody", "h", "", at, MakeAudit("user.password")).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(AuditCount(), audit_before);
}

// --- API keys --------------------------------------------------------------------------------

TEST_P(SqlStoreTest, ApiKeysRoundTripAreListedPerUserAndFoundByARepeatablePrefix) {
  ApiKey ci = MakeApiKey("k1", "u1", "uk_AAAAAAAA", kT0);
  ci.name = "ci";
  ci.expires_at = kT0 + hours(24 * 30);
  ASSERT_TRUE(store_->CreateApiKey(ci, MakeAudit("api_key.create", "k1")).ok());
  ASSERT_TRUE(store_
                  ->CreateApiKey(MakeApiKey("k2", "u2", "uk_AAAAAAAA", kT0 + seconds(1)),
                                 MakeAudit("api_key.create", "k2", "u2"))
                  .ok());
  ASSERT_TRUE(store_
                  ->CreateApiKey(MakeApiKey("k3", "u1", "uk_CCCCCCCC", kT0 + seconds(2)),
                                 MakeAudit("api_key.create", "k3"))
                  .ok());

  auto read = store_->GetApiKey("k1");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->name, "ci");
  EXPECT_EQ(read->user_id, "u1");
  EXPECT_EQ(read->token_hash, "hash-k1");
  EXPECT_EQ(read->expires_at, ci.expires_at);
  EXPECT_FALSE(read->revoked_at.has_value());

  auto mine = store_->ListApiKeys("u1");
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].id, "k1");
  EXPECT_EQ((*mine)[1].id, "k3");
  EXPECT_EQ(store_->FindApiKeysByPrefix("uk_AAAAAAAA")->size(), 2u);
  EXPECT_TRUE(store_->FindApiKeysByPrefix("uk_BBBBBBBB")->empty());
  EXPECT_EQ(store_->GetApiKey("nope").status().code(), StatusCode::kNotFound);

  std::int64_t audit_before = AuditCount();
  EXPECT_EQ(store_->CreateApiKey(MakeApiKey("k9", "nobody", "uk_99999999"),
                                 MakeAudit("api_key.create"))
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(AuditCount(), audit_before);
}

TEST_P(SqlStoreTest, RevokingAnApiKeyKeepsTheFirstTimeAndAuditsOnlyTheChange) {
  ASSERT_TRUE(store_->CreateApiKey(MakeApiKey("k1", "u1", "uk_AAAAAAAA"),
                                   MakeAudit("api_key.create", "k1"))
                  .ok());
  ASSERT_TRUE(store_->RevokeApiKey("k1", kT0 + seconds(5), MakeAudit("api_key.revoke", "k1")).ok());
  std::int64_t audit_after_first = AuditCount();
  ASSERT_TRUE(store_->RevokeApiKey("k1", kT0 + seconds(9), MakeAudit("api_key.revoke", "k1")).ok());
  EXPECT_EQ(store_->GetApiKey("k1")->revoked_at, kT0 + seconds(5));
  EXPECT_EQ(AuditCount(), audit_after_first) << "a revoke that changed nothing was audited";
  EXPECT_EQ(store_->RevokeApiKey("nope", kT0, MakeAudit("api_key.revoke")).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(AuditCount(), audit_after_first);
}

TEST_P(SqlStoreTest, UserWithApiKeyIsCreatedWhollyOrNotAtAll) {
  ASSERT_TRUE(store_
                  ->CreateUserWithApiKey(MakeUser("u9", "nine@example.com", Role::kAdmin),
                                         MakeApiKey("k9", "u9", "uk_99999999"),
                                         MakeAudit("user.create", "u9", "u9"))
                  .ok());
  EXPECT_EQ(store_->FindApiKeysByPrefix("uk_99999999")->size(), 1u);
  EXPECT_EQ(NewestAudit().target_id, "u9");
  std::int64_t audit_before = AuditCount();
  // The key's id repeats, so the key insert fails and the user must not remain.
  EXPECT_FALSE(store_
                   ->CreateUserWithApiKey(MakeUser("u10", "ten@example.com", Role::kAdmin),
                                          MakeApiKey("k9", "u10", "uk_10101010"),
                                          MakeAudit("user.create", "u10", "u10"))
                   .ok());
  EXPECT_EQ(store_->GetUser("u10").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(AuditCount(), audit_before);
}

// --- Sessions --------------------------------------------------------------------------------

TEST_P(SqlStoreTest, SessionsAreFoundByPrefixConfirmedAndRevoked) {
  ASSERT_TRUE(store_->CreateSession(MakeSession("s1", "u1"), MakeAudit("session.create")).ok());
  auto found = store_->FindSessionsByPrefix("skt_s1");
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ((*found)[0].user_id, "u1");
  EXPECT_EQ((*found)[0].token_hash, "hash-s1");
  EXPECT_EQ((*found)[0].expires_at, kT0 + hours(12));
  EXPECT_FALSE((*found)[0].confirmed_until.has_value());
  EXPECT_TRUE(store_->FindSessionsByPrefix("skt_zz")->empty());

  ASSERT_TRUE(
      store_->ConfirmSession("s1", kT0 + minutes(5), MakeAudit("session.confirm")).ok());
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s1")->at(0).confirmed_until, kT0 + minutes(5));
  EXPECT_EQ(NewestAudit().action, "session.confirm");

  ASSERT_TRUE(store_->RevokeSession("s1", kT0 + minutes(1), MakeAudit("session.logout")).ok());
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s1")->at(0).revoked_at, kT0 + minutes(1));
  std::int64_t audit_before = AuditCount();
  // A logout that landed first wins over a confirmation.
  EXPECT_EQ(store_->ConfirmSession("s1", kT0 + minutes(9), MakeAudit("session.confirm")).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->RevokeSession("s1", kT0 + minutes(2), MakeAudit("session.logout")).ok());
  EXPECT_EQ(store_->FindSessionsByPrefix("skt_s1")->at(0).revoked_at, kT0 + minutes(1));
  EXPECT_EQ(store_->ConfirmSession("nope", kT0, MakeAudit("session.confirm")).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_->RevokeSession("nope", kT0, MakeAudit("session.logout")).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_->CreateSession(MakeSession("s9", "nobody"), MakeAudit("session.create"))
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(AuditCount(), audit_before);
}

// --- Audit atomicity -------------------------------------------------------------------------

TEST_P(SqlStoreTest, EachChangeWritesItsAuditEventWithAStoreAssignedIncreasingId) {
  std::int64_t before = AuditCount();
  CreateConnection();
  AuditEvent created = NewestAudit();
  EXPECT_EQ(created.action, "connection.create");
  EXPECT_EQ(created.target_id, kConnectionId);
  EXPECT_EQ(created.actor_label, "a@example.com");
  EXPECT_EQ(created.credential, "api_key");
  EXPECT_EQ(created.source_address, "192.0.2.7");
  EXPECT_EQ(created.at, kT0);
  EXPECT_EQ(created.detail, "{}");
  ASSERT_TRUE(store_
                  ->ReplaceToken(kConnectionId, "agt_rotated1", std::string(64, 'b'),
                                 kT0 + hours(48), std::nullopt,
                                 MakeAudit("connection.rotate", kConnectionId))
                  .ok());
  AuditEvent rotated = NewestAudit();
  EXPECT_EQ(rotated.action, "connection.rotate");
  EXPECT_GT(rotated.id, created.id);
  ASSERT_TRUE(store_
                  ->RevokeConnection(kConnectionId, kT0 + hours(1),
                                     MakeAudit("connection.revoke", kConnectionId))
                  .ok());
  EXPECT_EQ(NewestAudit().action, "connection.revoke");
  EXPECT_EQ(AuditCount(), before + 3);
}

TEST(DataDirectoryLock, OneServerPerDataDirectory) {
  ScratchDir dir;
  auto first = LockDataDirectory(dir.path());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = LockDataDirectory(dir.path());
  ASSERT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another uplink-console serve"), std::string::npos);
  first->reset();
  EXPECT_TRUE(LockDataDirectory(dir.path()).ok()) << "the lock outlived its holder";
}

TEST_P(SqlStoreTest, TokenLookupsSeeEveryChangeAtOnceDespiteTheirCache) {
  CreateConnection();
  const std::string prefix = "agt_" + std::string(kConnectionId).substr(0, 8);
  ASSERT_EQ((*store_->FindConnectionsByTokenPrefix(prefix))->size(), 1u);  // now cached

  ASSERT_TRUE(store_
                  ->RevokeConnection(kConnectionId, kT0 + seconds(1),
                                     MakeAudit("connection.revoke", kConnectionId))
                  .ok());
  auto revoked = store_->FindConnectionsByTokenPrefix(prefix);
  ASSERT_EQ((*revoked)->size(), 1u);
  EXPECT_EQ((*revoked)->at(0).revoked_at, kT0 + seconds(1));

  CreateConnection("c0ffee0000000002", "u2", "other");
  const std::string other = "agt_c0ffee00";
  ASSERT_EQ((*store_->FindConnectionsByTokenPrefix(other))->size(), 1u);
  ASSERT_TRUE(store_
                  ->SetUserDeactivated("u2", kT0 + seconds(2),
                                       MakeAudit("user.deactivate", "u2", "u2"))
                  .ok());
  EXPECT_EQ((*store_->FindConnectionsByTokenPrefix(other))->at(0).owner_deactivated_at,
            kT0 + seconds(2));
  ASSERT_TRUE(store_
                  ->ReplaceToken("c0ffee0000000002", "agt_rotated2", std::string(64, 'c'),
                                 kT0 + hours(1), std::nullopt, MakeAudit("connection.rotate"))
                  .ok());
  EXPECT_TRUE((*store_->FindConnectionsByTokenPrefix(other))->empty());
  EXPECT_EQ((*store_->FindConnectionsByTokenPrefix("agt_rotated2"))->size(), 1u);
}

// Agents authenticate on every request: a cached token must not wait for the writer, which
// holds the store through a group's COMMIT (an fsync on SQLite).
TEST(SqliteTokenCacheTest, ACachedTokenIsFoundWhileAWriteGroupCommits) {
  ScratchDir dir;
  auto database = sql::OpenSqliteDatabase(dir.File("console.db"));
  ASSERT_TRUE(database.ok()) << database.status().ToString();
  auto* held = new CommitHeldDatabase(std::move(database).value());
  auto opened = SqlStore::Open(std::unique_ptr<sql::Database>(held));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  SqlStore& store = **opened;
  ASSERT_TRUE(store.CreateUser(MakeUser("u1", "a@example.com"), MakeAudit("user.create")).ok());
  ASSERT_TRUE(store
                  .CreateConnection(MakeConnection(kConnectionId, "u1", "prod"),
                                    MakeAudit("connection.create", kConnectionId))
                  .ok());
  // The first report binds the cluster (emptying the cache); later ones keep it.
  ASSERT_TRUE(
      store.AcceptReport(kConnectionId, kTokenHash, MakeReport("uid-a", 1), kT0, ReportAudit())
          .ok());
  const std::string prefix = "agt_" + kConnectionId.substr(0, 8);
  auto cached = store.FindConnectionsByTokenPrefix(prefix);
  ASSERT_TRUE(cached.ok() && (*cached)->size() == 1u);

  std::promise<void> reached;
  std::promise<void> release;
  held->HoldNextCommit(&reached, release.get_future().share());
  auto report = std::async(std::launch::async, [&] {
    return store.AcceptReport(kConnectionId, kTokenHash, MakeReport("uid-a", 2),
                              kT0 + seconds(1), ReportAudit());
  });
  if (reached.get_future().wait_for(seconds(60)) != std::future_status::ready) {
    release.set_value();
    FAIL() << "the report never reached its COMMIT";
  }
  auto lookup = std::async(std::launch::async, [&] {
    return store.FindConnectionsByTokenPrefix(prefix);
  });
  // Not a timing bound: a lookup that waited for the writer would wait here for good.
  const bool answered = lookup.wait_for(seconds(60)) == std::future_status::ready;
  release.set_value();
  EXPECT_TRUE(answered) << "the token lookup waited for the write group's COMMIT";
  EXPECT_EQ(lookup.get().value_or(nullptr), *cached);
  EXPECT_TRUE(report.get().ok());
}

// Readiness (/readyz) reads beside the writer too: a probe answered only after the group in
// flight (an fsync, round trips) would hold an HTTP thread that long. But a group that runs
// past the bar is a writer that stopped, and then the store is not ready.
TEST_P(SqlStoreTest, ReadinessDoesNotWaitForTheWriterButSeesItStuck) {
  Status ready = store_->CheckReady(hours(1));
  EXPECT_TRUE(ready.ok()) << ready.ToString();
  ASSERT_NO_FATAL_FAILURE(HoldAReportInItsCommit());
  SqlStore& store = *held_store_;
  auto probe = std::async(std::launch::async, [&] { return store.CheckReady(hours(1)); });
  // Not a timing bound: a probe that waited for the writer would wait here for good.
  const bool answered = probe.wait_for(seconds(60)) == std::future_status::ready;
  Status stuck;
  if (answered) {
    ready = probe.get();
    // The held group has run longer than a millisecond by now, or will soon.
    uplink::testing::WaitFor([&] { return !(stuck = store.CheckReady(milliseconds(1))).ok(); },
                             seconds(10));
  }
  Status reported = ReleaseHeldWrite();
  ASSERT_TRUE(answered) << "the readiness probe waited for the write group's COMMIT";
  EXPECT_TRUE(ready.ok()) << ready.ToString();
  EXPECT_EQ(stuck.code(), StatusCode::kUnavailable) << stuck.ToString();
  EXPECT_NE(stuck.message().find("writer has been in one write group for"), std::string::npos)
      << stuck.ToString();

  ASSERT_TRUE(reported.ok()) << reported.ToString();
  ready = store.CheckReady(milliseconds(1));  // no group in progress
  EXPECT_TRUE(ready.ok()) << ready.ToString();
}

// Every person's request reads the console's settings (is two-factor sign-in required?): on
// SQLite from the cache, without waiting for the writer's group in flight; on PostgreSQL on a
// lookup connection.
TEST_P(SqlStoreTest, ConsoleSettingsAreReadWithoutWaitingForTheWriter) {
  CreateConnection();
  ASSERT_NO_FATAL_FAILURE(OpenHeldStore());
  ASSERT_TRUE(ReportAt(kT0)(*held_store_).ok());        // binds the cluster: caches emptied
  ASSERT_TRUE(held_store_->GetConsoleSettings().ok());  // and filled again
  ASSERT_NO_FATAL_FAILURE(HoldInItsCommit(ReportAt(kT0 + seconds(1))));
  auto settings = std::async(std::launch::async, [&] { return held_store_->GetConsoleSettings(); });
  // Not a timing bound: a read that waited for the writer would wait here for good.
  const bool answered = settings.wait_for(seconds(60)) == std::future_status::ready;
  Status reported = ReleaseHeldWrite();
  ASSERT_TRUE(answered) << "reading the settings waited for the write group's COMMIT";
  auto read = settings.get();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_FALSE(read->require_two_factor);
  EXPECT_TRUE(reported.ok()) << reported.ToString();
}

// Reads of committed rows (every connection on each /metrics scrape; a person's
// authentication; a connection's page) must not wait for the writer, nor hold it back, which
// holds the store through each group's COMMIT; and they see committed rows only.
TEST_P(SqlStoreTest, ReadsOfCommittedRowsDoNotWaitForTheWriter) {
  ASSERT_NO_FATAL_FAILURE(HoldAReportInItsCommit());
  SqlStore& store = *held_store_;
  struct Reads {
    Result<std::vector<Connection>> all = InternalError("not read");
    Result<std::vector<ConnectionLifecycle>> lifecycles = InternalError("not read");
    Result<Connection> one = InternalError("not read");
    Result<std::vector<Node>> nodes = InternalError("not read");
    Result<User> owner = InternalError("not read");
    Result<std::vector<Session>> sessions = InternalError("not read");
    Result<std::vector<AuditEvent>> audit = InternalError("not read");
  };
  auto reads = std::async(std::launch::async, [&] {
    Reads r;
    r.all = store.ListAllConnections();
    r.lifecycles = store.ListConnectionLifecycles();  // each /metrics scrape reads them
    r.one = store.GetConnection(kConnectionId);
    r.nodes = store.ListNodes(kConnectionId);
    r.owner = store.GetUser("u1");
    r.sessions = store.FindSessionsByPrefix("ses_none");
    r.audit = store.ListAudit({.target_id = std::string(kConnectionId)});
    return r;
  });
  // Not a timing bound: a read that waited for the writer would wait here for good.
  const bool answered = reads.wait_for(seconds(60)) == std::future_status::ready;
  Status reported = ReleaseHeldWrite();
  EXPECT_TRUE(answered) << "a read of committed rows waited for the write group's COMMIT";
  Reads r = reads.get();
  ASSERT_TRUE(r.all.ok()) << r.all.status().ToString();
  ASSERT_EQ(r.all->size(), 1u);
  EXPECT_EQ(r.all->front().id, kConnectionId);
  // Committed rows only: the held report binds the cluster and stores its nodes.
  EXPECT_FALSE(r.all->front().cluster_uid.has_value());
  ASSERT_TRUE(r.lifecycles.ok()) << r.lifecycles.status().ToString();
  ASSERT_EQ(r.lifecycles->size(), 1u);
  // Committed rows only: the held report would note the agent's call.
  EXPECT_FALSE(r.lifecycles->front().last_seen_at.has_value());
  ASSERT_TRUE(r.one.ok()) << r.one.status().ToString();
  EXPECT_FALSE(r.one->cluster_uid.has_value());
  ASSERT_TRUE(r.nodes.ok()) << r.nodes.status().ToString();
  EXPECT_TRUE(r.nodes->empty());
  ASSERT_TRUE(r.owner.ok()) << r.owner.status().ToString();
  EXPECT_EQ(r.owner->email, "a@example.com");
  ASSERT_TRUE(r.sessions.ok()) << r.sessions.status().ToString();
  EXPECT_TRUE(r.sessions->empty());
  ASSERT_TRUE(r.audit.ok()) << r.audit.status().ToString();
  ASSERT_EQ(r.audit->size(), 1u);
  EXPECT_EQ(r.audit->front().action, "connection.create");

  ASSERT_TRUE(reported.ok()) << reported.ToString();
  EXPECT_EQ(store.GetConnection(kConnectionId)->cluster_uid, "uid-a");
  EXPECT_FALSE(store.ListNodes(kConnectionId)->empty());
}

// Replicas on one PostgreSQL database.
class PostgresReplicaStoreTest : public SqlStoreTest {
 protected:
  StoreEngine Engine() const override { return StoreEngine::kPostgres; }
};

TEST_F(PostgresReplicaStoreTest, AnotherReplicasRevokeIsSeenOnTheVeryNextLookup) {
  CreateConnection();
  const std::string prefix = "agt_" + std::string(kConnectionId).substr(0, 8);
  ASSERT_EQ((*store_->FindConnectionsByTokenPrefix(prefix))->size(), 1u);
  auto settings = store_->GetConsoleSettings();
  ASSERT_TRUE(settings.ok());
  ASSERT_FALSE(settings->require_two_factor);
  auto other = database_->OpenStore();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE((*other)
                  ->RevokeConnection(kConnectionId, kT0 + seconds(1),
                                     MakeAudit("connection.revoke", kConnectionId))
                  .ok());
  ASSERT_TRUE((*other)
                  ->SetConsoleSettings({true, std::nullopt}, MakeAudit("settings.update", "u1"))
                  .ok());
  EXPECT_EQ((*store_->FindConnectionsByTokenPrefix(prefix))->at(0).revoked_at,
            kT0 + seconds(1));
  EXPECT_TRUE(store_->GetConsoleSettings()->require_two_factor);
}

TEST_P(SqlStoreTest, TheFirstReportsBindingIsSeenByTokenLookups) {
  CreateConnection();
  const std::string prefix = "agt_" + std::string(kConnectionId).substr(0, 8);
  ASSERT_FALSE((*store_->FindConnectionsByTokenPrefix(prefix))->at(0).cluster_uid.has_value());
  ASSERT_TRUE(Report(MakeReport("uid-a", 1), kT0).ok());
  EXPECT_EQ((*store_->FindConnectionsByTokenPrefix(prefix))->at(0).cluster_uid, "uid-a");
  // Later reports change nothing authentication reads; a rotate still shows at once.
  ASSERT_TRUE(Report(MakeReport("uid-a", 2), kT0 + seconds(1)).ok());
  ASSERT_TRUE(store_
                  ->RevokeConnection(kConnectionId, kT0 + seconds(2),
                                     MakeAudit("connection.revoke", kConnectionId))
                  .ok());
  EXPECT_TRUE((*store_->FindConnectionsByTokenPrefix(prefix))->at(0).revoked_at.has_value());
}

TEST_P(SqlStoreTest, AChangeThatFailsWritesNoAuditEventAndABadEventUndoesTheChange) {
  CreateConnection();
  std::int64_t before = AuditCount();
  EXPECT_EQ(store_
                ->CreateConnection(MakeConnection("00000000000000c2", "u1", "prod"),
                                   MakeAudit("connection.create", "00000000000000c2"))
                .code(),
            StatusCode::kConflict);
  EXPECT_EQ(store_
                ->RevokeConnection("ffffffffffffffff", kT0,
                                   MakeAudit("connection.revoke", "ffffffffffffffff"))
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(AuditCount(), before);

  // The other way round: when the event cannot be written the change is rolled back.
  AuditEvent bad_outcome = MakeAudit("connection.create", "00000000000000c3");
  bad_outcome.outcome = "maybe";
  Status refused =
      store_->CreateConnection(MakeConnection("00000000000000c3", "u1", "dev"), bad_outcome);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetConnection("00000000000000c3").status().code(), StatusCode::kNotFound);

  AuditEvent bad_detail = MakeAudit("connection.revoke", kConnectionId);
  bad_detail.detail = "[\"not an object\"]";
  EXPECT_EQ(store_->RevokeConnection(kConnectionId, kT0, bad_detail).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(store_->GetConnection(kConnectionId)->revoked_at.has_value());
  bad_detail.detail = "{not json";
  EXPECT_EQ(store_->SetPassword("u1", "h", "", kT0, bad_detail).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetUser("u1")->password_hash, "");
  EXPECT_EQ(AuditCount(), before);
  // No failed transaction was left open: the next write goes through.
  EXPECT_TRUE(store_
                  ->CreateConnection(MakeConnection("00000000000000c4", "u1", "staging"),
                                     MakeAudit("connection.create", "00000000000000c4"))
                  .ok());
}

// --- Connections -----------------------------------------------------------------------------

TEST_P(SqlStoreTest, ConnectionsAreCreatedListedPerOwnerAndFoundByTokenPrefix) {
  CreateConnection("00000000000000c1", "u1", "prod");
  CreateConnection("00000000000000c2", "u1", "dev");
  CreateConnection("00000000000000c3", "u2", "prod");
  auto mine = store_->ListConnections("u1");
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].id, "00000000000000c1");
  EXPECT_EQ((*mine)[1].id, "00000000000000c2");
  EXPECT_EQ(store_->ListConnections("u2")->size(), 1u);
  EXPECT_EQ(store_->ListAllConnections()->size(), 3u);
  auto found = store_->FindConnectionsByTokenPrefix("agt_00000000");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->size(), 3u);  // the test ids share their first 8 characters
  auto one = store_->GetConnection("00000000000000c2");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->expires_at, kT0 + hours(24));
  EXPECT_FALSE(one->revoked_at.has_value());
  EXPECT_FALSE(one->last_report_at.has_value());
  EXPECT_FALSE(one->cluster_uid.has_value());
  EXPECT_EQ(store_->GetConnection("ffffffffffffffff").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_
                ->CreateConnection(MakeConnection("00000000000000c9", "nobody", "x"),
                                   MakeAudit("connection.create"))
                .code(),
            StatusCode::kNotFound);
}

TEST_P(SqlStoreTest, EveryConnectionQueryCarriesTheOwnersDeactivation) {
  CreateConnection(kConnectionId, "u2");
  CreateConnection("00000000000000c2", "u1", "dev");
  const WallTime at = kT0 + minutes(3);
  ASSERT_TRUE(store_->SetUserDeactivated("u2", at, MakeAudit("user.deactivate", "u2")).ok());
  EXPECT_EQ(store_->GetConnection(kConnectionId)->owner_deactivated_at, at);
  EXPECT_EQ(store_->ListConnections("u2")->at(0).owner_deactivated_at, at);
  auto all = store_->ListAllConnections();
  auto by_prefix = store_->FindConnectionsByTokenPrefix("agt_00000000");
  ASSERT_TRUE(all.ok() && by_prefix.ok());
  ASSERT_EQ(all->size(), 2u);
  ASSERT_EQ((*by_prefix)->size(), 2u);
  const std::vector<Connection>* lists[] = {&*all, &**by_prefix};
  for (const auto* list : lists) {
    for (const Connection& c : *list) {
      EXPECT_EQ(c.owner_deactivated_at.has_value(), c.owner_id == "u2") << c.id;
    }
  }
}

TEST_P(SqlStoreTest, ConnectionLifecyclesAreTheRowsFieldsTheStatusComesFrom) {
  CreateConnection("00000000000000c1", "u1", "prod");
  CreateConnection("00000000000000c2", "u1", "dev");
  CreateConnection("00000000000000c3", "u2", "prod");
  ASSERT_TRUE(store_
                  ->RevokeConnection("00000000000000c2", kT0 + hours(1),
                                     MakeAudit("connection.revoke", "00000000000000c2"))
                  .ok());
  ASSERT_TRUE(
      store_->RecordPresence({.connections = {{"00000000000000c3", kT0 + seconds(30)}}}).ok());
  auto lifecycles = store_->ListConnectionLifecycles();
  ASSERT_TRUE(lifecycles.ok()) << lifecycles.status().ToString();
  ASSERT_EQ(lifecycles->size(), 3u);
  std::set<std::string> ids;
  for (const ConnectionLifecycle& lifecycle : *lifecycles) {
    ids.insert(lifecycle.id);
    auto row = store_->GetConnection(lifecycle.id);
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    EXPECT_EQ(lifecycle.expires_at, row->expires_at) << lifecycle.id;
    EXPECT_EQ(lifecycle.revoked_at, row->revoked_at) << lifecycle.id;
    EXPECT_EQ(lifecycle.last_seen_at, row->last_seen_at) << lifecycle.id;
  }
  EXPECT_EQ(ids,
            (std::set<std::string>{"00000000000000c1", "00000000000000c2", "00000000000000c3"}));
  EXPECT_EQ(store_->GetConnection("00000000000000c2")->revoked_at, kT0 + hours(1));
  EXPECT_EQ(store_->GetConnection("00000000000000c3")->last_seen_at, kT0 + seconds(30));
}

TEST_P(SqlStoreTest, ClusterNameIsUniquePerOwnerUntilTheConnectionIsRevoked) {
  CreateConnection(kConnectionId, "u1", "prod");
  Status conflict = store_->CreateConnection(MakeConnection("00000000000000c2", "u1", "prod"),
                                             MakeAudit("connection.create"));
  EXPECT_EQ(conflict.code(), StatusCode::kConflict);
  EXPECT_NE(conflict.message().find("\"prod\""), std::string::npos);
  ASSERT_TRUE(store_->RevokeConnection(kConnectionId, kT0, MakeAudit("connection.revoke")).ok());
  EXPECT_TRUE(store_
                  ->CreateConnection(MakeConnection("00000000000000c2", "u1", "prod"),
                                     MakeAudit("connection.create"))
                  .ok());
}

TEST_P(SqlStoreTest, ReplaceTokenAndRevokeUpdateTheRowAndRevokeKeepsTheFirstTime) {
  CreateConnection();
  ASSERT_TRUE(store_
                  ->ReplaceToken(kConnectionId, "agt_newnewne", std::string(64, 'b'),
                                 kT0 + hours(48), std::nullopt, MakeAudit("connection.rotate"))
                  .ok());
  auto rotated = store_->GetConnection(kConnectionId);
  EXPECT_EQ(rotated->token_prefix, "agt_newnewne");
  EXPECT_EQ(rotated->token_hash, std::string(64, 'b'));
  EXPECT_EQ(rotated->expires_at, kT0 + hours(48));
  ASSERT_TRUE(
      store_->RevokeConnection(kConnectionId, kT0 + seconds(5), MakeAudit("connection.revoke"))
          .ok());
  std::int64_t audit_after_revoke = AuditCount();
  ASSERT_TRUE(
      store_->RevokeConnection(kConnectionId, kT0 + seconds(9), MakeAudit("connection.revoke"))
          .ok());
  EXPECT_EQ(store_->GetConnection(kConnectionId)->revoked_at, kT0 + seconds(5));
  EXPECT_EQ(AuditCount(), audit_after_revoke);

  // A revoked connection stays dead whatever the caller read before.
  Status refused = store_->ReplaceToken(kConnectionId, "agt_again000", "h", kT0 + hours(1),
                                        MakeHandover("h1", kConnectionId),
                                        MakeAudit("connection.rotate"));
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(store_->LatestHandover(kConnectionId)->has_value());
  EXPECT_EQ(AuditCount(), audit_after_revoke);
  EXPECT_EQ(store_->RevokeConnection("ffffffffffffffff", kT0, MakeAudit("connection.revoke"))
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_
                ->ReplaceToken("ffffffffffffffff", "p", "h", kT0, std::nullopt,
                               MakeAudit("connection.rotate"))
                .code(),
            StatusCode::kNotFound);
}

// --- Handovers -------------------------------------------------------------------------------

class HandoverTest : public SqlStoreTest {
 protected:
  // A connection made for handover: its token hash is one nobody knows.
  void CreateWithHandover(const std::string& handover_id = "h1") {
    Connection c = MakeConnection(kConnectionId, "u1", "prod");
    c.token_prefix = "agt_unusable";
    c.token_hash = "unusable";
    ASSERT_TRUE(store_
                    ->CreateConnectionWithHandover(c, MakeHandover(handover_id, kConnectionId),
                                                   MakeAudit("connection.create", kConnectionId))
                    .ok());
  }

  // What a redeem came to: the connection, the typed refusal, or the store's error.
  struct Redeemed {
    Status status;
    std::optional<Connection> connection;
    std::optional<HandoverRefusal> refusal;
    bool ok() const { return connection.has_value(); }
    bool RefusedFor(HandoverRefusalReason reason) const {
      return status.ok() && refusal && refusal->reason == reason;
    }
  };

  Redeemed Redeem(const std::string& handover_id, WallTime now = kT0 + minutes(1),
                  const std::string& token_prefix = "agt_minted01",
                  SqlStore* store = nullptr) {
    AuditEvent audit = MakeAudit("handover.redeem", kConnectionId);
    audit.actor_type = "anonymous";
    audit.credential = "handover_code";
    auto redemption = (store ? store : store_.get())
        ->RedeemHandover(handover_id, now, token_prefix, "minted-hash-" + token_prefix, audit);
    Redeemed redeemed;
    if (!redemption.ok()) {
      redeemed.status = redemption.status();
    } else if (auto* connection = std::get_if<Connection>(&*redemption)) {
      redeemed.connection = *connection;
    } else {
      redeemed.refusal = std::get<HandoverRefusal>(*redemption);
    }
    return redeemed;
  }
};

TEST_P(HandoverTest, AConnectionIsCreatedWithItsHandoverOrNotAtAll) {
  CreateWithHandover();
  auto latest = store_->LatestHandover(kConnectionId);
  ASSERT_TRUE(latest.ok());
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ((*latest)->id, "h1");
  EXPECT_EQ((*latest)->code_hash, "code-hash-h1");
  EXPECT_EQ((*latest)->expires_at, kT0 + minutes(10));
  EXPECT_FALSE((*latest)->redeemed_at.has_value());
  auto found = store_->FindHandoversByPrefix("hoc_h1");
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ((*found)[0].connection_id, kConnectionId);
  EXPECT_TRUE(store_->FindHandoversByPrefix("hoc_zz")->empty());

  // The cluster name is taken, so neither the connection nor its handover is written.
  std::int64_t audit_before = AuditCount();
  Connection again = MakeConnection("00000000000000c2", "u1", "prod");
  EXPECT_EQ(store_
                ->CreateConnectionWithHandover(again, MakeHandover("h2", "00000000000000c2"),
                                               MakeAudit("connection.create"))
                .code(),
            StatusCode::kConflict);
  EXPECT_TRUE(store_->FindHandoversByPrefix("hoc_h2")->empty());
  EXPECT_EQ(AuditCount(), audit_before);
  // A handover for another connection is a caller bug.
  Connection third = MakeConnection("00000000000000c3", "u1", "dev");
  EXPECT_EQ(store_
                ->CreateConnectionWithHandover(third, MakeHandover("h3", kConnectionId),
                                               MakeAudit("connection.create"))
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetConnection("00000000000000c3").status().code(), StatusCode::kNotFound);
}

TEST_P(HandoverTest, RedeemingInstallsTheMintedTokenKeepsTheExpiryAndWorksOnce) {
  CreateWithHandover();
  auto redeemed = Redeem("h1");
  ASSERT_TRUE(redeemed.ok()) << redeemed.status.ToString();
  EXPECT_EQ(redeemed.connection->token_prefix, "agt_minted01");
  EXPECT_EQ(redeemed.connection->token_hash, "minted-hash-agt_minted01");
  EXPECT_EQ(redeemed.connection->expires_at, kT0 + hours(24));
  EXPECT_EQ((*store_->FindConnectionsByTokenPrefix("agt_minted01"))->size(), 1u);
  EXPECT_TRUE((*store_->FindConnectionsByTokenPrefix("agt_unusable"))->empty());
  EXPECT_EQ((*store_->LatestHandover(kConnectionId))->redeemed_at, kT0 + minutes(1));
  AuditEvent ok = NewestAudit();
  EXPECT_EQ(ok.action, "handover.redeem");
  EXPECT_EQ(ok.outcome, "ok");

  auto twice = Redeem("h1", kT0 + minutes(2), "agt_minted02");
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(twice.RefusedFor(HandoverRefusalReason::kRedeemed));
  EXPECT_NE(twice.refusal->message.find("rotate"), std::string::npos);
  EXPECT_EQ(store_->GetConnection(kConnectionId)->token_prefix, "agt_minted01");
  AuditEvent refused = NewestAudit();
  EXPECT_EQ(refused.action, "handover.refused");
  EXPECT_EQ(refused.outcome, "refused");
  EXPECT_EQ(refused.detail, R"({"reason":"handover_redeemed"})");
  EXPECT_EQ(refused.credential, "handover_code");

  EXPECT_EQ(Redeem("nope").status.code(), StatusCode::kNotFound);
}

TEST_P(HandoverTest, ConcurrentRedeemsOfOneCodeLetExactlyOneWin) {
  CreateWithHandover();
  // A second connection to the same database stands for another console process.
  auto other = database_->OpenStore();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<Redeemed> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      results[i] = Redeem("h1", kT0 + minutes(1), "agt_thread0" + std::to_string(i),
                          i % 2 == 0 ? store_.get() : other->get());
    });
  }
  for (std::thread& thread : threads) thread.join();

  int winners = 0;
  std::string winning_prefix;
  for (const auto& result : results) {
    if (result.ok()) {
      ++winners;
      winning_prefix = result.connection->token_prefix;
    } else {
      EXPECT_TRUE(result.RefusedFor(HandoverRefusalReason::kRedeemed))
          << result.status.ToString();
    }
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(store_->GetConnection(kConnectionId)->token_prefix, winning_prefix);
  EXPECT_EQ(Audit({.action = "handover.redeem"}).size(), 1u);
  EXPECT_EQ(Audit({.action = "handover.refused"}).size(), static_cast<size_t>(kThreads - 1));
}

TEST_P(HandoverTest, AnExpiredCodeIsRefusedAndChangesNothing) {
  CreateWithHandover();
  auto late = Redeem("h1", kT0 + minutes(10));  // expiry is exclusive
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(late.RefusedFor(HandoverRefusalReason::kExpired));
  EXPECT_NE(late.refusal->message.find("rotate"), std::string::npos);
  EXPECT_EQ(store_->GetConnection(kConnectionId)->token_prefix, "agt_unusable");
  EXPECT_FALSE((*store_->LatestHandover(kConnectionId))->redeemed_at.has_value());
  EXPECT_EQ(NewestAudit().detail, R"({"reason":"handover_expired"})");
  EXPECT_TRUE(Redeem("h1", kT0 + minutes(10) - seconds(1)).ok());
}

TEST_P(HandoverTest, ACodeOfADeactivatedOwnerIsRefusedUntilTheyAreReactivated) {
  CreateWithHandover();
  ASSERT_TRUE(store_->CreateUser(MakeUser("u3", "c@example.com", Role::kAdmin),
                                 MakeAudit("user.create", "u3", "u3"))
                  .ok());
  ASSERT_TRUE(store_->SetUserDeactivated("u1", kT0, MakeAudit("user.deactivate", "u1", "u1")).ok());
  auto refused = Redeem("h1", kT0 + minutes(1));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.RefusedFor(HandoverRefusalReason::kOwnerDeactivated));
  EXPECT_EQ(store_->GetConnection(kConnectionId)->token_prefix, "agt_unusable");
  EXPECT_EQ(NewestAudit().detail, R"({"reason":"owner_deactivated"})");
  ASSERT_TRUE(
      store_->SetUserDeactivated("u1", std::nullopt, MakeAudit("user.reactivate", "u1", "u1")).ok());
  EXPECT_TRUE(Redeem("h1", kT0 + minutes(2)).ok());
}

TEST_P(HandoverTest, ARotateSupersedesAnEarlierCodeWithOrWithoutANewOne) {
  CreateWithHandover("h1");
  Handover second = MakeHandover("h2", kConnectionId, kT0 + seconds(30));
  ASSERT_TRUE(store_
                  ->ReplaceToken(kConnectionId, "agt_unusabl2", "unusable-2", kT0 + hours(24),
                                 second, MakeAudit("connection.rotate", kConnectionId))
                  .ok());
  EXPECT_EQ((*store_->LatestHandover(kConnectionId))->id, "h2");
  auto stale = Redeem("h1");
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(stale.RefusedFor(HandoverRefusalReason::kSuperseded));
  EXPECT_NE(stale.refusal->message.find("rotate"), std::string::npos);
  EXPECT_EQ(store_->GetConnection(kConnectionId)->token_prefix, "agt_unusabl2");

  // A plain rotate (a token shown directly) turns the pending code off too.
  ASSERT_TRUE(store_
                  ->ReplaceToken(kConnectionId, "agt_direct01", "direct-hash", kT0 + hours(24),
                                 std::nullopt, MakeAudit("connection.rotate", kConnectionId))
                  .ok());
  auto after_plain = Redeem("h2");
  ASSERT_FALSE(after_plain.ok());
  EXPECT_TRUE(after_plain.RefusedFor(HandoverRefusalReason::kSuperseded));
  EXPECT_EQ(store_->GetConnection(kConnectionId)->token_prefix, "agt_direct01");

  // A newer code after all that works.
  ASSERT_TRUE(store_
                  ->ReplaceToken(kConnectionId, "agt_unusabl3", "unusable-3", kT0 + hours(24),
                                 MakeHandover("h3", kConnectionId, kT0 + seconds(40)),
                                 MakeAudit("connection.rotate", kConnectionId))
                  .ok());
  EXPECT_TRUE(Redeem("h3").ok());
}

TEST_P(HandoverTest, RevokingTheConnectionSupersedesItsPendingCode) {
  CreateWithHandover();
  ASSERT_TRUE(store_
                  ->RevokeConnection(kConnectionId, kT0 + seconds(10),
                                     MakeAudit("connection.revoke", kConnectionId))
                  .ok());
  auto refused = Redeem("h1");
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.RefusedFor(HandoverRefusalReason::kSuperseded));
  EXPECT_NE(refused.refusal->message.find("create a new connection"), std::string::npos);
  EXPECT_EQ(store_->GetConnection(kConnectionId)->token_prefix, "agt_unusable");
  EXPECT_EQ(NewestAudit().detail, R"({"reason":"handover_superseded"})");
}

TEST_P(HandoverTest, ARedeemedCodeIsNotSupersededByALaterRotate) {
  CreateWithHandover();
  ASSERT_TRUE(Redeem("h1").ok());
  ASSERT_TRUE(store_
                  ->ReplaceToken(kConnectionId, "agt_direct01", "direct-hash", kT0 + hours(24),
                                 std::nullopt, MakeAudit("connection.rotate", kConnectionId))
                  .ok());
  auto again = Redeem("h1");
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(again.RefusedFor(HandoverRefusalReason::kRedeemed));
}

// --- Reports ---------------------------------------------------------------------------------

TEST_P(SqlStoreTest, FirstReportBindsTheClusterAndIsAuditedOnce) {
  CreateConnection();
  ASSERT_TRUE(Report(MakeReport("uid-a", 3), kT0 + seconds(1)).ok());
  auto binds = Audit({.action = "connection.bind"});
  ASSERT_EQ(binds.size(), 1u);
  EXPECT_EQ(binds[0].outcome, "ok");
  EXPECT_EQ(binds[0].target_id, kConnectionId);
  EXPECT_EQ(binds[0].actor_type, "agent");
  EXPECT_EQ(binds[0].credential, "agent_token");
  EXPECT_EQ(binds[0].detail, R"({"cluster_uid":"uid-a"})");
  std::int64_t audit_after_bind = AuditCount();
  ASSERT_TRUE(Report(MakeReport("uid-a", 3), kT0 + seconds(60)).ok());
  EXPECT_EQ(AuditCount(), audit_after_bind) << "an ordinary report was audited";
}

TEST_P(SqlStoreTest, AReportFromAnotherClusterIsRefusedAuditedAndStoresNothingElse) {
  CreateConnection();
  ASSERT_TRUE(Report(MakeReport("uid-a", 3, "pod-a"), kT0 + seconds(1)).ok());
  InventoryReport foreign = MakeReport("uid-\"b\"", 5, "pod-b");
  foreign.agent_version = "9.9.9";
  Status refused = Report(foreign, kT0 + seconds(2));
  EXPECT_EQ(refused.code(), StatusCode::kConflict);
  EXPECT_EQ(refused.message().find("uid-a"), std::string::npos) << "leaks the bound UID";

  auto connection = store_->GetConnection(kConnectionId);
  EXPECT_EQ(connection->cluster_uid, "uid-a");
  EXPECT_EQ(connection->last_report_at, kT0 + seconds(1));
  EXPECT_EQ(connection->agent_version, "0.1.0");
  EXPECT_EQ(connection->totals.nodes, 3);
  EXPECT_EQ(store_->ListNodes(kConnectionId)->size(), 3u);
  auto agents = store_->ListAgents(kConnectionId, 100);
  ASSERT_EQ(agents->size(), 1u);
  EXPECT_EQ((*agents)[0].instance, "pod-a");

  auto mismatches = Audit({.action = "connection.cluster_mismatch"});
  ASSERT_EQ(mismatches.size(), 1u);
  EXPECT_EQ(mismatches[0].outcome, "refused");
  EXPECT_EQ(mismatches[0].target_id, kConnectionId);
  auto detail = ParseJson(mismatches[0].detail);
  ASSERT_TRUE(detail.ok()) << mismatches[0].detail;
  EXPECT_EQ(detail->as_object().at("cluster_uid").as_string(), "uid-\"b\"");
  EXPECT_EQ(detail->as_object().at("bound_cluster_uid").as_string(), "uid-a");
}

TEST_P(SqlStoreTest, EachReportRecordsItsAgentAndAgentsAreListedMostRecentFirst) {
  CreateConnection();
  ASSERT_TRUE(Report(MakeReport("uid-a", 1, "pod-a"), kT0 + seconds(1)).ok());
  ASSERT_TRUE(Report(MakeReport("uid-a", 1, "pod-b"), kT0 + seconds(2)).ok());
  InventoryReport upgraded = MakeReport("uid-a", 1, "pod-a");
  upgraded.agent_version = "0.2.0";
  ASSERT_TRUE(Report(upgraded, kT0 + seconds(3)).ok());
  ASSERT_TRUE(Report(MakeReport("uid-a", 1, ""), kT0 + seconds(4)).ok());

  auto agents = store_->ListAgents(kConnectionId, 100);
  ASSERT_TRUE(agents.ok());
  ASSERT_EQ(agents->size(), 3u);
  EXPECT_EQ((*agents)[0].instance, "");
  EXPECT_EQ((*agents)[1].instance, "pod-a");
  EXPECT_EQ((*agents)[1].role, "inventory");
  EXPECT_EQ((*agents)[1].version, "0.2.0");
  EXPECT_EQ((*agents)[1].last_seen_at, kT0 + seconds(3));
  EXPECT_EQ((*agents)[2].instance, "pod-b");
  EXPECT_EQ((*agents)[2].last_seen_at, kT0 + seconds(2));
  EXPECT_EQ(store_->ListAgents(kConnectionId, 1)->size(), 1u);
  EXPECT_TRUE(store_->ListAgents(kConnectionId, 0)->empty());
  EXPECT_TRUE(store_->ListAgents("ffffffffffffffff", 100)->empty());
}

TEST_P(SqlStoreTest, EachReportReplacesTheNodeListWithChildRowsAndTotals) {
  CreateConnection();
  ASSERT_TRUE(Report(MakeReport("uid-a", 10), kT0).ok());
  InventoryReport second = MakeReport("uid-a", 2);
  second.nodes[1].ready = false;
  second.nodes[1].error = "status.capacity[nvidia.com/gpu]: 'eight' is not a quantity";
  second.nodes[0].unschedulable = true;
  // Each node's resources and taints of its own: they must land on their node.
  second.nodes[1].resources = {{"nvidia.com/mig-1g.10gb", 7, 7}, {"nvidia.com/gpu", 0, 0}};
  second.nodes[1].taints = {{"dedicated", "ml", "NoExecute"}};
  ASSERT_TRUE(Report(second, kT0 + seconds(60)).ok());

  auto nodes = store_->ListNodes(kConnectionId);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "gpu-node-0");
  EXPECT_TRUE((*nodes)[0].unschedulable);
  ASSERT_EQ((*nodes)[0].resources.size(), 1u);
  EXPECT_EQ((*nodes)[0].resources[0].name, "nvidia.com/gpu");
  ASSERT_EQ((*nodes)[0].taints.size(), 1u);
  EXPECT_EQ((*nodes)[0].taints[0].effect, "NoSchedule");
  EXPECT_EQ((*nodes)[1].error, second.nodes[1].error);
  ASSERT_EQ((*nodes)[1].resources.size(), 2u);
  EXPECT_EQ((*nodes)[1].resources[0].name, "nvidia.com/mig-1g.10gb");
  EXPECT_EQ((*nodes)[1].resources[0].capacity, 7);
  ASSERT_EQ((*nodes)[1].taints.size(), 1u);
  EXPECT_EQ((*nodes)[1].taints[0].key, "dedicated");
  EXPECT_EQ((*nodes)[1].taints[0].effect, "NoExecute");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM node_resources"), 3);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM node_taints"), 2);

  auto totals = store_->GetConnection(kConnectionId)->totals;
  EXPECT_EQ(totals.nodes, 2);
  EXPECT_EQ(totals.nodes_ready, 1);
  EXPECT_EQ(totals.gpu_capacity, 16);
  EXPECT_EQ(totals.gpus_ready, 0);  // node 0 is cordoned, node 1 is not ready
}

// Across a network every round trip the writer waits for delays every write behind it: a
// report waits for the same few whether its nodes changed or not, however many there are.
TEST_P(SqlStoreTest, AReportWaitsForAFewRoundTripsHoweverManyNodesItStores) {
  CreateConnection();
  // Statements are prepared once per connection, a round trip of their own: first reports
  // of a changed and of an unchanged node list prepare them.
  ASSERT_TRUE(Report(MakeReport("uid-a", 3), kT0).ok());
  ASSERT_TRUE(Report(MakeReport("uid-a", 3), kT0 + seconds(1)).ok());
  if (GetParam() == StoreEngine::kSqlite) {
    EXPECT_EQ(testing::WriterRoundTrips(*store_), -1);  // no server, no round trips
    return;
  }
  auto cost = [&](const InventoryReport& report, WallTime at) {
    const std::int64_t before = testing::WriterRoundTrips(*store_);
    EXPECT_TRUE(Report(report, at).ok());
    return testing::WriterRoundTrips(*store_) - before;
  };
  // BEGIN; the connection's token, node digest and draft offer; the writes with COMMIT.
  EXPECT_LE(cost(MakeReport("uid-a", 200), kT0 + seconds(60)), 3);  // 200 new nodes
  EXPECT_LE(cost(MakeReport("uid-a", 200), kT0 + seconds(120)), 3);  // the same nodes
  EXPECT_EQ(store_->ListNodes(kConnectionId)->size(), 200u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM node_taints"), 200);
}

TEST_P(SqlStoreTest, RepeatedReportsOfFiveThousandNodesLeaveExactlyTheLatestSet) {
  CreateConnection();
  InventoryReport report = MakeReport("uid-a", 5000);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(Report(report, kT0 + seconds(round)).ok());
  }
  EXPECT_EQ(store_->ListNodes(kConnectionId)->size(), 5000u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM connection_nodes"), 5000);
}

TEST_P(SqlStoreTest, AReportOfTheSameNodesKeepsTheirRowsAndAChangedOneReplacesThem) {
  CreateConnection();
  ASSERT_TRUE(Report(MakeReport("uid-a", 4), kT0).ok());
  // A mark on a stored row shows whether a report writes the rows again.
  database_->Exec("UPDATE connection_nodes SET gpu_product = 'marked' WHERE position = 0");
  auto marked = [&] {
    return Count("SELECT COUNT(*) FROM connection_nodes WHERE gpu_product = 'marked'");
  };
  // The same nodes a minute later: the report is taken (its time, its agent) and no node
  // row is written again.
  ASSERT_TRUE(Report(MakeReport("uid-a", 4), kT0 + seconds(60)).ok());
  EXPECT_EQ(marked(), 1);
  EXPECT_EQ(store_->GetConnection(kConnectionId)->last_report_at, kT0 + seconds(60));
  // One field of one node changed: every row is replaced, and the change reads back.
  InventoryReport changed = MakeReport("uid-a", 4);
  changed.nodes[3].gpu_allocatable = 3;
  ASSERT_TRUE(Report(changed, kT0 + seconds(120)).ok());
  EXPECT_EQ(marked(), 0);
  auto nodes = store_->ListNodes(kConnectionId);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 4u);
  EXPECT_EQ((*nodes)[3].gpu_allocatable, 3);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM connection_nodes"), 4);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM node_resources"), 4);
}

TEST_P(SqlStoreTest, AReportHandedOverWithoutWaitingIsAnsweredOnceStoredOrRefused) {
  CreateConnection();
  auto hand_over = [&](const InventoryReport& report, WallTime at) {
    std::promise<Status> answered;
    std::future<Status> answer = answered.get_future();
    store_->AcceptReportThen(kConnectionId, kTokenHash,
                             std::make_shared<const InventoryReport>(report), at, ReportAudit(),
                             [&answered](Status status) { answered.set_value(std::move(status)); });
    EXPECT_EQ(answer.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    return answer.get();
  };
  EXPECT_TRUE(hand_over(MakeReport("uid-a", 3), kT0).ok());
  EXPECT_EQ(store_->ListNodes(kConnectionId)->size(), 3u);
  EXPECT_EQ(store_->GetConnection(kConnectionId)->cluster_uid, "uid-a");
  // From another cluster: refused with Conflict, its audit event kept, the nodes untouched.
  const std::int64_t audit_before = Count("SELECT COUNT(*) FROM audit_events");
  EXPECT_EQ(hand_over(MakeReport("uid-b", 1), kT0 + seconds(60)).code(), StatusCode::kConflict);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events"), audit_before + 1);
  EXPECT_EQ(store_->ListNodes(kConnectionId)->size(), 3u);
}

TEST_P(SqlStoreTest, AReportForAMissingConnectionIsNotFoundAndLeavesNoTransactionOpen) {
  EXPECT_EQ(store_
                ->AcceptReport("ffffffffffffffff", kTokenHash, MakeReport("uid", 1), kT0,
                               ReportAudit("ffffffffffffffff"))
                .code(),
            StatusCode::kNotFound);
  CreateConnection();
  EXPECT_TRUE(Report(MakeReport("uid", 1), kT0).ok());
}

TEST_P(SqlStoreTest, AReportWhoseTokenWasRotatedRevokedOrOwnerDeactivatedMeanwhileIsRefused) {
  CreateConnection();
  ASSERT_TRUE(Report(MakeReport("uid-a", 2), kT0).ok());
  // Rotation lands while a report authenticated with the old token is still being received.
  ASSERT_TRUE(store_
                  ->ReplaceToken(kConnectionId, "agt_newtoken", std::string(64, 'b'),
                                 kT0 + hours(24), std::nullopt, MakeAudit("connection.rotate"))
                  .ok());
  EXPECT_EQ(Report(MakeReport("uid-a", 7), kT0 + seconds(1)).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(store_->ListNodes(kConnectionId)->size(), 2u) << "the late report was stored";
  const std::string new_hash(64, 'b');
  ASSERT_TRUE(Report(MakeReport("uid-a", 3), kT0 + seconds(2), new_hash).ok());

  // u1 owns the connection and is the only admin; another admin lets it be deactivated.
  ASSERT_TRUE(store_->CreateUser(MakeUser("u3", "c@example.com", Role::kAdmin),
                                 MakeAudit("user.create", "u3", "u3"))
                  .ok());
  ASSERT_TRUE(store_->SetUserDeactivated("u1", kT0 + seconds(3), MakeAudit("user.deactivate"))
                  .ok());
  EXPECT_EQ(Report(MakeReport("uid-a", 8), kT0 + seconds(4), new_hash).code(),
            StatusCode::kUnauthenticated);
  ASSERT_TRUE(
      store_->SetUserDeactivated("u1", std::nullopt, MakeAudit("user.reactivate")).ok());

  ASSERT_TRUE(store_->RevokeConnection(kConnectionId, kT0 + seconds(5),
                                       MakeAudit("connection.revoke"))
                  .ok());
  EXPECT_EQ(Report(MakeReport("uid-a", 9), kT0 + seconds(6), new_hash).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(store_->ListNodes(kConnectionId)->size(), 3u);
  EXPECT_EQ(store_->ListAgents(kConnectionId, 100)->at(0).last_seen_at, kT0 + seconds(2));
}

// --- Presence and the cluster binding on every call ------------------------------------------

TEST_P(SqlStoreTest, PresenceMovesLastSeenForwardOnlyAndRecordsEachAgent) {
  CreateConnection();
  PresenceUpdate update;
  update.connections = {{kConnectionId, kT0 + seconds(30)}, {"ffffffffffffffff", kT0}};
  update.agents = {{kConnectionId, AgentSeen{"node", "gpu-node-1", "0.2.0", kT0 + seconds(30)}},
                   {kConnectionId, AgentSeen{"cluster", "pod-c", "0.2.0", kT0 + seconds(20)}},
                   {"ffffffffffffffff", AgentSeen{"node", "x", "0.2.0", kT0}}};
  const std::int64_t audit_before = AuditCount();
  Status recorded = store_->RecordPresence(update);
  ASSERT_TRUE(recorded.ok()) << recorded.ToString();
  EXPECT_EQ(store_->GetConnection(kConnectionId)->last_seen_at, kT0 + seconds(30));
  EXPECT_EQ(AuditCount(), audit_before) << "a call is not a change anyone made";

  // An older sighting (a flush retried after a newer one) moves nothing back.
  update.connections = {{kConnectionId, kT0 + seconds(10)}};
  update.agents = {{kConnectionId, AgentSeen{"node", "gpu-node-1", "0.1.0", kT0 + seconds(10)}}};
  ASSERT_TRUE(store_->RecordPresence(update).ok());
  EXPECT_EQ(store_->GetConnection(kConnectionId)->last_seen_at, kT0 + seconds(30));
  auto agents = store_->ListAgents(kConnectionId, 100);
  ASSERT_TRUE(agents.ok());
  ASSERT_EQ(agents->size(), 2u);
  EXPECT_EQ((*agents)[0].role, "node");
  EXPECT_EQ((*agents)[0].version, "0.2.0");
  EXPECT_EQ((*agents)[0].last_seen_at, kT0 + seconds(30));
  EXPECT_EQ((*agents)[1].role, "cluster");

  // A report moves it too, in its own transaction.
  ASSERT_TRUE(Report(MakeReport("uid-a", 1), kT0 + seconds(40)).ok());
  EXPECT_EQ(store_->GetConnection(kConnectionId)->last_seen_at, kT0 + seconds(40));
  EXPECT_TRUE(store_->RecordPresence({}).ok());
}

TEST_P(SqlStoreTest, APresenceFlushOfManyConnectionsRecordsEachOnceAtItsLatestSighting) {
  // 45 connections: statements of 32, 8 and 1 rows. Each is listed twice, the later sighting
  // first, and so is each agent, so that a row could be changed twice in one statement.
  constexpr int kConnections = 45;
  auto id = [](int i) {
    char text[17];
    std::snprintf(text, sizeof text, "%08x00000000", static_cast<unsigned>(i + 1));
    return std::string(text);
  };
  PresenceUpdate update;
  for (int i = 0; i < kConnections; ++i) {
    CreateConnection(id(i), "u1", "cluster-" + std::to_string(i));
    const WallTime latest = kT0 + seconds(100 + i);
    update.connections.emplace_back(id(i), latest);
    update.connections.emplace_back(id(i), latest - seconds(50));
    update.agents.emplace_back(id(i), AgentSeen{"node", "gpu-node-1", "0.2.0", latest});
    update.agents.emplace_back(id(i),
                               AgentSeen{"node", "gpu-node-1", "0.1.0", latest - seconds(50)});
    update.agents.emplace_back(id(i), AgentSeen{"cluster", "pod-" + std::to_string(i), "0.2.0",
                                                latest - seconds(1)});
  }
  update.connections.emplace_back("ffffffffffffffff", kT0);  // deleted meanwhile: skipped
  update.agents.emplace_back("ffffffffffffffff", AgentSeen{"node", "x", "0.2.0", kT0});
  ASSERT_TRUE(store_->RecordPresence(update).ok());
  for (int i = 0; i < kConnections; ++i) {
    const WallTime latest = kT0 + seconds(100 + i);
    EXPECT_EQ(store_->GetConnection(id(i))->last_seen_at, latest) << i;
    auto agents = store_->ListAgents(id(i), 100);
    ASSERT_TRUE(agents.ok());
    ASSERT_EQ(agents->size(), 2u) << i;
    EXPECT_EQ((*agents)[0].role, "node");
    EXPECT_EQ((*agents)[0].version, "0.2.0");
    EXPECT_EQ((*agents)[0].last_seen_at, latest);
    EXPECT_EQ((*agents)[1].role, "cluster");
    EXPECT_EQ((*agents)[1].instance, "pod-" + std::to_string(i));
  }
}

TEST_P(SqlStoreTest, BindClusterBindsOnceAndRefusesAnotherClusterWithAnAuditEvent) {
  CreateConnection();
  AuditEvent audit = ReportAudit();
  audit.detail = R"({"call":"/api/v1/agent/uploads"})";
  ASSERT_TRUE(store_->BindCluster(kConnectionId, kTokenHash, "uid-a", audit).ok());
  EXPECT_EQ(store_->GetConnection(kConnectionId)->cluster_uid, "uid-a");
  auto binds = Audit({.action = "connection.bind"});
  ASSERT_EQ(binds.size(), 1u);
  EXPECT_EQ(binds[0].detail, R"({"cluster_uid":"uid-a"})");

  const std::int64_t audit_after_bind = AuditCount();
  ASSERT_TRUE(store_->BindCluster(kConnectionId, kTokenHash, "uid-a", audit).ok());
  EXPECT_EQ(AuditCount(), audit_after_bind) << "binding again to the same cluster was audited";

  Status refused = store_->BindCluster(kConnectionId, kTokenHash, "uid-b", audit);
  EXPECT_EQ(refused.code(), StatusCode::kConflict);
  EXPECT_EQ(refused.message().find("uid-a"), std::string::npos) << "leaks the bound UID";
  EXPECT_EQ(store_->GetConnection(kConnectionId)->cluster_uid, "uid-a");
  auto mismatches = Audit({.action = "connection.cluster_mismatch"});
  ASSERT_EQ(mismatches.size(), 1u);
  EXPECT_EQ(mismatches[0].outcome, "refused");
  EXPECT_EQ(mismatches[0].detail,
            R"({"call":"/api/v1/agent/uploads","cluster_uid":"uid-b","bound_cluster_uid":"uid-a"})");
  // A report from the other cluster is refused likewise.
  EXPECT_EQ(Report(MakeReport("uid-b", 1), kT0).code(), StatusCode::kConflict);

  // A token rotated meanwhile binds nothing.
  CreateConnection("00000000000000c2", "u1", "prod-2");
  ASSERT_TRUE(store_
                  ->ReplaceToken("00000000000000c2", "agt_newtoken", std::string(64, 'b'),
                                 kT0 + hours(24), std::nullopt, MakeAudit("connection.rotate"))
                  .ok());
  EXPECT_EQ(store_->BindCluster("00000000000000c2", kTokenHash, "uid-c", ReportAudit()).code(),
            StatusCode::kUnauthenticated);
  EXPECT_FALSE(store_->GetConnection("00000000000000c2")->cluster_uid.has_value());
}

// --- Audit log queries -----------------------------------------------------------------------

TEST_P(SqlStoreTest, AuditFiltersByOwnerOrActorTargetAndActionNewestFirst) {
  auto event = [](const std::string& actor_type, const std::string& actor_id,
                  const std::string& owner, const std::string& target,
                  const std::string& action) {
    AuditEvent e = MakeAudit(action, target, owner);
    e.actor_type = actor_type;
    e.actor_id = actor_id;
    return e;
  };
  // Ids continue after the two user.create events of SetUp.
  ASSERT_TRUE(store_->AppendAudit(event("user", "u1", "u2", "c2", "connection.revoke")).ok());
  ASSERT_TRUE(store_->AppendAudit(event("user", "u2", "u2", "c2", "connection.rotate")).ok());
  ASSERT_TRUE(store_->AppendAudit(event("user", "u2", "u1", "k1", "api_key.revoke")).ok());
  // An agent whose id happens to equal a user id is not that user.
  ASSERT_TRUE(store_->AppendAudit(event("agent", "u2", "u1", "c1", "connection.bind")).ok());
  ASSERT_TRUE(store_->AppendAudit(event("anonymous", "", "", "", "session.refused")).ok());

  auto actions = [](const std::vector<AuditEvent>& events) {
    std::vector<std::string> out;
    for (const AuditEvent& e : events) out.push_back(e.action);
    return out;
  };
  using Actions = std::vector<std::string>;
  EXPECT_EQ(actions(Audit({.owner_id = "u2"})),
            (Actions{"api_key.revoke", "connection.rotate", "connection.revoke", "user.create"}));
  EXPECT_EQ(actions(Audit({.target_id = "c2"})),
            (Actions{"connection.rotate", "connection.revoke"}));
  EXPECT_EQ(actions(Audit({.action = "user.create"})), (Actions{"user.create", "user.create"}));
  EXPECT_EQ(actions(Audit({.owner_id = "u2", .target_id = "c2", .action = "connection.rotate"})),
            (Actions{"connection.rotate"}));
  EXPECT_TRUE(Audit({.owner_id = "nobody"}).empty());
  auto all = Audit();
  ASSERT_EQ(all.size(), 7u);
  EXPECT_EQ(all.front().action, "session.refused");
  for (size_t i = 1; i < all.size(); ++i) EXPECT_GT(all[i - 1].id, all[i].id);
}

TEST_P(SqlStoreTest, AuditPagesWithBeforeIdAndClampsTheLimit) {
  // One transaction behind the store's back: 510 committed appends would each wait for fsync.
  database_->Exec(
          "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 509) "
          "INSERT INTO audit_events (at, actor_type, actor_id, actor_label, credential, action, "
          "target_type, target_id, owner_id, source_address, outcome, detail) "
          "SELECT 1800000000, 'user', 'u1', '', 'api_key', 'connection.rotate', 'connection', "
          "'c' || i, 'u1', '', 'ok', '{}' FROM n");
  EXPECT_EQ(Audit({.limit = 10'000}).size(), 500u);
  EXPECT_EQ(Audit({.limit = 0}).size(), 1u);
  EXPECT_EQ(Audit({.limit = -5}).size(), 1u);

  // Walk every event page by page, as `next_before` does.
  std::vector<std::int64_t> seen;
  std::optional<std::int64_t> before;
  for (;;) {
    auto page = Audit({.before_id = before, .limit = 100});
    if (page.empty()) break;
    for (const AuditEvent& e : page) seen.push_back(e.id);
    before = page.back().id;
  }
  ASSERT_EQ(seen.size(), 512u);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i - 1], seen[i]);

  auto page = Audit({.target_id = "c7", .before_id = seen.front()});
  ASSERT_EQ(page.size(), 1u);
  EXPECT_LT(page[0].id, seen.front());

  // The owner filter pages the same way: every event here is by or about u1, except the
  // creation of u2 (by u1, so also included), and none repeats.
  std::vector<std::int64_t> owned;
  before.reset();
  for (;;) {
    auto owner_page = Audit({.owner_id = "u1", .before_id = before, .limit = 7});
    if (owner_page.empty()) break;
    EXPECT_LE(owner_page.size(), 7u);
    for (const AuditEvent& e : owner_page) owned.push_back(e.id);
    before = owner_page.back().id;
  }
  EXPECT_EQ(owned, seen);
  EXPECT_EQ(Audit({.owner_id = "u1", .limit = 10'000}).size(), 500u);
  EXPECT_EQ(Audit({.owner_id = "u2", .limit = 10'000}).size(), 1u);
}

// --- Hostile input ---------------------------------------------------------------------------

TEST_P(SqlStoreTest, HostileStringsRoundTripByteForByte) {
  const std::string quotes = "'; DROP TABLE users; -- \"\\ %_ ?1 :name @x $y";
  const std::string unicode = "Zürich-東京-🚀-\u202Eevil\u202C";
  const std::string huge(100'000, 'x');

  // Non-ASCII letters are kept as they are; only A-Z is folded.
  const std::string email = "Ünï'\"Q@Exämple.COM";
  ASSERT_TRUE(store_->CreateUser(MakeUser("u3", email), MakeAudit("user.create")).ok());
  EXPECT_EQ(store_->GetUser("u3")->email, "Ünï'\"q@exämple.com");
  EXPECT_EQ(store_->FindUserByEmail("ÜNÏ'\"q@EXäMPLE.com").status().code(),
            StatusCode::kNotFound)
      << "non-ASCII letters are not folded";
  EXPECT_TRUE(store_->FindUserByEmail("Ünï'\"q@exämple.COM").ok());

  ApiKey key = MakeApiKey("k1", "u3", quotes);
  key.name = unicode + quotes;
  ASSERT_TRUE(store_->CreateApiKey(key, MakeAudit("api_key.create")).ok());
  EXPECT_EQ(store_->GetApiKey("k1")->name, key.name);
  EXPECT_EQ(store_->FindApiKeysByPrefix(quotes)->size(), 1u);

  Connection c = MakeConnection(kConnectionId, "u3", quotes + unicode);
  c.agent_name = huge;
  ASSERT_TRUE(store_->CreateConnection(c, MakeAudit("connection.create")).ok());
  auto read = store_->GetConnection(kConnectionId);
  EXPECT_EQ(read->cluster_name, quotes + unicode);
  EXPECT_EQ(read->agent_name, huge);

  InventoryReport report = MakeReport(quotes, 1, unicode);
  report.nodes[0].name = huge;
  report.nodes[0].taints = {{quotes, unicode, "NoSchedule"}};
  report.agent_version = unicode;
  ASSERT_TRUE(store_
                  ->AcceptReport(kConnectionId, kTokenHash, report, kT0,
                                 ReportAudit(kConnectionId))
                  .ok());
  EXPECT_EQ(store_->ListNodes(kConnectionId)->at(0).name, huge);
  EXPECT_EQ(store_->ListNodes(kConnectionId)->at(0).taints[0].key, quotes);
  EXPECT_EQ(store_->ListAgents(kConnectionId, 10)->at(0).instance, unicode);
  auto bind = Audit({.action = "connection.bind"});
  ASSERT_EQ(bind.size(), 1u);
  auto detail = ParseJson(bind[0].detail);
  ASSERT_TRUE(detail.ok());
  EXPECT_EQ(detail->as_object().at("cluster_uid").as_string(), quotes);

  AuditEvent event = MakeAudit(quotes, unicode, huge);
  event.actor_label = huge;
  event.source_address = quotes;
  event.detail = ToJson(json::object{{"note", quotes + unicode}});
  ASSERT_TRUE(store_->AppendAudit(event).ok());
  auto events = Audit({.owner_id = huge, .target_id = unicode, .action = quotes});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].actor_label, huge);
  EXPECT_EQ(events[0].source_address, quotes);
  EXPECT_EQ(events[0].detail, event.detail);
}

INSTANTIATE_TEST_SUITE_P(Engines, SqlStoreTest, testing::kStoreEngines, testing::StoreEngineName);
INSTANTIATE_TEST_SUITE_P(Engines, HandoverTest, testing::kStoreEngines, testing::StoreEngineName);

}  // namespace
}  // namespace uplink::console
