#include "console/api/json_fields.h"

#include <strings.h>

#include "common/files.h"

namespace uplink::console {
namespace {

constexpr size_t kMaxNameChars = 63;
constexpr size_t kMinEmailChars = 3;
constexpr size_t kMaxEmailChars = 254;
constexpr size_t kMaxIdChars = 64;
// No user API body nests more than two levels; a little headroom, and no further.
constexpr size_t kMaxUserBodyDepth = 8;

}  // namespace

FieldReader::FieldReader(const json::object& object, std::string path)
    : object_(object), path_(std::move(path)) {}

std::string FieldReader::FieldPath(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Status FieldReader::OnlyFields(std::initializer_list<std::string_view> allowed) const {
  for (const auto& field : object_) {
    bool known = false;
    for (std::string_view name : allowed) known = known || field.key() == name;
    if (!known) {
      // The key is echoed only in part: it came from the client and may be anything.
      std::string key(field.key().substr(0, 64));
      std::string message = "unknown field \"" + FieldPath(key) + "\"; remove it";
      if (allowed.size() == 0) {
        message += " (this call takes no fields)";
      } else {
        message += " (known fields:";
        for (std::string_view name : allowed) message += " " + std::string(name);
        message += ")";
      }
      return InvalidArgumentError(std::move(message));
    }
  }
  return Status::Ok();
}

const json::value* FieldReader::Find(std::string_view key) const {
  return object_.if_contains(key);
}

Result<std::optional<std::string>> FieldReader::String(std::string_view key,
                                                       size_t max_bytes) const {
  const json::value* value = Find(key);
  if (!value) return std::optional<std::string>();
  if (!value->is_string()) return InvalidArgumentError(FieldPath(key) + " must be a string");
  const json::string& text = value->get_string();
  if (text.size() > max_bytes) {
    return InvalidArgumentError(FieldPath(key) + " is " + std::to_string(text.size()) +
                                " bytes long; the limit is " + std::to_string(max_bytes));
  }
  return std::optional<std::string>(std::string(text));
}

Result<std::string> FieldReader::RequiredString(std::string_view key, size_t max_bytes) const {
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> text, String(key, max_bytes));
  if (!text) return InvalidArgumentError(FieldPath(key) + " is required");
  return std::move(*text);
}

Result<std::optional<bool>> FieldReader::Bool(std::string_view key) const {
  const json::value* value = Find(key);
  if (!value) return std::optional<bool>();
  if (!value->is_bool()) return InvalidArgumentError(FieldPath(key) + " must be true or false");
  return std::optional<bool>(value->get_bool());
}

Result<bool> FieldReader::RequiredBool(std::string_view key) const {
  UPLINK_ASSIGN_OR_RETURN(std::optional<bool> flag, Bool(key));
  if (!flag) return InvalidArgumentError(FieldPath(key) + " is required");
  return *flag;
}

Result<std::int64_t> FieldReader::RequiredInt(std::string_view key, std::int64_t min,
                                              std::int64_t max) const {
  const json::value* value = Find(key);
  if (!value) return InvalidArgumentError(FieldPath(key) + " is required");
  if (!value->is_int64() && !value->is_uint64()) {
    return InvalidArgumentError(FieldPath(key) + " must be an integer");
  }
  // Only uint64 holds values above INT64_MAX; those are over any bound used here.
  bool too_big = value->is_uint64() && value->get_uint64() > static_cast<std::uint64_t>(max);
  std::int64_t number = value->is_int64() ? value->get_int64() : max;
  if (too_big || number < min || number > max) {
    return InvalidArgumentError(FieldPath(key) + " must be between " + std::to_string(min) +
                                " and " + std::to_string(max));
  }
  return number;
}

Result<std::int64_t> ParseQueryInt(std::string_view name, const std::string& text, std::int64_t min,
                                   std::int64_t max) {
  std::string message = std::string(name) + " must be a whole number from " + std::to_string(min) +
                        " to " + std::to_string(max);
  if (text.empty() || text.size() > 18) return InvalidArgumentError(message);
  std::int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return InvalidArgumentError(message);
    value = value * 10 + (c - '0');
  }
  if (value < min || value > max) return InvalidArgumentError(message);
  return value;
}

bool IsJsonContentType(std::optional<std::string_view> content_type) {
  if (!content_type) return false;
  std::string_view media = TrimWhitespace(content_type->substr(0, content_type->find(';')));
  return media.size() == 16 && ::strncasecmp(media.data(), "application/json", 16) == 0;
}

Result<json::object> ReadJsonObject(std::string_view body) {
  if (body.empty()) return json::object();
  UPLINK_ASSIGN_OR_RETURN(json::value parsed,
                          ParseJson(body, JsonLimits{kMaxUserBodyBytes, kMaxUserBodyDepth}));
  if (!parsed.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  return std::move(parsed.get_object());
}

Result<std::string> ValidateName(std::string_view field, std::string_view raw) {
  std::string_view name = TrimWhitespace(raw);
  if (name.empty() || name.size() > kMaxNameChars) {
    return InvalidArgumentError(std::string(field) + " must be 1-" + std::to_string(kMaxNameChars) +
                                " characters long");
  }
  for (char c : name) {
    if (c < 0x20 || c > 0x7e) {
      return InvalidArgumentError(std::string(field) +
                                  " may hold only printable ASCII characters (letters, digits, "
                                  "spaces and punctuation)");
    }
  }
  return std::string(name);
}

Result<std::string> NormalizeEmail(std::string_view raw) {
  std::string email(TrimWhitespace(raw));
  if (email.size() < kMinEmailChars || email.size() > kMaxEmailChars) {
    return InvalidArgumentError("email must be " + std::to_string(kMinEmailChars) + "-" +
                                std::to_string(kMaxEmailChars) + " characters long");
  }
  size_t at_signs = 0;
  for (char& c : email) {
    auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f) {
      return InvalidArgumentError("email must not contain spaces or control characters");
    }
    if (c == '@') ++at_signs;
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  size_t at = email.find('@');
  if (at_signs != 1 || at == 0 || at + 1 == email.size()) {
    return InvalidArgumentError("email must have the form name@domain, with exactly one '@'");
  }
  return email;
}

Result<WallTime> ParseFutureTime(std::string_view field, std::string_view raw, WallTime now) {
  auto parsed = ParseRfc3339(raw);
  if (!parsed.ok()) {
    return InvalidArgumentError(std::string(field) +
                                " must be an RFC 3339 time such as \"2027-01-31T00:00:00Z\"");
  }
  if (*parsed <= now) return InvalidArgumentError(std::string(field) + " must be in the future");
  return *parsed;
}

bool IsPlausibleId(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdChars) return false;
  for (char c : id) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace uplink::console
