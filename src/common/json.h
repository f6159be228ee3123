// JSON through Boost.JSON (header-only; its implementation is compiled once, in json.cc).
#pragma once

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace uplink {

namespace json = boost::json;

struct JsonLimits {
  size_t max_bytes = 1 << 20;  // refuse larger documents before parsing
  size_t max_depth = 64;       // nesting bomb protection
};

// Parses one JSON document. Errors are InvalidArgument and say where parsing stopped;
// oversized input is ResourceExhausted.
Result<json::value> ParseJson(std::string_view text, const JsonLimits& limits = {});
// The same, the document's memory from `storage`: a json::monotonic_resource for a document
// read once and dropped makes a few allocations instead of one per string and container.
// The document must not outlive it.
Result<json::value> ParseJson(std::string_view text, const JsonLimits& limits,
                              json::storage_ptr storage);

// Compact serialisation.
std::string ToJson(const json::value& value);

// Lenient reads of one field, for data whose shape was checked already or where a missing
// field means "none": the value when it is there with this type, else empty.
std::string StringAt(const json::object& object, std::string_view key);
const json::object& ObjectAt(const json::object& object, std::string_view key);
const json::array& ArrayAt(const json::object& object, std::string_view key);
// The field as an object (or array) to fill in, made empty first when it is absent or of
// another type.
json::object& EnsureObjectAt(json::object& object, std::string_view key);
json::array& EnsureArrayAt(json::object& object, std::string_view key);

}  // namespace uplink
