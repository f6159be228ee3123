// uplink approvals list | approve | reject | rules | add-rule | remove-rule, and the wait of
// `uplink kubectl` for a command that needs approval (docs/cli.md, "Approvals").
#include <map>
#include <thread>

#include "cli/approvals.h"
#include "cli/connections.h"
#include "cli/render.h"
#include "common/text.h"
#include "net/http.h"

namespace uplink::cli {
namespace {

std::string RulesPath(const std::string& connection_id) {
  return "/api/v1/connections/" + net::PercentEncode(connection_id) + "/approval-rules";
}

std::string ApprovalPath(const std::string& command_id, std::string_view action) {
  return "/api/v1/approvals/" + net::PercentEncode(command_id) + "/" + std::string(action);
}

std::string CommandLineText(const json::object& approval) {
  std::string text;
  if (const json::array* argv = ArrayField(approval, "argv")) {
    for (const json::value& arg : *argv) {
      if (!text.empty()) text += ' ';
      text += ShellQuote(Display(&arg, 200));
    }
  }
  return OneLineExcerpt(text, 80);
}

std::string RuleText(const json::object* rule) {
  if (rule == nullptr) return "-";
  return Display(*rule, "verb", 16) + " " + Display(*rule, "resource", 48) + " " +
         Display(*rule, "namespace", 63);
}

// "kubectl logs in namespace payments", "any command on deployments.apps in any namespace".
std::string RuleSentence(const json::object& rule) {
  const std::string verb = Display(rule, "verb", 16);
  const std::string resource = Display(rule, "resource", 63);
  const std::string namespace_name = Display(rule, "namespace", 63);
  std::string text = verb == "*" ? "any command" : "kubectl " + verb;
  if (resource != "*") text += " on " + resource;
  return text + (namespace_name == "*" ? " in any namespace" : " in namespace " + namespace_name);
}

std::string PersonText(const json::object& object, std::string_view key) {
  const json::object* person = ObjectField(object, key);
  return person == nullptr ? "-" : Display(*person, "email", 80);
}

// The cluster name of each connection id, to show approvals by cluster.
std::map<std::string, std::string> ClusterNames(ApiClient& api) {
  std::map<std::string, std::string> names;
  auto connections = ListConnections(api);
  if (!connections.ok()) return names;
  for (const json::value& item : *connections) {
    if (!item.is_object()) continue;
    names[Display(item.get_object(), "id", 32)] = Display(item.get_object(), "cluster_name", 63);
  }
  return names;
}

void PrintApprovals(std::ostream& out, const json::array& approvals,
                    const std::map<std::string, std::string>& clusters, bool all) {
  Table table({"COMMAND ID", "CLUSTER", "REQUESTED BY", "COMMAND", "RULE", "STATUS", "REQUESTED",
               "EXPIRES"});
  const json::object empty;
  for (const json::value& item : approvals) {
    const json::object& a = item.is_object() ? item.get_object() : empty;
    auto cluster = clusters.find(Display(a, "connection_id", 32));
    table.AddRow({Display(a, "id", 32),
                  cluster == clusters.end() ? Display(a, "connection_id", 32) : cluster->second,
                  PersonText(a, "requested_by"), CommandLineText(a),
                  RuleText(ObjectField(a, "rule")), Display(a, "status", 24),
                  Display(a, "requested_at", 40), Display(a, "expires_at", 40)});
  }
  if (table.rows() == 0) {
    out << (all ? "No kubectl commands needed approval in the last 24 hours.\n"
                : "No kubectl commands are waiting for your approval.\n");
    return;
  }
  table.Render(out);
  if (!all) {
    out << "\nApprove with 'uplink approvals approve COMMAND_ID', or reject with 'uplink "
           "approvals reject COMMAND_ID --reason TEXT'.\n";
  }
}

void PrintRules(std::ostream& out, const json::array& rules, std::string_view connection) {
  Table table({"RULE ID", "VERB", "RESOURCE", "NAMESPACE", "CREATED"});
  const json::object empty;
  for (const json::value& item : rules) {
    const json::object& r = item.is_object() ? item.get_object() : empty;
    table.AddRow({Display(r, "id", 32), Display(r, "verb", 16), Display(r, "resource", 63),
                  Display(r, "namespace", 63), Display(r, "created_at", 40)});
  }
  if (table.rows() == 0) {
    out << "No approval rules: every allowed kubectl command on this connection runs at once.\n"
           "Add one with 'uplink approvals add-rule "
        << OneLineExcerpt(connection, 63) << " --verb VERB --resource TYPE --namespace NS'.\n";
    return;
  }
  out << "kubectl commands that match one of these rules wait for approval ('*' matches "
         "anything):\n\n";
  table.Render(out);
}

void PrintDecision(std::ostream& out, const json::object& reply) {
  Fields fields;
  fields.Add("command", Display(reply, "id", 32));
  fields.Add("command line", CommandLineText(reply));
  fields.Add("requested by", PersonText(reply, "requested_by"));
  fields.Add("status", Display(reply, "status", 24));
  fields.Add("decided by", PersonText(reply, "decided_by"));
  fields.Add("decided", Display(reply, "decided_at", 40));
  fields.Render(out);
  out << "\n" << OneLineExcerpt(StringField(reply, "message").value_or(""), 500) << "\n";
}

Status Decide(Invocation& inv, bool approve) {
  std::optional<json::object> body;
  if (!approve && inv.line.Has("reason")) body = json::object{{"reason", inv.line.Get("reason")}};
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object reply,
                          session.api->Post(ApprovalPath(inv.operand(0),
                                                         approve ? "approve" : "reject"),
                                            body));
  if (inv.json()) {
    PrintJson(inv.out, reply);
  } else {
    PrintDecision(inv.out, reply);
  }
  return Status::Ok();
}

}  // namespace

