#include "agent/inventory/role.h"

#include <algorithm>

#include "agent/kube_system_uid.h"
#include "common/json.h"
#include "protocol/agent_api.h"
#include "protocol/inventory.h"

namespace uplink::agent::inventory {
namespace {

constexpr char kReports[] = "uplink_agent_reports_total";
constexpr char kLastSuccess[] = "uplink_agent_last_report_success_timestamp_seconds";
constexpr char kNodes[] = "uplink_agent_nodes";
constexpr char kNodeErrors[] = "uplink_agent_node_errors";
constexpr char kGpus[] = "uplink_agent_gpus";
constexpr char kKubeErrors[] = "uplink_agent_kube_request_errors_total";
constexpr char kInterval[] = "uplink_agent_report_interval_seconds";

}  // namespace

void DeclareMetrics(metrics::Registry& registry) {
  registry.DeclareCounter(kReports,
                          "Inventory cycles by result: accepted, refused (console 4xx), failed "
                          "(console unreachable, 3xx, 5xx or garbage), kube_error");
  registry.DeclareGauge(kLastSuccess, "Unix time of the last report the console accepted");
  registry.DeclareGauge(kNodes, "Nodes in the last report");
  registry.DeclareGauge(kNodeErrors, "Nodes in the last report that carried an error");
  registry.DeclareGauge(kGpus, "GPUs (main GPU resource capacity) in the last report");
  registry.DeclareCounter(kKubeErrors, "Kubernetes API calls that failed, by call");
  registry.DeclareGauge(kInterval, "Current report interval");
}

InventoryRole::InventoryRole(RoleOptions options, kube::KubeClient& kube, ConsoleClient& console,
                             Clock& clock, metrics::Registry& registry, Backoff backoff)
    : options_(std::move(options)),
      kube_(kube),
      console_(console),
      clock_(clock),
      metrics_(registry),
      backoff_(std::move(backoff)),
      interval_(options_.interval) {
  metrics_.Set(kInterval, static_cast<double>(interval_.count()));
}

std::chrono::seconds InventoryRole::interval() const {
  std::lock_guard lock(mutex_);
  return interval_;
}

Result<std::string> InventoryRole::ClusterUid() {
  if (!cluster_uid_.empty()) return cluster_uid_;
  auto uid = ReadKubeSystemUid(kube_);
  if (!uid.ok()) {
    metrics_.Increment(kKubeErrors, {{"call", "get_namespace"}});
    return uid.status();
  }
  cluster_uid_ = std::move(uid).value();
  // Every later call names the cluster, not only the report's body.
  console_.SetClusterUid(cluster_uid_);
  return cluster_uid_;
}

void InventoryRole::RecordFailure(const Status& status, std::string_view result, bool refused) {
  metrics_.Increment(kReports, {{"result", result}});
  std::lock_guard lock(mutex_);
  last_error_ = status.ToString();
  if (refused) refused_ = true;
}

CycleResult InventoryRole::RunCycle() {
  auto fail = [&](const Status& status, std::string_view result, bool refused,
                  std::optional<std::chrono::milliseconds> retry_after, int http_status) {
    RecordFailure(status, result, refused);
    auto wait = backoff_.NextDelay(retry_after);
    log_.Warn("inventory cycle failed", {{"result", result},
                                         {"error", status},
                                         {"http_status", http_status},
                                         {"retry_in_ms", wait.count()},
                                         {"consecutive_failures", backoff_.failures()}});
    return CycleResult{status, wait};
  };

  auto uid = ClusterUid();
  if (!uid.ok()) {
    auto cycle = fail(uid.status(), "kube_error", false, std::nullopt, 0);
    UpdateStatusConfigMap(std::nullopt);
    return cycle;
  }
  ReportBuilder builder;
  auto nodes = kube_.ListNodes(
      options_.selector,
      [&](json::array& page) {
        for (const json::value& node : page) builder.Add(node);
      },
      [&] { builder.Clear(); });
  if (!nodes.ok()) {
    metrics_.Increment(kKubeErrors, {{"call", "list_nodes"}});
    auto cycle = fail(nodes.status().WithContext("listing the selected nodes"), "kube_error", false,
                      std::nullopt, 0);
    UpdateStatusConfigMap(std::nullopt);
    return cycle;
  }
  Report report = std::move(builder).Finish(*uid, options_.selector, clock_.Now());
  report.message.agent_instance = options_.instance;
  metrics_.Set(kNodes, static_cast<double>(report.summary.nodes));
  metrics_.Set(kNodeErrors, static_cast<double>(report.summary.nodes_with_errors));
  metrics_.Set(kGpus, static_cast<double>(report.summary.gpus));
  if (report.summary.nodes_with_errors > 0) {
    log_.Warn("some nodes could not be read; they are reported with an error",
              {{"nodes_with_errors", report.summary.nodes_with_errors}});
  }

  ConsoleReply reply =
      console_.PostJson(protocol::kInventoryPath, protocol::EncodeInventoryReport(report.message));
  protocol::InventoryReply accepted = protocol::DecodeInventoryReply(reply.body);
  if (reply.status.ok() && !accepted.accepted) {
    reply.status = UnavailableError("the console answered " + std::to_string(reply.http_status) +
                                    " without \"accepted\": true");
  }
  if (!reply.status.ok()) {
    // 401/403/409 mean this credential or cluster binding is refused: not ready at once.
    bool refused = reply.http_status == 401 || reply.http_status == 403 || reply.http_status == 409;
    std::string_view result =
        reply.http_status >= 400 && reply.http_status <= 499 ? "refused" : "failed";
    auto cycle = fail(reply.status, result, refused, reply.retry_after, reply.http_status);
    if (refused) {
      std::lock_guard lock(mutex_);
      last_error_ = reply.error_code.empty() ? reply.status.message() : reply.error_code;
    }
    UpdateStatusConfigMap(report.summary);
    return cycle;
  }

  std::chrono::seconds interval;
  {
    std::lock_guard lock(mutex_);
    if (accepted.report_interval_seconds) {
      interval_ = std::clamp(std::chrono::seconds(*accepted.report_interval_seconds),
                             options_.min_interval, options_.max_interval);
    }
    interval = interval_;
    last_accepted_ = clock_.SteadyNow();
    last_accepted_wall_ = clock_.Now();
    last_error_.clear();
    refused_ = false;
  }
  backoff_.Reset();
  metrics_.Increment(kReports, {{"result", "accepted"}});
  metrics_.Set(kLastSuccess, static_cast<double>(ToUnixSeconds(clock_.Now())));
  metrics_.Set(kInterval, static_cast<double>(interval.count()));
  log_.Info("inventory report accepted", {{"nodes", report.summary.nodes},
                                          {"gpus", report.summary.gpus},
                                          {"pages", nodes->pages},
                                          {"next_in_s", interval.count()}});
  UpdateStatusConfigMap(report.summary);
  return CycleResult{Status::Ok(), interval};
}

void InventoryRole::UpdateStatusConfigMap(const std::optional<ReportSummary>& summary) {
  if (options_.status_configmap.empty()) return;
  json::object data{{"mode", "inventory"}, {"qualification", "not-performed"}};
  if (summary) {
    data["nodes"] = std::to_string(summary->nodes);
    data["gpus"] = std::to_string(summary->gpus);
  }
  {
    std::lock_guard lock(mutex_);
    data["lastReportAt"] = last_accepted_wall_ ? FormatRfc3339(*last_accepted_wall_) : "";
    data["lastError"] = last_error_;
  }
  std::optional<WallTime> expires_at = console_.token_expires_at();
  data["expiresAt"] = expires_at ? FormatRfc3339(*expires_at) : "";
  // The node role has no Kubernetes access: it reads this key from the ConfigMap the kubelet
  // mounts for it, to name the cluster on its own calls (docs/security.md).
  if (!cluster_uid_.empty()) data["clusterUID"] = cluster_uid_;
  Status patched = kube_.MergePatchConfigMap(options_.status_namespace, options_.status_configmap,
                                             json::object{{"data", std::move(data)}});
  if (!patched.ok()) {
    // The ConfigMap is a convenience for people looking at the cluster; never stop over it.
    metrics_.Increment(kKubeErrors, {{"call", "patch_configmap"}});
    log_.Warn("could not update the status ConfigMap",
              {{"configmap", options_.status_namespace + "/" + options_.status_configmap},
               {"error", patched}});
  }
}

std::chrono::milliseconds InventoryRole::ReadinessLimit() const {
  std::lock_guard lock(mutex_);
  return ReadinessLimitLocked();
}

std::chrono::milliseconds InventoryRole::ReadinessLimitLocked() const {
  // Two and a half intervals: one late cycle plus a retry still counts as live.
  auto intervals = std::chrono::duration_cast<std::chrono::milliseconds>(interval_) * 5 / 2;
  return std::max<std::chrono::milliseconds>(options_.max_report_age, intervals);
}

Readiness InventoryRole::CheckReadiness() const {
  std::lock_guard lock(mutex_);
  if (refused_) return {false, "last report refused: " + last_error_};
  if (!last_accepted_) {
    return {false, last_error_.empty() ? "no report accepted yet"
                                       : "no report accepted yet; last error: " + last_error_};
  }
  auto age = clock_.SteadyNow() - *last_accepted_;
  if (age >= ReadinessLimitLocked()) {
    std::string reason =
        "last accepted report is " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(age).count()) + " s old";
    if (!last_error_.empty()) reason += "; last error: " + last_error_;
    return {false, reason};
  }
  return {true, ""};
}

void InventoryRole::Run(StopSignal& stop) {
  while (!stop.stopped()) {
    CycleResult cycle = RunCycle();
    if (!stop.WaitFor(cycle.next_wait)) return;
  }
}

}  // namespace uplink::agent::inventory
