// The body of POST /api/v1/agent/inventory (docs/protocol.md), read strictly: every field
// is type- and size-checked, unknown fields are refused, and limits bound what one report
// can make the console store.
#pragma once

#include <cstddef>

#include "common/json.h"
#include "common/status.h"
#include "console/store/store.h"

namespace uplink::console {

inline constexpr size_t kMaxReportBytes = 16 << 20;  // decompressed
inline constexpr size_t kMaxReportNodes = 20'000;
// Resources plus taints over all nodes of one report: each is a row the store inserts in the
// report's transaction, so this bounds how long one report holds the store.
inline constexpr size_t kMaxReportRows = 100'000;

Result<InventoryReport> ParseInventoryReport(const json::value& body);

}  // namespace uplink::console
