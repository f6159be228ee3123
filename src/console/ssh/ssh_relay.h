// The SSH relay (docs/architecture.md, "SSH relay"; docs/protocol.md, "SSH relay"): where a
// user's SSH channel meets the workspace controller's data channel, over the controller's one
// control tunnel per offer.
//
// SshRelay is the seam for running several console replicas: a client's channel must reach
// the replica that holds the agent's tunnel. LocalSshRelay (local_ssh_relay.h) is the
// in-process implementation, for one replica; a multi-replica one would forward a channel to
// the replica named by a shared tunnel directory behind this same interface.
//
// The endpoints (console/api/ssh_api.h) authenticate callers and check readiness; the relay
// owns tunnels, channels, the chn_ credentials, limits and the transfer metering. Each Serve*
// call runs on the WebSocket's own handler thread until that WebSocket ends.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/secret.h"
#include "common/status.h"
#include "console/store/workspace_store.h"
#include "net/websocket.h"

namespace uplink::console {

// A client channel the endpoint admitted, to be served once its WebSocket is upgraded.
struct SshClientChannel {
  std::string channel_id;
};

// What the relay knows of one reservation, for readiness.
struct SshRelayView {
  bool tunnel_connected = false;  // the reservation's offer has a tunnel here
  std::int64_t open_channels = 0;  // session channels waiting or open
  // The fingerprint of a host key reported that is not the pinned one ("" when none).
  std::string refused_host_key_fingerprint;
};

class SshRelay {
 public:
  virtual ~SshRelay() = default;

  // The controller's control tunnel for `offer`, authenticated by the endpoint: served on the
  // calling thread until it ends. A newer tunnel of the same offer replaces this one.
  virtual void ServeTunnel(const Offer& offer, std::unique_ptr<net::WebSocket> socket) = 0;

  // Admits a session channel of `grant` into `reservation` (both checked valid by the
  // caller): ResourceExhausted when the grant has its limit of channels, FailedPrecondition
  // when the transfer budget is used up, Unavailable when the offer has no tunnel here.
  virtual Result<SshClientChannel> AdmitClient(const Reservation& reservation,
                                               const SshGrant& grant) = 0;
  // The admitted channel's client WebSocket: sends `open`, waits for the agent's data channel
  // and relays until either side ends.
  virtual void ServeClient(const std::string& channel_id,
                           std::unique_ptr<net::WebSocket> socket) = 0;

  // Checks a data channel's credential: Unauthenticated unless it is `channel_id`'s, unused
  // and younger than protocol::kChannelCredentialLifetime. It is used up by the check.
  virtual Status ClaimAgentChannel(const std::string& channel_id, const Secret& credential) = 0;
  // The claimed channel's agent WebSocket: relays until either side ends.
  virtual void ServeAgentChannel(const std::string& channel_id,
                                 std::unique_ptr<net::WebSocket> socket) = 0;

  // The reservation's grants changed: tells its controller the keys valid now (`keys`).
  virtual void GrantsChanged(const std::string& reservation_id) = 0;

  // The reservation was stopped: its open session channels close now, with the reason.
  virtual void ReservationEnded(const std::string& reservation_id) = 0;

  virtual SshRelayView View(const Reservation& reservation) const = 0;
};

}  // namespace uplink::console
