#include "protocol/plans.h"

#include <algorithm>

#include "common/json.h"
#include "protocol/commands.h"

namespace uplink::protocol {
namespace {

// The reply's "plan" object: nullptr when the reply has none.
Result<const json::object*> PlanOf(const json::value& reply) {
  const json::object* body = reply.if_object();
  if (body == nullptr) return nullptr;
  const json::value* plan = body->if_contains("plan");
  if (plan == nullptr || plan->is_null()) return nullptr;
  if (!plan->is_object()) return InvalidArgumentError("plan must be an object");
  return &plan->get_object();
}

bool IsPlanName(std::string_view name) {
  if (name.empty() || name.size() > kMaxPlanNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '/' || c == '-';
  });
}

Result<std::vector<std::string>> ArgvFromJson(const json::value& value, const std::string& where) {
  const json::array* items = value.if_array();
  if (items == nullptr || items->empty() || items->size() > kMaxCommandArgs) {
    return InvalidArgumentError(where + " must be an array of 1-" +
                                std::to_string(kMaxCommandArgs) + " strings");
  }
  std::vector<std::string> argv;
  for (const json::value& item : *items) {
    const json::string* text = item.if_string();
    if (text == nullptr || text->size() > kMaxCommandArgBytes) {
      return InvalidArgumentError(where + " must hold strings of at most " +
                                  std::to_string(kMaxCommandArgBytes) + " bytes");
    }
    argv.emplace_back(*text);
  }
  if (argv.front() != "kubectl") return InvalidArgumentError(where + " must start with kubectl");
  return argv;
}

Result<std::int64_t> BoundedInteger(const json::object& object, std::string_view key,
                                    std::int64_t low, std::int64_t high, std::int64_t fallback,
                                    const std::string& where) {
  const json::value* value = object.if_contains(key);
  if (value == nullptr) return fallback;
  const std::int64_t* number = value->if_int64();
  if (number == nullptr || *number < low || *number > high) {
    return InvalidArgumentError(where + "." + std::string(key) + " must be an integer from " +
                                std::to_string(low) + " to " + std::to_string(high));
  }
  return *number;
}

}  // namespace

json::object EncodeNodePlan(const NodePlan& plan) {
  json::object encoded;
  if (plan.interval) encoded["interval_seconds"] = plan.interval->count();
  if (plan.collectors) {
    encoded["collectors"] = json::array(plan.collectors->begin(), plan.collectors->end());
  }
  return encoded;
}

Result<std::optional<NodePlan>> DecodeNodePlan(const json::value& reply) {
  UPLINK_ASSIGN_OR_RETURN(const json::object* plan, PlanOf(reply));
  if (plan == nullptr) return std::optional<NodePlan>();
  NodePlan out;
  if (const json::value* interval = plan->if_contains("interval_seconds")) {
    const std::int64_t* seconds = interval->if_int64();
    if (seconds == nullptr || *seconds < kMinPlanInterval.count() ||
        *seconds > kMaxPlanInterval.count()) {
      return InvalidArgumentError("plan.interval_seconds must be an integer from " +
                                  std::to_string(kMinPlanInterval.count()) + " to " +
                                  std::to_string(kMaxPlanInterval.count()));
    }
    out.interval = std::chrono::seconds(*seconds);
  }
  if (const json::value* collectors = plan->if_contains("collectors")) {
    const json::array* names = collectors->if_array();
    if (names == nullptr) return InvalidArgumentError("plan.collectors must be an array");
    out.collectors.emplace();
    for (const json::value& name : *names) {
      const json::string* text = name.if_string();
      if (text == nullptr) return InvalidArgumentError("plan.collectors must hold strings");
      out.collectors->emplace_back(*text);
    }
  }
  return std::optional<NodePlan>(std::move(out));
}

json::object EncodeClusterPlan(const ClusterPlan& plan) {
  json::array commands;
  for (const PlanCommand& command : plan.commands) {
    commands.push_back(json::object{
        {"name", command.name}, {"argv", json::array(command.argv.begin(), command.argv.end())}});
  }
  json::object encoded{{"interval_seconds", plan.interval.count()},
                       {"commands", std::move(commands)}};
  if (plan.failing_pod_logs) {
    encoded["failing_pod_logs"] = json::object{{"tail_lines", plan.failing_pod_logs->tail_lines},
                                               {"max_pods", plan.failing_pod_logs->max_pods}};
  }
  return encoded;
}

Result<std::optional<ClusterPlan>> DecodeClusterPlan(const json::value& reply) {
  UPLINK_ASSIGN_OR_RETURN(const json::object* plan, PlanOf(reply));
  if (plan == nullptr) return std::optional<ClusterPlan>();
  ClusterPlan out;
  UPLINK_ASSIGN_OR_RETURN(
      const std::int64_t interval,
      BoundedInteger(*plan, "interval_seconds", kMinPlanInterval.count(), kMaxPlanInterval.count(),
                     kDefaultPlanInterval.count(), "plan"));
  out.interval = std::chrono::seconds(interval);
  const json::value* commands = plan->if_contains("commands");
  const json::array* entries = commands == nullptr ? nullptr : commands->if_array();
  if (entries == nullptr || entries->size() > kMaxPlanCommands) {
    return InvalidArgumentError("plan.commands must be an array of at most " +
                                std::to_string(kMaxPlanCommands) + " entries");
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string where = "plan.commands[" + std::to_string(i) + "]";
    const json::object* entry = (*entries)[i].if_object();
    if (entry == nullptr) return InvalidArgumentError(where + " must be an object");
    const json::value* name = entry->if_contains("name");
    const json::value* argv = entry->if_contains("argv");
    if (name == nullptr || !name->is_string() || !IsPlanName(name->get_string())) {
      return InvalidArgumentError(where + ".name must be 1-128 characters of [A-Za-z0-9._/-]");
    }
    if (argv == nullptr) return InvalidArgumentError(where + ".argv is missing");
    UPLINK_ASSIGN_OR_RETURN(std::vector<std::string> args, ArgvFromJson(*argv, where + ".argv"));
    out.commands.push_back(PlanCommand{std::string(name->get_string()), std::move(args)});
  }
  if (const json::value* logs = plan->if_contains("failing_pod_logs"); logs && !logs->is_null()) {
    const json::object* object = logs->if_object();
    if (object == nullptr) return InvalidArgumentError("plan.failing_pod_logs must be an object");
    FailingPodLogs wanted;
    UPLINK_ASSIGN_OR_RETURN(const std::int64_t tail,
                            BoundedInteger(*object, "tail_lines", 1, kMaxFailingPodLogLines,
                                           wanted.tail_lines, "plan.failing_pod_logs"));
    UPLINK_ASSIGN_OR_RETURN(const std::int64_t pods,
                            BoundedInteger(*object, "max_pods", 0, kMaxFailingPods, wanted.max_pods,
                                           "plan.failing_pod_logs"));
    wanted.tail_lines = static_cast<int>(tail);
    wanted.max_pods = static_cast<int>(pods);
    out.failing_pod_logs = wanted;
  }
  return std::optional<ClusterPlan>(std::move(out));
}

}  // namespace uplink::protocol
