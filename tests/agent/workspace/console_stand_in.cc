#include "console_stand_in.h"

#include <cstdio>

#include "common/gzip.h"
#include "common/json.h"
#include "protocol/agent_api.h"
#include "protocol/errors.h"

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
  net::ServerOptions options;
  options.max_body_bytes = 4 << 20;
  options.threads = 4;
  auto server = net::HttpServer::Start(options, console->router_.AsHandler());
  if (!server.ok()) {
    std::fprintf(stderr, "console stand-in: %s\n", server.status().ToString().c_str());
    return nullptr;
  }
  console->server_ = std::move(server).value();
  return console;
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

}  // namespace uplink::agent::workspace::testing
