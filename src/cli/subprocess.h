// Running a helper program (kubectl) without a shell: argv is passed as is, the input goes
// to its stdin through a pipe, stdout and stderr are captured, and a timeout bounds it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace uplink::cli {

struct ProcessResult {
  int exit_code = -1;  // -N when killed by signal N
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with `input` on its stdin, closed after it. The child's environment
// is ours without UPLINK_API_KEY: helpers never need the console credential. Each output is
// kept up to `max_output` bytes (the rest is read and dropped). NotFound when argv[0] cannot
// be executed; DeadlineExceeded (after a SIGKILL) when it runs past `timeout`.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, std::string_view input,
                                 std::chrono::milliseconds timeout, size_t max_output = 1 << 20);

// The first executable file called `name` in the colon-separated `path_list` ($PATH).
std::optional<std::string> FindOnPath(std::string_view name, std::string_view path_list);

}  // namespace uplink::cli
