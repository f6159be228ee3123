// The PostgreSQL engine (sql::Database over libpq) against a real PostgreSQL 15 server
// (tests/support/postgres_server.h), one fresh database per test.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <libpq-fe.h>

#include "console/store/sql/postgres_database.h"
#include "console/store/sql/reconnect_gate.h"
#include "postgres_fixture.h"
#include "support/postgres_server.h"
#include "support/process.h"
#include "support/stall_proxy.h"

namespace uplink::console::sql {
namespace {

using uplink::testing::PostgresServer;
using StepResult = Statement::StepResult;

class PostgresDatabaseTest : public console::testing::PostgresFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PostgresFixture::SetUp());
    db_ = Open();
    ASSERT_NE(db_, nullptr);
  }

  std::unique_ptr<Database> Open() {
    auto db = OpenPostgresDatabase(location());
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    return db.ok() ? std::move(*db) : nullptr;
  }

  static void MustExec(Database& db, const std::string& sql) {
    Status status = db.Exec(sql);
    ASSERT_TRUE(status.ok()) << sql << ": " << status.ToString();
  }

  // The first column of the only row of `sql` (no parameters), as an integer.
  static std::int64_t Count(Database& db, const std::string& sql) {
    auto statement = db.Prepare(sql);
    EXPECT_TRUE(statement.ok());
    Statement& s = **statement;
    EXPECT_EQ(s.Step(), StepResult::kRow) << db.LastMessage();
    std::int64_t value = s.Int(0);
    s.Reset();
    return value;
  }

  // Steps `s` once, expecting a failure of `kind`; resets it.
  static void ExpectFailure(Database& db, Statement& s, Failure kind) {
    EXPECT_EQ(s.Step(), StepResult::kError);
    EXPECT_EQ(db.LastFailure(), kind) << db.LastMessage();
    s.Reset();
  }

  // Makes table r (x BIGINT); its INSERT statement, of one parameter.
  Statement* TableR() {
    MustExec(*db_, "CREATE TABLE r (x BIGINT)");
    auto insert = db_->Prepare("INSERT INTO r VALUES (?)");
    EXPECT_TRUE(insert.ok());
    return insert.ok() ? *insert : nullptr;
  }
  // Makes table u (x BIGINT PRIMARY KEY); its INSERT statement, of one parameter.
  Statement* TableU() {
    MustExec(*db_, "CREATE TABLE u (x BIGINT PRIMARY KEY)");
    auto insert = db_->Prepare("INSERT INTO u VALUES (?)");
    EXPECT_TRUE(insert.ok());
    return insert.ok() ? *insert : nullptr;
  }
  void Insert(Statement& s, std::int64_t x) {
    s.BindInt(1, x);
    EXPECT_EQ(s.Step(), StepResult::kDone) << db_->LastMessage();
    s.Reset();
  }

  std::unique_ptr<Database> db_;
};

// Without PostgreSQL's server the tests fail, saying how to install it; they never skip.
TEST(PostgresServerTest, MissingBinariesFailWithWhatToDo) {
  auto server = PostgresServer::Launch("/nonexistent/postgresql/bin");
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(server.status().message().find("make deps"), std::string::npos)
      << server.status().message();
}

TEST_F(PostgresDatabaseTest, NumbersQuestionMarksOutsideLiteralsIdentifiersAndComments) {
  EXPECT_EQ(db_->engine(), Engine::kPostgres);
  MustExec(*db_, "CREATE TABLE t (\"a?b\" BIGINT, note TEXT)");
  MustExec(*db_, "INSERT INTO t VALUES (7, 'x')");
  auto statement = db_->Prepare(
      "SELECT '?', 'it''s ?', \"a?b\", ? -- not ? a parameter\n"
      ", /* nor ? this */ ? FROM t WHERE note = ?");
  ASSERT_TRUE(statement.ok());
  Statement& s = **statement;
  s.BindInt(1, 41);
  s.BindText(2, "two", false);
  s.BindText(3, "x", true);
  ASSERT_EQ(s.Step(), StepResult::kRow) << db_->LastMessage();
  EXPECT_EQ(s.Text(0), "?");
  EXPECT_EQ(s.Text(1), "it's ?");
  EXPECT_EQ(s.Int(2), 7);
  EXPECT_EQ(s.Int(3), 41);
  EXPECT_EQ(s.Text(4), "two");
  EXPECT_EQ(s.Step(), StepResult::kDone);
  s.Reset();
  // The same statement prepared once: asked again, the same object.
  auto again = db_->Prepare(
      "SELECT '?', 'it''s ?', \"a?b\", ? -- not ? a parameter\n"
      ", /* nor ? this */ ? FROM t WHERE note = ?");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, &s);
}

TEST_F(PostgresDatabaseTest, AnEscapeStringLiteralHoldsItsQuestionMark) {
  auto statement = db_->Prepare("SELECT E'it\\'s ?', ?");
  ASSERT_TRUE(statement.ok());
  Statement& s = **statement;
  s.BindInt(1, 7);
  ASSERT_EQ(s.Step(), StepResult::kRow) << db_->LastMessage();
  EXPECT_EQ(s.Text(0), "it's ?");
  EXPECT_EQ(s.Int(1), 7);
  s.Reset();
}

