#include "console/store/sql_store.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <thread>
#include <unordered_map>

#include "common/json.h"
#include "common/text.h"
#include "common/thread_name.h"
#include "console/store/sql/database.h"
#include "console/store/sql/reconnect_gate.h"
#include "console/store/sql/sqlite_database.h"
#include "console/store/sql_statement.h"

namespace uplink::console {
namespace {

std::int64_t SteadyNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr const char* kAuditColumns =
    "id, at, actor_type, actor_id, actor_label, credential, action, target_type, target_id, "
    "owner_id, source_address, outcome, detail";

constexpr int kMaxAuditPage = 500;

AuditEvent AuditEventFromRow(const auto& row) {
  AuditEvent event;
  event.id = row.Int(0);
  event.at = row.Time(1);
  event.actor_type = row.Text(2);
  event.actor_id = row.Text(3);
  event.actor_label = row.Text(4);
  event.credential = row.Text(5);
  event.action = row.Text(6);
  event.target_type = row.Text(7);
  event.target_id = row.Text(8);
  event.owner_id = row.Text(9);
  event.source_address = row.Text(10);
  event.outcome = row.Text(11);
  event.detail = row.Text(12);
  return event;
}

}  // namespace

int SqlStore::LatestSchemaVersion() { return sql::SqliteMigrations().back().version; }

SqlStore::SqlStore(std::unique_ptr<sql::Database> database,
                   std::vector<std::unique_ptr<sql::Database>> lookups,
                   std::shared_ptr<const sql::ReconnectGate> reconnect_gate)
    : db_(std::move(database)),
      caches_credentials_(db_->engine() == sql::Engine::kSqlite),
      lookups_(std::move(lookups)),
      reconnect_gate_(std::move(reconnect_gate)) {
  writer_ = std::thread([this] {
    NameThisThread("store-writer");
    RunWriter();
  });
}

SqlStore::~SqlStore() {
  {
    std::lock_guard lock(writes_mutex_);
    closing_ = true;
  }
  writes_queued_.notify_one();
  writer_.join();  // after the writes already queued
}

Result<std::unique_ptr<SqlStore>> SqlStore::Open(
    std::unique_ptr<sql::Database> database,
    std::vector<std::unique_ptr<sql::Database>> lookups,
    std::shared_ptr<const sql::ReconnectGate> reconnect_gate) {
  std::unique_ptr<SqlStore> store(
      new SqlStore(std::move(database), std::move(lookups), std::move(reconnect_gate)));
  UPLINK_RETURN_IF_ERROR(store->Migrate());
  return store;
}

Result<std::unique_ptr<SqlStore>> SqlStore::OpenSqlite(const std::string& path) {
  UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<sql::Database> database, sql::OpenSqliteDatabase(path));
  // Two: a /metrics scrape and a page's read at once, each without the other's wait.
  std::vector<std::unique_ptr<sql::Database>> lookups;
  for (int i = 0; i < 2; ++i) {
    UPLINK_ASSIGN_OR_RETURN(std::unique_ptr<sql::Database> lookup, sql::OpenSqliteReader(path));
    lookups.push_back(std::move(lookup));
  }
  auto store = Open(std::move(database), std::move(lookups));
  if (!store.ok()) return store.status().WithContext("migrating database " + path);
  return store;
}

Status SqlStore::ErrorOf(const sql::Database& database, std::string_view what) {
  std::string message = std::string(what) + ": " + database.LastMessage();
  switch (database.LastFailure()) {
    case sql::Failure::kBusy:
    case sql::Failure::kUnavailable:
      return UnavailableError(std::move(message));
    case sql::Failure::kCorrupt:
      return DataLossError(std::move(message));
    case sql::Failure::kPrimaryKey:
      return AlreadyExistsError(std::move(message));
    case sql::Failure::kForeignKey:
      return NotFoundError(std::move(message));
    case sql::Failure::kCheck:
      return InvalidArgumentError(std::move(message));
    default:
      return IOError(std::move(message));
  }
}

Status SqlStore::Exec(const char* sql) { return db_->Exec(sql); }

Result<sql::Statement*> SqlStore::Prepare(std::string_view sql) {
  return db_->Prepare(std::string(sql));
}

struct SqlStore::PendingWrite {
  std::function<Status()> body;
  CredentialCache cache;
  std::function<void(Status)> done;  // empty when the caller waits instead
  // Whether `body` may run again after a rollback (WriteTransactionThen's bodies).
  bool repeatable = false;
  Status status = Status::Ok();
  bool finished = false;
};

