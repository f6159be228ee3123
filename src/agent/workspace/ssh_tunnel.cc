#include "agent/workspace/ssh_tunnel.h"

#include <algorithm>
#include <utility>

#include "agent/console_client.h"
#include "common/text.h"
#include "protocol/agent_api.h"
#include "protocol/errors.h"
#include "protocol/ssh.h"

namespace uplink::agent::workspace {
namespace {

// Even a back-off whose jitter drew zero waits this long: never a tight loop.
constexpr std::chrono::milliseconds kMinReconnectDelay{250};

}  // namespace

SshTunnel::SshTunnel(SshTunnelOptions options, kube::KubeClient& kube, metrics::Registry& registry)
    : options_(std::move(options)), kube_(kube), registry_(registry) {
  registry_.Set("uplink_workspace_ssh_tunnel_connected", 0);
  registry_.Set("uplink_workspace_ssh_channels_open", 0);
}

SshTunnel::~SshTunnel() { ReapTasks(true); }

void SshTunnel::SetRunning(std::vector<WorkspacePod> running) {
  std::vector<std::shared_ptr<SshChannel>> gone;
  std::lock_guard lock(mutex_);
  std::map<std::string, WorkspacePod> now;
  bool added = false;
  for (WorkspacePod& pod : running) {
    auto before = running_.find(pod.reservation_id);
    if (before == running_.end() || before->second.pod != pod.pod) added = true;
    now[pod.reservation_id] = std::move(pod);
  }
  for (const auto& [reservation, pod] : running_) {
    auto after = now.find(reservation);
    if (after != now.end() && after->second.pod == pod.pod) continue;
    host_keys_.erase(pod.pod);
    host_key_warned_.erase(pod.pod);
    keys_.erase(reservation);
    for (const auto& [id, channel] : channels_) {
      if (channel->reservation_id() == reservation) channel->Abort();
    }
  }
  running_ = std::move(now);
  if (added) {
    report_pending_ = true;
    report_now_.notify_all();
  }
}

std::optional<WorkspacePod> SshTunnel::RunningPod(const std::string& reservation_id) const {
  std::lock_guard lock(mutex_);
  auto it = running_.find(reservation_id);
  if (it == running_.end()) return std::nullopt;
  return it->second;
}

bool SshTunnel::Send(const std::string& message) {
  std::shared_ptr<net::WebSocket> tunnel;
  {
    std::lock_guard lock(mutex_);
    tunnel = tunnel_;
  }
  return tunnel && tunnel->Write(message, false).ok();
}

void SshTunnel::Spawn(std::function<void()> work) {
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard lock(mutex_);
  tasks_.push_back(Task{finished, std::thread([work = std::move(work), finished] {
                          work();
                          *finished = true;
                        })});
}

void SshTunnel::ReapTasks(bool all) {
  std::vector<std::thread> done;
  {
    std::lock_guard lock(mutex_);
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      if (all || *it->finished) {
        done.push_back(std::move(it->thread));
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (std::thread& thread : done) thread.join();
}

Result<std::unique_ptr<net::WebSocket>> SshTunnel::Connect() {
  // Re-read each time: a rotated credential takes effect at the next connect.
  UPLINK_ASSIGN_OR_RETURN(Secret token, ReadConsoleToken(options_.token_file));
  net::WebSocketConnectOptions connect;
  connect.client.base_url = options_.console.base_url;
  connect.client.ca_file = options_.console.ca_file;
  connect.client.user_agent = options_.console.user_agent;
  connect.client.connect_timeout = options_.console.connect_timeout;
  connect.client.request_timeout = std::chrono::seconds(10);
  connect.target = std::string(protocol::kSshTunnelPath);
  connect.headers.Set("Authorization", "Bearer " + token.Reveal());
  connect.headers.Set(std::string(protocol::kClusterUidHeader), options_.cluster_uid);
  connect.subprotocols = {std::string(protocol::kSshTunnelSubprotocol)};
  connect.websocket.max_message_bytes = protocol::kMaxSshControlMessageBytes;
  connect.websocket.idle_timeout = options_.idle_timeout;
  net::Response refusal;
  refusal.status = 0;
  auto socket = net::ConnectWebSocket(connect, &refusal);
  if (!socket.ok() && refusal.status >= 300) {
    // The console's own words (its error body), never the request's headers.
    std::optional<protocol::ErrorBody> error = protocol::DecodeErrorBody(refusal.body);
    return Status(socket.status().code(),
                  "the console refused the tunnel: " + std::to_string(refusal.status) +
                      (error ? " " + error->code + ": " + error->message : std::string()));
  }
  return socket;
}

void SshTunnel::Run(StopSignal& stop) {
  std::thread reporter([&] { ReportCapabilities(stop); });
  std::thread stop_watch([&] {
    while (stop.WaitFor(std::chrono::hours(1))) {
    }
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (tunnel_) tunnel_->Abort();
    for (const auto& [id, channel] : channels_) channel->Abort();
    report_now_.notify_all();
    keys_written_.notify_all();
    sessions_.AbortAll();
  });
  Backoff backoff(options_.backoff);
  int attempts = 0;
  while (!stop.stopped()) {
    ReapTasks(false);
    ++attempts;
    std::string why;
    auto socket = Connect();
    if (socket.ok()) {
      const SteadyTime since = SystemClock().SteadyNow();
      std::shared_ptr<net::WebSocket> tunnel(std::move(socket).value());
      log_.Info("SSH tunnel to the console open", {{"attempt", attempts}});
      why = Serve(tunnel);
      if (SystemClock().SteadyNow() - since >= options_.stable_after) backoff.Reset();
      attempts = 0;
    } else {
      why = socket.status().message();
    }
    if (stop.stopped()) break;
    const auto delay = std::max(backoff.NextDelay(), kMinReconnectDelay);
    registry_.Increment("uplink_workspace_ssh_tunnel_reconnects_total");
    log_.Warn("SSH tunnel to the console is down; connecting again",
              {{"reason", why},
               {"retry_in_ms", static_cast<std::int64_t>(delay.count())},
               {"failures", backoff.failures()}});
    stop.WaitFor(delay);
  }
  stop_watch.join();
  reporter.join();
  ReapTasks(true);
}

std::string SshTunnel::Serve(std::shared_ptr<net::WebSocket> socket) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return "the controller is stopping";
    tunnel_ = socket;
    // The console confirms a workspace's sshd after a report on each new tunnel.
    report_pending_ = true;
    report_now_.notify_all();
  }
  registry_.Set("uplink_workspace_ssh_tunnel_connected", 1);
  std::string why;
  while (true) {
    auto message = socket->Read();
    if (!message.ok()) {
      why = message.status().message();
      break;
    }
    if (message->type == net::WebSocketMessage::Type::kClose) {
      why = "the console closed the tunnel (" + std::to_string(message->close_code) +
            (message->data.empty() ? "" : " " + OneLineExcerpt(message->data, 123)) + ")";
      break;
    }
    if (message->type != net::WebSocketMessage::Type::kText) {
      log_.Warn("a binary message on the SSH tunnel was skipped");
      continue;
    }
    Handle(message->data);
    ReapTasks(false);
  }
  registry_.Set("uplink_workspace_ssh_tunnel_connected", 0);
  std::lock_guard lock(mutex_);
  if (tunnel_ == socket) tunnel_.reset();
  return why;
}

void SshTunnel::Handle(std::string_view text) {
  auto message = protocol::DecodeSshConsoleMessage(text);
  if (!message.ok()) {
    // One bad message costs that message; the tunnel stays.
    log_.Warn("a message on the SSH tunnel was refused", {{"error", message.status()}});
    return;
  }
  if (auto* open = std::get_if<protocol::SshOpen>(&*message)) {
    OpenChannel(*open);
  } else if (auto* keys = std::get_if<protocol::SshKeys>(&*message)) {
    RewriteKeys(*keys);
  } else if (auto* unknown = std::get_if<protocol::SshUnknownMessage>(&*message)) {
    log_.Warn("a message of a type this controller does not know was skipped",
              {{"type", unknown->type}});
  }
}

void SshTunnel::OpenChannel(const protocol::SshOpen& open) {
  auto refuse = [&](const std::string& why) {
    registry_.Increment("uplink_workspace_ssh_open_failures_total");
    log_.Warn("an SSH channel could not be opened",
              {{"channel", open.channel}, {"reservation", open.reservation_id}, {"error", why}});
    (void)Send(protocol::EncodeSshOpenFailed({.channel = open.channel, .message = why}));
  };
  std::optional<WorkspacePod> where = RunningPod(open.reservation_id);
  if (!where) {
    refuse("the workspace of " + open.reservation_id + " is not running on this cluster");
    return;
  }
  std::shared_ptr<SshChannel> channel;
  std::uint64_t seq = 0;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (channels_.contains(open.channel)) {
      log_.Warn("a second open for an SSH channel already open was skipped",
                {{"channel", open.channel}});
      return;
    }
    if (channels_.size() >= options_.max_channels) {
      // Outside the lock below: refuse() sends on the tunnel.
    } else {
      seq = ++keys_seq_;
      const std::vector<std::string> keys = open.authorized_keys;
      channel = std::make_shared<SshChannel>(
          SshChannelRequest{.channel_id = open.channel, .where = *where,
                            .credential = Secret(open.credential)},
          kube_, options_.paths, options_.console, registry_,
          [this, where = *where, keys, seq] { return WaitForKeys(where, keys, seq); },
          [this, id = open.channel](const std::string& message) {
            (void)Send(protocol::EncodeSshOpenFailed({.channel = id, .message = message}));
          });
      channels_[open.channel] = channel;
      registry_.Set("uplink_workspace_ssh_channels_open", static_cast<double>(channels_.size()));
    }
  }
  if (!channel) {
    refuse("this controller has " + std::to_string(options_.max_channels) +
           " SSH channels open, its limit; close one and try again");
    return;
  }
  Spawn([this, channel] {
    channel->Run();
    std::lock_guard lock(mutex_);
    channels_.erase(channel->id());
    registry_.Set("uplink_workspace_ssh_channels_open", static_cast<double>(channels_.size()));
  });
}

