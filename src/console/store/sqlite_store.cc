#include "console/store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <span>
#include <unordered_map>

namespace uplink::console {
namespace {

struct Migration {
  int version;
  const char* sql;
};

// Append only: a migration, once released, never changes. Times are Unix seconds.
constexpr Migration kMigrations[] = {
    {1, R"sql(
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
-- A revoked connection frees its cluster name for a new one.
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
)sql"},
};

constexpr const char* kConnectionColumns =
    "id, owner_id, agent_name, cluster_name, token_prefix, token_hash, created_at, expires_at, "
    "revoked_at, last_report_at, cluster_uid, agent_version, selector, collected_at, "
    "node_count, nodes_ready, gpu_capacity, gpu_allocatable, gpus_ready";

}  // namespace

InventoryTotals ComputeTotals(const std::vector<Node>& nodes) {
  InventoryTotals totals;
  for (const Node& node : nodes) {
    ++totals.nodes;
    totals.gpu_capacity += node.gpu_capacity;
    totals.gpu_allocatable += node.gpu_allocatable;
    if (node.ready) {
      ++totals.nodes_ready;
      if (!node.unschedulable) totals.gpus_ready += node.gpu_allocatable;
    }
  }
  return totals;
}

// A cached prepared statement for one use: binds by position, steps, and is reset (and its
// bindings cleared) when it goes out of scope so the next user finds it clean.
class SqliteStore::Statement {
 public:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Statement() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(const std::string& value) {
    sqlite3_bind_text(stmt_, ++index_, value.data(), static_cast<int>(value.size()),
                      SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(std::int64_t value) {
    sqlite3_bind_int64(stmt_, ++index_, value);
    return *this;
  }
  Statement& Bind(bool value) { return Bind(static_cast<std::int64_t>(value)); }
  Statement& Bind(WallTime value) { return Bind(ToUnixSeconds(value)); }
  template <typename T>
  Statement& Bind(const std::optional<T>& value) {
    if (value) return Bind(*value);
    sqlite3_bind_null(stmt_, ++index_);
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }

  std::string Text(int column) const {
    const unsigned char* text = sqlite3_column_text(stmt_, column);
    return text ? std::string(reinterpret_cast<const char*>(text),
                              static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
                : std::string();
  }
  std::int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  WallTime Time(int column) const { return FromUnixSeconds(Int(column)); }
  std::optional<WallTime> OptionalTime(int column) const {
    return IsNull(column) ? std::nullopt : std::optional(Time(column));
  }
  std::optional<std::string> OptionalText(int column) const {
    return IsNull(column) ? std::nullopt : std::optional(Text(column));
  }

 private:
  sqlite3_stmt* stmt_;
  int index_ = 0;
};

namespace {

Connection ReadConnection(const auto& row) {
  Connection c;
  c.id = row.Text(0);
  c.owner_id = row.Text(1);
  c.agent_name = row.Text(2);
  c.cluster_name = row.Text(3);
  c.token_prefix = row.Text(4);
  c.token_hash = row.Text(5);
  c.created_at = row.Time(6);
  c.expires_at = row.Time(7);
  c.revoked_at = row.OptionalTime(8);
  c.last_report_at = row.OptionalTime(9);
  c.cluster_uid = row.OptionalText(10);
  c.agent_version = row.Text(11);
  c.selector = row.Text(12);
  c.collected_at = row.OptionalTime(13);
  c.totals = {row.Int(14), row.Int(15), row.Int(16), row.Int(17), row.Int(18)};
  return c;
}

std::string ConnectionQuery(const char* tail) {
  return std::string("SELECT ") + kConnectionColumns + " FROM connections " + tail;
}

}  // namespace

int SqliteStore::LatestSchemaVersion() { return std::span(kMigrations).back().version; }

SqliteStore::SqliteStore(sqlite3* db) : db_(db) {}

SqliteStore::~SqliteStore() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  // Create the file ourselves so that it (and SQLite's -wal and -shm files, which copy its
  // mode) is readable by the owner only.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("opening database " + path, errno);
  ::close(fd);

  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return IOError("opening database " + path + ": " + message);
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 5000);
  UPLINK_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  // FULL: a rotated or revoked token must survive a power cut; writes are rare.
  UPLINK_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  UPLINK_RETURN_IF_ERROR(store->Exec("PRAGMA foreign_keys=ON"));
  UPLINK_RETURN_IF_ERROR(store->Migrate().WithContext("migrating database " + path));
  return store;
}

Status SqliteStore::Error(std::string_view what) const {
  int code = sqlite3_extended_errcode(db_);
  std::string message = std::string(what) + ": " + sqlite3_errmsg(db_);
  if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
    return UnavailableError(std::move(message));
  }
  if ((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB) {
    return DataLossError(std::move(message));
  }
  return IOError(std::move(message));
}

Status SqliteStore::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return Error("executing SQL").WithContext(message);
  }
  return Status::Ok();
}

