// The `uplink` command: people and scripts manage sessions, connections (cluster agent
// tokens), users, API keys and the audit log through the console's user API (docs/api.md).
// docs/cli.md describes every command and the exit codes.
//
// Credentials never come from the command line (argv is visible to every user through
// /proc): API keys come from --api-key-file, UPLINK_API_KEY or the credentials file that
// `uplink login` writes; passwords and handover codes are asked on the terminal without echo
// or read from stdin. A new agent token or API key is printed once, or written to a new 0600
// file, or (install) handed to kubectl on its stdin.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "cli/terminal.h"
#include "common/flags.h"
#include "common/time.h"

namespace uplink::cli {

struct Streams {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
  // The same standard input and output as file descriptors, for `uplink ssh proxy`, which must
  // pass on bytes as they come (an istream waits to fill its buffer).
  int in_fd = 0;
  int out_fd = 1;
};

// Runs one command line (without the program name) and returns the exit code
// (cli/exit_codes.h). Help goes to `out`; every error is one line on `err` that says what
// to do.
int Run(const std::vector<std::string>& args, const EnvLookup& env, const Streams& streams,
        Terminal& terminal, const Clock& clock = SystemClock());

}  // namespace uplink::cli
