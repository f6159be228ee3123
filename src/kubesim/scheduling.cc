#include "kubesim/scheduling.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "kubesim/resources.h"

namespace uplink::kubesim {
namespace {

std::string NodeName(const json::object& node) { return StringAt(ObjectAt(node, "metadata"), "name"); }

std::string Label(const json::object& node, const std::string& key) {
  const json::value* value = ObjectAt(ObjectAt(node, "metadata"), "labels").if_contains(key);
  return value && value->is_string() ? std::string(value->get_string()) : "";
}

bool HasLabel(const json::object& node, const std::string& key) {
  return ObjectAt(ObjectAt(node, "metadata"), "labels").contains(key);
}

std::vector<std::string> Values(const json::object& requirement) {
  std::vector<std::string> values;
  for (const json::value& value : ArrayAt(requirement, "values")) {
    if (value.is_string()) values.emplace_back(value.get_string());
  }
  return values;
}

bool RequirementMatches(const json::object& requirement, bool has, const std::string& actual) {
  std::string op = StringAt(requirement, "operator");
  std::vector<std::string> values = Values(requirement);
  bool listed = std::find(values.begin(), values.end(), actual) != values.end();
  if (op == "In") return has && listed;
  if (op == "NotIn") return !has || !listed;
  if (op == "Exists") return has;
  if (op == "DoesNotExist") return !has;
  if ((op == "Gt" || op == "Lt") && has && values.size() == 1) {
    long long mine = std::atoll(actual.c_str());
    long long theirs = std::atoll(values[0].c_str());
    return op == "Gt" ? mine > theirs : mine < theirs;
  }
  return false;
}

// nodeSelector and required node affinity (its terms ORed, each term's requirements ANDed).
bool MatchesNodeSelection(const json::object& spec, const json::object& node) {
  for (const auto& [key, value] : ObjectAt(spec, "nodeSelector")) {
    if (!value.is_string() || Label(node, std::string(key)) != value.get_string() ||
        !HasLabel(node, std::string(key))) {
      return false;
    }
  }
  const json::object& required = ObjectAt(ObjectAt(ObjectAt(spec, "affinity"), "nodeAffinity"),
                                       "requiredDuringSchedulingIgnoredDuringExecution");
  if (required.empty()) return true;
  for (const json::value& entry : ArrayAt(required, "nodeSelectorTerms")) {
    if (!entry.is_object()) continue;
    const json::object& term = entry.get_object();
    const json::array& expressions = ArrayAt(term, "matchExpressions");
    const json::array& fields = ArrayAt(term, "matchFields");
    if (expressions.empty() && fields.empty()) continue;  // an empty term matches nothing
    bool matches = true;
    for (const json::value& expression : expressions) {
      if (!expression.is_object()) continue;
      std::string key = StringAt(expression.get_object(), "key");
      matches = matches && RequirementMatches(expression.get_object(), HasLabel(node, key),
                                              Label(node, key));
    }
    for (const json::value& field : fields) {
      if (!field.is_object()) continue;
      bool is_name = StringAt(field.get_object(), "key") == "metadata.name";
      matches = matches && is_name &&
                RequirementMatches(field.get_object(), true, NodeName(node));
    }
    if (matches) return true;
  }
  return false;
}

bool Tolerates(const json::object& toleration, const json::object& taint) {
  std::string effect = StringAt(toleration, "effect");
  if (!effect.empty() && effect != StringAt(taint, "effect")) return false;
  std::string key = StringAt(toleration, "key");
  std::string op = StringAt(toleration, "operator");
  if (key.empty()) return op == "Exists";
  if (key != StringAt(taint, "key")) return false;
  return op == "Exists" || StringAt(toleration, "value") == StringAt(taint, "value");
}

bool Tolerated(const json::object& spec, const json::object& taint) {
  const json::array& tolerations = ArrayAt(spec, "tolerations");
  return std::any_of(tolerations.begin(), tolerations.end(), [&](const json::value& toleration) {
    return toleration.is_object() && Tolerates(toleration.get_object(), taint);
  });
}

// The first NoSchedule or NoExecute taint the pod does not tolerate.
std::optional<json::object> UntoleratedTaint(const json::object& spec, const json::object& node) {
  for (const json::value& entry : ArrayAt(ObjectAt(node, "spec"), "taints")) {
    if (!entry.is_object()) continue;
    const json::object& taint = entry.get_object();
    std::string effect = StringAt(taint, "effect");
    if (effect != "NoSchedule" && effect != "NoExecute") continue;
    if (!Tolerated(spec, taint)) return taint;
  }
  return std::nullopt;
}

bool Unschedulable(const json::object& spec, const json::object& node) {
  const json::value* cordoned = ObjectAt(node, "spec").if_contains("unschedulable");
  if (!cordoned || !cordoned->is_bool() || !cordoned->get_bool()) return false;
  json::object taint{{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}};
  return !Tolerated(spec, taint);
}

struct NodeUse {
  ResourceList requested;
  std::int64_t pods = 0;
};

NodeUse UseOf(const std::string& node, const std::vector<json::object>& pods,
              const std::string& except_uid) {
  NodeUse use;
  for (const json::object& pod : pods) {
    if (IsTerminal(pod) || StringAt(ObjectAt(pod, "spec"), "nodeName") != node) continue;
    if (!except_uid.empty() && StringAt(ObjectAt(pod, "metadata"), "uid") == except_uid) continue;
    use.requested = Add(use.requested, PodRequests(pod));
    ++use.pods;
  }
  return use;
}

ResourceList Allocatable(const json::object& node) {
  Result<ResourceList> allocatable =
      ParseResourceList(ObjectAt(node, "status").if_contains("allocatable"));
  return allocatable.ok() ? *allocatable : ResourceList{};
}

std::int64_t Milli(const ResourceList& list, const std::string& name) {
  auto it = list.find(name);
  return it == list.end() ? 0 : it->second.milli;
}

// NodeResourcesFit: what does not fit, each a reason of its own.
std::vector<std::string> Insufficient(const json::object& pod, const json::object& node,
                                      const NodeUse& use) {
  std::vector<std::string> reasons;
  ResourceList allocatable = Allocatable(node);
  if (use.pods + 1 > Milli(allocatable, "pods") / 1000) reasons.emplace_back("Too many pods");
  for (const auto& [name, amount] : PodRequests(pod)) {
    if (amount.milli <= 0) continue;
    if (amount.milli > Milli(allocatable, name) - Milli(use.requested, name)) {
      reasons.push_back("Insufficient " + name);
    }
  }
  return reasons;
}

std::string TaintText(const json::object& taint) {
  return "{" + StringAt(taint, "key") + ": " + StringAt(taint, "value") + "}";
}

// The share of allocatable CPU and memory left once the pod is placed: higher is emptier.
double FreeShare(const json::object& pod, const json::object& node, const NodeUse& use) {
  ResourceList allocatable = Allocatable(node);
  ResourceList requested = PodRequests(pod);
  double total = 0;
  for (const char* name : {"cpu", "memory"}) {
    double capacity = static_cast<double>(Milli(allocatable, name));
    if (capacity <= 0) continue;
    total += (capacity - Milli(use.requested, name) - Milli(requested, name)) / capacity;
  }
  return total;
}

std::string CountedReasons(const std::map<std::string, int>& counts) {
  std::vector<std::string> parts;
  for (const auto& [reason, count] : counts) parts.push_back(std::to_string(count) + " " + reason);
  std::sort(parts.begin(), parts.end());
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
  return text;
}

}  // namespace

bool IsTerminal(const json::object& pod) {
  std::string phase = StringAt(ObjectAt(pod, "status"), "phase");
  return phase == "Succeeded" || phase == "Failed";
}

SchedulingResult Schedule(const json::object& pod, const std::vector<json::object>& nodes,
                          const std::vector<json::object>& bound_pods) {
  const json::object& spec = ObjectAt(pod, "spec");
  std::map<std::string, int> reasons;
  std::map<std::string, int> preemption;
  std::string best;
  double best_share = -1e300;
  for (const json::object& node : nodes) {
    std::vector<std::string> failed;
    bool resolvable = false;
    if (Unschedulable(spec, node)) {
      failed.emplace_back("node(s) were unschedulable");
    } else if (std::optional<json::object> taint = UntoleratedTaint(spec, node)) {
      failed.push_back("node(s) had untolerated taint " + TaintText(*taint));
    } else if (!MatchesNodeSelection(spec, node)) {
      failed.emplace_back("node(s) didn't match Pod's node affinity/selector");
    } else {
      NodeUse use = UseOf(NodeName(node), bound_pods, StringAt(ObjectAt(pod, "metadata"), "uid"));
      failed = Insufficient(pod, node, use);
      resolvable = true;
      if (failed.empty()) {
        double share = FreeShare(pod, node, use);
        if (share > best_share || (share == best_share && NodeName(node) < best)) {
          best_share = share;
          best = NodeName(node);
        }
        continue;
      }
    }
    for (const std::string& reason : failed) ++reasons[reason];
    ++preemption[resolvable ? "No preemption victims found for incoming pod"
                            : "Preemption is not helpful for scheduling"];
  }
  if (!best.empty()) return {best, ""};
  std::string total = std::to_string(nodes.size());
  std::string message = "0/" + total + " nodes are available";
  if (!reasons.empty()) message += ": " + CountedReasons(reasons);
  message += ". preemption: ";
  if (StringAt(spec, "preemptionPolicy") == "Never") {
    message += "not eligible due to preemptionPolicy=Never.";
  } else {
    message += "0/" + total + " nodes are available" +
               (preemption.empty() ? "" : ": " + CountedReasons(preemption)) + ".";
  }
  return {"", message};
}

std::optional<Rejection> AdmitOnNode(const json::object& pod, const json::object& node,
                                     const std::vector<json::object>& others) {
  const json::object& spec = ObjectAt(pod, "spec");
  if (!MatchesNodeSelection(spec, node)) {
    return Rejection{"NodeAffinity",
                     "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match "
                     "Pod's node affinity/selector"};
  }
  NodeUse use = UseOf(NodeName(node), others, StringAt(ObjectAt(pod, "metadata"), "uid"));
  ResourceList allocatable = Allocatable(node);
  auto rejected = [](const std::string& name, std::int64_t requested, std::int64_t used,
                     std::int64_t capacity) {
    return Rejection{"OutOf" + name, "Pod was rejected: Node didn't have enough resource: " +
                                         name + ", requested: " + std::to_string(requested) +
                                         ", used: " + std::to_string(used) +
                                         ", capacity: " + std::to_string(capacity)};
  };
  std::int64_t pod_capacity = Milli(allocatable, "pods") / 1000;
  if (use.pods + 1 > pod_capacity) return rejected("pods", 1, use.pods, pod_capacity);
  for (const auto& [name, amount] : PodRequests(pod)) {
    if (amount.milli <= 0) continue;
    std::int64_t capacity = Milli(allocatable, name);
    std::int64_t used = Milli(use.requested, name);
    if (amount.milli <= capacity - used) continue;
    // CPU in millicores, everything else in whole units, as the kubelet reports them.
    std::int64_t scale = name == "cpu" ? 1 : 1000;
    return rejected(name, amount.milli / scale, used / scale, capacity / scale);
  }
  return std::nullopt;
}

}  // namespace uplink::kubesim
