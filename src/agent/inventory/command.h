// `uplink-agent inventory`: the inventory role's command line (docs/cli.md has its flags).
#pragma once

#include <string>
#include <vector>

namespace uplink::agent::inventory {

// Runs the inventory role as the flags say: one report (--once), or a report every interval
// until SIGTERM. Returns the exit code.
int RunInventoryCommand(const std::vector<std::string>& args);

}  // namespace uplink::agent::inventory
