// Label selectors come from flags and (in kubesim) from request URLs.
#include <cstdint>
#include <string_view>

#include "common/labels.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto selector = uplink::labels::Selector::Parse(text);
  if (!selector.ok()) return 0;
  // The canonical form parses back to the same requirements.
  auto again = uplink::labels::Selector::Parse(selector->ToString());
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->requirements() == selector->requirements());
  uplink::labels::LabelMap labels{{"nvidia.com/gpu.present", "true"}, {"a", "1"}};
  (void)selector->Matches(labels);
  return 0;
}
