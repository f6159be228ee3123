// What the connection commands and install share: finding a connection by id or cluster
// name, taking a freshly issued token out of a reply, and the words shown with a token.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "cli/api_client.h"
#include "common/json_fwd.h"
#include "common/secret.h"
#include "common/status.h"
#include "protocol/credentials.h"

namespace uplink::cli {

struct Invocation;

inline constexpr char kAgentTokenPurpose[] = "create/rotate agent tokens";
using protocol::kAgentTokenPrefix;
using protocol::kHandoverCodePrefix;

// GET /api/v1/connections: the "connections" array of the reply.
Result<json::array> ListConnections(ApiClient& api);

// A connection id (16 hex digits) as given, or the id of the connection whose cluster name
// is `id_or_name`; when several share it (revoked ones keep their name), the one that is
// not revoked. NotFound when none or more than one fits, with the ids to choose from.
Result<std::string> ResolveConnection(ApiClient& api, std::string_view id_or_name);

// The connection with this cluster name that is not revoked, if there is one.
Result<std::optional<json::object>> FindLiveConnection(ApiClient& api,
                                                       std::string_view cluster_name);

// Removes the "token" from a reply and returns it; Internal if it is missing or not an
// agent token (the reply is then not printed, so nothing half-valid reaches the screen).
Result<Secret> TakeAgentToken(json::object& reply);

// Where the agent's token goes in the cluster, and how a person puts it there by hand.
struct KubeTarget {
  std::string namespace_name = "uplink";
  std::string secret_name = "uplink-agent-token";
  std::string pod_security = "privileged";  // what the node DaemonSet needs; see install
  std::string kubeconfig;  // "" for kubectl's default
  std::string context;     // "" for the current context
};

// The commands of the install guide, with the token pasted into `read -rs` rather than
// typed into a command line.
void PrintManualSecretCommands(std::ostream& out, const KubeTarget& target);

// The console's message as it sent it, line by line, each line cleaned of control characters
// and shortened; at most a few lines.
std::string ConsoleLines(std::string_view message);

// A comma-separated namespace list as the console takes it: "ml, dev" -> ["ml", "dev"]
// (blanks around names and empty entries dropped), "*" -> ["*"], "" -> [].
json::array NamespaceNames(std::string_view list);

// The namespace scope of a new connection: --read-namespaces when given, else the answer to
// a question on the terminal unless --yes (Enter: choose later; "none": cluster-scoped reads
// only), else none (nullopt: chosen later with 'uplink connections namespaces').
Result<std::optional<json::array>> ReadNamespacesChoice(Invocation& inv);

}  // namespace uplink::cli
