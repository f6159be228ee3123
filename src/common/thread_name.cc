#include "common/thread_name.h"

#include <pthread.h>

namespace uplink {

namespace {
// The kernel's TASK_COMM_LEN, less the terminating NUL.
constexpr size_t kMaxNameBytes = 15;
}  // namespace

void NameThisThread(std::string_view name) {
  const std::string kept(name.substr(0, kMaxNameBytes));
  // Fails only for a name over the limit, which was cut above: nothing to report.
  (void)pthread_setname_np(pthread_self(), kept.c_str());
}

std::string ThisThreadName() {
  char name[kMaxNameBytes + 1] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) return "";
  return name;
}

}  // namespace uplink
