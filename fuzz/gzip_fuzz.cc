// Upload bodies arrive gzip-compressed from agents.
#include <cstdint>
#include <string_view>

#include "common/gzip.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  constexpr size_t kLimit = 1 << 20;
  auto inflated = uplink::GzipDecompress(bytes, kLimit);
  if (inflated.ok()) FUZZ_CHECK(inflated->size() <= kLimit);
  // Compression round-trips whatever it is given.
  auto compressed = uplink::GzipCompress(bytes);
  FUZZ_CHECK(compressed.ok());
  auto back = uplink::GzipDecompress(*compressed, size + 1);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == bytes);
  return 0;
}
