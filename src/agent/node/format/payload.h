// A NodeSample as the compact JSON of docs/protocol.md, "Node samples": the record the node
// role ships to the console every cycle.
#pragma once

#include <cstddef>
#include <string>

#include "agent/node/sample.h"
#include "protocol/node_sample.h"

namespace uplink::agent::node {

// Within the protocol's bounds (protocol/node_sample.h): entries past a cap are left out and a
// gap says how many; strings are cut to their bound. Always valid JSON: strings from the host are
// made valid UTF-8, escaped and cut to their bound; a number that is not finite is left out with
// its key. A section is present when its figures are: the vector sections (network, disks,
// filesystems) are written when their collector was asked for, unless they are empty because a gap
// names that collector.
std::string RenderPayload(const NodeSample& sample);

}  // namespace uplink::agent::node
