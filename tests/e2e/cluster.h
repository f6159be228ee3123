// A whole uplink deployment on loopback for end-to-end tests: simulated clusters, a console,
// agents. Every process is stopped and every file removed when the fixture goes away.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "net/client.h"
#include "support/process.h"

namespace uplink::e2e {

struct SimulatedCluster {
  std::string kubeconfig;
  std::string kube_system_uid;
  std::unique_ptr<testing::ChildProcess> process;
};

struct Connection {
  std::string id;
  std::string token;
};

class Deployment {
 public:
  Deployment();
  ~Deployment();

  const std::string& dir() const { return dir_.path(); }
  std::string bin(const std::string& name) const { return std::string(UPLINK_BIN_DIR) + "/" + name; }

  // A kubesim with `nodes` GPU nodes and the given kube-system UID.
  SimulatedCluster& StartCluster(const std::string& kube_system_uid, int nodes, int gpus_per_node);

  // `uplink-console init` + `serve` on a free loopback port; extra flags go to serve.
  void StartConsole(const std::vector<std::string>& serve_flags = {});
  // The console over HTTPS with a certificate from a private CA, whose PEM is written to
  // ca_file(); console_url() is then https://127.0.0.1:PORT.
  void StartTlsConsole();
  std::string ca_file() const { return dir() + "/console-ca.pem"; }
  void StopConsole();
  const std::string& console_url() const { return console_url_; }
  const std::string& admin_key() const { return admin_key_; }

  // User API helpers (admin key). Fail the test on transport errors.
  net::Response Api(const std::string& method, const std::string& path, const std::string& body = "");
  json::value ApiJson(const std::string& method, const std::string& path, const std::string& body = "");
  Connection CreateConnection(const std::string& cluster_name);

  // Writes `token` to a fresh file and returns its path.
  std::string WriteToken(const std::string& token);

  std::vector<std::string> AgentArgs(const SimulatedCluster& cluster, const std::string& token_file,
                                     int health_port) const;
  testing::CommandResult RunAgentOnce(const SimulatedCluster& cluster, const std::string& token_file);
  std::unique_ptr<testing::ChildProcess> StartAgent(const SimulatedCluster& cluster,
                                                    const std::string& token_file, int health_port);

  // Real kubectl against a simulated cluster, with a private HOME and discovery cache.
  testing::CommandResult Kubectl(const SimulatedCluster& cluster, std::vector<std::string> args);

  // GET on the agent's health server.
  int AgentProbe(int health_port, const std::string& path);

  // The `uplink` CLI against this console: `--console` is added, HOME and XDG_CONFIG_HOME
  // point into cli_home() (its credentials file is the test's own), UPLINK_* variables are
  // cleared unless `env` sets them, and it runs in a new session without a controlling
  // terminal (setsid), so it never waits at a prompt whoever runs the tests.
  testing::CommandResult Uplink(std::vector<std::string> args,
                                const std::map<std::string, std::string>& env = {},
                                const std::string& stdin_data = "");
  // The same, with a pseudo-terminal as its controlling terminal, stdin, stdout and stderr:
  // each time the output so far ends with dialogue[i].first, dialogue[i].second is typed.
  // `out` holds everything the terminal showed; `err` is empty.
  testing::CommandResult UplinkInTerminal(
      std::vector<std::string> args, const std::map<std::string, std::string>& env,
      const std::vector<std::pair<std::string, std::string>>& dialogue);
  // Any program (ssh, say) in the environment Uplink() gives the CLI.
  testing::CommandResult RunInCliEnvironment(std::vector<std::string> argv,
                                             const std::map<std::string, std::string>& env,
                                             const std::string& stdin_data,
                                             std::chrono::milliseconds timeout);
  std::string cli_home() const { return dir() + "/cli-home"; }
  pid_t console_pid() const;
  std::string cli_credentials_file() const {
    return cli_home() + "/.config/uplink/credentials.json";
  }

  // GET /api/v1/agent/whoami with an agent token: the HTTP status (-1 on transport failure).
  int AgentWhoami(const std::string& token);

 // The environment Uplink() runs the CLI in, plus `env`.
  std::vector<std::string> CliEnvironment(const std::map<std::string, std::string>& env);

 private:

  testing::TempDir dir_;
  std::deque<SimulatedCluster> clusters_;  // deque: StartCluster hands out references
  std::unique_ptr<testing::ChildProcess> console_;
  std::unique_ptr<net::HttpClient> client_;
  std::string console_url_;
  std::string admin_key_;
  int console_port_ = 0;
  int token_files_ = 0;
};

}  // namespace uplink::e2e
