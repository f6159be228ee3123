#include "agent/workspace/ssh_channel.h"

#include <thread>

#include "agent/workspace/pod_spec.h"
#include "common/text.h"
#include "protocol/ssh.h"

namespace uplink::agent::workspace {
namespace {

// sshd writes its identification line at once; a channel credential lives 30 s.
constexpr std::chrono::seconds kFirstOutputWithin{10};
// After the console ends the channel, sshd has this long to exit on its closed stdin.
constexpr std::chrono::seconds kExitGrace{5};
// sshd's log per channel (it logs a few lines per login; a flood is cut).
constexpr size_t kMaxSshdLogBytes = 16 * 1024;
// Keepalive pings on both sockets at half of it, well inside a load balancer's idle timeout.
constexpr std::chrono::seconds kIdleTimeout{120};

}  // namespace

void DeclareSshMetrics(metrics::Registry& registry) {
  registry.DeclareGauge("uplink_workspace_ssh_tunnel_connected",
                        "1 while the SSH control tunnel to the console is open.");
  registry.DeclareCounter("uplink_workspace_ssh_tunnel_reconnects_total",
                          "Attempts to open the SSH control tunnel again after it was lost or "
                          "refused.");
  registry.DeclareGauge("uplink_workspace_ssh_channels_open", "SSH relay channels open now.");
  registry.DeclareCounter("uplink_workspace_ssh_channels_total", "SSH relay channels opened.");
  registry.DeclareCounter("uplink_workspace_ssh_open_failures_total",
                          "SSH channels that could not be opened (open_failed sent).");
  registry.DeclareCounter(kSshBytesMetric,
                          "SSH bytes relayed, by direction (to_workspace, from_workspace).");
  registry.DeclareCounter("uplink_workspace_ssh_keys_writes_total",
                          "authorized_keys writes through exec (one serves every channel and "
                          "keys message that arrived while the one before it was written).");
  registry.DeclareCounter("uplink_workspace_ssh_capability_reports_total",
                          "SSH capability reports sent.");
}

SshChannel::SshChannel(SshChannelRequest request, kube::KubeClient& kube, const SshPaths& paths,
                       const ConsoleEndpoint& console, metrics::Registry& registry,
                       std::function<Status()> write_keys,
                       std::function<void(const std::string& message)> open_failed)
    : request_(std::move(request)),
      kube_(kube),
      paths_(paths),
      console_(console),
      registry_(registry),
      write_keys_(std::move(write_keys)),
      open_failed_(std::move(open_failed)) {}

void SshChannel::Abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  if (exec_) exec_->Abort();
  if (data_) data_->Abort();
  changed_.notify_all();
}

void SshChannel::Fail(const std::string& message) {
  registry_.Increment("uplink_workspace_ssh_open_failures_total");
  log_.Warn("an SSH channel could not be opened", {{"channel", id()},
                                                   {"reservation", reservation_id()},
                                                   {"error", message}});
  open_failed_(message);
}

Result<std::unique_ptr<net::WebSocket>> SshChannel::ConnectData() {
  net::WebSocketConnectOptions options;
  options.client.base_url = console_.base_url;
  options.client.ca_file = console_.ca_file;
  options.client.user_agent = console_.user_agent;
  options.client.connect_timeout = console_.connect_timeout;
  options.client.request_timeout = std::chrono::seconds(10);
  options.target = protocol::SshChannelPath(id());
  options.headers.Set("Authorization", "Bearer " + request_.credential.Reveal());
  options.subprotocols = {std::string(protocol::kSshChannelSubprotocol)};
  options.websocket.max_message_bytes = protocol::kSshDataMessageMaxBytes;
  options.websocket.idle_timeout = kIdleTimeout;
  return net::ConnectWebSocket(options);
}

void SshChannel::Run() {
  const WorkspacePod& where = request_.where;
  // 1. authorized_keys as the console has it now: a revoked key is gone before sshd starts.
  if (Status written = write_keys_(); !written.ok()) {
    Fail("authorized_keys could not be written in the workspace: " + written.message());
    return;
  }
  // 2. sshd, one connection on its stdin and stdout.
  net::WebSocketOptions exec_options;
  exec_options.max_message_bytes = 1 << 20;
  exec_options.idle_timeout = kIdleTimeout;
  auto exec = kube_.Exec(where.ns, where.pod, kContainerName, SshdArgv(paths_), true, exec_options);
  if (!exec.ok()) {
    Fail("sshd could not be started in the workspace: " + exec.status().message());
    return;
  }
  {
    std::lock_guard lock(mutex_);
    exec_ = std::move(exec).value();
    if (aborted_) exec_->Abort();
  }
  std::thread from_workspace([this] { PumpFromWorkspace(); });
  struct Join {
    std::thread& thread;
    ~Join() { thread.join(); }
  } join{from_workspace};

  // 3. The data channel, once sshd has spoken.
  {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, kFirstOutputWithin,
                      [&] { return aborted_ || exec_ended_ || !first_output_.empty(); });
    if (first_output_.empty()) {
      std::string why = aborted_       ? std::string("the channel was ended before sshd started")
                        : exec_ended_ ? "sshd ended before it spoke: " + exec_end_
                                      : "sshd wrote nothing within " +
                                            std::to_string(kFirstOutputWithin.count()) + " s";
      aborted_ = true;
      exec_->Abort();
      changed_.notify_all();
      lock.unlock();
      Fail(why);
      return;
    }
  }
  auto data = ConnectData();
  {
    std::lock_guard lock(mutex_);
    if (data.ok()) {
      data_ = std::move(data).value();
      data_ready_ = true;
      if (aborted_) data_->Abort();
    } else {
      aborted_ = true;
      exec_->Abort();
    }
    changed_.notify_all();
  }
  if (!data.ok()) {
    Fail("the data channel to the console could not be opened: " + data.status().message());
    return;
  }
  registry_.Increment("uplink_workspace_ssh_channels_total");
  log_.Info("SSH channel open", {{"channel", id()},
                                 {"reservation", reservation_id()},
                                 {"pod", where.pod}});
  PumpToWorkspace();
}

