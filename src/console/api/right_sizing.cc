#include "console/api/right_sizing.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/json.h"
#include "common/quantity.h"

namespace uplink::console {
namespace {

constexpr size_t kMaxNameBytes = 253;

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

// Whitespace-separated words of a table line.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

bool IsName(std::string_view text) {
  return !text.empty() && text.size() <= kMaxNameBytes &&
         std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
         });
}

// A quantity in thousandths ("250m" -> 250, "2" -> 2000, "64Mi" -> 67108864000); nullopt for
// anything else, a negative value or one beyond int64.
std::optional<std::int64_t> Milli(std::string_view text) {
  if (text.empty()) return std::nullopt;
  auto quantity = Quantity::Parse(text);
  if (!quantity.ok() || quantity->negative()) return std::nullopt;
  auto milli = quantity->MilliValue();
  if (!milli.ok()) return std::nullopt;
  return *milli;
}

std::optional<std::int64_t> Millicores(std::string_view text) { return Milli(text); }

std::optional<std::int64_t> Bytes(std::string_view text) {
  auto milli = Milli(text);
  if (!milli) return std::nullopt;
  return *milli / 1000 + (*milli % 1000 != 0 ? 1 : 0);
}

// The namespace after -n/--namespace in a plan argv, if any.
std::string NamespaceOf(const std::vector<std::string>& argv) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "-n" || argv[i] == "--namespace") return argv[i + 1];
  }
  return "";
}

bool NamedLike(std::string_view name, std::string_view kind) {
  return name == kind || (name.size() > kind.size() && name.starts_with(kind) &&
                          name[kind.size()] == '/');
}

struct Sum {
  std::optional<std::int64_t> value;  // none when no container sets it
  bool every_container = true;        // every container sets it
};

Sum Total(const std::vector<ContainerResources>& containers,
          std::optional<std::int64_t> ContainerResources::*field) {
  Sum sum;
  for (const ContainerResources& container : containers) {
    const auto& value = container.*field;
    if (!value) {
      sum.every_container = false;
      continue;
    }
    sum.value = sum.value.value_or(0) + *value;
  }
  if (containers.empty()) sum.every_container = false;
  return sum;
}

json::value OptionalJson(const std::optional<std::int64_t>& value) {
  return value ? json::value(*value) : json::value(nullptr);
}

std::int64_t RoundUp(double value, std::int64_t step) {
  auto steps = static_cast<std::int64_t>(std::ceil(value / static_cast<double>(step)));
  return std::max<std::int64_t>(1, steps) * step;
}

struct Resource {
  std::string_view name;  // "cpu" or "memory"
  std::string_view unit;  // the JSON field suffix: "millicores" or "bytes"
  std::int64_t round_to;  // suggestions are multiples of this
};

constexpr Resource kCpu{"cpu", "millicores", 10};
constexpr Resource kMemory{"memory", "bytes", 1 << 20};

// As kubectl writes quantities: "250m" of CPU, "900Mi" or "8.0Gi" of memory.
std::string Show(const Resource& resource, std::int64_t value) {
  if (resource.name == "cpu") return std::to_string(value) + "m";
  const std::int64_t mebibytes = (value + (1 << 20) - 1) >> 20;
  if (mebibytes < 1024) return std::to_string(mebibytes) + "Mi";
  const std::int64_t tenths = (mebibytes * 10 + 512) / 1024;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + "Gi";
}

