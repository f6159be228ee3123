// The workspace controller's execution configuration (docs/chart.md, "Workspace execution"):
// `{"execution": {...}}`, the file the console hands the supplier for Helm (execution.json)
// and the chart mounts into the controller. Read strictly: a value the controller would act
// on wrongly is refused with the field's name, never guessed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace uplink::agent::workspace {

inline constexpr std::int64_t kMaxCapacityGpus = 4096;
inline constexpr std::int64_t kMaxLifetimeSeconds = 30ll * 24 * 3600;
inline constexpr size_t kMaxApprovedNodes = 1024;
inline constexpr size_t kMaxConfigBytes = 256 * 1024;

struct ExecutionConfig {
  bool enabled = false;
  std::string ns;                  // the dedicated workload namespace
  std::string workspace_image;     // REPOSITORY@sha256:<64 hex>, never a tag
  std::int64_t capacity_gpus = 0;  // at most this many GPUs in use at once
  std::int64_t max_lifetime_seconds = 0;
  std::vector<std::string> nodes;  // the approved nodes
  bool ssh_enabled = false;
  // Optional pod settings.
  std::string runtime_class_name;  // empty: none
  bool host_users = true;          // false: the pod sets hostUsers: false (a user namespace)
  // The guards' names, as the chart makes them.
  std::string priority_class_name = "uplink-workspace";
  std::string admission_policy_name = "uplink-workspace";
  // /tmp's size limit (an emptyDir); the rest of the reservation's ephemeral storage is the
  // scratch volume.
  std::int64_t tmp_size_bytes = 1ll << 30;
  // Keys the controller does not use (the cluster reference, the network values the chart
  // reads, ...): logged, not refused, so that a newer console's file still loads.
  std::vector<std::string> ignored_keys;

  bool IsApprovedNode(std::string_view node) const;
};

// Parses execution.json's text. InvalidArgument naming the field for anything it cannot use.
Result<ExecutionConfig> ParseExecutionConfig(std::string_view text);

// Reads and parses the file (at most kMaxConfigBytes).
Result<ExecutionConfig> LoadExecutionConfig(const std::string& path);

// True for "REPOSITORY@sha256:" and 64 lower-case hexadecimal digits.
bool IsPinnedImage(std::string_view image);

}  // namespace uplink::agent::workspace
