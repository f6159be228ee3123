// `uplink-agent experiments`: the experiments role's command line (docs/experiments.md).
#pragma once

#include <string>
#include <vector>

namespace uplink::agent::experiments {

// Scans the MLflow and W&B places it is given and ships what changed through a spool; with
// --once, one scan (printed as JSON lines without --console). Returns the exit code.
int RunExperimentsCommand(const std::vector<std::string>& args);

}  // namespace uplink::agent::experiments
