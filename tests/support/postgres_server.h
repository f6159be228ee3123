// A real PostgreSQL 15 server for the PostgreSQL store's tests: Debian's initdb and postgres
// in a fresh temporary directory, reachable only on a Unix socket there, with the durability
// settings off (fsync, synchronous_commit, full_page_writes: a test's data may be lost in a
// power cut). When the tests run as root, as CI does, it runs as `nobody`: postgres refuses
// root. One server per test binary, since each test's database is a CREATE DATABASE away.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "support/process.h"

namespace uplink::testing {

class PostgresServer {
 public:
  // The server of this test binary, started on first use. Fails, saying to run `make deps`,
  // when PostgreSQL's binaries are missing.
  static Result<PostgresServer*> Shared();
  // A server of its own, from the binaries in `bin_dir` (Shared() uses Debian's).
  static Result<std::unique_ptr<PostgresServer>> Launch(const std::string& bin_dir);

  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // A new empty database; its URL, postgres:///NAME?host=DIR&user=USER, has no password.
  Result<std::string> NewDatabase();
  // The superuser's password (given apart from the URL, as the console's would be).
  const std::string& password() const { return password_; }
  const std::string& socket_dir() const { return dir_.path(); }

  // Stops the server (fast shutdown: every connection is closed) and starts it again on the
  // same data, as a database restart or fail-over would look to the console.
  Status Restart();
  // The server's own log, for failure messages.
  std::string Log() const;

 private:
  explicit PostgresServer(std::string bin_dir) : bin_dir_(std::move(bin_dir)) {}
  std::string Binary(const char* name) const { return bin_dir_ + "/" + name; }
  Status Start();
  Status Stop();
  // argv run as the server's user (nobody when this process is root).
  std::vector<std::string> AsServerUser(std::vector<std::string> argv) const;

  const std::string bin_dir_;
  TempDir dir_;
  std::string password_;
  std::optional<ChildProcess> postgres_;
  int databases_made_ = 0;
};

}  // namespace uplink::testing
