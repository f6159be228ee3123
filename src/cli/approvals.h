// What `uplink kubectl` does with a command that waits for approval (approval_commands.cc).
#pragma once

#include <chrono>
#include <string>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "common/json_fwd.h"
#include "common/status.h"

namespace uplink::cli {

// How often `uplink kubectl` asks whether a waiting command was decided or ran.
inline constexpr std::chrono::seconds kApprovalPollInterval{2};

// `reply` is the console's 202 for a command that matched an approval rule: says so on
// stderr (what to run, until when), then asks GET /api/v1/connections/{id}/commands/{cmd}
// every kApprovalPollInterval until it completed (returned, with kubectl's exit code and
// output as a direct run's reply has them), or was rejected, expired or failed (an error
// with the console's words: PermissionDenied for rejected and expired, FailedPrecondition
// for failed).
Result<json::object> WaitForApproval(Invocation& inv, ApiClient& api,
                                     const std::string& connection_id, json::object reply);

}  // namespace uplink::cli
