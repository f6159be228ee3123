// The SSH relay's control messages come from the other end of a tunnel: the console decodes
// the controller's, the controller the console's. Any bytes reach both decoders.
#include <cstdint>
#include <string_view>
#include <variant>

#include "fuzz_check.h"
#include "protocol/ssh.h"

using namespace uplink::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // What is accepted is within the limits, and encodes back to a message that decodes alike.
  if (auto agent = DecodeSshAgentMessage(text); agent.ok()) {
    if (const auto* capability = std::get_if<SshCapability>(&*agent)) {
      FUZZ_CHECK(IsAuthorizedKeyLine(capability->host_key));
      FUZZ_CHECK(capability->sshd.size() <= kMaxSshdVersionBytes);
      auto again = DecodeSshAgentMessage(EncodeSshCapability(*capability));
      FUZZ_CHECK(again.ok() && std::get<SshCapability>(*again).host_key == capability->host_key);
    } else if (const auto* failed = std::get_if<SshOpenFailed>(&*agent)) {
      FUZZ_CHECK(IsSshChannelId(failed->channel));
      FUZZ_CHECK(DecodeSshAgentMessage(EncodeSshOpenFailed(*failed)).ok());
    }
  }
  if (auto console = DecodeSshConsoleMessage(text); console.ok()) {
    if (const auto* open = std::get_if<SshOpen>(&*console)) {
      FUZZ_CHECK(IsSshChannelId(open->channel) && IsChannelCredentialShape(open->credential));
      FUZZ_CHECK(open->authorized_keys.size() <= kMaxAuthorizedKeys);
      for (const auto& line : open->authorized_keys) FUZZ_CHECK(IsAuthorizedKeyLine(line));
      auto again = DecodeSshConsoleMessage(EncodeSshOpen(*open));
      FUZZ_CHECK(again.ok() && std::get<SshOpen>(*again).authorized_keys == open->authorized_keys);
    } else if (const auto* keys = std::get_if<SshKeys>(&*console)) {
      for (const auto& line : keys->authorized_keys) FUZZ_CHECK(IsAuthorizedKeyLine(line));
      FUZZ_CHECK(DecodeSshConsoleMessage(EncodeSshKeys(*keys)).ok());
    }
  }
  return 0;
}
