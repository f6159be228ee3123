#include "kubesim/secrets.h"

#include <algorithm>
#include <array>
#include <map>

#include "common/crypto.h"

namespace uplink::kubesim {
namespace {

constexpr std::uint8_t kInvalid = 0xff;

constexpr std::array<std::uint8_t, 256> StdDecodeMap() {
  std::array<std::uint8_t, 256> map{};
  for (auto& entry : map) entry = kInvalid;
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < kAlphabet.size(); ++i) {
    map[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::uint8_t>(i);
  }
  return map;
}

Status CorruptInput(size_t offset) {
  return InvalidArgumentError("illegal base64 data at input byte " + std::to_string(offset));
}

bool IsNewline(char c) { return c == '\n' || c == '\r'; }

// The JSON type names Go's decoder uses in its messages.
std::string_view JsonTypeName(const json::value& value) {
  if (value.is_string()) return "string";
  if (value.is_bool()) return "bool";
  if (value.is_array()) return "array";
  if (value.is_object()) return "object";
  return "number";
}

Status CannotUnmarshal(const json::value& value, std::string_view field, std::string_view go_type) {
  return InvalidArgumentError("json: cannot unmarshal " + std::string(JsonTypeName(value)) +
                              " into Go struct field Secret." + std::string(field) + " of type " +
                              std::string(go_type));
}

// The number of bytes a canonical (padded, newline-free) base64 text decodes to.
size_t DecodedSize(std::string_view canonical) {
  size_t padding = canonical.ends_with("==") ? 2 : canonical.ends_with('=') ? 1 : 0;
  return canonical.size() / 4 * 3 - padding;
}

bool IsConfigKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// apimachinery's validation.IsConfigMapKey, one message per rule broken.
std::vector<std::string> ConfigKeyErrors(std::string_view key) {
  std::vector<std::string> errors;
  if (key.size() > 253) errors.emplace_back("must be no more than 253 characters");
  if (key.empty() || !std::all_of(key.begin(), key.end(), IsConfigKeyChar)) {
    errors.emplace_back(
        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
        "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
        "'[-._a-zA-Z0-9]+')");
  }
  if (key == ".") {
    errors.emplace_back("must not be '.'");
  } else if (key == "..") {
    errors.emplace_back("must not be '..'");
  } else if (key.starts_with("..")) {
    errors.emplace_back("must not start with '..'");
  }
  return errors;
}

bool IsImmutable(const json::object& secret) {
  const json::value* immutable = secret.if_contains("immutable");
  return immutable && immutable->is_bool() && immutable->get_bool();
}

const json::object& DataOf(const json::object& secret) {
  static const json::object kEmpty;
  const json::value* data = secret.if_contains("data");
  return data && data->is_object() ? data->get_object() : kEmpty;
}

std::string TypeOf(const json::object& secret) {
  const json::value* type = secret.if_contains("type");
  return type && type->is_string() ? std::string(type->get_string()) : std::string();
}

}  // namespace

Result<std::string> DecodeBase64LikeGo(std::string_view src) {
  static constexpr std::array<std::uint8_t, 256> kDecode = StdDecodeMap();
  std::string out;
  out.reserve(src.size() / 4 * 3);
  size_t si = 0;
  // One quantum (four symbols) per iteration, as Go's decodeQuantum reads them.
  while (true) {
    std::uint8_t quantum[4] = {0, 0, 0, 0};
    size_t symbols = 4;
    bool padded = false;
    for (size_t j = 0; j < 4; ++j) {
      if (si == src.size()) {
        if (j == 0) return out;
        return CorruptInput(si - j);
      }
      char in = src[si++];
      std::uint8_t value = kDecode[static_cast<unsigned char>(in)];
      if (value != kInvalid) {
        quantum[j] = value;
        continue;
      }
      if (IsNewline(in)) {
        --j;
        continue;
      }
      if (in != '=') return CorruptInput(si - 1);
      // Padding ends the input: "xx==" or "xxx=", then only newlines.
      if (j < 2) return CorruptInput(si - 1);
      if (j == 2) {
        while (si < src.size() && IsNewline(src[si])) ++si;
        if (si == src.size()) return CorruptInput(src.size());
        if (src[si] != '=') return CorruptInput(si - 1);
        ++si;
      }
      while (si < src.size() && IsNewline(src[si])) ++si;
      if (si < src.size()) return CorruptInput(si);
      symbols = j;
      padded = true;
      break;
    }
    std::uint32_t bits = (std::uint32_t{quantum[0]} << 18) | (std::uint32_t{quantum[1]} << 12) |
                         (std::uint32_t{quantum[2]} << 6) | quantum[3];
    out += static_cast<char>(bits >> 16);
    if (symbols >= 3) out += static_cast<char>((bits >> 8) & 0xff);
    if (symbols == 4) out += static_cast<char>(bits & 0xff);
    if (padded) return out;
  }
}

Status ConvertSecret(json::object& secret) {
  // Sorted, as the real server's maps serialise.
  std::map<std::string, std::string> data;
  std::map<std::string, std::string> string_data;
  // Go's decoder reports the first error in document order.
  for (const auto& [key, value] : secret) {
    if (key == "data") {
      if (value.is_null()) continue;
      if (!value.is_object()) return CannotUnmarshal(value, "data", "map[string][]uint8");
      for (const auto& [data_key, encoded] : value.get_object()) {
        if (encoded.is_null()) {
          data[std::string(data_key)] = "";
          continue;
        }
        if (!encoded.is_string()) return CannotUnmarshal(encoded, "data", "[]uint8");
        UPLINK_ASSIGN_OR_RETURN(std::string decoded, DecodeBase64LikeGo(encoded.get_string()));
        data[std::string(data_key)] = Base64Encode(decoded);
      }
    } else if (key == "stringData") {
      if (value.is_null()) continue;
      if (!value.is_object()) return CannotUnmarshal(value, "stringData", "map[string]string");
      for (const auto& [data_key, text] : value.get_object()) {
        if (text.is_null()) continue;
        if (!text.is_string()) return CannotUnmarshal(text, "stringData", "string");
        string_data[std::string(data_key)] = text.get_string();
      }
    } else if (key == "type") {
      if (!value.is_null() && !value.is_string()) {
        return CannotUnmarshal(value, "type", "v1.SecretType");
      }
    } else if (key == "immutable") {
      if (!value.is_null() && !value.is_bool()) return CannotUnmarshal(value, "immutable", "bool");
    }
  }
  for (const auto& [data_key, text] : string_data) data[data_key] = Base64Encode(text);
  secret.erase("stringData");
  if (data.empty()) {
    secret.erase("data");
  } else {
    json::object encoded;
    for (auto& [data_key, value] : data) encoded[data_key] = std::move(value);
    secret["data"] = std::move(encoded);
  }
  if (TypeOf(secret).empty()) secret["type"] = "Opaque";
  const json::value* immutable = secret.if_contains("immutable");
  if (immutable && immutable->is_null()) secret.erase("immutable");
  return Status::Ok();
}

std::vector<FieldError> ValidateSecretData(const json::object& secret) {
  std::vector<FieldError> causes;
  size_t total = 0;
  for (const auto& [key, value] : DataOf(secret)) {
    // Keys are not secret, and the real server names them; they are escaped and cut as
    // GoQuoted does, so a hostile key cannot grow the message or break its encoding.
    std::string quoted = GoQuoted(key);
    std::string path = "data[" + quoted.substr(1, quoted.size() - 2) + "]";
    for (std::string& error : ConfigKeyErrors(key)) {
      causes.push_back(FieldError{path, "FieldValueInvalid",
                                  "Invalid value: " + quoted + ": " + std::move(error)});
    }
    if (value.is_string()) total += DecodedSize(value.get_string());
  }
  if (total > kMaxSecretBytes) {
    causes.push_back(FieldError{
        "data", "FieldValueTooLong",
        "Too long: may not be more than " + std::to_string(kMaxSecretBytes) + " bytes"});
  }
  return causes;
}

std::vector<FieldError> ValidateSecretUpdate(const json::object& updated,
                                             const json::object& current) {
  std::vector<FieldError> causes;
  constexpr std::string_view kImmutable = "Forbidden: field is immutable when `immutable` is set";
  if (IsImmutable(current)) {
    if (!IsImmutable(updated)) {
      causes.push_back(FieldError{"immutable", "FieldValueForbidden", std::string(kImmutable)});
    }
    if (DataOf(updated) != DataOf(current)) {
      causes.push_back(FieldError{"data", "FieldValueForbidden", std::string(kImmutable)});
    }
  }
  if (TypeOf(updated) != TypeOf(current)) {
    causes.push_back(FieldError{"type", "FieldValueInvalid",
                                "Invalid value: " + GoQuoted(TypeOf(updated)) +
                                    ": field is immutable"});
  }
  return causes;
}

}  // namespace uplink::kubesim
