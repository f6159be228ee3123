// uplink users ..., uplink api-keys ..., uplink audit
#include <algorithm>
#include <cctype>

#include "cli/commands.h"
#include "cli/connections.h"
#include "cli/render.h"
#include "cli/secret_file.h"
#include "common/text.h"
#include "net/http.h"

namespace uplink::cli {
namespace {

constexpr char kApiKeyPurpose[] = "create API keys";
constexpr char kPasswordPurpose[] = "set another user's password";
constexpr char kResetTwoFactorPurpose[] = "reset another user's two-factor sign-in";

bool IsPlainId(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

std::string UserPath(std::string_view id) { return "/api/v1/users/" + net::PercentEncode(id); }

// A user id, "me", or an email (looked up in the user list, case-insensitively).
Result<std::string> ResolveUser(ApiClient& api, std::string_view who) {
  if (who == "me") {
    UPLINK_ASSIGN_OR_RETURN(json::object me, api.Get("/api/v1/me"));
    const json::object* user = ObjectField(me, "user");
    auto id = user != nullptr ? StringField(*user, "id") : std::nullopt;
    if (!id || !IsPlainId(*id))
      return InternalError("the console's /api/v1/me reply has no user id");
    return *id;
  }
  if (who.find('@') == std::string_view::npos) {
    if (!IsPlainId(who)) {
      return InvalidArgumentError("'" + OneLineExcerpt(who, 64) +
                                  "' is not a user id, an email or 'me'");
    }
    return std::string(who);
  }
  UPLINK_ASSIGN_OR_RETURN(json::object reply, api.Get("/api/v1/users"));
  if (const json::array* users = ArrayField(reply, "users")) {
    for (const json::value& v : *users) {
      if (!v.is_object()) continue;
      auto email = StringField(v.get_object(), "email");
      auto id = StringField(v.get_object(), "id");
      if (email && id && EqualsIgnoringAsciiCase(*email, who) && IsPlainId(*id)) return *id;
    }
  }
  return NotFoundError("no user has the email " + OneLineExcerpt(who, 254) +
                       "; 'uplink users list' shows them");
}

void PrintUsers(std::ostream& out, const json::array& users) {
  Table table({"ID", "EMAIL", "ROLE", "STATUS", "PASSWORD", "TWO-FACTOR", "CREATED"});
  const json::object empty;
  for (const json::value& v : users) {
    const json::object& u = v.is_object() ? v.get_object() : empty;
    const json::value* deactivated = u.if_contains("deactivated_at");
    const json::value* has_password = u.if_contains("has_password");
    const json::value* two_factor = u.if_contains("two_factor_enabled");
    table.AddRow({Display(u, "id", 32), Display(u, "email", 254), Display(u, "role", 16),
                  deactivated != nullptr && deactivated->is_string() ? "deactivated" : "active",
                  has_password != nullptr && has_password->is_bool()
                      ? (has_password->get_bool() ? "set" : "none")
                      : "-",
                  two_factor != nullptr && two_factor->is_bool()
                      ? (two_factor->get_bool() ? "on" : "off")
                      : "-",
                  Display(u, "created_at", 40)});
  }
  table.Render(out);
}

Status PrintUser(Invocation& inv, const json::object& user) {
  if (inv.json()) {
    PrintJson(inv.out, user);
    return Status::Ok();
  }
  PrintUsers(inv.out, json::array{user});
  return Status::Ok();
}

// A new password: one line of stdin, or asked twice on the terminal. `allow_empty` lets an
// empty answer on the terminal mean "no password" (nullopt).
Result<std::optional<Secret>> ReadNewPassword(Invocation& inv, std::string_view prompt,
                                              bool allow_empty) {
  if (inv.line.Has("password-stdin")) {
    UPLINK_ASSIGN_OR_RETURN(std::string line, ReadLineFrom(inv.in, "the new password on stdin"));
    return std::optional<Secret>(Secret(std::move(line)));
  }
  if (!inv.terminal.Available()) {
    if (allow_empty) return std::optional<Secret>();
    return InvalidArgumentError(
        "no terminal to ask for the password on: pipe it in with --password-stdin");
  }
  UPLINK_ASSIGN_OR_RETURN(Secret first, inv.terminal.ReadSecret(prompt));
  if (first.empty()) {
    if (allow_empty) return std::optional<Secret>();
    return InvalidArgumentError("the password is empty");
  }
  UPLINK_ASSIGN_OR_RETURN(Secret second, inv.terminal.ReadSecret("Repeat the password: "));
  if (!first.Equals(second))
    return InvalidArgumentError("the two passwords differ; nothing changed");
  return std::optional<Secret>(std::move(first));
}

Status UserAction(Invocation& inv, std::string_view action) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveUser(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(json::object user,
                          session.api->Post(UserPath(id) + "/" + std::string(action)));
  return PrintUser(inv, user);
}

void PrintApiKeys(std::ostream& out, const json::array& keys) {
  Table table({"ID", "NAME", "PREFIX", "STATUS", "CREATED", "EXPIRES"});
  const json::object empty;
  for (const json::value& v : keys) {
    const json::object& k = v.is_object() ? v.get_object() : empty;
    table.AddRow({Display(k, "id", 32), Display(k, "name", 63), Display(k, "prefix", 24),
                  Display(k, "status", 16), Display(k, "created_at", 40),
                  Display(k, "expires_at", 40)});
  }
  table.Render(out);
}

}  // namespace

Status RunUsersList(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, session.api->Get("/api/v1/users"));
  const json::array* users = ArrayField(reply, "users");
  if (users == nullptr) {
    return InternalError(
        "the console's reply is not the JSON object uplink expects (no \"users\" "
        "list)");
  }
  if (inv.json()) {
    PrintJson(inv.out, reply);
  } else {
    PrintUsers(inv.out, *users);
  }
  return Status::Ok();
}

Status RunUsersShow(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveUser(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(json::object user, session.api->Get(UserPath(id)));
  return PrintUser(inv, user);
}

Status RunUsersCreate(Invocation& inv) {
  const std::string& email = inv.operand(0);
  std::string role = inv.line.Get("role", "member");
  if (role != "member" && role != "admin") {
    return InvalidArgumentError("--role must be member or admin");
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(
      std::optional<Secret> password,
      ReadNewPassword(inv, "Password for " + email + " (empty for none: API keys only): ", true));
  json::object body{{"email", email}, {"role", role}};
  if (password) body["password"] = password->Reveal();
  UPLINK_ASSIGN_OR_RETURN(json::object user, session.api->Post("/api/v1/users", body));
  return PrintUser(inv, user);
}

Status RunUsersResetTwoFactor(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(std::string id, ResolveUser(*session.api, inv.operand(0)));
  UPLINK_ASSIGN_OR_RETURN(json::object user,
                          CallSensitive(inv, *session.api, "POST", UserPath(id) + "/two-factor/reset",
                                        json::object{}, kResetTwoFactorPurpose));
  if (!inv.json()) {
    inv.out << "Two-factor sign-in of " << Display(user, "email", 254)
            << " is off; they sign in with their password alone until they set it up again.\n";
  }
  return PrintUser(inv, user);
}

Status RunUsersDeactivate(Invocation& inv) { return UserAction(inv, "deactivate"); }
Status RunUsersReactivate(Invocation& inv) { return UserAction(inv, "reactivate"); }

Status RunUsersSetPassword(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  ApiClient& api = *session.api;
  UPLINK_ASSIGN_OR_RETURN(json::object me, api.Get("/api/v1/me"));
  const json::object* my_user = ObjectField(me, "user");
  const std::string my_id =
      my_user != nullptr ? StringField(*my_user, "id").value_or("") : std::string();
  std::string id = my_id;
  if (!inv.line.operands.empty()) {
    UPLINK_ASSIGN_OR_RETURN(id, ResolveUser(api, inv.operand(0)));
  }
  if (id.empty()) return InternalError("the console's /api/v1/me reply has no user id");
  const bool own = id == my_id;

  json::object body;
  const json::value* has_password =
      my_user != nullptr ? my_user->if_contains("has_password") : nullptr;
  if (own && has_password != nullptr && has_password->is_bool() && has_password->get_bool()) {
    UPLINK_ASSIGN_OR_RETURN(Secret current, ReadPassword(inv, "Current password: "));
    body["current_password"] = current.Reveal();
  }
  UPLINK_ASSIGN_OR_RETURN(std::optional<Secret> password,
                          ReadNewPassword(inv, "New password: ", false));
  body["password"] = password->Reveal();
  UPLINK_ASSIGN_OR_RETURN(
      json::object user,
      own ? api.Post(UserPath(id) + "/password", body)
          : CallSensitive(inv, api, "POST", UserPath(id) + "/password", body, kPasswordPurpose));
  if (inv.json()) {
    PrintJson(inv.out, user);
  } else {
    inv.out << "Password set for " << Display(user, "email", 254)
            << "; their other sessions were signed out.\n";
  }
  return Status::Ok();
}

Status RunApiKeysList(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object reply, session.api->Get("/api/v1/api-keys"));
  const json::array* keys = ArrayField(reply, "api_keys");
  if (keys == nullptr) {
    return InternalError(
        "the console's reply is not the JSON object uplink expects (no "
        "\"api_keys\" list)");
  }
  if (inv.json()) {
    PrintJson(inv.out, reply);
  } else {
    PrintApiKeys(inv.out, *keys);
  }
  return Status::Ok();
}

Status RunApiKeysCreate(Invocation& inv) {
  json::object body{{"name", inv.operand(0)}};
  if (inv.line.Has("expires-at")) {
    std::string value = inv.line.Get("expires-at");
    if (!ParseRfc3339(value).ok()) {
      return InvalidArgumentError("--expires-at '" + OneLineExcerpt(value, 64) +
                                  "' is not an RFC 3339 time such as 2026-12-31T00:00:00Z");
    }
    body["expires_at"] = value;
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  SecretFile key_file;
  if (inv.line.Has("key-out")) {
    UPLINK_RETURN_IF_ERROR(key_file.Create(inv.line.Get("key-out"), "--key-out"));
  }
  UPLINK_ASSIGN_OR_RETURN(
      json::object reply,
      CallSensitive(inv, *session.api, "POST", "/api/v1/api-keys", body, kApiKeyPurpose));
  Secret key(StringField(reply, "key").value_or(""));
  reply.erase("key");
  if (!LooksLikeToken(key.Reveal(), kApiKeyPrefix)) {
    return InternalError(
        "the console's reply carries no API key (uk_...); check with 'uplink "
        "api-keys list'");
  }
  if (key_file.created()) {
    if (Status written = key_file.Write(key.Reveal()); !written.ok()) {
      inv.err << "uplink: could not write the new key to " << key_file.path() << " ("
              << written.message() << "); it exists now, so here it is (shown once):\n\n  "
              << key.Reveal() << "\n";
      return written.WithContext("--key-out " + key_file.path());
    }
  }
  if (inv.json()) {
    if (!key_file.path().empty()) {
      PrintJson(inv.out, reply);
    } else {
      reply["key"] = key.Reveal();
      PrintJson(inv.out, reply);
    }
    return Status::Ok();
  }
  PrintApiKeys(inv.out, json::array{reply});
  if (!key_file.path().empty()) {
    inv.out << "\nThe key was written to " << key_file.path()
            << " (mode 0600); it was not shown.\n";
  } else {
    inv.out << "\nAPI key (shown only this once):\n\n  " << key.Reveal()
            << "\n\nUse it without putting it on a command line: 'read -rs UPLINK_API_KEY; export "
               "UPLINK_API_KEY',\nor store it with 'uplink login --api-key-stdin'.\n";
  }
  return Status::Ok();
}

Status RunApiKeysRevoke(Invocation& inv) {
  if (!IsPlainId(inv.operand(0))) {
    return InvalidArgumentError("'" + OneLineExcerpt(inv.operand(0), 64) +
                                "' is not an API key id; 'uplink api-keys list' shows them");
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(
      json::object reply,
      session.api->Post("/api/v1/api-keys/" + net::PercentEncode(inv.operand(0)) + "/revoke"));
  if (inv.json()) {
    PrintJson(inv.out, reply);
  } else {
    PrintApiKeys(inv.out, json::array{reply});
  }
  return Status::Ok();
}

Status RunAudit(Invocation& inv) {
  std::string query;
  auto add = [&](std::string_view key, std::string_view value) {
    query += (query.empty() ? "?" : "&") + std::string(key) + "=" + net::PercentEncode(value);
  };
  if (inv.line.Has("limit")) {
    std::string limit = inv.line.Get("limit");
    if (!ParseDecimal(limit, 1, 500)) {
      return InvalidArgumentError("--limit takes a number from 1 to 500");
    }
    add("limit", limit);
  }
  if (inv.line.Has("before")) add("before", inv.line.Get("before"));
  if (inv.line.Has("action")) add("action", inv.line.Get("action"));
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  if (inv.line.Has("connection")) {
    UPLINK_ASSIGN_OR_RETURN(std::string id,
                            ResolveConnection(*session.api, inv.line.Get("connection")));
    add("connection_id", id);
  }
  UPLINK_ASSIGN_OR_RETURN(json::object reply, session.api->Get("/api/v1/audit" + query));
  const json::array* events = ArrayField(reply, "events");
  if (events == nullptr) {
    return InternalError(
        "the console's reply is not the JSON object uplink expects (no "
        "\"events\" list)");
  }
  if (inv.json()) {
    PrintJson(inv.out, reply);
    return Status::Ok();
  }
  Table table({"ID", "AT", "ACTION", "OUTCOME", "ACTOR", "TARGET", "SOURCE", "DETAIL"});
  const json::object empty;
  for (const json::value& v : *events) {
    const json::object& e = v.is_object() ? v.get_object() : empty;
    const json::object* actor = ObjectField(e, "actor");
    const json::object* target = ObjectField(e, "target");
    table.AddRow(
        {Display(e, "id", 32), Display(e, "at", 40), Display(e, "action", 48),
         Display(e, "outcome", 16), actor != nullptr ? Display(*actor, "label", 64) : "-",
         target != nullptr ? Display(*target, "type", 24) + ":" + Display(*target, "id", 32) : "-",
         Display(e, "source_address", 64), DisplayJson(e, "detail")});
  }
  if (table.rows() == 0) {
    inv.out << "No events.\n";
  } else {
    table.Render(inv.out);
  }
  if (std::string next = Display(reply, "next_before", 64); next != "-") {
    inv.out << "\nOlder events: uplink audit --before " << next << "\n";
  }
  return Status::Ok();
}

}  // namespace uplink::cli
