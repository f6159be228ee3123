// Running `uplink` in-process against a scripted console, a scripted terminal and a fake
// clock, with a private HOME, so each test sees exactly what a person would.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/terminal.h"
#include "common/json.h"
#include "common/time.h"
#include "net/http.h"
#include "net/server.h"
#include "support/process.h"

namespace uplink::cli::testing {

// An HTTP server on loopback answering from a table of routes; every request is recorded.
// Unknown routes answer 404 with the console's error shape.
class FakeConsole {
 public:
  using Handler = std::function<net::Response(const net::Request&)>;

  FakeConsole();
  ~FakeConsole();

  std::string url() const;
  // Routes match the method and the decoded path without the query. A later On() for the
  // same route replaces the earlier one.
  void On(const std::string& method, const std::string& path, Handler handler);
  void OnJson(const std::string& method, const std::string& path, int status, std::string body);
  void OnJson(const std::string& method, const std::string& path, int status,
              const json::object& body);

  std::vector<net::Request> requests() const;
  std::vector<net::Request> RequestsTo(const std::string& method, const std::string& path) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Handler> routes_;
  std::vector<net::Request> requests_;
  std::unique_ptr<net::HttpServer> server_;
};

// The console's error reply.
net::Response ErrorReply(int status, const std::string& code, const std::string& message);

// A connection object as the console sends it.
json::object ConnectionJson(const std::string& id, const std::string& cluster,
                            const std::string& status = "never");

class FakeTerminal : public Terminal {
 public:
  bool available = false;
  std::deque<std::string> answers;
  std::vector<std::string> prompts;
  std::string shown;  // everything Show() was given

  bool Available() override { return available; }
  Result<Secret> ReadSecret(std::string_view prompt) override;
  Result<std::string> ReadLine(std::string_view prompt) override;
  Status Show(std::string_view text) override;
};

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
};

class Cli {
 public:
  Cli();

  const std::string& home() const { return home_.path(); }
  std::string credentials_path() const { return home() + "/.config/uplink/credentials.json"; }
  // Writes a credentials file as `uplink login` would (mode 0600).
  void StoreCredential(const std::string& console, const std::string& credential,
                       const std::string& kind, const std::string& expires_at = "");

  CliResult Run(std::vector<std::string> args, const std::string& stdin_data = "");
  // With standard input and output as these file descriptors (as `uplink ssh proxy` uses
  // them; the stream `out` stays empty) and stderr collected.
  CliResult RunOnFds(std::vector<std::string> args, int in_fd, int out_fd);

  std::map<std::string, std::string> env;  // the whole environment the CLI sees
  FakeTerminal terminal;
  FakeClock clock;

 private:
  CliResult RunWith(std::vector<std::string> args, const std::string& stdin_data, int in_fd,
                    int out_fd);

  uplink::testing::TempDir home_;
};

}  // namespace uplink::cli::testing
