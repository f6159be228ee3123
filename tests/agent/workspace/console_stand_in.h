// A small stand-in for the console's side of the workspace contract (protocol/workspace.h),
// for the controller's tests until the real console serves it, and for what the real one
// should never do: go down on demand (every call 503) to show the controller rides out an
// outage. It keeps reservations, hands out commands until their final output arrives,
// applies output offsets as the contract says, holds a sync while nothing changed (the
// contract's long poll, up to the wait the controller asks for), and records every event key
// it acknowledges and when each reservation moved (bench/workspace_bench.cc reads that).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "net/router.h"
#include "net/server.h"
#include "net/websocket.h"
#include "protocol/ssh.h"
#include "protocol/workspace.h"

namespace uplink::agent::workspace::testing {

class ConsoleStandIn {
 public:
  // Accepts `Authorization: Bearer <credential>` only.
  static std::unique_ptr<ConsoleStandIn> Start(std::string credential);
  ~ConsoleStandIn();

  std::string url() const;

  // A reservation the controller should run (desired running until Stop).
  void Reserve(const protocol::WorkspaceReservation& reservation);
  void Stop(const std::string& reservation_id);
  // A command for a reservation; its id.
  std::string AddCommand(const std::string& reservation_id, std::string kind, std::string code,
                         std::int64_t timeout_seconds = 60, std::int64_t output_cap = 1 << 20);
  // Every call answers 503 while down.
  void SetDown(bool down);

  struct CommandView {
    std::string output;
    std::string state = "queued";
    std::optional<int> exit_code;
    bool truncated = false;
    std::string message;
    int posts = 0;
  };
  CommandView Command(const std::string& id) const;
  // Adds a command and waits (up to two minutes) for it to end; how it ended.
  CommandView RunToEnd(const std::string& reservation_id, std::string kind, std::string code);
  // The reservation's state as the events moved it (reserved first).
  std::string State(const std::string& reservation_id) const;
  std::vector<std::string> EventKeys() const;
  // How often each event key was sent (a re-send after an outage shows here).
  int Sends(const std::string& key) const;
  int Syncs() const;
  // When a reservation was first handed out desired running, first handed out desired
  // stopped, and when the first event of each state arrived (steady clock).
  struct Timeline {
    std::optional<std::chrono::steady_clock::time_point> handed_out;
    std::optional<std::chrono::steady_clock::time_point> stop_handed_out;
    std::map<std::string, std::chrono::steady_clock::time_point> events;
  };
  Timeline TimelineOf(const std::string& reservation_id) const;
  bool SawDraining() const;
  std::string LastUserAgent() const;

  // --- SSH (protocol/ssh.h): the console's end of the agent's tunnel and data channels ------
  struct Capability {
    std::string reservation_id;
    std::string host_key;
    std::string sshd;
  };
  std::vector<Capability> Capabilities() const;
  // The open_failed message for `channel`, once one came.
  std::optional<std::string> OpenFailure(const std::string& channel) const;
  // Tunnel upgrade requests, refused ones included, and the tunnels accepted.
  int TunnelAttempts() const;
  int TunnelsAccepted() const;
  bool TunnelOpen() const;
  std::string TunnelUserAgent() const;
  // Sends `open` for a new channel with a fresh single-use chn_ credential; the channel id.
  std::string OpenChannel(const std::string& reservation_id, std::vector<std::string> keys,
                          std::string purpose = "session");
  void SendKeys(const std::string& reservation_id, std::vector<std::string> keys);
  // Sends text as is on the tunnel (hostile-input checks).
  bool SendRaw(const std::string& text);
  // What the agent sent on a data channel, whether it is open, and how it closed.
  struct ChannelView {
    bool connected = false;
    std::string received;
    bool closed = false;
    std::uint16_t close_code = 0;
    std::string close_reason;
  };
  ChannelView Channel(const std::string& channel) const;
  // Writes one binary message to the agent on an open data channel.
  bool WriteChannel(const std::string& channel, const std::string& bytes);
  void CloseChannel(const std::string& channel);
  // Data channel upgrades that presented anything but their own chn_ credential.
  int BadChannelCredentials() const;
  // While down, tunnel upgrades are refused with 503 and the open tunnel is cut.
  void SetSshDown(bool down);
  // Stops serving (every connection cut) and serves again on the same port: a restart.
  bool Restart();

 private:
  ConsoleStandIn() = default;
  net::Response Sync(const net::Request& request);
  net::Response Output(const net::Request& request, const std::string& id);
  std::optional<net::Response> Refusal(const net::Request& request) const;
  net::Response Tunnel(const net::Request& request);
  net::Response DataChannel(const net::Request& request, const std::string& id);
  void ServeTunnel(std::shared_ptr<net::WebSocket> socket);
  void ServeChannel(const std::string& id, std::shared_ptr<net::WebSocket> socket);
  bool StartServer(int port);
  // Something the controller should hear about at once: ends a held sync.
  void Changed();

  std::string credential_;
  net::Router router_;
  std::unique_ptr<net::HttpServer> server_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t changes_ = 0;
  std::uint64_t replied_at_change_ = 0;  // changes_ when the last sync reply was written
  bool down_ = false;
  int syncs_ = 0;
  bool saw_draining_ = false;
  std::string user_agent_;
  std::map<std::string, protocol::WorkspaceReservation> reservations_;
  std::map<std::string, std::string> states_;
  std::map<std::string, int> sends_;
  std::map<std::string, Timeline> timelines_;
  std::vector<std::string> keys_;
  struct CommandEntry {
    protocol::WorkspaceCommand command;
    CommandView view;
  };
  std::map<std::string, CommandEntry> commands_;
  int next_command_ = 1;

  bool ssh_down_ = false;
  int tunnel_attempts_ = 0;
  int tunnels_accepted_ = 0;
  std::string tunnel_user_agent_;
  std::shared_ptr<net::WebSocket> tunnel_;
  std::vector<Capability> capabilities_;
  std::map<std::string, std::string> open_failures_;
  std::map<std::string, std::string> channel_credentials_;  // not yet used, by channel
  std::map<std::string, ChannelView> channels_;
  std::map<std::string, std::shared_ptr<net::WebSocket>> channel_sockets_;
  int bad_channel_credentials_ = 0;
  int next_channel_ = 1;
};

}  // namespace uplink::agent::workspace::testing
