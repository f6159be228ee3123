// Creating and opening a console's data directory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/secret.h"
#include "common/status.h"
#include "common/time.h"
#include "console/replicas/replica_bus.h"
#include "console/replicas/replica_commands.h"
#include "console/store/sql/postgres_database.h"
#include "console/store/sql_store.h"

namespace uplink::console {

// Where the console's store is: SQLite in the data directory (the default, one server), or a
// PostgreSQL database that several replicas share.
struct StoreLocation {
  std::string url;            // --store: empty for SQLite, else postgres://HOST/DB?user=…
  std::string password_file;  // --store-password-file (PostgreSQL; else PGPASSWORD/PGPASSFILE)

  bool postgres() const { return !url.empty(); }
};

// The PostgreSQL location `store` names, its password read from the file. InvalidArgument
// for anything but a postgres:// URL without a password in it.
Result<sql::PostgresLocation> ResolvePostgresLocation(const StoreLocation& store);

// The database inside the data directory.
std::string DatabasePath(const std::string& data_dir);
// The key that seals two-factor secrets (auth/secret_box.h), beside the database but not in
// it: a copy of the database alone opens none of them. `serve` creates it on first start.
std::string TwoFactorKeyPath(const std::string& data_dir);

// Creates the directory (mode 0700) and the database (in it, or the PostgreSQL schema), the
// first admin user (no password) and an API key for it named "init", which is returned: the
// only time it exists outside its hash. Both are recorded as one "user.create" audit event by
// actor type "system". FailedPrecondition if the store already holds an initialised console.
Result<Secret> InitializeConsole(const std::string& data_dir, const std::string& admin_email,
                                 const Clock& clock, const StoreLocation& store = {});

// An exclusive lock on a data directory, held while `uplink-console serve` runs on SQLite:
// one server per database file. (On PostgreSQL replicas share the database and tell each other
// what they cached, so no lock applies.)
class DataDirectoryLock {
 public:
  explicit DataDirectoryLock(int fd) : fd_(fd) {}
  ~DataDirectoryLock();
  DataDirectoryLock(const DataDirectoryLock&) = delete;
  DataDirectoryLock& operator=(const DataDirectoryLock&) = delete;

 private:
  int fd_;
};

// FailedPrecondition when another process holds the lock.
Result<std::unique_ptr<DataDirectoryLock>> LockDataDirectory(const std::string& data_dir);

// Opens the store of an initialised console; FailedPrecondition, saying to run
// "uplink-console init", when there is none. On PostgreSQL, authentication reads on
// `lookup_connections` connections of its own: one for each server thread that may
// authenticate at once.
Result<std::unique_ptr<SqlStore>> OpenConsoleStore(const std::string& data_dir,
                                                   const StoreLocation& store = {},
                                                   int lookup_connections = 4);

// What `serve` holds on PostgreSQL to act as one console with the other replicas
// (docs/architecture.md, "Replicas"): the bus, and the command claims on a connection of their
// own. Must outlive the ConsoleApi given `bus` and `claims`. (The store caches no credentials
// on PostgreSQL, so there is no cache to tell about another replica's revoke.)
struct ReplicaLink {
  std::unique_ptr<PostgresReplicaBus> bus;
  std::unique_ptr<CommandClaims> claims;
};

// Connects the bus and the claims to the database `location` names (a postgres:// --store).
Result<std::unique_ptr<ReplicaLink>> JoinReplicas(const StoreLocation& location);

}  // namespace uplink::console
