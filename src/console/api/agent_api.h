// The agent's calls (docs/protocol.md): the inventory report, spool uploads and whoami. The
// connection token and cluster binding are checked by Routes::AgentRoute before these run; the
// cluster role's command poll and results are the kubectl area's (kubectl_api.h).
#pragma once

#include "console/api/api_context.h"
#include "console/api/kubectl_api.h"
#include "console/api/nodes_api.h"
#include "console/api/routes.h"
#include "console/api/runs_api.h"

namespace uplink::console {

class AgentApi : private ApiArea {
 public:
  // An upload's node samples, cluster snapshot and runs are counted by their areas, which
  // also give the plans of the upload replies; all must outlive this object.
  AgentApi(const ApiContext& context, NodesApi& nodes, KubectlApi& kubectl, RunsApi& runs);

  void Register(Routes& routes);

 private:
  // Counts the outcome of AcceptInventory.
  Result<net::Response> ReportInventory(const net::Request& request, const Connection& connection);
  Result<net::Response> AcceptInventory(const net::Request& request, const Connection& connection);
  Result<net::Response> WhoAmI(const Connection& connection);
  // Counts the outcome of AcceptUpload.
  Result<net::Response> ReceiveUpload(const net::Request& request, const Connection& connection);
  Result<net::Response> AcceptUpload(const net::Request& request, const Connection& connection);

  NodesApi& nodes_;
  KubectlApi& kubectl_;
  RunsApi& runs_;
};

}  // namespace uplink::console
