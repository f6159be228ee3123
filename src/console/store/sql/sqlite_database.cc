#include "console/store/sql/sqlite_database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <map>

namespace uplink::console::sql {
namespace {

class SqliteStatement final : public Statement {
 public:
  explicit SqliteStatement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void BindText(int index, std::string_view value, bool copy) override {
    sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                      copy ? SQLITE_TRANSIENT : SQLITE_STATIC);
  }
  void BindBlob(int index, std::string_view bytes) override {
    sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_STATIC);
  }
  void BindInt(int index, std::int64_t value) override { sqlite3_bind_int64(stmt_, index, value); }
  void BindDouble(int index, double value) override { sqlite3_bind_double(stmt_, index, value); }
  void BindNull(int index) override { sqlite3_bind_null(stmt_, index); }

  StepResult Step() override {
    switch (sqlite3_step(stmt_)) {
      case SQLITE_ROW:
        return StepResult::kRow;
      case SQLITE_DONE:
        return StepResult::kDone;
      default:
        return StepResult::kError;
    }
  }

  std::string_view Text(int column) const override {
    const unsigned char* text = sqlite3_column_text(stmt_, column);
    return text ? std::string_view(reinterpret_cast<const char*>(text),
                                   static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
                : std::string_view();
  }
  std::string_view Blob(int column) const override {
    const void* bytes = sqlite3_column_blob(stmt_, column);
    return bytes ? std::string_view(static_cast<const char*>(bytes),
                                    static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
                 : std::string_view();
  }
  std::int64_t Int(int column) const override { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) const override { return sqlite3_column_double(stmt_, column); }
  bool IsNull(int column) const override {
    return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
  }
  std::int64_t Changes() const override {
    return sqlite3_changes64(sqlite3_db_handle(stmt_));
  }
  void Reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

 private:
  sqlite3_stmt* stmt_;
};

class SqliteDatabase final : public Database {
 public:
  explicit SqliteDatabase(sqlite3* db) : db_(db) {}
  ~SqliteDatabase() override {
    statements_.clear();  // finalised before the connection closes
    sqlite3_close(db_);
  }
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  Engine engine() const override { return Engine::kSqlite; }
  std::span<const Migration> Migrations() const override { return SqliteMigrations(); }

  Result<Statement*> Prepare(const std::string& sql) override {
    auto it = statements_.find(sql);
    if (it != statements_.end()) return it->second.get();
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                           SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
      return IOError("preparing statement: " + LastMessage());
    }
    auto [inserted, _] = statements_.emplace(sql, std::make_unique<SqliteStatement>(stmt));
    return inserted->second.get();
  }

  Status Exec(const std::string& sql) override {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      std::string message = error ? error : "unknown error";
      sqlite3_free(error);
      return IOError("executing SQL: " + message);
    }
    return Status::Ok();
  }

  // SQLite runs in this process: nothing to wait for but the work itself, so deferred
  // statements run at once.
  Status ExecUnbounded(const std::string& sql) override { return Exec(sql); }
  Status Defer(Statement& statement, std::string_view what) override {
    const bool ran = statement.Step() != Statement::StepResult::kError;
    Status status = ran ? Status::Ok() : IOError(std::string(what) + ": " + LastMessage());
    statement.Reset();
    return Deferred(std::move(status));
  }
  Status DeferExec(const std::string& sql) override { return Deferred(Exec(sql)); }
  Status AwaitDeferred() override { return Status::Ok(); }
  std::int64_t DeferredSent() const override { return deferred_; }
  std::int64_t DeferredAnswered() const override { return deferred_; }
  std::optional<DeferredFailure> LastDeferredFailure() const override {
    return last_deferred_failure_;
  }
  Status BeginWrite() override { return Exec("BEGIN IMMEDIATE"); }
  Status BeginSnapshot() override { return Exec("BEGIN"); }
  bool InTransaction() const override { return sqlite3_get_autocommit(db_) == 0; }

  Failure LastFailure() const override {
    int code = sqlite3_extended_errcode(db_);
    switch (code & 0xff) {
      case SQLITE_OK:
      case SQLITE_ROW:
      case SQLITE_DONE:
        return Failure::kNone;
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
        return Failure::kBusy;
      case SQLITE_CORRUPT:
      case SQLITE_NOTADB:
        return Failure::kCorrupt;
      default:
        break;
    }
    switch (code) {
      case SQLITE_CONSTRAINT_PRIMARYKEY:
        return Failure::kPrimaryKey;
      case SQLITE_CONSTRAINT_UNIQUE:
        return Failure::kUnique;
      case SQLITE_CONSTRAINT_FOREIGNKEY:
        return Failure::kForeignKey;
      case SQLITE_CONSTRAINT_CHECK:
        return Failure::kCheck;
      default:
        return Failure::kOther;
    }
  }
  std::int64_t RoundTrips() const override { return 0; }
  std::string LastMessage() const override { return sqlite3_errmsg(db_); }

 private:
  // Numbers a deferred statement that has run, as PostgreSQL numbers those it sends.
  Status Deferred(Status status) {
    if (!status.ok()) last_deferred_failure_ = DeferredFailure{deferred_, status};
    ++deferred_;
    return status;
  }

  sqlite3* db_;
  std::int64_t deferred_ = 0;
  std::optional<DeferredFailure> last_deferred_failure_;
  std::map<std::string, std::unique_ptr<SqliteStatement>, std::less<>> statements_;
};

// A connection to `path` opened with `flags` (besides SQLITE_OPEN_NOMUTEX), waiting up to 5 s
// for a lock another connection holds.
Result<std::unique_ptr<SqliteDatabase>> OpenConnection(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return IOError("opening database " + path + ": " + message);
  }
  auto database = std::make_unique<SqliteDatabase>(db);
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 5000);
  return database;
}

}  // namespace

Result<std::unique_ptr<Database>> OpenSqliteDatabase(const std::string& path) {
  // Create the file ourselves so that it (and SQLite's -wal and -shm files, which copy its
  // mode) is readable by the owner only.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("opening database " + path, errno);
  ::close(fd);

  UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> database,
                          OpenConnection(path, SQLITE_OPEN_READWRITE));
  for (const char* pragma : {"PRAGMA journal_mode=WAL",
                             // FULL: a rotated or revoked token must survive a power cut.
                             "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    UPLINK_RETURN_IF_ERROR(database->Exec(pragma).WithContext("opening database " + path));
  }
  return std::unique_ptr<Database>(std::move(database));
}

Result<std::unique_ptr<Database>> OpenSqliteReader(const std::string& path) {
  UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> database,
                          OpenConnection(path, SQLITE_OPEN_READONLY));
  return std::unique_ptr<Database>(std::move(database));
}

}  // namespace uplink::console::sql
