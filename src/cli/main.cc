#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto terminal = uplink::cli::OpenTerminal();
  return uplink::cli::Run(args, uplink::ProcessEnv(), {std::cin, std::cout, std::cerr}, *terminal);
}
