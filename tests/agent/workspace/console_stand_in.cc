#include "console_stand_in.h"

#include <cstdio>
#include <thread>

#include "common/gzip.h"
#include "common/json.h"
#include "protocol/agent_api.h"
#include "protocol/errors.h"
#include "support/process.h"

namespace uplink::agent::workspace::testing {
namespace {

net::Response Error(int status, std::string code, std::string message) {
  return net::Response::Json(status, ToJson(protocol::EncodeErrorBody(
                                         {.code = std::move(code), .message = std::move(message)})));
}

Result<json::value> Body(const net::Request& request) {
  std::string text = request.body;
  if (request.headers.Get("Content-Encoding") == "gzip") {
    UPLINK_ASSIGN_OR_RETURN(text, GzipDecompress(request.body, 16 << 20));
  }
  return ParseJson(text, JsonLimits{.max_bytes = 16 << 20, .max_depth = 16});
}

bool Final(std::string_view state) {
  return state == "completed" || state == "failed" || state == "expired" || state == "cancelled";
}

}  // namespace

std::unique_ptr<ConsoleStandIn> ConsoleStandIn::Start(std::string credential) {
  std::unique_ptr<ConsoleStandIn> console(new ConsoleStandIn());
  console->credential_ = std::move(credential);
  ConsoleStandIn* self = console.get();
  console->router_.Add("POST", std::string(protocol::kWorkspaceSyncPath),
                       [self](const net::Request& r, const net::PathParams&) { return self->Sync(r); });
  console->router_.Add("POST", std::string(protocol::kWorkspaceOutputRoute),
                       [self](const net::Request& r, const net::PathParams& p) {
                         return self->Output(r, p.at("id"));
                       });
  console->router_.Add("GET", std::string(protocol::kSshTunnelPath),
                       [self](const net::Request& r, const net::PathParams&) { return self->Tunnel(r); });
  console->router_.Add("GET", std::string(protocol::kSshChannelRoute),
                       [self](const net::Request& r, const net::PathParams& p) {
                         return self->DataChannel(r, p.at("id"));
                       });
  if (!console->StartServer(0)) return nullptr;
  return console;
}

bool ConsoleStandIn::StartServer(int port) {
  net::ServerOptions options;
  options.listen = "127.0.0.1:" + std::to_string(port);
  options.max_body_bytes = 4 << 20;
  options.threads = 4;
  auto server = net::HttpServer::Start(options, router_.AsHandler());
  if (!server.ok()) {
    std::fprintf(stderr, "console stand-in: %s\n", server.status().ToString().c_str());
    return false;
  }
  server_ = std::move(server).value();
  return true;
}

bool ConsoleStandIn::Restart() {
  const int port = server_->port();
  server_->Stop();
  server_.reset();
  // The port may take a moment to be free again.
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (StartServer(port)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

ConsoleStandIn::~ConsoleStandIn() {
  if (server_) server_->Stop();
}

std::string ConsoleStandIn::url() const {
  return "http://127.0.0.1:" + std::to_string(server_->port());
}

void ConsoleStandIn::Changed() {
  ++changes_;
  changed_.notify_all();
}

void ConsoleStandIn::Reserve(const protocol::WorkspaceReservation& reservation) {
  std::lock_guard lock(mutex_);
  reservations_[reservation.id] = reservation;
  states_.emplace(reservation.id, "reserved");
  Changed();
}

void ConsoleStandIn::Stop(const std::string& reservation_id) {
  std::lock_guard lock(mutex_);
  reservations_.at(reservation_id).desired = std::string(protocol::kDesiredStopped);
  states_[reservation_id] = "stopping";
  Changed();
}

std::string ConsoleStandIn::AddCommand(const std::string& reservation_id, std::string kind,
                                       std::string code, std::int64_t timeout_seconds,
                                       std::int64_t output_cap) {
  std::lock_guard lock(mutex_);
  char id[32];
  std::snprintf(id, sizeof id, "wsc_%016x", next_command_++);
  commands_[id].command = protocol::WorkspaceCommand{.id = id,
                                                     .reservation_id = reservation_id,
                                                     .kind = std::move(kind),
                                                     .code = std::move(code),
                                                     .timeout_seconds = timeout_seconds,
                                                     .output_cap_bytes = output_cap};
  Changed();
  return id;
}

void ConsoleStandIn::SetDown(bool down) {
  std::lock_guard lock(mutex_);
  down_ = down;
  Changed();
}

ConsoleStandIn::CommandView ConsoleStandIn::Command(const std::string& id) const {
  std::lock_guard lock(mutex_);
  auto it = commands_.find(id);
  return it == commands_.end() ? CommandView{} : it->second.view;
}

ConsoleStandIn::CommandView ConsoleStandIn::RunToEnd(const std::string& reservation_id,
                                                     std::string kind, std::string code) {
  const std::string id = AddCommand(reservation_id, std::move(kind), std::move(code), 60);
  CommandView view;
  uplink::testing::WaitFor(
      [&] {
        view = Command(id);
        return protocol::IsFinalCommandState(view.state);
      },
      std::chrono::minutes(2));
  return view;
}

std::string ConsoleStandIn::State(const std::string& reservation_id) const {
  std::lock_guard lock(mutex_);
  auto it = states_.find(reservation_id);
  return it == states_.end() ? "" : it->second;
}

std::vector<std::string> ConsoleStandIn::EventKeys() const {
  std::lock_guard lock(mutex_);
  return keys_;
}

int ConsoleStandIn::Sends(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = sends_.find(key);
  return it == sends_.end() ? 0 : it->second;
}

ConsoleStandIn::Timeline ConsoleStandIn::TimelineOf(const std::string& reservation_id) const {
  std::lock_guard lock(mutex_);
  auto it = timelines_.find(reservation_id);
  return it == timelines_.end() ? Timeline{} : it->second;
}

int ConsoleStandIn::Syncs() const {
  std::lock_guard lock(mutex_);
  return syncs_;
}

bool ConsoleStandIn::SawDraining() const {
  std::lock_guard lock(mutex_);
  return saw_draining_;
}

std::string ConsoleStandIn::LastUserAgent() const {
  std::lock_guard lock(mutex_);
  return user_agent_;
}

std::optional<net::Response> ConsoleStandIn::Refusal(const net::Request& request) const {
  if (down_) return Error(503, "unavailable", "the console stand-in is down");
  if (request.headers.Get("Authorization") != "Bearer " + credential_) {
    return Error(401, "unauthenticated", "no valid execution credential");
  }
  if (!request.headers.Get(protocol::kClusterUidHeader)) {
    return Error(400, "cluster_uid_required", "Uplink-Cluster-UID is required");
  }
  return std::nullopt;
}

net::Response ConsoleStandIn::Sync(const net::Request& request) {
  std::unique_lock lock(mutex_);
  if (auto refused = Refusal(request)) return *refused;
  auto body = Body(request);
  auto sync = body.ok() ? protocol::DecodeWorkspaceSync(*body)
                        : Result<protocol::WorkspaceSync>(body.status());
  if (!sync.ok()) return Error(400, "invalid_request", sync.status().message());
  if (sync->events.empty() && sync->wait_seconds > 0) {
    // The long poll: held while nothing changed since the last reply.
    changed_.wait_for(lock, std::chrono::seconds(sync->wait_seconds),
                      [&] { return changes_ != replied_at_change_; });
    if (auto refused = Refusal(request)) return *refused;
  }
  replied_at_change_ = changes_;
  const auto now = std::chrono::steady_clock::now();
  ++syncs_;
  user_agent_ = std::string(request.headers.Get("User-Agent").value_or(""));
  saw_draining_ = saw_draining_ || sync->draining;
  protocol::WorkspaceSyncReply reply;
  for (const protocol::WorkspaceEvent& event : sync->events) {
    if (++sends_[event.key] == 1) {
      keys_.push_back(event.key);
      timelines_[event.reservation_id].events.emplace(event.state, now);
      auto state = states_.find(event.reservation_id);
      if (state != states_.end() && !Final(state->second)) state->second = event.state;
      if (Final(event.state)) reservations_.erase(event.reservation_id);
    }
    reply.acknowledged.push_back(event.key);
  }
  for (const auto& [id, reservation] : reservations_) {
    Timeline& timeline = timelines_[id];
    auto& handed_out = reservation.desired == protocol::kDesiredStopped ? timeline.stop_handed_out
                                                                        : timeline.handed_out;
    if (!handed_out) handed_out = now;
    reply.reservations.push_back(reservation);
    reply.reservations.back().state = states_.at(id);
  }
  for (const auto& [id, command] : commands_) {
    if (reply.commands.size() >= protocol::kMaxSyncCommands) break;
    if (!protocol::IsFinalCommandState(command.view.state) &&
        reservations_.contains(command.command.reservation_id)) {
      reply.commands.push_back(command.command);
    }
  }
  return net::Response::Json(200, ToJson(protocol::EncodeWorkspaceSyncReply(reply)));
}

net::Response ConsoleStandIn::Output(const net::Request& request, const std::string& id) {
  std::lock_guard lock(mutex_);
  if (auto refused = Refusal(request)) return *refused;
  auto it = commands_.find(id);
  if (it == commands_.end()) return Error(404, "not_found", "no such command");
  auto body = Body(request);
  auto output = body.ok() ? protocol::DecodeWorkspaceOutput(*body)
                          : Result<protocol::WorkspaceOutput>(body.status());
  if (!output.ok()) return Error(400, "invalid_request", output.status().message());
  CommandView& view = it->second.view;
  ++view.posts;
  const auto have = static_cast<std::int64_t>(view.output.size());
  if (protocol::IsFinalCommandState(view.state)) {
    return net::Response::Json(200, ToJson(protocol::EncodeWorkspaceOutputReply({have, true})));
  }
  if (output->offset > have) {
    return net::Response::Json(409, ToJson(protocol::EncodeOutputGap(have)));
  }
  const auto end = output->offset + static_cast<std::int64_t>(output->data.size());
  if (end > have) view.output.append(output->data, static_cast<size_t>(have - output->offset));
  view.state = output->state;
  view.exit_code = output->exit_code;
  view.truncated = output->truncated;
  view.message = output->message;
  return net::Response::Json(
      200, ToJson(protocol::EncodeWorkspaceOutputReply(
               {static_cast<std::int64_t>(view.output.size()),
                protocol::IsFinalCommandState(view.state)})));
}

// --- SSH --------------------------------------------------------------------------------------

net::Response ConsoleStandIn::Tunnel(const net::Request& request) {
  std::lock_guard lock(mutex_);
  ++tunnel_attempts_;
  if (ssh_down_) return Error(503, "unavailable", "the console stand-in's relay is down");
  if (auto refused = Refusal(request)) return *refused;
  if (!net::IsWebSocketUpgrade(request)) return Error(400, "invalid_request", "a WebSocket only");
  tunnel_user_agent_ = std::string(request.headers.Get("User-Agent").value_or(""));
  net::WebSocketOptions options;
  options.max_message_bytes = protocol::kMaxSshControlMessageBytes;
  options.idle_timeout = protocol::kTunnelIdleTimeout;
  return net::AcceptWebSocket(
      std::string(protocol::kSshTunnelSubprotocol),
      [this](std::unique_ptr<net::WebSocket> socket) { ServeTunnel(std::move(socket)); }, options);
}

void ConsoleStandIn::ServeTunnel(std::shared_ptr<net::WebSocket> socket) {
  {
    std::lock_guard lock(mutex_);
    ++tunnels_accepted_;
    // One tunnel per offer: a newer one replaces the older.
    if (tunnel_) (void)tunnel_->Close(net::kClosePolicyViolation, protocol::kTunnelReplacedReason);
    tunnel_ = socket;
  }
  while (true) {
    auto message = socket->Read();
    if (!message.ok() || message->type == net::WebSocketMessage::Type::kClose) break;
    auto decoded = protocol::DecodeSshAgentMessage(message->data);
    if (!decoded.ok()) {
      std::fprintf(stderr, "console stand-in: a bad tunnel message: %s\n",
                   decoded.status().ToString().c_str());
      continue;
    }
    std::lock_guard lock(mutex_);
    if (auto* capability = std::get_if<protocol::SshCapability>(&*decoded)) {
      capabilities_.push_back({capability->reservation_id, capability->host_key, capability->sshd});
    } else if (auto* failed = std::get_if<protocol::SshOpenFailed>(&*decoded)) {
      open_failures_[failed->channel] = failed->message;
    }
  }
  std::lock_guard lock(mutex_);
  if (tunnel_ == socket) tunnel_.reset();
}

net::Response ConsoleStandIn::DataChannel(const net::Request& request, const std::string& id) {
  std::lock_guard lock(mutex_);
  auto issued = channel_credentials_.find(id);
  if (issued == channel_credentials_.end() ||
      request.headers.Get("Authorization") != "Bearer " + issued->second) {
    ++bad_channel_credentials_;
    return Error(401, "unauthenticated", "no valid channel credential");
  }
  channel_credentials_.erase(issued);  // single use
  net::WebSocketOptions options;
  options.max_message_bytes = protocol::kSshDataMessageMaxBytes;
  return net::AcceptWebSocket(
      std::string(protocol::kSshChannelSubprotocol),
      [this, id](std::unique_ptr<net::WebSocket> socket) { ServeChannel(id, std::move(socket)); },
      options);
}

void ConsoleStandIn::ServeChannel(const std::string& id, std::shared_ptr<net::WebSocket> socket) {
  {
    std::lock_guard lock(mutex_);
    channels_[id].connected = true;
    channel_sockets_[id] = socket;
  }
  std::uint16_t code = 0;
  std::string reason;
  while (true) {
    auto message = socket->Read();
    if (!message.ok()) break;
    if (message->type == net::WebSocketMessage::Type::kClose) {
      code = message->close_code;
      reason = message->data;
      break;
    }
    std::lock_guard lock(mutex_);
    channels_[id].received += message->data;
  }
  std::lock_guard lock(mutex_);
  ChannelView& view = channels_[id];
  view.closed = true;
  view.close_code = code;
  view.close_reason = reason;
  channel_sockets_.erase(id);
}

std::string ConsoleStandIn::OpenChannel(const std::string& reservation_id,
                                        std::vector<std::string> keys, std::string purpose) {
  std::shared_ptr<net::WebSocket> tunnel;
  protocol::SshOpen open;
  {
    std::lock_guard lock(mutex_);
    char id[32];
    std::snprintf(id, sizeof id, "sch_%016x", next_channel_);
    // 43 base64url characters, as the console mints them; unique per channel.
    char credential[64];
    std::snprintf(credential, sizeof credential, "chn_%043d", next_channel_++);
    channel_credentials_[id] = credential;
    open = protocol::SshOpen{.channel = id,
                             .reservation_id = reservation_id,
                             .grant_id = purpose == "session" ? "ssg_00000000000000a1" : "",
                             .credential = credential,
                             .authorized_keys = std::move(keys),
                             .purpose = std::move(purpose)};
    tunnel = tunnel_;
  }
  if (tunnel) (void)tunnel->Write(protocol::EncodeSshOpen(open), false);
  return open.channel;
}

void ConsoleStandIn::SendKeys(const std::string& reservation_id, std::vector<std::string> keys) {
  (void)SendRaw(protocol::EncodeSshKeys({.reservation_id = reservation_id,
                                         .authorized_keys = std::move(keys)}));
}

bool ConsoleStandIn::SendRaw(const std::string& text) {
  std::shared_ptr<net::WebSocket> tunnel;
  {
    std::lock_guard lock(mutex_);
    tunnel = tunnel_;
  }
  return tunnel && tunnel->Write(text, false).ok();
}

std::vector<ConsoleStandIn::Capability> ConsoleStandIn::Capabilities() const {
  std::lock_guard lock(mutex_);
  return capabilities_;
}

std::optional<std::string> ConsoleStandIn::OpenFailure(const std::string& channel) const {
  std::lock_guard lock(mutex_);
  auto it = open_failures_.find(channel);
  if (it == open_failures_.end()) return std::nullopt;
  return it->second;
}

int ConsoleStandIn::TunnelAttempts() const {
  std::lock_guard lock(mutex_);
  return tunnel_attempts_;
}

int ConsoleStandIn::TunnelsAccepted() const {
  std::lock_guard lock(mutex_);
  return tunnels_accepted_;
}

bool ConsoleStandIn::TunnelOpen() const {
  std::lock_guard lock(mutex_);
  return tunnel_ != nullptr;
}

std::string ConsoleStandIn::TunnelUserAgent() const {
  std::lock_guard lock(mutex_);
  return tunnel_user_agent_;
}

ConsoleStandIn::ChannelView ConsoleStandIn::Channel(const std::string& channel) const {
  std::lock_guard lock(mutex_);
  auto it = channels_.find(channel);
  return it == channels_.end() ? ChannelView{} : it->second;
}

bool ConsoleStandIn::WriteChannel(const std::string& channel, const std::string& bytes) {
  std::shared_ptr<net::WebSocket> socket;
  {
    std::lock_guard lock(mutex_);
    auto it = channel_sockets_.find(channel);
    if (it == channel_sockets_.end()) return false;
    socket = it->second;
  }
  return socket->Write(bytes).ok();
}

void ConsoleStandIn::CloseChannel(const std::string& channel) {
  std::shared_ptr<net::WebSocket> socket;
  {
    std::lock_guard lock(mutex_);
    auto it = channel_sockets_.find(channel);
    if (it == channel_sockets_.end()) return;
    socket = it->second;
  }
  (void)socket->Close(net::kCloseNormal, "the client went");
}

int ConsoleStandIn::BadChannelCredentials() const {
  std::lock_guard lock(mutex_);
  return bad_channel_credentials_;
}

void ConsoleStandIn::SetSshDown(bool down) {
  std::shared_ptr<net::WebSocket> tunnel;
  {
    std::lock_guard lock(mutex_);
    ssh_down_ = down;
    if (down) tunnel = tunnel_;
  }
  if (tunnel) tunnel->Abort();
}

}  // namespace uplink::agent::workspace::testing
