// The cluster role's snapshot record (docs/protocol.md, "Cluster snapshots"): every cycle, the
// results of the console's plan of kubectl reads, uploaded like any spool record. Read like a
// node sample: a known field of the wrong type or outside its bounds refuses the snapshot (the
// upload answers 422 naming the record), an unknown one is ignored so that a newer agent can
// add to it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"
#include "protocol/commands.h"

namespace uplink::protocol {

inline constexpr std::string_view kClusterSnapshotKind = "cluster_snapshot";
inline constexpr size_t kMaxSnapshotResults = 64;
// Per result, stdout and stderr each: a snapshot is a view, not a command's answer.
inline constexpr size_t kMaxSnapshotOutputBytes = 256 << 10;
inline constexpr size_t kMaxSnapshotArgs = 256;
inline constexpr size_t kMaxSnapshotArgBytes = 4096;
inline constexpr size_t kMaxSnapshotNameBytes = 253;

struct SnapshotResult {
  std::string name;               // "pods/ml", "logs/ml/trainer-0": printable ASCII
  std::vector<std::string> argv;  // starts with "kubectl"
  CommandResult outcome;
  bool truncated = false;  // stdout or stderr was cut to fit
};

struct ClusterSnapshot {
  WallTime collected_at;
  std::vector<SnapshotResult> results;
};

json::object EncodeSnapshotResult(const SnapshotResult& result);
// {"kind": "cluster_snapshot", "collected_at", "results"}.
json::object EncodeClusterSnapshot(const ClusterSnapshot& snapshot);

// True when `payload` is an object whose "kind" is "cluster_snapshot".
bool IsClusterSnapshotPayload(const json::object& payload);
// Errors are InvalidArgument and name the field by its path under `path`
// ("records[0].payload.results[3].exit_code ...").
Result<ClusterSnapshot> DecodeClusterSnapshot(const json::object& payload, std::string_view path);

}  // namespace uplink::protocol
