// Names for the threads a process keeps, so that `top -H`, `ps -L`, perf and a debugger show
// which one is busy (docs/architecture.md, "Threads", names each).
#pragma once

#include <string>
#include <string_view>

namespace uplink {

// Names the calling thread. Linux keeps 15 bytes of a name: a longer one is cut there.
void NameThisThread(std::string_view name);

// The calling thread's name as the kernel keeps it.
std::string ThisThreadName();

}  // namespace uplink
