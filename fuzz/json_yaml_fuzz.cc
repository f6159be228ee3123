// Every HTTP body and every kubeconfig or objects file passes through these parsers.
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "common/yaml.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto value = uplink::ParseJson(text);
  if (value.ok()) {
    // Serialising and parsing again gives the same document.
    auto again = uplink::ParseJson(uplink::ToJson(*value));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(*again == *value);
  }
  if (size <= 64 * 1024) (void)uplink::ParseYamlDocuments(text);
  return 0;
}
