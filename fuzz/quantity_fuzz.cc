// Kubernetes quantities come from node objects the agent does not control.
#include <cstdint>
#include <string_view>

#include "common/quantity.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto quantity = uplink::Quantity::Parse(text);
  if (!quantity.ok()) return 0;
  FUZZ_CHECK(text.size() <= uplink::Quantity::kMaxLength);
  auto milli = quantity->MilliValue();
  auto whole = quantity->WholeCount();
  // A whole count, when there is one, agrees with the milli-value.
  if (whole.ok() && milli.ok()) FUZZ_CHECK(*milli == *whole * 1000);
  return 0;
}