Result<sqlite3_stmt*> SqliteStore::Prepare(const char* sql) {
  auto it = statements_.find(std::string_view(sql));
  if (it != statements_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    return Error("preparing statement");
  }
  statements_.emplace(sql, stmt);
  return stmt;
}

Status SqliteStore::Migrate() {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(Exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations ("
      "version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"));
  // The version is read inside the write transaction, so two processes opening a new
  // database at once (init racing serve) apply each migration exactly once.
  UPLINK_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto apply = [&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * max_stmt,
                            Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
    std::int64_t current = 0;
    {
      Statement query(max_stmt);
      if (query.Step() != SQLITE_ROW) return Error("reading schema version");
      current = query.Int(0);
    }
    if (current > LatestSchemaVersion()) {
      return FailedPreconditionError(
          "the database has schema version " + std::to_string(current) +
          " but this uplink-console supports up to " + std::to_string(LatestSchemaVersion()) +
          "; run a newer uplink-console (or restore a backup made before the upgrade)");
    }
    for (const Migration& migration : kMigrations) {
      if (migration.version <= current) continue;
      Status status = Exec(migration.sql);
      if (!status.ok()) {
        return status.WithContext("applying schema migration " + std::to_string(migration.version));
      }
      UPLINK_ASSIGN_OR_RETURN(
          sqlite3_stmt * record,
          Prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"));
      Statement insert(record);
      insert.Bind(static_cast<std::int64_t>(migration.version))
          .Bind(std::chrono::system_clock::now());
      if (insert.Step() != SQLITE_DONE) return Error("recording schema migration");
    }
    return Status::Ok();
  };
  Status status = apply();
  if (status.ok()) status = Exec("COMMIT");
  if (!status.ok()) (void)Exec("ROLLBACK");
  return status;
}

Status SqliteStore::Ping() {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare("SELECT 1"));
  Statement query(stmt);
  if (query.Step() != SQLITE_ROW) return Error("querying the database");
  return Status::Ok();
}

Status SqliteStore::InsertUser(const User& user) {
  UPLINK_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      Prepare("INSERT INTO users (id, email, is_admin, created_at) VALUES (?, ?, ?, ?)"));
  Statement insert(stmt);
  insert.Bind(user.id).Bind(user.email).Bind(user.is_admin).Bind(user.created_at);
  if (insert.Step() != SQLITE_DONE) {
    if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_UNIQUE) {
      return AlreadyExistsError("a user with email " + user.email + " already exists");
    }
    return Error("creating user");
  }
  return Status::Ok();
}

Status SqliteStore::CreateUser(const User& user) {
  std::lock_guard lock(mutex_);
  return InsertUser(user);
}

Status SqliteStore::CreateUserWithApiKey(const User& user, const ApiKey& key) {
  std::lock_guard lock(mutex_);
  UPLINK_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status status = InsertUser(user);
  if (status.ok()) status = InsertApiKey(key);
  if (status.ok()) status = Exec("COMMIT");
  if (!status.ok()) (void)Exec("ROLLBACK");
  return status;
}

Result<User> SqliteStore::GetUser(const std::string& id) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      Prepare("SELECT id, email, is_admin, created_at FROM users WHERE id = ?"));
  Statement query(stmt);
  query.Bind(id);
  int rc = query.Step();
  if (rc == SQLITE_DONE) return NotFoundError("user " + id + " does not exist");
  if (rc != SQLITE_ROW) return Error("reading user");
  return User{query.Text(0), query.Text(1), query.Int(2) != 0, query.Time(3)};
}

Result<std::int64_t> SqliteStore::CountUsers() {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare("SELECT COUNT(*) FROM users"));
  Statement query(stmt);
  if (query.Step() != SQLITE_ROW) return Error("counting users");
  return query.Int(0);
}

