#include "console/ssh/local_ssh_relay.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>
#include <variant>

#include "common/crypto.h"
#include "common/json.h"
#include "common/thread_name.h"
#include "console/auth/credentials.h"
#include "protocol/ssh_public_key.h"

namespace uplink::console {
namespace {

constexpr std::string_view kToWorkspace = "to_workspace";
constexpr std::string_view kFromWorkspace = "from_workspace";
constexpr std::string_view kHandoverConfirmed = "handover confirmed";

// A reservation whose channels must close: stopped, expired or past its expiry.
bool Ended(const Reservation& reservation, WallTime now) {
  return reservation.state != protocol::kReservationRunning || now >= reservation.expires_at;
}

std::string Seconds(std::chrono::seconds s) { return std::to_string(s.count()) + " s"; }

}  // namespace

struct LocalSshRelay::Tunnel {
  std::string offer_id;
  std::string connection_id;
  std::string owner_id;
  std::uint64_t generation = 0;
  std::shared_ptr<net::WebSocket> socket;
  // Reservations whose handover was confirmed over this tunnel, and those being probed.
  // Guarded by the relay's mutex_.
  std::set<std::string> handed_over;
  std::set<std::string> probing;

  // What goes to the agent, written by the tunnel's own sender thread, so that no request
  // or channel thread ever waits on an agent that stopped reading: a write blocks until the
  // kernel takes it. An outbox that fills up means the agent is not reading; the tunnel is
  // dropped and the controller reconnects.
  std::mutex outbox_mutex;
  std::condition_variable outbox_changed;
  std::deque<std::string> outbox;        // guarded by outbox_mutex
  bool sending_done = false;             // guarded by outbox_mutex: nothing more is sent
  std::string replaced_reason;           // guarded by outbox_mutex: close with this, then stop
};

namespace {

// Messages waiting for one agent: opens and keys, each under a few KiB but for the keys.
constexpr size_t kTunnelOutboxMessages = 256;

}  // namespace

struct LocalSshRelay::Meter {
  std::mutex mutex;
  std::string reservation_id;
  std::int64_t budget = 0;
  std::int64_t used = 0;     // what the store had when the meter was made, plus charges
  std::int64_t flushed = 0;  // of `used`, what the store has
};

struct LocalSshRelay::Channel {
  std::string id;
  std::string reservation_id;
  std::string offer_id;
  std::string grant_id;  // "" for a handover
  std::string purpose;
  std::string credential_hash;  // SHA-256 of the chn_ credential; "" once used
  SteadyTime minted_at;
  // The rest guarded by the relay's mutex_.
  ChannelState state = ChannelState::kAdmitted;
  SteadyTime state_since;
  std::shared_ptr<net::WebSocket> client;  // none for a handover
  std::shared_ptr<net::WebSocket> agent;
  std::shared_ptr<Meter> meter;  // session channels
  std::string host_key;          // handover: the key pinned when it began
  std::weak_ptr<Tunnel> tunnel;  // handover: the tunnel it confirms
  // When a byte last went either way (SteadyTime's count), for the idle timeout.
  std::atomic<SteadyTime::rep> last_data{0};
  std::uint16_t close_code = 0;
  std::string close_reason;
  // Closes under way on threads of their own (CloseAside). Each handler of the channel waits
  // for them before it returns, so that none outlives the server that runs the sockets.
  std::mutex closes_mutex;
  std::condition_variable closes_done;
  int closes_pending = 0;  // guarded by closes_mutex

