// uplink connections list | show | create | rotate | revoke | redeem | namespaces, and
// uplink kubectl (approval_commands.cc waits for a command that needs approval)
#include <algorithm>
#include <cctype>

#include "cli/approvals.h"
#include "cli/commands.h"
#include "cli/connections.h"
#include "cli/render.h"
#include "cli/secret_file.h"
#include "common/files.h"
#include "common/text.h"
#include "net/http.h"

namespace uplink::cli {
namespace {

constexpr char kDefaultAgentName[] = "uplink-agent";

bool IsConnectionId(std::string_view text) {
  return text.size() == 16 && std::all_of(text.begin(), text.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) != 0;
         });
}

std::string ConnectionPath(std::string_view id) {
  return "/api/v1/connections/" + net::PercentEncode(id);
}

std::string Totals(const json::object& connection, const char* part, const char* whole) {
  const json::object* totals = ObjectField(connection, "totals");
  if (totals == nullptr) return "-";
  return Display(*totals, part) + "/" + Display(*totals, whole);
}

constexpr char kOwnerNeedsTwoFactor[] =
    "agent refused (owner_needs_two_factor): the owner has not set up the two-factor sign-in "
    "this console requires; it works again once they do ('uplink two-factor enroll')";

bool OwnerNeedsTwoFactor(const json::object& c) {
  const json::value* refused = c.if_contains("owner_needs_two_factor");
  return refused != nullptr && refused->is_bool() && refused->get_bool();
}

// How long since the time in `key`, as the web console writes it ("45 s", "3 min", "5 h",
// "3 d"); empty when the field holds no time.
std::string Since(const json::object& c, std::string_view key, WallTime now) {
  std::optional<std::string> text = StringField(c, key);
  if (!text) return "";
  Result<WallTime> at = ParseRfc3339(*text);
  if (!at.ok()) return "";
  std::int64_t s = std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::seconds>(now - *at).count());
  if (s < 90) return std::to_string(s) + " s";
  if (s < 90 * 60) return std::to_string((s + 30) / 60) + " min";
  if (s < 48 * 3600) return std::to_string((s + 1800) / 3600) + " h";
  return std::to_string((s + 43'200) / 86'400) + " d";
}

// A connection's state as the web console's badge says it (docs/cli.md): offline whenever
// its agents have been silent past the offline threshold, whatever the token's status, and
// for how long; else a revoked or expired token; else what its agents do.
std::string ConnectionState(const json::object& c, WallTime now) {
  const std::string liveness = StringField(c, "liveness").value_or("");
  const std::string status = StringField(c, "status").value_or("");
  const bool token_ended = status == "revoked" || status == "expired";
  if (liveness == "offline") {
    std::string text = "offline";
    if (std::string since = Since(c, "last_seen_at", now); !since.empty()) text += " " + since;
    return token_ended ? text + ", token " + status : text;
  }
  if (token_ended) return status;
  if (liveness == "waiting") return "waiting for agent";
  if (liveness == "stale") return "stale " + Since(c, "last_seen_at", now);
  return Display(c, "liveness", 16);
}

// The expiry, with "in N days" from 14 days before it (the console's expires_in_days).
std::string ExpiryText(const json::object& c) {
  std::string at = Display(c, "expires_at", 40);
  const json::value* days = c.if_contains("expires_in_days");
  if (days == nullptr || !days->is_int64()) return at;
  std::int64_t n = days->get_int64();
  return "in " + std::to_string(n) + (n == 1 ? " day (" : " days (") + at + ")";
}

void PrintConnectionList(std::ostream& out, const json::array& connections, WallTime now) {
  Table table({"ID", "CLUSTER", "STATE", "NODES", "GPUS READY", "AGENT", "TOKEN", "EXPIRES"});
  const json::object empty;
  for (const json::value& item : connections) {
    const json::object& c = item.is_object() ? item.get_object() : empty;
    const json::object* totals = ObjectField(c, "totals");
    table.AddRow({Display(c, "id", 32), Display(c, "cluster_name", 63), ConnectionState(c, now),
                  totals != nullptr ? Display(*totals, "nodes") : "-",
                  Totals(c, "gpus_ready", "gpu_capacity"), Display(c, "agent_version", 32),
                  Display(c, "token_prefix", 24), ExpiryText(c)});
  }
  if (table.rows() == 0) {
    out << "No connections yet: create one with 'uplink connections create CLUSTER_NAME'.\n";
    return;
  }
  table.Render(out);
  for (const json::value& item : connections) {
    const json::object& c = item.is_object() ? item.get_object() : empty;
    if (OwnerNeedsTwoFactor(c)) {
      out << "\n" << Display(c, "cluster_name", 63) << ": " << kOwnerNeedsTwoFactor << "\n";
    }
  }
}

