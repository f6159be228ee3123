// The agent's chart repository (GET /charts/index.yaml and the packaged chart) and the
// install commands of a connection (POST /api/v1/connections/{id}/install): docs/api.md.
#pragma once

#include <string>
#include <string_view>

#include "console/api/api_context.h"
#include "console/api/routes.h"

namespace uplink::console {

class InstallApi : private ApiArea {
 public:
  explicit InstallApi(const ApiContext& context);

  void Register(Routes& routes);

 private:
  net::Response ServeChart(const net::Request& request, std::string_view file);
  Result<net::Response> GenerateInstall(const std::string& id, const net::Request& request,
                                        const RequestContext& caller);

  const WallTime started_at_;  // the repository's index says its chart was added then
};

}  // namespace uplink::console
