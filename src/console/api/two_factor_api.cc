#include "console/api/two_factor_api.h"

#include <set>

#include "common/crypto.h"
#include "console/api/api_objects.h"
#include "console/api/json_fields.h"
#include "console/auth/qr_code.h"
#include "console/auth/totp.h"
#include "console/replies.h"

namespace uplink::console {
namespace {

// Shown by authenticator apps above the account's codes.
constexpr std::string_view kIssuer = "uplink";
// Longer than any code or recovery code: refused as malformed without looking further.
constexpr size_t kMaxCodeBytes = 64;
constexpr size_t kMaxListedUsers = 100;
constexpr std::string_view kFailureKind = "two_factor_code";

json::object TwoFactorJson(const std::optional<TwoFactorCredential>& credential, bool required) {
  bool enabled = credential && credential->enabled_at;
  return json::object{
      {"enabled", enabled},
      {"enabled_at", credential ? OptionalTimeJson(credential->enabled_at) : json::value(nullptr)},
      {"pending", credential && !credential->enabled_at},
      {"recovery_codes_left", enabled ? credential->recovery_codes_left : 0},
      {"required", required},
      {"enrollment_required", required && !enabled}};
}

// The codes to show once, and their hashes to store.
struct RecoveryCodes {
  json::array shown;
  std::vector<RecoveryCode> stored;
};

RecoveryCodes NewRecoveryCodes() {
  RecoveryCodes codes;
  for (MintedRecoveryCode& minted : MintRecoveryCodes()) {
    codes.shown.emplace_back(minted.code.Reveal());
    codes.stored.push_back({"", std::move(minted.code_hash)});
  }
  return codes;
}

std::string_view SecondFactorName(const std::optional<SecondFactorUse>& use) {
  if (!use) return "none";
  return use->totp_step ? "totp" : "recovery_code";
}

// A store refusal to use up a factor (a replay that raced this request, a recovery code used
// meanwhile) is a wrong code; anything else stays what it is.
Result<net::Response> FactorRaced(const Status& status) {
  if (status.code() == StatusCode::kFailedPrecondition) {
    return UnauthorizedResponse("invalid_two_factor_code", status.message());
  }
  return status;
}

}  // namespace

TwoFactorApi::TwoFactorApi(const ApiContext& context)
    : ApiArea(context), two_factor_box_(context.options.two_factor_key) {}

void TwoFactorApi::Register(Routes& routes) {
  routes.UserRoute("GET", "/api/v1/two-factor", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams&,
                          const RequestContext& caller) { return TwoFactorStatus(caller); });
  // Sensitive: whoever enrols decides the second factor of the account.
  routes.UserRoute(
      "POST", "/api/v1/two-factor/enrollment", Access::kSensitive,
      [this](const net::Request& request, const net::PathParams&, const RequestContext& caller) {
        return BeginTwoFactor(request, caller);
      });
  routes.UserRoute(
      "POST", "/api/v1/two-factor/enrollment/confirm", Access::kAnyUser,
      [this](const net::Request& request, const net::PathParams&, const RequestContext& caller) {
        return ConfirmTwoFactor(request, caller);
      });
  // Not sensitive: each proves the password and a second factor in its own body.
  routes.UserRoute(
      "POST", "/api/v1/two-factor/disable", Access::kAnyUser,
      [this](const net::Request& request, const net::PathParams&, const RequestContext& caller) {
        return DisableTwoFactor(request, caller);
      },
      Work::kHashesPassword);
  routes.UserRoute(
      "POST", "/api/v1/two-factor/recovery-codes", Access::kAnyUser,
      [this](const net::Request& request, const net::PathParams&, const RequestContext& caller) {
        return RegenerateRecoveryCodes(request, caller);
      },
      Work::kHashesPassword);
  routes.UserRoute("POST", "/api/v1/users/{id}/two-factor/reset", Access::kSensitiveAdmin,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return ResetTwoFactor(params.at("id"), request, caller);
                   });
  routes.UserRoute("GET", "/api/v1/settings", Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams&,
                          const RequestContext& caller) { return ShowSettings(caller); });
  routes.UserRoute(
      "PUT", "/api/v1/settings", Access::kSensitiveAdmin,
      [this](const net::Request& request, const net::PathParams&, const RequestContext& caller) {
        return UpdateSettings(request, caller);
      });
}