  void WaitForCloses() {
    std::unique_lock lock(closes_mutex);
    closes_done.wait(lock, [this] { return closes_pending == 0; });
  }
};

LocalSshRelay::LocalSshRelay(Store& store, const Clock& clock, metrics::Registry& metrics,
                             LocalSshRelayOptions options)
    : store_(store), clock_(clock), metrics_(metrics), options_(options) {
  metrics_.DeclareGauge("uplink_console_ssh_tunnels_connected",
                        "Workspace controllers' SSH control tunnels connected to this console.");
  metrics_.DeclareGauge("uplink_console_ssh_channels_open",
                        "SSH session channels open or waiting for the agent's data channel.");
  metrics_.DeclareCounter("uplink_console_ssh_relayed_bytes_total",
                          "SSH bytes relayed on session channels, by direction.");
  metrics_.DeclareCounter("uplink_console_ssh_channels_refused_total",
                          "SSH channels refused or cut before they opened, by reason.");
  metrics_.DeclareCounter("uplink_console_ssh_budget_cuts_total",
                          "SSH session channels closed because the transfer budget was used up.");
  metrics_.DeclareCounter("uplink_console_ssh_handovers_total",
                          "SSH handover probes, by outcome (confirmed, failed).");
  UpdateGauges();
}

LocalSshRelay::~LocalSshRelay() {
  StopSweeper();
  FlushMeters();
}

// ---- the control tunnel -------------------------------------------------------------------

void LocalSshRelay::ServeTunnel(const Offer& offer, std::unique_ptr<net::WebSocket> socket) {
  auto tunnel = std::make_shared<Tunnel>();
  tunnel->offer_id = offer.id;
  tunnel->connection_id = offer.connection_id;
  tunnel->owner_id = offer.owner_id;
  tunnel->socket = std::move(socket);
  std::shared_ptr<Tunnel> replaced;
  {
    std::lock_guard lock(mutex_);
    tunnel->generation = next_tunnel_generation_++;
    auto& slot = tunnels_[offer.id];
    replaced = std::move(slot);
    slot = tunnel;
  }
  UpdateGauges();
  log_.Info("ssh tunnel connected", {{"offer_id", offer.id}, {"generation", tunnel->generation}});
  if (replaced) {
    log_.Info("ssh tunnel replaced by a newer one",
              {{"offer_id", offer.id}, {"generation", replaced->generation}});
    std::lock_guard lock(replaced->outbox_mutex);
    replaced->replaced_reason = protocol::kTunnelReplacedReason;
    replaced->outbox_changed.notify_all();
  }
  std::thread sender([this, tunnel] { SendToAgent(*tunnel); });
  for (;;) {
    auto message = tunnel->socket->Read();
    if (!message.ok() || message->type == net::WebSocketMessage::Type::kClose) break;
    if (message->type != net::WebSocketMessage::Type::kText) {
      log_.Warn("ssh tunnel message refused: the tunnel carries text messages only",
                {{"offer_id", offer.id}});
      continue;
    }
    HandleTunnelMessage(tunnel, message->data);
  }
  {
    std::lock_guard lock(tunnel->outbox_mutex);
    tunnel->sending_done = true;
    tunnel->outbox_changed.notify_all();
  }
  tunnel->socket->Abort();  // a write the sender is blocked in returns now
  sender.join();
  {
    // The socket must not outlive this handler (the server's io_context goes after it), so
    // nothing that may still hold the tunnel keeps it.
    std::lock_guard lock(tunnel->outbox_mutex);
    tunnel->socket.reset();
  }
  std::vector<std::shared_ptr<Channel>> stranded;
  {
    std::lock_guard lock(mutex_);
    auto it = tunnels_.find(offer.id);
    if (it != tunnels_.end() && it->second == tunnel) {
      tunnels_.erase(it);
      // Channels still waiting for the agent will never get it; open ones have their own
      // data channels and go on.
      for (const auto& [id, channel] : channels_) {
        if (channel->offer_id == offer.id && channel->state == ChannelState::kWaitingAgent) {
          stranded.push_back(channel);
        }
      }
    }
  }
  for (const auto& channel : stranded) {
    Cut(channel, net::kCloseInternalError, "the agent's tunnel was lost before the channel opened",
        net::kCloseGoingAway);
  }
  UpdateGauges();
  log_.Info("ssh tunnel closed", {{"offer_id", offer.id}, {"generation", tunnel->generation}});
}

void LocalSshRelay::SendToAgent(Tunnel& tunnel) {
  for (;;) {
    std::string message, replaced_reason;
    {
      std::unique_lock lock(tunnel.outbox_mutex);
      tunnel.outbox_changed.wait(lock, [&] {
        return tunnel.sending_done || !tunnel.replaced_reason.empty() || !tunnel.outbox.empty();
      });
      if (tunnel.sending_done) return;
      if (!tunnel.replaced_reason.empty()) {
        replaced_reason = tunnel.replaced_reason;
        tunnel.sending_done = true;
      } else {
        message = std::move(tunnel.outbox.front());
        tunnel.outbox.pop_front();
      }
    }
    if (!replaced_reason.empty()) {
      (void)tunnel.socket->Close(net::kClosePolicyViolation, replaced_reason);
      return;
    }
    if (!tunnel.socket->Write(message, false).ok()) {
      std::lock_guard lock(tunnel.outbox_mutex);
      tunnel.sending_done = true;
      return;
    }
  }
}

bool LocalSshRelay::SendToAgent(Tunnel& tunnel, std::string message) {
  {
    std::lock_guard lock(tunnel.outbox_mutex);
    if (tunnel.sending_done || !tunnel.replaced_reason.empty()) return false;
    if (tunnel.outbox.size() < kTunnelOutboxMessages) {
      tunnel.outbox.push_back(std::move(message));
      tunnel.outbox_changed.notify_all();
      return true;
    }
    tunnel.sending_done = true;
    if (tunnel.socket) tunnel.socket->Abort();
  }
  log_.Warn("ssh tunnel dropped: the agent stopped reading it",
            {{"offer_id", tunnel.offer_id},
             {"generation", tunnel.generation},
             {"unread_messages", kTunnelOutboxMessages}});
  return false;
}

void LocalSshRelay::HandleTunnelMessage(const std::shared_ptr<Tunnel>& tunnel,
                                        std::string_view text) {
  auto message = protocol::DecodeSshAgentMessage(text);
  if (!message.ok()) {
    log_.Warn("ssh tunnel message refused",
              {{"offer_id", tunnel->offer_id}, {"error", message.status().message()}});
    return;
  }
  if (const auto* capability = std::get_if<protocol::SshCapability>(&*message)) {
    HandleCapability(tunnel, *capability);
  } else if (const auto* failed = std::get_if<protocol::SshOpenFailed>(&*message)) {
    std::shared_ptr<Channel> channel;
    {
      std::lock_guard lock(mutex_);
      auto it = channels_.find(failed->channel);
      if (it != channels_.end() && it->second->offer_id == tunnel->offer_id) channel = it->second;
    }
    if (!channel) return;
    log_.Warn("ssh channel could not be opened by the agent",
              {{"channel", failed->channel},
               {"reservation_id", channel->reservation_id},
               {"message", failed->message}});
    CutFromAgentSide(channel, net::kCloseInternalError,
                     "the agent could not open the channel: " + failed->message);
  } else {
    log_.Info("ssh tunnel message of an unknown type skipped",
              {{"offer_id", tunnel->offer_id},
               {"type", std::get<protocol::SshUnknownMessage>(*message).type}});
  }
}

void LocalSshRelay::HandleCapability(const std::shared_ptr<Tunnel>& tunnel,
                                     const protocol::SshCapability& capability) {
  auto reservation = store_.GetReservation(capability.reservation_id);
  if (!reservation.ok() || reservation->offer_id != tunnel->offer_id) {
    log_.Warn("ssh capability report refused: no such reservation on this offer",
              {{"offer_id", tunnel->offer_id}, {"reservation_id", capability.reservation_id}});
    return;
  }
  if (!IsActiveReservationState(reservation->state)) return;  // a late report of an ended one
  auto key = protocol::ParseSshPublicKey(capability.host_key);
  if (!key.ok()) {
    log_.Warn("ssh capability report refused: the host key is not a valid public key",
              {{"reservation_id", capability.reservation_id},
               {"error", key.status().message()}});
    return;
  }
  const std::string host_key = key->Authorized();
  AuditEvent audit;
  audit.at = clock_.Now();
  audit.actor_type = "agent";
  audit.actor_id = tunnel->connection_id;
  audit.credential = "execution_credential";
  audit.action = "reservation.ssh_host_key_pinned";
  audit.target_type = "reservation";
  audit.target_id = reservation->id;
  audit.outcome = "ok";
  audit.detail = ToJson(json::object{{"fingerprint", key->fingerprint}, {"sshd", capability.sshd}});
  auto check = store_.RecordSshCapability(reservation->id, host_key, audit);
  if (!check.ok()) {
    log_.Error("ssh capability report not recorded",
               {{"reservation_id", reservation->id}, {"error", check.status()}});
    return;
  }
  if (*check == SshHostKeyCheck::kChanged) {
    bool first;
    {
      std::lock_guard lock(mutex_);
      first = refused_host_keys_.insert_or_assign(reservation->id, key->fingerprint).second;
    }
    if (first) {
      log_.Warn("security: ssh host key changed; refused, the pinned key stays",
                {{"event", "ssh_host_key_changed"},
                 {"reservation_id", reservation->id},
                 {"fingerprint", key->fingerprint}});
    }
    return;
  }
  bool probe;
  {
    std::lock_guard lock(mutex_);
    refused_host_keys_.erase(reservation->id);
    if (*check == SshHostKeyCheck::kPinned) tunnel->handed_over.erase(reservation->id);
    probe = !tunnel->handed_over.contains(reservation->id) &&
            tunnel->probing.insert(reservation->id).second;
  }
  if (*check == SshHostKeyCheck::kPinned) {
    log_.Info("ssh host key pinned",
              {{"reservation_id", reservation->id}, {"fingerprint", key->fingerprint}});
  }
  if (probe) StartHandover(tunnel, reservation->id, host_key);
}

// ---- channels -----------------------------------------------------------------------------

std::optional<std::vector<std::string>> LocalSshRelay::AuthorizedKeys(
    const std::string& reservation_id) {
  auto grants = store_.ListSshGrants(reservation_id);
  if (!grants.ok()) {
    log_.Error("ssh grants could not be read",
               {{"reservation_id", reservation_id}, {"error", grants.status()}});
    return std::nullopt;
  }
  const WallTime now = clock_.Now();
  std::vector<std::string> keys;
  for (const SshGrant& grant : *grants) {
    if (grant.LiveAt(now) && keys.size() < protocol::kMaxAuthorizedKeys) {
      keys.push_back(grant.public_key + " " + grant.id);
    }
  }
  return keys;
}

std::optional<std::string> LocalSshRelay::OpenMessage(const Channel& channel,
                                                      const Secret& credential) {
  auto keys = AuthorizedKeys(channel.reservation_id);
  if (!keys) return std::nullopt;
  protocol::SshOpen open;
  open.channel = channel.id;
  open.reservation_id = channel.reservation_id;
  open.grant_id = channel.grant_id;
  open.credential = std::string(credential.Reveal());
  open.authorized_keys = std::move(*keys);
  open.purpose = channel.purpose;
  return protocol::EncodeSshOpen(open);
}

void LocalSshRelay::StartHandover(const std::shared_ptr<Tunnel>& tunnel,
                                  const std::string& reservation_id, const std::string& host_key) {
  MintedCredential credential = MintCredential(protocol::kChannelCredentialPrefix);
  auto channel = std::make_shared<Channel>();
  channel->id = protocol::NewSshChannelId();
  channel->reservation_id = reservation_id;
  channel->offer_id = tunnel->offer_id;
  channel->purpose = std::string(protocol::kSshPurposeHandover);
  channel->credential_hash = credential.token_hash;
  channel->minted_at = clock_.SteadyNow();
  channel->state = ChannelState::kWaitingAgent;
  channel->state_since = channel->minted_at;
  channel->host_key = host_key;
  channel->tunnel = tunnel;
  std::optional<std::string> open = OpenMessage(*channel, credential.token);
  {
    std::lock_guard lock(mutex_);
    if (!open) {
      tunnel->probing.erase(reservation_id);
      return;
    }
    channels_[channel->id] = channel;
  }
  log_.Info("ssh handover probe started",
            {{"reservation_id", reservation_id}, {"channel", channel->id}});
  if (!SendToAgent(*tunnel, std::move(*open))) {
    Cut(channel, net::kCloseInternalError, "the agent's tunnel was lost", net::kCloseGoingAway);
  }
}

Result<SshClientChannel> LocalSshRelay::AdmitClient(const Reservation& reservation,
                                                    const SshGrant& grant) {
  std::lock_guard lock(mutex_);
  auto tunnel = tunnels_.find(reservation.offer_id);
  if (tunnel == tunnels_.end()) {
    Refused("agent_unavailable");
    return UnavailableError(
        "the workspace controller's SSH tunnel is not connected to this console; it reconnects "
        "by itself, try again in a few seconds");
  }
  std::int64_t open = 0, open_in_reservation = 0;
  for (const auto& [id, channel] : channels_) {
    if (channel->grant_id == grant.id) ++open;
    if (channel->reservation_id == reservation.id &&
        channel->purpose == protocol::kSshPurposeSession) {
      ++open_in_reservation;
    }
  }
  if (open_in_reservation >= options_.channels_per_reservation) {
    Refused("channel_limit");
    return ResourceExhaustedError(
        "reservation " + reservation.id + " has " + std::to_string(open_in_reservation) +
        " SSH channels open, the most one reservation may have; close one first");
  }
  if (open >= options_.channels_per_grant) {
    Refused("channel_limit");
    return ResourceExhaustedError("grant " + grant.id + " has " + std::to_string(open) +
                                  " channels open, the most one grant may have; close one first");
  }
  std::shared_ptr<Meter>& meter = meters_[reservation.id];
  if (!meter) {
    // Read now, under the lock: a dropped meter was written before it was dropped, and the
    // caller's copy may predate that write.
    auto fresh = store_.GetReservation(reservation.id);
    meter = std::make_shared<Meter>();
    meter->reservation_id = reservation.id;
    meter->budget = reservation.transfer_budget_bytes;
    meter->used = meter->flushed =
        fresh.ok() ? fresh->transfer_used_bytes : reservation.transfer_used_bytes;
  }
  {
    std::lock_guard meter_lock(meter->mutex);
    if (meter->used >= meter->budget) {
      Refused("transfer_budget_exhausted");
      return FailedPreconditionError(protocol::TransferBudgetCloseReason(
          meter->used, meter->budget, reservation.id));
    }
  }
  auto channel = std::make_shared<Channel>();
  channel->id = protocol::NewSshChannelId();
  channel->reservation_id = reservation.id;
  channel->offer_id = reservation.offer_id;
  channel->grant_id = grant.id;
  channel->purpose = std::string(protocol::kSshPurposeSession);
  channel->state_since = clock_.SteadyNow();
  channel->meter = meter;
  channels_[channel->id] = channel;
  return SshClientChannel{channel->id};
}

void LocalSshRelay::ServeClient(const std::string& channel_id,
                                std::unique_ptr<net::WebSocket> owned) {
  std::shared_ptr<net::WebSocket> client(std::move(owned));
  std::shared_ptr<Channel> channel;
  std::shared_ptr<Tunnel> tunnel;
  MintedCredential credential = MintCredential(protocol::kChannelCredentialPrefix);
  {
    std::lock_guard lock(mutex_);
    auto it = channels_.find(channel_id);
    if (it != channels_.end() && it->second->state == ChannelState::kAdmitted) {
      channel = it->second;
      auto found = tunnels_.find(channel->offer_id);
      if (found != tunnels_.end()) tunnel = found->second;
      channel->client = client;
      channel->credential_hash = credential.token_hash;
      channel->minted_at = channel->state_since = clock_.SteadyNow();
      channel->state = ChannelState::kWaitingAgent;
    }
  }
  UpdateGauges();
  if (!channel) {
    (void)client->Close(net::kCloseInternalError, "the channel was given up before it opened");
    while (client->Read().ok()) {
    }
    return;
  }
  {
    std::optional<std::string> open = tunnel ? OpenMessage(*channel, credential.token)
                                             : std::nullopt;
    if (!open || !SendToAgent(*tunnel, std::move(*open))) {
      Cut(channel, net::kCloseInternalError, "the agent's tunnel was lost before the channel opened",
          net::kCloseGoingAway);
    } else {
      log_.Info("ssh channel opening", {{"channel", channel->id},
                                        {"reservation_id", channel->reservation_id},
                                        {"grant_id", channel->grant_id}});
    }
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return channel->state != ChannelState::kWaitingAgent; });
    }
  }
  // Client → agent, one message at a time; after a cut only the closing handshake is read.
  for (;;) {
    auto message = client->Read();
    if (!message.ok() || message->type == net::WebSocketMessage::Type::kClose) break;
    std::shared_ptr<net::WebSocket> agent;
    {
      std::lock_guard lock(mutex_);
      if (channel->state == ChannelState::kOpen) agent = channel->agent;
    }
    if (!agent) continue;
    if (message->type != net::WebSocketMessage::Type::kBinary) {
      Cut(channel, net::kClosePolicyViolation, "the SSH stream travels in binary messages only",
          net::kCloseNormal);
      continue;
    }
    if (!Charge(channel, message->data.size(), true)) continue;
    if (!agent->Write(message->data, true).ok()) {
      CutFromAgentSide(channel, net::kCloseInternalError, "the agent's data channel was lost");
    }
  }
  Cut(channel, net::kCloseNormal, "the client closed the channel", net::kCloseNormal);
  channel->WaitForCloses();
  std::lock_guard lock(mutex_);
  channel->client.reset();  // the socket must not outlive this handler
}

