#include "protocol/field_reader.h"

#include <algorithm>

#include "common/json.h"

namespace uplink::protocol {

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

Result<std::optional<std::string>> FieldReader::PlainString(std::string_view key,
                                                            size_t max_bytes) const {
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> text, String(key, max_bytes));
  if (text && std::any_of(text->begin(), text->end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
      })) {
    return InvalidArgumentError(FieldPath(key) + " must not contain control characters");
  }
  return text;
}

Result<std::string> FieldReader::RequiredPlainString(std::string_view key,
                                                     size_t max_bytes) const {
  UPLINK_ASSIGN_OR_RETURN(std::optional<std::string> text, PlainString(key, max_bytes));
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

}  // namespace uplink::protocol
