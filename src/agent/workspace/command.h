// `uplink-agent workspace` (the controller) and `uplink-agent workspace drain`: the command
// lines (docs/cli.md has their flags).
#pragma once

#include <string>
#include <vector>

namespace uplink::agent::workspace {

// Runs the controller, or drains the namespace when args start with "drain". Returns the exit
// code.
int RunWorkspaceCommand(const std::vector<std::string>& args);

}  // namespace uplink::agent::workspace