TEST_F(PostgresDatabaseTest, RoundTripsEveryType) {
  MustExec(*db_, "CREATE TABLE v (k BIGINT PRIMARY KEY, i BIGINT, d DOUBLE PRECISION, t TEXT, b BYTEA)");
  std::string blob(1 << 20, '\0');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>((i * 7 + i / 256) & 0xff);
  struct Row {
    std::int64_t i;
    double d;
    std::string t;
    std::string b;
  };
  const std::vector<Row> rows = {
      {std::numeric_limits<std::int64_t>::min(), 1e-300, "naïve café, 日本語, 😀", blob},
      {std::numeric_limits<std::int64_t>::max(), 0.1, "", ""},
      {0, -0.0, "'quoted' \"and\" \\backslashed\\ ?", std::string("\0\x01\xff", 3)},
      {-1, std::numeric_limits<double>::max(), std::string(70000, 'x'), "\\x00"},
      {42, std::numeric_limits<double>::infinity(), "t", "f"},
  };
  auto insert = db_->Prepare("INSERT INTO v (k, i, d, t, b) VALUES (?, ?, ?, ?, ?)");
  ASSERT_TRUE(insert.ok());
  for (size_t k = 0; k < rows.size(); ++k) {
    Statement& s = **insert;
    s.BindInt(1, static_cast<std::int64_t>(k));
    s.BindInt(2, rows[k].i);
    s.BindDouble(3, rows[k].d);
    s.BindText(4, rows[k].t, false);
    s.BindBlob(5, rows[k].b);
    ASSERT_EQ(s.Step(), StepResult::kDone) << db_->LastMessage();
    EXPECT_EQ(s.Changes(), 1);
    s.Reset();
  }
  {  // NULL in every column, and a NaN
    Statement& s = **insert;
    s.BindInt(1, 100);
    s.BindNull(2);
    s.BindNull(3);
    s.BindNull(4);
    s.BindNull(5);
    ASSERT_EQ(s.Step(), StepResult::kDone) << db_->LastMessage();
    s.Reset();
    s.BindInt(1, 101);
    s.BindDouble(3, std::nan(""));
    ASSERT_EQ(s.Step(), StepResult::kDone) << db_->LastMessage();  // unbound: NULL
    s.Reset();
  }

  auto select = db_->Prepare("SELECT i, d, t, b FROM v WHERE k = ?");
  ASSERT_TRUE(select.ok());
  Statement& s = **select;
  for (size_t k = 0; k < rows.size(); ++k) {
    s.BindInt(1, static_cast<std::int64_t>(k));
    ASSERT_EQ(s.Step(), StepResult::kRow) << db_->LastMessage();
    EXPECT_EQ(s.Int(0), rows[k].i);
    EXPECT_EQ(std::bit_cast<std::uint64_t>(s.Double(1)), std::bit_cast<std::uint64_t>(rows[k].d))
        << rows[k].d << " came back as " << s.Double(1);
    EXPECT_EQ(s.Text(2), rows[k].t);
    std::string_view bytes = s.Blob(3);
    EXPECT_TRUE(bytes == rows[k].b) << "row " << k << ": " << bytes.size() << " bytes";
    EXPECT_EQ(s.Blob(3).data(), bytes.data()) << "a blob is decoded once per row";
    for (int column = 0; column < 4; ++column) EXPECT_FALSE(s.IsNull(column));
    EXPECT_EQ(s.Step(), StepResult::kDone);
    s.Reset();
  }
  s.BindInt(1, 100);
  ASSERT_EQ(s.Step(), StepResult::kRow);
  for (int column = 0; column < 4; ++column) EXPECT_TRUE(s.IsNull(column)) << column;
  EXPECT_EQ(s.Int(0), 0);
  EXPECT_EQ(s.Text(2), "");
  s.Reset();
  s.BindInt(1, 101);
  ASSERT_EQ(s.Step(), StepResult::kRow);
  EXPECT_TRUE(std::isnan(s.Double(1)));
  s.Reset();
}

TEST_F(PostgresDatabaseTest, TextWithANulByteIsRefusedNotCut) {
  MustExec(*db_, "CREATE TABLE t (x TEXT)");
  auto insert = db_->Prepare("INSERT INTO t VALUES (?)");
  ASSERT_TRUE(insert.ok());
  (*insert)->BindText(1, std::string_view("ab\0cd", 5), true);
  ExpectFailure(*db_, **insert, Failure::kOther);
  EXPECT_NE(db_->LastMessage().find("NUL"), std::string::npos) << db_->LastMessage();
  (*insert)->BindText(3, "no such parameter", true);
  ExpectFailure(*db_, **insert, Failure::kOther);
  EXPECT_NE(db_->LastMessage().find("out of range"), std::string::npos) << db_->LastMessage();
  EXPECT_EQ(Count(*db_, "SELECT count(*) FROM t"), 0);
}