Status LocalSshRelay::ClaimAgentChannel(const std::string& channel_id, const Secret& credential) {
  const Status refused = UnauthenticatedError(
      "the channel credential is not valid for this channel: each is used once, within " +
      Seconds(protocol::kChannelCredentialLifetime) + " of its open message");
  if (!protocol::IsSshChannelId(channel_id) ||
      !protocol::IsChannelCredentialShape(credential.Reveal())) {
    return refused;
  }
  std::lock_guard lock(mutex_);
  auto it = channels_.find(channel_id);
  if (it == channels_.end()) return refused;
  Channel& channel = *it->second;
  if (channel.state != ChannelState::kWaitingAgent || channel.credential_hash.empty() ||
      !MatchesHash(credential, channel.credential_hash)) {
    return refused;
  }
  channel.credential_hash.clear();  // used: never again, whatever follows
  if (clock_.SteadyNow() - channel.minted_at > protocol::kChannelCredentialLifetime) return refused;
  return Status::Ok();
}

void LocalSshRelay::ServeAgentChannel(const std::string& channel_id,
                                      std::unique_ptr<net::WebSocket> owned) {
  std::shared_ptr<net::WebSocket> agent(std::move(owned));
  std::shared_ptr<Channel> channel;
  {
    std::lock_guard lock(mutex_);
    auto it = channels_.find(channel_id);
    if (it != channels_.end() && it->second->state == ChannelState::kWaitingAgent) {
      channel = it->second;
      channel->agent = agent;
      channel->state = ChannelState::kOpen;
      channel->state_since = clock_.SteadyNow();
      channel->last_data = channel->state_since.time_since_epoch().count();
    }
  }
  changed_.notify_all();
  if (!channel) {
    (void)agent->Close(net::kCloseGoingAway, "the channel closed before the agent connected");
    while (agent->Read().ok()) {
    }
    return;
  }
  if (channel->purpose == protocol::kSshPurposeHandover) {
    ServeHandover(channel);
    channel->WaitForCloses();
    std::lock_guard lock(mutex_);
    channel->agent.reset();  // the socket must not outlive this handler
    return;
  }
  log_.Info("ssh channel open", {{"channel", channel->id},
                                 {"reservation_id", channel->reservation_id},
                                 {"grant_id", channel->grant_id}});
  std::uint16_t code = net::kCloseInternalError;
  std::string reason = "the agent's data channel was lost";
  for (;;) {
    auto message = agent->Read();
    if (!message.ok()) break;
    if (message->type == net::WebSocketMessage::Type::kClose) {
      code = message->close_code == net::kCloseNormal ? net::kCloseNormal : net::kCloseInternalError;
      reason = message->data.empty() ? "the agent closed the channel"
                                     : "the agent closed the channel: " + message->data;
      break;
    }
    std::shared_ptr<net::WebSocket> client;
    {
      std::lock_guard lock(mutex_);
      if (channel->state == ChannelState::kOpen) client = channel->client;
    }
    if (!client) continue;
    if (message->type != net::WebSocketMessage::Type::kBinary) {
      Cut(channel, net::kCloseInternalError, "the agent sent a text message on the data channel",
          net::kClosePolicyViolation);
      continue;
    }
    if (!Charge(channel, message->data.size(), false)) continue;
    if (!client->Write(message->data, true).ok()) {
      Cut(channel, net::kCloseNormal, "the client's channel was lost", net::kCloseNormal);
    }
  }
  CutFromAgentSide(channel, code, reason);
  channel->WaitForCloses();
  std::lock_guard lock(mutex_);
  channel->agent.reset();  // the socket must not outlive this handler
}