void AddConnectionFields(Fields& fields, const json::object& c, WallTime now) {
  fields.Add("id", Display(c, "id"));
  fields.Add("cluster", Display(c, "cluster_name"));
  fields.Add("agent name", Display(c, "agent_name"));
  fields.Add("state", ConnectionState(c, now));
  fields.Add("status", Display(c, "status"));
  fields.Add("liveness", Display(c, "liveness"));
  fields.Add("token prefix", Display(c, "token_prefix"));
  fields.Add("created", Display(c, "created_at"));
  fields.Add("expires", ExpiryText(c));
}

std::string HandoverText(const json::object& c) {
  const json::object* handover = ObjectField(c, "handover");
  if (handover == nullptr) return "none";
  std::string text = Display(*handover, "status") + " (made " + Display(*handover, "created_at") +
                     ", valid until " + Display(*handover, "expires_at");
  if (StringField(*handover, "redeemed_at"))
    text += ", redeemed " + Display(*handover, "redeemed_at");
  return text + ")";
}

void PrintConnectionDetails(std::ostream& out, const json::object& c, WallTime now) {
  Fields fields;
  AddConnectionFields(fields, c, now);
  fields.Add("revoked", Display(c, "revoked_at"));
  fields.Add("last seen", Display(c, "last_seen_at"));
  fields.Add("last report", Display(c, "last_report_at"));
  fields.Add("collected", Display(c, "collected_at"));
  fields.Add("cluster uid", Display(c, "cluster_uid"));
  fields.Add("agent version", Display(c, "agent_version"));
  fields.Add("selector", Display(c, "selector", 200));
  if (const json::object* install = ObjectField(c, "install")) {
    // What the install commands asked for, beside what the agent reports above.
    std::string workloads;
    if (const json::array* list = ArrayField(*install, "workloads")) {
      for (const json::value& w : *list) workloads += (workloads.empty() ? "" : ", ") + Display(&w, 16);
    }
    fields.Add("install selector",
               Display(*install, "selector", 200) + " (workloads: " + workloads + ")");
  }
  if (const json::object* totals = ObjectField(c, "totals")) {
    fields.Add("nodes",
               Display(*totals, "nodes") + " (" + Display(*totals, "nodes_ready") + " ready)");
    fields.Add("GPUs", Display(*totals, "gpus_ready") + " ready of " +
                           Display(*totals, "gpu_capacity") + " (" +
                           Display(*totals, "gpu_allocatable") + " allocatable)");
  }
  fields.Add("handover", HandoverText(c));
  if (OwnerNeedsTwoFactor(c)) fields.Add("agent", kOwnerNeedsTwoFactor);
  fields.Render(out);
  if (const json::value* days = c.if_contains("expires_in_days"); days && days->is_int64()) {
    out << "\nThe token expires " << ExpiryText(c)
        << ": generate a new installation code with 'uplink connections rotate "
        << Display(c, "cluster_name", 63) << " --renew' and put it in the agent's Secret.\n";
  }

  const json::object empty;
  auto objects = [&](const char* key) {
    std::vector<const json::object*> out_list;
    if (const json::array* list = ArrayField(c, key)) {
      for (const json::value& v : *list)
        out_list.push_back(v.is_object() ? &v.get_object() : &empty);
    }
    return out_list;
  };

  auto nodes = objects("nodes");
  if (nodes.empty() && !StringField(c, "last_report_at")) {
    out << "\nnodes: none reported yet\n";
  } else if (nodes.empty()) {
    std::optional<std::string> selector = StringField(c, "selector");
    out << "\nnodes: 0 match "
        << (selector && !selector->empty() ? "selector " + Display(c, "selector", 200)
                                           : std::string("the agent's selector"))
        << "\n  Detection is not qualification: an empty inventory means no matching nodes "
           "were found;\n  it is not a successful GPU qualification.\n";
  } else {
    Table table({"NODE", "READY", "CORDONED", "GPU PRODUCT", "GPUS ALLOC/CAP", "ERROR"});
    for (const json::object* n : nodes) {
      table.AddRow({Display(*n, "name", 63), Display(*n, "ready"), Display(*n, "unschedulable"),
                    Display(*n, "gpu_product", 48),
                    Display(*n, "gpu_allocatable") + "/" + Display(*n, "gpu_capacity"),
                    n->contains("error") ? Display(*n, "error", 200) : ""});
    }
    out << "\n";
    table.Render(out);
  }

  auto agents = objects("agents");
  if (agents.empty()) {
    out << "\nagents: none has reported yet\n";
  } else {
    Table table({"AGENT ROLE", "INSTANCE", "VERSION", "LAST SEEN"});
    for (const json::object* a : agents) {
      table.AddRow({Display(*a, "role", 32), Display(*a, "instance", 63),
                    Display(*a, "version", 32), Display(*a, "last_seen_at", 40)});
    }
    out << "\n";
    table.Render(out);
  }

  auto events = objects("security_events");
  if (events.empty()) {
    out << "\nsecurity events: none\n";
  } else {
    Table table({"SECURITY EVENT", "AT", "SOURCE", "DETAIL"});
    for (const json::object* e : events) {
      table.AddRow({Display(*e, "action", 48), Display(*e, "at", 40),
                    Display(*e, "source_address", 64), DisplayJson(*e, "detail")});
    }
    out << "\n";
    table.Render(out);
  }
}

