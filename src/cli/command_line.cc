#include "cli/command_line.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace uplink::cli {
namespace {

constexpr FlagSpec kTokenOut{"token-out", "F",
                             "write the agent token to the new file F (mode 0600) instead of "
                             "showing it; F must not exist"};
constexpr FlagSpec kReadNamespaces{
    "read-namespaces", "NS,...",
    "the namespaces 'uplink kubectl' and the cluster view may read: names, * for all, '' for "
    "cluster-scoped reads only (asked on a terminal when absent; Enter chooses later)"};
constexpr FlagSpec kCodeStdin{"code-stdin", "",
                              "read the two-factor code (or a recovery code) from the next line "
                              "of stdin instead of asking on the terminal"};
constexpr FlagSpec kRecoveryCodesOut{"recovery-codes-out", "F",
                                     "write the recovery codes to the new file F (mode 0600) "
                                     "instead of showing them; F must not exist"};
constexpr FlagSpec kOwnPasswordStdin{
    "password-stdin", "", "read your password from the first line of stdin"};

constexpr FlagSpec kHandover{"handover", "",
                             "issue a one-time handover code (10 minutes) instead of the token; "
                             "redeem it with 'uplink connections redeem'"};

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec> flags{
      {"console", "URL", "the console, https:// (http:// only on loopback) [UPLINK_CONSOLE]"},
      {"api-key-file", "F", "read the API key from file F [UPLINK_API_KEY_FILE]"},
      {"ca-file", "F",
       "trust the console's certificate from the PEM CA bundle F (a private CA) [UPLINK_CA_FILE]"},
      {"output", "FORMAT", "table or json [UPLINK_OUTPUT; default table]"},
      {"help", "", "show help for the command (also -h)"},
  };
  return flags;
}

const FlagSpec* FindFlag(const std::vector<FlagSpec>& flags, std::string_view name) {
  auto it =
      std::find_if(flags.begin(), flags.end(), [&](const FlagSpec& f) { return f.name == name; });
  return it == flags.end() ? nullptr : &*it;
}

std::string HelpCommand(std::string_view group, const CommandSpec* command) {
  std::string path = command != nullptr ? command->Path() : std::string(group);
  return "run 'uplink " + (path.empty() ? std::string() : path + " ") + "--help'";
}

constexpr size_t kHelpWidth = 96;

