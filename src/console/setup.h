// Creating and opening a console's data directory.
#pragma once

#include <memory>
#include <string>

#include "common/secret.h"
#include "common/status.h"
#include "common/time.h"
#include "console/store/sqlite_store.h"

namespace uplink::console {

// The database inside the data directory.
std::string DatabasePath(const std::string& data_dir);
// The key that seals two-factor secrets (auth/secret_box.h), beside the database but not in
// it: a copy of the database alone opens none of them. `serve` creates it on first start.
std::string TwoFactorKeyPath(const std::string& data_dir);

// Creates the directory (mode 0700) and the database, the first admin user (no password) and
// an API key for it named "init", which is returned: the only time it exists outside its
// hash. Both are recorded as one "user.create" audit event by actor type "system".
// FailedPrecondition if the directory already holds an initialised console.
Result<Secret> InitializeConsole(const std::string& data_dir, const std::string& admin_email,
                                 const Clock& clock);

// An exclusive lock on a data directory, held while `uplink-console serve` runs: the store
// caches what it wrote and rate limits live in memory, so a second server on the same
// directory would see stale credentials.
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

// Opens the store of an initialised data directory; FailedPrecondition, saying to run
// "uplink-console init", when there is none.
Result<std::unique_ptr<SqliteStore>> OpenConsoleStore(const std::string& data_dir);

}  // namespace uplink::console
