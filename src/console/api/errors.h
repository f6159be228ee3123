// Error replies: every error is {"error":{"code":…,"message":…}}, and StatusCode maps to an
// HTTP status in this one place.
#pragma once

#include <string_view>

#include "common/status.h"
#include "net/http.h"

namespace uplink::console {

int HttpStatusFor(StatusCode code);

net::Response ErrorResponse(int status, std::string_view code, std::string_view message);

// Client errors keep their message; server errors get a generic one (the detail is the
// caller's to log) so that storage internals never reach a client.
net::Response ErrorResponse(const Status& status);

}  // namespace uplink::console
