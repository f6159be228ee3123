// Experiment runs (docs/api.md, "Experiment runs"): a connection's ML runs as its
// experiments role reported them, filtered and paged, and one run with its params, tags,
// latest metrics and metric histories.
#pragma once

#include <string>

#include "console/api/api_context.h"
#include "console/api/routes.h"

namespace uplink::console {

class RunsApi : private ApiArea {
 public:
  explicit RunsApi(const ApiContext& context);

  void Register(Routes& routes);
  // Counts what an accepted upload did with experiment runs.
  void CountRunItems(const UploadOutcome& outcome);

 private:
  Result<net::Response> ListRuns(const std::string& id, const net::Request& request,
                                 const RequestContext& caller);
  Result<net::Response> ShowRun(const std::string& id, const std::string& run_id,
                                const net::Request& request, const RequestContext& caller);
};

}  // namespace uplink::console
