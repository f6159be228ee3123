// `uplink-agent check-kubectl`: what the agent would run. Reads one JSON argv array per line
// on stdin (["kubectl", "get", "pods"]) and prints, for each line in order, `allow` or
// `refuse: REASON`, the reason being the guard's. A line that is not a JSON array of strings,
// or is longer than kMaxLineBytes, is refused with why, and the next line is read.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace uplink::agent::cluster {

// 64 arguments of 4 KiB, each byte escaped as \uXXXX, fit with room to spare.
inline constexpr size_t kMaxLineBytes = 2 << 20;

// Checks every line of `in`, answering on the file descriptor `out_fd`. Returns the exit code:
// 0 once all lines are answered (whatever the answers), 1 when `out_fd` cannot be written.
int CheckKubectlLines(std::FILE* in, int out_fd);

// The command: no flags but --help. Returns the exit code.
int RunCheckKubectlCommand(const std::vector<std::string>& args);

}  // namespace uplink::agent::cluster