Status SqlStore::WriteTransaction(const std::function<Status()>& body,
                                  CredentialCache cache) {
  auto mine = std::make_shared<PendingWrite>(PendingWrite{body, cache, nullptr});
  if (std::this_thread::get_id() == writer_.get_id()) {
    // From a `done` of WriteTransactionThen: no group is open, and waiting for the writer
    // would wait for itself.
    CommitGroup({mine.get()});
    return mine->status;
  }
  std::unique_lock writes(writes_mutex_);
  pending_writes_.push_back(mine);
  writes_queued_.notify_one();
  writes_finished_.wait(writes, [&] { return mine->finished; });
  return mine->status;
}

void SqlStore::WriteTransactionThen(std::function<Status()> body,
                                    std::function<void(Status)> done, CredentialCache cache) {
  auto write = std::make_shared<PendingWrite>(
      PendingWrite{std::move(body), cache, std::move(done), /*repeatable=*/true});
  std::lock_guard writes(writes_mutex_);
  pending_writes_.push_back(std::move(write));
  writes_queued_.notify_one();
}

void SqlStore::RunWriter() {
  // Bodies of one group share a transaction; beyond this many they wait for the next, so
  // that one write's wait stays bounded.
  constexpr size_t kMaxGroup = 64;
  std::unique_lock writes(writes_mutex_);
  while (true) {
    writes_queued_.wait(writes, [&] { return closing_ || !pending_writes_.empty(); });
    if (pending_writes_.empty()) return;  // closing, and every queued write has run
    const size_t size = std::min(pending_writes_.size(), kMaxGroup);
    std::vector<std::shared_ptr<PendingWrite>> group(
        std::make_move_iterator(pending_writes_.begin()),
        std::make_move_iterator(pending_writes_.begin() + static_cast<std::ptrdiff_t>(size)));
    pending_writes_.erase(pending_writes_.begin(),
                          pending_writes_.begin() + static_cast<std::ptrdiff_t>(size));
    writes.unlock();
    std::vector<PendingWrite*> bodies;
    for (const auto& write : group) bodies.push_back(write.get());
    group_started_ns_ = std::max<std::int64_t>(1, SteadyNanoseconds());
    CommitGroup(bodies);
    group_started_ns_ = 0;
    writes.lock();
    for (const auto& write : group) write->finished = true;
    writes.unlock();
    writes_finished_.notify_all();
    for (const auto& write : group) {
      if (!write->done) continue;
      // A throwing answer must not take the writer, and with it every later write, down.
      try {
        write->done(write->status);
      } catch (const std::exception& e) {
        log_.Error("answering a store write failed", {{"error", e.what()}});
      }
    }
    writes.lock();
  }
}

