// What the controller's end-to-end tests share: uplink-kubesim with the chart's namespace
// guards applied (rendered from charts/uplink-agent, as helm would), the console stand-in,
// and `uplink-agent workspace` as a child process against both.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "console_stand_in.h"
#include "kubesim_process.h"
#include "protocol/workspace.h"
#include "support/process.h"

namespace uplink::agent::workspace::testing {

inline constexpr char kCredential[] = "exe_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG";

struct ClusterOptions {
  std::string server_version = "1.35.0";
  std::string runtime = "process";
  std::string image = "localhost/uplink-workspace@sha256:" + std::string(64, 'a');
  int nodes = 2;
  int gpus_per_node = 4;
  int capacity_gpus = 4;
  std::int64_t max_lifetime_seconds = 3600;
  bool guards = true;
  std::string pod_start_delay = "0s";
  // Short sync, busy and expiry intervals so that tests move fast; false: the controller's
  // own defaults, as deployed (the bench).
  bool fast_loops = true;
};

class WorkspaceCluster {
 public:
  // Starts kubesim, writes execution.json, applies the guards (unless told not to) and
  // starts the console stand-in. Null (with the reason in `error`) when any step fails.
  static std::unique_ptr<WorkspaceCluster> Start(const ClusterOptions& options, std::string* error);
  // Starts kubesim alone, for a real console: the options' execution figures (image,
  // capacity, lifetime) are unused, Configure gives the console's values.
  static std::unique_ptr<WorkspaceCluster> StartKubesim(const ClusterOptions& options,
                                                       std::string* error);
  // Writes the execution values (execution.json's text) and the credential for the
  // controller, applies the guards the chart renders from those values (unless told not to)
  // and points the controller at `console_url`.
  Status Configure(const std::string& values_json, const std::string& credential,
                   const std::string& console_url);
  ~WorkspaceCluster();

  kubesim::testing::KubesimProcess& kubesim() { return *kubesim_; }
  // The stand-in; only after Start.
  ConsoleStandIn& console() { return *console_; }
  const std::string& config_path() const { return config_path_; }
  const std::string& ns() const { return ns_; }

  // The controller's argv (--config, --kubeconfig, --console, --token-file and, unless told
  // otherwise, fast loops), then `extra`.
  std::vector<std::string> ControllerArgv(const std::vector<std::string>& extra = {}) const;
  // Starts the controller (its argv then `extra`); stops a running one first.
  void StartController(const std::vector<std::string>& extra = {});
  // The running controller's /metrics text and /readyz status (0: no answer).
  std::string ControllerMetrics() const;
  int ControllerReadyz() const;
  // One sample of the controller's /metrics ("name" or "name{labels}"); -1 when absent.
  double ControllerMetric(const std::string& sample) const;
  // SIGTERM and wait; its exit code.
  int StopController();
  // The running controller's process id (-1 when none).
  pid_t ControllerPid() const;
  std::string ControllerLogs() const;
  // Runs the agent binary to its end (a refusal, drain).
  uplink::testing::CommandResult RunAgent(const std::vector<std::string>& args) const;

  // A reservation on the first node for `seconds` from now.
  protocol::WorkspaceReservation Reservation(const std::string& id, std::int64_t gpus,
                                             std::int64_t seconds) const;
  // kubectl get pod NAME -n NS -o jsonpath=PATH; "" when there is no such pod.
  std::string Pod(const std::string& name, const std::string& jsonpath) const;
  bool PodExists(const std::string& name) const;
  // kubectl delete pod NAME -n NS, as someone other than uplink would; false if kubectl failed.
  bool DeletePod(const std::string& name) const;
  // The same straight from the API server (no kubectl process): a few milliseconds, for
  // checks of what is there at the moment something else was observed. True on any answer
  // but 404.
  bool PodExistsNow(const std::string& name) const;
  std::vector<std::string> PodNames() const;

 private:
  WorkspaceCluster() = default;
  ClusterOptions options_;
  std::unique_ptr<uplink::testing::TempDir> dir_;
  std::unique_ptr<kubesim::testing::KubesimProcess> kubesim_;
  std::unique_ptr<ConsoleStandIn> console_;
  std::unique_ptr<uplink::testing::ChildProcess> controller_;
  std::string config_path_;
  std::string token_path_;
  std::string console_url_;
  std::string ns_ = "uplink-workspaces";
  int controller_starts_ = 0;
  int health_port_ = 0;
};

}  // namespace uplink::agent::workspace::testing
