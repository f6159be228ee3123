// The in-process SSH relay: tunnels, channels and transfer meters in this console's memory
// (ssh_relay.h says what a multi-replica one would add).
//
// Threads: every WebSocket runs on its own handler thread (HttpServer's), and each pumps one
// direction: the client's thread reads the client and writes the agent's data channel, the
// agent's thread the reverse. A message is read only after the previous one was written, so
// at most one message of ≤ 64 KiB per direction is held per channel and a slow side slows the
// fast one. One sweeper thread (StartSweeper) times out channels, closes idle ones and those
// of reservations that ended, and writes the transfer counts to the store.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/log.h"
#include "common/metrics.h"
#include "common/time.h"
#include "console/ssh/ssh_relay.h"
#include "console/store/store.h"
#include "protocol/ssh.h"

namespace uplink::console {

struct LocalSshRelayOptions {
  std::int64_t channels_per_grant = protocol::kDefaultChannelsPerGrant;
  std::int64_t channels_per_reservation = protocol::kDefaultChannelsPerReservation;
  // No byte either way for this long closes a session channel (pings do not count).
  std::chrono::seconds idle_timeout = protocol::kDefaultSshIdleTimeout;
  // How often the sweeper runs: at most a second, so a reservation's end closes its channels
  // and used bytes are written within a second.
  std::chrono::milliseconds sweep_interval{500};
};

class LocalSshRelay final : public SshRelay {
 public:
  // `store`, `clock` and `metrics` must outlive this object.
  LocalSshRelay(Store& store, const Clock& clock, metrics::Registry& metrics,
                LocalSshRelayOptions options);
  ~LocalSshRelay() override;

  void ServeTunnel(const Offer& offer, std::unique_ptr<net::WebSocket> socket) override;
  Result<SshClientChannel> AdmitClient(const Reservation& reservation,
                                       const SshGrant& grant) override;
  void ServeClient(const std::string& channel_id, std::unique_ptr<net::WebSocket> socket) override;
  Status ClaimAgentChannel(const std::string& channel_id, const Secret& credential) override;
  void ServeAgentChannel(const std::string& channel_id,
                         std::unique_ptr<net::WebSocket> socket) override;
  void GrantsChanged(const std::string& reservation_id) override;
  void ReservationEnded(const std::string& reservation_id) override;
  SshRelayView View(const Reservation& reservation) const override;

  // One pass of the sweeper, at the clock's time; tests call it after moving a FakeClock.
  void Sweep();
  void StartSweeper();
  void StopSweeper();

 private:
  struct Tunnel;
  struct Channel;
  struct Meter;
  enum class ChannelState { kAdmitted, kWaitingAgent, kOpen, kClosed };

  // The `open` message for `channel` with the grants valid now; nullopt (logged) when the
  // store cannot say which those are.
  std::optional<std::string> OpenMessage(const Channel& channel, const Secret& credential);
  std::optional<std::vector<std::string>> AuthorizedKeys(const std::string& reservation_id);
  void HandleTunnelMessage(const std::shared_ptr<Tunnel>& tunnel, std::string_view text);
  void HandleCapability(const std::shared_ptr<Tunnel>& tunnel,
                        const protocol::SshCapability& capability);
  // Opens a handover channel to `reservation_id`'s workspace over `tunnel`.
  void StartHandover(const std::shared_ptr<Tunnel>& tunnel, const std::string& reservation_id,
                     const std::string& host_key);
  // Reads the agent's data channel of a handover until sshd's identification line.
  void ServeHandover(const std::shared_ptr<Channel>& channel);
  // Ends `channel` once: the client (when there is one) gets `code` and `reason`, the agent's
  // data channel `agent_code` and `reason`. Never under mutex_.
  // The tunnel's sender thread: writes its outbox to the agent until the tunnel ends.
  void SendToAgent(Tunnel& tunnel);
  // Queues a message for the agent without waiting; false when the tunnel is gone or was
  // dropped because its outbox was full.
  bool SendToAgent(Tunnel& tunnel, std::string message);
  void Cut(const std::shared_ptr<Channel>& channel, std::uint16_t code, const std::string& reason,
           std::uint16_t agent_code);
  // Closes a cut channel's sockets on a short thread of its own (the channel's handlers wait
  // for it before they return), so that Cut itself never waits on a peer.
  void CloseAside(const std::shared_ptr<Channel>& channel, std::shared_ptr<net::WebSocket> client,
                  std::shared_ptr<net::WebSocket> agent, std::uint16_t code, std::string reason,
                  std::uint16_t agent_code);
  // A cut the agent's side caused (its data channel ended or failed, open_failed): for a
  // reservation that has ended, the reason given is that end.
  void CutFromAgentSide(const std::shared_ptr<Channel>& channel, std::uint16_t code,
                        const std::string& reason);
  // Called by each handler as it ends; the last one forgets the channel and writes its bytes.
  void Release(const std::shared_ptr<Channel>& channel);
  // Counts `bytes` against the channel's budget before they are forwarded: false (and the
  // channel cut with 1008) when they would pass it.
  bool Charge(const std::shared_ptr<Channel>& channel, size_t bytes, bool to_workspace);
  void FlushMeters();
  void Refused(std::string_view reason);
  void UpdateGauges();

  Store& store_;
  const Clock& clock_;
  metrics::Registry& metrics_;
  const LocalSshRelayOptions options_;
  log::Logger log_{"console.ssh"};

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a channel left kWaitingAgent
  std::map<std::string, std::shared_ptr<Tunnel>> tunnels_;     // by offer id
  std::map<std::string, std::shared_ptr<Channel>> channels_;   // by channel id
  std::map<std::string, std::shared_ptr<Meter>> meters_;       // by reservation id
  std::map<std::string, std::string> refused_host_keys_;       // reservation → fingerprint
  std::uint64_t next_tunnel_generation_ = 1;

  std::mutex sweep_mutex_;  // one Sweep at a time
  std::mutex sweeper_mutex_;
  std::condition_variable sweeper_wake_;
  bool stopping_ = false;
  std::thread sweeper_;
};

}  // namespace uplink::console
