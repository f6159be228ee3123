// The agent protocol's other messages (docs/protocol.md), each read as its receiver reads it:
// the console reads the agents' requests (inventory reports, command polls and results,
// workspace syncs and output, cluster snapshots), the agents read the console's replies (plans,
// polled commands, workspace work, token expiry, errors) and the controller reads the
// execution values. The first byte picks the message; the rest is its body.
//
// Whatever the input: a refusal says why; what is accepted stays within the protocol's bounds;
// and what is accepted, encoded again, is accepted again and encodes the same, so that neither
// end writes what the other refuses or reads differently.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "fuzz_check.h"
#include "protocol/cluster_snapshot.h"
#include "protocol/commands.h"
#include "protocol/errors.h"
#include "protocol/inventory.h"
#include "protocol/plans.h"
#include "protocol/whoami.h"
#include "protocol/workspace.h"

namespace {

using namespace uplink;
using namespace uplink::protocol;

// Decodes `document` and, when it is accepted, re-encodes it: nullopt for a refusal.
using RoundTrip = std::function<std::optional<json::value>(const json::value& document)>;

// Accepted once, the encoded form must be accepted again and encode to itself.
void CheckStable(const json::value& document, const RoundTrip& round_trip) {
  std::optional<json::value> encoded = round_trip(document);
  if (!encoded) return;
  std::optional<json::value> again = round_trip(*encoded);
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(*again == *encoded);
}

template <typename T>
bool Refused(const Result<T>& decoded) {
  if (decoded.ok()) return false;
  FUZZ_CHECK(!decoded.status().message().empty());
  return true;
}

void CheckInventoryReport(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto report = DecodeInventoryReport(body);
    if (Refused(report)) return std::nullopt;
    FUZZ_CHECK(report->nodes.size() <= kMaxReportNodes);
    size_t rows = 0;
    for (const InventoryNode& node : report->nodes) {
      FUZZ_CHECK(!node.name.empty() && node.name.size() <= kMaxNodeNameBytes);
      FUZZ_CHECK(node.resources.size() <= kMaxResourcesPerNode);
      FUZZ_CHECK(node.taints.size() <= kMaxTaintsPerNode);
      FUZZ_CHECK(node.gpu_capacity >= 0 && node.gpu_capacity <= kMaxGpuCount);
      FUZZ_CHECK(node.gpu_allocatable >= 0 && node.gpu_allocatable <= kMaxGpuCount);
      rows += node.resources.size() + node.taints.size();
    }
    FUZZ_CHECK(rows <= kMaxReportRows);
    return EncodeInventoryReport(*report);
  });
}

void CheckInventoryReply(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    return EncodeInventoryReply(DecodeInventoryReply(body));
  });
}

void CheckCommandPoll(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    if (!body.is_object()) return std::nullopt;
    auto poll = DecodeCommandPoll(body.get_object());
    if (Refused(poll)) return std::nullopt;
    FUZZ_CHECK(poll->wait_seconds >= 0 && poll->wait_seconds <= kMaxPollWaitSeconds);
    FUZZ_CHECK(poll->max_commands >= 1 && poll->max_commands <= kMaxPollCommands);
    return EncodeCommandPoll(*poll);
  });
}

void CheckPollReply(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto reply = DecodePollReply(body);
    if (Refused(reply)) return std::nullopt;
    FUZZ_CHECK(reply->commands.size() <= static_cast<size_t>(kMaxPollCommands));
    for (const PolledCommand& command : reply->commands) {
      FUZZ_CHECK(command.argv.size() <= kMaxCommandArgs);
      for (const std::string& arg : command.argv) FUZZ_CHECK(arg.size() <= kMaxCommandArgBytes);
    }
    return EncodePollReply(*reply);
  });
}

void CheckCommandResult(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto result = DecodeCommandResult(body);
    if (Refused(result)) return std::nullopt;
    FUZZ_CHECK(result->stdout_text.size() <= kMaxCommandStdoutBytes);
    FUZZ_CHECK(result->stderr_text.size() <= kMaxCommandStderrBytes);
    FUZZ_CHECK(result->duration_ms >= 0 && result->duration_ms <= kMaxCommandDurationMs);
    return EncodeCommandResult(*result);
  });
}

// Plans arrive inside an upload reply, under "plan".
json::value InReply(json::object plan) { return json::object{{"plan", std::move(plan)}}; }

void CheckNodePlan(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto plan = DecodeNodePlan(body);
    if (Refused(plan) || !*plan) return std::nullopt;
    if ((*plan)->interval) {
      FUZZ_CHECK(*(*plan)->interval >= kMinPlanInterval && *(*plan)->interval <= kMaxPlanInterval);
    }
    return InReply(EncodeNodePlan(**plan));
  });
}

void CheckClusterPlan(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto plan = DecodeClusterPlan(body);
    if (Refused(plan) || !*plan) return std::nullopt;
    FUZZ_CHECK((*plan)->commands.size() <= kMaxPlanCommands);
    for (const PlanCommand& command : (*plan)->commands) {
      FUZZ_CHECK(!command.name.empty() && command.name.size() <= kMaxPlanNameBytes);
      FUZZ_CHECK(!command.argv.empty() && command.argv.front() == "kubectl");
    }
    return InReply(EncodeClusterPlan(**plan));
  });
}

