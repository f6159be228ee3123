#include "console/setup.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "common/crypto.h"
#include "console/auth/credentials.h"

namespace uplink::console {

std::string DatabasePath(const std::string& data_dir) { return data_dir + "/console.db"; }

Result<Secret> InitializeConsole(const std::string& data_dir, const std::string& admin_email,
                                 const Clock& clock) {
  if (data_dir.empty()) return InvalidArgumentError("--data-dir is required");
  if (admin_email.empty() || admin_email.size() > 254) {
    return InvalidArgumentError("--admin-email must be 1-254 characters long");
  }
  std::error_code error;
  std::filesystem::path parent = std::filesystem::path(data_dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (error) return IOError("creating " + parent.string() + ": " + error.message());
  // The leaf holds the credentials' hashes: owner only.
  if (::mkdir(data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoError("creating data directory " + data_dir, errno);
  }
  UPLINK_ASSIGN_OR_RETURN(auto store, SqliteStore::Open(DatabasePath(data_dir)));
  UPLINK_ASSIGN_OR_RETURN(std::int64_t users, store->CountUsers());
  if (users > 0) {
    return FailedPreconditionError(data_dir + " is already initialised; run \"uplink-console "
                                   "serve --data-dir " + data_dir + "\" instead");
  }
  WallTime now = clock.Now();
  User admin{HexEncode(RandomBytes(8)), admin_email, true, now};
  MintedCredential key = MintCredential(kApiKeyKind);
  UPLINK_RETURN_IF_ERROR(store->CreateUserWithApiKey(
      admin, ApiKey{HexEncode(RandomBytes(8)), admin.id, key.lookup_prefix, key.token_hash, now}));
  return std::move(key.token);
}

Result<std::unique_ptr<SqliteStore>> OpenConsoleStore(const std::string& data_dir) {
  if (data_dir.empty()) return InvalidArgumentError("--data-dir is required");
  std::string path = DatabasePath(data_dir);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return FailedPreconditionError("no console database at " + path +
                                   "; run \"uplink-console init --data-dir " + data_dir +
                                   "\" first");
  }
  UPLINK_ASSIGN_OR_RETURN(auto store, SqliteStore::Open(path));
  UPLINK_ASSIGN_OR_RETURN(std::int64_t users, store->CountUsers());
  if (users == 0) {
    return FailedPreconditionError(data_dir + " was never fully initialised; remove it and run "
                                   "\"uplink-console init --data-dir " + data_dir + "\"");
  }
  return store;
}

}  // namespace uplink::console
