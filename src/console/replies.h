// Replies: every error is {"error":{"code":…,"message":…}}, and StatusCode maps to an HTTP
// status in this one place. Errors whose code says more than the StatusCode (401 reasons,
// 403 confirmation_required, 410 handover states, 422 invalid_record, 429) have their own
// builders.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>

#include "common/json_fwd.h"
#include "common/status.h"
#include "net/http.h"

namespace uplink::console {

int HttpStatusFor(StatusCode code);

net::Response JsonResponse(int status, const json::object& body);

// The console's reply to a request the HTTP server refuses before routing it (400, 413,
// 431): the same error body as every other refusal, so an agent can tell the console's
// verdict from a proxy's (docs/protocol.md).
net::Response ServerRefusalResponse(int status);

// For replies that carry a token, key or code: no cache may keep them.
net::Response NoStore(net::Response response);

net::Response ErrorResponse(int status, std::string_view code, std::string_view message);

// Client errors keep their message; server errors get a generic one (the detail is the
// caller's to log) so that storage internals never reach a client.
net::Response ErrorResponse(const Status& status);

// 401 with `code` and "WWW-Authenticate: Bearer".
net::Response UnauthorizedResponse(std::string_view code, std::string_view message);

// 422 invalid_record for one record of an upload, with the record's `sequence` in the error
// object so that the agent can give up that record alone.
net::Response InvalidRecordResponse(std::int64_t sequence, std::string_view message);

// 429 rate_limited with Retry-After in whole seconds.
net::Response RateLimitedResponse(std::chrono::seconds retry_after, std::string_view message);

// True for "application/json", in any case, with or without parameters.
bool IsJsonContentType(std::optional<std::string_view> content_type);

// An agent's JSON body: Content-Type JSON, Content-Encoding gzip (inflated into `storage`)
// or none, at most `max_bytes` either way. The body, or the reply refusing it: 415 for
// another type or encoding, 400 or 413 for gzip that does not inflate within the limit.
std::variant<std::string_view, net::Response> AgentJsonBody(const net::Request& request,
                                                            size_t max_bytes, std::string& storage);

}  // namespace uplink::console