void SqlStore::CommitGroup(const std::vector<PendingWrite*>& group) {
  std::lock_guard lock(mutex_);
  auto fail_all = [](std::span<PendingWrite* const> writes, const Status& status) {
    for (PendingWrite* write : writes) write->status = status;
  };
  auto run_body = [](PendingWrite& write) {
    try {
      return write.body();
    } catch (const std::exception& e) {
      return InternalError(std::string("a store write threw: ") + e.what());
    }
  };
  if (Status begun = db_->BeginWrite(); !begun.ok()) return fail_all(group, begun);
  // A write alone in its group needs no savepoint: its failure rolls the whole transaction
  // back, and its COMMIT goes with the statements it deferred. That spares three round trips
  // on PostgreSQL, where a lightly loaded console's writes come one to a group.
  const bool alone = group.size() == 1;
  std::vector<PendingWrite*> applied;  // in the open transaction, not yet committed
  // In a group each write runs after "SAVEPOINT uplink_write". A failed one is rolled back to
  // it, which keeps the savepoint for the next write. A successful one's savepoint is
  // released and the next write's set together with the statements the write deferred (one
  // round trip on PostgreSQL), and the last one's by COMMIT. A deferred statement that fails
  // fails its own write: the RELEASE after it does not run, so the savepoint is still there
  // to roll back to.
  bool savepoint_set = false;
  // The last of `applied` while the answers to its deferred statements (numbered [from, to))
  // have not been read: they come with the next write's first query, which that write may
  // then have run in a failed transaction.
  struct Unanswered {
    bool any = false;
    std::int64_t from = 0, to = 0;
  } unanswered;
  // Fails everything not yet committed and ends the transaction. A RELEASE or a ROLLBACK TO
  // fails only if the transaction is aborted or lost, and then which writes it still holds
  // cannot be told.
  auto abandon = [&](size_t from, const Status& status) {
    fail_all(applied, status);
    fail_all(std::span(group).subspan(from), status);
    (void)Exec("ROLLBACK");
  };
  for (size_t i = 0; i < group.size(); ++i) {
    PendingWrite& write = *group[i];
    const bool last = i + 1 == group.size();
    if (write.cache == CredentialCache::kEmpty) ForgetCachedCredentials();
    std::int64_t first_deferred = db_->DeferredSent();
    if (!alone && !savepoint_set) {
      // Goes out with the body's first query; its failure is this write's.
      if (Status set = db_->DeferExec("SAVEPOINT uplink_write"); !set.ok()) {
        return abandon(i, set);
      }
      savepoint_set = true;
    }
    Status status = run_body(write);
    if (unanswered.any) {
      // A body with no query of its own has not read them yet.
      if (db_->DeferredAnswered() < unanswered.to) (void)db_->AwaitDeferred();
      const auto failure = db_->LastDeferredFailure();
      const bool previous_failed = failure && failure->number >= unanswered.from &&
                                   failure->number < unanswered.to;
      unanswered = {};
      if (previous_failed && db_->InTransaction()) {
        // Its RELEASE did not run: rolling back to the savepoint undoes it and this body's
        // run in the failed transaction, and this one runs again.
        applied.back()->status = failure->status;
        applied.pop_back();
        if (Status undone = Exec("ROLLBACK TO uplink_write"); !undone.ok()) {
          return abandon(i, undone);
        }
        first_deferred = db_->DeferredSent();
        status = run_body(write);
      }
    }
    bool committed = false;
    if (db_->InTransaction()) {
      if (status.ok() && alone) {
        status = db_->DeferExec("COMMIT");
        committed = true;
      } else if (status.ok() && !last) {
        status = db_->DeferExec("RELEASE uplink_write");
        if (status.ok()) status = db_->DeferExec("SAVEPOINT uplink_write");
      }
      if (status.ok() && !alone && !last && group[i + 1]->repeatable) {
        unanswered = {true, first_deferred, db_->DeferredSent()};
      } else {
        Status deferred = db_->AwaitDeferred();
        if (status.ok()) status = deferred;
      }
    }
    write.status = status;
    if (committed && status.ok()) return;
    if (!db_->InTransaction()) {
      // The engine rolled the whole transaction back (an I/O error, a full disk, a lost
      // connection): the writes before this one in the group are undone with it. The rest
      // get a transaction of their own.
      if (status.ok()) status = UnavailableError("the store's transaction was rolled back");
      write.status = status;
      fail_all(applied, status);
      applied.clear();
      unanswered = {};
      savepoint_set = false;
      if (last) return;
      if (Status begun = db_->BeginWrite(); !begun.ok()) {
        return fail_all(std::span(group).subspan(i + 1), begun);
      }
      continue;
    }
    if (alone) {
      (void)Exec("ROLLBACK");
      return;
    }
    if (status.ok()) {
      applied.push_back(&write);
    } else if (Status undone = Exec("ROLLBACK TO uplink_write"); !undone.ok()) {
      return abandon(i + 1, undone);
    }
  }
  if (Status committed = Exec("COMMIT"); !committed.ok()) {
    (void)Exec("ROLLBACK");
    fail_all(applied, committed);
  }
}

void SqlStore::ForgetCachedCredentials() {
  std::lock_guard cache(credential_cache_mutex_);
  connections_by_token_prefix_.clear();
  settings_.reset();
}

size_t SqlStore::RowsPerStatement(size_t remaining) {
  constexpr size_t kRowCounts[] = {32, 8, 1};
  for (size_t rows : kRowCounts) {
    if (rows <= remaining) return rows;
  }
  return 1;
}

std::string SqlStore::PlaceholderRows(size_t rows, size_t columns) {
  std::string tuple = "(";
  for (size_t i = 0; i < columns; ++i) tuple += i == 0 ? "?" : ", ?";
  tuple += ")";
  std::string text;
  for (size_t i = 0; i < rows; ++i) {
    if (i > 0) text += ", ";
    text += tuple;
  }
  return text;
}

