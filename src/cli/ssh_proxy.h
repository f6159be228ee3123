// The byte pump of `uplink ssh proxy`: ssh's connection on two file descriptors (the
// ProxyCommand's stdin and stdout) to and from the console's client channel, a WebSocket whose
// binary messages are the SSH stream (docs/protocol.md, "SSH relay").
//
// Flow control as on every hop of the relay: each direction has at most one message in flight.
// Input is read in pieces of at most kSshDataMessageMaxBytes, each written to the WebSocket
// (which returns once the kernel took it) before the next read; a message is written to the
// output in full before the next is read. A slow ssh or a slow console slows the other side
// instead of filling memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "net/websocket.h"

namespace uplink::cli {

// How the pump ended.
struct SshPumpResult {
  enum class End {
    kInputClosed,   // ssh closed our stdin: we closed the channel (1000)
    kOutputClosed,  // ssh stopped reading our stdout: we closed the channel (1000)
    kPeerClosed,    // the console closed the channel: close_code and reason say why
    kFailed,        // the connection broke: error says how
  };
  End end = End::kFailed;
  std::uint16_t close_code = 0;
  std::string reason;  // the console's close reason, as sent
  Status error;
};

// Pumps until one side ends; never writes anything but the channel's bytes to `out_fd`.
// Blocks; uses one extra thread for the input direction.
SshPumpResult PumpSshChannel(net::WebSocket& channel, int in_fd, int out_fd,
                             size_t max_message_bytes);

}  // namespace uplink::cli