// ---- proving a second factor ---------------------------------------------------------------

std::variant<SecondFactorUse, net::Response> TwoFactorApi::CheckSecondFactor(
    const User& user, const TwoFactorCredential& credential, const FieldReader& fields,
    const net::Request& request, AuditEvent refusal) {
  auto code = fields.String("code", kMaxCodeBytes);
  if (!code.ok()) return ErrorResponse(code.status());
  auto typed_recovery = fields.String("recovery_code", kMaxCodeBytes);
  if (!typed_recovery.ok()) return ErrorResponse(typed_recovery.status());
  if (code->has_value() == typed_recovery->has_value()) {
    return ErrorResponse(InvalidArgumentError(
        "send code, the 6 digits your authenticator app shows now, or recovery_code, one of "
        "your recovery codes (one of the two, not both)"));
  }
  std::optional<Secret> recovery;
  if (*code) {
    if (Status format = CheckTotpCodeFormat(**code); !format.ok()) return ErrorResponse(format);
  } else {
    auto canonical = CanonicalRecoveryCode(**typed_recovery);
    if (!canonical.ok()) return ErrorResponse(canonical.status());
    recovery = std::move(canonical).value();
  }
  if (auto limited = guard_.CheckEmail(user.email)) return std::move(*limited);

  std::string_view reason;
  if (*code) {
    auto secret = two_factor_box_.Open(credential.sealed_secret, user.id);
    if (!secret.ok()) return Reply(secret.status());
    TotpCheck check = CheckTotpCode(*secret, **code, clock_.Now(), credential.last_used_step);
    if (check.verdict == TotpVerdict::kAccepted) return SecondFactorUse{check.step, ""};
    reason = check.verdict == TotpVerdict::kReused ? "code_reused" : "wrong_code";
  } else {
    auto codes = store_.ListUnusedRecoveryCodes(user.id);
    if (!codes.ok()) return Reply(codes.status());
    for (const RecoveryCode& stored : *codes) {
      if (RecoveryCodeMatches(*recovery, stored.code_hash)) {
        return SecondFactorUse{std::nullopt, stored.id};
      }
    }
    reason = "wrong_recovery_code";
  }
  // A wrong code is a guess like a wrong password: it takes from the address's and the
  // email's buckets, so a stolen password cannot be paired with code after code.
  if (auto limited = guard_.Refused(
          {kFailureKind, "invalid_two_factor_code", request.remote_address, "", user.email})) {
    return std::move(*limited);
  }
  json::object detail = DetailJson(refusal.detail);
  detail["reason"] = reason;
  refusal.detail = ToJson(detail);
  refusal.outcome = "refused";
  RecordRefusal(refusal);
  std::string_view message =
      reason == "code_reused"
          ? "this code was already used; wait for the next one (codes change every 30 seconds)"
      : reason == "wrong_code"
          ? "the two-factor code is wrong; enter the code your authenticator app shows now, and "
            "check that the device's clock is right"
          : "this is not one of your unused recovery codes; each works once";
  return UnauthorizedResponse("invalid_two_factor_code", message);
}

std::variant<std::optional<SecondFactorUse>, net::Response> TwoFactorApi::SignInSecondFactor(
    const User& user, const FieldReader& fields, const net::Request& request, AuditEvent refusal) {
  auto credential = store_.GetTwoFactor(user.id);
  if (!credential.ok()) return Reply(credential.status());
  bool presented = fields.Find("code") != nullptr || fields.Find("recovery_code") != nullptr;
  if (!*credential || !(*credential)->enabled_at) {
    if (presented) {
      return ErrorResponse(InvalidArgumentError(
          "this account has no two-factor sign-in; leave code and recovery_code out"));
    }
    return std::optional<SecondFactorUse>();
  }
  if (!presented) {
    // The first step of a normal sign-in, not a guess: nothing is charged or audited.
    return UnauthorizedResponse(
        "two_factor_required",
        "this account signs in with two factors: send the 6-digit code your authenticator app "
        "shows as code (or one of your recovery codes as recovery_code) with the email and "
        "password");
  }
  refusal.detail = ToJson(json::object{{"during", "sign_in"}});
  auto checked = CheckSecondFactor(user, **credential, fields, request, std::move(refusal));
  if (auto* use = std::get_if<SecondFactorUse>(&checked)) return std::optional(*use);
  return std::get<net::Response>(std::move(checked));
}

