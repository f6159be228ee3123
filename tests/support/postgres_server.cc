#include "support/postgres_server.h"

#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/crypto.h"

namespace uplink::testing {
namespace {

constexpr const char* kSuperuser = "uplink";

// Unreserved characters and '/' as they are; the rest %-escaped (a socket directory is a
// path, which may hold anything).
std::string PercentEncode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      char escape[4];
      std::snprintf(escape, sizeof escape, "%%%02X", c);
      out += escape;
    }
  }
  return out;
}

}  // namespace

Result<PostgresServer*> PostgresServer::Shared() {
  static Result<std::unique_ptr<PostgresServer>> server = [] {
    const char* run_dir = std::getenv("UPLINK_TEST_POSTGRES_DIR");
    return run_dir && *run_dir ? Attach(run_dir) : Launch(kDebianPostgresBinDir);
  }();
  if (!server.ok()) return server.status();
  return server->get();
}

Result<PostgresServer*> PostgresServer::ForTest(bool restarts_it,
                                               std::unique_ptr<PostgresServer>& own) {
  if (!restarts_it) return Shared();
  UPLINK_ASSIGN_OR_RETURN(own, Launch(kDebianPostgresBinDir));
  return own.get();
}

Result<std::unique_ptr<PostgresServer>> PostgresServer::Launch(const std::string& bin_dir,
                                                              Durability durability) {
  auto temp = std::make_unique<TempDir>();
  std::string dir = temp->path();
  std::unique_ptr<PostgresServer> server(
      new PostgresServer(bin_dir, std::move(temp), dir, durability));
  UPLINK_RETURN_IF_ERROR(server->Start());
  return server;
}

Result<std::unique_ptr<PostgresServer>> PostgresServer::Serve(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return IOError("creating " + dir + ": " + error.message());
  std::unique_ptr<PostgresServer> server(new PostgresServer(kDebianPostgresBinDir, nullptr, dir));
  UPLINK_RETURN_IF_ERROR(server->Start());
  WriteFileOrDie(server->File("password"), server->password_);
  return server;
}

Result<std::unique_ptr<PostgresServer>> PostgresServer::Attach(const std::string& dir) {
  std::unique_ptr<PostgresServer> server(new PostgresServer(kDebianPostgresBinDir, nullptr, dir));
  server->password_ = ReadFileOrEmpty(server->File("password"));
  if (server->password_.empty()) {
    return FailedPreconditionError("UPLINK_TEST_POSTGRES_DIR=" + dir +
                                   " holds no running test server (no password file): run the "
                                   "tests with ctest, which starts it, or unset the variable");
  }
  return server;
}

PostgresServer::~PostgresServer() { (void)Stop(); }

