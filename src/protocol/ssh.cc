#include "protocol/ssh.h"

#include <algorithm>

#include "common/json.h"
#include "protocol/agent_api.h"
#include "protocol/field_reader.h"
#include "protocol/workspace.h"

namespace uplink::protocol {
namespace {

constexpr size_t kCredentialRandomChars = 43;  // base64url of 256 bits, unpadded
constexpr size_t kMaxTypeBytes = 64;

bool IsBase64UrlChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/' || c == '=';
}

bool IsPrintableAscii(char c) { return c >= 0x20 && c < 0x7f; }

// "TYPE BASE64[ COMMENT]" with an allowed type, printable ASCII, at most `max_bytes`.
bool IsPublicKeyLine(std::string_view line, size_t max_bytes) {
  if (line.empty() || line.size() > max_bytes ||
      !std::all_of(line.begin(), line.end(), IsPrintableAscii)) {
    return false;
  }
  size_t space = line.find(' ');
  if (space == std::string_view::npos || !IsAllowedSshKeyType(line.substr(0, space))) return false;
  std::string_view rest = line.substr(space + 1);
  std::string_view blob = rest.substr(0, rest.find(' '));
  return !blob.empty() && std::all_of(blob.begin(), blob.end(), IsBase64Char);
}

Result<const json::object*> ObjectOf(std::string_view text, json::value& holder) {
  auto parsed = ParseJson(text, JsonLimits{kMaxSshControlMessageBytes, kMaxSshControlDepth});
  if (!parsed.ok()) {
    return InvalidArgumentError("the control message is not JSON within " +
                                std::to_string(kMaxSshControlMessageBytes) +
                                " bytes: " + parsed.status().message());
  }
  holder = std::move(*parsed);
  if (!holder.is_object()) return InvalidArgumentError("the control message must be an object");
  return &holder.get_object();
}

Result<std::string> TypeOf(const FieldReader& fields) {
  return fields.RequiredString("type", kMaxTypeBytes);
}

Result<std::string> IdField(const FieldReader& fields, std::string_view key,
                            bool (*valid)(std::string_view), std::string_view expected) {
  UPLINK_ASSIGN_OR_RETURN(std::string id, fields.RequiredString(key, kMaxTypeBytes));
  if (!valid(id)) {
    return InvalidArgumentError(fields.FieldPath(key) + " must be " + std::string(expected));
  }
  return id;
}

Result<std::vector<std::string>> AuthorizedKeys(const FieldReader& fields) {
  const json::value* value = fields.Find("authorized_keys");
  if (value == nullptr) return InvalidArgumentError("authorized_keys is required");
  if (!value->is_array()) return InvalidArgumentError("authorized_keys must be an array");
  const json::array& lines = value->get_array();
  if (lines.size() > kMaxAuthorizedKeys) {
    return InvalidArgumentError("authorized_keys has " + std::to_string(lines.size()) +
                                " entries; the limit is " + std::to_string(kMaxAuthorizedKeys));
  }
  std::vector<std::string> keys;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].is_string() || !IsAuthorizedKeyLine(lines[i].get_string())) {
      return InvalidArgumentError("authorized_keys[" + std::to_string(i) +
                                  "] must be one public key line (TYPE BASE64 COMMENT, "
                                  "printable, at most 1024 bytes, no options)");
    }
    keys.emplace_back(lines[i].get_string());
  }
  return keys;
}

Result<SshCapability> DecodeCapability(const FieldReader& fields) {
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"type", "reservation_id", "host_key", "sshd"}));
  SshCapability message;
  UPLINK_ASSIGN_OR_RETURN(message.reservation_id,
                          IdField(fields, "reservation_id", IsReservationId,
                                  "a reservation id (res_ and 16 hex digits)"));
  UPLINK_ASSIGN_OR_RETURN(message.host_key, fields.RequiredString("host_key", kMaxHostKeyBytes));
  // ssh-keygen ends an empty comment with a space: the key is the same without it.
  while (!message.host_key.empty() && message.host_key.back() == ' ') message.host_key.pop_back();
  if (!IsPublicKeyLine(message.host_key, kMaxHostKeyBytes)) {
    return InvalidArgumentError(
        "host_key must be an Ed25519 or ECDSA public key line (TYPE BASE64)");
  }
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> sshd,
                          fields.String("sshd", kMaxSshdVersionBytes));
  message.sshd = std::move(sshd).value_or("");
  if (!std::all_of(message.sshd.begin(), message.sshd.end(), IsPrintableAscii)) {
    return InvalidArgumentError("sshd must be printable ASCII");
  }
  return message;
}