void SshTunnel::RewriteKeys(const protocol::SshKeys& keys) {
  std::optional<WorkspacePod> where = RunningPod(keys.reservation_id);
  if (!where) {
    // Written before its next channel anyway, with the keys valid then.
    log_.Info("SSH keys for a workspace that is not running here were skipped",
              {{"reservation", keys.reservation_id}});
    return;
  }
  std::uint64_t seq;
  {
    std::lock_guard lock(mutex_);
    seq = ++keys_seq_;
  }
  SubmitKeys(*where, keys.authorized_keys, seq);
}

std::shared_ptr<SshTunnel::KeysState> SshTunnel::SubmitKeys(const WorkspacePod& where,
                                                            std::vector<std::string> keys,
                                                            std::uint64_t seq) {
  std::shared_ptr<KeysState> state;
  {
    std::lock_guard lock(mutex_);
    std::shared_ptr<KeysState>& slot = keys_[where.reservation_id];
    if (!slot) slot = std::make_shared<KeysState>();
    state = slot;
    if (seq > state->pending_seq && seq > state->tried_seq) {
      state->pending_seq = seq;
      state->pending = std::move(keys);
      state->pending_where = where;
    }
    if (state->writer_running || state->pending_seq == 0) return state;
    state->writer_running = true;
  }
  Spawn([this, state] { WriteNewestKeys(state); });
  return state;
}

