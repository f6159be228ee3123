#include "console/api/accounts_api.h"

#include "common/crypto.h"
#include "console/api/api_objects.h"
#include "console/api/json_fields.h"
#include "console/auth/credentials.h"
#include "console/replies.h"
#include "protocol/credentials.h"

namespace uplink::console {
namespace {

constexpr size_t kIdBytes = 8;              // 16 hex characters
constexpr size_t kMaxRawEmailBytes = 1024;  // before trimming; NormalizeEmail says the rule
constexpr size_t kMaxRawNameBytes = 1024;

constexpr std::string_view kWrongCredentials =
    "the email or password is wrong; check both, or ask an admin to set a new password";

std::string NewId() { return HexEncode(RandomBytes(kIdBytes)); }

// An event for something done with a password by someone not yet signed in.
AuditEvent SignInEvent(const User& user, std::string_view email, const net::Request& request,
                       WallTime at, std::string action, std::string outcome,
                       const json::object& detail) {
  AuditEvent event;
  event.at = at;
  event.actor_type = outcome == "ok" ? "user" : "anonymous";
  event.actor_id = outcome == "ok" ? user.id : "";
  event.actor_label = std::string(email);
  event.credential = "password";
  event.action = std::move(action);
  event.target_type = "user";
  event.target_id = user.id;
  event.owner_id = user.id;
  event.source_address = request.remote_address;
  event.outcome = std::move(outcome);
  event.detail = ToJson(detail);
  return event;
}

}  // namespace

AccountsApi::AccountsApi(const ApiContext& context, TwoFactorApi& two_factor)
    : ApiArea(context), two_factor_(two_factor) {}

void AccountsApi::Register(Routes& routes) {
  // Sessions and the caller.
  routes.PublicRoute(
      "POST", "/api/v1/sessions", [this](const net::Request& request) { return SignIn(request); },
      Work::kHashesPassword);
  routes.UserRoute("GET", "/api/v1/me", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams&,
                          const RequestContext& caller) { return Me(caller); });
  routes.UserRoute(
      "POST", "/api/v1/session/confirm", Access::kAnyUser,
      [this](const net::Request& request, const net::PathParams&, const RequestContext& caller) {
        return ConfirmSession(request, caller);
      },
      Work::kHashesPassword);
  routes.UserRoute("POST", "/api/v1/session/logout", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) { return Logout(request, caller); });

  // Users.
  routes.UserRoute("GET", "/api/v1/users", Access::kAdmin,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext&) { return ListUsers(request); });
  // Sensitive: a user made with a password is a lasting credential, which a stolen session
  // must not be able to mint.
  routes.UserRoute("POST", "/api/v1/users", Access::kSensitiveAdmin,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) { return CreateUser(request, caller); },
                   Work::kHashesPassword);
  routes.UserRoute(
      "GET", "/api/v1/users/{id}", Access::kAnyUser,
      [this](const net::Request&, const net::PathParams& params, const RequestContext& caller) {
        return ShowUser(params.at("id"), caller);
      });
  routes.UserRoute("POST", "/api/v1/users/{id}/deactivate", Access::kAdmin,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return SetDeactivated(params.at("id"), request, caller, true);
                   });
  routes.UserRoute("POST", "/api/v1/users/{id}/reactivate", Access::kAdmin,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return SetDeactivated(params.at("id"), request, caller, false);
                   });
  // Sensitive only for an admin setting another user's password: checked inside.
  routes.UserRoute("POST", "/api/v1/users/{id}/password", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ChangePassword(params.at("id"), request, caller);
                   },
                   Work::kHashesPassword);

  // API keys.
  routes.UserRoute("GET", "/api/v1/api-keys", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams&,
                          const RequestContext& caller) { return ListApiKeys(caller); });
  routes.UserRoute("POST", "/api/v1/api-keys", Access::kSensitive,
                   [this](const net::Request& request, const net::PathParams&,
                          const RequestContext& caller) { return CreateApiKey(request, caller); });
  routes.UserRoute("POST", "/api/v1/api-keys/{id}/revoke", Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return RevokeApiKey(params.at("id"), request, caller);
                   });
}

