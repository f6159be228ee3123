// The error body of every refusal the console makes, to agents and to people alike
// (docs/protocol.md, "Errors"; docs/api.md): {"error": {"code", "message"}}, and for an upload
// record refused for its contents also "sequence". The console encodes it; the agent and the
// CLI decode it, and tell the console's verdict from a proxy's by its presence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/json_fwd.h"

namespace uplink::protocol {

struct ErrorBody {
  std::string code;                      // "revoked", "invalid_record", ...
  std::string message;                   // for people; never parsed
  std::optional<std::int64_t> sequence;  // invalid_record: the record refused
};

json::object EncodeErrorBody(const ErrorBody& error);

// The error of a reply body, read leniently (it may come from anywhere): nullopt when the body
// is not a JSON object with an "error" object; code and message empty when they are not
// strings, sequence absent unless it is a whole number from 0 up.
std::optional<ErrorBody> DecodeErrorBody(const json::value& body);
// The same from the body's text, parsed with a reply's limits (1 MiB, depth 16).
std::optional<ErrorBody> DecodeErrorBody(std::string_view body);

}  // namespace uplink::protocol
