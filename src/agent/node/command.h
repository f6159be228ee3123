// `uplink-agent node`: the node role's command line (docs/cli.md has its flags).
#pragma once

#include <string>
#include <vector>

namespace uplink::agent::node {

// Runs the node role as the flags say: one collection printed (--once), a standalone exporter
// (no --console), or collecting into a spool that is shipped to the console. Returns the exit
// code.
int RunNodeCommand(const std::vector<std::string>& args);

}  // namespace uplink::agent::node
