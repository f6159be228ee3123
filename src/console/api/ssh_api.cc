#include "console/api/ssh_api.h"

#include <algorithm>

#include "console/auth/credentials.h"
#include "console/replies.h"
#include "protocol/ssh_public_key.h"
#include "protocol/ssh.h"
#include "protocol/workspace.h"

namespace uplink::console {
namespace {

// The user the workspace image runs sshd's sessions as (deploy/workspace/Dockerfile).
constexpr std::string_view kWorkspaceUser = "workspace";

json::value OptionalTime(const std::optional<WallTime>& at) {
  return at ? json::value(FormatRfc3339(*at)) : json::value(nullptr);
}

// The WebSocket options of the relay's channels: messages of one SSH data message, and a
// liveness timeout that pings answer (the SSH idle timeout, which counts data only, is the
// relay's).
net::WebSocketOptions ChannelOptions() {
  net::WebSocketOptions options;
  options.max_message_bytes = protocol::kSshDataMessageMaxBytes;
  options.idle_timeout = protocol::kTunnelIdleTimeout;
  return options;
}

bool Offers(const net::Request& request, std::string_view subprotocol) {
  std::vector<std::string> offered = net::OfferedSubprotocols(request);
  return std::find(offered.begin(), offered.end(), subprotocol) != offered.end();
}

// 400 unless the request upgrades to a WebSocket offering `subprotocol`.
std::optional<net::Response> RequireUpgrade(const net::Request& request,
                                            std::string_view subprotocol) {
  if (!net::IsWebSocketUpgrade(request)) {
    return ErrorResponse(400, "invalid_request",
                         "this endpoint is a WebSocket (GET with Upgrade: websocket, "
                         "subprotocol " + std::string(subprotocol) + ")");
  }
  if (!Offers(request, subprotocol)) {
    return ErrorResponse(400, "invalid_request",
                         "offer the WebSocket subprotocol " + std::string(subprotocol));
  }
  return std::nullopt;
}

}  // namespace

SshApi::SshApi(const ApiContext& context, WorkspaceAgentApi& workspace_agent,
               ReservationsApi& reservations, SshRelay& relay)
    : ApiArea(context),
      workspace_agent_(workspace_agent),
      reservations_(reservations),
      relay_(relay) {}

void SshApi::Register(Routes& routes) {
  routes.Route("GET", std::string(protocol::kSshTunnelPath),
               [this](const net::Request& request, const net::PathParams&) {
                 return Tunnel(request);
               });
  routes.Route("GET", std::string(protocol::kSshChannelRoute),
               [this](const net::Request& request, const net::PathParams& params) {
                 return AgentChannel(request, params.at("id"));
               });
  routes.UserRoute("GET", std::string(protocol::kSshConnectRoute), Access::kAnyUser,
                   [this](const net::Request& request, const net::PathParams& params,
                          const RequestContext& caller) {
                     return Connect(params.at("id"), request, caller);
                   });
  routes.UserRoute("GET", std::string(protocol::kSshReadinessRoute), Access::kAnyUser,
                   [this](const net::Request&, const net::PathParams& params,
                          const RequestContext& caller) {
                     return Readiness(params.at("id"), caller);
                   });
}

net::Response SshApi::Tunnel(const net::Request& request) {
  if (auto refusal = RequireUpgrade(request, protocol::kSshTunnelSubprotocol)) return *refusal;
  auto authenticated = workspace_agent_.Authenticate(request);
  if (auto* refusal = std::get_if<net::Response>(&authenticated)) return std::move(*refusal);
  Offer offer = std::get<WorkspaceAgentApi::Caller>(authenticated).offer;
  if (!offer.execution.ssh_enabled) {
    return ErrorResponse(409, protocol::kSshDisabledCode,
                         "SSH is disabled for offer " + offer.id +
                             "; commands keep working. The offer's owner enables it with "
                             "ssh_enabled in POST /api/v1/offers/" + offer.id + "/execution");
  }
  presence_.Seen(offer.connection_id, clock_.Now());
  net::WebSocketOptions options;
  options.max_message_bytes = protocol::kMaxSshControlMessageBytes;
  options.idle_timeout = protocol::kTunnelIdleTimeout;
  return net::AcceptWebSocket(
      std::string(protocol::kSshTunnelSubprotocol),
      [this, offer](std::unique_ptr<net::WebSocket> socket) {
        relay_.ServeTunnel(offer, std::move(socket));
      },
      options);
}

net::Response SshApi::AgentChannel(const net::Request& request, const std::string& channel_id) {
  if (auto refusal = RequireUpgrade(request, protocol::kSshChannelSubprotocol)) return *refusal;
  if (auto limited = guard_.CheckAddress(request.remote_address)) return std::move(*limited);
  std::optional<Secret> token = BearerToken(request);
  Status claimed = token ? relay_.ClaimAgentChannel(channel_id, *token)
                         : UnauthenticatedError("send the open message's channel credential as "
                                                "\"Authorization: Bearer chn_...\"");
  if (!claimed.ok()) {
    // Every refusal alike: which channels exist is not the caller's to learn.
    const std::string_view reason = token ? "invalid_token" : "missing_token";
    if (auto limited = guard_.Refused({"channel_credential", reason, request.remote_address, "",
                                       "", token.has_value(), false})) {
      return std::move(*limited);
    }
    log_.Warn("ssh data channel refused",
              {{"reason", reason}, {"remote_address", request.remote_address}});
    return UnauthorizedResponse(reason, claimed.message());
  }
  return net::AcceptWebSocket(
      std::string(protocol::kSshChannelSubprotocol),
      [this, channel_id](std::unique_ptr<net::WebSocket> socket) {
        relay_.ServeAgentChannel(channel_id, std::move(socket));
      },
      ChannelOptions());
}

SshReadiness SshApi::ReadinessOf(const Reservation& reservation, const Offer& offer,
                                 const SshRelayView& view) const {
  auto not_ready = [](std::string_view code, std::string reason) {
    return SshReadiness{false, std::string(code), std::move(reason)};
  };
  if (!offer.execution.ssh_enabled) {
    return not_ready(protocol::kSshDisabledCode,
                     "SSH is disabled for this offer; commands keep working");
  }
  const WallTime now = clock_.Now();
  if (reservation.state != protocol::kReservationRunning || now >= reservation.expires_at) {
    return not_ready(protocol::kSshNotReadyCode,
                     "the workspace is not running (the reservation is " + reservation.state +
                         (reservation.state == protocol::kReservationRunning ? ", past its expiry"
                                                                             : "") + ")");
  }
  if (!view.refused_host_key_fingerprint.empty()) {
    return not_ready(protocol::kSshNotReadyCode,
                     "host key changed: the workspace reported " +
                         view.refused_host_key_fingerprint +
                         ", not the pinned key; SSH stays off for this reservation");
  }
  if (!view.tunnel_connected) {
    return not_ready(protocol::kAgentUnavailableCode,
                     "the workspace controller's SSH tunnel is not connected");
  }
  if (!reservation.ssh_reported_at) {
    return not_ready(protocol::kSshNotReadyCode,
                     "no SSH capability report from the workspace yet");
  }
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(now - *reservation.ssh_reported_at);
  if (age >= protocol::kCapabilityFreshness) {
    return not_ready(protocol::kSshNotReadyCode,
                     "no SSH capability report in the last " +
                         std::to_string(protocol::kCapabilityFreshness.count()) +
                         " s (the last was " + std::to_string(age.count()) + " s ago)");
  }
  if (!reservation.ssh_handover_at) {
    return not_ready(protocol::kSshNotReadyCode, "the session handover is not confirmed yet");
  }
  return SshReadiness{true, "", ""};
}

Result<net::Response> SshApi::Readiness(const std::string& id, const RequestContext& caller) {
  UPLINK_ASSIGN_OR_RETURN(Reservation reservation, reservations_.OwnedReservation(id, caller));
  UPLINK_ASSIGN_OR_RETURN(Offer offer, store_.GetOffer(reservation.offer_id));
  const SshRelayView view = relay_.View(reservation);
  const SshReadiness readiness = ReadinessOf(reservation, offer, view);
  json::object body{
      {"state", readiness.ready ? "ready" : "unavailable"},
      {"reason", readiness.reason},
      {"user", kWorkspaceUser},
      {"reported_at", OptionalTime(reservation.ssh_reported_at)},
      {"handover_confirmed_at", OptionalTime(reservation.ssh_handover_at)},
      {"transfer", json::object{{"budget_bytes", reservation.transfer_budget_bytes},
                                {"used_bytes", reservation.transfer_used_bytes}}},
      {"open_channels", view.open_channels}};
  if (!reservation.ssh_host_key.empty()) {
    auto key = protocol::ParseSshPublicKey(reservation.ssh_host_key);
    if (key.ok()) body["host_key_fingerprint"] = key->fingerprint;
    // The key itself only when ready: it goes into the client's known_hosts.
    if (readiness.ready) body["host_key"] = reservation.ssh_host_key;
  }
  return JsonResponse(200, body);
}

Result<net::Response> SshApi::Connect(const std::string& id, const net::Request& request,
                                      const RequestContext& caller) {
  if (auto refusal = RequireUpgrade(request, protocol::kSshClientSubprotocol)) return *refusal;
  UPLINK_ASSIGN_OR_RETURN(Reservation reservation, reservations_.OwnedReservation(id, caller));
  UPLINK_ASSIGN_OR_RETURN(Offer offer, store_.GetOffer(reservation.offer_id));
  const SshReadiness readiness = ReadinessOf(reservation, offer, relay_.View(reservation));
  if (!readiness.ready) {
    const int status = readiness.code == protocol::kAgentUnavailableCode ? 503 : 409;
    metrics_.Increment("uplink_console_ssh_channels_refused_total", {{"reason", readiness.code}});
    return ErrorResponse(status, readiness.code, readiness.reason);
  }
  std::string grant_id;
  for (const auto& [key, value] : request.QueryParams()) {
    if (key == protocol::kSshGrantQueryParameter) grant_id = value;
  }
  UPLINK_ASSIGN_OR_RETURN(std::vector<SshGrant> grants, store_.ListSshGrants(reservation.id));
  auto grant = std::find_if(grants.begin(), grants.end(),
                            [&](const SshGrant& g) { return g.id == grant_id; });
  if (grant == grants.end() || !grant->LiveAt(clock_.Now())) {
    metrics_.Increment("uplink_console_ssh_channels_refused_total",
                       {{"reason", std::string(protocol::kGrantInvalidCode)}});
    const std::string what =
        grant == grants.end() ? "is not one of this reservation's"
        : grant->revoked_at   ? "was revoked"
                              : "expired at " + FormatRfc3339(grant->expires_at);
    return ErrorResponse(409, protocol::kGrantInvalidCode,
                         "SSH grant " + (protocol::IsSshGrantId(grant_id) ? grant_id
                                                                          : std::string("given")) +
                             " " + what + "; add a key with POST /api/v1/reservations/" +
                             reservation.id + "/ssh-grants and run uplink ssh setup again");
  }
  auto admitted = relay_.AdmitClient(reservation, *grant);
  if (!admitted.ok()) {
    switch (admitted.status().code()) {
      case StatusCode::kResourceExhausted:
        return ErrorResponse(429, protocol::kChannelLimitCode, admitted.status().message());
      case StatusCode::kFailedPrecondition:
        return ErrorResponse(409, protocol::kTransferBudgetExhaustedCode,
                             admitted.status().message());
      case StatusCode::kUnavailable:
        return ErrorResponse(503, protocol::kAgentUnavailableCode, admitted.status().message());
      default:
        return admitted.status();
    }
  }
  return net::AcceptWebSocket(
      std::string(protocol::kSshClientSubprotocol),
      [this, channel_id = admitted->channel_id](std::unique_ptr<net::WebSocket> socket) {
        relay_.ServeClient(channel_id, std::move(socket));
      },
      ChannelOptions());
}

}  // namespace uplink::console