// ---- sessions -------------------------------------------------------------------------------

Result<net::Response> AccountsApi::SignIn(const net::Request& request) {
  if (auto limited = guard_.CheckAddress(request.remote_address)) return std::move(*limited);
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"email", "password", "code", "recovery_code"}));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_email, fields.RequiredString("email", kMaxRawEmailBytes));
  UPLINK_ASSIGN_OR_RETURN(std::string email, NormalizeEmail(raw_email));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_password,
                          fields.RequiredString("password", kMaxPasswordBytes));
  Secret password(std::move(raw_password));
  if (auto limited = guard_.CheckEmail(email)) return std::move(*limited);

  WallTime now = clock_.Now();
  auto refuse = [&](std::string_view reason, bool is_failure) {
    guard_.Refused({"password", reason, request.remote_address, "", email, is_failure});
    return UnauthorizedResponse(reason, reason == "deactivated"
                                            ? "this account is deactivated; ask an admin to "
                                              "reactivate it"
                                            : kWrongCredentials);
  };
  auto user = store_.FindUserByEmail(email);
  if (!user.ok()) {
    if (user.status().code() != StatusCode::kNotFound) return user.status();
    // The same work as a wrong password (the hash and an audit row), so the reply time does
    // not tell which emails exist.
    hasher_.VerifyDummy(password);
    User nobody;
    RecordRefusal(SignInEvent(nobody, email, request, now, "session.refused", "refused",
                              {{"reason", "unknown_email"}}));
    return refuse("invalid_credentials", true);
  }
  if (!hasher_.Verify(password, user->password_hash)) {
    RecordRefusal(SignInEvent(*user, email, request, now, "session.refused", "refused",
                              {{"reason", "wrong_password"}}));
    return refuse("invalid_credentials", true);
  }
  if (user->deactivated_at) {
    RecordRefusal(SignInEvent(*user, email, request, now, "session.refused", "refused",
                              {{"reason", "deactivated"}}));
    return refuse("deactivated", false);
  }
  auto second_factor = two_factor_.SignInSecondFactor(
      *user, fields, request, SignInEvent(*user, email, request, now, "session.refused", "", {}));
  if (auto* refusal = std::get_if<net::Response>(&second_factor)) return std::move(*refusal);
  const auto& proved = std::get<std::optional<SecondFactorUse>>(second_factor);
  UPLINK_ASSIGN_OR_RETURN(bool enrollment_required, NeedsTwoFactorEnrollment(*user));

  MintedCredential token = MintCredential(protocol::kSessionPrefix);
  Session session;
  session.id = NewId();
  session.user_id = user->id;
  session.lookup_prefix = token.lookup_prefix;
  session.token_hash = token.token_hash;
  session.created_at = now;
  session.expires_at = now + options_.session_lifetime;
  AuditEvent event = SignInEvent(
      *user, email, request, now, "session.create", "ok",
      {{"prefix", session.lookup_prefix},
       {"second_factor", !proved ? "none" : proved->totp_step ? "totp" : "recovery_code"},
       {"two_factor_enrollment_required", enrollment_required}});
  event.target_type = "session";
  event.target_id = session.id;
  if (proved) {
    Status created = store_.CreateSessionWithSecondFactor(session, *proved, event);
    // Another sign-in used the same code or recovery code first.
    if (created.code() == StatusCode::kFailedPrecondition) {
      return UnauthorizedResponse("invalid_two_factor_code", created.message());
    }
    UPLINK_RETURN_IF_ERROR(created);
  } else {
    UPLINK_RETURN_IF_ERROR(store_.CreateSession(session, event));
  }
  log_.Info("signed in", {{"user_id", user->id}, {"session_prefix", session.lookup_prefix}});
  return NoStore(JsonResponse(201, {{"token", token.token.Reveal()},
                                    {"session", SessionToJson(session)},
                                    {"user", UserToJson(*user)},
                                    {"two_factor_enrollment_required", enrollment_required}}));
}

