// A NodeSample as the compact JSON of docs/protocol.md, "Node samples": the record the node
// role ships to the console every cycle.
#pragma once

#include <cstddef>
#include <string>

#include "agent/node/sample.h"

namespace uplink::agent::node {

// The protocol's bounds. Entries past a cap are left out and a gap says how many.
inline constexpr std::size_t kPayloadMaxNetwork = 1024;
inline constexpr std::size_t kPayloadMaxDisks = 1024;
inline constexpr std::size_t kPayloadMaxFilesystems = 1024;
inline constexpr std::size_t kPayloadMaxGpus = 64;
inline constexpr std::size_t kPayloadMaxGaps = 256;
inline constexpr std::size_t kPayloadMaxString = 253;
inline constexpr std::size_t kPayloadMaxPath = 4096;  // mount points, their devices, gap paths

// Always valid JSON: strings from the host are made valid UTF-8, escaped and cut to their
// bound; a number that is not finite is left out with its key. A section is present when its
// figures are: the vector sections (network, disks, filesystems) are written when their
// collector was asked for, unless they are empty because a gap names that collector.
std::string RenderPayload(const NodeSample& sample);

}  // namespace uplink::agent::node
