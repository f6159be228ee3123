#include "agent/node/role.h"

#include <algorithm>

#include "agent/node/format/payload.h"
#include "agent/node/format/prometheus.h"

namespace uplink::agent::node {
namespace {

constexpr std::string_view kCollections = "uplink_agent_node_collections_total";
constexpr std::string_view kCollectionSeconds = "uplink_agent_node_collection_seconds";
constexpr std::string_view kGaps = "uplink_agent_node_collection_gaps";
constexpr std::string_view kSpoolFailures = "uplink_agent_node_spool_append_failures_total";
constexpr std::string_view kInterval = "uplink_agent_node_interval_seconds";
constexpr std::string_view kGpus = "uplink_agent_node_gpus";
constexpr std::string_view kGpuHealthy = "uplink_agent_node_gpu_collector_healthy";
constexpr std::chrono::seconds kMinReadinessAge{150};

std::string CollectorNames(CollectorSet set) {
  std::string names;
  for (Collector c : kAllCollectors) {
    if (!set.Has(c)) continue;
    if (!names.empty()) names += ',';
    names += CollectorName(c);
  }
  return names;
}

// The sources without which a sample says nothing about the node.
std::optional<std::string> MissingCore(const NodeSample& sample) {
  if (sample.collected.Has(Collector::kCpu) && !sample.cpu) return "cpu";
  if (sample.collected.Has(Collector::kMemory) && !sample.memory) return "memory";
  return std::nullopt;
}

std::string GapText(const NodeSample& sample, std::string_view source) {
  for (const Gap& gap : sample.gaps) {
    if (gap.source == source) return gap.path.empty() ? gap.error : gap.path + ": " + gap.error;
  }
  return "not read";
}

}  // namespace

Result<std::optional<NodePlan>> PlanFromReply(const json::value& reply) {
  UPLINK_ASSIGN_OR_RETURN(std::optional<protocol::NodePlan> plan, protocol::DecodeNodePlan(reply));
  if (!plan) return std::optional<NodePlan>();
  NodePlan out;
  if (plan->interval) out.interval = *plan->interval;
  if (plan->collectors) {
    out.collectors = CollectorSet();
    for (const std::string& name : *plan->collectors) {
      if (auto collector = ParseCollectorName(name); collector.ok()) out.collectors.Add(*collector);
    }
  }
  return std::optional<NodePlan>(out);
}

Result<CollectorSet> ParseCollectorList(std::string_view list) {
  CollectorSet set;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    if (!name.empty()) {
      UPLINK_ASSIGN_OR_RETURN(Collector collector, ParseCollectorName(name));
      set.Add(collector);
    }
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  if (set == CollectorSet()) return InvalidArgumentError("no collector named");
  return set;
}

void DeclareNodeMetrics(metrics::Registry& registry) {
  registry.DeclareCounter(kCollections, "Collections of the node role.");
  registry.DeclareGauge(kCollectionSeconds, "How long the last collection took.");
  registry.DeclareGauge(kGaps, "Sources the last collection could not read.");
  registry.DeclareCounter(kSpoolFailures,
                          "Samples that could not be appended to the spool (lost).");
  registry.DeclareGauge(kInterval, "Seconds between collections, as the console's plan says.");
  registry.DeclareGauge(kGpus, "GPUs in the last collection.");
  registry.DeclareGauge(kGpuHealthy,
                        "1 while the GPU collector's last read worked, 0 when it hung or failed.");
}

NodeRole::NodeRole(NodeRoleOptions options, HostCollector& host, GpuCollector* gpus,
                   Clock& clock, metrics::Registry& registry)
    : options_(std::move(options)),
      host_(host),
      gpus_(gpus),
      clock_(clock),
      metrics_(registry),
      plan_(options_.plan) {
  metrics_.Set(kInterval, static_cast<double>(plan_.interval.count()));
}

NodeSample NodeRole::Collect() {
  std::lock_guard collecting(collect_mutex_);
  const CollectorSet which = plan().collectors;
  const SteadyTime started = clock_.SteadyNow();
  NodeSample sample;
  sample.node = options_.node_name;
  sample.collected_at = clock_.Now();
  sample.collected = which;
  host_.Collect(which, sample);
  if (which.Has(Collector::kGpu) && gpus_ != nullptr) {
    sample.gpus = gpus_->Latest();
    if (!sample.gpus->healthy) {
      sample.gaps.push_back(Gap{std::string(CollectorName(Collector::kGpu)), "",
                                sample.gpus->error, 0});
    }
    metrics_.Set(kGpus, static_cast<double>(sample.gpus->gpus.size()));
    metrics_.Set(kGpuHealthy, sample.gpus->healthy ? 1 : 0);
  }
  const double seconds =
      std::chrono::duration<double>(clock_.SteadyNow() - started).count();
  metrics_.Increment(kCollections);
  metrics_.Set(kCollectionSeconds, seconds);
  metrics_.Set(kGaps, static_cast<double>(sample.gaps.size()));
  std::lock_guard guard(mutex_);
  latest_ = sample;
  return sample;
}

Status NodeRole::CollectAndSpool(spool::Spool& spool) {
  const NodeSample sample = Collect();
  Result<std::uint64_t> appended = spool.Append(RenderPayload(sample));
  std::lock_guard guard(mutex_);
  spooling_ = true;
  if (!appended.ok()) {
    metrics_.Increment(kSpoolFailures);
    spool_error_ = appended.status().message();
    log_.Error("could not spool the sample; it is lost", {{"error", appended.status()}});
    return appended.status();
  }
  last_spooled_ = clock_.SteadyNow();
  spool_error_.clear();
  return Status::Ok();
}

void NodeRole::Run(spool::Spool& spool, StopSignal& stop) {
  // A new interval from the console counts from the last collection, not from the end of the
  // wait that was under way when it came.
  constexpr auto kPlanCheck = std::chrono::seconds(1);
  while (!stop.stopped()) {
    const SteadyTime started = clock_.SteadyNow();
    (void)CollectAndSpool(spool);
    while (true) {
      const SteadyTime due = started + plan().interval;
      const SteadyTime now = clock_.SteadyNow();
      if (now >= due) break;
      const auto wait = std::min<SteadyTime::duration>(due - now, kPlanCheck);
      if (!stop.WaitFor(std::chrono::duration_cast<std::chrono::milliseconds>(wait))) return;
    }
  }
}

void NodeRole::TakePlanFrom(const json::value& reply) {
  Result<std::optional<NodePlan>> parsed = PlanFromReply(reply);
  if (!parsed.ok()) {
    log_.Warn("ignoring the console's plan; keeping the current one",
              {{"error", parsed.status()}});
    return;
  }
  if (!parsed->has_value()) return;
  const NodePlan& next = **parsed;
  {
    std::lock_guard guard(mutex_);
    if (plan_ == next) return;
    plan_ = next;
  }
  metrics_.Set(kInterval, static_cast<double>(next.interval.count()));
  log_.Info("collection plan changed", {{"interval_seconds", next.interval.count()},
                                        {"collectors", CollectorNames(next.collectors)}});
}

NodePlan NodeRole::plan() const {
  std::lock_guard guard(mutex_);
  return plan_;
}

void NodeRole::AppendLatest(std::string& out) const {
  std::lock_guard guard(mutex_);
  if (latest_) RenderPrometheus(*latest_, out);
}

Readiness NodeRole::CheckReadiness() const {
  std::lock_guard guard(mutex_);
  if (!latest_) return Readiness{false, "no collection yet"};
  if (auto missing = MissingCore(*latest_)) {
    return Readiness{false, "the last collection could not read " + *missing + ": " +
                                GapText(*latest_, *missing)};
  }
  if (!spooling_) return Readiness{true, ""};
  if (!spool_error_.empty()) return Readiness{false, "the last sample was not spooled: " + spool_error_};
  const auto limit = std::max<std::chrono::seconds>(kMinReadinessAge, plan_.interval * 5 / 2);
  if (!last_spooled_ || clock_.SteadyNow() - *last_spooled_ > limit) {
    return Readiness{false, "no sample spooled for over " + std::to_string(limit.count()) + " s"};
  }
  return Readiness{true, ""};
}

}  // namespace uplink::agent::node
