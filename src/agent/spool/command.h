// `uplink-agent spool COMMAND`: inspect, fill and ship a durable upload spool (docs/cli.md
// has their flags).
#pragma once

#include <string>
#include <string_view>
#include <vector>

// In uplink::agent rather than a namespace of its own: agent::spool would hide uplink::spool.
namespace uplink::agent {

// Runs `spool stat`, `dump`, `append` or `ship`, named by the first argument. `agent_usage`
// is the agent's usage, printed when the command is missing or unknown. Returns the exit code.
int RunSpoolCommand(const std::vector<std::string>& args, std::string_view agent_usage);

}  // namespace uplink::agent