Result<net::Response> AccountsApi::Me(const RequestContext& caller) {
  json::value confirmed_until = nullptr;
  if (caller.session) confirmed_until = OptionalTimeJson(caller.session->confirmed_until);
  UPLINK_ASSIGN_OR_RETURN(bool enrollment_required, NeedsTwoFactorEnrollment(caller.user));
  return JsonResponse(
      200,
      {{"user", UserToJson(caller.user)},
       {"two_factor_enrollment_required", enrollment_required},
       {"credential", json::object{{"kind", CredentialKindName(caller.credential_kind)},
                                   {"id", caller.credential_id},
                                   {"prefix", caller.credential_prefix},
                                   {"expires_at", OptionalTimeJson(caller.credential_expires_at)},
                                   {"confirmed_until", confirmed_until}}}});
}

Result<net::Response> AccountsApi::ConfirmSession(const net::Request& request,
                                                  const RequestContext& caller) {
  if (!caller.session) {
    return InvalidArgumentError(
        "only a session token needs confirming; an API key may make "
        "every call its user may");
  }
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"password"}));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_password,
                          fields.RequiredString("password", kMaxPasswordBytes));
  Secret password(std::move(raw_password));
  WallTime now = clock_.Now();
  if (auto refused = CheckOwnPassword(caller.user, password, request.remote_address)) {
    AuditEvent event = CallerEvent(caller, now, "session.confirm", "session", caller.session->id,
                                   caller.user.id, {{"reason", "wrong_password"}});
    event.outcome = "refused";
    RecordRefusal(event);
    return std::move(*refused);
  }
  Session session = *caller.session;
  session.confirmed_until = now + options_.confirmation_window;
  UPLINK_RETURN_IF_ERROR(store_.ConfirmSession(
      session.id, *session.confirmed_until,
      CallerEvent(caller, now, "session.confirm", "session", session.id, caller.user.id,
                  {{"confirmed_until", FormatRfc3339(*session.confirmed_until)}})));
  return JsonResponse(200, {{"session", SessionToJson(session)}});
}

Result<net::Response> AccountsApi::Logout(const net::Request& request,
                                          const RequestContext& caller) {
  if (!caller.session) {
    return InvalidArgumentError(
        "only a session can be signed out; revoke an API key with "
        "POST /api/v1/api-keys/{id}/revoke");
  }
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  UPLINK_RETURN_IF_ERROR(FieldReader(body, "").OnlyFields({}));
  WallTime now = clock_.Now();
  UPLINK_RETURN_IF_ERROR(store_.RevokeSession(
      caller.session->id, now,
      CallerEvent(caller, now, "session.logout", "session", caller.session->id, caller.user.id)));
  return JsonResponse(200, {{"session", SessionToJson(*caller.session)}});
}

// ---- users ----------------------------------------------------------------------------------

Result<net::Response> AccountsApi::ListUsers(const net::Request& request) {
  UPLINK_ASSIGN_OR_RETURN(std::vector<User> users, store_.ListUsers());
  json::array list;
  for (const User& user : users) list.push_back(UserToJson(user));
  return JsonResponse(200, {{"users", std::move(list)}});
}

