// `uplink-agent cluster`: the cluster role's command line (docs/cli.md has its flags).
#pragma once

#include <string>
#include <vector>

namespace uplink::agent::cluster {

// Runs the cluster role: collects the console's plan into a spool that is shipped to the
// console, and runs the kubectl commands the console hands out. Returns the exit code.
int RunClusterCommand(const std::vector<std::string>& args);

}  // namespace uplink::agent::cluster
