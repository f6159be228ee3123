// uplink two-factor ...: set up (a QR code on the terminal, the secret as text, a first code),
// confirm, status, turn off, new recovery codes, and the console's requirement; and the
// second factor that sign-in and these commands read.
#include <algorithm>
#include <cctype>

#include "cli/commands.h"
#include "cli/render.h"
#include "cli/secret_file.h"
#include "common/text.h"

namespace uplink::cli {
namespace {

constexpr char kEnrollPurpose[] = "set up two-factor sign-in";
constexpr char kSettingsPurpose[] = "change the console's settings";
constexpr char kTwoFactorPath[] = "/api/v1/two-factor";
constexpr char kSettingsPath[] = "/api/v1/settings";
constexpr char kHeldToEnrolment[] =
    "This console requires two-factor sign-in: until you set it up ('uplink two-factor "
    "enroll'), your credentials can do nothing else and the agents of your connections are "
    "refused.\n";
constexpr char kCodePrompt[] = "Code from your authenticator app (or a recovery code): ";
// The largest QR code (version 40) is 177 modules wide.
constexpr size_t kMaxQrModules = 177;
constexpr size_t kQuietZone = 4;
// Codes typed wrong before enrolment gives up (each also counts against the sign-in limit).
constexpr int kConfirmAttempts = 3;

bool IsTrue(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(key);
  return value != nullptr && value->is_bool() && value->get_bool();
}

// The console's QR code (rows of '0' and '1') for a terminal: two module rows per line as the
// upper half block, the top module in front and the bottom one behind, black on white
// whatever the terminal's own colours, inside a quiet zone. Empty when the rows are not a
// square of modules.
std::string RenderQr(const json::array* rows) {
  if (rows == nullptr || rows->empty() || rows->size() > kMaxQrModules) return "";
  std::vector<std::string> modules;
  for (const json::value& row : *rows) {
    if (!row.is_string() || row.get_string().size() != rows->size()) return "";
    std::string text(row.get_string());
    if (text.find_first_not_of("01") != std::string::npos) return "";
    modules.push_back(std::move(text));
  }
  const size_t size = modules.size() + 2 * kQuietZone;
  auto dark = [&](size_t y, size_t x) {
    if (y < kQuietZone || x < kQuietZone) return false;
    y -= kQuietZone;
    x -= kQuietZone;
    return y < modules.size() && x < modules.size() && modules[y][x] == '1';
  };
  std::string out;
  for (size_t y = 0; y < size; y += 2) {
    out += "  ";
    std::string colours;
    for (size_t x = 0; x < size; ++x) {
      std::string cell = std::string(dark(y, x) ? "\x1b[30;" : "\x1b[97;") +
                         (dark(y + 1, x) ? "40m" : "107m");
      if (cell != colours) out += cell;  // only where the colours change
      colours = std::move(cell);
      out += "\u2580";
    }
    out += "\x1b[0m\n";
  }
  return out;
}

// "ABCD EFGH IJKL ...": easier to type into an app by hand.
std::string Grouped(std::string_view secret) {
  std::string out;
  for (size_t i = 0; i < secret.size(); i += 4) {
    if (!out.empty()) out += ' ';
    out += secret.substr(i, 4);
  }
  return out;
}

// Shows the recovery codes once, or writes them to `file`.
Status DeliverRecoveryCodes(Invocation& inv, const json::object& reply, SecretFile* file) {
  const json::array* codes = ArrayField(reply, "recovery_codes");
  if (codes == nullptr) return InternalError("the console's reply holds no recovery codes");
  std::string lines;
  for (const json::value& code : *codes) lines += Display(&code, 64) + "\n";
  if (file != nullptr) {
    UPLINK_RETURN_IF_ERROR(file->Write(lines).WithContext("--recovery-codes-out " + file->path()));
    inv.out << "The " << codes->size() << " recovery codes were written to " << file->path()
            << " (mode 0600).\nEach signs you in once without the app; keep them somewhere "
               "other than the device.\n";
    return Status::Ok();
  }
  inv.out << "\nRecovery codes: each signs you in once without the app. Store them now,\n"
             "somewhere other than the device; they are not shown again.\n\n";
  for (const json::value& code : *codes) inv.out << "  " << Display(&code, 64) << "\n";
  return Status::Ok();
}

// --recovery-codes-out F, created before the console is asked.
Status OpenRecoveryCodesFile(const Invocation& inv, SecretFile& file) {
  if (!inv.line.Has("recovery-codes-out")) return Status::Ok();
  return file.Create(inv.line.Get("recovery-codes-out"), "--recovery-codes-out");
}

// A code for confirming enrolment: always the code field (recovery codes come later).
Result<std::string> ReadEnrolmentCode(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(json::object factor, ReadSecondFactor(inv, "Code from the app: "));
  if (auto code = StringField(factor, "code")) return *code;
  return InvalidArgumentError(
      "the code must be the 6 digits the authenticator app shows for this account");
}

// Proves a first code, asking again after a wrong one when a person is typing.
Status ConfirmEnrolment(Invocation& inv, ApiClient& api, SecretFile* codes_file) {
  Result<json::object> reply = InternalError("no code tried");
  for (int attempt = 1; attempt <= kConfirmAttempts; ++attempt) {
    UPLINK_ASSIGN_OR_RETURN(std::string code, ReadEnrolmentCode(inv));
    reply = api.Post(std::string(kTwoFactorPath) + "/enrollment/confirm",
                     json::object{{"code", code}});
    bool retry = !reply.ok() && api.last_error_code() == "invalid_two_factor_code" &&
                 !inv.line.Has("code-stdin") && attempt < kConfirmAttempts;
    if (!retry) break;
    inv.err << "uplink: " << reply.status().message() << "\n";
  }
  UPLINK_RETURN_IF_ERROR(reply.status());
  if (inv.json()) {
    PrintJson(inv.out, *reply);
    return Status::Ok();
  }
  inv.out << "Two-factor sign-in is on: from now on, sign in with your password and a code\n"
             "from the app.\n";
  return DeliverRecoveryCodes(inv, *reply, codes_file);
}

// Your password (when you have one) and a second factor, for turning two-factor off or
// replacing the recovery codes.
Result<json::object> ReadOwnFactors(Invocation& inv, ApiClient& api, bool needs_code) {
  UPLINK_ASSIGN_OR_RETURN(json::object me, api.Get("/api/v1/me"));
  const json::object* user = ObjectField(me, "user");
  json::object body;
  if (user != nullptr && IsTrue(*user, "has_password")) {
    UPLINK_ASSIGN_OR_RETURN(Secret password, ReadPassword(inv, "Password: "));
    body["password"] = password.Reveal();
  }
  if (needs_code) {
    UPLINK_ASSIGN_OR_RETURN(json::object factor, ReadSecondFactor(inv, kCodePrompt));
    for (auto& [key, value] : factor) body[key] = value;
  }
  return body;
}

void PrintSettings(Invocation& inv, const json::object& settings) {
  bool required = IsTrue(settings, "require_two_factor");
  Fields fields;
  fields.Add("two-factor required", required ? "yes" : "no");
  fields.Add("changed", Display(settings, "updated_at"));
  const json::object* without = ObjectField(settings, "without_two_factor");
  if (without != nullptr) {
    std::string emails;
    if (const json::array* list = ArrayField(*without, "emails")) {
      for (const json::value& email : *list) {
        emails += (emails.empty() ? " (" : ", ") + Display(&email, 254);
      }
      if (!emails.empty()) emails += ")";
    }
    fields.Add("users without it", Display(*without, "users") + emails);
    fields.Add(required ? "agents refused" : "agents it would stop",
               Display(*without, "connections") + " connection(s) of those users");
  }
  fields.Render(inv.out);
}

}  // namespace

Result<json::object> ReadSecondFactor(Invocation& inv, std::string_view prompt) {
  std::string typed;
  if (inv.line.Has("code-stdin")) {
    UPLINK_ASSIGN_OR_RETURN(typed, ReadLineFrom(inv.in, "the two-factor code on stdin", 256));
  } else if (inv.terminal.Available()) {
    UPLINK_ASSIGN_OR_RETURN(Secret secret, inv.terminal.ReadSecret(prompt));
    typed = secret.Reveal();
  } else {
    return InvalidArgumentError(
        "no terminal to ask for the two-factor code on: pipe it in with --code-stdin");
  }
  Secret held(std::move(typed));
  // Apps show "123 456"; people copy it so.
  std::string compact;
  for (char c : held.Reveal()) {
    if (!std::isspace(static_cast<unsigned char>(c))) compact += c;
  }
  Secret code(std::move(compact));
  bool six_digits = code.Reveal().size() == 6 &&
                    std::all_of(code.Reveal().begin(), code.Reveal().end(),
                                [](char c) { return c >= '0' && c <= '9'; });
  if (code.empty()) return InvalidArgumentError("the two-factor code is empty");
  return json::object{{six_digits ? "code" : "recovery_code", code.Reveal()}};
}

Status RunTwoFactorStatus(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object status, session.api->Get(kTwoFactorPath));
  if (inv.json()) {
    PrintJson(inv.out, status);
    return Status::Ok();
  }
  Fields fields;
  if (IsTrue(status, "enabled")) {
    fields.Add("two-factor", "on since " + Display(status, "enabled_at"));
    fields.Add("recovery codes", Display(status, "recovery_codes_left") + " left");
  } else if (IsTrue(status, "pending")) {
    fields.Add("two-factor", "off: being set up, waiting for a first code "
                             "('uplink two-factor confirm')");
  } else {
    fields.Add("two-factor", "off");
  }
  fields.Add("console requires it", IsTrue(status, "required") ? "yes" : "no");
  fields.Render(inv.out);
  if (IsTrue(status, "enrollment_required")) inv.out << "\n" << kHeldToEnrolment;
  return Status::Ok();
}