Result<net::Response> AccountsApi::CreateUser(const net::Request& request,
                                              const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"email", "role", "password"}));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_email, fields.RequiredString("email", kMaxRawEmailBytes));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_role, fields.RequiredString("role", 64));
  UPLINK_ASSIGN_OR_RETURN(auto raw_password, fields.String("password", kMaxPasswordBytes));

  User user;
  UPLINK_ASSIGN_OR_RETURN(user.email, NormalizeEmail(raw_email));
  std::optional<Role> role = ParseRole(raw_role);
  if (!role) return InvalidArgumentError("role must be \"admin\" or \"member\"");
  user.role = *role;
  if (raw_password) {
    Secret password(std::move(*raw_password));
    UPLINK_RETURN_IF_ERROR(ValidateNewPassword(password, user.email));
    UPLINK_ASSIGN_OR_RETURN(user.password_hash, hasher_.Hash(password));
  }
  WallTime now = clock_.Now();
  user.id = NewId();
  user.created_at = now;
  Status created =
      store_.CreateUser(user, CallerEvent(caller, now, "user.create", "user", user.id, user.id,
                                          {{"email", user.email},
                                           {"role", RoleName(user.role)},
                                           {"has_password", !user.password_hash.empty()}}));
  if (created.code() == StatusCode::kConflict || created.code() == StatusCode::kAlreadyExists) {
    return ConflictError(
        "a user with this email already exists; list users with "
        "GET /api/v1/users");
  }
  UPLINK_RETURN_IF_ERROR(created);
  log_.Info("user created", {{"user_id", user.id}, {"by", caller.user.id}});
  return JsonResponse(201, UserToJson(user));
}

Result<net::Response> AccountsApi::ShowUser(const std::string& id, const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(User user, VisibleUser(id, caller));
  return JsonResponse(200, UserToJson(user));
}

Result<net::Response> AccountsApi::SetDeactivated(const std::string& id,
                                                  const net::Request& request,
                                                  const RequestContext& caller, bool deactivate) {
  UPLINK_ASSIGN_OR_RETURN(User user, VisibleUser(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  UPLINK_RETURN_IF_ERROR(FieldReader(body, "").OnlyFields({}));
  if (user.deactivated_at.has_value() == deactivate) return JsonResponse(200, UserToJson(user));
  WallTime now = clock_.Now();
  // The caller is an active admin, so refusing to deactivate yourself keeps at least one
  // active admin.
  if (deactivate && user.id == caller.user.id) {
    return FailedPreconditionError("you cannot deactivate yourself; ask another admin");
  }
  std::optional<WallTime> at = deactivate ? std::optional<WallTime>(now) : std::nullopt;
  UPLINK_RETURN_IF_ERROR(store_.SetUserDeactivated(
      user.id, at,
      CallerEvent(caller, now, deactivate ? "user.deactivate" : "user.reactivate", "user", user.id,
                  user.id, {{"email", user.email}})));
  log_.Info(deactivate ? "user deactivated" : "user reactivated",
            {{"user_id", user.id}, {"by", caller.user.id}});
  user.deactivated_at = at;
  return JsonResponse(200, UserToJson(user));
}

Result<net::Response> AccountsApi::ChangePassword(const std::string& id,
                                                  const net::Request& request,
                                                  const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(User user, VisibleUser(id, caller));
  bool own = user.id == caller.user.id;
  if (!own) {
    if (auto refused = RequireConfirmation(caller)) return std::move(*refused);
  }
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"password", "current_password"}));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_password,
                          fields.RequiredString("password", kMaxPasswordBytes));
  UPLINK_ASSIGN_OR_RETURN(auto raw_current, fields.String("current_password", kMaxPasswordBytes));
  Secret password(std::move(raw_password));
  bool needs_current = own && !user.password_hash.empty();
  if (!needs_current && raw_current) {
    return InvalidArgumentError(own ? "you have no password yet; leave current_password out"
                                    : "current_password is only for changing your own "
                                      "password; leave it out");
  }
  if (needs_current && !raw_current) {
    return InvalidArgumentError("current_password is required to change your own password");
  }
  UPLINK_RETURN_IF_ERROR(ValidateNewPassword(password, user.email));
  if (needs_current) {
    Secret current(std::move(*raw_current));
    if (auto refused = CheckOwnPassword(user, current, request.remote_address)) {
      return std::move(*refused);
    }
  }
  UPLINK_ASSIGN_OR_RETURN(std::string hash, hasher_.Hash(password));
  // Changing your own password keeps the session you changed it with; every other session of
  // the user ends.
  std::string keep_session = own && caller.session ? caller.session->id : "";
  WallTime now = clock_.Now();
  UPLINK_RETURN_IF_ERROR(store_.SetPassword(
      user.id, hash, keep_session, now,
      CallerEvent(caller, now, "user.password", "user", user.id, user.id, {{"own", own}})));
  log_.Info("password set", {{"user_id", user.id}, {"by", caller.user.id}});
  user.password_hash = std::move(hash);
  return JsonResponse(200, UserToJson(user));
}

