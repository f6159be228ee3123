#include "console/setup.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/crypto.h"
#include "common/files.h"
#include "common/json.h"
#include "console/auth/credentials.h"
#include "console/store/sql/reconnect_gate.h"

namespace uplink::console {
namespace {

// Opens (creating or migrating) the store `location` names: the data directory's SQLite file,
// or the PostgreSQL database.
Result<std::unique_ptr<SqlStore>> OpenStoreAt(const std::string& data_dir,
                                              const StoreLocation& location,
                                              int lookup_connections) {
  if (!location.postgres()) return SqlStore::OpenSqlite(DatabasePath(data_dir));
  UPLINK_ASSIGN_OR_RETURN(sql::PostgresLocation where, ResolvePostgresLocation(location));
  // The store's connections reconnect through one gate: a database that stops answering
  // holds one of them in a connect attempt at a time, not all.
  sql::PostgresOptions options;
  options.reconnect_gate = std::make_shared<sql::ReconnectGate>();
  auto database = sql::OpenPostgresDatabase(where, options);
  if (!database.ok()) return database.status().WithContext("opening the --store database");
  std::vector<std::unique_ptr<sql::Database>> lookups;
  for (int i = 0; i < lookup_connections; ++i) {
    auto lookup = sql::OpenPostgresDatabase(where, options);
    if (!lookup.ok()) return lookup.status().WithContext("opening the --store database");
    lookups.push_back(std::move(lookup).value());
  }
  auto store = SqlStore::Open(std::move(database).value(), std::move(lookups),
                              options.reconnect_gate);
  if (!store.ok()) return store.status().WithContext("migrating the --store database");
  return store;
}

// How the console names its store in messages: never the URL, which may carry a user name.
std::string StoreName(const std::string& data_dir, const StoreLocation& location) {
  return location.postgres() ? "the --store database" : data_dir;
}

// The flags that name the same store again.
std::string StoreFlags(const std::string& data_dir, const StoreLocation& location) {
  return "--data-dir " + data_dir + (location.postgres() ? " --store …" : "");
}

}  // namespace

Result<sql::PostgresLocation> ResolvePostgresLocation(const StoreLocation& store) {
  auto parsed = sql::ParsePostgresLocation(store.url);
  if (!parsed.ok()) return InvalidArgumentError("--store: " + parsed.status().message());
  sql::PostgresLocation where = std::move(parsed).value();
  if (!store.password_file.empty()) {
    UPLINK_ASSIGN_OR_RETURN(Secret password,
                            ReadCredentialFile(store.password_file, "--store-password-file"));
    where.password = password.Reveal();
  }
  return where;
}

std::string DatabasePath(const std::string& data_dir) { return data_dir + "/console.db"; }

std::string TwoFactorKeyPath(const std::string& data_dir) {
  return data_dir + "/two-factor.key";
}

Result<Secret> InitializeConsole(const std::string& data_dir, const std::string& admin_email,
                                 const Clock& clock, const StoreLocation& location) {
  if (data_dir.empty()) return InvalidArgumentError("--data-dir is required");
  if (admin_email.size() < 3 || admin_email.size() > 254 ||
      std::count(admin_email.begin(), admin_email.end(), '@') != 1) {
    return InvalidArgumentError("--admin-email must be an email address: 3-254 characters "
                                "with exactly one @");
  }
  std::error_code error;
  std::filesystem::path parent = std::filesystem::path(data_dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (error) return IOError("creating " + parent.string() + ": " + error.message());
  // The leaf holds the credentials' hashes: owner only.
  if (::mkdir(data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoError("creating data directory " + data_dir, errno);
  }
  // `init` authenticates nobody: its reads go on the one connection.
  UPLINK_ASSIGN_OR_RETURN(auto store, OpenStoreAt(data_dir, location, /*lookup_connections=*/0));
  UPLINK_ASSIGN_OR_RETURN(std::int64_t users, store->CountUsers());
  if (users > 0) {
    return FailedPreconditionError(StoreName(data_dir, location) +
                                   " is already initialised; run \"uplink-console serve " +
                                   StoreFlags(data_dir, location) + "\" instead");
  }
  WallTime now = clock.Now();
  User admin;
  admin.id = HexEncode(RandomBytes(8));
  admin.email = admin_email;  // the store lower-cases it
  admin.role = Role::kAdmin;
  admin.created_at = now;  // no password: `uplink login` needs one set through the API

  MintedCredential minted = MintCredential(protocol::kApiKeyPrefix);
  ApiKey key;
  key.id = HexEncode(RandomBytes(8));
  key.user_id = admin.id;
  key.name = "init";
  key.lookup_prefix = minted.lookup_prefix;
  key.token_hash = minted.token_hash;
  key.created_at = now;

  AuditEvent audit;
  audit.at = now;
  audit.actor_type = "system";
  audit.actor_label = "uplink-console init";
  audit.action = "user.create";
  audit.target_type = "user";
  audit.target_id = admin.id;
  audit.owner_id = admin.id;
  audit.outcome = "ok";
  audit.detail = ToJson(json::object{
      {"role", "admin"}, {"api_key_id", key.id}, {"api_key_prefix", key.lookup_prefix}});
  UPLINK_RETURN_IF_ERROR(store->CreateUserWithApiKey(admin, key, audit));
  return std::move(minted.token);
}

DataDirectoryLock::~DataDirectoryLock() { ::close(fd_); }

Result<std::unique_ptr<DataDirectoryLock>> LockDataDirectory(const std::string& data_dir) {
  std::string path = data_dir + "/serve.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return UnavailableError("cannot open " + path + ": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) {
      return FailedPreconditionError("another uplink-console serve is using " + data_dir +
                                     "; stop it first (one server per data directory)");
    }
    return UnavailableError("cannot lock " + path + ": " + std::strerror(error));
  }
  return std::make_unique<DataDirectoryLock>(fd);
}

Result<std::unique_ptr<SqlStore>> OpenConsoleStore(const std::string& data_dir,
                                                   const StoreLocation& location,
                                                   int lookup_connections) {
  if (data_dir.empty()) return InvalidArgumentError("--data-dir is required");
  if (!location.postgres()) {
    std::string path = DatabasePath(data_dir);
    struct stat info;
    if (::stat(path.c_str(), &info) != 0) {
      return FailedPreconditionError("no console database at " + path +
                                     "; run \"uplink-console init --data-dir " + data_dir +
                                     "\" first");
    }
  }
  UPLINK_ASSIGN_OR_RETURN(auto store, OpenStoreAt(data_dir, location, lookup_connections));
  UPLINK_ASSIGN_OR_RETURN(std::int64_t users, store->CountUsers());
  if (users == 0) {
    return FailedPreconditionError(
        StoreName(data_dir, location) + " was never initialised; run \"uplink-console init " +
        StoreFlags(data_dir, location) + "\"" +
        (location.postgres() ? "" : " (after removing " + data_dir + ")"));
  }
  return store;
}

Result<std::unique_ptr<ReplicaLink>> JoinReplicas(const StoreLocation& location) {
  UPLINK_ASSIGN_OR_RETURN(sql::PostgresLocation where, ResolvePostgresLocation(location));
  auto link = std::make_unique<ReplicaLink>();
  auto bus = PostgresReplicaBus::Start(where);
  if (!bus.ok()) return bus.status().WithContext("starting the replica bus on the --store database");
  link->bus = std::move(bus).value();
  auto claims_database = sql::OpenPostgresDatabase(where);
  if (!claims_database.ok()) {
    return claims_database.status().WithContext("opening the --store database for command claims");
  }
  link->claims = std::make_unique<CommandClaims>(std::move(claims_database).value());
  return link;
}

}  // namespace uplink::console
