#include "console/api/json_fields.h"

#include "common/files.h"
#include "common/json.h"
#include "common/text.h"

namespace uplink::console {
namespace {

constexpr size_t kMaxNameChars = 63;
constexpr size_t kMinEmailChars = 3;
constexpr size_t kMaxEmailChars = 254;
constexpr size_t kMaxIdChars = 64;
// No user API body nests more than two levels; a little headroom, and no further.
constexpr size_t kMaxUserBodyDepth = 8;

}  // namespace

Result<std::int64_t> ParseQueryInt(std::string_view name, const std::string& text, std::int64_t min,
                                   std::int64_t max) {
  std::optional<std::int64_t> value = ParseDecimalInt(text, min, max);
  if (!value) {
    return InvalidArgumentError(std::string(name) + " must be a whole number from " +
                                std::to_string(min) + " to " + std::to_string(max));
  }
  return *value;
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
