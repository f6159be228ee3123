// The SQLite engine of the console store: one database file in WAL mode with synchronous=FULL
// and foreign keys on, opened without SQLite's own mutex (the store serialises its use).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "console/store/sql/database.h"

namespace uplink::console::sql {

// Creates the file (mode 0600) if needed.
Result<std::unique_ptr<Database>> OpenSqliteDatabase(const std::string& path);
// A read-only connection to the database file OpenSqliteDatabase made: in WAL mode its reads
// see the last committed state and neither wait for the writer nor hold it back.
Result<std::unique_ptr<Database>> OpenSqliteReader(const std::string& path);

}  // namespace uplink::console::sql
