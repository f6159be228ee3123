// The experiments role's record payloads (docs/protocol.md, "Experiment runs"), read strictly:
// a known field of the wrong type or out of its bounds refuses the record (the upload answers
// 422 invalid_record naming its sequence). Unknown fields of a run are ignored, so that a
// newer agent can add some before the console shows them.
#pragma once

#include <string>
#include <string_view>

#include "common/json.h"
#include "common/status.h"
#include "console/store/runs.h"

namespace uplink::console {

// The streams of the experiments role: "experiments/" + the pod's name.
inline constexpr std::string_view kExperimentsStreamPrefix = "experiments/";

inline constexpr size_t kMaxRunItems = 10'000;         // runs, series, ids or problems per record
inline constexpr size_t kMaxPointsPerRecord = 200'000;  // over all series of a record
inline constexpr size_t kMaxRunIdBytes = 256;
inline constexpr size_t kMaxRunMapEntries = 500;
inline constexpr size_t kMaxRunKeyBytes = 250;
inline constexpr size_t kMaxRunValueBytes = 6000;

// True for a payload whose kind is experiment_run, metric_points, run_deleted or
// scan_problem.
bool IsExperimentPayload(const json::object& payload);

// The record's items; InvalidArgument naming the field by its path (`path` is the payload's,
// "records[3].payload").
Result<ExperimentRecord> ParseExperimentPayload(const json::object& payload,
                                                const std::string& path);

// The statuses a run can have (what the agents send, and "unknown" for a run known only by
// its points).
bool IsRunStatus(std::string_view status);

}  // namespace uplink::console