Result<int> SqlStore::Change(std::string_view sql, const Binder& bind, std::string_view what) {
  UPLINK_ASSIGN_OR_RETURN(sql::Statement * stmt, Prepare(sql));
  Statement statement(stmt);
  bind(statement);
  if (statement.Step() != Statement::kDone) return Error(what);
  return static_cast<int>(statement.Changes());
}

Status SqlStore::Defer(std::string_view sql, const Binder& bind, std::string_view what) {
  UPLINK_ASSIGN_OR_RETURN(sql::Statement * stmt, Prepare(sql));
  Statement statement(stmt);
  bind(statement);
  if (!db_->Defer(*stmt, what).ok()) return Error(what);
  return Status::Ok();
}

Status SqlStore::ForEachRowOn(sql::Database& database, std::string_view sql, const Binder& bind,
                              const RowReader& read, std::string_view what) {
  UPLINK_ASSIGN_OR_RETURN(sql::Statement * stmt, database.Prepare(std::string(sql)));
  Statement query(stmt);
  bind(query);
  Statement::StepResult step;
  while ((step = query.Step()) == Statement::kRow) read(query);
  if (step != Statement::kDone) return ErrorOf(database, what);
  return Status::Ok();
}

Result<std::int64_t> SqlStore::InsertReturningId(std::string_view sql, const Binder& bind,
                                                  std::string_view what) {
  std::optional<std::int64_t> id;
  UPLINK_RETURN_IF_ERROR(
      ForEachRow(sql, bind, [&](const Statement& row) { id = row.Int(0); }, what));
  if (!id) return InternalError(std::string(what) + ": the insert returned no id");
  return *id;
}

Status SqlStore::CheckExists(std::string_view sql, const std::string& id, std::string_view what) {
  bool found = false;
  UPLINK_RETURN_IF_ERROR(ForEachRow(
      sql, [&](Statement& s) { s.Bind(id); }, [&](const Statement&) { found = true; },
      "reading " + std::string(what)));
  if (!found) return NotFoundError(std::string(what) + " " + id + " does not exist");
  return Status::Ok();
}

