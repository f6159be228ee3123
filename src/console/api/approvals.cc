#include "console/api/approvals.h"

#include <algorithm>

#include "common/json.h"
#include "common/kubernetes_names.h"
#include "common/text.h"
#include "console/api/cluster_plan.h"
#include "console/api/json_fields.h"

namespace uplink::console {
namespace {

// Verbs whose commands read no namespace, whatever flags they carry.
constexpr std::string_view kVerbsWithoutNamespace[] = {"api-resources", "api-versions",
                                                       "version", "cluster-info", "explain"};

bool IsAny(std::string_view value) { return value == kAnyValue; }

Result<std::string> ReadField(FieldReader& fields, std::string_view name) {
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> value, fields.String(name, 253));
  if (!value) return std::string(kAnyValue);
  if (value->empty()) {
    return InvalidArgumentError(std::string(name) + " is empty: give a value, or \"*\" for any");
  }
  return *value;
}

}  // namespace

Result<ApprovalRule> ParseApprovalRule(const json::object& body) {
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"verb", "resource", "namespace"}));
  ApprovalRule rule;
  UPLINK_ASSIGN_OR_RETURN(rule.verb, ReadField(fields, "verb"));
  UPLINK_ASSIGN_OR_RETURN(std::string resource, ReadField(fields, "resource"));
  UPLINK_ASSIGN_OR_RETURN(rule.namespace_name, ReadField(fields, "namespace"));

  if (!IsAny(rule.verb) && std::find(std::begin(kubectl::kAllowedVerbs),
                                     std::end(kubectl::kAllowedVerbs),
                                     rule.verb) == std::end(kubectl::kAllowedVerbs)) {
    return InvalidArgumentError(
        "verb \"" + OneLineExcerpt(rule.verb, 64) +
        "\" is not one of the read-only verbs that run: get, logs, top, describe, "
        "api-resources, api-versions, version, cluster-info, explain (or \"*\")");
  }
  bool namespaced_resource = true;
  if (IsAny(resource)) {
    rule.resource = std::string(kAnyValue);
  } else {
    auto canonical = kubectl::CanonicalResourceOf(resource);
    if (!canonical.ok()) {
      return InvalidArgumentError("resource \"" + OneLineExcerpt(resource, 64) +
                                  "\" cannot be a rule's: " + canonical.status().message());
    }
    rule.resource = canonical->name;
    namespaced_resource = canonical->namespaced;
  }
  if (!IsAny(rule.namespace_name)) {
    if (!IsDnsLabel(rule.namespace_name)) {
      return InvalidArgumentError(
          "namespace \"" + OneLineExcerpt(rule.namespace_name, 64) +
          "\" is not a namespace name (1-63 of a-z, 0-9 and '-', starting and ending with a "
          "letter or digit) or \"*\"");
    }
    if (!namespaced_resource) {
      return InvalidArgumentError(rule.resource +
                                  " are not in a namespace, so this rule would never match; "
                                  "use namespace \"*\"");
    }
    if (std::find(std::begin(kVerbsWithoutNamespace), std::end(kVerbsWithoutNamespace),
                  rule.verb) != std::end(kVerbsWithoutNamespace)) {
      return InvalidArgumentError("kubectl " + rule.verb +
                                  " reads no namespace, so this rule would never match; use "
                                  "namespace \"*\"");
    }
  }
  return rule;
}

std::optional<Unavailable> UnavailableConnection(const Connection& connection, WallTime now) {
  if (connection.revoked_at) {
    return Unavailable{"connection_revoked",
                       "this connection was revoked, so its agent can no longer take commands; "
                       "create a new connection for the cluster"};
  }
  if (connection.expires_at <= now) {
    return Unavailable{"connection_expired",
                       "this connection's agent token expired, so its agent can no longer take "
                       "commands; rotate the token (uplink connections rotate) and install it in "
                       "the cluster"};
  }
  if (connection.owner_deactivated_at) {
    return Unavailable{"owner_deactivated",
                       "this connection's owner is deactivated, so its agent is refused; an "
                       "admin can reactivate them"};
  }
  if (connection.owner_needs_two_factor) {
    return Unavailable{"owner_needs_two_factor",
                       "this connection's owner has not set up the two-factor sign-in this "
                       "console requires, so its agent is refused until they do"};
  }
  return std::nullopt;
}

bool RuleMatches(const ApprovalRule& rule, const kubectl::KubectlCommand& command) {
  if (!IsAny(rule.verb) && rule.verb != command.verb) return false;
  if (!IsAny(rule.resource) &&
      std::find(command.resources.begin(), command.resources.end(), rule.resource) ==
          command.resources.end()) {
    return false;
  }
  if (IsAny(rule.namespace_name)) return true;
  if (command.cluster_scoped) return false;
  if (command.all_namespaces) return true;
  return command.namespace_name.value_or("default") == rule.namespace_name;
}

