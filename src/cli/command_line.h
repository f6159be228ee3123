// The `uplink` command line: every command, its operands and flags, and the parser.
//
// One table (Commands()) describes every command; the parser, the help text and the tests
// all read it, so a command cannot exist without its help. Global flags (--console,
// --api-key-file, --output) are accepted anywhere and also read from UPLINK_CONSOLE,
// UPLINK_API_KEY_FILE and UPLINK_OUTPUT; command flags have no environment variables, so a
// stray variable never changes what a command does. There is no flag for a credential.
#pragma once

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/flags.h"
#include "common/status.h"

namespace uplink::cli {

enum class CommandId {
  kLogin,
  kLogout,
  kWhoami,
  kConnectionsList,
  kConnectionsShow,
  kConnectionsCreate,
  kConnectionsRotate,
  kConnectionsRevoke,
  kConnectionsRedeem,
  kConnectionsInstall,
  kConnectionsNamespaces,
  kKubectl,
  kUsersList,
  kUsersShow,
  kUsersCreate,
  kUsersDeactivate,
  kUsersReactivate,
  kUsersSetPassword,
  kApiKeysList,
  kApiKeysCreate,
  kApiKeysRevoke,
  kAudit,
  kTwoFactorStatus,
  kTwoFactorEnroll,
  kTwoFactorConfirm,
  kTwoFactorDisable,
  kTwoFactorRecoveryCodes,
  kTwoFactorRequire,
  kUsersResetTwoFactor,
  kApprovalsList,
  kApprovalsApprove,
  kApprovalsReject,
  kApprovalsRules,
  kApprovalsAddRule,
  kApprovalsRemoveRule,
  kRunsList,
  kRunsShow,
  kOffersList,
  kOffersShow,
  kOffersCreate,
  kOffersReview,
  kOffersSuspend,
  kOffersResume,
  kOffersExecution,
  kReservationsCreate,
  kReservationsList,
  kReservationsShow,
  kReservationsStop,
  kReservationsExtend,
  kRun,
  kSshGrants,
  kSshGrant,
  kSshRevoke,
  kSshSetup,
  kSshProxy,
};

inline constexpr size_t kAnyOperands = std::numeric_limits<size_t>::max();

struct FlagSpec {
  std::string_view name;        // without the dashes
  std::string_view value_name;  // "" for a switch that takes no value
  std::string_view help;
};

struct CommandSpec {
  CommandId id;
  std::string_view group;     // "connections", "users", "api-keys", "two-factor", or ""
  std::string_view name;
  std::string_view alias;     // a second accepted name ("get" for "show"), or ""
  std::string_view operands;  // as shown in usage: "ID_OR_NAME", "[ID|me]"
  size_t min_operands = 0;
  size_t max_operands = 0;  // kAnyOperands: no limit
  std::string_view summary;
  std::vector<FlagSpec> flags;
  std::string_view notes;  // further help, one paragraph

  std::string Path() const;  // "connections create"
};

const std::vector<CommandSpec>& Commands();
// The groups in display order, with one line each.
const std::vector<std::pair<std::string_view, std::string_view>>& Groups();

struct GlobalOptions {
  std::string console;       // --console, UPLINK_CONSOLE
  std::string api_key_file;  // --api-key-file, UPLINK_API_KEY_FILE
  std::string ca_file;       // --ca-file, UPLINK_CA_FILE
  std::string output = "table";
};

struct CommandLine {
  const CommandSpec* command = nullptr;  // null when only a group (or nothing) was named
  std::string group;                     // the group named, when command is null
  bool help = false;                     // -h or --help: show Usage(group, command), exit 0
  std::vector<std::string> operands;
  // How many operands came before a "--", when there was one ('uplink kubectl' passes what
  // follows it to kubectl).
  std::optional<size_t> operands_before_dashes;
  std::map<std::string, std::string, std::less<>> flags;  // a switch holds "true"
  GlobalOptions globals;

  bool Has(std::string_view flag) const { return flags.contains(flag); }
  std::string Get(std::string_view flag, std::string_view fallback = "") const;
};

// Parses the arguments after the program name. A command line that names no command (or
// only a group) without --help is an error, like an unknown command or flag, a flag without
// its value, or the wrong number of operands: InvalidArgument, with a message that says
// which --help to run.
Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args, const EnvLookup& env);

// Help text: for one command, for a group (command null), or for everything (both empty).
std::string Usage(std::string_view group, const CommandSpec* command);

}  // namespace uplink::cli
