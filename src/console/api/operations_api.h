// The console's operational endpoints (/healthz, /readyz, /metrics) and the audit log
// (docs/api.md, "Audit log").
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "console/api/api_context.h"
#include "console/api/routes.h"

namespace uplink::console {

class OperationsApi : private ApiArea {
 public:
  explicit OperationsApi(const ApiContext& context);

  void Register(Routes& routes);
  // Runs before every scrape of /metrics: updates the caller's gauges and returns text to add
  // after the registry's (a histogram the registry does not hold), or "".
  void AddToScrape(std::function<std::string()> scrape);

 private:
  net::Response Readyz();
  net::Response Metrics();
  Result<net::Response> ListAudit(const net::Request& request, const RequestContext& caller);

  std::vector<std::function<std::string()>> scrapes_;
};

}  // namespace uplink::console