void PrintAgentTokenOnce(std::ostream& out, const Secret& token, std::string_view cluster) {
  out << "\nAgent token (shown only this once; uplink keeps no copy):\n\n  " << token.Reveal()
      << "\n\nPut it in a Kubernetes Secret without leaving it in your shell history:\n\n";
  PrintManualSecretCommands(out, KubeTarget{});
  out << "\n('uplink connections install " << cluster
      << "' does this with kubectl and never shows the token.)\n";
}

void PrintHandoverCode(std::ostream& out, const Secret& code, const json::object& reply) {
  out << "\nHandover code (works once, until " << Display(reply, "handover_expires_at")
      << "):\n\n  " << code.Reveal()
      << "\n\nOn the machine that will install the agent, run 'uplink connections redeem' and "
         "paste the code when asked\n(or pipe it to 'uplink connections redeem --code-stdin'). "
         "Redeeming mints the agent token there, once.\nAfter 10 minutes the code expires; then "
         "run 'uplink connections rotate "
      << Display(reply, "cluster_name", 63) << " --handover' for a new one.\n";
}

// Shows (or files) the token a create, rotate or redeem reply carries.
Status DeliverToken(Invocation& inv, json::object reply, SecretFile* token_file) {
  UPLINK_ASSIGN_OR_RETURN(Secret token, TakeAgentToken(reply));
  if (token_file != nullptr) {
    if (Status written = token_file->Write(token.Reveal()); !written.ok()) {
      // The console has already replaced the old token: losing this one would leave the
      // cluster without a working token, so it is shown instead.
      inv.err << "uplink: could not write the new token to " << token_file->path() << " ("
              << written.message() << "); the console has already issued it, so here it is:\n";
      PrintAgentTokenOnce(inv.err, token, Display(reply, "cluster_name", 63));
      return written.WithContext("--token-out " + token_file->path());
    }
    if (inv.json()) {
      PrintJson(inv.out, reply);
    } else {
      Fields fields;
      AddConnectionFields(fields, reply, inv.clock.Now());
      fields.Render(inv.out);
      inv.out << "\nThe agent token was written to " << token_file->path()
              << " (mode 0600); it was not shown.\n";
    }
    return Status::Ok();
  }
  if (inv.json()) {
    reply["token"] = token.Reveal();
    PrintJson(inv.out, reply);
    return Status::Ok();
  }
  Fields fields;
  AddConnectionFields(fields, reply, inv.clock.Now());
  fields.Render(inv.out);
  PrintAgentTokenOnce(inv.out, token, Display(reply, "cluster_name", 63));
  return Status::Ok();
}

