// uplink offers …, uplink reservations … and uplink run (docs/cli.md, "Workspaces"): GPU
// capacity a supplier offers, its review, the workspace controller's credential and values;
// reservations; and commands run in a reservation's workspace with their output streamed.
#include <algorithm>

#include "cli/commands.h"
#include "cli/credentials.h"
#include "cli/render.h"
#include "cli/secret_file.h"
#include "common/files.h"
#include "common/text.h"
#include "net/http.h"
#include "protocol/credentials.h"

namespace uplink::cli {
namespace {

constexpr std::string_view kReviewChecks[] = {
    "authority_confirmed",        "hardware_compatible",  "isolation_verified",
    "expiry_and_cleanup_checked", "disk_eviction_tested", "network_policy_enforced",
    "price_includes_traffic"};
// How long one read of a command's output may wait for more.
constexpr int kOutputWaitSeconds = 25;
// The exit code of a command killed at its timeout, as timeout(1) has it.
constexpr int kTimeoutExitCode = 124;

std::string OfferPath(const std::string& id) {
  return "/api/v1/offers/" + net::PercentEncode(id);
}
std::string ReservationPath(const std::string& id) {
  return "/api/v1/reservations/" + net::PercentEncode(id);
}

std::vector<std::string> CommaList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = std::min(text.find(',', start), text.size());
    std::string item(TrimWhitespace(std::string_view(text).substr(start, comma - start)));
    if (!item.empty()) out.push_back(std::move(item));
    start = comma + 1;
  }
  return out;
}

// A duration flag ("2h", "90m") in whole seconds, at least one.
Result<std::int64_t> Seconds(const Invocation& inv, std::string_view flag,
                             std::string_view fallback) {
  const std::string text = inv.line.Get(flag, fallback);
  auto parsed = ParseDuration(text);
  if (!parsed.ok() || parsed->count() < 1000) {
    return InvalidArgumentError("--" + std::string(flag) +
                                " takes a duration such as 90m or 2h, of at least 1s");
  }
  return parsed->count() / 1000;
}

Result<std::int64_t> Count(const Invocation& inv, std::string_view flag, std::int64_t fallback,
                           std::int64_t max) {
  if (!inv.line.Has(flag)) return fallback;
  auto number = ParseDecimalInt(inv.line.Get(flag), 1, max);
  if (!number) {
    return InvalidArgumentError("--" + std::string(flag) + " takes a number from 1 to " +
                                std::to_string(max));
  }
  return *number;
}

std::string Int(const json::object& object, std::string_view key) {
  return Display(object, key, 24);
}

std::string Availability(const json::object& offer) {
  const json::value* availability = offer.if_contains("availability");
  if (availability == nullptr || availability->is_string()) return "always";
  const json::object* window = availability->if_object();
  if (window == nullptr) return "-";
  return "from " + Display(*window, "from") + " until " + Display(*window, "until");
}

void PrintOffers(std::ostream& out, const json::object& reply) {
  Table table({"ID", "STATE", "CLUSTER", "GPUS", "COUNTRY", "PRICE/GPU-HOUR", "YOURS"});
  if (const json::array* offers = ArrayField(reply, "offers")) {
    for (const json::value& entry : *offers) {
      const json::object* offer = entry.if_object();
      if (offer == nullptr) continue;
      table.AddRow({Display(*offer, "id", 24), Display(*offer, "state", 16),
                    Display(*offer, "cluster_name", 40), Int(*offer, "gpus"),
                    Display(*offer, "country", 4),
                    Display(*offer, "price_per_gpu_hour", 20) + " " +
                        Display(*offer, "currency", 4),
                    Display(*offer, "mine")});
    }
  }
  if (table.rows() == 0) {
    out << "No offers. Offer capacity with 'uplink offers create CLUSTER_NAME --gpus N ...'.\n";
    return;
  }
  table.Render(out);
}

