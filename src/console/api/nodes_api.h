// Node metrics (docs/api.md, "Node metrics"): the latest figures of a connection's nodes, one
// metric of one node over time, and the plan that tells the node role what to collect, which
// the agent API hands the role with every acknowledged upload.
#pragma once

#include <optional>
#include <string>

#include "common/json_fwd.h"
#include "console/api/api_context.h"
#include "console/api/routes.h"

namespace uplink::console {

class NodesApi : private ApiArea {
 public:
  explicit NodesApi(const ApiContext& context);

  void Register(Routes& routes);

  // The reply's form of a node plan, as an upload's transaction read it.
  static json::object UploadPlan(const NodePlan& plan);
  // Counts what an accepted upload did with node samples.
  void CountNodeSamples(const UploadOutcome& outcome, const Connection& connection,
                        const std::string& stream);
  // Counts a node sample that refused its upload (422).
  void CountInvalidSample();

 private:
  Result<net::Response> ListSampleNodes(const std::string& id, const net::Request& request,
                                        const RequestContext& caller);
  Result<net::Response> NodeSeries(const std::string& id, const std::string& node,
                                   const net::Request& request, const RequestContext& caller);
  Result<net::Response> ShowNodePlan(const std::string& id, const RequestContext& caller);
  Result<net::Response> SetNodePlan(const std::string& id, const net::Request& request,
                                    const RequestContext& caller);
};

}  // namespace uplink::console
