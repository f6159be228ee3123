// SSH grant keys are pasted by users: any bytes reach the parser.
#include <cstdint>
#include <string_view>

#include "common/crypto.h"
#include "protocol/ssh_public_key.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto key = uplink::protocol::ParseSshPublicKey(text);
  if (!key.ok()) return 0;
  // What is accepted is bounded, and its canonical form parses back to the same key.
  FUZZ_CHECK(text.size() <= uplink::protocol::kMaxSshPublicKeyLineBytes + 2);  // + "\r\n"
  FUZZ_CHECK(key->comment.size() <= uplink::protocol::kMaxSshKeyCommentBytes);
  auto again = uplink::protocol::ParseSshPublicKey(key->Authorized());
  FUZZ_CHECK(again.ok() && again->blob == key->blob && again->type == key->type &&
             again->fingerprint == key->fingerprint);
  return 0;
}
