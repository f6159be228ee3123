#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>

#include "console/store/sqlite_store.h"
#include "test_util.h"

namespace uplink::console {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using testing::ScratchDir;

const WallTime kT0 = FromUnixSeconds(1'800'000'000);

// Runs one statement on the database file behind the store's back.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

std::int64_t RawCount(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK);
  std::int64_t value = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

const std::string kTokenHash(64, 'a');

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

InventoryReport MakeReport(const std::string& cluster_uid, int node_count) {
  InventoryReport report;
  report.agent_version = "0.1.0";
  report.cluster_uid = cluster_uid;
  report.selector = "nvidia.com/gpu.present=true";
  report.collected_at = kT0;
  for (int i = 0; i < node_count; ++i) report.nodes.push_back(MakeNode(i));
  return report;
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = SqliteStore::Open(path_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    ASSERT_TRUE(store_->CreateUser({"u1", "a@example.com", true, kT0}).ok());
    ASSERT_TRUE(store_->CreateUser({"u2", "b@example.com", false, kT0}).ok());
  }

  ScratchDir dir_;
  std::string path_ = dir_.File("console.db");
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreTest, OpeningAnEmptyFileAppliesEveryMigrationAndRecordsIt) {
  EXPECT_EQ(RawCount(path_, "SELECT MAX(version) FROM schema_migrations"),
            SqliteStore::LatestSchemaVersion());
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM schema_migrations"),
            SqliteStore::LatestSchemaVersion());
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM users"), 2);
}

TEST_F(SqliteStoreTest, DatabaseFileIsReadableByItsOwnerOnlyAndUsesWal) {
  struct stat info;
  ASSERT_EQ(::stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST_F(SqliteStoreTest, ReopeningKeepsDataAndDoesNotReapplyMigrations) {
  ASSERT_TRUE(store_->CreateConnection(MakeConnection("00000000000000c1", "u1", "prod")).ok());
  store_.reset();
  auto reopened = SqliteStore::Open(path_);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM schema_migrations"),
            SqliteStore::LatestSchemaVersion());
  auto connection = (*reopened)->GetConnection("00000000000000c1");
  ASSERT_TRUE(connection.ok());
  EXPECT_EQ(connection->cluster_name, "prod");
  EXPECT_EQ(*(*reopened)->CountUsers(), 2);
}

TEST_F(SqliteStoreTest, DatabaseFromANewerBinaryIsRefusedWithAClearError) {
  store_.reset();
  RawExec(path_, "INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)");
  auto reopened = SqliteStore::Open(path_);
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(reopened.status().message().find("schema version 999"), std::string::npos);
  EXPECT_NE(reopened.status().message().find("newer uplink-console"), std::string::npos);
}

TEST_F(SqliteStoreTest, UsersAreCreatedReadAndUniqueByEmail) {
  auto user = store_->GetUser("u1");
  ASSERT_TRUE(user.ok());
  EXPECT_EQ(user->email, "a@example.com");
  EXPECT_TRUE(user->is_admin);
  EXPECT_EQ(user->created_at, kT0);
  EXPECT_EQ(store_->CreateUser({"u3", "a@example.com", false, kT0}).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->GetUser("nobody").status().code(), StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, UserWithApiKeyIsCreatedWhollyOrNotAtAll) {
  ASSERT_TRUE(store_->CreateUserWithApiKey({"u9", "nine@example.com", true, kT0},
                                           {"k9", "u9", "uk_99999999", "h9", kT0})
                  .ok());
  EXPECT_EQ(store_->FindApiKeysByPrefix("uk_99999999")->size(), 1u);
  // The key's id repeats, so the key insert fails and the user must not remain.
  EXPECT_FALSE(store_->CreateUserWithApiKey({"u10", "ten@example.com", true, kT0},
                                            {"k9", "u10", "uk_10101010", "h10", kT0})
                   .ok());
  EXPECT_EQ(store_->GetUser("u10").status().code(), StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, ApiKeysAreFoundByPrefixAndPrefixesMayRepeat) {
  ASSERT_TRUE(store_->CreateApiKey({"k1", "u1", "uk_AAAAAAAA", "h1", kT0}).ok());
  ASSERT_TRUE(store_->CreateApiKey({"k2", "u2", "uk_AAAAAAAA", "h2", kT0}).ok());
  auto keys = store_->FindApiKeysByPrefix("uk_AAAAAAAA");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(store_->FindApiKeysByPrefix("uk_BBBBBBBB")->empty());
}

TEST_F(SqliteStoreTest, ConnectionsAreCreatedListedPerOwnerAndFoundByTokenPrefix) {
  ASSERT_TRUE(store_->CreateConnection(MakeConnection("00000000000000c1", "u1", "prod")).ok());
  ASSERT_TRUE(store_->CreateConnection(MakeConnection("00000000000000c2", "u1", "dev")).ok());
  ASSERT_TRUE(store_->CreateConnection(MakeConnection("00000000000000c3", "u2", "prod")).ok());
  EXPECT_EQ(store_->ListConnections("u1")->size(), 2u);
  EXPECT_EQ(store_->ListConnections("u2")->size(), 1u);
  EXPECT_EQ(store_->ListAllConnections()->size(), 3u);
  auto found = store_->FindConnectionsByTokenPrefix("agt_00000000");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->size(), 3u);  // the test ids share their first 8 characters
  auto one = store_->GetConnection("00000000000000c2");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->expires_at, kT0 + hours(24));
  EXPECT_FALSE(one->revoked_at.has_value());
  EXPECT_FALSE(one->last_report_at.has_value());
  EXPECT_FALSE(one->cluster_uid.has_value());
}

TEST_F(SqliteStoreTest, ClusterNameIsUniquePerOwnerUntilTheConnectionIsRevoked) {
  ASSERT_TRUE(store_->CreateConnection(MakeConnection("00000000000000c1", "u1", "prod")).ok());
  EXPECT_EQ(store_->CreateConnection(MakeConnection("00000000000000c2", "u1", "prod")).code(),
            StatusCode::kConflict);
  ASSERT_TRUE(store_->RevokeConnection("00000000000000c1", kT0).ok());
  EXPECT_TRUE(store_->CreateConnection(MakeConnection("00000000000000c2", "u1", "prod")).ok());
}

TEST_F(SqliteStoreTest, ReplaceTokenAndRevokeUpdateTheRowAndRevokeKeepsTheFirstTime) {
  ASSERT_TRUE(store_->CreateConnection(MakeConnection("00000000000000c1", "u1", "prod")).ok());
  ASSERT_TRUE(store_
                  ->ReplaceToken("00000000000000c1", "agt_newnewne", std::string(64, 'b'),
                                 kT0 + hours(48))
                  .ok());
  auto rotated = store_->GetConnection("00000000000000c1");
  EXPECT_EQ(rotated->token_prefix, "agt_newnewne");
  EXPECT_EQ(rotated->token_hash, std::string(64, 'b'));
  EXPECT_EQ(rotated->expires_at, kT0 + hours(48));
  ASSERT_TRUE(store_->RevokeConnection("00000000000000c1", kT0 + seconds(5)).ok());
  ASSERT_TRUE(store_->RevokeConnection("00000000000000c1", kT0 + seconds(9)).ok());
  EXPECT_EQ(store_->GetConnection("00000000000000c1")->revoked_at, kT0 + seconds(5));
  EXPECT_EQ(store_->RevokeConnection("ffffffffffffffff", kT0).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ReplaceToken("ffffffffffffffff", "p", "h", kT0).code(), StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, FirstReportBindsTheClusterAndAnotherClusterIsRefusedWithNothingStored) {
  const std::string id = "00000000000000c1";
  ASSERT_TRUE(store_->CreateConnection(MakeConnection(id, "u1", "prod")).ok());
  ASSERT_TRUE(store_->AcceptReport(id, kTokenHash, MakeReport("uid-a", 3), kT0 + seconds(1)).ok());
  Status refused = store_->AcceptReport(id, kTokenHash, MakeReport("uid-b", 5), kT0 + seconds(2));
  EXPECT_EQ(refused.code(), StatusCode::kConflict);
  EXPECT_EQ(refused.message().find("uid-a"), std::string::npos) << "leaks the bound UID";

  auto connection = store_->GetConnection(id);
  EXPECT_EQ(connection->cluster_uid, "uid-a");
  EXPECT_EQ(connection->last_report_at, kT0 + seconds(1));
  EXPECT_EQ(connection->totals.nodes, 3);
  EXPECT_EQ(store_->ListNodes(id)->size(), 3u);
}

TEST_F(SqliteStoreTest, EachReportReplacesTheNodeListWithChildRowsAndTotals) {
  const std::string id = "00000000000000c1";
  ASSERT_TRUE(store_->CreateConnection(MakeConnection(id, "u1", "prod")).ok());
  ASSERT_TRUE(store_->AcceptReport(id, kTokenHash, MakeReport("uid-a", 10), kT0).ok());
  InventoryReport second = MakeReport("uid-a", 2);
  second.nodes[1].ready = false;
  second.nodes[1].error = "status.capacity[nvidia.com/gpu]: 'eight' is not a quantity";
  second.nodes[0].unschedulable = true;
  ASSERT_TRUE(store_->AcceptReport(id, kTokenHash, second, kT0 + seconds(60)).ok());

  auto nodes = store_->ListNodes(id);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "gpu-node-0");
  EXPECT_TRUE((*nodes)[0].unschedulable);
  ASSERT_EQ((*nodes)[0].resources.size(), 1u);
  EXPECT_EQ((*nodes)[0].resources[0].name, "nvidia.com/gpu");
  ASSERT_EQ((*nodes)[0].taints.size(), 1u);
  EXPECT_EQ((*nodes)[0].taints[0].effect, "NoSchedule");
  EXPECT_EQ((*nodes)[1].error, second.nodes[1].error);
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM node_resources"), 2);
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM node_taints"), 2);

  auto totals = store_->GetConnection(id)->totals;
  EXPECT_EQ(totals.nodes, 2);
  EXPECT_EQ(totals.nodes_ready, 1);
  EXPECT_EQ(totals.gpu_capacity, 16);
  EXPECT_EQ(totals.gpus_ready, 0);  // node 0 is cordoned, node 1 is not ready
}

TEST_F(SqliteStoreTest, RepeatedReportsOfFiveThousandNodesLeaveExactlyTheLatestSet) {
  const std::string id = "00000000000000c1";
  ASSERT_TRUE(store_->CreateConnection(MakeConnection(id, "u1", "prod")).ok());
  InventoryReport report = MakeReport("uid-a", 5000);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(store_->AcceptReport(id, kTokenHash, report, kT0 + seconds(round)).ok());
  }
  EXPECT_EQ(store_->ListNodes(id)->size(), 5000u);
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM connection_nodes"), 5000);
}

TEST_F(SqliteStoreTest, AReportForAMissingConnectionIsNotFoundAndLeavesNoTransactionOpen) {
  EXPECT_EQ(store_->AcceptReport("ffffffffffffffff", kTokenHash, MakeReport("uid", 1), kT0).code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(store_->CreateConnection(MakeConnection("00000000000000c1", "u1", "prod")).ok());
  EXPECT_TRUE(store_->AcceptReport("00000000000000c1", kTokenHash, MakeReport("uid", 1), kT0).ok());
}

TEST_F(SqliteStoreTest, AReportAuthenticatedWithATokenRotatedOrRevokedMeanwhileIsRefused) {
  const std::string id = "00000000000000c1";
  ASSERT_TRUE(store_->CreateConnection(MakeConnection(id, "u1", "prod")).ok());
  ASSERT_TRUE(store_->AcceptReport(id, kTokenHash, MakeReport("uid-a", 2), kT0).ok());
  // Rotation lands while a report authenticated with the old token is still being received.
  ASSERT_TRUE(store_->ReplaceToken(id, "agt_newtoken", std::string(64, 'b'), kT0 + hours(24)).ok());
  EXPECT_EQ(store_->AcceptReport(id, kTokenHash, MakeReport("uid-a", 7), kT0 + seconds(1)).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(store_->ListNodes(id)->size(), 2u) << "the late report was stored";
  const std::string new_hash(64, 'b');
  ASSERT_TRUE(store_->AcceptReport(id, new_hash, MakeReport("uid-a", 3), kT0 + seconds(2)).ok());
  ASSERT_TRUE(store_->RevokeConnection(id, kT0 + seconds(3)).ok());
  EXPECT_EQ(store_->AcceptReport(id, new_hash, MakeReport("uid-a", 9), kT0 + seconds(4)).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(store_->ListNodes(id)->size(), 3u);
}

TEST_F(SqliteStoreTest, PingAnswersOnAnOpenStore) { EXPECT_TRUE(store_->Ping().ok()); }

}  // namespace
}  // namespace uplink::console
