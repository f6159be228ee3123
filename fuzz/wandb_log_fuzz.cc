// W&B transaction logs are files on a node that anyone who can run a training job writes:
// whatever bytes a log holds, the decoder must not crash, must never point past the data it
// was given, and, on an undamaged log, must give the same records when it reads the log in
// two pieces (as it does while the log grows) as when it reads it whole.
#include <cstdint>
#include <string_view>

#include "agent/experiments/wandb_log.h"
#include "fuzz_check.h"

using uplink::agent::experiments::DecodeWandbLog;
using uplink::agent::experiments::WandbHistoryRow;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto whole = DecodeWandbLog(bytes, 0);
  if (!whole.ok()) return 0;  // not a W&B header
  FUZZ_CHECK(whole->next_offset >= 0);
  FUZZ_CHECK(static_cast<size_t>(whole->next_offset) <= size);
  for (const WandbHistoryRow& row : whole->history) {
    FUZZ_CHECK(row.end_offset <= whole->next_offset);
  }
  if (whole->damaged_chunks > 0 || whole->damaged_records > 0) return 0;

  auto first = DecodeWandbLog(bytes.substr(0, size / 2 + 7), 0);
  FUZZ_CHECK(first.ok());
  FUZZ_CHECK(static_cast<size_t>(first->next_offset) <= size / 2 + 7);
  auto rest = DecodeWandbLog(bytes.substr(static_cast<size_t>(first->next_offset)),
                             first->next_offset);
  FUZZ_CHECK(rest.ok());
  FUZZ_CHECK(first->records + rest->records == whole->records);
  FUZZ_CHECK(first->history.size() + rest->history.size() == whole->history.size());
  FUZZ_CHECK(rest->next_offset == whole->next_offset);
  return 0;
}
