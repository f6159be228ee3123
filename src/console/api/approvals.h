// Approval rules and the commands that wait for approval (docs/api.md, "Approval rules"): a
// rule as the API reads it, which kubectl commands it sends to approval, and the JSON of both.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "console/store/store.h"
#include "kubectl/guard.h"

namespace uplink::console {

// Why a connection's agent can take no commands now (revoked, expired, its owner deactivated
// or without the two-factor sign-in the console requires): the 409's code and message; nullopt
// when it can. Checked before a command is queued and again when one is approved.
struct Unavailable {
  std::string_view code;
  std::string_view message;
};
std::optional<Unavailable> UnavailableConnection(const Connection& connection, WallTime now);

// A rule field that matches every value.
inline constexpr std::string_view kAnyValue = "*";

// The body of a new rule, {verb?, resource?, namespace?}, each "*" when left out: the verb one
// of the guard's (kubectl::kAllowedVerbs), the resource any spelling the guard resolves
// ("po", "Deployment", "deploy.apps"), kept as its canonical name so that every spelling of a
// command matches it alike, the namespace a DNS-1123 label. InvalidArgument saying what is
// wrong, also for a rule that could never match: a namespace with a cluster-scoped resource,
// or with a verb that reads no namespace (api-resources, api-versions, version,
// cluster-info, explain). Only the id, connection and creator are left to fill in.
Result<ApprovalRule> ParseApprovalRule(const json::object& body);

// Whether `rule` sends `command` (as the guard parsed it) to approval: each of its fields is
// "*" or matches, where
// - the verb matches the command's verb (`top` for top nodes and top pods);
// - the resource matches when it is one of the resources the command reads (get pods,pods
//   -> pods; logs -> pods and pods/log; top pods -> pods; describe -> also events);
// - the namespace matches a namespace the command reads: the one it names with -n (else
//   "default"), or any namespace when it reads every one (-A, describe node); a
//   cluster-scoped command reads none, so only "*" matches it.
bool RuleMatches(const ApprovalRule& rule, const kubectl::KubectlCommand& command);

// The first of `rules` that matches `command`, or null.
const ApprovalRule* FirstMatchingRule(const std::vector<ApprovalRule>& rules,
                                      const kubectl::KubectlCommand& command);

// {id, verb, resource, namespace, created_at, created_by}.
json::object ApprovalRuleJson(const ApprovalRule& rule);

// "kubectl get on pods in namespace ml", "any command in any namespace": a rule for people.
std::string DescribeRule(const ApprovalRule& rule);

// A command line as JSON.
json::array ArgvJson(const std::vector<std::string>& argv);

// An approval's status as the API names it at `now`: waiting_for_approval, approved (queued
// or running), rejected, expired (also a pending one whose expiry has passed but which the
// sweep has not ended yet), completed or failed.
std::string_view ApprovalStatusText(const CommandApproval& approval, WallTime now);

// {id, connection_id, argv, status, message, rule, requested_by: {id, email}, requested_at,
// expires_at, decided_by, decided_at, reason, finished_at} and, once it ended, what the
// direct reply would have carried: {exit_code, stdout, stderr, duration_ms} when completed
// (kubectl's output only `with_output`), {error: {code, message}} when failed.
json::object ApprovalJson(const CommandApproval& approval, WallTime now, bool with_output);

}  // namespace uplink::console
