// Strict reading of JSON objects from a peer: unknown fields and wrong types are refused with
// a message that names the field by its path ("nodes[3].gpu_capacity"). The agent API's
// decoders and the console's user API read bodies through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "common/json_fwd.h"
#include "common/status.h"

namespace uplink::protocol {

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
  // As String, refusing control characters (NUL included): for names and versions that are
  // stored as text (PostgreSQL's cannot hold a NUL) and shown to users.
  Result<std::optional<std::string>> PlainString(std::string_view key, size_t max_bytes) const;
  Result<std::string> RequiredPlainString(std::string_view key, size_t max_bytes) const;
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

}  // namespace uplink::protocol