void LocalSshRelay::CutFromAgentSide(const std::shared_ptr<Channel>& channel, std::uint16_t code,
                                     const std::string& reason) {
  // The controller ends a workspace's channels when it deletes the pod, which it may do
  // before the sweeper sees the reservation end: the user is told the cause, not the symptom.
  auto reservation = store_.GetReservation(channel->reservation_id);
  if (channel->purpose == protocol::kSshPurposeSession && reservation.ok() &&
      Ended(*reservation, clock_.Now())) {
    Cut(channel, net::kCloseGoingAway, std::string(protocol::kReservationEndedReason),
        net::kCloseGoingAway);
    return;
  }
  Cut(channel, code, reason, code == net::kCloseNormal ? net::kCloseNormal : net::kCloseInternalError);
}

void LocalSshRelay::ReservationEnded(const std::string& reservation_id) {
  std::vector<std::shared_ptr<Channel>> ending;
  {
    std::lock_guard lock(mutex_);
    // What the relay kept about the reservation goes with it.
    refused_host_keys_.erase(reservation_id);
    for (auto& [offer_id, tunnel] : tunnels_) tunnel->handed_over.erase(reservation_id);
    for (const auto& [id, channel] : channels_) {
      if (channel->purpose == protocol::kSshPurposeSession &&
          channel->reservation_id == reservation_id) {
        ending.push_back(channel);
      }
    }
  }
  for (const auto& channel : ending) {
    Cut(channel, net::kCloseGoingAway, std::string(protocol::kReservationEndedReason),
        net::kCloseGoingAway);
  }
}