std::variant<std::optional<SecondFactorUse>, net::Response> TwoFactorApi::ProveOwnFactors(
    const RequestContext& caller, const TwoFactorCredential& credential, const FieldReader& fields,
    const net::Request& request, std::string_view during) {
  WallTime now = clock_.Now();
  AuditEvent refusal = CallerEvent(caller, now, "two_factor.refused", "user", caller.user.id,
                                   caller.user.id, {{"during", during}});
  auto password = fields.String("password", kMaxPasswordBytes);
  if (!password.ok()) return ErrorResponse(password.status());
  if (caller.user.password_hash.empty()) {
    if (*password) {
      return ErrorResponse(InvalidArgumentError("you have no password; leave password out"));
    }
  } else {
    if (!*password) {
      return ErrorResponse(InvalidArgumentError("password is required: your current password"));
    }
    Secret secret(std::move(**password));
    if (auto refused = CheckOwnPassword(caller.user, secret, request.remote_address)) {
      if (refused->status == 401) {
        refusal.outcome = "refused";
        refusal.detail = ToJson(json::object{{"during", during}, {"reason", "wrong_password"}});
        RecordRefusal(refusal);
      }
      return std::move(*refused);
    }
  }
  if (!credential.enabled_at) return std::optional<SecondFactorUse>();
  auto checked = CheckSecondFactor(caller.user, credential, fields, request, std::move(refusal));
  if (auto* use = std::get_if<SecondFactorUse>(&checked)) return std::optional(*use);
  return std::get<net::Response>(std::move(checked));
}

// ---- the caller's own two-factor -----------------------------------------------------------

Result<net::Response> TwoFactorApi::TwoFactorStatus(const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(auto credential, store_.GetTwoFactor(caller.user.id));
  UPLINK_ASSIGN_OR_RETURN(ConsoleSettings settings, store_.GetConsoleSettings());
  return JsonResponse(200, TwoFactorJson(credential, settings.require_two_factor));
}

Result<net::Response> TwoFactorApi::BeginTwoFactor(const net::Request& request,
                                                   const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  UPLINK_RETURN_IF_ERROR(FieldReader(body, "").OnlyFields({}));
  const User& user = caller.user;
  UPLINK_ASSIGN_OR_RETURN(auto existing, store_.GetTwoFactor(user.id));
  if (existing && existing->enabled_at) {
    return FailedPreconditionError(
        "two-factor sign-in is already set up; to move it to another authenticator, turn it "
        "off (POST /api/v1/two-factor/disable with your password and a code) and set it up "
        "again");
  }
  WallTime now = clock_.Now();
  Secret secret(RandomBytes(kTotpSecretBytes));
  std::string uri = OtpauthUri(kIssuer, user.email, secret);
  UPLINK_ASSIGN_OR_RETURN(std::vector<std::string> qr_rows, QrModules(uri));
  TwoFactorCredential pending;
  pending.user_id = user.id;
  pending.sealed_secret = two_factor_box_.Seal(secret, user.id);
  pending.created_at = now;
  UPLINK_RETURN_IF_ERROR(store_.BeginTwoFactor(
      pending, CallerEvent(caller, now, "two_factor.enroll", "user", user.id, user.id,
                           {{"restarted", existing.has_value()}})));
  log_.Info("two-factor enrolment begun", {{"user_id", user.id}});
  json::array qr_code(qr_rows.begin(), qr_rows.end());
  return NoStore(JsonResponse(201, {{"secret", Base32Encode(secret.Reveal())},
                                    {"otpauth_uri", uri},
                                    {"qr_code", std::move(qr_code)},
                                    {"issuer", kIssuer},
                                    {"account", user.email},
                                    {"algorithm", "SHA1"},
                                    {"digits", kTotpDigits},
                                    {"period", kTotpPeriod.count()}}));
}

