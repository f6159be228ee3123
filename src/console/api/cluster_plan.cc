#include "console/api/cluster_plan.h"

#include <algorithm>
#include <initializer_list>

#include "common/json.h"
#include "common/kubernetes_names.h"
#include "common/text.h"
#include "console/api/right_sizing.h"

namespace uplink::console {
namespace {

struct NamespacedRead {
  std::string_view name;
  std::initializer_list<std::string_view> args;  // after "kubectl", before the namespace
  std::initializer_list<std::string_view> tail;  // after the namespace flags
};

// The default namespaced reads, in plan order.
const NamespacedRead kNamespacedReads[] = {
    {"pods", {"get", "pods"}, {"-o", "wide"}},
    {"warning_events", {"get", "events"}, {"--field-selector", "type=Warning"}},
    {"deployments", {"get", "deployments"}, {}},
    {"statefulsets", {"get", "statefulsets"}, {}},
    {"top_pods", {"top", "pods"}, {}},
    // Requests and limits only, for pod right-sizing (right_sizing.h).
    {"pod_resources", {"get", "pods"}, {"-o", kPodResourcesJsonPath}},
};

protocol::PlanCommand Command(std::string name, std::initializer_list<std::string_view> args) {
  std::vector<std::string> argv{"kubectl"};
  for (std::string_view arg : args) argv.emplace_back(arg);
  return protocol::PlanCommand{std::move(name), std::move(argv)};
}

protocol::PlanCommand NamespacedCommand(const NamespacedRead& read,
                                        const std::string& namespace_name) {
  std::vector<std::string> argv{"kubectl"};
  for (std::string_view arg : read.args) argv.emplace_back(arg);
  if (namespace_name == kAllNamespaces) {
    argv.emplace_back("-A");
  } else {
    argv.emplace_back("-n");
    argv.emplace_back(namespace_name);
  }
  for (std::string_view arg : read.tail) argv.emplace_back(arg);
  std::string name(read.name);
  if (namespace_name != kAllNamespaces) name += "/" + namespace_name;
  return protocol::PlanCommand{std::move(name), std::move(argv)};
}

}  // namespace

Result<std::vector<std::string>> ParseNamespaceList(const json::value& value) {
  if (!value.is_array()) {
    return InvalidArgumentError(
        "namespaces must be an array of namespace names, or [\"*\"] for every namespace");
  }
  const json::array& list = value.get_array();
  if (list.size() > kMaxScopeNamespaces) {
    return InvalidArgumentError("namespaces has " + std::to_string(list.size()) +
                                " names; the limit is " + std::to_string(kMaxScopeNamespaces) +
                                " (use [\"*\"] for every namespace)");
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string item = "namespaces[" + std::to_string(i) + "]";
    if (!list[i].is_string()) return InvalidArgumentError(item + " must be a string");
    std::string_view name = list[i].get_string();
    if (name == kAllNamespaces) {
      if (list.size() != 1) {
        return InvalidArgumentError(
            "\"*\" stands for every namespace and must be the only entry of namespaces");
      }
    } else if (!IsDnsLabel(name)) {
      return InvalidArgumentError(
          item + " is \"" + OneLineExcerpt(name, 64) +
          "\", which is not a namespace name: 1-63 characters of a-z, 0-9 and '-', starting "
          "and ending with a letter or digit");
    }
    names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  if (auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
    return InvalidArgumentError("namespaces names \"" + *twice + "\" twice");
  }
  return names;
}

json::value NamespaceScopeJson(const NamespaceScope& scope) {
  if (!scope) return nullptr;
  json::array names;
  for (const std::string& name : *scope) names.emplace_back(name);
  return names;
}

protocol::ClusterPlan ClusterPlanFor(const NamespaceScope& scope) {
  protocol::ClusterPlan plan;
  plan.interval = kClusterPlanInterval;
  std::vector<protocol::PlanCommand>& commands = plan.commands;
  commands.push_back(Command("nodes", {"get", "nodes", "-o", "wide"}));
  commands.push_back(Command("namespaces", {"get", "namespaces"}));
  commands.push_back(Command("top_nodes", {"top", "nodes"}));
  if (scope) {
    // Read by read across the namespaces, so that a long list loses its least useful reads
    // (top pods, then statefulsets, ...) to the cap rather than its last namespaces' pods.
    for (const NamespacedRead& read : kNamespacedReads) {
      for (const std::string& namespace_name : *scope) {
        if (commands.size() >= kMaxPlanCommands) break;
        commands.push_back(NamespacedCommand(read, namespace_name));
      }
    }
  }
  plan.failing_pod_logs = protocol::FailingPodLogs{kFailingPodLogLines, kFailingPodLogPods};
  return plan;
}

}  // namespace uplink::console
