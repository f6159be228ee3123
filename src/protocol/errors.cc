#include "protocol/errors.h"

#include "common/json.h"
#include "protocol/agent_api.h"

namespace uplink::protocol {

json::object EncodeErrorBody(const ErrorBody& error) {
  json::object fields{{"code", error.code}, {"message", error.message}};
  if (error.sequence) fields["sequence"] = *error.sequence;
  return json::object{{"error", std::move(fields)}};
}

std::optional<ErrorBody> DecodeErrorBody(const json::value& body) {
  const json::object* object = body.if_object();
  const json::value* error = object == nullptr ? nullptr : object->if_contains("error");
  if (error == nullptr || !error->is_object()) return std::nullopt;
  const json::object& fields = error->get_object();
  ErrorBody decoded;
  decoded.code = StringAt(fields, "code");
  decoded.message = StringAt(fields, "message");
  if (const json::value* sequence = fields.if_contains("sequence")) {
    if (sequence->is_int64() && sequence->get_int64() >= 0) {
      decoded.sequence = sequence->get_int64();
    } else if (sequence->is_uint64() && sequence->get_uint64() <= INT64_MAX) {
      decoded.sequence = static_cast<std::int64_t>(sequence->get_uint64());
    }
  }
  return decoded;
}

std::optional<ErrorBody> DecodeErrorBody(std::string_view body) {
  auto parsed = ParseJson(body, JsonLimits{.max_bytes = kMaxReplyBytes, .max_depth = 16});
  if (!parsed.ok()) return std::nullopt;
  return DecodeErrorBody(*parsed);
}

}  // namespace uplink::protocol
