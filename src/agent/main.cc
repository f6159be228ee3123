// uplink-agent: the in-cluster agent, one binary for every role. Each command's code is in its
// role's folder: `uplink-agent inventory [flags]` reports the selected GPU nodes to the console
// over outbound HTTPS (src/agent/inventory/command.cc); `uplink-agent node [flags]` collects
// the node's figures (src/agent/node/command.cc); `uplink-agent cluster [flags]` runs the
// console's read-only kubectl commands and collects its plan (src/agent/cluster/command.cc);
// `uplink-agent experiments [flags]` reports ML experiment runs from MLflow and W&B
// (src/agent/experiments/command.cc); `uplink-agent workspace [drain]` runs reserved GPU
// workspaces (src/agent/workspace/command.cc); `uplink-agent spool COMMAND` inspects, fills and
// ships a durable upload spool (src/agent/spool/command.cc); `uplink-agent check-kubectl` says
// what the read-only kubectl guard would do with each argv on stdin
// (src/agent/cluster/check_command.cc).
#include <string>
#include <vector>

#include "agent/cluster/check_command.h"
#include "agent/cluster/command.h"
#include "agent/command_support.h"
#include "agent/experiments/command.h"
#include "agent/inventory/command.h"
#include "agent/node/command.h"
#include "agent/spool/command.h"
#include "agent/workspace/command.h"
#include "common/text.h"

namespace {

using namespace uplink;
using agent::kExitUsage;
using agent::WriteStderr;
using agent::WriteStdout;

const char kUsage[] =
    "usage: uplink-agent ROLE [flags]\n"
    "       uplink-agent spool COMMAND --state-dir DIR [flags]\n"
    "       uplink-agent check-kubectl < LINES\n"
    "\n"
    "roles:\n"
    "  inventory     report the selected GPU nodes to the console\n"
    "  node          collect the node's CPU, memory, disk, network and GPU figures: ship\n"
    "                them to the console, serve them as a Prometheus exporter, or print\n"
    "                one collection (--once)\n"
    "  cluster       run the read-only kubectl commands the console sends, and collect its\n"
    "                plan (nodes, pods, warning events, ...) for the console\n"
    "  experiments   report ML experiment runs (MLflow, Weights & Biases) to the console:\n"
    "                only what changed since the last scan\n"
    "  workspace     run the reserved GPU workspaces of a qualified offer as isolated pods, and\n"
    "                the console's commands in them; 'workspace drain' deletes every one\n"
    "\n"
    "spool commands (the durable upload spool in DIR; one process at a time):\n"
    "  spool stat    print the spool's counts as one JSON object\n"
    "  spool dump    print the waiting records in order as JSON lines, without consuming them\n"
    "  spool append  append one record per line of stdin; print each record's sequence number\n"
    "                once it is durable\n"
    "  spool ship    deliver the spool's records to the console until SIGTERM\n"
    "\n"
    "other commands:\n"
    "  --version     print the agent's version\n"
    "  check-kubectl read one JSON argv array per line on stdin ([\"kubectl\", \"get\", ...]);\n"
    "                print 'allow' or 'refuse: REASON' for each: what the agent's read-only\n"
    "                kubectl would run\n"
    "\n"
    "'uplink-agent spool COMMAND --help' lists a command's flags.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args.front() == "-h" || args.front() == "--help" || args.front() == "help") {
    (void)WriteStderr(kUsage);
    return args.empty() ? kExitUsage : 0;
  }
  std::string role = args.front();
  args.erase(args.begin());
  // The image build and `make images` check the binary runs in its image with this.
  if (role == "--version" || role == "version") {
    (void)WriteStdout("uplink-agent " UPLINK_VERSION "\n");
    return 0;
  }
  if (role == "inventory") return agent::inventory::RunInventoryCommand(args);
  if (role == "node") return agent::node::RunNodeCommand(args);
  if (role == "cluster") return agent::cluster::RunClusterCommand(args);
  if (role == "experiments") return agent::experiments::RunExperimentsCommand(args);
  if (role == "workspace") return agent::workspace::RunWorkspaceCommand(args);
  if (role == "spool") return agent::RunSpoolCommand(args, kUsage);
  if (role == "check-kubectl") return agent::cluster::RunCheckKubectlCommand(args);
  (void)WriteStderr("uplink-agent: unknown role '" + OneLineExcerpt(role, 64) + "'\n" + kUsage);
  return kExitUsage;
}