Result<json::object> WaitForApproval(Invocation& inv, ApiClient& api,
                                     const std::string& connection_id, json::object reply) {
  const std::string id = StringField(reply, "id").value_or("");
  if (id.empty()) {
    return InternalError("the console's reply says the command waits for approval but names no "
                         "command id; check it with 'uplink approvals list'");
  }
  const std::string path = "/api/v1/connections/" + net::PercentEncode(connection_id) +
                           "/commands/" + net::PercentEncode(id);
  inv.err << "uplink: " << ConsoleLines(StringField(reply, "message").value_or("")) << "\n"
          << std::flush;
  bool told_approved = false;
  while (true) {
    const std::string status = StringField(reply, "status").value_or("");
    const std::string message = StringField(reply, "message").value_or("");
    if (status == "completed") return reply;
    if (status == "rejected" || status == "expired") {
      return PermissionDeniedError("command " + id + " did not run: " + ConsoleLines(message));
    }
    if (status == "failed") {
      const json::object* error = ObjectField(reply, "error");
      return FailedPreconditionError(
          "command " + id + " was approved but did not run: " +
          ConsoleLines(error != nullptr ? Display(*error, "message", 500) : message));
    }
    if (status == "approved" && !told_approved) {
      inv.err << "uplink: " << ConsoleLines(message) << "\n" << std::flush;
      told_approved = true;
    } else if (status != "approved" && status != "waiting_for_approval") {
      return InternalError("the console's reply has an unknown command status '" +
                           OneLineExcerpt(status, 40) + "'");
    }
    std::this_thread::sleep_for(kApprovalPollInterval);
    UPLINK_ASSIGN_OR_RETURN(reply, api.Get(path));
  }
}

Status RunApprovalsList(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  const bool all = inv.line.Has("all");
  std::string target = std::string("/api/v1/approvals?status=") +
                       (all ? "all" : "waiting_for_approval");
  if (inv.line.Has("connection")) {
    UPLINK_ASSIGN_OR_RETURN(std::string id,
                            ResolveConnection(*session.api, inv.line.Get("connection")));
    target += "&connection_id=" + net::PercentEncode(id);
  }
  UPLINK_ASSIGN_OR_RETURN(json::object reply, session.api->Get(target));
  const json::array* approvals = ArrayField(reply, "approvals");
  if (approvals == nullptr) {
    return InternalError(
        "the console's reply is not the JSON object uplink expects (no \"approvals\" list)");
  }
  if (inv.json()) {
    PrintJson(inv.out, reply);
  } else {
    PrintApprovals(inv.out, *approvals, ClusterNames(*session.api), all);
  }
  return Status::Ok();
}

Status RunApprovalsApprove(Invocation& inv) { return Decide(inv, true); }

Status RunApprovalsReject(Invocation& inv) { return Decide(inv, false); }

Status RunApprovalsRules(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, session.api->Get(RulesPath(id)));
  const json::array* rules = ArrayField(reply, "rules");
  if (rules == nullptr) {
    return InternalError(
        "the console's reply is not the JSON object uplink expects (no \"rules\" list)");
  }
  if (inv.json()) {
    PrintJson(inv.out, reply);
  } else {
    PrintRules(inv.out, *rules, inv.operand(0));
  }
  return Status::Ok();
}

Status RunApprovalsAddRule(Invocation& inv) {
  json::object body;
  for (const char* field : {"verb", "resource", "namespace"}) {
    if (inv.line.Has(field)) body[field] = inv.line.Get(field);
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(json::object rule, session.api->Post(RulesPath(id), body));
  if (inv.json()) {
    PrintJson(inv.out, rule);
  } else {
    inv.out << "Added approval rule " << Display(rule, "id", 32) << ": " << RuleSentence(rule)
            << " now waits for approval.\n";
  }
  return Status::Ok();
}

Status RunApprovalsRemoveRule(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveConnection(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(
      json::object rule,
      session.api->Call("DELETE", RulesPath(id) + "/" + net::PercentEncode(inv.operand(1))));
  if (inv.json()) {
    PrintJson(inv.out, rule);
  } else {
    inv.out << "Removed approval rule " << Display(rule, "id", 32)
            << ". Commands already waiting still need a decision.\n";
  }
  return Status::Ok();
}

}  // namespace uplink::cli