void LocalSshRelay::ServeHandover(const std::shared_ptr<Channel>& channel) {
  // sshd speaks first: "SSH-2.0-softwareversion SP comments CR LF", at most 255 bytes with the
  // CR LF (RFC 4253 section 4.2).
  constexpr size_t kMax = protocol::kMaxSshIdentificationBytes;
  std::string line;
  std::optional<std::string> problem;  // decided: "" when confirmed
  for (;;) {
    auto message = channel->agent->Read();
    if (!message.ok() || message->type == net::WebSocketMessage::Type::kClose) break;
    if (problem || message->type != net::WebSocketMessage::Type::kBinary) continue;
    line.append(message->data, 0, kMax - line.size());
    const size_t end = line.find("\r\n");
    if (end == std::string::npos && line.size() < kMax) continue;
    if (end != std::string::npos && line.starts_with("SSH-2.0-")) {
      line.resize(end);
      Status recorded =
          store_.RecordSshHandover(channel->reservation_id, channel->host_key, clock_.Now());
      problem = recorded.ok() ? "" : recorded.message();
    } else {
      problem = "sshd's first line is not an SSH-2.0 identification";
    }
    if (problem->empty()) {
      std::lock_guard lock(mutex_);
      if (auto tunnel = channel->tunnel.lock()) tunnel->handed_over.insert(channel->reservation_id);
    }
    Cut(channel, net::kCloseNormal, problem->empty() ? std::string(kHandoverConfirmed) : *problem,
        problem->empty() ? net::kCloseNormal : net::kClosePolicyViolation);
  }
  if (problem && problem->empty()) {
    log_.Info("ssh handover confirmed", {{"reservation_id", channel->reservation_id},
                                         {"channel", channel->id},
                                         {"sshd", line.substr(0, 64)}});
  } else {
    std::string why = problem ? *problem : "";
    if (why.empty()) {
      std::lock_guard lock(mutex_);
      why = channel->close_reason.empty()
                ? "the agent closed the channel before sshd identified itself"
                : channel->close_reason;
    }
    log_.Warn("ssh handover failed", {{"reservation_id", channel->reservation_id},
                                      {"channel", channel->id},
                                      {"problem", why}});
  }
  Cut(channel, net::kCloseNormal, "handover ended", net::kCloseNormal);
}

