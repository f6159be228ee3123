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

// Creates the directory (mode 0700) and the database, the first (admin) user and an API key
// for it, which is returned: the only time it exists outside its hash. FailedPrecondition if
// the directory already holds an initialised console.
Result<Secret> InitializeConsole(const std::string& data_dir, const std::string& admin_email,
                                 const Clock& clock);

// Opens the store of an initialised data directory; FailedPrecondition, saying to run
// "uplink-console init", when there is none.
Result<std::unique_ptr<SqliteStore>> OpenConsoleStore(const std::string& data_dir);

}  // namespace uplink::console
