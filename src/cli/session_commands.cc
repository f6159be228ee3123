// Opening the console, password confirmation, and login / logout / whoami.
#include <utility>

#include "cli/commands.h"
#include "cli/render.h"
#include "common/files.h"
#include "common/text.h"

namespace uplink::cli {
namespace {

Result<std::unique_ptr<ApiClient>> ConnectTo(const Invocation& inv, const std::string& console) {
  UPLINK_ASSIGN_OR_RETURN(std::string normalized, NormalizeConsoleUrl(console));
  ApiClientOptions options;
  if (inv.line.command->id == CommandId::kKubectl) {
    // The console holds a command for up to 60 s; kubectl's output may be megabytes.
    options.request_timeout = kKubectlRequestTimeout;
    options.max_reply_bytes = kMaxKubectlReplyBytes;
  }
  if (inv.line.command->id == CommandId::kRun) {
    options.request_timeout = kRunRequestTimeout;
    options.max_reply_bytes = kMaxRunReplyBytes;
  }
  return ApiClient::Connect(normalized, inv.line.globals.ca_file, options);
}

Status NoConsole() {
  return InvalidArgumentError("no console address: pass --console URL or set UPLINK_CONSOLE");
}

// The console a command without a credential talks to: --console, else the stored one.
Result<std::string> ConsoleForAnonymous(const Invocation& inv) {
  if (!inv.line.globals.console.empty()) return inv.line.globals.console;
  auto file = CredentialsFile::Default(inv.env);
  if (file.ok()) {
    auto stored = file->Load();
    if (stored.ok() && stored->has_value()) return (*stored)->console;
  }
  return NoConsole();
}

Status Confirm(ApiClient& api, const Secret& password, std::ostream& out) {
  UPLINK_ASSIGN_OR_RETURN(
      json::object reply,
      api.Post("/api/v1/session/confirm", json::object{{"password", password.Reveal()}}));
  const json::object* session = ObjectField(reply, "session");
  out << "Password confirmed; sensitive calls are allowed until "
      << (session != nullptr ? Display(*session, "confirmed_until") : "-") << ".\n";
  return Status::Ok();
}

Status SaveAndReport(Invocation& inv, const CredentialsFile& file, StoredCredential stored,
                     std::string_view prefix_or_expiry_note) {
  UPLINK_RETURN_IF_ERROR(file.Save(stored));
  if (inv.json()) {
    PrintJson(inv.out, json::object{{"console", stored.console},
                                    {"kind", CredentialKindName(stored.kind)},
                                    {"email", stored.email},
                                    {"expires_at", stored.expires_at.empty()
                                                       ? json::value(nullptr)
                                                       : json::value(stored.expires_at)},
                                    {"credentials_file", file.path()}});
  } else {
    inv.out << "Signed in to " << stored.console << " as " << OneLineExcerpt(stored.email, 254)
            << prefix_or_expiry_note << ".\nThe credential is kept in " << file.path()
            << " (mode 0600).\n";
  }
  const char* key = inv.env("UPLINK_API_KEY");
  if ((key != nullptr && *key != '\0') || !inv.line.globals.api_key_file.empty()) {
    inv.err << "uplink: note: "
            << (key != nullptr && *key != '\0' ? "UPLINK_API_KEY" : "--api-key-file")
            << " is set and is used before the stored credential.\n";
  }
  return Status::Ok();
}

Status LoginWithApiKey(Invocation& inv, const CredentialsFile& file) {
  UPLINK_ASSIGN_OR_RETURN(std::string console, ConsoleForAnonymous(inv));
  UPLINK_ASSIGN_OR_RETURN(auto api, ConnectTo(inv, console));
  UPLINK_ASSIGN_OR_RETURN(std::string line, ReadLineFrom(inv.in, "the API key on stdin"));
  Secret key(std::string(TrimWhitespace(Secret(std::move(line)).Reveal())));
  if (!LooksLikeToken(key.Reveal(), kApiKeyPrefix)) {
    return InvalidArgumentError("stdin does not hold an uplink API key (uk_...)");
  }
  api->set_credential(key, "stdin");
  UPLINK_ASSIGN_OR_RETURN(json::object me, api->Get("/api/v1/me"));
  const json::object* user = ObjectField(me, "user");
  const json::object* credential = ObjectField(me, "credential");
  StoredCredential stored;
  stored.console = api->console();
  stored.credential = std::move(key);
  stored.kind = CredentialKind::kApiKey;
  if (credential != nullptr)
    stored.expires_at = StringField(*credential, "expires_at").value_or("");
  if (user != nullptr) stored.email = StringField(*user, "email").value_or("");
  std::string note = " with API key " +
                     (credential != nullptr ? Display(*credential, "prefix") : std::string("-"));
  return SaveAndReport(inv, file, std::move(stored), note);
}

Status LoginWithPassword(Invocation& inv, const CredentialsFile& file) {
  UPLINK_ASSIGN_OR_RETURN(std::string console, ConsoleForAnonymous(inv));
  UPLINK_ASSIGN_OR_RETURN(auto api, ConnectTo(inv, console));
  std::string email = inv.line.Get("email");
  if (email.empty()) {
    if (!inv.terminal.Available()) {
      return InvalidArgumentError("no terminal to ask for your email on: pass --email E");
    }
    UPLINK_ASSIGN_OR_RETURN(email, inv.terminal.ReadLine("Email: "));
    email = std::string(TrimWhitespace(email));
  }
  UPLINK_ASSIGN_OR_RETURN(Secret password, ReadPassword(inv, "Password for " + email + ": "));
  json::object body{{"email", email}, {"password", password.Reveal()}};
  auto signed_in = api->Post("/api/v1/sessions", body);
  if (!signed_in.ok() && api->last_error_code() == "two_factor_required") {
    UPLINK_ASSIGN_OR_RETURN(
        json::object factor,
        ReadSecondFactor(inv, "Two-factor code for " + email + " (or a recovery code): "));
    for (auto& [key, value] : factor) body[key] = value;
    signed_in = api->Post("/api/v1/sessions", body);
  }
  UPLINK_ASSIGN_OR_RETURN(json::object reply, std::move(signed_in));
  const json::value* enrollment = reply.if_contains("two_factor_enrollment_required");
  const bool must_enroll = enrollment != nullptr && enrollment->is_bool() && enrollment->get_bool();
  Secret token(StringField(reply, "token").value_or(""));
  reply.erase("token");
  if (!LooksLikeToken(token.Reveal(), kSessionPrefix)) {
    return InternalError("the console's sign-in reply carries no session token (skt_...)");
  }
  const json::object* session = ObjectField(reply, "session");
  const json::object* user = ObjectField(reply, "user");
  StoredCredential stored;
  stored.console = api->console();
  stored.credential = std::move(token);
  stored.kind = CredentialKind::kSession;
  if (session != nullptr) stored.expires_at = StringField(*session, "expires_at").value_or("");
  stored.email = user != nullptr ? StringField(*user, "email").value_or(email) : email;
  std::string note =
      "; the session lasts until " +
      (stored.expires_at.empty() ? std::string("-") : OneLineExcerpt(stored.expires_at, 40));
  UPLINK_RETURN_IF_ERROR(SaveAndReport(inv, file, std::move(stored), note));
  if (must_enroll) {
    inv.err << "uplink: note: this console requires two-factor sign-in and yours is not set up: "
               "until it is, this session can do nothing else. Run 'uplink two-factor enroll'.\n";
  }
  return Status::Ok();
}

Status ConfirmSession(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  if (session.credential.kind != CredentialKind::kSession) {
    return InvalidArgumentError(
        "'uplink login --confirm' confirms a session, but the credential "
        "in use (" +
        session.credential.source + ") is an API key, which needs no confirmation");
  }
  UPLINK_ASSIGN_OR_RETURN(Secret password, ReadPassword(inv, "Password: "));
  return Confirm(*session.api, password, inv.out);
}

}  // namespace

Result<Session> OpenSession(const Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Credential credential,
                          FindCredential(inv.line.globals.api_key_file, inv.env, inv.clock));
  std::string console = inv.line.globals.console;
  if (credential.from_file) {
    if (console.empty()) {
      console = credential.console;
    } else {
      auto asked = NormalizeConsoleUrl(console);
      auto stored = NormalizeConsoleUrl(credential.console);
      if (!asked.ok() || !stored.ok() || *asked != *stored) {
        // Only a URL that passed NormalizeConsoleUrl (no user info, no query) is repeated.
        return UnauthenticatedError(
            "the stored credential belongs to " +
            (stored.ok() ? "the console " + OneLineExcerpt(*stored)
                         : std::string("another console")) +
            ", not to the one --console names; uplink never sends it elsewhere. Run 'uplink login "
            "--console URL' to sign in there, or drop --console");
      }
    }
  }
  if (console.empty()) return NoConsole();
  Session session;
  UPLINK_ASSIGN_OR_RETURN(session.api, ConnectTo(inv, console));
  session.api->set_credential(credential.secret, credential.source);
  session.credential = std::move(credential);
  return session;
}