Status SqliteStore::InsertApiKey(const ApiKey& key) {
  UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt,
                          Prepare("INSERT INTO api_keys (id, user_id, lookup_prefix, token_hash, "
                                  "created_at) VALUES (?, ?, ?, ?, ?)"));
  Statement insert(stmt);
  insert.Bind(key.id).Bind(key.user_id).Bind(key.lookup_prefix).Bind(key.token_hash).Bind(
      key.created_at);
  if (insert.Step() != SQLITE_DONE) return Error("creating API key");
  return Status::Ok();
}

Status SqliteStore::CreateApiKey(const ApiKey& key) {
  std::lock_guard lock(mutex_);
  return InsertApiKey(key);
}

Result<std::vector<ApiKey>> SqliteStore::FindApiKeysByPrefix(const std::string& prefix) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt,
                          Prepare("SELECT id, user_id, lookup_prefix, token_hash, created_at "
                                  "FROM api_keys WHERE lookup_prefix = ?"));
  Statement query(stmt);
  query.Bind(prefix);
  std::vector<ApiKey> keys;
  int rc;
  while ((rc = query.Step()) == SQLITE_ROW) {
    keys.push_back(
        ApiKey{query.Text(0), query.Text(1), query.Text(2), query.Text(3), query.Time(4)});
  }
  if (rc != SQLITE_DONE) return Error("looking up API key");
  return keys;
}

Status SqliteStore::CreateConnection(const Connection& c) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      Prepare("INSERT INTO connections (id, owner_id, agent_name, cluster_name, token_prefix, "
              "token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
  Statement insert(stmt);
  insert.Bind(c.id).Bind(c.owner_id).Bind(c.agent_name).Bind(c.cluster_name);
  insert.Bind(c.token_prefix).Bind(c.token_hash).Bind(c.created_at).Bind(c.expires_at);
  if (insert.Step() != SQLITE_DONE) {
    if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_UNIQUE) {
      return ConflictError("a connection for cluster \"" + c.cluster_name +
                           "\" already exists; rotate its token, or revoke it first");
    }
    return Error("creating connection");
  }
  return Status::Ok();
}

Result<std::vector<Connection>> SqliteStore::QueryConnections(const char* sql,
                                                              const std::string& key) {
  UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(sql));
  Statement query(stmt);
  if (!key.empty()) query.Bind(key);
  std::vector<Connection> connections;
  int rc;
  while ((rc = query.Step()) == SQLITE_ROW) connections.push_back(ReadConnection(query));
  if (rc != SQLITE_DONE) return Error("reading connections");
  return connections;
}

Result<Connection> SqliteStore::GetConnection(const std::string& id) {
  static const std::string sql = ConnectionQuery("WHERE id = ?");
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(auto found, QueryConnections(sql.c_str(), id));
  if (found.empty()) return NotFoundError("connection " + id + " does not exist");
  return std::move(found.front());
}

Result<std::vector<Connection>> SqliteStore::ListConnections(const std::string& owner_id) {
  static const std::string sql = ConnectionQuery("WHERE owner_id = ? ORDER BY created_at, rowid");
  std::lock_guard lock(mutex_);
  return QueryConnections(sql.c_str(), owner_id);
}

Result<std::vector<Connection>> SqliteStore::ListAllConnections() {
  static const std::string sql = ConnectionQuery("ORDER BY created_at, rowid");
  std::lock_guard lock(mutex_);
  return QueryConnections(sql.c_str(), "");
}

Result<std::vector<Connection>> SqliteStore::FindConnectionsByTokenPrefix(
    const std::string& prefix) {
  static const std::string sql = ConnectionQuery("WHERE token_prefix = ?");
  std::lock_guard lock(mutex_);
  return QueryConnections(sql.c_str(), prefix);
}

