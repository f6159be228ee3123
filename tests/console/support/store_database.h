// A fresh database for one store test, on either engine, so that the whole store suite runs
// against SQLite and PostgreSQL alike (TEST_P over kStoreEngines). Raw reads and writes past
// the store go through the engine's own sql::Database, so a test's SQL is the store's SQL.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "console/store/sql/database.h"
#include "console/store/sql/postgres_database.h"
#include "console/store/sql/sqlite_database.h"
#include "console/store/sql_store.h"
#include "support/postgres_server.h"
#include "test_util.h"

namespace uplink::console::testing {

enum class StoreEngine { kSqlite, kPostgres };

inline const auto kStoreEngines = ::testing::Values(StoreEngine::kSqlite, StoreEngine::kPostgres);

// For INSTANTIATE_TEST_SUITE_P: "Sqlite" or "Postgres".
inline std::string StoreEngineName(const ::testing::TestParamInfo<StoreEngine>& info) {
  return info.param == StoreEngine::kSqlite ? "Sqlite" : "Postgres";
}

// The store's uplink_console_store_writer_round_trips_total, as /metrics renders it; -1 when
// it renders none (SQLite).
inline std::int64_t WriterRoundTrips(const SqlStore& store) {
  std::string rendered;
  store.RenderMetrics(rendered);
  constexpr std::string_view kSample = "\nuplink_console_store_writer_round_trips_total ";
  const size_t at = rendered.find(kSample);
  if (at == std::string::npos) return -1;
  return std::stoll(rendered.substr(at + kSample.size()));
}

class TestDatabase {
 public:
  explicit TestDatabase(StoreEngine engine) : engine_(engine) {
    if (engine != StoreEngine::kPostgres) return;
    auto server = uplink::testing::PostgresServer::Shared();
    if (!server.ok()) {
      ADD_FAILURE() << server.status().ToString();
      return;
    }
    server_ = *server;
    auto url = server_->NewDatabase();
    if (!url.ok()) {
      ADD_FAILURE() << url.status().ToString();
      return;
    }
    postgres_ = sql::PostgresLocation{*url, server_->password()};
  }
  // Stores on it must be closed first.
  ~TestDatabase() {
    if (postgres_) (void)server_->DropDatabase(postgres_->url);
  }
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  StoreEngine engine() const { return engine_; }
  // The SQLite file (only for checks of the file itself).
  const std::string& sqlite_path() const { return sqlite_path_; }

  // Stands between a store and its own connection (the writer's): a test's fault or hold.
  using WrapDatabase =
      std::function<std::unique_ptr<sql::Database>(std::unique_ptr<sql::Database>)>;

  // A store on this database, as the console opens it; each call opens another (a restart,
  // or a second replica).
  Result<std::unique_ptr<SqlStore>> OpenStore(const WrapDatabase& wrap = nullptr) const {
    UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<sql::Database> database, OpenRaw());
    if (wrap) database = wrap(std::move(database));
    std::vector<std::unique_ptr<sql::Database>> lookups;
    for (int i = 0; i < 2; ++i) {
      UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<sql::Database> lookup,
                              engine_ == StoreEngine::kSqlite
                                  ? sql::OpenSqliteReader(sqlite_path_)
                                  : OpenRaw());
      lookups.push_back(std::move(lookup));
    }
    return SqlStore::Open(std::move(database), std::move(lookups));
  }

  // The first column of the first row `sql` returns, read past the store; -1 when none.
  std::int64_t Count(const std::string& sql) const {
    auto database = OpenRaw();
    EXPECT_TRUE(database.ok()) << database.status().ToString();
    if (!database.ok()) return -1;
    auto statement = (*database)->Prepare(sql);
    EXPECT_TRUE(statement.ok()) << statement.status().ToString();
    if (!statement.ok()) return -1;
    sql::Statement* query = *statement;
    std::int64_t value = query->Step() == sql::Statement::StepResult::kRow ? query->Int(0) : -1;
    query->Reset();
    return value;
  }

  // The bytes the database takes.
  std::int64_t SizeBytes() const {
    if (engine_ == StoreEngine::kPostgres) {
      return Count("SELECT pg_database_size(current_database())");
    }
    return Count("PRAGMA page_count") * Count("PRAGMA page_size");
  }

  // Runs `sql` past the store.
  void Exec(const std::string& sql) const {
    auto database = OpenRaw();
    ASSERT_TRUE(database.ok()) << database.status().ToString();
    Status status = (*database)->Exec(sql);
    ASSERT_TRUE(status.ok()) << status.ToString();
  }

 private:
  Result<std::unique_ptr<sql::Database>> OpenRaw() const {
    if (engine_ == StoreEngine::kSqlite) return sql::OpenSqliteDatabase(sqlite_path_);
    if (!postgres_) return UnavailableError("no PostgreSQL database for this test");
    return sql::OpenPostgresDatabase(*postgres_);
  }

  StoreEngine engine_;
  uplink::testing::PostgresServer* server_ = nullptr;
  ScratchDir dir_;
  std::string sqlite_path_ = dir_.File("console.db");
  std::optional<sql::PostgresLocation> postgres_;
};

}  // namespace uplink::console::testing