// `text` as lines of at most kHelpWidth characters, each after the first indented by `indent`.
std::string Wrap(std::string_view text, size_t indent, size_t first_column) {
  std::string out;
  size_t column = first_column;
  for (bool first = true; !text.empty(); first = false) {
    size_t space = text.find(' ');
    std::string_view word = text.substr(0, space);
    if (!first && column + 1 + word.size() > kHelpWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (!first) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  return out;
}

void AppendFlags(std::string& out, const std::vector<FlagSpec>& flags) {
  size_t width = 0;
  for (const auto& f : flags) {
    width = std::max(width, f.name.size() + (f.value_name.empty() ? 0 : f.value_name.size() + 1));
  }
  for (const auto& f : flags) {
    std::string left = "--" + std::string(f.name);
    if (!f.value_name.empty()) left += " " + std::string(f.value_name);
    out += "  " + left + std::string(width + 4 - left.size(), ' ') +
           Wrap(f.help, width + 6, width + 6) + "\n";
  }
}

std::string Sentence(std::string_view summary) {
  std::string text(summary);
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text + ".";
}

}  // namespace

std::string CommandSpec::Path() const {
  return group.empty() ? std::string(name) : std::string(group) + " " + std::string(name);
}

std::string CommandLine::Get(std::string_view flag, std::string_view fallback) const {
  auto it = flags.find(flag);
  return it == flags.end() ? std::string(fallback) : it->second;
}

const std::vector<std::pair<std::string_view, std::string_view>>& Groups() {
  static const std::vector<std::pair<std::string_view, std::string_view>> groups{
      {"connections", "clusters connected to the console and their agent tokens"},
      {"users", "people who may sign in (admins manage everyone, members themselves)"},
      {"api-keys", "your API keys, for scripts"},
      {"two-factor", "two-factor sign-in: an authenticator app's codes beside your password"},
      {"approvals", "kubectl commands that wait for approval, and the rules that send them"},
      {"runs", "ML experiment runs (MLflow, Weights & Biases) the experiments agent reported"},
      {"offers", "GPU capacity you supply: offers, their review, the workspace controller's values"},
      {"reservations", "GPUs you reserved on qualified offers, and their workspaces"},
      {"ssh", "SSH, scp, sftp and VS Code into a reservation's workspace, with plain OpenSSH"},
  };
  return groups;
}

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec> commands{
      {.id = CommandId::kLogin,
       .name = "login",
       .summary = "sign in and keep the credential in the credentials file",
       .flags = {{"email", "E", "the email to sign in with (asked on the terminal when absent)"},
                 {"password-stdin", "", "read the password from the first line of stdin"},
                 {"api-key-stdin", "", "store an API key read from stdin instead (checked first)"},
                 {"confirm", "",
                  "confirm the current session's password (sensitive calls need it)"},
                 kCodeStdin},
       .notes = "The password is asked on the terminal without echo. The session (skt_, 12 "
                "hours) or API key is saved to $XDG_CONFIG_HOME/uplink/credentials.json (or "
                "~/.config/uplink/credentials.json), mode 0600. A session may create or rotate "
                "agent tokens and create API keys only within 5 minutes of a password "
                "confirmation; uplink asks for it when a terminal is there, or run 'uplink login "
                "--confirm' first. With two-factor sign-in, the code is asked after the password "
                "(or read from the line after it with --code-stdin)."},
      {.id = CommandId::kLogout,
       .name = "logout",
       .summary = "end the stored session and remove the stored credential",
       .notes = "A stored session is revoked on the console; a stored API key stays valid "
                "(revoke it with 'uplink api-keys revoke')."},
      {.id = CommandId::kWhoami,
       .name = "whoami",
       .summary = "show who the credential belongs to and what kind it is"},
      {.id = CommandId::kConnectionsList,
       .group = "connections",
       .name = "list",
       .summary = "list connections with status, liveness, nodes and GPUs"},
      {.id = CommandId::kConnectionsShow,
       .group = "connections",
       .name = "show",
       .alias = "get",
       .operands = "ID_OR_NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "show one connection: nodes, agents, handover and security events",
       .notes = "ID_OR_NAME is a connection id (16 hex digits) or a cluster name."},
      {.id = CommandId::kConnectionsCreate,
       .group = "connections",
       .name = "create",
       .operands = "CLUSTER_NAME",
       .max_operands = 1,
       .summary = "create a connection; its agent token is shown once",
       .flags = {{"agent-name", "A", "the agent's name [default: uplink-agent]"},
                 {"cluster-name", "C", "the cluster name (instead of the CLUSTER_NAME operand)"},
                 {"expires-at", "T", "token expiry, RFC 3339 (default and maximum: the console's)"},
                 {"expires-in", "D", "token expiry as a duration from now: 30d, 12h"},
                 kHandover,
                 kTokenOut,
                 kReadNamespaces},
       .notes = "The token is printed once on stdout, or written to --token-out F. With --output "
                "json it is part of the JSON (unless --token-out)."},
      {.id = CommandId::kConnectionsRotate,
       .group = "connections",
       .name = "rotate",
       .operands = "ID_OR_NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "issue a new agent token; the old one stops working at once",
       .flags = {kHandover, kTokenOut,
                 {"renew", "",
                  "generate a new installation code: valid for the console's default lifetime "
                  "(90 days) from now, instead of keeping the current expiry"}},
       .notes = "A future expiry carries over unless --renew is given. Any pending handover code "
                "stops working."},
      {.id = CommandId::kConnectionsRevoke,
       .group = "connections",
       .name = "revoke",
       .operands = "ID_OR_NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "turn the agent token off; the agent is refused at once"},
      {.id = CommandId::kConnectionsRedeem,
       .group = "connections",
       .name = "redeem",
       .summary = "turn a handover code into the agent token, once",
       .flags = {{"code-stdin", "", "read the code from stdin instead of asking on the terminal"},
                 kTokenOut},
       .notes = "The code is asked on the terminal without echo; it is never taken from the "
                "command line. No sign-in is needed: the code is the credential."},
      {.id = CommandId::kConnectionsInstall,
       .group = "connections",
       .name = "install",
       .operands = "CLUSTER_NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "put the cluster's agent token in a Kubernetes Secret with kubectl, and print "
                  "the helm commands for the workloads you choose",
       .flags = {{"workloads", "W",
                  "inventory (the GPU node inventory alone) or all (inventory, cluster and node "
                  "telemetry) [default: all; asked on a terminal]"},
                 {"gpu-runtime-class", "NAME",
                  "the runtime class that gives the node pods the GPU driver [default: nvidia; "
                  "asked]"},
                 {"no-gpu-runtime-class", "", "no runtime class: a cluster without GPUs"},
                 {"selector", "SELECTOR",
                  "the label selector of the GPU nodes to report [default: "
                  "nvidia.com/gpu.present=true; asked]"},
                 {"agent-console", "URL",
                  "the console's address as the cluster reaches it [default: --console]"},
                 {"namespace", "NS", "the agent's namespace [default: uplink]"},
                 {"secret-name", "S", "the Secret holding the token [default: uplink-agent-token]"},
                 {"pod-security", "LEVEL",
                  "the namespace's Pod Security level [default: privileged with the node "
                  "DaemonSet, which mounts host paths; else restricted]"},
                 {"context", "CTX", "the kubectl context to use"},
                 {"kubeconfig", "F", "the kubeconfig file to use"},
                 {"kubectl", "PATH", "the kubectl program [default: kubectl on PATH]"},
                 {"agent-name", "A",
                  "the agent's name for a new connection [default: uplink-agent]"},
                 {"yes", "", "ask nothing: take the flags and defaults, and change the cluster"},
                 kReadNamespaces},
       .notes = "On a terminal it asks which workloads to install, the GPU runtime class and the "
                "GPU node selector, shows the kubectl context and asks before it changes "
                "anything. The token stays in memory and reaches kubectl only on its standard "
                "input. If you answer no, or kubectl is missing or fails, the token is printed "
                "once with the commands to run yourself (exit 0 when you said no, 9 when "
                "something failed). A connection whose agent has reported keeps its token "
                "unless you answer yes: rotating it would cut that agent off. The helm commands "
                "install the chart from the console's own repository at the console's chart "
                "version, with the agent images by digest when the console knows them. A new "
                "connection's namespace scope is --read-namespaces, or asked."},
      {.id = CommandId::kConnectionsNamespaces,
       .group = "connections",
       .name = "namespaces",
       .operands = "ID_OR_NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "show or choose the namespaces 'uplink kubectl' and the cluster view may read",
       .flags = {{"set", "NS,...",
                  "allow exactly these namespaces, comma-separated (empty: cluster-scoped reads "
                  "only)"},
                 {"all", "", "allow every namespace"}},
       .notes = "Without --set or --all, shows the current choice. Until namespaces are chosen, "
                "every 'uplink kubectl' command on the connection is refused. Reads of "
                "cluster-scoped things (nodes, namespaces, api-resources, version) are allowed "
                "once a choice is made; commands outside the chosen namespaces, -A included, "
                "are refused."},
      {.id = CommandId::kKubectl,
       .name = "kubectl",
       .operands = "ID_OR_NAME -- KUBECTL_ARGS...",
       .min_operands = 1,
       .max_operands = kAnyOperands,
       .summary = "run a read-only kubectl command in the cluster, through its agent",
       .notes = "Everything after -- goes to kubectl, as in 'uplink kubectl prod -- get pods -n "
                "ml'. The console and the agent allow only reads (get, describe, logs, top, "
                "api-resources, api-versions, version, cluster-info, explain) within the "
                "connection's namespaces ('uplink connections namespaces'). kubectl's output "
                "goes to stdout and stderr and uplink exits with kubectl's exit code; a refused "
                "command exits 4, and one the agent did not answer within 60 s exits 1. A "
                "command that matches an approval rule waits, saying so, until the owner or an "
                "admin approves it (then it runs) or rejects it (exit 4), at most 15 minutes."},
      {.id = CommandId::kUsersList,
       .group = "users",
       .name = "list",
       .summary = "list users (admins only)"},
      {.id = CommandId::kUsersShow,
       .group = "users",
       .name = "show",
       .alias = "get",
       .operands = "ID|EMAIL|me",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "show one user"},
      {.id = CommandId::kUsersCreate,
       .group = "users",
       .name = "create",
       .operands = "EMAIL",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "create a user (admins only)",
       .flags = {{"role", "ROLE", "member or admin [default: member]"},
                 {"password-stdin", "",
                  "read the new user's password from the first line of stdin"}},
       .notes = "Without --password-stdin the password is asked twice on the terminal (leave it "
                "empty for none); with no terminal the user is created without a password, and "
                "an admin can set one later with 'uplink users set-password EMAIL'."},
      {.id = CommandId::kUsersDeactivate,
       .group = "users",
       .name = "deactivate",
       .operands = "ID|EMAIL",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "deactivate a user: their keys, sessions and agent tokens stop working"},
      {.id = CommandId::kUsersReactivate,
       .group = "users",
       .name = "reactivate",
       .operands = "ID|EMAIL",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "reactivate a user: their API keys and agent tokens work again"},
      {.id = CommandId::kUsersSetPassword,
       .group = "users",
       .name = "set-password",
       .operands = "[ID|EMAIL|me]",
       .max_operands = 1,
       .summary = "set a password (your own by default); the user's other sessions end",
       .flags = {{"password-stdin", "",
                  "read from stdin: for your own existing password, the current password on "
                  "the first line and the new one on the second; otherwise the new one on the "
                  "first"}},
       .notes = "Without --password-stdin the passwords are asked on the terminal without echo."},
      {.id = CommandId::kApiKeysList,
       .group = "api-keys",
       .name = "list",
       .summary = "list your API keys"},
      {.id = CommandId::kApiKeysCreate,
       .group = "api-keys",
       .name = "create",
       .operands = "NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "create an API key; it is shown once",
       .flags = {{"expires-at", "T", "expiry, RFC 3339 [default: never]"},
                 {"key-out", "F",
                  "write the key to the new file F (mode 0600) instead of showing it"}}},
      {.id = CommandId::kApiKeysRevoke,
       .group = "api-keys",
       .name = "revoke",
       .operands = "ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "revoke an API key"},
      {.id = CommandId::kAudit,
       .name = "audit",
       .summary = "show the audit log, newest first",
       .flags = {{"connection", "ID_OR_NAME", "only events about this connection"},
                 {"action", "A", "only this action, e.g. connection.rotate"},
                 {"limit", "N", "at most N events, 1-500 [default: 100]"},
                 {"before", "ID", "events older than this event id (the next page)"}},
       .notes = "Admins see every event; members see their own and those about their things."},
      {.id = CommandId::kUsersResetTwoFactor,
       .group = "users",
       .name = "reset-two-factor",
       .operands = "ID|EMAIL",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "turn off another user's two-factor sign-in (admins; a lost authenticator)",
       .notes = "For a user who lost both their authenticator and their recovery codes: they "
                "sign in with their password alone again, and must set two-factor up again "
                "if the console requires it. Your own is turned off with 'uplink two-factor "
                "disable'."},
      {.id = CommandId::kTwoFactorStatus,
       .group = "two-factor",
       .name = "status",
       .summary = "show whether your two-factor sign-in is on and whether the console requires it"},
      {.id = CommandId::kTwoFactorEnroll,
       .group = "two-factor",
       .name = "enroll",
       .summary = "set up two-factor sign-in: scan the QR code, then prove a first code",
       .flags = {kRecoveryCodesOut},
       .notes = "Shows a QR code on the terminal and the secret as text for typing into an "
                "authenticator app (TOTP: 6 digits every 30 s), then asks for the app's code. "
                "Two-factor is on only once a code is proved; then 10 recovery codes are shown "
                "once, each good for one sign-in without the app. Without a terminal it prints "
                "the secret and the otpauth:// URI; prove a code with 'uplink two-factor "
                "confirm --code-stdin'. Running it again before confirming starts over with a "
                "new secret."},
      {.id = CommandId::kTwoFactorConfirm,
       .group = "two-factor",
       .name = "confirm",
       .summary = "finish setting up two-factor sign-in with a first code from the app",
       .flags = {kCodeStdin, kRecoveryCodesOut}},
      {.id = CommandId::kTwoFactorDisable,
       .group = "two-factor",
       .name = "disable",
       .summary = "turn your two-factor sign-in off (your password and a code)",
       .flags = {kOwnPasswordStdin, kCodeStdin},
       .notes = "Asks for your password and a code (or a recovery code) on the terminal, or reads "
                "them from stdin: the password on the first line (--password-stdin), the code "
                "on the next (--code-stdin). While the console requires two-factor sign-in, "
                "turning yours off leaves your credentials able to do nothing but set it up "
                "again, and stops the agents of your connections until you do."},
      {.id = CommandId::kTwoFactorRecoveryCodes,
       .group = "two-factor",
       .name = "recovery-codes",
       .summary = "replace your recovery codes with 10 new ones (your password and a code)",
       .flags = {kOwnPasswordStdin, kCodeStdin, kRecoveryCodesOut},
       .notes = "The old codes stop working at once. Input as for 'uplink two-factor disable'."},
      {.id = CommandId::kTwoFactorRequire,
       .group = "two-factor",
       .name = "require",
       .operands = "[on|off]",
       .max_operands = 1,
       .summary = "show or set whether the console requires two-factor sign-in (admins set it)",
       .notes = "While it is on, a user without two-factor sign-in can sign in but do nothing "
                "except set it up, and the agent tokens of their connections are refused "
                "(owner_needs_two_factor) until they do. Without on or off it shows the setting "
                "and, for admins, who has not set it up. Turning it on needs your own "
                "two-factor sign-in first."},
      {.id = CommandId::kApprovalsList,
       .group = "approvals",
       .name = "list",
       .summary = "list the kubectl commands waiting for your approval",
       .flags = {{"connection", "ID_OR_NAME", "only this connection's"},
                 {"all", "", "also those decided, expired or run in the last 24 hours"}},
       .notes = "You see the commands on your connections; an admin sees every one."},
      {.id = CommandId::kApprovalsApprove,
       .group = "approvals",
       .name = "approve",
       .operands = "COMMAND_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "approve a waiting kubectl command: it runs now",
       .notes = "The connection's owner or an admin approves, never with the credential that "
                "asked. The command then runs like any other: the agent has 60 s from now to "
                "take it, and the requester gets its output."},
      {.id = CommandId::kApprovalsReject,
       .group = "approvals",
       .name = "reject",
       .operands = "COMMAND_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "reject a waiting kubectl command: it never runs",
       .flags = {{"reason", "TEXT", "why, shown to the requester"}}},
      {.id = CommandId::kApprovalsRules,
       .group = "approvals",
       .name = "rules",
       .operands = "ID_OR_NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "list a connection's approval rules"},
      {.id = CommandId::kApprovalsAddRule,
       .group = "approvals",
       .name = "add-rule",
       .operands = "ID_OR_NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "send the commands a rule matches to approval instead of running them",
       .flags = {{"verb", "VERB", "get, logs, top, describe, ... [default: * for any]"},
                 {"resource", "TYPE", "pods, po, deployments, ... in any spelling [default: *]"},
                 {"namespace", "NS", "a namespace [default: * for any]"}},
       .notes = "A command matches when its verb is the rule's, it reads the rule's resource, "
                "and it reads the rule's namespace (with -n, default without it, or every "
                "namespace with -A); '*' matches anything. Example: 'uplink approvals add-rule "
                "prod --verb logs --namespace payments'."},
      {.id = CommandId::kApprovalsRemoveRule,
       .group = "approvals",
       .name = "remove-rule",
       .operands = "ID_OR_NAME RULE_ID",
       .min_operands = 2,
       .max_operands = 2,
       .summary = "remove an approval rule; commands already waiting still need a decision"},
      {.id = CommandId::kRunsList,
       .group = "runs",
       .name = "list",
       .operands = "ID_OR_NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "list a connection's experiment runs, newest first",
       .flags = {{"experiment", "E", "only runs of this experiment (name or id)"},
                 {"status", "S",
                  "only runs with this status: running, scheduled, finished, failed, killed, "
                  "crashed, unknown"},
                 {"user", "U", "only runs of this user"},
                 {"since", "T", "only runs started at or after T (RFC 3339)"},
                 {"limit", "N", "at most N runs, 1-500 [default: 50]"}},
       .notes = "Problems the agent reported (a run or file it could not read) are listed "
                "after the runs."},
      {.id = CommandId::kRunsShow,
       .group = "runs",
       .name = "show",
       .alias = "get",
       .operands = "ID_OR_NAME RUN_ID",
       .min_operands = 2,
       .max_operands = 2,
       .summary = "show one run: params, tags and latest metrics (--output json adds the "
                  "history of each metric)",
       .flags = {{"metric", "M,...", "with --output json, the history of these metrics only"},
                 {"points", "N", "with --output json, at most N points per metric, 2-10000 "
                                 "[default: 500]"}}},
      {.id = CommandId::kOffersList,
       .group = "offers",
       .name = "list",
       .summary = "list your offers (admins: every offer) and others' qualified ones",
       .flags = {{"state", "S", "only offers in this state: draft, connected, in_review, "
                                "qualified, suspended"}}},
      {.id = CommandId::kOffersShow,
       .group = "offers",
       .name = "show",
       .alias = "get",
       .operands = "OFFER_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "show an offer: its review, the nodes its cluster reported, execution, usage"},
      {.id = CommandId::kOffersCreate,
       .group = "offers",
       .name = "create",
       .operands = "CLUSTER_NAME",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "offer GPU capacity and connect its cluster in one step (shows the inventory "
                  "token once)",
       .flags = {{"gpus", "N", "how many GPUs you supply (the capacity limit)"},
                 {"country", "CC", "where they are, ISO 3166 (DE, US, ...)"},
                 {"price", "P", "price per GPU-hour, such as 2.10"},
                 {"currency", "CUR", "ISO 4217 (EUR, USD, ...)"},
                 {"available-from", "T", "offered from T (RFC 3339) [default: now]"},
                 {"available-until", "T", "offered until T (RFC 3339) [default: always]"},
                 {"max-lifetime", "D", "the longest reservation, such as 24h [default: 24h]"},
                 {"token-out", "FILE", "write the inventory token to FILE (mode 0600) instead "
                                       "of showing it"}},
       .notes = "Install the inventory agent with the token ('uplink connections install' "
                "takes the connection); once it reports, an admin reviews the offer."},
      {.id = CommandId::kOffersReview,
       .group = "offers",
       .name = "review",
       .operands = "OFFER_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "record the resource review of an offer (admins only)",
       .flags = {{"checks", "LIST",
                  "the checks done: all, or any of authority_confirmed, hardware_compatible, "
                  "isolation_verified, expiry_and_cleanup_checked, disk_eviction_tested, "
                  "network_policy_enforced, price_includes_traffic"},
                 {"approve-nodes", "N,...", "the nodes that may run workspaces, from the "
                                            "reported inventory"},
                 {"cpu-per-gpu", "Q", "CPU included per GPU, such as 8 or 7500m"},
                 {"memory-per-gpu", "Q", "memory per GPU, such as 64Gi"},
                 {"disk-per-gpu", "Q", "disk per GPU, such as 100Gi"},
                 {"transfer-budget", "Q", "network transfer budget, such as 1Ti"},
                 {"notes", "TEXT", "what the reviewer wants on record"}},
       .notes = "The offer is qualified, and bookable, only when every check is done and at "
                "least one node is approved; otherwise it stays in review."},
      {.id = CommandId::kOffersSuspend,
       .group = "offers",
       .name = "suspend",
       .operands = "OFFER_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "stop new reservations on an offer (running ones go on)",
       .flags = {{"reason", "TEXT", "why, for the audit log"}}},
      {.id = CommandId::kOffersResume,
       .group = "offers",
       .name = "resume",
       .operands = "OFFER_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "make a suspended offer bookable again (admins only)",
       .flags = {{"reason", "TEXT", "why, for the audit log"}}},
      {.id = CommandId::kOffersExecution,
       .group = "offers",
       .name = "execution",
       .operands = "OFFER_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "get the workspace controller's credential and execution.json for a qualified "
                  "offer, and the helm command that installs it",
       .flags = {{"out", "FILE", "where to write execution.json (mode 0600, a new file) "
                                 "[default: execution.json]"},
                 {"credential-out", "FILE", "write the execution credential to FILE (mode 0600) "
                                            "instead of showing it"},
                 {"kubernetes-api-cidrs", "CIDR,...", "the Kubernetes API endpoints the "
                                                      "controller may reach"},
                 {"kubernetes-api-port", "PORT", "their port [default: 443]"},
                 {"namespace", "NS", "the workload namespace [default: uplink-workspaces]"},
                 {"rotate", "", "a new credential for an offer that has one (the old one stops "
                                "working)"},
                 {"disable", "", "turn execution off (refused while reservations are active)"},
                 {"revoke", "", "turn execution off and revoke the credential"}},
       .notes = "The credential is shown once. Put it in the Secret the chart's "
                "workspace controller reads, then run the helm upgrade command printed."},
      {.id = CommandId::kReservationsCreate,
       .group = "reservations",
       .name = "create",
       .operands = "OFFER_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "reserve GPUs of a qualified offer; the console places them on one node",
       .flags = {{"gpus", "N", "how many GPUs [default: 1]"},
                 {"duration", "D", "for how long, such as 2h, up to the offer's maximum "
                                   "lifetime [default: 1h]"}}},
      {.id = CommandId::kReservationsList,
       .group = "reservations",
       .name = "list",
       .summary = "list your reservations, newest first",
       .flags = {{"active", "", "only those not ended"},
                 {"all", "", "everyone's (admins only)"},
                 {"offer", "OFFER_ID", "the usage of your offer: GPUs, times and states"}}},
      {.id = CommandId::kReservationsShow,
       .group = "reservations",
       .name = "show",
       .alias = "get",
       .operands = "RESERVATION_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "show a reservation with every transition"},
      {.id = CommandId::kReservationsStop,
       .group = "reservations",
       .name = "stop",
       .operands = "RESERVATION_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "stop a reservation: its workspace is deleted",
       .flags = {{"reason", "TEXT", "why, for its transitions"}}},
      {.id = CommandId::kReservationsExtend,
       .group = "reservations",
       .name = "extend",
       .operands = "RESERVATION_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "give a reservation more time, within its offer's maximum lifetime",
       .flags = {{"by", "D", "how much more, such as 30m"}}},
      {.id = CommandId::kRun,
       .name = "run",
       .operands = "RESERVATION_ID -- CODE...",
       .min_operands = 1,
       .max_operands = kAnyOperands,
       .summary = "run a shell (or Python) command in a reservation's workspace, streaming its "
                  "output",
       .flags = {{"python", "", "CODE is Python, run by python3"},
                 {"timeout", "D", "stop it after D, such as 10m [default: 5m; at most the time "
                                  "left]"}},
       .notes = "Everything after -- is the code, joined by spaces: 'uplink run res_... -- "
                "nvidia-smi -L'. Output (stdout and stderr together) streams as it comes and "
                "uplink exits with the command's exit code; a command killed at its timeout "
                "exits 124, one that could not run or was cancelled exits 1."},
      {.id = CommandId::kSshGrants,
       .group = "ssh",
       .name = "grants",
       .operands = "RESERVATION_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "list the public keys allowed into a reservation's workspace, newest first"},
      {.id = CommandId::kSshGrant,
       .group = "ssh",
       .name = "grant",
       .operands = "RESERVATION_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "allow a public key (Ed25519 or ECDSA) into a reservation's workspace",
       .flags = {{"public-key", "FILE", "the key's .pub file, as ssh-keygen wrote it"},
                 {"expires-at", "T", "when the grant ends, RFC 3339 [default and latest: the "
                                     "reservation's end]"},
                 {"expires-in", "D", "when the grant ends, as a duration from now: 2h, 30m"}},
       .notes = "'uplink ssh setup' grants your key itself; this is for a second key, or a "
                "colleague's."},
      {.id = CommandId::kSshRevoke,
       .group = "ssh",
       .name = "revoke",
       .operands = "RESERVATION_ID GRANT_ID",
       .min_operands = 2,
       .max_operands = 2,
       .summary = "revoke a grant: its key opens no new SSH session",
       .notes = "Sessions already open go on until the reservation ends or they idle out."},
      {.id = CommandId::kSshSetup,
       .group = "ssh",
       .name = "setup",
       .operands = "RESERVATION_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "make 'ssh uplink-RESERVATION_ID' work: grant your key, pin the host key, "
                  "write the ssh config",
       .flags = {{"identity", "FILE",
                  "your private key; FILE.pub is granted [default: id_ed25519, else id_ecdsa, "
                  "in the ssh directory]"},
                 {"ssh-dir", "DIR", "the ssh directory [default: ~/.ssh]"}},
       .notes = "Refused until the console reports the workspace ready for SSH. Writes "
                "DIR/uplink/RESERVATION_ID.conf (the Host block: your identity, the pinned host "
                "key in DIR/uplink/RESERVATION_ID.known_hosts, StrictHostKeyChecking yes, and "
                "'uplink ssh proxy' as the ProxyCommand) and puts one 'Include "
                "DIR/uplink/*.conf' line at the top of DIR/config, after copying the old file to "
                "DIR/config.uplink-backup (once). Running it again is safe. Then 'ssh "
                "uplink-RESERVATION_ID', scp, sftp and VS Code Remote-SSH work unchanged."},
      {.id = CommandId::kSshProxy,
       .group = "ssh",
       .name = "proxy",
       .operands = "RESERVATION_ID",
       .min_operands = 1,
       .max_operands = 1,
       .summary = "carry one SSH connection through the console (ssh's ProxyCommand)",
       .flags = {{"grant", "GRANT_ID", "the grant whose key the session uses (ssg_...)"}},
       .notes = "ssh runs it; stdin and stdout are the SSH connection. When the console ends "
                "the connection (the transfer budget used up, the reservation ended, idle, an "
                "agent problem) or refuses it, the reason is printed on stderr, where ssh shows "
                "it, and it exits non-zero."},
  };
  return commands;
}

Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args, const EnvLookup& env) {
  CommandLine line;
  if (const char* v = env("UPLINK_CONSOLE"); v != nullptr) line.globals.console = v;
  if (const char* v = env("UPLINK_API_KEY_FILE"); v != nullptr) line.globals.api_key_file = v;
  if (const char* v = env("UPLINK_CA_FILE"); v != nullptr) line.globals.ca_file = v;
  if (const char* v = env("UPLINK_OUTPUT"); v != nullptr && *v != '\0') line.globals.output = v;
  auto usage_error = [&](const std::string& message) {
    return InvalidArgumentError(message + "; " + HelpCommand(line.group, line.command));
  };

  bool only_operands = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!only_operands && arg == "--") {
      only_operands = true;
      line.operands_before_dashes = line.operands.size();
      continue;
    }
    const bool is_flag = !only_operands && arg.size() > 1 && arg[0] == '-';
    if (is_flag && (arg == "-h" || arg == "--help")) {
      line.help = true;
      return line;  // help for what was named so far; the rest does not matter
    }
    if (is_flag) {
      std::string_view body(arg);
      if (body.substr(0, 2) != "--") return usage_error("unknown flag " + arg);
      body.remove_prefix(2);
      std::string name(body.substr(0, body.find('=')));
      std::optional<std::string> value;
      if (auto eq = body.find('='); eq != std::string_view::npos) {
        value = std::string(body.substr(eq + 1));
      }
      const FlagSpec* spec = FindFlag(GlobalFlags(), name);
      if (spec == nullptr && line.command != nullptr) spec = FindFlag(line.command->flags, name);
      if (spec == nullptr) {
        std::string where = line.command != nullptr ? line.command->Path() : line.group;
        return usage_error("unknown flag --" + name +
                           (where.empty() ? "" : " for 'uplink " + where + "'"));
      }
      if (spec->value_name.empty()) {
        if (value) return usage_error("--" + name + " takes no value");
        value = "true";
      } else if (!value) {
        if (i + 1 >= args.size()) {
          return usage_error("--" + name + " needs a value (" + std::string(spec->value_name) +
                             ")");
        }
        value = args[++i];
      }
      if (name == "console") {
        line.globals.console = *value;
      } else if (name == "api-key-file") {
        line.globals.api_key_file = *value;
      } else if (name == "ca-file") {
        line.globals.ca_file = *value;
      } else if (name == "output") {
        line.globals.output = *value;
      } else {
        line.flags[name] = *value;
      }
      continue;
    }
    // An operand: first the command words, then the command's operands.
    if (line.command != nullptr) {
      line.operands.push_back(arg);
      continue;
    }
    const std::string group = line.group;
    auto command = std::find_if(Commands().begin(), Commands().end(), [&](const CommandSpec& c) {
      return c.group == group && (c.name == arg || (!c.alias.empty() && c.alias == arg));
    });
    if (command != Commands().end()) {
      line.command = &*command;
      continue;
    }
    const bool is_group =
        group.empty() && std::any_of(Groups().begin(), Groups().end(),
                                     [&](const auto& g) { return g.first == arg; });
    if (is_group) {
      line.group = arg;
      continue;
    }
    return usage_error("unknown command '" + (group.empty() ? arg : group + " " + arg) + "'");
  }

  if (line.command == nullptr) {
    return usage_error(line.group.empty() ? std::string("no command given")
                                          : "'uplink " + line.group + "' needs a command");
  }
  if (line.globals.output != "table" && line.globals.output != "json") {
    return usage_error("--output must be table or json, not '" + line.globals.output + "'");
  }
  const CommandSpec& c = *line.command;
  if (line.operands.size() < c.min_operands || line.operands.size() > c.max_operands) {
    std::string expected = c.operands.empty() ? "no operands" : std::string(c.operands);
    return usage_error("'uplink " + c.Path() + "' takes " + expected + ", not " +
                       std::to_string(line.operands.size()) + " operand(s)");
  }
  return line;
}

std::string Usage(std::string_view group, const CommandSpec* command) {
  std::string out;
  if (command != nullptr) {
    out += "usage: uplink " + command->Path();
    if (!command->operands.empty()) out += " " + std::string(command->operands);
    if (!command->flags.empty()) out += " [flags]";
    out += "\n\n" + Wrap(Sentence(command->summary), 0, 0) + "\n";
    if (!command->alias.empty()) {
      out += "Also spelled 'uplink " + std::string(command->group) + " " +
             std::string(command->alias) + "'.\n";
    }
    if (!command->notes.empty()) out += "\n" + Wrap(command->notes, 0, 0) + "\n";
    if (!command->flags.empty()) {
      out += "\nflags:\n";
      AppendFlags(out, command->flags);
    }
    out += "\nglobal flags:\n";
    AppendFlags(out, GlobalFlags());
    return out;
  }
  auto list_commands = [&](std::string_view in_group) {
    size_t width = 0;
    for (const auto& c : Commands()) {
      if (c.group == in_group) width = std::max(width, c.Path().size() + c.operands.size() + 1);
    }
    for (const auto& c : Commands()) {
      if (c.group != in_group) continue;
      std::string left = c.Path() + (c.operands.empty() ? "" : " " + std::string(c.operands));
      out += "  uplink " + left + std::string(width + 3 - left.size(), ' ') +
             std::string(c.summary) + "\n";
    }
  };
  if (!group.empty()) {
    out += "usage: uplink " + std::string(group) + " <command> [flags]\n\ncommands:\n";
    list_commands(group);
    out += "\nRun 'uplink " + std::string(group) + " <command> --help' for its flags.\n";
    return out;
  }
  out += "usage: uplink [global flags] <command> [flags]\n\ncommands:\n";
  list_commands("");
  for (const auto& [name, summary] : Groups()) {
    out += "\n" + std::string(name) + ": " + std::string(summary) + "\n";
    list_commands(name);
  }
  out += "\nglobal flags:\n";
  AppendFlags(out, GlobalFlags());
  out +=
      "\nCredentials, first found wins: --api-key-file F (UPLINK_API_KEY_FILE), UPLINK_API_KEY,\n"
      "then the file 'uplink login' writes. They are never taken from the command line.\n"
      "\nexit codes: 0 ok, 1 failure, 2 usage, 3 not authenticated, 4 forbidden, 5 not found,\n"
      "6 conflict or gone, 7 console unreachable, 8 rate limited, 9 install not completed.\n"
      "Run 'uplink <command> --help' for a command's flags.\n";
  return out;
}

}  // namespace uplink::cli
