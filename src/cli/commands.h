// The command handlers and what they share: the invocation (command line, streams,
// terminal, clock), opening the console with the right credential, and the password
// confirmation that sensitive calls may need.
#pragma once

#include <chrono>
#include <cstddef>
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "cli/api_client.h"
#include "cli/command_line.h"
#include "cli/credentials.h"
#include "cli/exit_codes.h"
#include "cli/terminal.h"
#include "common/flags.h"
#include "common/json.h"
#include "common/time.h"

namespace uplink::cli {

// `uplink kubectl` waits as long as the console holds a command (60 s) and a little more, and
// takes kubectl's output: up to 4 MiB on stdout and on stderr, escaped as JSON.
inline constexpr std::chrono::milliseconds kKubectlRequestTimeout{75'000};
inline constexpr size_t kMaxKubectlReplyBytes = 64 << 20;
// `uplink run` reads a command's output in long polls of up to 25 s, each at most 1 MiB of
// output escaped as JSON.
inline constexpr std::chrono::milliseconds kRunRequestTimeout{45'000};
inline constexpr size_t kMaxRunReplyBytes = 8 << 20;

struct Invocation {
  const CommandLine& line;
  const EnvLookup& env;
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
  Terminal& terminal;
  const Clock& clock;
  // The exit code when the handler returns Ok; install sets kInstallIncomplete when it fell
  // back to printing the token.
  ExitCode success = ExitCode::kOk;
  // Standard input and output as file descriptors (Streams), for `uplink ssh proxy`.
  int in_fd = 0;
  int out_fd = 1;

  bool json() const { return line.globals.output == "json"; }
  const std::string& operand(size_t i) const { return line.operands.at(i); }
};

// A client that carries the command's credential (FindCredential's precedence). The console
// is --console, or the one the stored credential belongs to; a stored credential is never
// sent to another console.
struct Session {
  std::unique_ptr<ApiClient> api;
  Credential credential;
};
Result<Session> OpenSession(const Invocation& inv);

// A client without a credential (sign-in, redeem): --console, else the stored console.
Result<std::unique_ptr<ApiClient>> OpenAnonymous(const Invocation& inv);

// A sensitive call (docs/api.md). When a session token's confirmation has lapsed (403
// confirmation_required) and there is a terminal, asks for the password ("Confirm your
// password to <purpose>: "), confirms it and tries once more; without a terminal the 403
// stands.
Result<json::object> CallSensitive(Invocation& inv, ApiClient& api, std::string_view method,
                                   std::string_view target, const std::optional<json::object>& body,
                                   std::string_view purpose);

// Prints `reply` as JSON on one line.
void PrintJson(std::ostream& out, const json::object& reply);

// A password from the first line of stdin (--password-stdin), or asked on the terminal
// without echo; InvalidArgument when neither is possible.
Result<Secret> ReadPassword(Invocation& inv, std::string_view prompt);

// The handlers, one per command (cli/command_line.h).
Status RunLogin(Invocation& inv);
Status RunLogout(Invocation& inv);
Status RunWhoami(Invocation& inv);
Status RunConnectionsList(Invocation& inv);
Status RunConnectionsShow(Invocation& inv);
Status RunConnectionsCreate(Invocation& inv);
Status RunConnectionsRotate(Invocation& inv);
Status RunConnectionsRevoke(Invocation& inv);
Status RunConnectionsRedeem(Invocation& inv);
Status RunConnectionsInstall(Invocation& inv);
Status RunConnectionsNamespaces(Invocation& inv);
Status RunKubectl(Invocation& inv);
Status RunUsersList(Invocation& inv);
Status RunUsersShow(Invocation& inv);
Status RunUsersCreate(Invocation& inv);
Status RunUsersDeactivate(Invocation& inv);
Status RunUsersReactivate(Invocation& inv);
Status RunUsersSetPassword(Invocation& inv);
Status RunApiKeysList(Invocation& inv);
Status RunApiKeysCreate(Invocation& inv);
Status RunApiKeysRevoke(Invocation& inv);
Status RunAudit(Invocation& inv);
Status RunUsersResetTwoFactor(Invocation& inv);
Status RunTwoFactorStatus(Invocation& inv);
Status RunTwoFactorEnroll(Invocation& inv);
Status RunTwoFactorConfirm(Invocation& inv);
Status RunTwoFactorDisable(Invocation& inv);
Status RunTwoFactorRecoveryCodes(Invocation& inv);
Status RunTwoFactorRequire(Invocation& inv);

// The second factor for a call that needs one: the next line of stdin (--code-stdin), or asked
// on the terminal without echo; as the body field the console expects, {"code": "123456"} for
// six digits and {"recovery_code": ...} otherwise.
Result<json::object> ReadSecondFactor(Invocation& inv, std::string_view prompt);
Status RunApprovalsList(Invocation& inv);
Status RunApprovalsApprove(Invocation& inv);
Status RunApprovalsReject(Invocation& inv);
Status RunApprovalsRules(Invocation& inv);
Status RunApprovalsAddRule(Invocation& inv);
Status RunApprovalsRemoveRule(Invocation& inv);
Status RunRunsList(Invocation& inv);
Status RunRunsShow(Invocation& inv);
// Workspace execution (workspace_commands.cc): offers, reservations, `uplink run`.
Status RunOffersList(Invocation& inv);
Status RunOffersShow(Invocation& inv);
Status RunOffersCreate(Invocation& inv);
Status RunOffersReview(Invocation& inv);
Status RunOffersSuspend(Invocation& inv);
Status RunOffersResume(Invocation& inv);
Status RunOffersExecution(Invocation& inv);
Status RunReservationsCreate(Invocation& inv);
Status RunReservationsList(Invocation& inv);
Status RunReservationsShow(Invocation& inv);
Status RunReservationsStop(Invocation& inv);
Status RunReservationsExtend(Invocation& inv);
Status RunWorkspaceCommand(Invocation& inv);
// SSH access to a workspace (ssh_commands.cc): grants, the ssh config, the ProxyCommand.
Status RunSshGrants(Invocation& inv);
Status RunSshGrant(Invocation& inv);
Status RunSshRevoke(Invocation& inv);
Status RunSshSetup(Invocation& inv);
Status RunSshProxy(Invocation& inv);

}  // namespace uplink::cli