void SshChannel::PumpToWorkspace() {
  std::string why = "the console closed the channel";
  while (true) {
    auto message = data_->Read();
    if (!message.ok()) {
      why = "the data channel failed: " + message.status().message();
      break;
    }
    if (message->type == net::WebSocketMessage::Type::kClose) {
      if (!message->data.empty()) why = "the console closed the channel: " + message->data;
      break;
    }
    if (message->type != net::WebSocketMessage::Type::kBinary) {
      why = "the console sent a text message on a data channel";
      (void)data_->Close(net::kCloseProtocolError, "binary messages only");
      break;
    }
    // Blocks while sshd does not read: the console's next message waits in its socket.
    if (Status written = WriteExecStdin(*exec_, message->data, false); !written.ok()) {
      why = "sshd's stdin failed: " + written.message();
      break;
    }
    registry_.Increment(kSshBytesMetric, {{"direction", "to_workspace"}},
                        static_cast<double>(message->data.size()));
  }
  // sshd ends on its closed stdin; give it a moment to say goodbye in its log, then cut.
  (void)WriteExecStdin(*exec_, "", true);
  std::unique_lock lock(mutex_);
  if (!changed_.wait_for(lock, kExitGrace, [&] { return exec_ended_; })) exec_->Abort();
  lock.unlock();
  log_.Info("SSH channel closed", {{"channel", id()},
                                   {"reservation", reservation_id()},
                                   {"reason", why}});
}

void SshChannel::PumpFromWorkspace() {
  std::string status_json;
  std::string failure;
  while (true) {
    auto message = exec_->Read();
    if (!message.ok()) {
      if (status_json.empty()) failure = message.status().message();
      break;
    }
    if (message->type == net::WebSocketMessage::Type::kClose) break;
    if (message->data.empty()) continue;
    const auto channel = static_cast<unsigned char>(message->data[0]);
    std::string_view payload = std::string_view(message->data).substr(1);
    if (channel == 2) {
      LogSshd(payload, false);
    } else if (channel == 3) {
      status_json.append(payload.substr(0, 64 * 1024));
    } else if (channel == 1 && !payload.empty()) {
      {
        std::unique_lock lock(mutex_);
        if (!data_ready_) {
          first_output_.assign(payload);
          changed_.notify_all();
          changed_.wait(lock, [&] { return data_ready_ || aborted_; });
          if (aborted_) break;
        }
      }
      // In messages of at most 64 KiB, each written before the next is read.
      bool written = true;
      for (size_t at = 0; at < payload.size() && written; at += protocol::kSshDataMessageMaxBytes) {
        written = data_->Write(payload.substr(at, protocol::kSshDataMessageMaxBytes)).ok();
      }
      if (!written) break;
      registry_.Increment(kSshBytesMetric, {{"direction", "from_workspace"}},
                          static_cast<double>(payload.size()));
    }
  }
  LogSshd("", true);
  std::string end;
  if (std::optional<int> code = ExecExitCode(status_json)) {
    end = protocol::SshdExitedReason(*code);
  } else if (!status_json.empty()) {
    end = "sshd could not run: " + OneLineExcerpt(status_json, 200);
  } else {
    end = "the exec session ended without sshd's exit status" +
          (failure.empty() ? std::string() : ": " + failure);
  }
  bool close_data;
  {
    std::lock_guard lock(mutex_);
    exec_ended_ = true;
    exec_end_ = end;
    changed_.notify_all();
    close_data = data_ready_ && !aborted_;
  }
  // Outside the lock: a close may wait on a slow peer, and Abort must not wait behind it. The
  // reason is for people; a close frame's reason has room for 123 bytes.
  if (close_data) {
    (void)data_->Close(status_json.empty() ? net::kCloseInternalError : net::kCloseNormal,
                       end.substr(0, 123));
  }
}

void SshChannel::LogSshd(std::string_view text, bool flush) {
  sshd_log_.append(text.substr(0, kMaxSshdLogBytes));
  size_t line_end;
  while ((line_end = sshd_log_.find('\n')) != std::string::npos ||
         (flush && !sshd_log_.empty()) || sshd_log_.size() > 1024) {
    if (line_end == std::string::npos) line_end = std::min<size_t>(sshd_log_.size(), 1024);
    std::string line = sshd_log_.substr(0, line_end);
    sshd_log_.erase(0, std::min(sshd_log_.size(), line_end + 1));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (sshd_logged_ >= kMaxSshdLogBytes) continue;
    sshd_logged_ += line.size();
    log_.Info(sshd_logged_ >= kMaxSshdLogBytes ? "sshd (its log is cut here for this channel)"
                                               : "sshd",
              {{"channel", id()}, {"reservation", reservation_id()}, {"line", line}});
  }
}

}  // namespace uplink::agent::workspace