bool LocalSshRelay::Charge(const std::shared_ptr<Channel>& channel, size_t bytes,
                           bool to_workspace) {
  Meter& meter = *channel->meter;
  std::int64_t used = 0;
  {
    std::lock_guard lock(meter.mutex);
    const auto size = static_cast<std::int64_t>(bytes);
    if (meter.used + size <= meter.budget) {
      meter.used += size;
      metrics_.Increment("uplink_console_ssh_relayed_bytes_total",
                         {{"direction", std::string(to_workspace ? kToWorkspace : kFromWorkspace)}},
                         static_cast<double>(bytes));
      channel->last_data = clock_.SteadyNow().time_since_epoch().count();
      return true;
    }
    used = meter.used;
  }
  metrics_.Increment("uplink_console_ssh_budget_cuts_total");
  const std::string reason =
      protocol::TransferBudgetCloseReason(used, meter.budget, channel->reservation_id);
  log_.Info("ssh channel cut: transfer budget used up",
            {{"channel", channel->id}, {"reservation_id", channel->reservation_id},
             {"used_bytes", used}, {"budget_bytes", meter.budget}});
  Cut(channel, net::kClosePolicyViolation, reason, net::kClosePolicyViolation);
  return false;
}

void LocalSshRelay::Cut(const std::shared_ptr<Channel>& channel, std::uint16_t code,
                        const std::string& reason, std::uint16_t agent_code) {
  std::shared_ptr<net::WebSocket> client, agent;
  bool was_waiting;
  {
    std::lock_guard lock(mutex_);
    if (channel->state == ChannelState::kClosed) return;
    was_waiting = channel->state == ChannelState::kWaitingAgent ||
                  channel->state == ChannelState::kAdmitted;
    channel->state = ChannelState::kClosed;
    channel->close_code = code;
    channel->close_reason = reason;
    channel->credential_hash.clear();
    channels_.erase(channel->id);
    if (channel->purpose == protocol::kSshPurposeHandover) {
      if (auto tunnel = channel->tunnel.lock()) tunnel->probing.erase(channel->reservation_id);
    }
    client = channel->client;
    agent = channel->agent;
  }
  changed_.notify_all();
  if (channel->purpose == protocol::kSshPurposeHandover) {
    metrics_.Increment("uplink_console_ssh_handovers_total",
                       {{"outcome", reason == kHandoverConfirmed ? "confirmed" : "failed"}});
  } else if (was_waiting) {
    metrics_.Increment("uplink_console_ssh_channels_refused_total", {{"reason", "not_opened"}});
  }
  if (client || agent) {
    CloseAside(channel, std::move(client), std::move(agent), code, reason, agent_code);
  }
  if (channel->purpose == protocol::kSshPurposeSession) {
    log_.Info("ssh channel closed", {{"channel", channel->id},
                                     {"reservation_id", channel->reservation_id},
                                     {"grant_id", channel->grant_id},
                                     {"code", code},
                                     {"reason", reason}});
    FlushMeters();
  }
  UpdateGauges();
}