// ---- API keys -------------------------------------------------------------------------------

Result<net::Response> AccountsApi::ListApiKeys(const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(std::vector<ApiKey> keys, store_.ListApiKeys(caller.user.id));
  WallTime now = clock_.Now();
  json::array list;
  for (const ApiKey& key : keys) list.push_back(ApiKeyToJson(key, now));
  return JsonResponse(200, {{"api_keys", std::move(list)}});
}

Result<net::Response> AccountsApi::CreateApiKey(const net::Request& request,
                                                const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"name", "expires_at"}));
  UPLINK_ASSIGN_OR_RETURN(std::string raw_name, fields.RequiredString("name", kMaxRawNameBytes));
  UPLINK_ASSIGN_OR_RETURN(auto raw_expiry, fields.String("expires_at", 64));
  WallTime now = clock_.Now();
  ApiKey key;
  UPLINK_ASSIGN_OR_RETURN(key.name, ValidateName("name", raw_name));
  if (raw_expiry) {
    UPLINK_ASSIGN_OR_RETURN(key.expires_at, ParseFutureTime("expires_at", *raw_expiry, now));
  }
  MintedCredential token = MintCredential(protocol::kApiKeyPrefix);
  key.id = NewId();
  key.user_id = caller.user.id;
  key.lookup_prefix = token.lookup_prefix;
  key.token_hash = token.token_hash;
  key.created_at = now;
  UPLINK_RETURN_IF_ERROR(store_.CreateApiKey(
      key, CallerEvent(caller, now, "api_key.create", "api_key", key.id, caller.user.id,
                       {{"name", key.name},
                        {"prefix", key.lookup_prefix},
                        {"expires_at", OptionalTimeJson(key.expires_at)}})));
  log_.Info("API key created", {{"user_id", caller.user.id}, {"key_prefix", key.lookup_prefix}});
  json::object reply = ApiKeyToJson(key, now);
  reply["key"] = token.token.Reveal();
  return NoStore(JsonResponse(201, reply));
}

Result<net::Response> AccountsApi::RevokeApiKey(const std::string& id, const net::Request& request,
                                                const RequestContext& caller) {
  Status not_found = NotFoundError(
      "you have no API key with this id; list yours with "
      "GET /api/v1/api-keys");
  if (!IsPlausibleId(id)) return not_found;
  auto key = store_.GetApiKey(id);
  if (!key.ok()) return key.status().code() == StatusCode::kNotFound ? not_found : key.status();
  if (key->user_id != caller.user.id && !caller.is_admin()) return not_found;
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  UPLINK_RETURN_IF_ERROR(FieldReader(body, "").OnlyFields({}));
  WallTime now = clock_.Now();
  if (!key->revoked_at) {
    UPLINK_RETURN_IF_ERROR(store_.RevokeApiKey(
        key->id, now,
        CallerEvent(caller, now, "api_key.revoke", "api_key", key->id, key->user_id,
                    {{"name", key->name}, {"prefix", key->lookup_prefix}})));
    log_.Info("API key revoked", {{"key_prefix", key->lookup_prefix}, {"by", caller.user.id}});
    key->revoked_at = now;
  }
  return JsonResponse(200, ApiKeyToJson(*key, now));
}

}  // namespace uplink::console
