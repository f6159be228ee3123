// Reading user API requests: bodies strictly (protocol/field_reader.h), query parameters, and
// the values people type (names, emails, times), with messages that say what is allowed.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"
#include "protocol/field_reader.h"

namespace uplink::console {

// The largest body any user API call takes.
inline constexpr size_t kMaxUserBodyBytes = 64 << 10;

using protocol::FieldReader;

// A whole decimal number in [min, max] (0 <= min), for query parameter `name`.
Result<std::int64_t> ParseQueryInt(std::string_view name, const std::string& text, std::int64_t min,
                                   std::int64_t max);

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
