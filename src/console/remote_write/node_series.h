// A node sample (docs/protocol.md, "Node samples") as Prometheus series under node_exporter's
// and dcgm-exporter's names, labels and units (docs/node.md, "Output"), so that dashboards
// made for those exporters chart forwarded samples unchanged.
//
// Every series also carries where the sample came from: `job="uplink"`, `instance` (the
// node's name, as a scrape of the node would name its target), `cluster` (the connection's
// cluster name) and `uplink_connection` (its id: two clusters may have nodes of one name).
#pragma once

#include <cstddef>
#include <string_view>

#include "common/json_fwd.h"
#include "common/status.h"
#include "console/remote_write/write_request.h"

namespace uplink::console::remote_write {

struct SampleOrigin {
  std::string_view connection_id;
  std::string_view cluster_name;
};

// Appends the series of `payload`, a node sample the console accepted (so read leniently: a
// figure that is absent or not a number is left out, as the exporters leave out what they
// cannot read), each with one sample at the sample's `collected_at`. Returns how many;
// InvalidArgument when the payload has no valid `node` or `collected_at`.
Result<size_t> AppendNodeSampleSeries(const json::object& payload, const SampleOrigin& origin,
                                      WriteRequestBuilder& out);

}  // namespace uplink::console::remote_write