void PrintOffer(std::ostream& out, const json::object& offer) {
  Fields fields;
  fields.Add("id", Display(offer, "id", 24));
  fields.Add("state", Display(offer, "state", 16));
  fields.Add("cluster", Display(offer, "cluster_name", 63) + " (connection " +
                            Display(offer, "connection_id", 24) + ")");
  fields.Add("gpus", Int(offer, "gpus"));
  fields.Add("country", Display(offer, "country", 4));
  fields.Add("available", Availability(offer));
  fields.Add("price", Display(offer, "price_per_gpu_hour", 20) + " " +
                          Display(offer, "currency", 4) + " per GPU-hour");
  fields.Add("max lifetime", Int(offer, "max_lifetime_seconds") + " s");
  if (const json::object* usage = ObjectField(offer, "usage")) {
    fields.Add("reserved", Int(*usage, "gpus_reserved") + " GPUs in " +
                               Int(*usage, "active_reservations") + " active reservations");
  }
  fields.Render(out);
  const json::object* review = ObjectField(offer, "review");
  out << "\nReview:";
  if (review == nullptr) {
    out << " none yet\n";
  } else {
    out << "\n";
    Fields checks;
    for (std::string_view check : kReviewChecks) {
      checks.Add(std::string(check), Display(*review, check));
    }
    checks.Add("cpu per GPU (m)", Int(*review, "cpu_millis_per_gpu"));
    checks.Add("memory per GPU (B)", Int(*review, "memory_bytes_per_gpu"));
    checks.Add("disk per GPU (B)", Int(*review, "disk_bytes_per_gpu"));
    checks.Add("transfer budget (B)", Int(*review, "transfer_budget_bytes"));
    checks.Add("reviewed", Display(*review, "reviewed_by", 254) + " at " +
                               Display(*review, "reviewed_at"));
    checks.Render(out);
  }
  if (const json::array* nodes = ArrayField(offer, "nodes")) {
    out << "\nNodes the cluster reported:\n";
    Table table({"NODE", "READY", "GPUS", "PRODUCT", "APPROVED"});
    for (const json::value& entry : *nodes) {
      const json::object* node = entry.if_object();
      if (node == nullptr) continue;
      table.AddRow({Display(*node, "name", 63), Display(*node, "ready"),
                    Int(*node, "gpu_allocatable"), Display(*node, "gpu_product", 40),
                    Display(*node, "approved")});
    }
    if (table.rows() == 0) {
      out << "  none reported yet: install the inventory agent with the offer's token\n";
    } else {
      table.Render(out);
    }
  }
  if (const json::object* execution = ObjectField(offer, "execution")) {
    out << "\nExecution:\n";
    Fields lines;
    lines.Add("enabled", Display(*execution, "enabled"));
    lines.Add("credential", Display(*execution, "credential_prefix", 24) +
                                (execution->if_contains("credential_revoked_at") &&
                                         !execution->at("credential_revoked_at").is_null()
                                     ? " (revoked)"
                                     : ""));
    lines.Add("helm release", Display(*execution, "helm_release", 53));
    lines.Add("controller seen", Display(*execution, "controller_seen_at"));
    lines.Add("upgrade", Display(*execution, "helm_upgrade_command", 200));
    lines.Render(out);
  }
}

void PrintReservations(std::ostream& out, const json::object& reply) {
  Table table({"ID", "STATE", "GPUS", "NODE", "EXPIRES", "OFFER"});
  if (const json::array* list = ArrayField(reply, "reservations")) {
    for (const json::value& entry : *list) {
      const json::object* r = entry.if_object();
      if (r == nullptr) continue;
      table.AddRow({Display(*r, "id", 24), Display(*r, "state", 16), Int(*r, "gpus"),
                    Display(*r, "node", 63), Display(*r, "expires_at"),
                    Display(*r, "offer_id", 24)});
    }
  }
  if (table.rows() == 0) {
    out << "No reservations. Reserve GPUs with 'uplink reservations create OFFER_ID --gpus N'.\n";
    return;
  }
  table.Render(out);
}

void PrintReservation(std::ostream& out, const json::object& r) {
  Fields fields;
  for (std::string_view key : {"id", "state", "offer_id", "node", "pod", "created_at",
                               "expires_at", "ended_at"}) {
    fields.Add(std::string(key), Display(r, key, 63));
  }
  fields.Add("gpus", Int(r, "gpus"));
  if (r.contains("seconds_left")) fields.Add("seconds left", Int(r, "seconds_left"));
  fields.Render(out);
  if (const json::array* transitions = ArrayField(r, "transitions")) {
    out << "\nTransitions:\n";
    Table table({"AT", "STATE", "BY", "REASON"});
    for (const json::value& entry : *transitions) {
      const json::object* t = entry.if_object();
      if (t == nullptr) continue;
      table.AddRow({Display(*t, "at"), Display(*t, "state", 16), Display(*t, "source", 16),
                    Display(*t, "reason", 100)});
    }
    table.Render(out);
  }
}

