#include "agent/cluster/check_command.h"

#include <cstdio>

#include "agent/command_support.h"
#include "common/json.h"
#include "common/text.h"
#include "kubectl/guard.h"

namespace uplink::agent::cluster {
namespace {

constexpr char kUsage[] =
    "usage: uplink-agent check-kubectl < LINES\n"
    "\n"
    "Reads one JSON array per line on stdin, a kubectl command line starting with \"kubectl\"\n"
    "(for example [\"kubectl\", \"get\", \"pods\", \"-n\", \"ml\"]), and prints for each line, in\n"
    "order, 'allow' or 'refuse: REASON': what the agent's read-only kubectl would do.\n";

std::string Answer(std::string_view line) {
  auto parsed = ParseJson(line, JsonLimits{.max_bytes = kMaxLineBytes, .max_depth = 4});
  if (!parsed.ok()) return "refuse: not JSON: " + OneLineExcerpt(parsed.status().message(), 120);
  if (!parsed->is_array()) return "refuse: not a JSON array of strings";
  const json::array& items = parsed->as_array();
  if (items.size() > kubectl::kMaxArguments) {
    return "refuse: more than " + std::to_string(kubectl::kMaxArguments) + " arguments";
  }
  std::vector<std::string> argv;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return "refuse: element " + std::to_string(i) + " is not a string";
    }
    argv.emplace_back(items[i].as_string());
  }
  auto command = kubectl::CheckKubectlArgv(argv);
  if (!command.ok()) return "refuse: " + command.status().message();
  return "allow";
}

}  // namespace

int CheckKubectlLines(std::FILE* in, int out_fd) {
  std::string line;
  while (true) {
    const LineRead read = ReadLine(in, line, kMaxLineBytes);
    if (read == LineRead::kEnd) break;
    if (read == LineRead::kTooLong) SkipLine(in);
    // Answered unbuffered, as they come, so a pipe can ask one line at a time.
    const std::string answer =
        read == LineRead::kTooLong
            ? "refuse: the line is longer than " + std::to_string(kMaxLineBytes) + " bytes\n"
            : Answer(line) + "\n";
    if (!WriteFd(out_fd, answer)) return 1;
  }
  return 0;
}

int RunCheckKubectlCommand(const std::vector<std::string>& args) {
  if (!args.empty()) {
    if (args.front() == "-h" || args.front() == "--help") {
      return WriteStdout(kUsage) ? 0 : 1;
    }
    return Fail("check-kubectl takes no arguments, not '" + OneLineExcerpt(args.front(), 64) +
                    "'\n" + kUsage,
                kExitUsage);
  }
  if (CheckKubectlLines(stdin, STDOUT_FILENO) != 0) return Fail("writing to stdout failed");
  return 0;
}

}  // namespace uplink::agent::cluster
