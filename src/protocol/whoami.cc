#include "protocol/whoami.h"

#include <utility>

#include "common/json.h"
#include "protocol/field_reader.h"

namespace uplink::protocol {

json::object EncodeWhoAmIReply(const WhoAmIReply& reply, json::storage_ptr storage) {
  return json::object({{"connection_id", reply.connection_id},
                       {"agent_name", reply.agent_name},
                       {"cluster_name", reply.cluster_name},
                       {"expires_at", FormatRfc3339(reply.expires_at)},
                       {"report_interval_seconds", reply.report_interval_seconds}},
                      std::move(storage));
}

Result<WhoAmIReply> DecodeWhoAmIReply(const json::value& body) {
  if (!body.is_object()) return InvalidArgumentError("the whoami reply must be a JSON object");
  const json::object& object = body.get_object();
  WhoAmIReply reply;
  for (auto [key, field] : {std::pair{"connection_id", &reply.connection_id},
                            std::pair{"agent_name", &reply.agent_name},
                            std::pair{"cluster_name", &reply.cluster_name}}) {
    const json::value* value = object.if_contains(key);
    if (value == nullptr || !value->is_string()) {
      return InvalidArgumentError(std::string(key) + " must be a string");
    }
    *field = value->get_string();
  }
  FieldReader fields(object, "");
  std::optional<WallTime> expires_at = DecodeExpiresAt(body);
  if (!expires_at) return InvalidArgumentError("expires_at must be an RFC 3339 time");
  reply.expires_at = *expires_at;
  UPLINK_ASSIGN_OR_RETURN(reply.report_interval_seconds,
                          fields.RequiredInt("report_interval_seconds", 1, INT32_MAX));
  return reply;
}

std::optional<WallTime> DecodeExpiresAt(const json::value& reply) {
  const json::object* object = reply.if_object();
  const json::value* expires = object == nullptr ? nullptr : object->if_contains("expires_at");
  if (expires == nullptr || !expires->is_string()) return std::nullopt;
  auto at = ParseRfc3339(expires->get_string());
  if (!at.ok()) return std::nullopt;
  return *at;
}

}  // namespace uplink::protocol
