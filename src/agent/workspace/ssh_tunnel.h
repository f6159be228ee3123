// The controller's SSH tunnel (`uplink-agent workspace --ssh`; docs/protocol.md, "SSH
// relay"): ONE control WebSocket to the console for the controller's whole life, whatever the
// reconciler does. The reconciler only tells it which workspaces run in which pod
// (SetRunning). Threads:
//
//   tunnel        connects (the execution credential, as the sync), reads the console's
//                 `open` and `keys` messages; on a loss reconnects with jittered exponential
//                 back-off (0.5 s doubling to 15 s, reset once a tunnel lasted 60 s), each
//                 reconnect logged with its reason. Keepalive pings every 60 s.
//   capabilities  makes each running workspace's host key once and reports it to the console
//                 when the workspace starts running, on every new tunnel and every 30 s.
//   channels      two threads per open channel (ssh_channel.h), at most max_channels at once;
//                 and one writer per workspace at a time for authorized_keys: the lists of
//                 the `keys` messages and channels that arrive while it writes are written
//                 once, as the newest, so twelve channels opened at once cost two writes,
//                 not twelve in turn.
//
// Nothing here touches the sync loop or /readyz: with SSH off or the tunnel down, commands
// and workspaces work as before.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/stop_signal.h"
#include "agent/workspace/ssh_channel.h"
#include "agent/workspace/ssh_workspace.h"
#include "common/backoff.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "kube/client.h"
#include "net/websocket.h"
#include "protocol/ssh.h"

namespace uplink::agent::workspace {

struct SshTunnelOptions {
  ConsoleEndpoint console;
  std::string token_file;   // the execution credential (exe_...), re-read before each connect
  std::string cluster_uid;  // Uplink-Cluster-UID
  SshPaths paths;
  size_t max_channels = 64;
  std::chrono::milliseconds capability_interval = protocol::kCapabilityReportInterval;
  BackoffOptions backoff{.base = std::chrono::milliseconds(500), .cap = std::chrono::seconds(15)};
  // A tunnel that lasted this long was healthy: the next loss starts the back-off afresh.
  std::chrono::seconds stable_after{60};
  // Keepalive: a ping after half of it; nothing from the console for this long ends the tunnel.
  std::chrono::seconds idle_timeout = protocol::kTunnelIdleTimeout;
};

class SshTunnel {
 public:
  // `kube` carries exec sessions only (each opens a connection of its own).
  SshTunnel(SshTunnelOptions options, kube::KubeClient& kube, metrics::Registry& registry);
  ~SshTunnel();

  // The workspaces Running now. A newly running one is reported at once; the channels of one
  // that no longer runs are ended.
  void SetRunning(std::vector<WorkspacePod> running);

  // Until `stop`: the tunnel here, the capability reports and the channels beside it.
  void Run(StopSignal& stop);

 private:
  struct Task {
    std::shared_ptr<std::atomic<bool>> finished;
    std::thread thread;
  };

  // One tunnel's life: the console's messages until it ends; why it ended.
  std::string Serve(std::shared_ptr<net::WebSocket> socket);
  Result<std::unique_ptr<net::WebSocket>> Connect();
  void Handle(std::string_view text);
  void OpenChannel(const protocol::SshOpen& open);
  void RewriteKeys(const protocol::SshKeys& keys);
  struct KeysState;
  // Hands `keys` (numbered `seq` as its message arrived) to the workspace's one writer, and
  // starts the writer unless it runs.
  std::shared_ptr<KeysState> SubmitKeys(const WorkspacePod& where, std::vector<std::string> keys,
                                        std::uint64_t seq);
  // For a channel: until a list as new as `seq` or newer is written (or the write of one
  // failed: its error). Channels opened together share a write instead of taking turns.
  Status WaitForKeys(const WorkspacePod& where, const std::vector<std::string>& keys,
                     std::uint64_t seq);
  // The writer: writes the newest list it was handed until no newer one is waiting.
  void WriteNewestKeys(const std::shared_ptr<KeysState>& state);
  void ReportCapabilities(StopSignal& stop);
  // Sends on the current tunnel; false when there is none or the write failed.
  bool Send(const std::string& message);
  void Spawn(std::function<void()> work);
  void ReapTasks(bool all);
  std::optional<WorkspacePod> RunningPod(const std::string& reservation_id) const;

  const SshTunnelOptions options_;
  kube::KubeClient& kube_;
  metrics::Registry& registry_;
  log::Logger log_{"agent.workspace.ssh"};
  ExecSessions sessions_;  // the short exec calls (host key, authorized_keys)

  mutable std::mutex mutex_;
  std::condition_variable report_now_;
  std::condition_variable keys_written_;  // after each authorized_keys write, and at the stop
  bool report_pending_ = false;
  bool stopping_ = false;
  std::shared_ptr<net::WebSocket> tunnel_;
  std::map<std::string, WorkspacePod> running_;       // by reservation
  std::map<std::string, HostKey> host_keys_;          // by pod
  std::set<std::string> host_key_warned_;             // pods whose failure was logged
  std::map<std::string, std::shared_ptr<SshChannel>> channels_;  // by channel id
  std::vector<Task> tasks_;
  std::uint64_t keys_seq_ = 0;
  // Guarded by mutex_. The newest list not yet written, and whether the writer is on it: a
  // burst of `keys` messages or of channels costs one writer, which writes only the newest,
  // never an older list over a newer one (lists are numbered as their messages arrive, and
  // the console sends the keys valid at that moment).
  struct KeysState {
    std::uint64_t pending_seq = 0;  // 0: none waiting
    std::vector<std::string> pending;
    WorkspacePod pending_where;
    bool writer_running = false;
    std::uint64_t written_seq = 0;  // the newest list written
    std::uint64_t tried_seq = 0;    // the newest list whose write ended, and how
    Status tried;
  };
  std::map<std::string, std::shared_ptr<KeysState>> keys_;  // by reservation
};

}  // namespace uplink::agent::workspace
