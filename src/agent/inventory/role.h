// The inventory role: every interval, list the selected nodes, report them to the console
// and record the outcome in the agent's own status ConfigMap.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "agent/console_client.h"
#include "agent/health.h"
#include "agent/inventory/report.h"
#include "agent/stop_signal.h"
#include "common/backoff.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "kube/client.h"

namespace uplink::agent::inventory {

struct RoleOptions {
  std::string selector = "nvidia.com/gpu.present=true";
  // Which agent this is, so the console can show each one (the pod's name).
  std::string instance;
  std::string status_configmap;  // empty: no status ConfigMap is kept
  std::string status_namespace;
  std::chrono::seconds interval{60};           // until the console says otherwise
  // /readyz fails once the last accepted report is older than the larger of this and 2.5
  // report intervals, so a long interval set by the console does not flap readiness.
  std::chrono::seconds max_report_age{150};
  std::chrono::seconds min_interval{10};       // bounds on the console's interval
  std::chrono::seconds max_interval{3600};
};

struct CycleResult {
  Status status;                       // ok when the console accepted the report
  std::chrono::milliseconds next_wait; // until the next cycle
};

// Declares the role's metric families in `registry`.
void DeclareMetrics(metrics::Registry& registry);

class InventoryRole {
 public:
  InventoryRole(RoleOptions options, kube::KubeClient& kube, ConsoleClient& console,
                Clock& clock, metrics::Registry& registry, Backoff backoff = Backoff());

  // One cycle: read the cluster, post the report, update the status ConfigMap. Never throws
  // and never gives up; the result says how long to wait before the next one.
  CycleResult RunCycle();

  // Cycles until `stop` is signalled; the wait between cycles ends at once on a stop.
  void Run(StopSignal& stop);

  // Thread-safe; for /readyz.
  Readiness CheckReadiness() const;

  // How old the last accepted report may be before /readyz fails: max(150 s, 2.5 x interval).
  std::chrono::milliseconds ReadinessLimit() const;

  std::chrono::seconds interval() const;

 private:
  Result<std::string> ClusterUid();
  std::chrono::milliseconds ReadinessLimitLocked() const;  // needs mutex_
  void RecordFailure(const Status& status, std::string_view result, bool refused);
  // Merge-patches the status ConfigMap; without a summary (the cluster could not be read) the
  // nodes and gpus keys keep their previous values.
  void UpdateStatusConfigMap(const std::optional<ReportSummary>& summary);

  RoleOptions options_;
  kube::KubeClient& kube_;
  ConsoleClient& console_;
  Clock& clock_;
  metrics::Registry& metrics_;
  Backoff backoff_;
  log::Logger log_{"agent.inventory"};
  std::string cluster_uid_;  // kube-system's UID never changes; read once

  mutable std::mutex mutex_;  // guards the fields below (read by health threads)
  std::chrono::seconds interval_;
  std::optional<SteadyTime> last_accepted_;
  std::optional<WallTime> last_accepted_wall_;
  std::string last_error_;     // empty after an accepted report
  bool refused_ = false;       // the console refused the credential or the cluster binding
};

}  // namespace uplink::agent::inventory