Result<net::Response> TwoFactorApi::ConfirmTwoFactor(const net::Request& request,
                                                     const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"code"}));
  UPLINK_RETURN_IF_ERROR(fields.RequiredString("code", kMaxCodeBytes).status());
  const User& user = caller.user;
  UPLINK_ASSIGN_OR_RETURN(auto credential, store_.GetTwoFactor(user.id));
  if (!credential || credential->enabled_at) {
    return FailedPreconditionError(
        credential ? "two-factor sign-in is already set up; there is nothing to confirm"
                   : "there is no two-factor enrolment to confirm; begin one with "
                     "POST /api/v1/two-factor/enrollment");
  }
  WallTime now = clock_.Now();
  auto checked = CheckSecondFactor(
      user, *credential, fields, request,
      CallerEvent(caller, now, "two_factor.refused", "user", user.id, user.id,
                  {{"during", "enrollment"}}));
  if (auto* refusal = std::get_if<net::Response>(&checked)) return std::move(*refusal);
  RecoveryCodes codes = NewRecoveryCodes();
  Status enabled = store_.EnableTwoFactor(
      user.id, *std::get<SecondFactorUse>(checked).totp_step, codes.stored,
      CallerEvent(caller, now, "two_factor.enable", "user", user.id, user.id,
                  {{"recovery_codes", static_cast<std::int64_t>(codes.stored.size())}}));
  UPLINK_RETURN_IF_ERROR(enabled);
  log_.Info("two-factor sign-in enabled", {{"user_id", user.id}});
  credential->enabled_at = now;
  credential->recovery_codes_left = static_cast<std::int64_t>(codes.stored.size());
  UPLINK_ASSIGN_OR_RETURN(ConsoleSettings settings, store_.GetConsoleSettings());
  return NoStore(JsonResponse(200, {{"two_factor", TwoFactorJson(credential, settings.require_two_factor)},
                                    {"recovery_codes", std::move(codes.shown)}}));
}

Result<net::Response> TwoFactorApi::DisableTwoFactor(const net::Request& request,
                                                     const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"password", "code", "recovery_code"}));
  const User& user = caller.user;
  UPLINK_ASSIGN_OR_RETURN(auto credential, store_.GetTwoFactor(user.id));
  if (!credential) return NotFoundError("two-factor sign-in is not set up; there is nothing to turn off");
  auto proved = ProveOwnFactors(caller, *credential, fields, request, "disable");
  if (auto* refusal = std::get_if<net::Response>(&proved)) return std::move(*refusal);
  const auto& use = std::get<std::optional<SecondFactorUse>>(proved);
  WallTime now = clock_.Now();
  Status disabled = store_.DisableTwoFactor(
      user.id, use,
      CallerEvent(caller, now, "two_factor.disable", "user", user.id, user.id,
                  {{"second_factor", SecondFactorName(use)},
                   {"was_enabled", credential->enabled_at.has_value()}}));
  if (!disabled.ok()) return FactorRaced(disabled);
  log_.Info("two-factor sign-in turned off", {{"user_id", user.id}});
  UPLINK_ASSIGN_OR_RETURN(ConsoleSettings settings, store_.GetConsoleSettings());
  return JsonResponse(200, TwoFactorJson(std::nullopt, settings.require_two_factor));
}

Result<net::Response> TwoFactorApi::RegenerateRecoveryCodes(const net::Request& request,
                                                            const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"password", "code", "recovery_code"}));
  const User& user = caller.user;
  UPLINK_ASSIGN_OR_RETURN(auto credential, store_.GetTwoFactor(user.id));
  if (!credential || !credential->enabled_at) {
    return FailedPreconditionError(
        "two-factor sign-in is not set up, so there are no recovery codes; set it up first");
  }
  auto proved = ProveOwnFactors(caller, *credential, fields, request, "recovery_codes");
  if (auto* refusal = std::get_if<net::Response>(&proved)) return std::move(*refusal);
  const auto& use = std::get<std::optional<SecondFactorUse>>(proved);
  RecoveryCodes codes = NewRecoveryCodes();
  WallTime now = clock_.Now();
  Status replaced = store_.ReplaceRecoveryCodes(
      user.id, *use, codes.stored,
      CallerEvent(caller, now, "two_factor.recovery_codes", "user", user.id, user.id,
                  {{"second_factor", SecondFactorName(use)},
                   {"recovery_codes", static_cast<std::int64_t>(codes.stored.size())}}));
  if (!replaced.ok()) return FactorRaced(replaced);
  log_.Info("recovery codes replaced", {{"user_id", user.id}});
  return NoStore(JsonResponse(200, {{"recovery_codes", std::move(codes.shown)}}));
}