// create and rotate: a sensitive call that answers with a token or a handover code.
Status IssueToken(Invocation& inv, ApiClient& api, const std::string& target,
                  std::optional<json::object> body) {
  const bool handover = inv.line.Has("handover");
  SecretFile token_file;
  if (inv.line.Has("token-out")) {
    if (handover) {
      return InvalidArgumentError(
          "--token-out with --handover: the token is minted when the "
          "code is redeemed; pass --token-out to 'uplink connections "
          "redeem' instead");
    }
    UPLINK_RETURN_IF_ERROR(token_file.Create(inv.line.Get("token-out"), "--token-out"));
  }
  UPLINK_ASSIGN_OR_RETURN(json::object reply,
                          CallSensitive(inv, api, "POST", target, body, kAgentTokenPurpose));
  if (!handover)
    return DeliverToken(inv, std::move(reply), token_file.created() ? &token_file : nullptr);

  Secret code(StringField(reply, "handover_code").value_or(""));
  if (!LooksLikeToken(code.Reveal(), kHandoverCodePrefix)) {
    return InternalError(
        "the console's reply carries no handover code (hoc_...); check the "
        "connection with 'uplink connections show'");
  }
  if (inv.json()) {
    PrintJson(inv.out, reply);
    return Status::Ok();
  }
  reply.erase("handover_code");
  Fields fields;
  AddConnectionFields(fields, reply, inv.clock.Now());
  fields.Render(inv.out);
  PrintHandoverCode(inv.out, code, reply);
  return Status::Ok();
}

Result<std::string> ExpiryFromFlags(const Invocation& inv) {
  const bool at = inv.line.Has("expires-at");
  const bool in = inv.line.Has("expires-in");
  if (at && in) return InvalidArgumentError("give --expires-at or --expires-in, not both");
  if (at) {
    std::string value = inv.line.Get("expires-at");
    if (!ParseRfc3339(value).ok()) {
      return InvalidArgumentError("--expires-at '" + OneLineExcerpt(value, 64) +
                                  "' is not an RFC 3339 time such as 2026-12-31T00:00:00Z");
    }
    return value;
  }
  if (in) {
    auto duration = ParseDuration(inv.line.Get("expires-in"));
    if (!duration.ok() || duration->count() <= 0) {
      return InvalidArgumentError("--expires-in takes a positive duration such as 30d or 12h");
    }
    return FormatRfc3339(inv.clock.Now() + *duration);
  }
  return std::string();
}

// What a console reply says about the namespace scope, for people.
void PrintNamespaces(std::ostream& out, const json::object& reply, std::string_view connection) {
  const json::value* value = reply.if_contains("namespaces");
  if (value == nullptr || value->is_null()) {
    out << "No namespaces are chosen yet: every 'uplink kubectl' command on this connection is "
           "refused.\nChoose them with 'uplink connections namespaces "
        << OneLineExcerpt(connection, 63) << " --set NS1,NS2' (or --all for every namespace).\n";
    return;
  }
  const json::array* names = ArrayField(reply, "namespaces");
  if (names == nullptr) {
    out << "namespaces: " << Display(reply, "namespaces") << "\n";
    return;
  }
  if (names->size() == 1 && (*names)[0].is_string() && (*names)[0].get_string() == "*") {
    out << "Every namespace: kubectl may read anything in the cluster.\n";
    return;
  }
  if (names->empty()) {
    out << "No namespaces: kubectl may read only cluster-scoped things (nodes, namespaces, "
           "api-resources, version).\n";
    return;
  }
  out << "Namespaces kubectl may read:\n";
  for (const json::value& name : *names) out << "  " << Display(&name, 63) << "\n";
}

}  // namespace

// The console's message as it sent it, line by line, each line cleaned of control characters
// and shortened; at most a few lines.
std::string ConsoleLines(std::string_view message) {
  constexpr size_t kMaxLines = 8;
  std::string out;
  for (size_t lines = 0; lines < kMaxLines; ++lines) {
    size_t newline = message.find('\n');
    if (lines > 0) out += "\n";
    out += OneLineExcerpt(message.substr(0, newline), 500);
    if (newline == std::string_view::npos) break;
    message.remove_prefix(newline + 1);
  }
  return out;
}

