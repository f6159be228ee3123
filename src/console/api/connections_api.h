// Connections and handovers (docs/api.md, "Connections"): the routes that create, show,
// rotate and revoke agent tokens, the one that hands a new token to a terminal, and the one
// that pages through the records agents uploaded.
#pragma once

#include <string>

#include "common/json.h"
#include "console/api/api_context.h"
#include "console/api/routes.h"

namespace uplink::console {

class ConnectionsApi : private ApiArea {
 public:
  explicit ConnectionsApi(const ApiContext& context);

  void Register(Routes& routes);
  // For /metrics: the connections by token status and by liveness (OperationsApi::AddToScrape).
  std::string Scrape();

 private:
  Result<net::Response> CreateConnection(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ListConnections(const RequestContext& caller);
  Result<net::Response> ShowConnection(const std::string& id, const RequestContext& caller);
  Result<net::Response> RotateToken(const std::string& id, const net::Request& request,
                                    const RequestContext& caller);
  Result<net::Response> RevokeConnection(const std::string& id, const net::Request& request,
                                         const RequestContext& caller);
  Result<net::Response> RedeemHandover(const net::Request& request);
  Result<net::Response> ListStreamRecords(const std::string& id, const net::Request& request,
                                          const RequestContext& caller);
  // The connection as it is now, with `extra` fields (a token, a handover code) added.
  Result<net::Response> ConnectionReply(int http_status, const std::string& id,
                                        json::object extra = {});
};

}  // namespace uplink::console