// ---- admins --------------------------------------------------------------------------------

Result<net::Response> TwoFactorApi::ResetTwoFactor(const std::string& id,
                                                   const net::Request& request,
                                                   const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(User user, VisibleUser(id, caller));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  UPLINK_RETURN_IF_ERROR(FieldReader(body, "").OnlyFields({}));
  // A stolen admin key must not strip its own account's second factor without it.
  if (user.id == caller.user.id) {
    return FailedPreconditionError(
        "to turn off your own two-factor sign-in, use POST /api/v1/two-factor/disable with your "
        "password and a code ('uplink two-factor disable')");
  }
  UPLINK_ASSIGN_OR_RETURN(auto credential, store_.GetTwoFactor(user.id));
  if (credential) {
    WallTime now = clock_.Now();
    UPLINK_RETURN_IF_ERROR(store_.DisableTwoFactor(
        user.id, std::nullopt,
        CallerEvent(caller, now, "two_factor.reset", "user", user.id, user.id,
                    {{"email", user.email}, {"was_enabled", credential->enabled_at.has_value()}})));
    log_.Info("two-factor sign-in reset", {{"user_id", user.id}, {"by", caller.user.id}});
    user.two_factor_enabled_at.reset();
  }
  return JsonResponse(200, UserToJson(user));
}

Result<net::Response> TwoFactorApi::ShowSettings(const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(ConsoleSettings settings, store_.GetConsoleSettings());
  json::object reply{{"require_two_factor", settings.require_two_factor},
                     {"updated_at", OptionalTimeJson(settings.updated_at)}};
  if (!caller.is_admin()) return JsonResponse(200, reply);
  // What the requirement shuts out (or would): active users without two-factor, and the
  // connections whose agents they own.
  UPLINK_ASSIGN_OR_RETURN(std::vector<User> users, store_.ListUsers());
  std::set<std::string> without;
  json::array emails;
  for (const User& user : users) {
    if (user.deactivated_at || user.two_factor_enabled_at) continue;
    without.insert(user.id);
    if (emails.size() < kMaxListedUsers) emails.emplace_back(user.email);
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<Connection> connections, store_.ListAllConnections());
  std::int64_t agents = 0;
  for (const Connection& connection : connections) {
    if (!connection.revoked_at && without.contains(connection.owner_id)) ++agents;
  }
  reply["without_two_factor"] = json::object{{"users", static_cast<std::int64_t>(without.size())},
                                             {"emails", std::move(emails)},
                                             {"connections", agents}};
  return JsonResponse(200, reply);
}

Result<net::Response> TwoFactorApi::UpdateSettings(const net::Request& request,
                                                   const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadJsonObject(request.body));
  FieldReader fields(body, "");
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"require_two_factor"}));
  UPLINK_ASSIGN_OR_RETURN(bool require, fields.RequiredBool("require_two_factor"));
  UPLINK_ASSIGN_OR_RETURN(ConsoleSettings settings, store_.GetConsoleSettings());
  if (settings.require_two_factor != require) {
    // Otherwise the admin's own credentials could only enrol from the next request on.
    if (require && !caller.user.two_factor_enabled_at) {
      return FailedPreconditionError(
          "set up two-factor sign-in for yourself first ('uplink two-factor enroll'): requiring "
          "it would otherwise shut you out too");
    }
    WallTime now = clock_.Now();
    ConsoleSettings changed = settings;
    changed.require_two_factor = require;
    UPLINK_RETURN_IF_ERROR(store_.SetConsoleSettings(
        changed, CallerEvent(caller, now, "settings.update", "settings", "console", "",
                             {{"require_two_factor", require},
                              {"previous", settings.require_two_factor}})));
    log_.Info("console settings changed",
              {{"require_two_factor", require ? "true" : "false"}, {"by", caller.user.id}});
  }
  return ShowSettings(caller);
}

}  // namespace uplink::console
