// Approval rules and the kubectl commands that wait for approval (docs/api.md, "Approval
// rules"). A command that matches one of its connection's rules is recorded in the store as
// waiting and answered 202; the owner or an admin approves or rejects it; an approved one is
// queued like any command, so the 60 s pickup limit starts at the approval, and its end is
// recorded with the approval for the requester to read. Nothing approves by itself: the only
// way out of waiting besides a decision is expiry.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "console/api/api_context.h"
#include "console/api/command_outcomes.h"
#include "console/api/routes.h"
#include "console/commands/command_broker.h"

namespace uplink::console {

class ApprovalsApi : private ApiArea {
 public:
  // `commands` runs approved commands; it and `outcomes` must outlive this object.
  ApprovalsApi(const ApiContext& context, CommandBroker& commands, CommandOutcomes& outcomes);
  // Stops the sweeper (Stop).
  ~ApprovalsApi();

  void Register(Routes& routes);
  // Ends what a stopped console left approved but unanswered, then starts the thread that
  // ends expired approvals every few seconds.
  void Start();
  // Stops that thread; safe to call again.
  void Stop();
  // Ends approvals whose expiry passed and forgets old ones (docs/api.md, "Approval rules");
  // the sweeper does it every few seconds, tests call it after moving a FakeClock.
  void EndDueApprovals();

  // Records a command that matched `rule` as waiting for approval; the 202 reply.
  net::Response RequestApproval(const Connection& connection, const RequestContext& caller,
                                const std::vector<std::string>& argv, const ApprovalRule& rule);

 private:
  Result<net::Response> ListApprovalRules(const std::string& id, const RequestContext& caller);
  Result<net::Response> AddApprovalRule(const std::string& id, const net::Request& request,
                                        const RequestContext& caller);
  Result<net::Response> RemoveApprovalRule(const std::string& id, const std::string& rule_id,
                                           const RequestContext& caller);
  Result<net::Response> ListApprovals(const net::Request& request, const RequestContext& caller);
  Result<net::Response> ShowCommand(const std::string& id, const std::string& command_id,
                                    const RequestContext& caller);
  Result<net::Response> DecideApproval(const std::string& command_id, const net::Request& request,
                                       const RequestContext& caller, bool approve);
  // Queues an approved command; its end is recorded with the approval.
  void RunApproved(const Connection& connection, const CommandApproval& approval);
  void SweeperLoop();
  // Ends expired approvals; with `abandon_approved` (at start-up), approved commands too.
  void EndApprovals(bool abandon_approved);

  CommandBroker& commands_;
  CommandOutcomes& outcomes_;
  std::mutex sweeper_mutex_;
  std::condition_variable sweeper_wake_;
  bool sweeper_stopping_ = false;
  std::thread sweeper_;
};

}  // namespace uplink::console