Status SqlStore::Migrate() {
  std::lock_guard lock(mutex_);
  // The version is read inside the write transaction, so two processes opening a new
  // database at once (init racing serve, two replicas) apply each migration exactly once.
  UPLINK_RETURN_IF_ERROR(db_->BeginWrite());
  auto apply = [&]() -> Status {
    UPLINK_RETURN_IF_ERROR(Exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)"));
    UPLINK_ASSIGN_OR_RETURN(sql::Statement * max_stmt,
                            Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
    std::int64_t current = 0;
    {
      Statement query(max_stmt);
      if (query.Step() != Statement::kRow) return Error("reading schema version");
      current = query.Int(0);
    }
    if (current > LatestSchemaVersion()) {
      return FailedPreconditionError(
          "the database has schema version " + std::to_string(current) +
          " but this uplink-console supports up to " + std::to_string(LatestSchemaVersion()) +
          "; run a newer uplink-console (or restore a backup made before the upgrade)");
    }
    for (const sql::Migration& migration : db_->Migrations()) {
      if (migration.version <= current) continue;
      Status status = db_->ExecUnbounded(migration.sql);
      if (!status.ok()) {
        return status.WithContext("applying schema migration " + std::to_string(migration.version));
      }
      UPLINK_ASSIGN_OR_RETURN(
          sql::Statement * record,
          Prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"));
      Statement insert(record);
      insert.Bind(static_cast<std::int64_t>(migration.version))
          .Bind(std::chrono::system_clock::now());
      if (insert.Step() != Statement::kDone) return Error("recording schema migration");
    }
    return Status::Ok();
  };
  Status status = apply();
  if (status.ok()) status = Exec("COMMIT");
  if (!status.ok()) (void)Exec("ROLLBACK");
  return status;
}

void SqlStore::RenderMetrics(std::string& out) const {
  if (reconnect_gate_ != nullptr) reconnect_gate_->RenderMetrics(out);
  if (db_->engine() != sql::Engine::kPostgres) return;
  // The writer's connection: every write waits on it, so its round trips per write are what
  // a network between console and database costs the store.
  out +=
      "# HELP uplink_console_store_writer_round_trips_total Answers the store's writer "
      "connection waited for from PostgreSQL (each a network round trip, for however many "
      "statements it carried).\n"
      "# TYPE uplink_console_store_writer_round_trips_total counter\n"
      "uplink_console_store_writer_round_trips_total ";
  out += std::to_string(db_->RoundTrips());
  out += '\n';
}

Status SqlStore::CheckReady(std::chrono::milliseconds writer_stuck_after) {
  if (const std::int64_t started = group_started_ns_; started != 0) {
    const auto running = std::chrono::nanoseconds(SteadyNanoseconds() - started);
    if (running >= writer_stuck_after) {
      return UnavailableError(
          "the store's writer has been in one write group for " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(running).count()) + " s");
    }
  }
  // A table of the schema rather than `SELECT 1`, which SQLite answers without its file. On
  // a lookup connection where the store has them, so that a probe neither queues behind the
  // writer's group (an fsync, round trips) nor holds it back.
  return ReadOnLookup([](sql::Database& database) {
    return ForEachRowOn(
        database, "SELECT count(*) FROM console_settings", [](Statement&) {},
        [](const Statement&) {}, "reading the console's settings");
  });
}

// --- Audit ---------------------------------------------------------------------------------

namespace {

constexpr std::string_view kInsertAudit =
    "INSERT INTO audit_events (at, actor_type, actor_id, actor_label, credential, action, "
    "target_type, target_id, owner_id, source_address, outcome, detail) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

}  // namespace

void SqlStore::BindAudit(Statement& s, const AuditEvent& e) {
  s.Bind(e.at).Bind(e.actor_type).Bind(e.actor_id).Bind(e.actor_label).Bind(e.credential);
  s.Bind(e.action).Bind(e.target_type).Bind(e.target_id).Bind(e.owner_id);
  s.Bind(e.source_address).Bind(e.outcome).Bind(e.detail.empty() ? "{}" : e.detail);
}

Status SqlStore::InsertAudit(const AuditEvent& e) {
  auto inserted =
      Change(kInsertAudit, [&](Statement& s) { BindAudit(s, e); }, "recording audit event");
  if (!inserted.ok() && db_->LastFailure() == sql::Failure::kCheck) {
    return InvalidArgumentError("audit event \"" + OneLineExcerpt(e.action, 64) +
                                "\" refused: its outcome must be \"ok\" or \"refused\" and its "
                                "detail a JSON object; nothing was changed");
  }
  return inserted.status();
}

Status SqlStore::DeferAudit(const AuditEvent& e) {
  return Defer(kInsertAudit, [&](Statement& s) { BindAudit(s, e); }, "recording audit event");
}

Status SqlStore::AppendAudit(const AuditEvent& event) {
  std::lock_guard lock(mutex_);
  return InsertAudit(event);
}

Result<std::vector<AuditEvent>> SqlStore::ListAudit(const AuditQuery& query) {
  // The SQL depends on which filters are set (16 combinations, each cached once).
  std::string filters;
  if (query.target_id) filters += " AND target_id = ?";
  if (query.action) filters += " AND action = ?";
  if (query.before_id) filters += " AND id < ?";
  auto newest = [&](const char* condition) {
    return SelectFrom(kAuditColumns, "audit_events WHERE ") + condition + filters +
           " ORDER BY id DESC LIMIT ?";
  };
  std::string sql;
  if (query.owner_id) {
    // "About their things or by them": each side walks its own index from the newest down
    // and stops after one page, rather than sorting all of the user's events for every page.
    // UNION drops an event that is both.
    sql = std::string("SELECT * FROM (") + newest("owner_id = ?") +
          ") AS owned UNION SELECT * FROM (" + newest("actor_id = ? AND actor_type = 'user'") +
          ") AS acted ORDER BY id DESC LIMIT ?";
  } else {
    sql = newest("TRUE");
  }
  std::int64_t limit = std::clamp(query.limit, 1, kMaxAuditPage);

  std::vector<AuditEvent> events;
  UPLINK_RETURN_IF_ERROR(ForEachRowOnLookup(
      sql.c_str(),
      [&](Statement& s) {
        auto bind_filters = [&] {
          if (query.target_id) s.Bind(*query.target_id);
          if (query.action) s.Bind(*query.action);
          if (query.before_id) s.Bind(*query.before_id);
          s.Bind(limit);
        };
        if (query.owner_id) {
          s.Bind(*query.owner_id);
          bind_filters();
          s.Bind(*query.owner_id);
          bind_filters();
          s.Bind(limit);
        } else {
          bind_filters();
        }
      },
      [&](const Statement& row) { events.push_back(AuditEventFromRow(row)); },
      "reading the audit log"));
  return events;
}

}  // namespace uplink::console
