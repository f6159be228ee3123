// The node role: every interval, read the host and the GPUs under the console's plan, append
// the sample to the spool (the shipper delivers it), and keep it for /metrics.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "agent/health.h"
#include "agent/node/gpu/gpu_collector.h"
#include "agent/node/host/host_collector.h"
#include "agent/node/sample.h"
#include "agent/stop_signal.h"
#include "common/json_fwd.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "protocol/plans.h"
#include "spool/spool.h"

namespace uplink::agent::node {

// What to collect and how often; the console sends it in its upload replies
// (protocol/plans.h), within protocol::kMinPlanInterval..kMaxPlanInterval.
struct NodePlan {
  std::chrono::seconds interval = protocol::kDefaultPlanInterval;
  CollectorSet collectors = CollectorSet::All();
  friend bool operator==(const NodePlan&, const NodePlan&) = default;
};

// The plan in an upload reply (docs/protocol.md, "The collection plan in the upload reply"):
// nullopt when the reply carries none; InvalidArgument for one out of its bounds. Collector
// names this agent does not know are ignored, so an older agent takes a newer console's plan.
Result<std::optional<NodePlan>> PlanFromReply(const json::value& reply);

// "cpu,memory,gpu" as typed on the command line; an unknown name is an error.
Result<CollectorSet> ParseCollectorList(std::string_view list);

// Declares the role's metric families in `registry`.
void DeclareNodeMetrics(metrics::Registry& registry);

struct NodeRoleOptions {
  std::string node_name;
  NodePlan plan;  // until the console sends one
};

class NodeRole {
 public:
  // `gpus` may be null (GPUs not collected at all). Everything passed must outlive the role;
  // DeclareNodeMetrics must have been called on `registry`.
  NodeRole(NodeRoleOptions options, HostCollector& host, GpuCollector* gpus, Clock& clock,
           metrics::Registry& registry);

  // One collection under the current plan; the GPU figures are the GPU collector's latest
  // (read on its own fixed interval, never here). Thread-safe: collections run one at a time.
  NodeSample Collect();

  // Collects, and appends the sample to `spool` as a node_sample payload. The error is the
  // spool's (a full disk): the sample is lost, counted, and the next cycle tries again.
  Status CollectAndSpool(spool::Spool& spool);

  // Collects into the spool at once and then every plan interval, until `stop`.
  void Run(spool::Spool& spool, StopSignal& stop);

  // Takes the plan from an upload reply. A malformed plan is logged and the current one kept.
  void TakePlanFrom(const json::value& reply);
  NodePlan plan() const;

  // The latest collection as Prometheus text (nothing before the first collection).
  void AppendLatest(std::string& out) const;

  // Ready when the last collection read the host's CPU and memory (when asked for) and, once
  // spooling, when a sample was spooled within max(150 s, 2.5 intervals). Thread-safe.
  Readiness CheckReadiness() const;

 private:
  NodeRoleOptions options_;
  HostCollector& host_;
  GpuCollector* const gpus_;
  Clock& clock_;
  metrics::Registry& metrics_;
  log::Logger log_{"agent.node"};

  std::mutex collect_mutex_;  // one collection at a time

  mutable std::mutex mutex_;  // guards the fields below
  NodePlan plan_;
  std::optional<NodeSample> latest_;
  std::optional<SteadyTime> last_spooled_;
  std::string spool_error_;  // empty after a sample was spooled
  bool spooling_ = false;
};

}  // namespace uplink::agent::node