Status RunTwoFactorEnroll(Invocation& inv) {
  SecretFile codes_file;
  UPLINK_RETURN_IF_ERROR(OpenRecoveryCodesFile(inv, codes_file));
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(
      json::object begun,
      CallSensitive(inv, *session.api, "POST", std::string(kTwoFactorPath) + "/enrollment",
                    json::object{}, kEnrollPurpose));
  if (inv.json()) {
    PrintJson(inv.out, begun);
    return Status::Ok();
  }
  auto secret = StringField(begun, "secret");
  if (!secret) return InternalError("the console's enrolment reply holds no secret");
  const bool person = inv.terminal.Available();
  std::string qr = person ? RenderQr(ArrayField(begun, "qr_code")) : "";
  if (!qr.empty()) {
    inv.out << "Scan this QR code with your authenticator app:\n" << std::flush;
    UPLINK_RETURN_IF_ERROR(inv.terminal.Show("\n" + qr + "\n"));
    inv.out << "Or enter this key by hand (time-based, 6 digits, every 30 seconds):\n";
  } else {
    inv.out << "Add this key to your authenticator app (time-based, 6 digits, every 30 "
               "seconds):\n";
  }
  inv.out << "\n  " << Grouped(OneLineExcerpt(*secret, 128)) << "\n\n  account " << Display(begun, "account", 254)
          << ", issuer " << Display(begun, "issuer", 64) << "\n";
  if (!person) {
    inv.out << "  otpauth URI: " << Display(begun, "otpauth_uri", 1024) << "\n\n"
            << "Two-factor sign-in is not on yet: prove a code from the app with\n"
               "  uplink two-factor confirm --code-stdin\n";
    return Status::Ok();
  }
  inv.out << "\n" << std::flush;
  return ConfirmEnrolment(inv, *session.api, codes_file.created() ? &codes_file : nullptr);
}

