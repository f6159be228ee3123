// A NodeSample as Prometheus text (exposition format 0.0.4), under the names dashboards
// already use: node_exporter 1.5's for the host (same names, labels, units and types) and
// dcgm-exporter's for the GPUs. A figure the sample lacks is left out, never sent as zero.
//
// Where the two exporters would disagree with the sample's shape:
// - node_cpu_seconds_total has a series per CPU line of /proc/stat; node_exporter 1.5 also
//   invents all-zero series for offline CPUs below the highest online one.
// - node_boot_time_seconds is btime; without the cpu collector it is derived from the
//   collection time minus /proc/uptime (node_exporter has no uptime metric).
// - node_time_seconds is the collection's start.
// - DCGM_FI_DEV_FB_FREE is total minus used memory (DCGM also subtracts reserved memory).
//
// The node role's own families:
//   uplink_node_collector_up{collector}  1 when the collector read every source it reads this
//                                        cycle, 0 when at least one gap names it
//   uplink_node_scrape_error_info{source,path,errno,error}  1 per gap
#pragma once

#include <string>

#include "agent/node/sample.h"

namespace uplink::agent::node {

// Appends to `out`, so one buffer can serve every scrape.
void RenderPrometheus(const NodeSample& sample, std::string& out);

}  // namespace uplink::agent::node
