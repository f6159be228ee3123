// The PostgreSQL schema (postgres_schema.cc) is SQLite's (sqlite_schema.cc) in PostgreSQL's
// types: both applied to fresh databases, then compared table by table as each engine's
// catalogue describes them.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "console/store/sql/postgres_database.h"
#include "support/postgres_server.h"

namespace uplink::console::sql {
namespace {

using uplink::testing::PostgresServer;
using StepResult = Statement::StepResult;
using Rows = std::vector<std::vector<std::string>>;

// The tables whose rows the store's SQL orders by SQLite's implicit rowid: in PostgreSQL they
// carry it as a column.
const std::set<std::string> kTablesWithRowid = {
    "users", "api_keys", "connections", "handovers", "connection_agents", "node_resources",
    "node_taints", "execution_credentials", "workspace_commands"};

// Equal sets, or a failure that lists only what differs (the sets are long).
void ExpectSameSet(const std::set<std::string>& postgres, const std::set<std::string>& sqlite) {
  std::string differences;
  for (const auto& item : postgres) {
    if (!sqlite.count(item)) differences += "\n  only in PostgreSQL: " + item;
  }
  for (const auto& item : sqlite) {
    if (!postgres.count(item)) differences += "\n  only in SQLite: " + item;
  }
  EXPECT_TRUE(differences.empty()) << differences;
}

class SchemaComparison : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sqlite3_open(dir_.File("console.db").c_str(), &sqlite_), SQLITE_OK);
    for (const Migration& m : SqliteMigrations()) {
      char* error = nullptr;
      ASSERT_EQ(sqlite3_exec(sqlite_, m.sql, nullptr, nullptr, &error), SQLITE_OK)
          << "SQLite migration " << m.version << ": " << (error ? error : "");
    }
    auto server = PostgresServer::Shared();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    auto url = (*server)->NewDatabase();
    ASSERT_TRUE(url.ok()) << url.status().ToString();
    auto db = OpenPostgresDatabase({*url, (*server)->password()});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    postgres_ = std::move(*db);
    for (const Migration& m : PostgresMigrations()) {
      Status applied = postgres_->Exec(std::string("BEGIN;") + m.sql + ";COMMIT");
      ASSERT_TRUE(applied.ok()) << "PostgreSQL migration " << m.version << ": "
                                << applied.ToString();
    }
  }
  void TearDown() override { sqlite3_close(sqlite_); }

  Rows Sqlite(const std::string& sql) {
    Rows rows;
    sqlite3_stmt* statement = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(sqlite_, sql.c_str(), -1, &statement, nullptr), SQLITE_OK) << sql;
    while (sqlite3_step(statement) == SQLITE_ROW) {
      auto& row = rows.emplace_back();
      for (int c = 0; c < sqlite3_column_count(statement); ++c) {
        const unsigned char* text = sqlite3_column_text(statement, c);
        row.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
      }
    }
    sqlite3_finalize(statement);
    return rows;
  }

  Rows Postgres(const std::string& sql, int columns = 1) {
    Rows rows;
    auto statement = postgres_->Prepare(sql);
    EXPECT_TRUE(statement.ok());
    Statement& s = **statement;
    StepResult step;
    while ((step = s.Step()) == StepResult::kRow) {
      auto& row = rows.emplace_back();
      for (int c = 0; c < columns; ++c) row.emplace_back(s.Text(c));
    }
    EXPECT_EQ(step, StepResult::kDone) << sql << ": " << postgres_->LastMessage();
    s.Reset();
    return rows;
  }

  std::set<std::string> SqliteTables() {
    std::set<std::string> tables;
    for (auto& row : Sqlite("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
                            "LIKE 'sqlite_%'")) {
      tables.insert(row[0]);
    }
    return tables;
  }

  uplink::testing::TempDir dir_;
  sqlite3* sqlite_ = nullptr;
  std::unique_ptr<Database> postgres_;
};

