#include "cli/cli.h"

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace uplink::cli {
namespace {

Status Dispatch(Invocation& inv) {
  switch (inv.line.command->id) {
    case CommandId::kLogin:
      return RunLogin(inv);
    case CommandId::kLogout:
      return RunLogout(inv);
    case CommandId::kWhoami:
      return RunWhoami(inv);
    case CommandId::kConnectionsList:
      return RunConnectionsList(inv);
    case CommandId::kConnectionsShow:
      return RunConnectionsShow(inv);
    case CommandId::kConnectionsCreate:
      return RunConnectionsCreate(inv);
    case CommandId::kConnectionsRotate:
      return RunConnectionsRotate(inv);
    case CommandId::kConnectionsRevoke:
      return RunConnectionsRevoke(inv);
    case CommandId::kConnectionsRedeem:
      return RunConnectionsRedeem(inv);
    case CommandId::kConnectionsInstall:
      return RunConnectionsInstall(inv);
    case CommandId::kConnectionsNamespaces:
      return RunConnectionsNamespaces(inv);
    case CommandId::kKubectl:
      return RunKubectl(inv);
    case CommandId::kUsersList:
      return RunUsersList(inv);
    case CommandId::kUsersShow:
      return RunUsersShow(inv);
    case CommandId::kUsersCreate:
      return RunUsersCreate(inv);
    case CommandId::kUsersDeactivate:
      return RunUsersDeactivate(inv);
    case CommandId::kUsersReactivate:
      return RunUsersReactivate(inv);
    case CommandId::kUsersSetPassword:
      return RunUsersSetPassword(inv);
    case CommandId::kApiKeysList:
      return RunApiKeysList(inv);
    case CommandId::kApiKeysCreate:
      return RunApiKeysCreate(inv);
    case CommandId::kApiKeysRevoke:
      return RunApiKeysRevoke(inv);
    case CommandId::kAudit:
      return RunAudit(inv);
    case CommandId::kUsersResetTwoFactor:
      return RunUsersResetTwoFactor(inv);
    case CommandId::kTwoFactorStatus:
      return RunTwoFactorStatus(inv);
    case CommandId::kTwoFactorEnroll:
      return RunTwoFactorEnroll(inv);
    case CommandId::kTwoFactorConfirm:
      return RunTwoFactorConfirm(inv);
    case CommandId::kTwoFactorDisable:
      return RunTwoFactorDisable(inv);
    case CommandId::kTwoFactorRecoveryCodes:
      return RunTwoFactorRecoveryCodes(inv);
    case CommandId::kTwoFactorRequire:
      return RunTwoFactorRequire(inv);
    case CommandId::kApprovalsList:
      return RunApprovalsList(inv);
    case CommandId::kApprovalsApprove:
      return RunApprovalsApprove(inv);
    case CommandId::kApprovalsReject:
      return RunApprovalsReject(inv);
    case CommandId::kApprovalsRules:
      return RunApprovalsRules(inv);
    case CommandId::kApprovalsAddRule:
      return RunApprovalsAddRule(inv);
    case CommandId::kApprovalsRemoveRule:
      return RunApprovalsRemoveRule(inv);
    case CommandId::kRunsList:
      return RunRunsList(inv);
    case CommandId::kRunsShow:
      return RunRunsShow(inv);
    case CommandId::kOffersList:
      return RunOffersList(inv);
    case CommandId::kOffersShow:
      return RunOffersShow(inv);
    case CommandId::kOffersCreate:
      return RunOffersCreate(inv);
    case CommandId::kOffersReview:
      return RunOffersReview(inv);
    case CommandId::kOffersSuspend:
      return RunOffersSuspend(inv);
    case CommandId::kOffersResume:
      return RunOffersResume(inv);
    case CommandId::kOffersExecution:
      return RunOffersExecution(inv);
    case CommandId::kReservationsCreate:
      return RunReservationsCreate(inv);
    case CommandId::kReservationsList:
      return RunReservationsList(inv);
    case CommandId::kReservationsShow:
      return RunReservationsShow(inv);
    case CommandId::kReservationsStop:
      return RunReservationsStop(inv);
    case CommandId::kReservationsExtend:
      return RunReservationsExtend(inv);
    case CommandId::kRun:
      return RunWorkspaceCommand(inv);
    case CommandId::kSshGrants:
      return RunSshGrants(inv);
    case CommandId::kSshGrant:
      return RunSshGrant(inv);
    case CommandId::kSshRevoke:
      return RunSshRevoke(inv);
    case CommandId::kSshSetup:
      return RunSshSetup(inv);
    case CommandId::kSshProxy:
      return RunSshProxy(inv);
  }
  return InternalError("a command without a handler");
}

}  // namespace

int Run(const std::vector<std::string>& args, const EnvLookup& env, const Streams& streams,
        Terminal& terminal, const Clock& clock) {
  if (args.empty()) {
    streams.err << Usage("", nullptr);
    return ToInt(ExitCode::kUsage);
  }
  auto line = ParseCommandLine(args, env);
  if (!line.ok()) {
    streams.err << "uplink: " << line.status().message() << "\n";
    return ToInt(ExitCode::kUsage);
  }
  if (line->help) {
    streams.out << Usage(line->group, line->command);
    return ToInt(ExitCode::kOk);
  }
  Invocation inv{*line, env, streams.in, streams.out, streams.err, terminal, clock};
  inv.in_fd = streams.in_fd;
  inv.out_fd = streams.out_fd;
  Status status = Dispatch(inv);
  streams.out.flush();
  if (!status.ok()) {
    streams.err << "uplink: " << status.message() << "\n";
    return ToInt(ExitCodeFor(status));
  }
  return ToInt(inv.success);
}

}  // namespace uplink::cli