Result<json::array> ListConnections(ApiClient& api) {
  UPLINK_ASSIGN_OR_RETURN(json::object reply, api.Get("/api/v1/connections"));
  json::value* list = reply.if_contains("connections");
  if (list == nullptr || !list->is_array()) {
    return InternalError(
        "the console's reply is not the JSON object uplink expects (no "
        "\"connections\" list); check that --console is the console's address");
  }
  return std::move(list->get_array());
}

Result<std::string> ResolveConnection(ApiClient& api, std::string_view id_or_name) {
  if (IsConnectionId(id_or_name)) {
    return AsciiLower(id_or_name);
  }
  if (id_or_name.empty()) return InvalidArgumentError("an empty connection id or name");
  UPLINK_ASSIGN_OR_RETURN(json::array connections, ListConnections(api));
  std::vector<const json::object*> named;
  for (const json::value& v : connections) {
    if (v.is_object() && StringField(v.get_object(), "cluster_name") == std::string(id_or_name)) {
      named.push_back(&v.get_object());
    }
  }
  std::vector<const json::object*> live;
  std::copy_if(named.begin(), named.end(), std::back_inserter(live),
               [](const json::object* c) { return StringField(*c, "status") != "revoked"; });
  const auto& candidates = named.size() > 1 ? live : named;
  const std::string shown = "'" + OneLineExcerpt(id_or_name, 63) + "'";
  if (candidates.size() == 1) {
    auto id = StringField(*candidates[0], "id");
    if (id && !id->empty()) return *id;
  }
  if (named.empty()) {
    return NotFoundError("no connection has the id or cluster name " + shown +
                         "; 'uplink connections list' shows them");
  }
  std::string ids;
  for (const json::object* c : named) ids += (ids.empty() ? "" : ", ") + Display(*c, "id", 32);
  return NotFoundError("the cluster name " + shown + " fits " + std::to_string(named.size()) +
                       " connections (" + ids + "); pass the id instead");
}

Result<std::optional<json::object>> FindLiveConnection(ApiClient& api,
                                                       std::string_view cluster_name) {
  UPLINK_ASSIGN_OR_RETURN(json::array connections, ListConnections(api));
  for (const json::value& v : connections) {
    if (!v.is_object()) continue;
    const json::object& c = v.get_object();
    if (StringField(c, "cluster_name") == std::string(cluster_name) &&
        StringField(c, "status") != "revoked") {
      auto id = StringField(c, "id");
      if (id && IsConnectionId(*id)) return std::optional<json::object>(c);
    }
  }
  return std::optional<json::object>();
}

Result<Secret> TakeAgentToken(json::object& reply) {
  Secret token(StringField(reply, "token").value_or(""));
  reply.erase("token");
  if (!LooksLikeToken(token.Reveal(), kAgentTokenPrefix)) {
    return InternalError(
        "the console's reply carries no agent token (agt_...); the connection "
        "may have changed: check it with 'uplink connections show'");
  }
  return token;
}

void PrintManualSecretCommands(std::ostream& out, const KubeTarget& t) {
  std::string kubectl = "kubectl";
  if (!t.kubeconfig.empty()) kubectl += " --kubeconfig " + ShellQuote(t.kubeconfig);
  if (!t.context.empty()) kubectl += " --context " + ShellQuote(t.context);
  out << "  " << kubectl << " create namespace " << t.namespace_name << "   # skip if it exists\n"
      << "  " << kubectl << " label namespace " << t.namespace_name
      << " pod-security.kubernetes.io/enforce=" << t.pod_security << " --overwrite"
      << (t.pod_security == "privileged"
              ? "   # the node DaemonSet mounts host paths; inventory alone: restricted\n"
              : "\n")
      << "  read -rs UPLINK_AGENT_TOKEN   # paste the agt_ token; it is not echoed or kept in "
         "history\n"
      << "  printf '%s' \"$UPLINK_AGENT_TOKEN\" | " << kubectl << " -n " << t.namespace_name
      << " create secret generic " << t.secret_name
      << " --from-file=UPLINK_AGENT_TOKEN=/dev/stdin\n"
      << "  unset UPLINK_AGENT_TOKEN\n"
      << "\n(If the Secret exists already, delete it first: " << kubectl << " -n "
      << t.namespace_name << " delete secret " << t.secret_name << ")\n";
}

