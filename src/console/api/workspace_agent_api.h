// The workspace controller's calls (docs/protocol.md, "Workspace execution"): the sync, a
// long poll that reports transitions and gets the reservations and commands to act on, and
// a command's output. Authenticated with the offer's execution credential ("exe_…"), not
// the connection's token, and bound to the connection's cluster (Uplink-Cluster-UID is
// required); a call counts for the connection's liveness as role "workspace".
#pragma once

#include <string>
#include <variant>

#include "console/api/api_context.h"
#include "console/api/reservations_api.h"
#include "console/api/routes.h"
#include "console/api/workspace_signals.h"

namespace uplink::console {

class WorkspaceAgentApi : private ApiArea {
 public:
  WorkspaceAgentApi(const ApiContext& context, WorkspaceSignals& signals,
                    ReservationsApi& reservations);

  void Register(Routes& routes);

  // The offer the presented execution credential belongs to, or the reply refusing it; the
  // SSH tunnel (ssh_api.h) is authenticated exactly as the sync.
  struct Caller {
    Offer offer;
    std::string credential_hash;
  };
  std::variant<Caller, net::Response> Authenticate(const net::Request& request);

 private:
  net::Response Refuse(const net::Request& request, const Offer* matched,
                       std::string_view lookup_prefix, std::string_view reason,
                       const std::string& message);

  void Sync(const net::Request& request, net::Reply reply);
  Result<net::Response> Output(const net::Request& request, const std::string& command_id);
  // The sync reply: `acknowledged` and what the offer's controller must act on now.
  Result<net::Response> SyncReply(const std::string& offer_id,
                                  std::vector<std::string> acknowledged);

  WorkspaceSignals& signals_;
  ReservationsApi& reservations_;
};

}  // namespace uplink::console
