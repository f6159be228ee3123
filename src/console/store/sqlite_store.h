// The SQLite Store: one database file, WAL mode, foreign keys on, prepared statements kept
// for the life of the store, one connection serialised by a mutex (the console's write load
// is one report per connection per minute).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "console/store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace uplink::console {

class SqliteStore : public Store {
 public:
  // Creates the file (mode 0600) if needed and applies pending schema migrations. Refuses,
  // with FailedPrecondition, a database written by a newer uplink-console.
  static Result<std::unique_ptr<SqliteStore>> Open(const std::string& path);
  // The schema version this binary writes.
  static int LatestSchemaVersion();

  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  Status Ping() override;

  Status CreateUser(const User& user) override;
  Result<User> GetUser(const std::string& id) override;
  Result<std::int64_t> CountUsers() override;

  Status CreateApiKey(const ApiKey& key) override;
  Status CreateUserWithApiKey(const User& user, const ApiKey& key) override;
  Result<std::vector<ApiKey>> FindApiKeysByPrefix(const std::string& prefix) override;

  Status CreateConnection(const Connection& connection) override;
  Result<Connection> GetConnection(const std::string& id) override;
  Result<std::vector<Connection>> ListConnections(const std::string& owner_id) override;
  Result<std::vector<Connection>> ListAllConnections() override;
  Result<std::vector<Connection>> FindConnectionsByTokenPrefix(const std::string& prefix) override;
  Status ReplaceToken(const std::string& id, const std::string& token_prefix,
                      const std::string& token_hash, WallTime expires_at) override;
  Status RevokeConnection(const std::string& id, WallTime at) override;

  Status AcceptReport(const std::string& connection_id, const std::string& token_hash,
                      const InventoryReport& report,
                      WallTime received_at) override;
  Result<std::vector<Node>> ListNodes(const std::string& connection_id) override;

 private:
  class Statement;
  explicit SqliteStore(sqlite3* db);

  Status Migrate();
  Status Exec(const char* sql);
  // Unlocked inserts, for use inside a transaction the caller holds mutex_ for.
  Status InsertUser(const User& user);
  Status InsertApiKey(const ApiKey& key);
  Result<sqlite3_stmt*> Prepare(const char* sql);
  Status Error(std::string_view what) const;
  Result<std::vector<Connection>> QueryConnections(const char* sql, const std::string& key);

  std::mutex mutex_;
  sqlite3* db_;
  std::map<std::string, sqlite3_stmt*, std::less<>> statements_;  // keyed by SQL text
};

}  // namespace uplink::console
