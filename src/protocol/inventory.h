// POST /api/v1/agent/inventory (docs/protocol.md): the inventory role's report of the selected
// nodes and their GPU resources, and the console's reply. Read strictly: every field is type-
// and size-checked, unknown fields are refused, and the limits bound what one report can make
// the console store; the agent keeps each node within them (a node outside them is reported
// with an error instead).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json_fwd.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::protocol {

inline constexpr size_t kMaxReportBytes = 16 << 20;  // decompressed
inline constexpr size_t kMaxReportDepth = 16;
inline constexpr size_t kMaxReportNodes = 20'000;
// Resources plus taints over all nodes of one report: each is a row the console inserts in the
// report's transaction, so this bounds how long one report holds its store.
inline constexpr size_t kMaxReportRows = 100'000;
// Per node.
inline constexpr size_t kMaxNodeNameBytes = 253;  // a Kubernetes object or resource name
inline constexpr size_t kMaxNodeUidBytes = 128;
inline constexpr size_t kMaxInventoryTextBytes = 256;  // versions, products, taint parts
inline constexpr size_t kMaxSelectorBytes = 4096;
inline constexpr size_t kMaxNodeErrorBytes = 1024;
inline constexpr size_t kMaxResourcesPerNode = 64;
inline constexpr size_t kMaxTaintsPerNode = 64;
inline constexpr std::int64_t kMaxGpuCount = 1'000'000;

struct GpuResource {
  std::string name;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", ...
  std::int64_t capacity = 0;
  std::int64_t allocatable = 0;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;
};

struct InventoryNode {
  std::string name;
  std::string uid;
  bool ready = false;
  bool unschedulable = false;
  std::string gpu_resource;  // the main GPU resource; "" when the node has none
  std::int64_t gpu_capacity = 0;
  std::int64_t gpu_allocatable = 0;
  std::string gpu_product;
  std::vector<GpuResource> resources;  // distinct names
  std::vector<Taint> taints;
  std::optional<std::string> error;  // the agent could not read this node's data
};

struct InventoryReport {
  std::string agent_version;
  std::string agent_instance;  // the reporting pod's name, optional
  std::string cluster_uid;
  std::string selector;
  std::optional<WallTime> collected_at;
  std::vector<InventoryNode> nodes;
};

json::object EncodeInventoryNode(const InventoryNode& node);
json::object EncodeInventoryReport(const InventoryReport& report);
// InvalidArgument naming the field by its path ("nodes[3].gpu_capacity ...").
Result<InventoryReport> DecodeInventoryReport(const json::value& body);

// The console's reply to an accepted report.
struct InventoryReply {
  bool accepted = false;  // the console stored the report: only ever true in a 200 reply
  std::string connection_id;
  std::optional<std::int64_t> report_interval_seconds;  // when the next report is due
  std::optional<WallTime> expires_at;                   // the connection token's expiry
};

json::object EncodeInventoryReply(const InventoryReply& reply);
// Read leniently (the agent acts only on what it understands): accepted is true only for the
// JSON value true; a report_interval_seconds that is any number is taken, truncated to whole
// seconds (the agent bounds it); expires_at when it is an RFC 3339 time.
InventoryReply DecodeInventoryReply(const json::value& body);

}  // namespace uplink::protocol
