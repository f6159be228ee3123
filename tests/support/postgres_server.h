// A real PostgreSQL 15 server for the PostgreSQL store's tests: Debian's initdb and postgres
// in a fresh temporary directory, reachable only on a Unix socket there, with the durability
// settings off (fsync, synchronous_commit, full_page_writes: a test's data may be lost in a
// power cut) unless launched kDurable, as the load test's figures need. When the tests run as root, as CI does, it runs as `nobody`: postgres refuses
// root.
//
// Under ctest one server serves the whole run (the `postgres` fixture: uplink_test_postgres
// starts it before the first test that needs it and stops it after the last; each test is a
// process of its own, and initdb takes seconds); a test binary run by hand starts its own.
// Each test takes a database of its own, a CREATE DATABASE away.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "support/process.h"

namespace uplink::testing {

inline constexpr const char* kDebianPostgresBinDir = "/usr/lib/postgresql/15/bin";

class PostgresServer {
 public:
  // kFast: fsync, synchronous_commit and full_page_writes off (tests); kDurable: PostgreSQL's
  // defaults, every commit flushed before it returns (benchmarks that compare with SQLite's).
  enum class Durability { kFast, kDurable };

  // The run's server when $UPLINK_TEST_POSTGRES_DIR names one (see Serve), else this test
  // binary's own, started on first use. Fails, saying to run `make deps`, when PostgreSQL's
  // binaries are missing.
  static Result<PostgresServer*> Shared();
  // A server of its own in a temporary directory, from the binaries in `bin_dir` (Shared()
  // uses Debian's). Tests that restart the server use one, not the shared one.
  static Result<std::unique_ptr<PostgresServer>> Launch(const std::string& bin_dir,
                                                        Durability durability = Durability::kFast);
  // The server a test uses: one of its own, kept in `own`, when the test restarts it (the run's
  // is shared by tests running at the same time), else Shared().
  static Result<PostgresServer*> ForTest(bool restarts_it, std::unique_ptr<PostgresServer>& own);
  // A server in `dir` (created) from Debian's binaries, for other processes to attach to:
  // writes `dir`/password once it answers.
  static Result<std::unique_ptr<PostgresServer>> Serve(const std::string& dir);

  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // A new empty database; its URL, postgres:///NAME?host=DIR&user=USER, has no password.
  // Its name is unique across the processes that share the server.
  Result<std::string> NewDatabase();
  // Drops a database NewDatabase made (and ends its sessions).
  Status DropDatabase(const std::string& url);
  // The superuser's password (given apart from the URL, as the console's would be).
  const std::string& password() const { return password_; }
  const std::string& socket_dir() const { return dir_; }

  // Stops the server (fast shutdown: every connection is closed) and starts it again on the
  // same data, as a database restart or fail-over would look to the console. Only for a
  // server this process started.
  Status Restart();
  // The server's own log, for failure messages.
  std::string Log() const;

 private:
  PostgresServer(std::string bin_dir, std::unique_ptr<TempDir> temp_dir, std::string dir,
                 Durability durability = Durability::kFast)
      : bin_dir_(std::move(bin_dir)),
        temp_dir_(std::move(temp_dir)),
        dir_(std::move(dir)),
        durability_(durability) {}
  // The server another process serves from `dir` (see Serve).
  static Result<std::unique_ptr<PostgresServer>> Attach(const std::string& dir);
  std::string Binary(const char* name) const { return bin_dir_ + "/" + name; }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  // Runs `sql` as the superuser in the `postgres` database.
  Status Admin(const std::string& sql);
  Status Start();
  Status Stop();
  // argv run as the server's user (nobody when this process is root).
  std::vector<std::string> AsServerUser(std::vector<std::string> argv) const;

  const std::string bin_dir_;
  std::unique_ptr<TempDir> temp_dir_;  // removed with this object; none for Serve and Attach
  std::string dir_;
  const Durability durability_;
  std::string password_;
  std::optional<ChildProcess> postgres_;
  int databases_made_ = 0;
};

}  // namespace uplink::testing