std::vector<std::string> PostgresServer::AsServerUser(std::vector<std::string> argv) const {
  if (::geteuid() != 0) return argv;
  const passwd* nobody = ::getpwnam("nobody");
  std::vector<std::string> wrapped = {"/usr/bin/setpriv",
                                      "--reuid=" + std::to_string(nobody->pw_uid),
                                      "--regid=" + std::to_string(nobody->pw_gid),
                                      "--clear-groups", "--"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

Status PostgresServer::Start() {
  const bool initialised = std::filesystem::exists(File("data/PG_VERSION"));
  if (!initialised) {
    for (const char* name : {"initdb", "postgres"}) {
      if (::access(Binary(name).c_str(), X_OK) != 0) {
        return FailedPreconditionError(
            "PostgreSQL 15's server is not installed (" + Binary(name) +
            " is missing): run `make deps`, which installs Debian's postgresql-15");
      }
    }
    if (::geteuid() == 0) {
      // postgres refuses to run as root; as `nobody` it needs the directory for its own.
      const passwd* nobody = ::getpwnam("nobody");
      if (nobody == nullptr) return FailedPreconditionError("there is no user `nobody` to run postgres as");
      if (::chown(dir_.c_str(), nobody->pw_uid, nobody->pw_gid) != 0) {
        return ErrnoError("chown " + dir_, errno);
      }
    }
    password_ = HexEncode(RandomBytes(16));
    const std::string password_file = File("password");
    WriteFileOrDie(password_file, password_ + "\n", 0644);
    CommandResult initdb = RunCommand(
        AsServerUser({Binary("initdb"), "--pgdata=" + File("data"), "--username", kSuperuser,
                      "--pwfile=" + password_file, "--auth=scram-sha-256", "--encoding=UTF8",
                      "--no-locale", "--no-sync", "--no-instructions"}),
        std::chrono::minutes(2));
    std::filesystem::remove(password_file);
    if (initdb.exit_code != 0) {
      return InternalError("initdb failed (exit " + std::to_string(initdb.exit_code) +
                           "): " + initdb.out + initdb.err);
    }
  }
  // Only a Unix socket in the test's directory: nothing else on the machine can reach it.
  std::vector<std::string> argv = {Binary("postgres"), "-D", File("data"), "-c",
                                   "listen_addresses=", "-c", "unix_socket_directories=" + dir_,
                                   "-c", "max_connections=200", "-c", "shared_buffers=32MB"};
  if (durability_ == Durability::kFast) {
    for (const char* setting : {"fsync=off", "synchronous_commit=off", "full_page_writes=off"}) {
      argv.insert(argv.end(), {"-c", setting});
    }
  }
  postgres_.emplace(AsServerUser(std::move(argv)), dir_);
  const std::string ping = "host=" + dir_ + " dbname=postgres user=" + kSuperuser;
  bool ready = WaitFor(
      [&] { return !postgres_->Running() || PQping(ping.c_str()) == PQPING_OK; },
      std::chrono::minutes(1));
  if (!ready || !postgres_->Running()) {
    return InternalError("postgres did not start; its log: " + Log());
  }
  return Status::Ok();
}

Status PostgresServer::Stop() {
  if (!postgres_) return Status::Ok();
  // SIGINT, postgres's fast shutdown: it ends every session rather than waiting for the
  // clients to leave, as SIGTERM would.
  ::kill(postgres_->pid(), SIGINT);
  std::optional<int> exit_code = postgres_->Wait(std::chrono::minutes(1));
  postgres_.reset();  // SIGTERM, then SIGKILL, if it had not stopped
  if (!exit_code) return InternalError("postgres did not stop within a minute of SIGINT");
  return Status::Ok();
}

Status PostgresServer::Restart() {
  if (!postgres_) return FailedPreconditionError("only a server this process started restarts");
  UPLINK_RETURN_IF_ERROR(Stop());
  return Start();
}

std::string PostgresServer::Log() const { return postgres_ ? postgres_->Stderr() : ""; }

Status PostgresServer::Admin(const std::string& sql) {
  const char* keywords[] = {"host", "dbname", "user", "password", nullptr};
  const char* values[] = {dir_.c_str(), "postgres", kSuperuser, password_.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, 0);
  Status status = Status::Ok();
  if (PQstatus(conn) != CONNECTION_OK) {
    status = UnavailableError(std::string("connecting to the test server: ") + PQerrorMessage(conn));
  } else {
    PGresult* result = PQexec(conn, sql.c_str());
    if (PQresultStatus(result) != PGRES_COMMAND_OK) {
      status = InternalError(sql + ": " + PQerrorMessage(conn));
    }
    PQclear(result);
  }
  PQfinish(conn);
  return status;
}

Result<std::string> PostgresServer::NewDatabase() {
  // The process id keeps names apart between the test processes sharing a server.
  const std::string name = "uplink_test_" + std::to_string(::getpid()) + "_" +
                           std::to_string(++databases_made_);
  UPLINK_RETURN_IF_ERROR(Admin("CREATE DATABASE " + name));
  return "postgres:///" + name + "?host=" + PercentEncode(dir_) + "&user=" + kSuperuser;
}

Status PostgresServer::DropDatabase(const std::string& url) {
  const size_t start = url.find(":///");
  const size_t end = url.find('?');
  if (start == std::string::npos || end == std::string::npos || end < start + 4) {
    return InvalidArgumentError("not a URL NewDatabase made");
  }
  return Admin("DROP DATABASE IF EXISTS " + url.substr(start + 4, end - start - 4) +
               " WITH (FORCE)");
}

}  // namespace uplink::testing