const ApprovalRule* FirstMatchingRule(const std::vector<ApprovalRule>& rules,
                                      const kubectl::KubectlCommand& command) {
  for (const ApprovalRule& rule : rules) {
    if (RuleMatches(rule, command)) return &rule;
  }
  return nullptr;
}

json::object ApprovalRuleJson(const ApprovalRule& rule) {
  return json::object{{"id", rule.id},
                      {"verb", rule.verb},
                      {"resource", rule.resource},
                      {"namespace", rule.namespace_name},
                      {"created_at", FormatRfc3339(rule.created_at)},
                      {"created_by", rule.created_by}};
}

std::string DescribeRule(const ApprovalRule& rule) {
  std::string text = IsAny(rule.verb) ? "any command" : "kubectl " + rule.verb;
  if (!IsAny(rule.resource)) text += " on " + rule.resource;
  text += IsAny(rule.namespace_name) ? " in any namespace" : " in namespace " + rule.namespace_name;
  return text;
}

json::array ArgvJson(const std::vector<std::string>& argv) {
  json::array list;
  for (const std::string& arg : argv) list.emplace_back(arg);
  return list;
}

std::string_view ApprovalStatusText(const CommandApproval& approval, WallTime now) {
  switch (approval.status) {
    case ApprovalStatus::kPending:
      return approval.expires_at <= now ? "expired" : "waiting_for_approval";
    case ApprovalStatus::kApproved: return "approved";
    case ApprovalStatus::kRejected: return "rejected";
    case ApprovalStatus::kExpired: return "expired";
    case ApprovalStatus::kCompleted: return "completed";
    case ApprovalStatus::kFailed: return "failed";
  }
  return "failed";
}

namespace {

json::value PersonJson(const std::string& id, const std::string& email) {
  if (id.empty()) return nullptr;
  return json::object{{"id", id}, {"email", email}};
}

// One line for people: what is happening to the command and what to do.
std::string ApprovalMessage(const CommandApproval& approval, std::string_view status) {
  if (status == "waiting_for_approval") {
    return "waiting for approval: it matches the approval rule " + approval.rule.id + " (" +
           DescribeRule(approval.rule) +
           "). The connection's owner or an admin approves it in the web console or with "
           "'uplink approvals approve " +
           approval.id + "' (or rejects it); unless decided it expires at " +
           FormatRfc3339(approval.expires_at);
  }
  if (status == "approved") {
    return "approved by " + approval.decided_by_label + "; sent to the cluster's agent";
  }
  if (status == "rejected") {
    return "rejected by " + approval.decided_by_label +
           (approval.reason.empty() ? std::string() : ": " + approval.reason);
  }
  if (status == "expired") {
    return "nobody approved it before " + FormatRfc3339(approval.expires_at) +
           ", so it did not run; run it again to ask anew";
  }
  if (status == "completed") return "approved by " + approval.decided_by_label + " and run";
  return approval.result ? approval.result->error_message : std::string("it did not run");
}

}  // namespace

json::object ApprovalJson(const CommandApproval& approval, WallTime now, bool with_output) {
  const std::string_view status = ApprovalStatusText(approval, now);
  json::object object{{"id", approval.id},
                      {"connection_id", approval.connection_id},
                      {"argv", ArgvJson(approval.argv)},
                      {"status", status},
                      {"message", ApprovalMessage(approval, status)},
                      {"rule",
                       json::object{{"id", approval.rule.id},
                                    {"verb", approval.rule.verb},
                                    {"resource", approval.rule.resource},
                                    {"namespace", approval.rule.namespace_name}}},
                      {"requested_by",
                       PersonJson(approval.requested_by, approval.requested_by_label)},
                      {"requested_at", FormatRfc3339(approval.requested_at)},
                      {"expires_at", FormatRfc3339(approval.expires_at)},
                      {"decided_by", PersonJson(approval.decided_by, approval.decided_by_label)},
                      {"decided_at", approval.decided_at ? json::value(FormatRfc3339(
                                                               *approval.decided_at))
                                                         : json::value(nullptr)},
                      {"reason", approval.reason},
                      {"finished_at", approval.finished_at ? json::value(FormatRfc3339(
                                                                 *approval.finished_at))
                                                           : json::value(nullptr)}};
  if (approval.result && status == "completed") {
    object["exit_code"] = approval.result->exit_code;
    object["duration_ms"] = approval.result->duration_ms;
    if (with_output) {
      object["stdout"] = approval.result->stdout_text;
      object["stderr"] = approval.result->stderr_text;
    }
  } else if (approval.result && status == "failed") {
    object["error"] = json::object{{"code", approval.result->error_code},
                                   {"message", approval.result->error_message}};
  }
  return object;
}

}  // namespace uplink::console
