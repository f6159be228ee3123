// One SSH relay channel (docs/protocol.md, "SSH relay"): `sshd -i` in the workspace through
// the exec API, and the data WebSocket to the console authenticated with the channel's own
// one-time credential (chn_..., never the execution credential), pumped both ways.
//
// Flow control: each direction has one thread that reads one message and writes it on before
// it reads the next, and a write returns only once the kernel took it, so a slow reader on
// either side stops the other side from being read: at most one 64 KiB message per
// direction is in this process per channel, whatever the transfer.
//
// The data channel opens only once sshd has written its first bytes (its identification
// line): an image without sshd, a refused exec or an sshd that exits at once ends as an
// `open_failed` with what went wrong, not as an SSH stream that closes unexplained.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/workspace/ssh_workspace.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/secret.h"
#include "kube/client.h"
#include "net/websocket.h"

namespace uplink::agent::workspace {

// How the controller reaches the console, without the execution credential.
struct ConsoleEndpoint {
  std::string base_url;
  std::string ca_file;
  std::string user_agent;
  std::chrono::milliseconds connect_timeout{5'000};
};

struct SshChannelRequest {
  std::string channel_id;  // sch_...
  WorkspacePod where;
  Secret credential;  // chn_...
};

// The metrics a channel moves (declared by DeclareSshMetrics).
inline constexpr std::string_view kSshBytesMetric = "uplink_workspace_ssh_bytes_total";
void DeclareSshMetrics(metrics::Registry& registry);

class SshChannel {
 public:
  // `write_keys` rewrites authorized_keys before sshd starts; `open_failed` tells the console
  // why the channel could not open (called at most once, before Run returns).
  SshChannel(SshChannelRequest request, kube::KubeClient& kube, const SshPaths& paths,
             const ConsoleEndpoint& console, metrics::Registry& registry,
             std::function<Status()> write_keys,
             std::function<void(const std::string& message)> open_failed);
  SshChannel(const SshChannel&) = delete;
  SshChannel& operator=(const SshChannel&) = delete;

  // Opens the channel and pumps until either side ends it. On the calling thread, with one
  // more thread for the workspace-to-console direction.
  void Run();
  // Ends the channel at once (the workspace went, the controller stops); safe from any thread.
  void Abort();

  const std::string& id() const { return request_.channel_id; }
  const std::string& reservation_id() const { return request_.where.reservation_id; }

 private:
  // sshd's output to the console; its log to ours; its exit into exit_code_.
  void PumpFromWorkspace();
  // The console's messages to sshd's stdin.
  void PumpToWorkspace();
  Result<std::unique_ptr<net::WebSocket>> ConnectData();
  void LogSshd(std::string_view text, bool flush);
  void Fail(const std::string& message);

  const SshChannelRequest request_;
  kube::KubeClient& kube_;
  const SshPaths paths_;
  const ConsoleEndpoint console_;
  metrics::Registry& registry_;
  std::function<Status()> write_keys_;
  std::function<void(const std::string&)> open_failed_;
  log::Logger log_{"agent.workspace.ssh"};

  std::mutex mutex_;
  std::condition_variable changed_;
  std::unique_ptr<net::WebSocket> exec_;
  std::unique_ptr<net::WebSocket> data_;
  std::string first_output_;    // sshd's first bytes, held until the data channel is open
  bool data_ready_ = false;
  bool aborted_ = false;
  bool exec_ended_ = false;
  std::string exec_end_;        // how the exec session ended: "sshd exited (code N)" or why not
  std::string sshd_log_;        // sshd's stderr up to its next line break
  size_t sshd_logged_ = 0;      // bytes of its stderr logged (bounded per channel)
};

}  // namespace uplink::agent::workspace
