// Strict reading of JSON request bodies: unknown fields and wrong types are refused with a
// message that names the field (by its path, e.g. "nodes[3].gpu_capacity"), and the values
// people type (names, emails, times) are checked with messages that say what is allowed.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::console {

// The largest body any user API call takes.
inline constexpr size_t kMaxUserBodyBytes = 64 << 10;

class FieldReader {
 public:
  // `path` prefixes field names in messages ("" for the top level).
  FieldReader(const json::object& object, std::string path);

  // InvalidArgument naming the first field not in `allowed`.
  Status OnlyFields(std::initializer_list<std::string_view> allowed) const;

  // Each getter: InvalidArgument when present with the wrong type or outside its bounds;
  // nullopt when absent (the Required* forms make absence an error too). String lengths are
  // in bytes.
  Result<std::optional<std::string>> String(std::string_view key, size_t max_bytes) const;
  Result<std::string> RequiredString(std::string_view key, size_t max_bytes) const;
  Result<std::optional<bool>> Bool(std::string_view key) const;
  Result<bool> RequiredBool(std::string_view key) const;
  Result<std::int64_t> RequiredInt(std::string_view key, std::int64_t min, std::int64_t max) const;
  // The value when present, whatever its type (for arrays and objects).
  const json::value* Find(std::string_view key) const;

  std::string FieldPath(std::string_view key) const;

 private:
  const json::object& object_;
  std::string path_;
};

// A whole decimal number in [min, max] (at most 18 digits), for query parameter `name`.
Result<std::int64_t> ParseQueryInt(std::string_view name, const std::string& text, std::int64_t min,
                                   std::int64_t max);

// True for "application/json", in any case, with or without parameters.
bool IsJsonContentType(std::optional<std::string_view> content_type);

// A user API body as a JSON object; an empty body reads as {} so that "required" errors name
// the missing fields. Nesting deeper than any request needs is refused.
Result<json::object> ReadJsonObject(std::string_view body);

// Trims, then requires 1-63 printable ASCII characters (connection and API key names).
Result<std::string> ValidateName(std::string_view field, std::string_view raw);

// Trims and lower-cases; then requires 3-254 characters, exactly one '@' with something on
// both sides, and no spaces or control characters.
Result<std::string> NormalizeEmail(std::string_view raw);

// An RFC 3339 time strictly after `now`, for `field`.
Result<WallTime> ParseFutureTime(std::string_view field, std::string_view raw, WallTime now);

// True when `id` can be an object id at all (1-64 characters of [A-Za-z0-9_-]); anything else
// is answered 404 without asking the store.
bool IsPlausibleId(std::string_view id);

}  // namespace uplink::console
