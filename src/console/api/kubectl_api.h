// kubectl through the cluster role (docs/api.md, "kubectl"; docs/protocol.md, "kubectl
// commands"): users' commands, checked by the guard, the namespace scope and the approval
// rules (approvals_api.h), wait in the CommandBroker until the connection's agent polls for
// them and posts their results; the namespace scope; the latest cluster snapshot and the pod
// right-sizing read from the snapshots.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "console/api/api_context.h"
#include "console/api/approvals_api.h"
#include "console/api/command_outcomes.h"
#include "console/api/routes.h"
#include "console/commands/command_broker.h"

namespace uplink::console {

class KubectlApi : private ApiArea {
 public:
  // `commands`, `outcomes` and `approvals` must outlive this object.
  KubectlApi(const ApiContext& context, CommandBroker& commands, CommandOutcomes& outcomes,
             ApprovalsApi& approvals);

  void Register(Routes& routes);
  // For /metrics: the commands and polls waiting, and the pickup latency histogram
  // (OperationsApi::AddToScrape).
  std::string Scrape();
  // The cluster plan for the reply to a cluster role's upload, from the namespace scope its
  // transaction read.
  static json::object UploadPlan(const NamespaceScope& scope);
  // Counts an accepted upload's snapshot that became its connection's latest.
  void CountSnapshots(const UploadOutcome& outcome);

 private:
  void RunKubectl(const std::string& id, const net::Request& request, const RequestContext& caller,
                  net::Reply reply);
  // The reply to a command that ended, audited and counted.
  net::Response KubectlEnded(const Connection& connection, const RequestContext& caller,
                             const std::vector<std::string>& argv, CommandEnd end);
  // Audits and counts a command refused before it was queued; returns `response`.
  net::Response KubectlRefused(const Connection& connection, const RequestContext& caller,
                               std::string_view outcome, std::string_view verb,
                               std::string_view reason, net::Response response);
  Result<net::Response> ShowNamespaces(const std::string& id, const RequestContext& caller);
  Result<net::Response> SetNamespaces(const std::string& id, const net::Request& request,
                                      const RequestContext& caller);
  Result<net::Response> ShowClusterSnapshot(const std::string& id, const RequestContext& caller);
  Result<net::Response> ShowRightSizing(const std::string& id, const RequestContext& caller);
  void PollCommands(const net::Request& request, const Connection& connection, net::Reply reply);
  Result<net::Response> ReceiveCommandResult(const std::string& command_id,
                                             const net::Request& request,
                                             const Connection& connection);

  CommandBroker& commands_;
  CommandOutcomes& outcomes_;
  ApprovalsApi& approvals_;
};

}  // namespace uplink::console