Status SqliteStore::ReplaceToken(const std::string& id, const std::string& token_prefix,
                                 const std::string& token_hash, WallTime expires_at) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      Prepare("UPDATE connections SET token_prefix = ?, token_hash = ?, expires_at = ? "
              "WHERE id = ? AND revoked_at IS NULL"));
  Statement update(stmt);
  update.Bind(token_prefix).Bind(token_hash).Bind(expires_at).Bind(id);
  if (update.Step() != SQLITE_DONE) return Error("replacing token");
  if (sqlite3_changes(db_) == 0) {
    // Either it does not exist or a revoke got there first; a revoked connection stays dead.
    UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * probe_stmt,
                            Prepare("SELECT 1 FROM connections WHERE id = ?"));
    Statement probe(probe_stmt);
    probe.Bind(id);
    if (probe.Step() != SQLITE_ROW) return NotFoundError("connection " + id + " does not exist");
    return FailedPreconditionError("this connection was revoked and cannot get a new token; "
                                   "create a new connection");
  }
  return Status::Ok();
}

Status SqliteStore::RevokeConnection(const std::string& id, WallTime at) {
  std::lock_guard lock(mutex_);
  UPLINK_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      Prepare("UPDATE connections SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?"));
  Statement update(stmt);
  update.Bind(at).Bind(id);
  if (update.Step() != SQLITE_DONE) return Error("revoking connection");
  if (sqlite3_changes(db_) == 0) return NotFoundError("connection " + id + " does not exist");
  return Status::Ok();
}

Status SqliteStore::AcceptReport(const std::string& connection_id, const std::string& token_hash,
                                 const InventoryReport& report, WallTime received_at) {
  std::lock_guard lock(mutex_);
  // IMMEDIATE: two reports racing for the first binding must not both see it unset.
  UPLINK_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> Status {
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * read_stmt,
        Prepare("SELECT cluster_uid, token_hash, revoked_at, expires_at FROM connections "
                "WHERE id = ?"));
    {
      Statement read(read_stmt);
      read.Bind(connection_id);
      int rc = read.Step();
      if (rc == SQLITE_DONE) {
        return NotFoundError("connection " + connection_id + " does not exist");
      }
      if (rc != SQLITE_ROW) return Error("reading connection");
      // Both hashes come from this database, so a plain comparison leaks nothing.
      if (read.Text(1) != token_hash || read.OptionalTime(2) || read.Time(3) <= received_at) {
        return UnauthenticatedError("the connection's token was rotated, revoked or expired "
                                    "while this report was being received; nothing was stored");
      }
      std::optional<std::string> bound = read.OptionalText(0);
      if (bound && *bound != report.cluster_uid) {
        // The bound UID stays out of the message: the sender may not own that cluster.
        return ConflictError("this connection's token is bound to another cluster (a different "
                             "kube-system UID); create a separate connection for each cluster");
      }
    }
    InventoryTotals totals = ComputeTotals(report.nodes);
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * update_stmt,
        Prepare("UPDATE connections SET cluster_uid = ?, last_report_at = ?, agent_version = ?, "
                "selector = ?, collected_at = ?, node_count = ?, nodes_ready = ?, "
                "gpu_capacity = ?, gpu_allocatable = ?, gpus_ready = ? WHERE id = ?"));
    {
      Statement update(update_stmt);
      update.Bind(report.cluster_uid).Bind(received_at).Bind(report.agent_version);
      update.Bind(report.selector).Bind(report.collected_at).Bind(totals.nodes);
      update.Bind(totals.nodes_ready).Bind(totals.gpu_capacity).Bind(totals.gpu_allocatable);
      update.Bind(totals.gpus_ready).Bind(connection_id);
      if (update.Step() != SQLITE_DONE) return Error("updating connection");
    }
    UPLINK_ASSIGN_OR_RETURN(sqlite3_stmt * delete_stmt,
                            Prepare("DELETE FROM connection_nodes WHERE connection_id = ?"));
    {
      Statement remove(delete_stmt);
      remove.Bind(connection_id);
      if (remove.Step() != SQLITE_DONE) return Error("replacing nodes");
    }
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * node_stmt,
        Prepare("INSERT INTO connection_nodes (connection_id, position, name, uid, ready, "
                "unschedulable, gpu_resource, gpu_capacity, gpu_allocatable, gpu_product, "
                "error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * resource_stmt,
        Prepare("INSERT INTO node_resources (node_id, name, capacity, allocatable) "
                "VALUES (?, ?, ?, ?)"));
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * taint_stmt,
        Prepare("INSERT INTO node_taints (node_id, key, value, effect) VALUES (?, ?, ?, ?)"));
    std::int64_t position = 0;
    for (const Node& node : report.nodes) {
      {
        Statement insert(node_stmt);
        insert.Bind(connection_id).Bind(position++).Bind(node.name).Bind(node.uid);
        insert.Bind(node.ready).Bind(node.unschedulable).Bind(node.gpu_resource);
        insert.Bind(node.gpu_capacity).Bind(node.gpu_allocatable).Bind(node.gpu_product);
        insert.Bind(node.error);
        if (insert.Step() != SQLITE_DONE) return Error("storing node " + node.name);
      }
      std::int64_t node_id = sqlite3_last_insert_rowid(db_);
      for (const GpuResource& resource : node.resources) {
        Statement insert(resource_stmt);
        insert.Bind(node_id).Bind(resource.name).Bind(resource.capacity).Bind(
            resource.allocatable);
        if (insert.Step() != SQLITE_DONE) return Error("storing resources of " + node.name);
      }
      for (const Taint& taint : node.taints) {
        Statement insert(taint_stmt);
        insert.Bind(node_id).Bind(taint.key).Bind(taint.value).Bind(taint.effect);
        if (insert.Step() != SQLITE_DONE) return Error("storing taints of " + node.name);
      }
    }
    return Exec("COMMIT");
  };
  Status status = body();
  if (!status.ok()) (void)Exec("ROLLBACK");
  return status;
}

