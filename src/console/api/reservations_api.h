// Reservations (docs/api.md, "Reservations"): GPUs of a qualified offer reserved for a time,
// placed on one approved node; stop and extend; commands run in the workspace, with their
// output streamed. Only a reservation's owner and admins see it and act on it; the supplier
// sees its usage (GPUs, times, state), never commands or output.
#pragma once

#include <string>

#include "console/api/api_context.h"
#include "console/api/routes.h"
#include "console/api/workspace_signals.h"
#include "console/ssh/ssh_relay.h"
#include "protocol/workspace.h"

namespace uplink::console {

// The body of POST /api/v1/reservations/{id}/commands: the code (protocol::
// kMaxWorkspaceCodeBytes), escaped as JSON at up to six bytes a byte, and the other fields.
inline constexpr size_t kMaxCommandRequestBytes = 6 * protocol::kMaxWorkspaceCodeBytes + 4096;

class ReservationsApi : private ApiArea {
 public:
  // `ssh` is told when a reservation's SSH grants change.
  ReservationsApi(const ApiContext& context, WorkspaceSignals& signals, SshRelay& ssh);

  void Register(Routes& routes);
  // NotFound unless the caller owns the reservation or is an admin.
  Result<Reservation> OwnedReservation(const std::string& id, const RequestContext& caller);
  // Marks overdue reservations expired (Store::ExpireOverdueReservations), telling their
  // controllers. Called before reservations are read, and by the controller's sync.
  void ExpireOverdue();

 private:
  Result<net::Response> CreateReservation(const net::Request& request,
                                          const RequestContext& caller);
  Result<net::Response> ListReservations(const net::Request& request,
                                         const RequestContext& caller);
  Result<net::Response> ShowReservation(const std::string& id, const RequestContext& caller);
  Result<net::Response> StopReservation(const std::string& id, const net::Request& request,
                                        const RequestContext& caller);
  Result<net::Response> ExtendReservation(const std::string& id, const net::Request& request,
                                          const RequestContext& caller);
  // SSH grants (docs/api.md, "SSH grants"): the owner's or an admin's, as commands are.
  Result<net::Response> CreateSshGrant(const std::string& id, const net::Request& request,
                                       const RequestContext& caller);
  Result<net::Response> ListSshGrants(const std::string& id, const RequestContext& caller);
  Result<net::Response> RevokeSshGrant(const std::string& id, const std::string& grant_id,
                                       const RequestContext& caller);
  Result<net::Response> CreateCommand(const std::string& id, const net::Request& request,
                                      const RequestContext& caller);
  Result<net::Response> ListCommands(const std::string& id, const RequestContext& caller);
  // GET …/commands/{cid}?offset=N&wait=S: answers at once when there is output past N or the
  // command ended, else when either happens or S seconds pass.
  void ShowCommand(const std::string& id, const std::string& command_id,
                   const net::Request& request, const RequestContext& caller, net::Reply reply);
  Result<net::Response> CommandReply(const WorkspaceCommandRecord& command, std::int64_t offset);

  WorkspaceSignals& signals_;
  SshRelay& ssh_;
};

}  // namespace uplink::console
