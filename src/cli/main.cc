#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return uplink::cli::Run(args, uplink::ProcessEnv(), std::cout, std::cerr);
}