Result<std::unique_ptr<ApiClient>> OpenAnonymous(const Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(std::string console, ConsoleForAnonymous(inv));
  return ConnectTo(inv, console);
}

Result<json::object> CallSensitive(Invocation& inv, ApiClient& api, std::string_view method,
                                   std::string_view target, const std::optional<json::object>& body,
                                   std::string_view purpose) {
  auto reply = api.Call(method, target, body);
  if (reply.ok() || api.last_error_code() != "confirmation_required") return reply;
  if (!inv.terminal.Available()) {
    return PermissionDeniedError(reply.status().message() +
                                 " (there is no terminal to confirm your password on: run "
                                 "'uplink login --confirm' first, or use an API key)");
  }
  UPLINK_ASSIGN_OR_RETURN(Secret password, inv.terminal.ReadSecret("Confirm your password to " +
                                                                   std::string(purpose) + ": "));
  UPLINK_RETURN_IF_ERROR(Confirm(api, password, inv.err));
  return api.Call(method, target, body);
}

void PrintJson(std::ostream& out, const json::object& reply) {
  out << json::serialize(reply) << "\n";
}

Result<Secret> ReadPassword(Invocation& inv, std::string_view prompt) {
  if (inv.line.Has("password-stdin")) {
    UPLINK_ASSIGN_OR_RETURN(std::string line, ReadLineFrom(inv.in, "the password on stdin"));
    return Secret(std::move(line));
  }
  if (!inv.terminal.Available()) {
    return InvalidArgumentError(
        "no terminal to ask for the password on: pipe it in with --password-stdin");
  }
  return inv.terminal.ReadSecret(prompt);
}