// ---- keys, views, the sweeper -------------------------------------------------------------

void LocalSshRelay::GrantsChanged(const std::string& reservation_id) {
  auto reservation = store_.GetReservation(reservation_id);
  if (!reservation.ok()) return;
  std::shared_ptr<Tunnel> tunnel;
  {
    std::lock_guard lock(mutex_);
    auto it = tunnels_.find(reservation->offer_id);
    if (it != tunnels_.end()) tunnel = it->second;
  }
  if (!tunnel) return;  // the controller writes the keys with each channel's open anyway
  auto keys = AuthorizedKeys(reservation_id);
  if (!keys) return;
  const size_t count = keys->size();
  if (!SendToAgent(*tunnel, protocol::EncodeSshKeys({reservation_id, std::move(*keys)}))) {
    log_.Warn("ssh keys not sent: the tunnel was lost", {{"reservation_id", reservation_id}});
    return;
  }
  log_.Info("ssh keys sent", {{"reservation_id", reservation_id}, {"keys", count}});
}

SshRelayView LocalSshRelay::View(const Reservation& reservation) const {
  std::lock_guard lock(mutex_);
  SshRelayView view;
  view.tunnel_connected = tunnels_.contains(reservation.offer_id);
  for (const auto& [id, channel] : channels_) {
    if (channel->reservation_id == reservation.id &&
        channel->purpose == protocol::kSshPurposeSession) {
      ++view.open_channels;
    }
  }
  auto refused = refused_host_keys_.find(reservation.id);
  if (refused != refused_host_keys_.end()) view.refused_host_key_fingerprint = refused->second;
  return view;
}

void LocalSshRelay::Sweep() {
  std::lock_guard sweep_lock(sweep_mutex_);
  const SteadyTime now = clock_.SteadyNow();
  const WallTime wall_now = clock_.Now();
  struct Due {
    std::shared_ptr<Channel> channel;
    std::uint16_t code;
    std::string reason;
    std::uint16_t agent_code;
  };
  std::set<std::string> reservations;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, channel] : channels_) {
      if (channel->purpose == protocol::kSshPurposeSession) {
        reservations.insert(channel->reservation_id);
      }
    }
  }
  // The reservations that ended, read outside the lock; their channels close for that reason
  // before any other.
  std::set<std::string> ended;
  for (const std::string& reservation_id : reservations) {
    auto reservation = store_.GetReservation(reservation_id);
    if (reservation.ok() && Ended(*reservation, wall_now)) ended.insert(reservation_id);
  }
  std::vector<Due> due;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, channel] : channels_) {
      const auto age = now - channel->state_since;
      const bool session = channel->purpose == protocol::kSshPurposeSession;
      if (session && ended.contains(channel->reservation_id)) {
        due.push_back({channel, net::kCloseGoingAway,
                       std::string(protocol::kReservationEndedReason), net::kCloseGoingAway});
      } else if (channel->state == ChannelState::kAdmitted &&
                 age > protocol::kChannelOpenTimeout) {
        due.push_back({channel, net::kCloseInternalError, "the client never connected", 0});
      } else if (channel->state == ChannelState::kWaitingAgent &&
                 age > protocol::kChannelOpenTimeout) {
        due.push_back({channel, net::kCloseInternalError,
                       "the agent did not open the data channel within " +
                           Seconds(protocol::kChannelOpenTimeout),
                       net::kCloseGoingAway});
      } else if (channel->state == ChannelState::kOpen && !session &&
                 age > protocol::kHandoverTimeout) {
        due.push_back({channel, net::kCloseNormal,
                       "sshd did not identify itself within " + Seconds(protocol::kHandoverTimeout),
                       net::kClosePolicyViolation});
      } else if (channel->state == ChannelState::kOpen && session &&
                 now - SteadyTime(SteadyTime::duration(channel->last_data.load())) >=
                     options_.idle_timeout) {
        due.push_back({channel, net::kCloseNormal, protocol::IdleCloseReason(options_.idle_timeout),
                       net::kCloseNormal});
      }
    }
  }
  for (const Due& cut : due) Cut(cut.channel, cut.code, cut.reason, cut.agent_code);
  FlushMeters();
}

