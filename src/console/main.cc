// uplink-console: `init` creates a data directory and prints the first API key; `serve`
// runs the HTTPS API until SIGINT or SIGTERM.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/log.h"
#include "console/api/console_api.h"
#include "console/api/inventory_report.h"
#include "console/setup.h"
#include "net/server.h"

namespace uplink::console {
namespace {

const log::Logger& Log() {
  static const log::Logger logger("console");
  return logger;
}

int Fail(const Status& status) {
  Log().Error("uplink-console failed", {{"error", status}});
  return 1;
}

int Init(const std::vector<std::string>& args) {
  std::string data_dir;
  std::string admin_email = "admin@localhost";
  FlagSet flags("uplink-console init");
  flags.String("data-dir", &data_dir, "directory for the console's database (created, 0700)");
  flags.String("admin-email", &admin_email, "email of the first (admin) user");
  if (Status parsed = flags.Parse(args); !parsed.ok()) return Fail(parsed);
  auto key = InitializeConsole(data_dir, admin_email, SystemClock());
  if (!key.ok()) return Fail(key.status());
  // stdout carries the key and nothing else, so that scripts can capture it.
  std::cout << key->Reveal() << std::endl;
  Log().Info("console initialised; the API key above is shown only once",
             {{"data_dir", data_dir}, {"admin_email", admin_email}});
  return 0;
}

int Serve(const std::vector<std::string>& args) {
  std::string data_dir;
  std::string listen = "127.0.0.1:8443";
  std::string tls_cert;
  std::string tls_key;
  std::string log_level = "info";
  ConsoleOptions options;
  std::chrono::milliseconds stale_after = options.thresholds.stale_after;
  std::chrono::milliseconds offline_after = options.thresholds.offline_after;
  std::chrono::milliseconds report_interval = options.report_interval;
  FlagSet flags("uplink-console serve");
  flags.String("data-dir", &data_dir, "directory made by \"uplink-console init\"");
  flags.String("listen", &listen, "HOST:PORT to serve on");
  flags.String("tls-cert", &tls_cert, "PEM certificate chain (leaf first)");
  flags.String("tls-key", &tls_key, "PEM private key");
  flags.Duration("stale-after", &stale_after, "a connection silent this long is stale");
  flags.Duration("offline-after", &offline_after, "a connection silent this long is offline");
  flags.Duration("report-interval", &report_interval, "report interval told to agents (10s-1h)");
  flags.String("log-level", &log_level, "debug, info, warn or error");
  if (Status parsed = flags.Parse(args); !parsed.ok()) return Fail(parsed);
  if (Status level = log::SetMinLevel(log_level); !level.ok()) return Fail(level);

  if (report_interval < std::chrono::seconds(10) || report_interval > std::chrono::hours(1)) {
    return Fail(InvalidArgumentError("--report-interval must be between 10s and 1h"));
  }
  if (stale_after <= std::chrono::milliseconds(0) || offline_after <= stale_after) {
    return Fail(InvalidArgumentError(
        "--offline-after must be longer than --stale-after, and both positive"));
  }
  options.thresholds = {stale_after, offline_after};
  options.report_interval = std::chrono::duration_cast<std::chrono::seconds>(report_interval);

  std::string host;
  std::uint16_t port = 0;
  if (Status split = net::SplitHostPort(listen, host, port); !split.ok()) {
    return Fail(split.WithContext("--listen"));
  }
  net::ServerOptions server_options;
  server_options.listen = listen;
  // The upper bound, for the agent's report; every other route gets far less before its body
  // is read.
  server_options.max_body_bytes = kMaxReportBytes;
  server_options.body_limit_for = RequestBodyLimit;
  if (tls_cert.empty() != tls_key.empty()) {
    return Fail(InvalidArgumentError("pass both --tls-cert and --tls-key, or neither"));
  }
  if (!tls_cert.empty()) {
    auto tls = net::LoadTlsServerConfig(tls_cert, tls_key);
    if (!tls.ok()) return Fail(tls.status());
    server_options.tls = std::move(tls).value();
  } else if (!net::IsLoopbackHost(host)) {
    return Fail(InvalidArgumentError(
        "plain HTTP is allowed only on a loopback address, and " + host +
        " is not one; pass --tls-cert and --tls-key to serve HTTPS"));
  }

  auto store = OpenConsoleStore(data_dir);
  if (!store.ok()) return Fail(store.status());
  ConsoleApi api(**store, SystemClock(), options);

  // Block the stop signals before the server starts its threads, so that only sigwait below
  // receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = net::HttpServer::Start(server_options, api.router().AsHandler());
  if (!server.ok()) return Fail(server.status());
  std::string url_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  std::string url = std::string(server_options.tls ? "https" : "http") + "://" + url_host + ":" +
                    std::to_string((*server)->port());
  Log().Info("serving", {{"url", url}, {"data_dir", data_dir}});

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  Log().Info("shutting down", {{"signal", signal_number == SIGINT ? "SIGINT" : "SIGTERM"}});
  (*server)->Stop();
  return 0;
}

constexpr const char* kUsage =
    "usage: uplink-console init --data-dir DIR [--admin-email E]\n"
    "       uplink-console serve --data-dir DIR --listen HOST:PORT [--tls-cert F --tls-key F]\n"
    "                            [--stale-after 90s] [--offline-after 150s] "
    "[--report-interval 60s]\n";

}  // namespace
}  // namespace uplink::console

int main(int argc, char** argv) {
  using namespace uplink::console;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string command = args.front();
  args.erase(args.begin());
  if (command == "init") return Init(args);
  if (command == "serve") return Serve(args);
  if (command == "--version" || command == "version") {
    std::puts("uplink-console " UPLINK_VERSION);
    return 0;
  }
  std::fputs(kUsage, stderr);
  return 2;
}