// The figures of one resource of one pod; its findings are appended to `findings`, and
// `under` or `over` set when one says so. Over-provisioned only with at least `min_idle`
// reserved and unused.
json::object Judge(const Resource& resource, const Sum& request, const Sum& limit,
                   const std::optional<std::pair<std::int64_t, std::int64_t>>& used,
                   bool enough_samples, const RightSizingThresholds& thresholds,
                   std::int64_t min_idle, json::array& findings, bool& under, bool& over) {
  const std::string unit(resource.unit);
  json::object figures{{"request_" + unit, OptionalJson(request.value)},
                       {"limit_" + unit, limit.every_container ? OptionalJson(limit.value)
                                                               : json::value(nullptr)},
                       {"average_" + unit, used ? json::value(used->first) : json::value(nullptr)},
                       {"peak_" + unit, used ? json::value(used->second) : json::value(nullptr)}};
  auto finding = [&](std::string_view kind, std::string message) {
    findings.push_back(json::object{
        {"resource", resource.name}, {"kind", kind}, {"message", std::move(message)}});
  };
  const std::string name(resource.name);
  if (!request.every_container) {
    under = true;
    finding("no_request", request.value
                              ? "a container sets no " + name +
                                    " request: the scheduler reserves nothing for it"
                              : "no " + name + " request: the scheduler reserves nothing, and "
                                               "the pod is among the first to be evicted");
  }
  if (!used || !enough_samples) return figures;
  const std::int64_t peak = used->second;
  const auto suggest = [&] {
    figures["suggested_request_" + unit] =
        RoundUp(static_cast<double>(peak) * (1 + thresholds.headroom), resource.round_to);
  };
  if (request.value && request.every_container) {
    if (peak > *request.value) {
      under = true;
      finding("above_request", "peak " + Show(resource, peak) + " is above the request of " +
                                   Show(resource, *request.value) +
                                   ": it relies on capacity nobody reserved");
      suggest();
    } else if (static_cast<double>(peak) <
                   static_cast<double>(*request.value) * thresholds.over_peak_share &&
               *request.value - peak >= min_idle) {
      over = true;
      finding("over_provisioned", "peak " + Show(resource, peak) + " is under " +
                                      std::to_string(std::lround(thresholds.over_peak_share *
                                                                 100)) +
                                      "% of the request of " + Show(resource, *request.value) +
                                      ": the rest is reserved and unused");
      suggest();
    }
  }
  if (limit.every_container && limit.value &&
      static_cast<double>(peak) >=
          static_cast<double>(*limit.value) * thresholds.near_limit_share) {
    under = true;
    finding("near_limit",
            "peak " + Show(resource, peak) + " is at " +
                std::to_string(std::lround(100.0 * static_cast<double>(peak) /
                                           static_cast<double>(std::max<std::int64_t>(1, *limit.value)))) +
                "% of the limit of " + Show(resource, *limit.value) +
                (resource.name == "cpu" ? ": it is throttled there" : ": it is killed there"));
  }
  return figures;
}

int VerdictOrder(std::string_view verdict) {
  if (verdict == "under_provisioned") return 0;
  if (verdict == "over_provisioned") return 1;
  if (verdict == "unknown") return 2;
  return 3;
}

}  // namespace

std::vector<PodUsage> ParseTopPods(std::string_view output, std::string_view namespace_name) {
  std::vector<PodUsage> usage;
  for (std::string_view line : Split(output, '\n')) {
    std::vector<std::string_view> words = Words(line);
    PodUsage pod;
    size_t at = 0;
    if (words.size() == 4) {
      pod.namespace_name = std::string(words[0]);
      at = 1;
    } else if (words.size() == 3) {
      pod.namespace_name = std::string(namespace_name);
    } else {
      continue;
    }
    pod.pod = std::string(words[at]);
    auto cpu = Millicores(words[at + 1]);
    auto memory = Bytes(words[at + 2]);
    if (!IsName(pod.namespace_name) || !IsName(pod.pod) || !cpu || !memory) continue;
    pod.cpu_millicores = *cpu;
    pod.memory_bytes = *memory;
    usage.push_back(std::move(pod));
  }
  return usage;
}

std::vector<PodUsage> PodUsageOfSnapshot(const protocol::ClusterSnapshot& snapshot,
                                         std::int64_t sequence) {
  std::vector<PodUsage> usage;
  for (const protocol::SnapshotResult& result : snapshot.results) {
    if (!NamedLike(result.name, kTopPodsResult) || !result.outcome.error_code.empty() ||
        result.outcome.exit_code != 0) {
      continue;
    }
    for (PodUsage& pod : ParseTopPods(result.outcome.stdout_text, NamespaceOf(result.argv))) {
      pod.sequence = sequence;
      pod.collected_at = snapshot.collected_at;
      usage.push_back(std::move(pod));
    }
  }
  return usage;
}