Status RunConnectionsList(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::array connections, ListConnections(*session.api));
  if (inv.json()) {
    PrintJson(inv.out, json::object{{"connections", std::move(connections)}});
  } else {
    PrintConnectionList(inv.out, connections, inv.clock.Now());
  }
  return Status::Ok();
}

Status RunConnectionsShow(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(json::object connection, session.api->Get(ConnectionPath(id)));
  if (inv.json()) {
    PrintJson(inv.out, connection);
  } else {
    PrintConnectionDetails(inv.out, connection, inv.clock.Now());
  }
  return Status::Ok();
}

Status RunConnectionsCreate(Invocation& inv) {
  std::string cluster = inv.line.operands.empty() ? "" : inv.operand(0);
  if (inv.line.Has("cluster-name")) {
    std::string flag = inv.line.Get("cluster-name");
    if (!cluster.empty() && cluster != flag) {
      return InvalidArgumentError("two cluster names: give CLUSTER_NAME or --cluster-name, once");
    }
    cluster = flag;
  }
  if (cluster.empty()) {
    return InvalidArgumentError(
        "'uplink connections create' needs CLUSTER_NAME; run 'uplink "
        "connections create --help'");
  }
  UPLINK_ASSIGN_OR_RETURN(std::string expires_at, ExpiryFromFlags(inv));
  json::object body{{"agent_name", inv.line.Get("agent-name", kDefaultAgentName)},
                    {"cluster_name", cluster}};
  if (!expires_at.empty()) body["expires_at"] = expires_at;
  if (inv.line.Has("handover")) body["handover"] = true;
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::optional<json::array> namespaces, ReadNamespacesChoice(inv));
  if (namespaces) body["namespaces"] = std::move(*namespaces);
  return IssueToken(inv, *session.api, "/api/v1/connections", std::move(body));
}

Status RunConnectionsRotate(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  std::optional<json::object> body;
  if (inv.line.Has("handover") || inv.line.Has("renew")) body = json::object{};
  if (inv.line.Has("handover")) (*body)["handover"] = true;
  if (inv.line.Has("renew")) (*body)["renew"] = true;
  return IssueToken(inv, *session.api, ConnectionPath(id) + "/rotate", std::move(body));
}

Status RunConnectionsRevoke(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, session.api->Post(ConnectionPath(id) + "/revoke"));
  if (inv.json()) {
    PrintJson(inv.out, reply);
    return Status::Ok();
  }
  Fields fields;
  AddConnectionFields(fields, reply, inv.clock.Now());
  fields.Add("revoked", Display(reply, "revoked_at"));
  fields.Render(inv.out);
  inv.out << "\nThe token is revoked: the agent is refused on its next request.\n";
  return Status::Ok();
}

Status RunConnectionsRedeem(Invocation& inv) {
  Secret code;
  if (inv.line.Has("code-stdin")) {
    UPLINK_ASSIGN_OR_RETURN(std::string line, ReadLineFrom(inv.in, "the handover code on stdin"));
    code = Secret(std::string(TrimWhitespace(Secret(std::move(line)).Reveal())));
  } else if (inv.terminal.Available()) {
    UPLINK_ASSIGN_OR_RETURN(Secret typed, inv.terminal.ReadSecret("Handover code: "));
    code = Secret(std::string(TrimWhitespace(typed.Reveal())));
  } else {
    return InvalidArgumentError(
        "no terminal to read the handover code from: pipe it to "
        "'uplink connections redeem --code-stdin'");
  }
  if (!LooksLikeToken(code.Reveal(), kHandoverCodePrefix)) {
    return InvalidArgumentError("that is not a handover code: they start with hoc_");
  }
  UPLINK_ASSIGN_OR_RETURN(auto api, OpenAnonymous(inv));
  SecretFile token_file;
  if (inv.line.Has("token-out")) {
    UPLINK_RETURN_IF_ERROR(token_file.Create(inv.line.Get("token-out"), "--token-out"));
  }
  UPLINK_ASSIGN_OR_RETURN(json::object reply, api->Post("/api/v1/handovers/redeem",
                                                        json::object{{"code", code.Reveal()}}));
  return DeliverToken(inv, std::move(reply), token_file.created() ? &token_file : nullptr);
}

