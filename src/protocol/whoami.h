// GET /api/v1/agent/whoami (docs/protocol.md): the authenticated no-op every agent can call,
// and the token expiry (`expires_at`) that it shares with every reply the agents act on
// (inventory, uploads, command polls; "Token expiry").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::protocol {

// Views: into the connection's row when the console encodes (whoami must not copy it), into the
// reply's body when the agent decodes.
struct WhoAmIReply {
  std::string_view connection_id;
  std::string_view agent_name;
  std::string_view cluster_name;
  WallTime expires_at;
  std::int64_t report_interval_seconds = 60;
};

// Built with `storage`: the console answers whoami to every agent's every check, and builds
// the reply in a stack arena rather than with an allocation per field.
json::object EncodeWhoAmIReply(const WhoAmIReply& reply, json::storage_ptr storage);
// The reply, viewing into `body`; InvalidArgument naming the first field missing or of the
// wrong type.
Result<WhoAmIReply> DecodeWhoAmIReply(const json::value& body);

// The `expires_at` of any reply to an agent call, when it holds an RFC 3339 time.
std::optional<WallTime> DecodeExpiresAt(const json::value& reply);

}  // namespace uplink::protocol