void LocalSshRelay::CloseAside(const std::shared_ptr<Channel>& channel,
                               std::shared_ptr<net::WebSocket> client,
                               std::shared_ptr<net::WebSocket> agent, std::uint16_t code,
                               std::string reason, std::uint16_t agent_code) {
  // On a thread of its own: a Close waits for a write in progress on its socket, which a
  // peer that stopped reading holds up to its idle timeout, and that write may be the other
  // pump's, which waits for the very reads the caller would stop doing. Neither the
  // sweeper, a request handler nor a pump may wait for it.
  {
    std::lock_guard lock(channel->closes_mutex);
    ++channel->closes_pending;
  }
  std::thread([channel, client = std::move(client), agent = std::move(agent), code,
               reason = std::move(reason), agent_code]() mutable {
    if (client) (void)client->Close(code, reason);
    if (agent) (void)agent->Close(agent_code, reason);
    // Released before the handlers are told: a socket must not outlive its handler.
    client.reset();
    agent.reset();
    std::lock_guard lock(channel->closes_mutex);
    if (--channel->closes_pending == 0) channel->closes_done.notify_all();
  }).detach();
}

void LocalSshRelay::FlushMeters() {
  std::vector<std::shared_ptr<Meter>> meters;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [reservation_id, meter] : meters_) meters.push_back(meter);
  }
  for (const auto& meter : meters) {
    Status added;
    {
      // One flush of a meter at a time: its lock is held across the store's write, so that
      // two flushes never both add the same bytes.
      std::lock_guard lock(meter->mutex);
      const std::int64_t delta = meter->used - meter->flushed;
      if (delta <= 0) continue;
      added = store_.AddTransferUsed(meter->reservation_id, delta);
      if (added.ok()) meter->flushed = meter->used;
    }
    if (!added.ok()) {
      log_.Error("ssh transfer count not written; retried at the next sweep",
                 {{"reservation_id", meter->reservation_id}, {"error", added}});
    }
  }
  // A meter no channel uses is dropped once all it counted is written, never before: the
  // next channel's meter starts from the store, which must then hold every byte.
  std::lock_guard lock(mutex_);
  for (auto it = meters_.begin(); it != meters_.end();) {
    const bool in_use = std::any_of(channels_.begin(), channels_.end(), [&](const auto& entry) {
      return entry.second->reservation_id == it->first;
    });
    bool written;
    {
      std::lock_guard meter_lock(it->second->mutex);
      written = it->second->flushed == it->second->used;
    }
    it = in_use || !written ? std::next(it) : meters_.erase(it);
  }
}

void LocalSshRelay::Refused(std::string_view reason) {
  metrics_.Increment("uplink_console_ssh_channels_refused_total", {{"reason", std::string(reason)}});
}

void LocalSshRelay::UpdateGauges() {
  std::lock_guard lock(mutex_);
  std::int64_t open = 0;
  for (const auto& [id, channel] : channels_) {
    if (channel->purpose == protocol::kSshPurposeSession) ++open;
  }
  metrics_.Set("uplink_console_ssh_tunnels_connected", static_cast<double>(tunnels_.size()));
  metrics_.Set("uplink_console_ssh_channels_open", static_cast<double>(open));
}

void LocalSshRelay::StartSweeper() {
  std::lock_guard lock(sweeper_mutex_);
  if (sweeper_.joinable()) return;
  stopping_ = false;
  sweeper_ = std::thread([this] {
    NameThisThread("ssh-sweeper");
    std::unique_lock lock(sweeper_mutex_);
    while (!stopping_) {
      sweeper_wake_.wait_for(lock, options_.sweep_interval);
      if (stopping_) break;
      lock.unlock();
      Sweep();
      lock.lock();
    }
  });
}

void LocalSshRelay::StopSweeper() {
  {
    std::lock_guard lock(sweeper_mutex_);
    stopping_ = true;
  }
  sweeper_wake_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

}  // namespace uplink::console