std::vector<PodResources> ParsePodResources(std::string_view output) {
  std::vector<PodResources> pods;
  for (std::string_view line : Split(output, '\n')) {
    std::vector<std::string_view> fields = Split(line, '\t');
    if (fields.size() < 3 || !IsName(fields[0]) || !IsName(fields[1])) continue;
    PodResources pod{std::string(fields[0]), std::string(fields[1]), std::string(fields[2]), {}};
    bool valid = true;
    for (size_t i = 3; i < fields.size() && valid; ++i) {
      std::vector<std::string_view> parts = Split(fields[i], '|');
      valid = parts.size() == 5 && IsName(parts[0]);
      if (!valid) break;
      pod.containers.push_back(ContainerResources{std::string(parts[0]), Millicores(parts[1]),
                                                  Bytes(parts[2]), Millicores(parts[3]),
                                                  Bytes(parts[4])});
    }
    if (valid) pods.push_back(std::move(pod));
  }
  return pods;
}

json::object RightSizingJson(const std::vector<PodResources>& pods,
                             const std::vector<PodUsageSummary>& usage,
                             const RightSizingThresholds& thresholds) {
  std::map<std::pair<std::string, std::string>, const PodUsageSummary*> usage_by_pod;
  for (const PodUsageSummary& summary : usage) {
    usage_by_pod[{summary.namespace_name, summary.pod}] = &summary;
  }
  std::vector<std::pair<int, json::object>> rows;
  std::map<std::string, std::int64_t> totals;
  for (const PodResources& pod : pods) {
    if (pod.phase == "Succeeded" || pod.phase == "Failed") continue;
    auto found = usage_by_pod.find({pod.namespace_name, pod.name});
    const PodUsageSummary* used = found == usage_by_pod.end() ? nullptr : found->second;
    const std::int64_t samples = used ? used->samples : 0;
    const bool enough = samples >= thresholds.min_samples;
    json::array findings;
    bool under = false, over = false;
    json::object cpu = Judge(
        kCpu, Total(pod.containers, &ContainerResources::cpu_request_millicores),
        Total(pod.containers, &ContainerResources::cpu_limit_millicores),
        used ? std::optional(std::pair(used->cpu_average_millicores, used->cpu_peak_millicores))
             : std::nullopt,
        enough, thresholds, thresholds.over_min_idle_millicores, findings, under, over);
    json::object memory = Judge(
        kMemory, Total(pod.containers, &ContainerResources::memory_request_bytes),
        Total(pod.containers, &ContainerResources::memory_limit_bytes),
        used ? std::optional(std::pair(used->memory_average_bytes, used->memory_peak_bytes))
             : std::nullopt,
        enough, thresholds, thresholds.over_min_idle_bytes, findings, under, over);
    std::string verdict = under ? "under_provisioned"
                          : over ? "over_provisioned"
                          : enough ? "ok"
                                   : "unknown";
    if (verdict == "unknown") {
      findings.push_back(json::object{
          {"resource", nullptr},
          {"kind", "not_enough_usage"},
          {"message", samples == 0 ? std::string("no usage in the last hour: the pod is not "
                                                 "running, or metrics-server is missing")
                                   : std::to_string(samples) + " usage samples in the last "
                                                               "hour; " +
                                         std::to_string(thresholds.min_samples) +
                                         " are needed to judge"}});
    }
    ++totals[verdict];
    rows.emplace_back(VerdictOrder(verdict),
                      json::object{{"namespace", pod.namespace_name},
                                   {"pod", pod.name},
                                   {"phase", pod.phase},
                                   {"containers", static_cast<std::int64_t>(pod.containers.size())},
                                   {"samples", samples},
                                   {"cpu", std::move(cpu)},
                                   {"memory", std::move(memory)},
                                   {"verdict", verdict},
                                   {"findings", std::move(findings)}});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  json::array list;
  for (auto& [order, row] : rows) list.push_back(std::move(row));
  return json::object{
      {"window_seconds", static_cast<std::int64_t>(kPodUsageWindow.count())},
      {"thresholds",
       json::object{{"min_samples", thresholds.min_samples},
                    {"over_peak_share", thresholds.over_peak_share},
                    {"over_min_idle_millicores", thresholds.over_min_idle_millicores},
                    {"over_min_idle_bytes", thresholds.over_min_idle_bytes},
                    {"near_limit_share", thresholds.near_limit_share},
                    {"headroom", thresholds.headroom}}},
      {"totals", json::object{{"pods", static_cast<std::int64_t>(list.size())},
                              {"under_provisioned", totals["under_provisioned"]},
                              {"over_provisioned", totals["over_provisioned"]},
                              {"ok", totals["ok"]},
                              {"unknown", totals["unknown"]}}},
      {"pods", std::move(list)}};
}

}  // namespace uplink::console