Result<SshOpenFailed> DecodeOpenFailed(const FieldReader& fields) {
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"type", "channel", "message"}));
  SshOpenFailed message;
  UPLINK_ASSIGN_OR_RETURN(message.channel,
                          IdField(fields, "channel", IsSshChannelId, "a channel id (sch_…)"));
  UPLINK_ASSIGN_OR_RETURN(message.message,
                          fields.RequiredString("message", kMaxOpenFailedMessageBytes));
  return message;
}

Result<SshOpen> DecodeOpen(const FieldReader& fields) {
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"type", "channel", "reservation_id", "grant_id",
                                            "credential", "authorized_keys", "purpose"}));
  SshOpen message;
  UPLINK_ASSIGN_OR_RETURN(message.channel,
                          IdField(fields, "channel", IsSshChannelId, "a channel id (sch_…)"));
  UPLINK_ASSIGN_OR_RETURN(message.reservation_id,
                          IdField(fields, "reservation_id", IsReservationId,
                                  "a reservation id (res_ and 16 hex digits)"));
  UPLINK_ASSIGN_OR_RETURN(message.purpose, fields.RequiredString("purpose", kMaxTypeBytes));
  if (message.purpose != kSshPurposeSession && message.purpose != kSshPurposeHandover) {
    return InvalidArgumentError("purpose must be session or handover");
  }
  UPLINK_ASSIGN_OR_RETURN(message.grant_id, fields.RequiredString("grant_id", kMaxTypeBytes));
  const bool grant_optional = message.purpose == kSshPurposeHandover;
  if (!IsSshGrantId(message.grant_id) && !(grant_optional && message.grant_id.empty())) {
    return InvalidArgumentError(grant_optional ? "grant_id must be a grant id (ssg_…) or empty"
                                               : "grant_id must be a grant id (ssg_…)");
  }
  UPLINK_ASSIGN_OR_RETURN(message.credential,
                          fields.RequiredString("credential", kMaxTypeBytes));
  if (!IsChannelCredentialShape(message.credential)) {
    return InvalidArgumentError("credential must be a channel credential (chn_…)");
  }
  UPLINK_ASSIGN_OR_RETURN(message.authorized_keys, AuthorizedKeys(fields));
  return message;
}

Result<SshKeys> DecodeKeys(const FieldReader& fields) {
  UPLINK_RETURN_IF_ERROR(fields.OnlyFields({"type", "reservation_id", "authorized_keys"}));
  SshKeys message;
  UPLINK_ASSIGN_OR_RETURN(message.reservation_id,
                          IdField(fields, "reservation_id", IsReservationId,
                                  "a reservation id (res_ and 16 hex digits)"));
  UPLINK_ASSIGN_OR_RETURN(message.authorized_keys, AuthorizedKeys(fields));
  return message;
}

std::string Text(const json::object& object) { return ToJson(object); }

}  // namespace

std::string SshChannelPath(std::string_view channel_id) {
  return std::string(kSshChannelPathPrefix) + std::string(channel_id);
}

std::string SshConnectPath(std::string_view reservation_id, std::string_view grant_id) {
  return "/api/v1/reservations/" + std::string(reservation_id) + "/ssh/connect?" +
         std::string(kSshGrantQueryParameter) + "=" + std::string(grant_id);
}

std::string SshReadinessPath(std::string_view reservation_id) {
  return "/api/v1/reservations/" + std::string(reservation_id) + "/ssh";
}

bool IsSshChannelId(std::string_view id) {
  return IsPrefixedHexId(id, kSshChannelIdPrefix, kWorkspaceIdHexDigits);
}
bool IsSshGrantId(std::string_view id) {
  return IsPrefixedHexId(id, kSshGrantIdPrefix, kWorkspaceIdHexDigits);
}
std::string NewSshChannelId() { return NewPrefixedHexId(kSshChannelIdPrefix, kWorkspaceIdHexDigits); }
std::string NewSshGrantId() { return NewPrefixedHexId(kSshGrantIdPrefix, kWorkspaceIdHexDigits); }