Result<json::object> OfferReply(Invocation& inv, std::string_view method,
                                const std::string& target, const std::optional<json::object>& body) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  return session.api->Call(method, target, body);
}

Status ShowOffer(Invocation& inv, const json::object& offer) {
  if (inv.json()) {
    PrintJson(inv.out, offer);
  } else {
    PrintOffer(inv.out, offer);
  }
  return Status::Ok();
}

Status ShowReservation(Invocation& inv, const json::object& reservation) {
  if (inv.json()) {
    PrintJson(inv.out, reservation);
  } else {
    PrintReservation(inv.out, reservation);
  }
  return Status::Ok();
}

// Writes `secret` to an already created `file`, or, when it cannot be written, shows it (the
// console has issued it and keeps no copy).
Status DeliverSecret(Invocation& inv, SecretFile& file, const Secret& secret,
                     std::string_view what, std::string_view flag) {
  Status written = file.Write(secret.Reveal());
  if (!written.ok()) {
    inv.err << "uplink: could not write the " << what << " to " << file.path() << " ("
            << written.message() << "); the console has already issued it, so here it is:\n\n  "
            << secret.Reveal() << "\n";
    return written.WithContext(std::string(flag) + " " + file.path());
  }
  return Status::Ok();
}

}  // namespace

Status RunOffersList(Invocation& inv) {
  std::string target = "/api/v1/offers";
  if (inv.line.Has("state")) target += "?state=" + net::PercentEncode(inv.line.Get("state"));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, OfferReply(inv, "GET", target, std::nullopt));
  if (inv.json()) {
    PrintJson(inv.out, reply);
  } else {
    PrintOffers(inv.out, reply);
  }
  return Status::Ok();
}

Status RunOffersShow(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(json::object offer,
                          OfferReply(inv, "GET", OfferPath(inv.operand(0)), std::nullopt));
  return ShowOffer(inv, offer);
}

