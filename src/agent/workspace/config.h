// The workspace controller's execution configuration (docs/chart.md, "Workspace execution"):
// `{"execution": {...}}`, the values the console writes for the supplier (execution.json,
// read by protocol::DecodeExecutionValues) plus the settings only the chart and the
// controller know (the guards' names, a runtime class, user namespaces, /tmp's size).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "protocol/workspace.h"

namespace uplink::agent::workspace {

inline constexpr size_t kMaxConfigBytes = protocol::kMaxExecutionValuesBytes;

struct ExecutionConfig : protocol::ExecutionValues {
  // Optional pod settings.
  std::string runtime_class_name;  // empty: none
  bool host_users = true;          // false: the pod sets hostUsers: false (a user namespace)
  // The guards' names, as the chart makes them.
  std::string priority_class_name = "uplink-workspace";
  std::string admission_policy_name = "uplink-workspace";
  // /tmp's size limit (an emptyDir); the rest of the reservation's ephemeral storage is the
  // scratch volume.
  std::int64_t tmp_size_bytes = 1ll << 30;
  // Keys neither the console's values nor the controller know: logged, not refused, so that
  // a newer console's file still loads (and a typo is seen in the log).
  std::vector<std::string> ignored_keys;

  bool IsApprovedNode(std::string_view node) const;
};

// Parses execution.json's text. InvalidArgument naming the field for anything it cannot use.
Result<ExecutionConfig> ParseExecutionConfig(std::string_view text);

// Reads and parses the file (at most kMaxConfigBytes).
Result<ExecutionConfig> LoadExecutionConfig(const std::string& path);

}  // namespace uplink::agent::workspace
