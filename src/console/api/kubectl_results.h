// What the cluster role sends back about kubectl (docs/protocol.md): the result of one
// command (POST /api/v1/agent/commands/{id}/result), read strictly, and the cluster snapshot
// record it uploads every cycle ("Cluster snapshots"), read like a node sample: a known field
// of the wrong type or outside its bounds refuses the snapshot (422 naming the record), an
// unknown one is ignored so that a newer agent can add to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "common/status.h"
#include "common/time.h"
#include "console/commands/command_broker.h"

namespace uplink::console {

// The decompressed body of a command result.
inline constexpr size_t kMaxCommandResultBytes = 16 << 20;
// kubectl's stdout beyond this is the agent's output_too_large failure, never a result.
inline constexpr size_t kMaxCommandStdoutBytes = 4 << 20;
inline constexpr size_t kMaxCommandStderrBytes = 4 << 20;
inline constexpr size_t kMaxAgentErrorMessageBytes = 4096;
// kubectl runs for at most 30 s; a duration is refused only when it is absurd.
inline constexpr std::int64_t kMaxCommandDurationMs = 3'600'000;

inline constexpr std::string_view kClusterSnapshotKind = "cluster_snapshot";
// The cluster role's streams: "cluster/" + its pod's name.
inline constexpr std::string_view kClusterStreamPrefix = "cluster/";
inline constexpr size_t kMaxSnapshotResults = 64;
inline constexpr size_t kMaxSnapshotOutputBytes = 256 << 10;  // per result, stdout and stderr
inline constexpr size_t kMaxSnapshotArgs = 256;
inline constexpr size_t kMaxSnapshotArgBytes = 4096;
inline constexpr size_t kMaxSnapshotNameBytes = 253;

// The body of a command result: {exit_code, stdout, stderr, duration_ms}, or {error: {code,
// message}, duration_ms}. InvalidArgument naming the field for anything else: an unknown
// field, a wrong type, a value out of bounds, both or neither of exit_code and error.
Result<CommandResult> ParseCommandResult(const json::value& body);

// True when `payload` is an object whose "kind" is "cluster_snapshot".
bool IsClusterSnapshotPayload(const json::object& payload);

// Checks a cluster snapshot payload and returns its collected_at. Errors are InvalidArgument
// and name the field by its path under `path` ("records[0].payload.results[3].exit_code ...").
Result<WallTime> ParseClusterSnapshot(const json::object& payload, std::string_view path);

}  // namespace uplink::console
