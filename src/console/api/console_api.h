// Every HTTP route of uplink-console: the user API (docs/api.md), the agent API
// (docs/protocol.md) and the operational endpoints (/healthz, /readyz, /metrics).
//
// ConsoleApi composes the areas, each a class that registers its own routes (routes.h) and
// shares what api_context.h names: operations_api.h (operations and the audit log),
// accounts_api.h (sessions, users, API keys), two_factor_api.h (two-factor sign-in and the
// console settings), web_api.h (the web console's session cookie), connections_api.h
// (connections, handovers, records), install_api.h (install commands, the chart repository),
// nodes_api.h (node metrics and plans), runs_api.h (experiment runs), approvals_api.h and
// kubectl_api.h (kubectl commands, their approvals, the namespace scope, cluster snapshots),
// agent_api.h (the agent's inventory, uploads and whoami), offers_api.h, reservations_api.h and
// workspace_agent_api.h (workspace execution: offers, reservations, the controller's calls),
// ssh_api.h (SSH into workspaces through the relay of console/ssh/).
#pragma once

#include <memory>

#include "common/metrics.h"
#include "common/time.h"
#include "console/api/accounts_api.h"
#include "console/api/agent_api.h"
#include "console/api/agent_presence.h"
#include "console/api/api_context.h"
#include "console/api/approvals_api.h"
#include "console/api/command_outcomes.h"
#include "console/api/connections_api.h"
#include "console/api/console_options.h"
#include "console/api/install_api.h"
#include "console/api/kubectl_api.h"
#include "console/api/nodes_api.h"
#include "console/api/offers_api.h"
#include "console/api/operations_api.h"
#include "console/api/reservations_api.h"
#include "console/api/routes.h"
#include "console/api/runs_api.h"
#include "console/api/ssh_api.h"
#include "console/api/two_factor_api.h"
#include "console/api/web_api.h"
#include "console/api/workspace_agent_api.h"
#include "console/api/workspace_signals.h"
#include "console/auth/authenticator.h"
#include "console/auth/failure_guard.h"
#include "console/auth/password.h"
#include "console/commands/command_broker.h"
#include "console/replicas/replica_commands.h"
#include "console/ssh/local_ssh_relay.h"
#include "console/store/store.h"
#include "net/router.h"

namespace uplink::console {

class ConsoleApi {
 public:
  // `store`, `clock` and options.replica_bus and command_claims must outlive this object. Starts the thread that gives up kubectl
  // commands after options.command_timeout, the one that writes agent calls to the store and
  // the one that ends expired approvals; destroying this object stops them and ends the
  // commands still waiting.
  ConsoleApi(Store& store, const Clock& clock, ConsoleOptions options);
  ConsoleApi(const ConsoleApi&) = delete;
  ConsoleApi& operator=(const ConsoleApi&) = delete;
  ~ConsoleApi();

  // Serves every route; valid as long as this object. Some routes answer later, from another
  // thread (kubectl commands, the agent's long poll, uploads once the store commits them).
  const net::Router& router() const { return router_; }
  const metrics::Registry& metrics() const { return metrics_; }
  // For net::ServerOptions::on_request_lost: counted in /metrics by reason.
  void CountLostRequest(std::string_view reason) { routes_.CountLost(reason); }
  void CountConnection(std::string_view event) { routes_.CountConnection(event); }
  // The kubectl commands in flight; tests move a FakeClock and call ExpireDue().
  CommandBroker& commands() { return commands_; }
  // Where sign-ins and password checks run; tests fill its queue.
  PasswordHasher& password_hasher() { return hasher_; }
  // The agent calls noted in memory; tests call Flush().
  AgentPresence& presence() { return presence_; }
  // The SSH relay; tests move a FakeClock and call Sweep().
  LocalSshRelay& ssh_relay() { return ssh_relay_; }
  // Ends approvals whose expiry passed (ApprovalsApi::EndDueApprovals); tests call it after
  // moving a FakeClock.
  void EndDueApprovals() { approvals_.EndDueApprovals(); }
  // Once the server has stopped: returns when every report and upload it handed to the store
  // has been stored and answered (an upload so handed to the remote-write forwarder, which
  // may stop next).
  void FinishStoreWrites() { agent_.FinishStoreWrites(); }

 private:
  const ConsoleOptions options_;
  metrics::Registry metrics_;
  PasswordHasher hasher_;
  FailureGuard guard_;
  Authenticator auth_;
  AgentPresence presence_;
  const ApiContext context_;
  net::Router router_;
  Routes routes_;
  CommandOutcomes outcomes_;
  OperationsApi operations_;
  TwoFactorApi two_factor_;
  AccountsApi accounts_;
  WebApi web_;
  ConnectionsApi connections_;
  InstallApi install_;
  NodesApi nodes_;
  RunsApi runs_;
  ApprovalsApi approvals_;
  KubectlApi kubectl_;
  AgentApi agent_;
  OffersApi offers_;
  // Before the areas that use it; its sweeper stops in ~ConsoleApi.
  LocalSshRelay ssh_relay_;
  ReservationsApi reservations_;
  WorkspaceAgentApi workspace_agent_;
  SshApi ssh_;
  // After the areas: destroyed before them, answering the long polls still waiting while what
  // their callbacks use still exists.
  WorkspaceSignals signals_;
  // With a replica bus: the broker's link to the other replicas. Before the broker, which may
  // call it until destroyed; ~ConsoleApi makes it Leave() the bus first.
  std::unique_ptr<ReplicaCommands> replica_commands_;
  // Last: destroyed first, while what its callbacks use (the areas, the store, metrics) still
  // exists.
  CommandBroker commands_;
};

}  // namespace uplink::console