TEST_F(SchemaComparison, BothEnginesHaveTheSameVersions) {
  std::vector<int> sqlite_versions, postgres_versions;
  for (const Migration& m : SqliteMigrations()) sqlite_versions.push_back(m.version);
  for (const Migration& m : PostgresMigrations()) postgres_versions.push_back(m.version);
  EXPECT_EQ(postgres_versions, sqlite_versions);
}

TEST_F(SchemaComparison, TablesColumnsTypesAndNullability) {
  std::set<std::string> postgres_tables;
  for (auto& row : Postgres("SELECT table_name FROM information_schema.tables WHERE "
                            "table_schema = 'public'")) {
    postgres_tables.insert(row[0]);
  }
  ASSERT_EQ(postgres_tables, SqliteTables());

  const std::map<std::string, std::string> kTypes = {
      {"INTEGER", "bigint"}, {"TEXT", "text"}, {"REAL", "double precision"}, {"BLOB", "bytea"}};
  std::set<std::string> with_rowid;
  for (const std::string& table : postgres_tables) {
    std::vector<std::string> expected;
    for (auto& c : Sqlite("SELECT name, type, \"notnull\", pk FROM pragma_table_info('" + table +
                          "') ORDER BY cid")) {
      ASSERT_TRUE(kTypes.count(c[1])) << table << "." << c[0] << " is " << c[1];
      // A primary key's columns are NOT NULL in PostgreSQL whatever SQLite allows.
      bool not_null = c[2] == "1" || c[3] != "0";
      expected.push_back(c[0] + " " + kTypes.at(c[1]) + (not_null ? " NOT NULL" : ""));
    }
    std::vector<std::string> actual;
    for (auto& c : Postgres("SELECT column_name, data_type, is_nullable FROM "
                            "information_schema.columns WHERE table_schema = 'public' AND "
                            "table_name = '" +
                                table + "' ORDER BY ordinal_position",
                            3)) {
      if (c[0] == "rowid") {
        with_rowid.insert(table);
        continue;
      }
      actual.push_back(c[0] + " " + c[1] + (c[2] == "NO" ? " NOT NULL" : ""));
    }
    EXPECT_EQ(actual, expected) << table;
  }
  EXPECT_EQ(with_rowid, kTablesWithRowid);
}

