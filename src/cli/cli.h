// The `uplink` command: a user's scripts and terminal talk to the console's user API.
//
// The API key comes from UPLINK_API_KEY or --api-key-file, never from argv (argv is visible
// to every user of the machine through /proc). A new agent token is printed once, or written
// to a 0600 file with --token-out so it never reaches the terminal.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "common/flags.h"

namespace uplink::cli {

// Runs one command line (without the program name); returns the process exit code:
// 0 success, 1 the console refused or failed, 2 usage error.
int Run(const std::vector<std::string>& args, const EnvLookup& env, std::ostream& out,
        std::ostream& err);

}  // namespace uplink::cli
