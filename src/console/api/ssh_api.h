// SSH access to workspaces (docs/protocol.md, "SSH relay"; docs/api.md, "SSH"): the workspace
// controller's control tunnel and data channels, the user's client channel, and the readiness
// the web console and `uplink ssh setup` read. The relay behind them (console/ssh/) pairs the
// channels; this area authenticates, checks readiness and refuses before any upgrade.
#pragma once

#include <string>

#include "console/api/api_context.h"
#include "console/api/reservations_api.h"
#include "console/api/routes.h"
#include "console/api/workspace_agent_api.h"
#include "console/ssh/ssh_relay.h"

namespace uplink::console {

// Whether connection setup is offered for a reservation, and why not.
struct SshReadiness {
  bool ready = false;
  std::string code;    // the refusal's error code when not ready (ssh_disabled, ...)
  std::string reason;  // in words, "" when ready
};

class SshApi : private ApiArea {
 public:
  SshApi(const ApiContext& context, WorkspaceAgentApi& workspace_agent,
         ReservationsApi& reservations, SshRelay& relay);

  void Register(Routes& routes);

 private:
  net::Response Tunnel(const net::Request& request);
  net::Response AgentChannel(const net::Request& request, const std::string& channel_id);
  Result<net::Response> Connect(const std::string& id, const net::Request& request,
                                const RequestContext& caller);
  Result<net::Response> Readiness(const std::string& id, const RequestContext& caller);

  SshReadiness ReadinessOf(const Reservation& reservation, const Offer& offer,
                           const SshRelayView& view) const;

  WorkspaceAgentApi& workspace_agent_;
  ReservationsApi& reservations_;
  SshRelay& relay_;
};

}  // namespace uplink::console