TEST_F(PostgresDatabaseTest, BooleansAndNumericsReadAsIntegers) {
  MustExec(*db_, "CREATE TABLE n (x BIGINT)");
  MustExec(*db_, "INSERT INTO n VALUES (1), (2), (4), (9223372036854775807)");
  auto statement = db_->Prepare(
      "SELECT true, false, (SELECT sum(x) FROM n WHERE x < 10), "
      "(SELECT avg(x) FROM n WHERE x < 3), 12.000::numeric, "
      "(SELECT sum(x) FROM n), EXISTS (SELECT 1 FROM n WHERE x = ?), -7.9::numeric");
  ASSERT_TRUE(statement.ok());
  Statement& s = **statement;
  s.BindInt(1, 4);
  ASSERT_EQ(s.Step(), StepResult::kRow) << db_->LastMessage();
  EXPECT_EQ(s.Int(0), 1);
  EXPECT_EQ(s.Int(1), 0);
  EXPECT_EQ(s.Int(2), 7);
  EXPECT_EQ(s.Text(3), "1.5000000000000000");  // avg of bigints is a numeric
  EXPECT_EQ(s.Int(3), 1);
  EXPECT_EQ(s.Double(3), 1.5);
  EXPECT_EQ(s.Int(4), 12);
  // A sum beyond int64 saturates, as SQLite converts an out-of-range value.
  EXPECT_EQ(s.Int(5), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(s.Int(6), 1);
  EXPECT_EQ(s.Int(7), -7);
  s.Reset();
}

TEST_F(PostgresDatabaseTest, ChangesCountsTheRowsAStatementTouched) {
  MustExec(*db_, "CREATE TABLE c (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, x BIGINT)");
  auto insert = db_->Prepare("INSERT INTO c (x) VALUES (?), (?), (?) RETURNING id");
  ASSERT_TRUE(insert.ok());
  Statement& s = **insert;
  for (int i = 1; i <= 3; ++i) s.BindInt(i, i);
  std::vector<std::int64_t> ids;
  while (s.Step() == StepResult::kRow) ids.push_back(s.Int(0));
  EXPECT_EQ(ids, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(s.Changes(), 3);
  s.Reset();

  auto update = db_->Prepare("UPDATE c SET x = x * 10 WHERE x >= ?");
  ASSERT_TRUE(update.ok());
  (*update)->BindInt(1, 2);
  EXPECT_EQ((*update)->Step(), StepResult::kDone);
  EXPECT_EQ((*update)->Changes(), 2);
  (*update)->Reset();

  auto remove = db_->Prepare("DELETE FROM c WHERE x > ?");
  ASSERT_TRUE(remove.ok());
  (*remove)->BindInt(1, 1000);
  EXPECT_EQ((*remove)->Step(), StepResult::kDone);
  EXPECT_EQ((*remove)->Changes(), 0);
  (*remove)->Reset();
}

TEST_F(PostgresDatabaseTest, ReportsEachKindOfFailure) {
  MustExec(*db_,
           "CREATE TABLE parent (id TEXT PRIMARY KEY, email TEXT UNIQUE, "
           "n BIGINT CONSTRAINT positive CHECK (n > 0));"
           "CREATE TABLE child (parent_id TEXT NOT NULL REFERENCES parent(id));"
           "INSERT INTO parent VALUES ('p', 'p@example.com', 1)");
  auto insert = db_->Prepare("INSERT INTO parent VALUES (?, ?, ?)");
  ASSERT_TRUE(insert.ok());
  Statement& s = **insert;
  s.BindText(1, "p", true);
  s.BindText(2, "other@example.com", true);
  s.BindInt(3, 1);
  ExpectFailure(*db_, s, Failure::kPrimaryKey);
  s.BindText(1, "q", true);
  s.BindText(2, "p@example.com", true);
  s.BindInt(3, 1);
  ExpectFailure(*db_, s, Failure::kUnique);
  s.BindText(1, "r", true);
  s.BindText(2, "r@example.com", true);
  s.BindInt(3, 0);
  ExpectFailure(*db_, s, Failure::kCheck);
  // The message names the constraint, never the row's values (a DETAIL would).
  EXPECT_NE(db_->LastMessage().find("positive"), std::string::npos) << db_->LastMessage();
  EXPECT_EQ(db_->LastMessage().find("r@example.com"), std::string::npos) << db_->LastMessage();

  Status status = db_->Exec("INSERT INTO child VALUES ('nobody')");
  EXPECT_EQ(db_->LastFailure(), Failure::kForeignKey) << db_->LastMessage();
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  status = db_->Exec("INSERT INTO parent VALUES ('p', 'z@example.com', 1)");
  EXPECT_EQ(status.code(), StatusCode::kAlreadyExists);

  // A row locked by another connection, asked for without waiting: try again later.
  auto other = Open();
  ASSERT_NE(other, nullptr);
  MustExec(*other, "BEGIN; SELECT * FROM parent WHERE id = 'p' FOR UPDATE");
  status = db_->Exec("SELECT * FROM parent WHERE id = 'p' FOR UPDATE NOWAIT");
  EXPECT_EQ(db_->LastFailure(), Failure::kBusy) << db_->LastMessage();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  MustExec(*other, "ROLLBACK");

  // The codes the server raises rarely (serialisation, deadlock, damage), raised on purpose.
  for (auto [state, kind] : std::vector<std::pair<std::string, Failure>>{
           {"40001", Failure::kBusy}, {"40P01", Failure::kBusy}, {"55P03", Failure::kBusy},
           {"XX001", Failure::kCorrupt}, {"XX002", Failure::kCorrupt},
           {"08006", Failure::kUnavailable}, {"42P01", Failure::kOther}}) {
    status = db_->Exec("DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '" + state +
                       "'; END $$");
    EXPECT_FALSE(status.ok());
    EXPECT_EQ(db_->LastFailure(), kind) << state << ": " << db_->LastMessage();
    EXPECT_NE(db_->LastMessage().find(state), std::string::npos) << db_->LastMessage();
  }
  status = db_->Exec("DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = 'XX001'; END $$");
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
}

TEST_F(PostgresDatabaseTest, ACommitThatTheServerTurnsIntoARollbackIsAFailure) {
  // PostgreSQL answers COMMIT of a transaction that an earlier error aborted with ROLLBACK,
  // not an error: it must not pass for a commit (SQLite would have kept the first insert).
  Statement* insert = TableR();
  ASSERT_NE(insert, nullptr);
  ASSERT_TRUE(db_->BeginWrite().ok());
  Insert(*insert, 1);
  EXPECT_FALSE(db_->Exec("SELECT * FROM no_such_table").ok());  // ignored by its caller
  Status committed = db_->Exec("COMMIT");
  EXPECT_FALSE(committed.ok());
  EXPECT_NE(committed.message().find("rolled the transaction back"), std::string::npos)
      << committed.ToString();
  EXPECT_FALSE(db_->InTransaction());
  EXPECT_EQ(Count(*db_, "SELECT COUNT(*) FROM r"), 0);
  // A commit that commits is still one.
  ASSERT_TRUE(db_->BeginWrite().ok());
  Insert(*insert, 2);
  EXPECT_TRUE(db_->Exec("COMMIT").ok());
  EXPECT_EQ(Count(*db_, "SELECT COUNT(*) FROM r"), 1);
}

// What the store's multi-statement reads on a lookup rely on: PostgreSQL's default gives each
// statement its own snapshot, so BeginSnapshot must hold one across another connection's
// commit, and refuse writes.
TEST_F(PostgresDatabaseTest, ASnapshotHoldsAcrossAnotherConnectionsCommitAndRefusesWrites) {
  Statement* insert = TableR();
  ASSERT_NE(insert, nullptr);
  Insert(*insert, 1);
  std::unique_ptr<Database> reader = Open();
  ASSERT_TRUE(reader->BeginSnapshot().ok());
  EXPECT_EQ(Count(*reader, "SELECT COUNT(*) FROM r"), 1);
  Insert(*insert, 2);
  EXPECT_EQ(Count(*reader, "SELECT COUNT(*) FROM r"), 1);
  EXPECT_FALSE(reader->Exec("INSERT INTO r VALUES (3)").ok());
  EXPECT_TRUE(reader->Exec("ROLLBACK").ok());
  EXPECT_EQ(Count(*reader, "SELECT COUNT(*) FROM r"), 2);
}

TEST_F(PostgresDatabaseTest, ASecondWriterWaitsForTheFirstToCommit) {
  MustExec(*db_, "CREATE TABLE w (writer TEXT)");
  auto second_db = Open();
  auto watcher = Open();
  ASSERT_NE(second_db, nullptr);
  ASSERT_NE(watcher, nullptr);

  ASSERT_TRUE(db_->BeginWrite().ok()) << db_->LastMessage();
  EXPECT_TRUE(db_->InTransaction());
  MustExec(*db_, "INSERT INTO w VALUES ('first')");

  std::atomic<bool> second_began = false;
  std::int64_t rows_seen_by_second = -1;
  Status second_status;
  std::thread second([&] {
    second_status = second_db->BeginWrite();
    second_began = true;
    if (!second_status.ok()) return;
    rows_seen_by_second = Count(*second_db, "SELECT count(*) FROM w");
    second_status = second_db->Exec("INSERT INTO w VALUES ('second'); COMMIT");
  });
  // The second writer is queued on the lock (the server says so), and has not begun.
  bool queued = uplink::testing::WaitFor([&] {
    return Count(*watcher, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                           "NOT granted") == 1;
  });
  EXPECT_TRUE(queued);
  EXPECT_FALSE(second_began);
  MustExec(*db_, "COMMIT");
  EXPECT_FALSE(db_->InTransaction());
  second.join();
  ASSERT_TRUE(second_status.ok()) << second_status.ToString();
  // It began after the first committed: it saw the first's row.
  EXPECT_EQ(rows_seen_by_second, 1);
  EXPECT_EQ(Count(*db_, "SELECT count(*) FROM w"), 2);
}

// Statements a caller defers go out without waiting, and their answers come together, with
// the next statement's or at AwaitDeferred().
TEST_F(PostgresDatabaseTest, DeferredStatementsRunInOrderWithTheNextStatementsAnswer) {
  Statement* insert = TableR();
  ASSERT_NE(insert, nullptr);
  ASSERT_TRUE(db_->BeginWrite().ok()) << db_->LastMessage();
  for (std::int64_t x : {1, 2, 3}) {
    insert->BindInt(1, x);
    ASSERT_TRUE(db_->Defer(*insert, "inserting").ok()) << db_->LastMessage();
  }
  auto doubled = db_->Prepare("UPDATE r SET x = x * 2 WHERE x = ?");
  ASSERT_TRUE(doubled.ok());
  (*doubled)->BindInt(1, 3);
  ASSERT_TRUE(db_->Defer(**doubled, "doubling").ok()) << db_->LastMessage();
  EXPECT_TRUE(db_->InTransaction());
  // A statement with rows after them sees what they did: they ran first.
  EXPECT_EQ(Count(*db_, "SELECT sum(x) FROM r"), 9);
  ASSERT_TRUE(db_->DeferExec("COMMIT").ok()) << db_->LastMessage();
  EXPECT_TRUE(db_->AwaitDeferred().ok()) << db_->LastMessage();
  EXPECT_FALSE(db_->InTransaction());
  EXPECT_TRUE(db_->AwaitDeferred().ok());  // nothing left to await
  auto other = Open();
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(Count(*other, "SELECT sum(x) FROM r"), 9);
}

TEST_F(PostgresDatabaseTest, AFailedDeferredStatementIsReportedByNameAndWhatFollowedDidNotRun) {
  Statement* insert = TableU();
  ASSERT_NE(insert, nullptr);
  Statement& s = *insert;
  ASSERT_TRUE(db_->BeginWrite().ok()) << db_->LastMessage();
  MustExec(*db_, "INSERT INTO u VALUES (0); SAVEPOINT w");
  const std::int64_t first = db_->DeferredSent();
  for (auto [x, what] : {std::pair<std::int64_t, const char*>{1, "first insert"},
                         {1, "second insert"},
                         {2, "third insert"}}) {
    s.BindInt(1, x);
    ASSERT_TRUE(db_->Defer(s, what).ok()) << db_->LastMessage();
  }
  ASSERT_TRUE(db_->DeferExec("RELEASE w").ok());
  EXPECT_EQ(db_->DeferredSent(), first + 4);
  EXPECT_EQ(db_->DeferredAnswered(), first);  // nothing read yet
  Status awaited = db_->AwaitDeferred();
  EXPECT_EQ(awaited.code(), StatusCode::kAlreadyExists) << awaited.ToString();
  EXPECT_TRUE(awaited.message().starts_with("second insert: PostgreSQL: duplicate key"))
      << awaited.ToString();
  EXPECT_EQ(db_->LastFailure(), Failure::kPrimaryKey);
  // Whose failure it was can be told afterwards by its number (what the store's writer uses
  // when a write's statements are answered with the next write's query).
  EXPECT_EQ(db_->DeferredAnswered(), first + 4);
  const auto failure = db_->LastDeferredFailure();
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->number, first + 1);
  EXPECT_EQ(failure->status.ToString(), awaited.ToString());
  // The RELEASE after it did not run: the savepoint is there to roll back to, and what came
  // before it is kept.
  EXPECT_TRUE(db_->InTransaction());
  MustExec(*db_, "ROLLBACK TO w");
  MustExec(*db_, "COMMIT");
  EXPECT_EQ(Count(*db_, "SELECT count(*) FROM u"), 1);
}

TEST_F(PostgresDatabaseTest, AFailedDeferredStatementFailsTheNextCallButNotARollback) {
  Statement* insert = TableU();
  ASSERT_NE(insert, nullptr);
  Statement& s = *insert;
  auto defer_duplicate = [&] {
    for (int i = 0; i < 2; ++i) {
      s.BindInt(1, 7);
      ASSERT_TRUE(db_->Defer(s, "inserting 7").ok()) << db_->LastMessage();
    }
  };
  // A step: fails with the deferred statement's failure, not one of its own.
  ASSERT_TRUE(db_->BeginWrite().ok());
  ASSERT_NO_FATAL_FAILURE(defer_duplicate());
  auto count = db_->Prepare("SELECT count(*) FROM u");
  ASSERT_TRUE(count.ok());
  const std::int64_t step_carried = db_->DeferredSent() - 1;
  ExpectFailure(*db_, **count, Failure::kPrimaryKey);
  EXPECT_TRUE(db_->LastMessage().starts_with("inserting 7: ")) << db_->LastMessage();
  ASSERT_TRUE(db_->LastDeferredFailure().has_value());
  EXPECT_EQ(db_->LastDeferredFailure()->number, step_carried);
  EXPECT_EQ(db_->DeferredAnswered(), db_->DeferredSent());
  MustExec(*db_, "ROLLBACK");
  // A COMMIT after it does not run, and says why; the ROLLBACK that follows does.
  ASSERT_TRUE(db_->BeginWrite().ok());
  ASSERT_NO_FATAL_FAILURE(defer_duplicate());
  Status committed = db_->Exec("COMMIT");
  EXPECT_EQ(committed.code(), StatusCode::kAlreadyExists) << committed.ToString();
  EXPECT_TRUE(db_->InTransaction());
  MustExec(*db_, "ROLLBACK");
  // A COMMIT deferred after it does not run either.
  ASSERT_TRUE(db_->BeginWrite().ok());
  ASSERT_NO_FATAL_FAILURE(defer_duplicate());
  ASSERT_TRUE(db_->DeferExec("COMMIT").ok());
  EXPECT_EQ(db_->AwaitDeferred().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(db_->InTransaction());
  // A ROLLBACK runs even with the failure still unread.
  ASSERT_NO_FATAL_FAILURE(defer_duplicate());
  EXPECT_TRUE(db_->Exec("ROLLBACK").ok()) << db_->LastMessage();
  EXPECT_FALSE(db_->InTransaction());
  EXPECT_EQ(Count(*db_, "SELECT count(*) FROM u"), 0);
  // The connection serves on.
  Insert(s, 8);
  EXPECT_EQ(Count(*db_, "SELECT count(*) FROM u"), 1);
}

class PostgresRestartTest : public PostgresDatabaseTest {
 protected:
  bool RestartsTheServer() const override { return true; }
};

TEST_F(PostgresRestartTest, ALostConnectionFailsOneCallAndTheNextReconnects) {
  Statement* insert = TableR();
  ASSERT_NE(insert, nullptr);
  Statement& s = *insert;
  Insert(s, 1);

  ASSERT_TRUE(server_->Restart().ok());
  s.BindInt(1, 2);
  ExpectFailure(*db_, s, Failure::kUnavailable);
  // The next call reconnects and prepares the statement again on the new connection.
  Insert(s, 3);
  EXPECT_EQ(Count(*db_, "SELECT sum(x) FROM r"), 4);
}

TEST_F(PostgresRestartTest, ATransactionLostWithItsConnectionStaysLostUntilRolledBack) {
  Statement* insert = TableR();
  ASSERT_NE(insert, nullptr);
  Statement& s = *insert;
  ASSERT_TRUE(db_->BeginWrite().ok()) << db_->LastMessage();
  Insert(s, 1);

  ASSERT_TRUE(server_->Restart().ok());
  s.BindInt(1, 2);
  ExpectFailure(*db_, s, Failure::kUnavailable);
  EXPECT_FALSE(db_->InTransaction());
  // Reconnected, but what follows would run outside the transaction the caller is in.
  s.BindInt(1, 3);
  ExpectFailure(*db_, s, Failure::kUnavailable);
  EXPECT_NE(db_->LastMessage().find("roll back"), std::string::npos) << db_->LastMessage();
  EXPECT_EQ(db_->Exec("COMMIT").code(), StatusCode::kUnavailable);
  EXPECT_TRUE(db_->Exec("ROLLBACK").ok()) << db_->LastMessage();
  Insert(s, 4);
  EXPECT_EQ(Count(*db_, "SELECT sum(x) FROM r"), 4);
}

TEST_F(PostgresDatabaseTest, AServerThatEndsTheSessionIsAnUnavailableFailure) {
  auto other = Open();
  ASSERT_NE(other, nullptr);
  std::int64_t pid = Count(*db_, "SELECT pg_backend_pid()");
  auto terminate = other->Prepare("SELECT pg_terminate_backend(?::integer)");
  ASSERT_TRUE(terminate.ok());
  (*terminate)->BindInt(1, pid);
  ASSERT_EQ((*terminate)->Step(), StepResult::kRow) << other->LastMessage();
  EXPECT_EQ((*terminate)->Int(0), 1);
  (*terminate)->Reset();
  EXPECT_EQ(db_->Exec("SELECT 1").code(), StatusCode::kUnavailable);
  EXPECT_EQ(db_->LastFailure(), Failure::kUnavailable) << db_->LastMessage();
  EXPECT_NE(Count(*db_, "SELECT pg_backend_pid()"), pid);
}

TEST_F(PostgresRestartTest, ErrorsNeverContainThePassword) {
  const std::string wrong = "wrong-" + server_->password();
  auto refused = OpenPostgresDatabase({url_, wrong});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("password authentication failed"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find(wrong), std::string::npos);
  EXPECT_EQ(refused.status().message().find(server_->password()), std::string::npos);

  const std::string missing_db = url_.substr(0, url_.find('?')) + "_missing" + url_.substr(url_.find('?'));
  auto no_database = OpenPostgresDatabase({missing_db, server_->password()});
  ASSERT_FALSE(no_database.ok());
  EXPECT_EQ(no_database.status().message().find(server_->password()), std::string::npos);

  auto nowhere = OpenPostgresDatabase({"postgres:///x?host=/nonexistent/socket/dir&user=uplink",
                                       server_->password()});
  ASSERT_FALSE(nowhere.ok());
  EXPECT_EQ(nowhere.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(nowhere.status().message().find(server_->password()), std::string::npos);

  ASSERT_TRUE(server_->Restart().ok());
  EXPECT_FALSE(db_->Exec("SELECT 1").ok());
  EXPECT_EQ(db_->LastMessage().find(server_->password()), std::string::npos);
  EXPECT_EQ(server_->Log().find(server_->password()), std::string::npos);
}

TEST_F(PostgresDatabaseTest, WithoutAPasswordLibpqReadsPgpassword) {
  ::setenv("PGPASSFILE", "/nonexistent/pgpass", 1);
  ::unsetenv("PGPASSWORD");
  auto without = OpenPostgresDatabase({url_, std::nullopt});
  ::setenv("PGPASSWORD", server_->password().c_str(), 1);
  auto with_environment = OpenPostgresDatabase({url_, std::nullopt});
  ::unsetenv("PGPASSWORD");
  ::unsetenv("PGPASSFILE");
  EXPECT_FALSE(without.ok());
  ASSERT_TRUE(with_environment.ok()) << with_environment.status().ToString();
  EXPECT_EQ(Count(**with_environment, "SELECT 1"), 1);
  // The application name says who is connected, for the server's operators. (Counted in
  // this test's database: other tests use the run's server at the same time.)
  EXPECT_EQ(Count(**with_environment,
                  "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                  "'uplink-console' AND datname = current_database()"),
            2);
}

TEST_F(PostgresDatabaseTest, OpenRefusesAUrlWithAPassword) {
  auto opened = OpenPostgresDatabase({"postgres://uplink:" + server_->password() + "@/x", std::nullopt});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(opened.status().message().find(server_->password()), std::string::npos);
}

// The test's database through a proxy on loopback TCP that the test can make go silent, as a
// hung server or a network that drops packets looks to the console.
class PostgresStallTest : public PostgresDatabaseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PostgresDatabaseTest::SetUp());
    auto proxy = uplink::testing::StallProxy::Start(server_->socket_dir() + "/.s.PGSQL.5432");
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    proxy_ = std::move(*proxy);
  }

  // url_ is postgres:///NAME?host=DIR&user=USER; the same database through the proxy, with
  // `parameters` added.
  PostgresLocation Proxied(const std::string& parameters) const {
    const size_t name_at = std::string_view("postgres:///").size();
    const std::string name = url_.substr(name_at, url_.find('?') - name_at);
    const std::string user = url_.substr(url_.find("user="));
    return {"postgres://127.0.0.1:" + std::to_string(proxy_->port()) + "/" + name + "?" + user +
                parameters,
            server_->password()};
  }

  std::unique_ptr<Database> OpenProxied(const std::string& parameters, PostgresOptions options) {
    auto db = OpenPostgresDatabase(Proxied(parameters), std::move(options));
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    return db.ok() ? std::move(*db) : nullptr;
  }

  // Waits until the proxy has accepted more than `count` connections.
  bool AcceptedMoreThan(int count) const {
    return uplink::testing::WaitFor([&] { return proxy_->accepted() > count; },
                                    std::chrono::seconds(30));
  }

  // A short answer timeout, and a gate on the test's clock.
  PostgresOptions Options() {
    PostgresOptions options;
    options.answer_timeout = std::chrono::milliseconds(300);
    options.reconnect_gate = gate_;
    return options;
  }

  FakeClock clock_;
  std::shared_ptr<ReconnectGate> gate_ = std::make_shared<ReconnectGate>(clock_);
  std::unique_ptr<uplink::testing::StallProxy> proxy_;
};

TEST_F(PostgresStallTest, AStatementLeftUnansweredFailsInTimeAndALaterOneReconnects) {
  auto db = OpenProxied("", Options());
  ASSERT_NE(db, nullptr);
  MustExec(*db, "CREATE TABLE r (x BIGINT)");
  const std::int64_t first_backend = Count(*db, "SELECT pg_backend_pid()");
  ASSERT_TRUE(db->BeginWrite().ok()) << db->LastMessage();
  auto insert = db->Prepare("INSERT INTO r VALUES (?)");
  ASSERT_TRUE(insert.ok());
  Statement& s = **insert;

  proxy_->Stall();
  s.BindInt(1, 1);
  ExpectFailure(*db, s, Failure::kUnavailable);
  EXPECT_NE(db->LastMessage().find("did not answer within 1 s"), std::string::npos)
      << db->LastMessage();
  EXPECT_FALSE(db->InTransaction());

  // Answering again: reconnecting waits for the back-off a give-up starts...
  proxy_->Resume();
  s.BindInt(1, 2);
  ExpectFailure(*db, s, Failure::kUnavailable);
  EXPECT_NE(db->LastMessage().find("the next attempt to reconnect is in 1 s"), std::string::npos)
      << db->LastMessage();
  // ...and the transaction the silence took stays lost until rolled back, as with a broken
  // connection; then a new connection serves, and nothing of the transaction remains.
  clock_.Advance(ReconnectGate::kFirstBackoff);
  ExpectFailure(*db, s, Failure::kUnavailable);
  EXPECT_NE(db->LastMessage().find("roll back"), std::string::npos) << db->LastMessage();
  ASSERT_TRUE(db->Exec("ROLLBACK").ok()) << db->LastMessage();
  EXPECT_NE(Count(*db, "SELECT pg_backend_pid()"), first_backend);
  s.BindInt(1, 3);
  EXPECT_EQ(s.Step(), StepResult::kDone) << db->LastMessage();
  s.Reset();
  EXPECT_EQ(Count(*db, "SELECT sum(x) FROM r"), 3);
}

TEST_F(PostgresStallTest, AnExecLeftUnansweredFailsInTimeButASchemaChangeWaits) {
  auto db = OpenProxied("", Options());
  ASSERT_NE(db, nullptr);
  // pg_sleep outlasts the answer timeout: Exec gives up, ExecUnbounded (migrations) waits.
  EXPECT_EQ(db->Exec("SELECT pg_sleep(1)").code(), StatusCode::kUnavailable);
  EXPECT_NE(db->LastMessage().find("did not answer"), std::string::npos) << db->LastMessage();
  clock_.Advance(ReconnectGate::kFirstBackoff);
  EXPECT_TRUE(db->ExecUnbounded("SELECT pg_sleep(1); CREATE TABLE m (x BIGINT)").ok())
      << db->LastMessage();
  EXPECT_EQ(Count(*db, "SELECT count(*) FROM m"), 0);
}

TEST_F(PostgresStallTest, OnceOneConnectionFailsTheOthersTryOneAtATimeAfterABackoff) {
  PostgresOptions options = Options();
  // libpq's shortest connect timeout, for the attempt that fails; 30 s for the one that must
  // still be under way when the other connection asks.
  auto first = OpenProxied("&connect_timeout=2", options);
  auto second = OpenProxied("&connect_timeout=30", options);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);

  proxy_->Stall();
  EXPECT_EQ(first->Exec("SELECT 1").code(), StatusCode::kUnavailable);
  // The other connection, made before that failure, does not wait out an answer timeout of
  // its own: it must reconnect first, and the gate refuses it at once.
  int accepted = proxy_->accepted();
  EXPECT_EQ(second->Exec("SELECT 1").code(), StatusCode::kUnavailable);
  EXPECT_NE(second->LastMessage().find("did not answer within 1 s"), std::string::npos)
      << second->LastMessage();
  EXPECT_NE(second->LastMessage().find("the next attempt to reconnect is in 1 s"),
            std::string::npos)
      << second->LastMessage();
  // Past the back-off one tries, and waits out its connect timeout.
  clock_.Advance(ReconnectGate::kFirstBackoff);
  EXPECT_EQ(first->Exec("SELECT 1").code(), StatusCode::kUnavailable);
  EXPECT_NE(first->LastMessage().find("PostgreSQL is unreachable"), std::string::npos)
      << first->LastMessage();
  EXPECT_EQ(proxy_->accepted(), accepted + 1);
  // The back-off doubled, and until it has passed nobody tries, even with the server back.
  proxy_->Resume();
  accepted = proxy_->accepted();
  for (Database* db : {first.get(), second.get()}) {
    EXPECT_EQ(db->Exec("SELECT 1").code(), StatusCode::kUnavailable);
    EXPECT_NE(db->LastMessage().find("the next attempt to reconnect is in 2 s"), std::string::npos)
        << db->LastMessage();
  }
  EXPECT_EQ(proxy_->accepted(), accepted);

  // Past it, one tries; while it is under way the other is refused without trying.
  proxy_->Stall();
  clock_.Advance(2 * ReconnectGate::kFirstBackoff);
  std::thread trying([&] { EXPECT_TRUE(second->Exec("SELECT 1").ok()) << second->LastMessage(); });
  ASSERT_TRUE(AcceptedMoreThan(accepted));
  EXPECT_EQ(first->Exec("SELECT 1").code(), StatusCode::kUnavailable);
  EXPECT_NE(first->LastMessage().find("another connection is trying to reconnect now"),
            std::string::npos)
      << first->LastMessage();
  EXPECT_EQ(proxy_->accepted(), accepted + 1);
  // Its attempt completes once the server answers; then every connection may reconnect.
  proxy_->Resume();
  trying.join();
  EXPECT_EQ(Count(*first, "SELECT 1"), 1);
  EXPECT_EQ(Count(*second, "SELECT 1"), 1);
}