Status SshTunnel::WaitForKeys(const WorkspacePod& where, const std::vector<std::string>& keys,
                              std::uint64_t seq) {
  std::shared_ptr<KeysState> state = SubmitKeys(where, keys, seq);
  std::unique_lock lock(mutex_);
  keys_written_.wait(lock, [&] { return state->tried_seq >= seq || stopping_; });
  if (state->written_seq >= seq) return Status::Ok();
  if (state->tried_seq >= seq) return state->tried;
  return UnavailableError("the controller is stopping");
}

void SshTunnel::WriteNewestKeys(const std::shared_ptr<KeysState>& state) {
  std::unique_lock lock(mutex_);
  while (state->pending_seq != 0) {
    const std::uint64_t seq = std::exchange(state->pending_seq, 0);
    const std::vector<std::string> list = std::exchange(state->pending, {});
    const WorkspacePod where = state->pending_where;
    lock.unlock();
    Status written = WriteAuthorizedKeys(kube_, where, options_.paths, list, sessions_);
    registry_.Increment("uplink_workspace_ssh_keys_writes_total");
    if (written.ok()) {
      log_.Info("authorized_keys rewritten", {{"reservation", where.reservation_id},
                                              {"keys", static_cast<std::int64_t>(list.size())}});
    } else {
      log_.Warn("authorized_keys could not be rewritten; the next channel writes it again",
                {{"reservation", where.reservation_id}, {"error", written}});
    }
    lock.lock();
    state->tried_seq = seq;
    state->tried = written;
    if (written.ok()) state->written_seq = seq;
    keys_written_.notify_all();
  }
  state->writer_running = false;
}

void SshTunnel::ReportCapabilities(StopSignal& stop) {
  while (!stop.stopped()) {
    std::vector<WorkspacePod> running;
    {
      std::unique_lock lock(mutex_);
      report_now_.wait_for(lock, options_.capability_interval,
                           [&] { return report_pending_ || stopping_; });
      if (stopping_) return;
      report_pending_ = false;
      if (!tunnel_) continue;  // a new tunnel asks for a report at once
      for (const auto& [reservation, pod] : running_) running.push_back(pod);
    }
    for (const WorkspacePod& where : running) {
      std::optional<HostKey> key;
      {
        std::lock_guard lock(mutex_);
        auto cached = host_keys_.find(where.pod);
        if (cached != host_keys_.end()) key = cached->second;
      }
      if (!key) {
        auto made = EnsureHostKey(kube_, where, options_.paths, sessions_);
        std::lock_guard lock(mutex_);
        if (!made.ok()) {
          // Logged once per workspace; tried again at each report.
          if (host_key_warned_.insert(where.pod).second) {
            log_.Warn("no SSH host key for a running workspace: no SSH to it until there is",
                      {{"reservation", where.reservation_id}, {"error", made.status()}});
          }
          continue;
        }
        // Only for a workspace still running as this pod: a late answer must not outlive it.
        auto still = running_.find(where.reservation_id);
        if (still == running_.end() || still->second.pod != where.pod) continue;
        host_keys_[where.pod] = *made;
        key = *made;
        log_.Info("SSH host key of a workspace", {{"reservation", where.reservation_id},
                                                  {"host_key", made->public_key},
                                                  {"sshd", made->sshd}});
      }
      if (Send(protocol::EncodeSshCapability({.reservation_id = where.reservation_id,
                                              .host_key = key->public_key,
                                              .sshd = key->sshd}))) {
        registry_.Increment("uplink_workspace_ssh_capability_reports_total");
      }
    }
  }
}

}  // namespace uplink::agent::workspace