json::array NamespaceNames(std::string_view list) {
  json::array names;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view name = TrimWhitespace(list.substr(0, comma));
    if (!name.empty()) names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return names;
}

Result<std::optional<json::array>> ReadNamespacesChoice(Invocation& inv) {
  if (inv.line.Has("read-namespaces")) {
    return std::optional<json::array>(NamespaceNames(inv.line.Get("read-namespaces")));
  }
  // --yes (install's) asks nothing.
  if (!inv.terminal.Available() || inv.line.Has("yes")) return std::optional<json::array>();
  auto answer = inv.terminal.ReadLine(
      "Namespaces 'uplink kubectl' and the cluster view may read (comma-separated, * for all, "
      "'none' for cluster-scoped reads only; Enter to choose later): ");
  // No answer (end of input) is "later", like Enter: nothing is chosen by accident.
  if (!answer.ok()) return std::optional<json::array>();
  std::string_view text = TrimWhitespace(*answer);
  if (text.empty()) return std::optional<json::array>();
  if (text == "none") return std::optional<json::array>(json::array());
  return std::optional<json::array>(NamespaceNames(text));
}

Status RunConnectionsNamespaces(Invocation& inv) {
  const bool set = inv.line.Has("set");
  const bool all = inv.line.Has("all");
  if (set && all) return InvalidArgumentError("give --set or --all, not both");
  std::optional<json::object> body;
  if (all) body = json::object{{"namespaces", json::array{"*"}}};
  if (set) body = json::object{{"namespaces", NamespaceNames(inv.line.Get("set"))}};
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  std::string path = ConnectionPath(id) + "/namespaces";
  UPLINK_ASSIGN_OR_RETURN(json::object reply,
                          body ? session.api->Call("PUT", path, body) : session.api->Get(path));
  if (inv.json()) {
    PrintJson(inv.out, reply);
  } else {
    PrintNamespaces(inv.out, reply, inv.operand(0));
  }
  return Status::Ok();
}

Status RunKubectl(Invocation& inv) {
  const CommandLine& line = inv.line;
  const std::string example =
      "as in 'uplink kubectl " + OneLineExcerpt(inv.operand(0), 63) + " -- get pods -n NS'";
  if (line.operands_before_dashes != 1) {
    return InvalidArgumentError("put kubectl's arguments after --, " + example +
                                "; run 'uplink kubectl --help'");
  }
  if (line.operands.size() < 2) {
    return InvalidArgumentError("give kubectl's arguments after --, " + example);
  }
  json::array argv{"kubectl"};
  for (size_t i = 1; i < line.operands.size(); ++i) argv.emplace_back(line.operands[i]);

  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  auto reply = session.api->Post(ConnectionPath(id) + "/kubectl",
                                 json::object{{"argv", std::move(argv)}});
  if (!reply.ok()) {
    // Refusals and the agent's failures are the console's words, shown as it wrote them.
    const std::string& code = session.api->last_error_code();
    std::string message = ConsoleLines(session.api->last_error_message());
    if (code == "refused" || code == "namespaces_not_chosen" || code == "namespace_not_allowed") {
      return PermissionDeniedError(message);
    }
    if (code.starts_with("agent_")) return FailedPreconditionError(message);
    return reply.status();
  }
  // A command that matched an approval rule: 202, and it runs once someone approves it.
  if (StringField(*reply, "status") == "waiting_for_approval") {
    reply = WaitForApproval(inv, *session.api, id, std::move(*reply));
    if (!reply.ok()) return reply.status();
  }
  const json::value* exit_code = reply->if_contains("exit_code");
  if (exit_code == nullptr || !exit_code->is_int64() || exit_code->get_int64() < 0 ||
      exit_code->get_int64() > 255) {
    return InternalError(
        "the console's reply has no exit code; check that --console is the console's address");
  }
  if (inv.json()) {
    PrintJson(inv.out, *reply);
  } else {
    // kubectl's output exactly as it was, for pipes and scripts.
    if (auto text = StringField(*reply, "stdout")) inv.out << *text;
    if (auto text = StringField(*reply, "stderr")) inv.err << *text;
  }
  inv.success = static_cast<ExitCode>(exit_code->get_int64());
  return Status::Ok();
}

}  // namespace uplink::cli