TEST_F(PostgresStallTest, ConnectionsOverTcpKeepAliveAndBoundUnacknowledgedSends) {
  auto conn = ConnectPostgres(Proxied(""));
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  const int socket = PQsocket(conn->get());
  auto option = [socket](int level, int name) {
    int value = -1;
    socklen_t length = sizeof value;
    EXPECT_EQ(::getsockopt(socket, level, name, &value, &length), 0);
    return value;
  };
  EXPECT_EQ(option(SOL_SOCKET, SO_KEEPALIVE), 1);
  EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPIDLE), 10);
  EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPINTVL), 5);
  EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPCNT), 3);
  EXPECT_EQ(option(IPPROTO_TCP, TCP_USER_TIMEOUT), 15000);
}

TEST_F(PostgresStallTest, DeferredStatementsGoOutWithoutWaitingAndTheirAwaitIsBounded) {
  auto db = OpenProxied("", Options());
  ASSERT_NE(db, nullptr);
  MustExec(*db, "CREATE TABLE r (x BIGINT)");
  auto insert = db->Prepare("INSERT INTO r VALUES (?)");
  ASSERT_TRUE(insert.ok());
  Statement& s = **insert;
  Insert(s, 0);  // prepared on the server while it answers
  ASSERT_TRUE(db->BeginWrite().ok()) << db->LastMessage();
  // With the server silent, deferring waits for nothing: each of these would otherwise fail
  // after the 300 ms answer timeout.
  proxy_->Stall();
  for (std::int64_t x = 1; x <= 5; ++x) {
    s.BindInt(1, x);
    ASSERT_TRUE(db->Defer(s, "inserting").ok()) << db->LastMessage();
  }
  ASSERT_TRUE(db->DeferExec("COMMIT").ok()) << db->LastMessage();
  proxy_->Resume();
  EXPECT_TRUE(db->AwaitDeferred().ok()) << db->LastMessage();
  EXPECT_EQ(Count(*db, "SELECT sum(x) FROM r"), 15);

  // Awaiting a silent server gives up in time, as a statement does, and takes the
  // transaction with the connection.
  ASSERT_TRUE(db->BeginWrite().ok()) << db->LastMessage();
  s.BindInt(1, 100);
  ASSERT_TRUE(db->Defer(s, "inserting").ok());
  proxy_->Stall();
  Status awaited = db->AwaitDeferred();
  EXPECT_EQ(awaited.code(), StatusCode::kUnavailable) << awaited.ToString();
  EXPECT_NE(awaited.message().find("did not answer within 1 s"), std::string::npos)
      << awaited.ToString();
  EXPECT_FALSE(db->InTransaction());
  proxy_->Resume();
  clock_.Advance(ReconnectGate::kFirstBackoff);
  ASSERT_TRUE(db->Exec("ROLLBACK").ok()) << db->LastMessage();
  EXPECT_EQ(Count(*db, "SELECT sum(x) FROM r"), 15);
}

// The proxy's delay (bench_load --database-rtt-us) holds each statement's round trip for at
// least twice the one-way delay, and changes nothing else.
TEST_F(PostgresStallTest, ADelayingProxyAddsItsRoundTripToEveryStatement) {
  constexpr auto kOneWay = std::chrono::milliseconds(5);
  auto delayed = uplink::testing::StallProxy::Start(server_->socket_dir() + "/.s.PGSQL.5432",
                                                    kOneWay);
  ASSERT_TRUE(delayed.ok()) << delayed.status().ToString();
  proxy_ = std::move(*delayed);
  auto db = OpenProxied("", PostgresOptions{});
  ASSERT_NE(db, nullptr);
  constexpr int kStatements = 10;
  const auto started = std::chrono::steady_clock::now();
  for (int i = 1; i <= kStatements; ++i) {
    EXPECT_EQ(Count(*db, "SELECT " + std::to_string(i)), i);
  }
  EXPECT_GE(std::chrono::steady_clock::now() - started, kStatements * 2 * kOneWay);
}

}  // namespace
}  // namespace uplink::console::sql