Status RunLogin(Invocation& inv) {
  const CommandLine& l = inv.line;
  if (l.Has("confirm")) {
    if (l.Has("email") || l.Has("api-key-stdin")) {
      return InvalidArgumentError(
          "--confirm confirms the current session; it takes no --email "
          "or --api-key-stdin");
    }
    return ConfirmSession(inv);
  }
  if (l.Has("api-key-stdin") && (l.Has("email") || l.Has("password-stdin"))) {
    return InvalidArgumentError(
        "--api-key-stdin signs in with a key: leave out --email and "
        "--password-stdin");
  }
  UPLINK_ASSIGN_OR_RETURN(CredentialsFile file, CredentialsFile::Default(inv.env));
  return l.Has("api-key-stdin") ? LoginWithApiKey(inv, file) : LoginWithPassword(inv, file);
}

Status RunLogout(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(CredentialsFile file, CredentialsFile::Default(inv.env));
  auto stored = file.Load();
  Status ended = Status::Ok();
  if (stored.ok() && stored->has_value() && (*stored)->kind == CredentialKind::kSession) {
    auto api = ConnectTo(inv, (*stored)->console);
    if (api.ok()) {
      (*api)->set_credential((*stored)->credential, "the credentials file " + file.path());
      auto reply = (*api)->Post("/api/v1/session/logout");
      // A session that already expired or was revoked is as ended as it gets.
      if (!reply.ok() && reply.status().code() != StatusCode::kUnauthenticated) {
        ended = reply.status().WithContext(
            "the session could not be ended on the console (it stays valid until it expires)");
      }
    } else {
      ended = api.status();
    }
  }
  UPLINK_ASSIGN_OR_RETURN(bool removed, file.Remove());
  if (!removed) {
    inv.out << "Not signed in: there is no stored credential.\n";
  } else if (stored.ok() && stored->has_value() && (*stored)->kind == CredentialKind::kApiKey) {
    inv.out << "Removed the stored API key from " << file.path()
            << ". The key itself still works: revoke it with 'uplink api-keys revoke ID'.\n";
  } else {
    inv.out << "Signed out; removed " << file.path() << ".\n";
  }
  return ended;
}

Status RunWhoami(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object me, session.api->Get("/api/v1/me"));
  if (inv.json()) {
    PrintJson(inv.out, me);
    return Status::Ok();
  }
  const json::object empty;
  const json::object* user = ObjectField(me, "user");
  const json::object* credential = ObjectField(me, "credential");
  if (user == nullptr) user = &empty;
  if (credential == nullptr) credential = &empty;
  Fields fields;
  fields.Add("console", session.api->console());
  fields.Add("email", Display(*user, "email"));
  fields.Add("user id", Display(*user, "id"));
  fields.Add("role", Display(*user, "role"));
  fields.Add("credential", Display(*credential, "kind") + " " + Display(*credential, "prefix") +
                               " (from " + session.credential.source + ")");
  fields.Add("expires", Display(*credential, "expires_at"));
  if (session.credential.kind == CredentialKind::kSession) {
    fields.Add("confirmed until", Display(*credential, "confirmed_until"));
  }
  fields.Render(inv.out);
  return Status::Ok();
}

}  // namespace uplink::cli
