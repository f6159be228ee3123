// Building the inventory report (docs/protocol.md, POST /api/v1/agent/inventory) from Node
// objects. One node that cannot be read becomes an entry with `error`; it never fails the
// report.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fwd.h"
#include "common/time.h"
#include "protocol/inventory.h"

namespace uplink::agent::inventory {

// True for the resources the report carries: nvidia.com/gpu, amd.com/gpu, nvidia.com/mig-*.
bool IsGpuResource(std::string_view name);

// One node's entry of the report; when something could not be read or is outside the
// protocol's per-node bounds, with `error` (and every GPU count zero). The entry itself always
// stays within those bounds, so the console never refuses a report over it.
protocol::InventoryNode DescribeNode(const json::value& node);

// a + b, held at the int64 limits instead of overflowing (for totals over many nodes).
std::int64_t SaturatingAdd(std::int64_t a, std::int64_t b);

struct ReportSummary {
  std::int64_t nodes = 0;
  std::int64_t nodes_with_errors = 0;
  std::int64_t gpus = 0;  // sum of gpu_capacity over readable nodes (saturating)
};

struct Report {
  protocol::InventoryReport message;  // protocol::EncodeInventoryReport makes the body
  ReportSummary summary;
};

// Builds a report node by node, so a listing can be described page by page without keeping
// the (much larger) Node objects around.
class ReportBuilder {
 public:
  void Add(const json::value& node);
  void Clear();
  Report Finish(std::string_view cluster_uid, std::string_view selector, WallTime collected_at) &&;

 private:
  std::vector<protocol::InventoryNode> entries_;
  ReportSummary summary_;
};

Report BuildReport(std::string_view cluster_uid, std::string_view selector, WallTime collected_at,
                   const std::vector<json::value>& nodes);

}  // namespace uplink::agent::inventory