bool IsChannelCredentialShape(std::string_view credential) {
  if (!credential.starts_with(kChannelCredentialPrefix)) return false;
  std::string_view random = credential.substr(kChannelCredentialPrefix.size());
  return random.size() == kCredentialRandomChars &&
         std::all_of(random.begin(), random.end(), IsBase64UrlChar);
}

std::string TransferBudgetCloseReason(std::int64_t used_bytes, std::int64_t budget_bytes,
                                      std::string_view reservation_id) {
  return "transfer budget used up: " + std::to_string(used_bytes) + " of " +
         std::to_string(budget_bytes) + " bytes for " + std::string(reservation_id);
}

std::string IdleCloseReason(std::chrono::seconds idle) {
  return "idle for " + std::to_string(idle.count()) + " s";
}

std::string SshdExitedReason(int exit_code) {
  return "sshd exited (code " + std::to_string(exit_code) + ")";
}

bool IsAllowedSshKeyType(std::string_view type) {
  return type == "ssh-ed25519" || type == "ecdsa-sha2-nistp256" ||
         type == "ecdsa-sha2-nistp384" || type == "ecdsa-sha2-nistp521";
}

bool IsAuthorizedKeyLine(std::string_view line) {
  return IsPublicKeyLine(line, kMaxAuthorizedKeyLineBytes);
}

std::string EncodeSshCapability(const SshCapability& message) {
  json::object object{{"type", kSshCapabilityType},
                      {"reservation_id", message.reservation_id},
                      {"host_key", message.host_key}};
  if (!message.sshd.empty()) object["sshd"] = message.sshd;
  return Text(object);
}

std::string EncodeSshOpenFailed(const SshOpenFailed& message) {
  return Text(json::object{
      {"type", kSshOpenFailedType}, {"channel", message.channel}, {"message", message.message}});
}

std::string EncodeSshOpen(const SshOpen& message) {
  return Text(json::object{
      {"type", kSshOpenType},
      {"channel", message.channel},
      {"reservation_id", message.reservation_id},
      {"grant_id", message.grant_id},
      {"credential", message.credential},
      {"authorized_keys",
       json::array(message.authorized_keys.begin(), message.authorized_keys.end())},
      {"purpose", message.purpose}});
}

std::string EncodeSshKeys(const SshKeys& message) {
  return Text(json::object{
      {"type", kSshKeysType},
      {"reservation_id", message.reservation_id},
      {"authorized_keys",
       json::array(message.authorized_keys.begin(), message.authorized_keys.end())}});
}

Result<SshAgentMessage> DecodeSshAgentMessage(std::string_view text) {
  json::value holder;
  UPLINK_ASSIGN_OR_RETURN(const json::object* object, ObjectOf(text, holder));
  FieldReader fields(*object, "");
  UPLINK_ASSIGN_OR_RETURN(std::string type, TypeOf(fields));
  if (type == kSshCapabilityType) {
    UPLINK_ASSIGN_OR_RETURN(SshCapability message, DecodeCapability(fields));
    return SshAgentMessage(std::move(message));
  }
  if (type == kSshOpenFailedType) {
    UPLINK_ASSIGN_OR_RETURN(SshOpenFailed message, DecodeOpenFailed(fields));
    return SshAgentMessage(std::move(message));
  }
  return SshAgentMessage(SshUnknownMessage{std::move(type)});
}

Result<SshConsoleMessage> DecodeSshConsoleMessage(std::string_view text) {
  json::value holder;
  UPLINK_ASSIGN_OR_RETURN(const json::object* object, ObjectOf(text, holder));
  FieldReader fields(*object, "");
  UPLINK_ASSIGN_OR_RETURN(std::string type, TypeOf(fields));
  if (type == kSshOpenType) {
    UPLINK_ASSIGN_OR_RETURN(SshOpen message, DecodeOpen(fields));
    return SshConsoleMessage(std::move(message));
  }
  if (type == kSshKeysType) {
    UPLINK_ASSIGN_OR_RETURN(SshKeys message, DecodeKeys(fields));
    return SshConsoleMessage(std::move(message));
  }
  return SshConsoleMessage(SshUnknownMessage{std::move(type)});
}

}  // namespace uplink::protocol