void CheckWorkspaceSync(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto sync = DecodeWorkspaceSync(body);
    if (Refused(sync)) return std::nullopt;
    FUZZ_CHECK(sync->events.size() <= kMaxSyncEvents);
    FUZZ_CHECK(sync->workspaces.size() <= kMaxSyncWorkspaces);
    FUZZ_CHECK(sync->wait_seconds >= 0 && sync->wait_seconds <= kMaxSyncWaitSeconds);
    for (const ObservedWorkspace& workspace : sync->workspaces) {
      FUZZ_CHECK(IsReservationId(workspace.reservation_id));
    }
    return EncodeWorkspaceSync(*sync);
  });
}

void CheckWorkspaceSyncReply(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto reply = DecodeWorkspaceSyncReply(body);
    if (Refused(reply)) return std::nullopt;
    for (const WorkspaceReservation& reservation : reply->reservations) {
      FUZZ_CHECK(IsReservationId(reservation.id));
    }
    for (const WorkspaceCommand& command : reply->commands) {
      FUZZ_CHECK(IsWorkspaceCommandId(command.id));
    }
    return EncodeWorkspaceSyncReply(*reply);
  });
}

void CheckWorkspaceOutput(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto output = DecodeWorkspaceOutput(body);
    if (Refused(output)) return std::nullopt;
    FUZZ_CHECK(output->offset >= 0);
    FUZZ_CHECK(output->data.size() <= kMaxOutputChunkBytes);
    FUZZ_CHECK(output->exit_code.has_value() == (output->state == "exited"));
    return EncodeWorkspaceOutput(*output);
  });
}

void CheckWorkspaceOutputReply(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto reply = DecodeWorkspaceOutputReply(body);
    if (Refused(reply)) return std::nullopt;
    FUZZ_CHECK(reply->have >= 0);
    return EncodeWorkspaceOutputReply(*reply);
  });
}

void CheckOutputGap(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    std::optional<std::int64_t> have = DecodeOutputGap(body);
    if (!have) return std::nullopt;
    FUZZ_CHECK(*have >= 0);
    return EncodeOutputGap(*have);
  });
}

void CheckExecutionValues(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto values = DecodeExecutionValues(body);
    if (Refused(values)) return std::nullopt;
    FUZZ_CHECK(values->nodes.size() <= kMaxExecutionNodes);
    FUZZ_CHECK(values->kubernetes_api_cidrs.size() <= kMaxExecutionCidrs);
    FUZZ_CHECK(values->console_cidrs.size() <= kMaxExecutionCidrs);
    for (const std::string& cidr : values->kubernetes_api_cidrs) FUZZ_CHECK(IsCidr(cidr));
    for (const std::string& cidr : values->console_cidrs) FUZZ_CHECK(IsCidr(cidr));
    if (values->enabled) FUZZ_CHECK(IsImageByDigest(values->workspace_image));
    return EncodeExecutionValues(*values);
  });
}

void CheckClusterSnapshot(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    if (!body.is_object()) return std::nullopt;
    auto snapshot = DecodeClusterSnapshot(body.get_object(), "payload");
    if (Refused(snapshot)) return std::nullopt;
    FUZZ_CHECK(snapshot->results.size() <= kMaxSnapshotResults);
    for (const SnapshotResult& result : snapshot->results) {
      FUZZ_CHECK(!result.name.empty() && result.name.size() <= kMaxSnapshotNameBytes);
      FUZZ_CHECK(result.argv.size() <= kMaxSnapshotArgs);
      FUZZ_CHECK(result.outcome.stdout_text.size() <= kMaxSnapshotOutputBytes);
      FUZZ_CHECK(result.outcome.stderr_text.size() <= kMaxSnapshotOutputBytes);
    }
    return EncodeClusterSnapshot(*snapshot);
  });
}

void CheckWhoAmIReply(const json::value& document) {
  CheckStable(document, [](const json::value& body) -> std::optional<json::value> {
    auto reply = DecodeWhoAmIReply(body);
    if (Refused(reply)) return std::nullopt;
    return EncodeWhoAmIReply(*reply, {});
  });
}

void CheckErrorBody(std::string_view text) {
  std::optional<ErrorBody> error = DecodeErrorBody(text);
  if (!error) return;
  if (error->sequence) FUZZ_CHECK(*error->sequence >= 0);
  std::optional<ErrorBody> again = DecodeErrorBody(json::value(EncodeErrorBody(*error)));
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(again->code == error->code && again->message == error->message &&
             again->sequence == error->sequence);
}

using Check = void (*)(const json::value&);

// By the first byte modulo 16: seeds start with '0'-'9', ':', ';', '<', '=', '>' and '?'.
constexpr Check kChecks[] = {
    CheckInventoryReport,    CheckInventoryReply,  CheckCommandPoll,       CheckPollReply,
    CheckCommandResult,      CheckNodePlan,        CheckClusterPlan,       CheckWorkspaceSync,
    CheckWorkspaceSyncReply, CheckWorkspaceOutput, CheckWorkspaceOutputReply, CheckOutputGap,
    CheckExecutionValues,    CheckClusterSnapshot, CheckWhoAmIReply,       nullptr,
};
static_assert(std::size(kChecks) == 16);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Check check = kChecks[data[0] % 16];
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (!check) {
    CheckErrorBody(text);
    return 0;
  }
  // Each receiver's own bounds are checked by the decoders; the parse is the widest of them.
  auto document = ParseJson(text, JsonLimits{kMaxReportBytes, 64});
  if (!document.ok()) return 0;
  check(*document);
  return 0;
}
