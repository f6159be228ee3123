// The seam between the SQL store (SqlStore: its SQL, rules and transactions) and the database
// engine that runs it: SQLite (sqlite_database.cc), the embedded default, or PostgreSQL
// (postgres_database.cc), the scale path. The store's SQL is written once, in the subset both
// engines accept the same way (ON CONFLICT, RETURNING, COALESCE, CASE; `?` parameters, which
// the PostgreSQL engine numbers); what differs (schema DDL, how a write transaction takes the
// write lock, error codes) is behind this interface.
//
// Not thread-safe: the store serialises its use of one Database under its own mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace uplink::console::sql {

enum class Engine { kSqlite, kPostgres };

// One step of the schema. Append only: a migration, once released, never changes. Each
// engine has its own text of every version (sqlite_schema.cc, postgres_schema.cc), so a
// database of either engine at version N has the same tables, columns and constraints.
struct Migration {
  int version;
  const char* sql;
};
std::span<const Migration> SqliteMigrations();
std::span<const Migration> PostgresMigrations();

// Why the last failed call failed, as far as the store's rules care.
enum class Failure {
  kNone,
  kPrimaryKey,   // a second row with the same primary key
  kUnique,       // a second row with the same value of another unique column
  kForeignKey,   // a reference to a row that does not exist
  kCheck,        // a CHECK constraint
  kBusy,         // locked by another writer, or a serialisation conflict: try again
  kUnavailable,  // the server is unreachable or the connection was lost
  kCorrupt,      // the database is damaged
  kOther,
};

// One prepared statement. Parameters are numbered from 1 in the order of the `?` in its SQL;
// columns from 0. The store uses one statement for one call at a time and Reset()s it after.
class Statement {
 public:
  enum class StepResult { kRow, kDone, kError };

  virtual ~Statement() = default;

  // `copy` false: `value` stays unchanged until Reset().
  virtual void BindText(int index, std::string_view value, bool copy) = 0;
  // Bytes rather than text, not copied: they stay unchanged until Reset().
  virtual void BindBlob(int index, std::string_view bytes) = 0;
  virtual void BindInt(int index, std::int64_t value) = 0;
  virtual void BindDouble(int index, double value) = 0;
  virtual void BindNull(int index) = 0;

  // Runs the statement on the first call, then moves to the next row of its result.
  virtual StepResult Step() = 0;

  // The current row's columns; a view is valid until the next Step() or Reset(). Integers
  // read from a boolean column are 0 or 1.
  virtual std::string_view Text(int column) const = 0;
  virtual std::string_view Blob(int column) const = 0;
  virtual std::int64_t Int(int column) const = 0;
  virtual double Double(int column) const = 0;
  virtual bool IsNull(int column) const = 0;

  // Rows the statement inserted, updated or deleted, once Step() returned kDone.
  virtual std::int64_t Changes() const = 0;

  // Ready for the next use: bindings cleared, the result dropped.
  virtual void Reset() = 0;
};

class Database {
 public:
  virtual ~Database() = default;

  virtual Engine engine() const = 0;
  // The engine's text of the store's schema migrations.
  virtual std::span<const Migration> Migrations() const = 0;

  // A statement of one SQL text, prepared once and kept for the life of the database (or
  // until its connection is re-established); owned by the database.
  virtual Result<Statement*> Prepare(const std::string& sql) = 0;
  // Runs one or more statements without parameters or rows (DDL, SAVEPOINT, COMMIT).
  virtual Status Exec(const std::string& sql) = 0;
  // Exec without the engine's limit on how long the server may take to answer: schema
  // migrations, which may rewrite a large table.
  virtual Status ExecUnbounded(const std::string& sql) = 0;

  // Runs `statement` (bound; its rows and change count go unread) at once or, where the engine
  // gains by it, later: PostgreSQL sends it without waiting for its answer, so that every
  // statement deferred until the next AwaitDeferred() costs one round trip together. Ok when
  // it ran or was sent, its failure otherwise; the statement is Reset() either way. `what`
  // names it in a failure reported later.
  virtual Status Defer(Statement& statement, std::string_view what) = 0;
  // One command without parameters or rows (RELEASE, SAVEPOINT, COMMIT), deferred as Defer().
  virtual Status DeferExec(const std::string& sql) = 0;
  // The answers of the deferred statements: Ok, or the first one's failure ("what: message";
  // those after it did not run). Step(), Exec() and BeginWrite() await them first: a deferred
  // failure fails them, except ROLLBACK and ROLLBACK TO, which still run.
  virtual Status AwaitDeferred() = 0;
  // Deferred statements are numbered in the order sent, from 0 for the life of the database,
  // so that a caller can tell whose statement a failure read later was: how many were sent
  // (the next one's number), and below which number every answer has been read.
  virtual std::int64_t DeferredSent() const = 0;
  virtual std::int64_t DeferredAnswered() const = 0;
  struct DeferredFailure {
    std::int64_t number;
    Status status;  // as AwaitDeferred() reported it
  };
  // The last deferred statement whose answer was a failure, if any; those sent after it in the
  // same pipeline (until its answers were read) did not run.
  virtual std::optional<DeferredFailure> LastDeferredFailure() const = 0;

  // Begins a transaction that holds the database's write lock until it ends, so that a
  // store's read-check-write runs as if alone: BEGIN IMMEDIATE on SQLite; on PostgreSQL,
  // BEGIN and a transaction-scoped advisory lock shared by every replica.
  virtual Status BeginWrite() = 0;
  // Begins a read-only transaction whose statements all see one committed state, however
  // many writes commit meanwhile: BEGIN on SQLite (its WAL keeps the snapshot of the first
  // read); on PostgreSQL, BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY (its default,
  // READ COMMITTED, takes a snapshot per statement). Ended by COMMIT or ROLLBACK.
  virtual Status BeginSnapshot() = 0;
  // False once the engine ended a transaction on its own (SQLite after an I/O error, a lost
  // PostgreSQL connection): work done in it since BeginWrite() is gone.
  virtual bool InTransaction() const = 0;

  // Answers waited for from the server since the database was opened, each a network round
  // trip however many statements it carried: what a write costs across a network. Always 0
  // on SQLite, which has no server. Safe to read from any thread.
  virtual std::int64_t RoundTrips() const = 0;

  // About the last call that failed.
  virtual Failure LastFailure() const = 0;
  virtual std::string LastMessage() const = 0;
};


}  // namespace uplink::console::sql