Status RunTwoFactorConfirm(Invocation& inv) {
  SecretFile codes_file;
  UPLINK_RETURN_IF_ERROR(OpenRecoveryCodesFile(inv, codes_file));
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  return ConfirmEnrolment(inv, *session.api, codes_file.created() ? &codes_file : nullptr);
}

Status RunTwoFactorDisable(Invocation& inv) {
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object status, session.api->Get(kTwoFactorPath));
  if (!IsTrue(status, "enabled") && !IsTrue(status, "pending")) {
    inv.out << "Two-factor sign-in is already off.\n";
    return Status::Ok();
  }
  UPLINK_ASSIGN_OR_RETURN(json::object body,
                          ReadOwnFactors(inv, *session.api, IsTrue(status, "enabled")));
  UPLINK_ASSIGN_OR_RETURN(json::object reply,
                          session.api->Post(std::string(kTwoFactorPath) + "/disable", body));
  if (inv.json()) {
    PrintJson(inv.out, reply);
    return Status::Ok();
  }
  inv.out << "Two-factor sign-in is off; your recovery codes no longer work.\n";
  if (IsTrue(reply, "enrollment_required")) inv.out << kHeldToEnrolment;
  return Status::Ok();
}

Status RunTwoFactorRecoveryCodes(Invocation& inv) {
  SecretFile codes_file;
  UPLINK_RETURN_IF_ERROR(OpenRecoveryCodesFile(inv, codes_file));
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(json::object body, ReadOwnFactors(inv, *session.api, true));
  UPLINK_ASSIGN_OR_RETURN(
      json::object reply,
      session.api->Post(std::string(kTwoFactorPath) + "/recovery-codes", body));
  if (inv.json()) {
    PrintJson(inv.out, reply);
    return Status::Ok();
  }
  inv.out << "New recovery codes; the old ones no longer work.\n";
  return DeliverRecoveryCodes(inv, reply, codes_file.created() ? &codes_file : nullptr);
}

Status RunTwoFactorRequire(Invocation& inv) {
  std::optional<bool> require;
  if (!inv.line.operands.empty()) {
    const std::string& choice = inv.operand(0);
    if (choice != "on" && choice != "off") {
      return InvalidArgumentError("'uplink two-factor require' takes on or off, not '" +
                                  OneLineExcerpt(choice, 32) + "'");
    }
    require = choice == "on";
  }
  UPLINK_ASSIGN_OR_RETURN(Session session, OpenSession(inv));
  UPLINK_ASSIGN_OR_RETURN(
      json::object settings,
      require ? CallSensitive(inv, *session.api, "PUT", kSettingsPath,
                              json::object{{"require_two_factor", *require}}, kSettingsPurpose)
              : session.api->Get(kSettingsPath));
  if (inv.json()) {
    PrintJson(inv.out, settings);
    return Status::Ok();
  }
  PrintSettings(inv, settings);
  return Status::Ok();
}

}  // namespace uplink::cli