TEST_F(SchemaComparison, KeysUniqueConstraintsForeignKeysAndIndexes) {
  std::set<std::string> sqlite_keys, postgres_keys;
  for (const std::string& table : SqliteTables()) {
    std::string primary_key;
    for (auto& c :
         Sqlite("SELECT name FROM pragma_table_info('" + table + "') WHERE pk > 0 ORDER BY pk")) {
      primary_key += (primary_key.empty() ? "" : ",") + c[0];
    }
    if (!primary_key.empty()) sqlite_keys.insert(table + " PRIMARY KEY (" + primary_key + ")");
    for (auto& index :
         Sqlite("SELECT name FROM pragma_index_list('" + table + "') WHERE origin = 'u'")) {
      std::string columns;
      for (auto& c :
           Sqlite("SELECT name FROM pragma_index_info('" + index[0] + "') ORDER BY seqno")) {
        columns += (columns.empty() ? "" : ",") + c[0];
      }
      sqlite_keys.insert(table + " UNIQUE (" + columns + ")");
    }
    for (auto& fk : Sqlite("SELECT \"from\", \"table\", \"to\", on_delete FROM "
                           "pragma_foreign_key_list('" +
                           table + "')")) {
      sqlite_keys.insert(table + " FOREIGN KEY (" + fk[0] + ") REFERENCES " + fk[1] + "(" + fk[2] +
                         ") ON DELETE " + fk[3]);
    }
  }
  for (auto& row : Postgres(
           "SELECT c.conrelid::regclass::text || CASE c.contype WHEN 'p' THEN ' PRIMARY KEY (' "
           "ELSE ' UNIQUE (' END || string_agg(a.attname, ',' ORDER BY k.n) || ')' "
           "FROM pg_constraint c, unnest(c.conkey) WITH ORDINALITY k(attnum, n), pg_attribute a "
           "WHERE c.connamespace = 'public'::regnamespace AND c.contype IN ('p', 'u') AND "
           "a.attrelid = c.conrelid AND a.attnum = k.attnum "
           "GROUP BY c.oid, c.conrelid, c.contype")) {
    postgres_keys.insert(row[0]);
  }
  for (auto& row : Postgres(
           "SELECT c.conrelid::regclass::text || ' FOREIGN KEY (' || a.attname || ') REFERENCES ' "
           "|| c.confrelid::regclass::text || '(' || f.attname || ') ON DELETE ' || "
           "CASE c.confdeltype WHEN 'c' THEN 'CASCADE' WHEN 'a' THEN 'NO ACTION' ELSE "
           "c.confdeltype::text END FROM pg_constraint c, pg_attribute a, pg_attribute f "
           "WHERE c.connamespace = 'public'::regnamespace AND c.contype = 'f' AND a.attrelid = "
           "c.conrelid AND a.attnum = c.conkey[1] AND "
           "f.attrelid = c.confrelid AND f.attnum = c.confkey[1]")) {
    postgres_keys.insert(row[0]);
  }
  ExpectSameSet(postgres_keys, sqlite_keys);

  // The indexes made by CREATE INDEX (SQLite keeps their SQL; PostgreSQL's constraints make
  // the others), with their uniqueness.
  std::set<std::string> sqlite_indexes, postgres_indexes;
  for (auto& row : Sqlite("SELECT m.name || ' ON ' || m.tbl_name || (CASE l.\"unique\" WHEN 1 "
                          "THEN ' UNIQUE' ELSE '' END) FROM sqlite_master m, "
                          "pragma_index_list(m.tbl_name) l WHERE m.type = 'index' AND m.sql IS "
                          "NOT NULL AND l.name = m.name")) {
    sqlite_indexes.insert(row[0]);
  }
  for (auto& row : Postgres("SELECT i.indexrelid::regclass::text || ' ON ' || "
                            "i.indrelid::regclass::text || CASE WHEN i.indisunique THEN ' UNIQUE' "
                            "ELSE '' END FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid "
                            "JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = "
                            "'public' AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE "
                            "c.conindid = i.indexrelid)")) {
    postgres_indexes.insert(row[0]);
  }
  ExpectSameSet(postgres_indexes, sqlite_indexes);
}

TEST_F(SchemaComparison, RowidKeepsInsertionOrderAndAuditDetailMustBeAnObject) {
  ASSERT_TRUE(postgres_
                  ->Exec("INSERT INTO users (id, email, created_at) VALUES ('b', 'b@x', 1), "
                         "('a', 'a@x', 1), ('c', 'c@x', 1)")
                  .ok())
      << postgres_->LastMessage();
  Rows users = Postgres("SELECT id FROM users ORDER BY created_at, rowid");
  EXPECT_EQ(users, (Rows{{"b"}, {"a"}, {"c"}}));

  const std::string audit =
      "INSERT INTO audit_events (at, actor_type, actor_id, actor_label, credential, action, "
      "target_type, target_id, owner_id, source_address, outcome, detail) VALUES "
      "(1, 'user', 'a', 'a', 'session', 'x', 'user', 'a', 'a', '', 'ok', ";
  EXPECT_TRUE(postgres_->Exec(audit + "'{\"k\": 1}')").ok()) << postgres_->LastMessage();
  for (const char* detail : {"'[1]'", "'not json'", "'{\"k\": '", "'\"text\"'"}) {
    EXPECT_FALSE(postgres_->Exec(audit + detail + ")").ok()) << detail;
    EXPECT_EQ(postgres_->LastFailure(), Failure::kCheck)
        << detail << ": " << postgres_->LastMessage();
  }
}

}  // namespace
}  // namespace uplink::console::sql