Result<std::vector<Node>> SqliteStore::ListNodes(const std::string& connection_id) {
  std::lock_guard lock(mutex_);
  // One snapshot across the three reads, so a report landing in between cannot mix lists.
  UPLINK_RETURN_IF_ERROR(Exec("BEGIN"));
  auto body = [&]() -> Result<std::vector<Node>> {
    std::vector<Node> nodes;
    std::unordered_map<std::int64_t, size_t> index_by_id;
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * node_stmt,
        Prepare("SELECT id, name, uid, ready, unschedulable, gpu_resource, gpu_capacity, "
                "gpu_allocatable, gpu_product, error FROM connection_nodes "
                "WHERE connection_id = ? ORDER BY position"));
    {
      Statement query(node_stmt);
      query.Bind(connection_id);
      int rc;
      while ((rc = query.Step()) == SQLITE_ROW) {
        Node node;
        node.name = query.Text(1);
        node.uid = query.Text(2);
        node.ready = query.Int(3) != 0;
        node.unschedulable = query.Int(4) != 0;
        node.gpu_resource = query.Text(5);
        node.gpu_capacity = query.Int(6);
        node.gpu_allocatable = query.Int(7);
        node.gpu_product = query.Text(8);
        node.error = query.OptionalText(9);
        index_by_id.emplace(query.Int(0), nodes.size());
        nodes.push_back(std::move(node));
      }
      if (rc != SQLITE_DONE) return Error("reading nodes");
    }
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * resource_stmt,
        Prepare("SELECT r.node_id, r.name, r.capacity, r.allocatable FROM node_resources r "
                "JOIN connection_nodes n ON n.id = r.node_id WHERE n.connection_id = ? "
                "ORDER BY r.rowid"));
    {
      Statement query(resource_stmt);
      query.Bind(connection_id);
      int rc;
      while ((rc = query.Step()) == SQLITE_ROW) {
        auto it = index_by_id.find(query.Int(0));
        if (it == index_by_id.end()) continue;
        nodes[it->second].resources.push_back({query.Text(1), query.Int(2), query.Int(3)});
      }
      if (rc != SQLITE_DONE) return Error("reading node resources");
    }
    UPLINK_ASSIGN_OR_RETURN(
        sqlite3_stmt * taint_stmt,
        Prepare("SELECT t.node_id, t.key, t.value, t.effect FROM node_taints t "
                "JOIN connection_nodes n ON n.id = t.node_id WHERE n.connection_id = ? "
                "ORDER BY t.rowid"));
    {
      Statement query(taint_stmt);
      query.Bind(connection_id);
      int rc;
      while ((rc = query.Step()) == SQLITE_ROW) {
        auto it = index_by_id.find(query.Int(0));
        if (it == index_by_id.end()) continue;
        nodes[it->second].taints.push_back({query.Text(1), query.Text(2), query.Text(3)});
      }
      if (rc != SQLITE_DONE) return Error("reading node taints");
    }
    return nodes;
  };
  auto nodes = body();
  (void)Exec(nodes.ok() ? "COMMIT" : "ROLLBACK");
  return nodes;
}

}  // namespace uplink::console