Status RunOffersCreate(Invocation& inv) {
  for (std::string_view flag : {"gpus", "country", "price", "currency"}) {
    if (!inv.line.Has(flag)) {
      return InvalidArgumentError("--" + std::string(flag) +
                                  " is required: uplink offers create CLUSTER_NAME --gpus N "
                                  "--country CC --price P --currency CUR");
    }
  }
  UPLINK_ASSIGN_OR_RETURN(std::int64_t gpus, Count(inv, "gpus", 1, 100'000));
  json::object body{{"cluster_name", inv.operand(0)},
                    {"gpus", gpus},
                    {"country", inv.line.Get("country")},
                    {"price_per_gpu_hour", inv.line.Get("price")},
                    {"currency", inv.line.Get("currency")}};
  if (inv.line.Has("available-from") || inv.line.Has("available-until")) {
    json::object window;
    if (inv.line.Has("available-from")) window["from"] = inv.line.Get("available-from");
    if (inv.line.Has("available-until")) window["until"] = inv.line.Get("available-until");
    body["availability"] = std::move(window);
  }
  if (inv.line.Has("max-lifetime")) {
    UPLINK_ASSIGN_OR_RETURN(body["max_lifetime_seconds"], Seconds(inv, "max-lifetime", ""));
  }
  SecretFile token_file;
  if (inv.line.Has("token-out")) {
    UPLINK_RETURN_IF_ERROR(token_file.Create(inv.line.Get("token-out"), "--token-out"));
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object reply,
                          CallSensitive(inv, *session.api, "POST", "/api/v1/offers", body,
                                        "create an offer and its connection"));
  Secret token(StringField(reply, "token").value_or(""));
  reply.erase("token");
  if (!LooksLikeToken(token.Reveal(), protocol::kAgentTokenPrefix)) {
    return InternalError("the console's reply carries no inventory token (agt_...)");
  }
  const bool to_file = token_file.created();  // Write() closes it
  if (to_file) {
    UPLINK_RETURN_IF_ERROR(DeliverSecret(inv, token_file, token, "inventory token", "--token-out"));
  } else if (inv.json()) {
    reply["token"] = token.Reveal();
  }
  if (inv.json()) {
    PrintJson(inv.out, reply);
    return Status::Ok();
  }
  PrintOffer(inv.out, reply);
  if (to_file) {
    inv.out << "\nThe inventory token was written to " << token_file.path()
            << " (mode 0600); it was not shown.\n";
  } else {
    inv.out << "\nInventory token (shown only this once; uplink keeps no copy):\n\n  "
            << token.Reveal() << "\n";
  }
  inv.out << "\nNext: install the inventory agent in the cluster with it ('uplink connections "
             "install "
          << Display(reply, "connection_id", 24)
          << "' puts it in a Secret for you). Once it reports, an admin reviews the offer.\n";
  return Status::Ok();
}

Status RunOffersReview(Invocation& inv) {
  json::object body;
  const std::vector<std::string> done = CommaList(inv.line.Get("checks"));
  const bool all = done.size() == 1 && done[0] == "all";
  for (const std::string& check : done) {
    if (!all && std::find(std::begin(kReviewChecks), std::end(kReviewChecks), check) ==
                    std::end(kReviewChecks)) {
      return InvalidArgumentError("--checks: unknown check \"" + OneLineExcerpt(check, 40) +
                                  "\"; run 'uplink offers review --help' for the list");
    }
  }
  for (std::string_view check : kReviewChecks) {
    body[check] = all || std::find(done.begin(), done.end(), check) != done.end();
  }
  for (auto [flag, field] : {std::pair{"cpu-per-gpu", "cpu_per_gpu"},
                             std::pair{"memory-per-gpu", "memory_per_gpu"},
                             std::pair{"disk-per-gpu", "disk_per_gpu"},
                             std::pair{"transfer-budget", "transfer_budget_bytes"}}) {
    if (!inv.line.Has(flag)) {
      return InvalidArgumentError("--" + std::string(flag) + " is required");
    }
    body[field] = inv.line.Get(flag);
  }
  json::array nodes;
  for (const std::string& node : CommaList(inv.line.Get("approve-nodes"))) nodes.push_back(json::value(node));
  body["approved_nodes"] = std::move(nodes);
  if (inv.line.Has("notes")) body["notes"] = inv.line.Get("notes");
  UPLINK_ASSIGN_OR_RETURN(json::object offer,
                          OfferReply(inv, "POST", OfferPath(inv.operand(0)) + "/review", body));
  UPLINK_RETURN_IF_ERROR(ShowOffer(inv, offer));
  if (!inv.json() && StringField(offer, "state") != "qualified") {
    inv.out << "\nNot qualified: every check must be done and at least one node approved.\n";
  }
  return Status::Ok();
}

Status RunOffersSuspend(Invocation& inv) {
  json::object body;
  if (inv.line.Has("reason")) body["reason"] = inv.line.Get("reason");
  UPLINK_ASSIGN_OR_RETURN(json::object offer,
                          OfferReply(inv, "POST", OfferPath(inv.operand(0)) + "/suspend", body));
  return ShowOffer(inv, offer);
}

Status RunOffersResume(Invocation& inv) {
  json::object body;
  if (inv.line.Has("reason")) body["reason"] = inv.line.Get("reason");
  UPLINK_ASSIGN_OR_RETURN(json::object offer,
                          OfferReply(inv, "POST", OfferPath(inv.operand(0)) + "/resume", body));
  return ShowOffer(inv, offer);
}

Status RunOffersExecution(Invocation& inv) {
  const std::string path = OfferPath(inv.operand(0)) + "/execution";
  const int modes = inv.line.Has("rotate") + inv.line.Has("disable") + inv.line.Has("revoke");
  if (modes > 1) return InvalidArgumentError("give one of --rotate, --disable and --revoke");
  if (inv.line.Has("disable") || inv.line.Has("revoke")) {
    UPLINK_ASSIGN_OR_RETURN(
        json::object offer,
        OfferReply(inv, "POST", path + (inv.line.Has("revoke") ? "/revoke" : "/disable"),
                   json::object{}));
    return ShowOffer(inv, offer);
  }
  json::object body;
  if (!inv.line.Has("rotate")) {
    if (inv.line.Has("kubernetes-api-cidrs")) {
      json::array cidrs;
      for (const std::string& cidr : CommaList(inv.line.Get("kubernetes-api-cidrs"))) {
        cidrs.push_back(json::value(cidr));
      }
      body["kubernetes_api_cidrs"] = std::move(cidrs);
    }
    if (inv.line.Has("kubernetes-api-port")) {
      UPLINK_ASSIGN_OR_RETURN(body["kubernetes_api_port"],
                              Count(inv, "kubernetes-api-port", 443, 65535));
    }
    if (inv.line.Has("namespace")) body["namespace"] = inv.line.Get("namespace");
  }
  // Both files are made before the console is asked: a path that cannot be written costs
  // nothing.
  SecretFile values_file;
  UPLINK_RETURN_IF_ERROR(values_file.Create(inv.line.Get("out", "execution.json"), "--out"));
  SecretFile credential_file;
  if (inv.line.Has("credential-out")) {
    UPLINK_RETURN_IF_ERROR(
        credential_file.Create(inv.line.Get("credential-out"), "--credential-out"));
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(
      json::object reply,
      CallSensitive(inv, *session.api, "POST", inv.line.Has("rotate") ? path + "/rotate" : path,
                    body, "issue an execution credential"));
  Secret credential(StringField(reply, "credential").value_or(""));
  reply.erase("credential");
  if (!LooksLikeToken(credential.Reveal(), protocol::kExecutionCredentialPrefix)) {
    return InternalError("the console's reply carries no execution credential (exe_...)");
  }
  const json::object* values = ObjectField(reply, "values");
  if (values == nullptr) return InternalError("the console's reply carries no values");
  const std::string values_path = values_file.path();
  UPLINK_RETURN_IF_ERROR(values_file.Write(ToJson(*values) + "\n"));
  const bool to_file = credential_file.created();  // Write() closes it
  if (to_file) {
    UPLINK_RETURN_IF_ERROR(DeliverSecret(inv, credential_file, credential,
                                         "execution credential", "--credential-out"));
  }
  const std::string command = StringField(reply, "helm_upgrade_command").value_or("");
  if (inv.json()) {
    json::object out{{"execution_json", values_path}, {"helm_upgrade_command", command}};
    if (!to_file) out["credential"] = credential.Reveal();
    PrintJson(inv.out, out);
    return Status::Ok();
  }
  inv.out << "Wrote " << values_path << " (mode 0600).\n";
  if (to_file) {
    inv.out << "The execution credential was written to " << credential_file.path()
            << " (mode 0600); it was not shown.\n";
  } else {
    inv.out << "\nExecution credential (shown only this once; uplink keeps no copy):\n\n  "
            << credential.Reveal() << "\n";
  }
  inv.out << "\nPut the credential in the Secret the workspace controller reads, then:\n\n  "
          << OneLineExcerpt(command, 300) << "\n";
  return Status::Ok();
}

Status RunReservationsCreate(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(std::int64_t gpus, Count(inv, "gpus", 1, 100'000));
  UPLINK_ASSIGN_OR_RETURN(std::int64_t seconds, Seconds(inv, "duration", "1h"));
  UPLINK_ASSIGN_OR_RETURN(json::object reservation,
                          OfferReply(inv, "POST", "/api/v1/reservations",
                                     json::object{{"offer_id", inv.operand(0)},
                                                  {"gpus", gpus},
                                                  {"duration_seconds", seconds}}));
  UPLINK_RETURN_IF_ERROR(ShowReservation(inv, reservation));
  if (!inv.json()) {
    inv.out << "\nRun commands in it with 'uplink run " << Display(reservation, "id", 24)
            << " -- nvidia-smi' once it is running.\n";
  }
  return Status::Ok();
}

Status RunReservationsList(Invocation& inv) {
  std::string query;
  auto add = [&](std::string part) { query += (query.empty() ? "?" : "&") + std::move(part); };
  if (inv.line.Has("active")) add("active=true");
  if (inv.line.Has("all")) add("all=true");
  if (inv.line.Has("offer")) add("offer_id=" + net::PercentEncode(inv.line.Get("offer")));
  UPLINK_ASSIGN_OR_RETURN(json::object reply,
                          OfferReply(inv, "GET", "/api/v1/reservations" + query, std::nullopt));
  if (inv.json()) {
    PrintJson(inv.out, reply);
  } else {
    PrintReservations(inv.out, reply);
  }
  return Status::Ok();
}

Status RunReservationsShow(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(
      json::object reservation,
      OfferReply(inv, "GET", ReservationPath(inv.operand(0)), std::nullopt));
  return ShowReservation(inv, reservation);
}

Status RunReservationsStop(Invocation& inv) {
  json::object body;
  if (inv.line.Has("reason")) body["reason"] = inv.line.Get("reason");
  UPLINK_ASSIGN_OR_RETURN(
      json::object reservation,
      OfferReply(inv, "POST", ReservationPath(inv.operand(0)) + "/stop", body));
  return ShowReservation(inv, reservation);
}

Status RunReservationsExtend(Invocation& inv) {
  if (!inv.line.Has("by")) return InvalidArgumentError("--by is required, such as --by 30m");
  UPLINK_ASSIGN_OR_RETURN(std::int64_t seconds, Seconds(inv, "by", ""));
  UPLINK_ASSIGN_OR_RETURN(
      json::object reservation,
      OfferReply(inv, "POST", ReservationPath(inv.operand(0)) + "/extend",
                 json::object{{"duration_seconds", seconds}}));
  return ShowReservation(inv, reservation);
}

Status RunWorkspaceCommand(Invocation& inv) {
  const CommandLine& line = inv.line;
  const std::string example =
      "as in 'uplink run " + OneLineExcerpt(inv.operand(0), 24) + " -- nvidia-smi -L'";
  if (line.operands_before_dashes != 1 || line.operands.size() < 2) {
    return InvalidArgumentError("put the code after --, " + example);
  }
  std::string code;
  for (size_t i = 1; i < line.operands.size(); ++i) code += (i > 1 ? " " : "") + line.operands[i];
  json::object body{{"kind", line.Has("python") ? "python" : "shell"}, {"code", code}};
  if (line.Has("timeout")) {
    UPLINK_ASSIGN_OR_RETURN(body["timeout_s"], Seconds(inv, "timeout", ""));
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  const std::string commands = ReservationPath(inv.operand(0)) + "/commands";
  UPLINK_ASSIGN_OR_RETURN(json::object created, session.api->Post(commands, body));
  const std::string id = StringField(created, "id").value_or("");
  if (id.empty()) return InternalError("the console's reply names no command");
  const json::value* bounded = created.if_contains("timeout_bounded");
  if (bounded != nullptr && bounded->is_bool() && bounded->get_bool()) {
    inv.err << "uplink: the timeout was cut to the reservation's time left, "
            << Display(created, "timeout_s", 12) << " s\n";
  }
  // Stream: read from where the last read ended, waiting for more, until the command ends.
  std::int64_t offset = 0;
  json::object last;
  for (;;) {
    UPLINK_ASSIGN_OR_RETURN(
        last, session.api->Get(commands + "/" + net::PercentEncode(id) + "?offset=" +
                               std::to_string(offset) + "&wait=" +
                               std::to_string(kOutputWaitSeconds)));
    const std::string output = StringField(last, "output").value_or("");
    if (!inv.json()) {
      inv.out << output;
      inv.out.flush();
    }
    const json::value* next = last.if_contains("next_offset");
    if (next != nullptr && next->is_int64() && next->get_int64() > offset) {
      offset = next->get_int64();
    }
    const std::string state = StringField(last, "state").value_or("");
    const json::value* stored = last.if_contains("output_bytes");
    const bool all_read =
        stored == nullptr || !stored->is_int64() || offset >= stored->get_int64() ||
        output.empty();
    if (state != "queued" && state != "running" && all_read) break;
  }
  if (inv.json()) {
    last.erase("output");
    PrintJson(inv.out, last);
  }
  const std::string state = StringField(last, "state").value_or("");
  const json::value* truncated = last.if_contains("truncated");
  if (truncated != nullptr && truncated->is_bool() && truncated->get_bool()) {
    inv.err << "uplink: the output was cut at " << Display(last, "output_cap_bytes", 12)
            << " bytes\n";
  }
  if (state == "exited") {
    const json::value* exit_code = last.if_contains("exit_code");
    if (exit_code == nullptr || !exit_code->is_int64()) {
      return InternalError("the console's reply has no exit code");
    }
    inv.success = static_cast<ExitCode>(std::clamp<std::int64_t>(exit_code->get_int64(), 0, 255));
    return Status::Ok();
  }
  const std::string message = StringField(last, "message").value_or("");
  if (state == "timeout") {
    inv.err << "uplink: the command ran past its timeout and was killed"
            << (message.empty() ? "" : ": " + OneLineExcerpt(message, 300)) << "\n";
    inv.success = static_cast<ExitCode>(kTimeoutExitCode);
    return Status::Ok();
  }
  return FailedPreconditionError("the command " + state +
                                 (message.empty() ? "" : ": " + OneLineExcerpt(message, 300)));
}

}  // namespace uplink::cli
