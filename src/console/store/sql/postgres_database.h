// The PostgreSQL engine of the SQL store (libpq): the scale path, where several console
// replicas share one database. See database.h for the contract it keeps.
//
// How it maps the contract onto PostgreSQL:
// - `?` parameters are numbered $1..$n (not inside '...' or E'...' literals, "..."
//   identifiers, $tag$...$tag$ bodies or comments).
// - A statement is prepared on the server (PQprepare) at its first Step() with the types of
//   its bindings: int64 as int8, double as float8, blobs as bytea (all three sent in binary),
//   text and NULL as `unknown`, which PostgreSQL resolves to the column's type. A statement
//   later bound with other types is prepared once more under another name.
// - Results come back as text: booleans read as 1/0 through Int(), numerics (SUM and AVG of
//   bigints) parse as integers, bytea columns are decoded from their hex form.
// - BeginWrite() is BEGIN plus a transaction-scoped advisory lock that every replica takes,
//   so writes serialise as under SQLite's BEGIN IMMEDIATE, waiting at most 5 s (kBusy after).
// - A lost connection fails the call that finds it (kUnavailable); the next call reconnects
//   and prepares its statements again, when the store's ReconnectGate lets it try now.
// - A statement whose answer does not come within PostgresOptions::answer_timeout fails with
//   kUnavailable, and its connection is given up (the socket shut) and made again by the next
//   call; a transaction it was in is lost, as when the connection breaks. Deferred statements
//   (pipeline mode) are held to the same bound between one answer and the next. Queries are sent on
//   a nonblocking connection, so that a server that stops reading cannot hold the sender
//   either. Schema migrations (ExecUnbounded) have no limit.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "console/store/sql/database.h"

struct pg_conn;  // libpq's PGconn

namespace uplink::console::sql {

// Where the store's PostgreSQL database is: a libpq URL that carries no password, and the
// password when it was given apart (--store-password-file). Without one, libpq reads
// PGPASSWORD or the PGPASSFILE (~/.pgpass) itself.
struct PostgresLocation {
  std::string url;
  std::optional<std::string> password;
};

// Accepts postgres:// and postgresql:// URLs (libpq's form; the host may be empty, with
// ?host=/socket/dir). Refuses a URL with a password in it, since a URL is seen in process
// lists, shell history and logs; the error never repeats any part of the URL.
Result<PostgresLocation> ParsePostgresLocation(std::string_view url);

class ReconnectGate;

struct PostgresOptions {
  // The longest a statement waits for the server. Every caller of the store (an agent's
  // upload, a user's request) has given up well before: the agent's exchange times out at
  // 10 s, 30 s with a body.
  std::chrono::milliseconds answer_timeout{15'000};
  // Shared by the connections of one store; null: a gate of this connection's own.
  std::shared_ptr<ReconnectGate> reconnect_gate;
};

// Connects (application_name uplink-console, a 10 s connect timeout and TCP keepalives unless
// the URL sets them). Fails with kUnavailable when the server cannot be reached or refuses the
// login.
Result<std::unique_ptr<Database>> OpenPostgresDatabase(const PostgresLocation& where,
                                                       PostgresOptions options = {});

// A libpq connection of its own (the replica bus's LISTEN), made as the store's is; closed
// with PQfinish when the pointer goes.
struct PgConnectionClose {
  void operator()(pg_conn* conn) const;
};
using PgConnection = std::unique_ptr<pg_conn, PgConnectionClose>;
Result<PgConnection> ConnectPostgres(const PostgresLocation& where,
                                     const char* application_name = "uplink-console");

// The message of a failed libpq call on one line, without DETAIL (which may quote a row).
std::string OneLinePostgresMessage(std::string_view text);

// The SQL with its `?` parameters numbered $1..$n, and n. Exposed for tests.
struct NumberedSql {
  std::string sql;
  int parameters = 0;
};
NumberedSql NumberParameters(std::string_view sql);

}  // namespace uplink::console::sql
