// SSH access to workspaces (docs/protocol.md, "SSH relay"): the names, limits and control
// messages the console, the workspace controller (`uplink-agent workspace`) and the CLI
// (`uplink ssh proxy`) share. One definition, linked by all three.
//
// Three WebSockets meet in the console's relay:
// - the controller's control tunnel (kSshTunnelPath, exe_ credential, text messages below),
//   one per offer for the controller's whole life;
// - one agent data channel per SSH session (SshChannelPath, a single-use chn_ credential from
//   the `open` message), binary messages = the SSH byte stream from `sshd -i`;
// - the client's channel (SshConnectPath, the user's API key), binary messages = the same
//   stream, to the user's ssh.
//
// Control messages are JSON objects with "type", at most kMaxSshControlMessageBytes of text.
// The decoders are strict: unknown fields, wrong types, bad ids and values out of bounds are
// InvalidArgument naming the field; a message whose type is not known decodes to
// SshUnknownMessage (the receiver logs and skips it, so that a newer peer can add types).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "protocol/credentials.h"

namespace uplink::protocol {

// ---- paths ----------------------------------------------------------------------------------
inline constexpr std::string_view kSshTunnelPath = "/api/v1/agent/workspace/tunnel";
inline constexpr std::string_view kSshChannelPathPrefix = "/api/v1/agent/workspace/channels/";
inline constexpr std::string_view kSshChannelRoute = "/api/v1/agent/workspace/channels/{id}";
std::string SshChannelPath(std::string_view channel_id);
// GET /api/v1/reservations/{id}/ssh/connect?grant=ssg_… (the client) and
// GET /api/v1/reservations/{id}/ssh (readiness, JSON).
inline constexpr std::string_view kSshConnectRoute = "/api/v1/reservations/{id}/ssh/connect";
inline constexpr std::string_view kSshReadinessRoute = "/api/v1/reservations/{id}/ssh";
inline constexpr std::string_view kSshGrantQueryParameter = "grant";
std::string SshConnectPath(std::string_view reservation_id, std::string_view grant_id);
std::string SshReadinessPath(std::string_view reservation_id);

// ---- WebSocket subprotocols -----------------------------------------------------------------
inline constexpr std::string_view kSshTunnelSubprotocol = "uplink.ssh-tunnel.v1";
inline constexpr std::string_view kSshChannelSubprotocol = "uplink.ssh-channel.v1";
inline constexpr std::string_view kSshClientSubprotocol = "uplink.ssh-client.v1";

// ---- ids ------------------------------------------------------------------------------------
// "sch_" / "ssg_" and 16 lower-case hexadecimal digits, from 64 random bits.
inline constexpr std::string_view kSshChannelIdPrefix = "sch_";
inline constexpr std::string_view kSshGrantIdPrefix = "ssg_";
bool IsSshChannelId(std::string_view id);
bool IsSshGrantId(std::string_view id);
std::string NewSshChannelId();
std::string NewSshGrantId();
// The channel credential is kChannelCredentialPrefix ("chn_", protocol/credentials.h) and 43
// base64url characters (256 random bits).
bool IsChannelCredentialShape(std::string_view credential);

// ---- limits and timing ----------------------------------------------------------------------
inline constexpr size_t kMaxSshControlMessageBytes = 64 << 10;  // text, both ways
inline constexpr size_t kMaxSshControlDepth = 4;
inline constexpr size_t kSshDataMessageMaxBytes = 65536;  // binary, both ways, every hop
inline constexpr size_t kMaxAuthorizedKeys = 16;
inline constexpr size_t kMaxAuthorizedKeyLineBytes = 1024;
inline constexpr size_t kMaxHostKeyBytes = 1024;
inline constexpr size_t kMaxSshdVersionBytes = 128;
inline constexpr size_t kMaxOpenFailedMessageBytes = 1024;
// sshd's identification line, "SSH-2.0-…\r\n" (RFC 4253 section 4.2).
inline constexpr size_t kMaxSshIdentificationBytes = 255;

inline constexpr std::chrono::seconds kChannelCredentialLifetime{30};
inline constexpr std::chrono::seconds kCapabilityReportInterval{30};
// Connection setup is offered only while the latest capability report is younger than this.
inline constexpr std::chrono::seconds kCapabilityFreshness{60};
// The console waits this long for the agent's data channel after `open`, and for sshd's
// identification line on a handover probe.
inline constexpr std::chrono::seconds kChannelOpenTimeout{15};
inline constexpr std::chrono::seconds kHandoverTimeout{15};
// The tunnel's keepalive: pings every 60 s, closed after 120 s without a sound (well inside a
// 350 s load-balancer idle timeout).
inline constexpr std::chrono::seconds kTunnelPingInterval{60};
inline constexpr std::chrono::seconds kTunnelIdleTimeout{120};
inline constexpr std::int64_t kDefaultChannelsPerGrant = 4;
// Session channels one reservation may have open at once, whatever its grants (revoked ones
// included): the controller's channels are shared by every reservation of the offer.
inline constexpr std::int64_t kDefaultChannelsPerReservation = 16;
inline constexpr std::chrono::seconds kDefaultSshIdleTimeout{1800};

// ---- refusals (HTTP error codes, before the upgrade) ----------------------------------------
inline constexpr std::string_view kSshDisabledCode = "ssh_disabled";          // 409
inline constexpr std::string_view kSshNotReadyCode = "ssh_not_ready";         // 409
inline constexpr std::string_view kGrantInvalidCode = "grant_invalid";        // 409
inline constexpr std::string_view kChannelLimitCode = "channel_limit";        // 429
inline constexpr std::string_view kTransferBudgetExhaustedCode =
    "transfer_budget_exhausted";                                              // 409
inline constexpr std::string_view kAgentUnavailableCode = "agent_unavailable";  // 503
inline constexpr std::string_view kClusterMismatchCode = "cluster_mismatch";    // 409

// ---- close reasons (after the upgrade) ------------------------------------------------------
// The console to the client and the agent's data channel: 1008.
std::string TransferBudgetCloseReason(std::int64_t used_bytes, std::int64_t budget_bytes,
                                      std::string_view reservation_id);
// 1001: the reservation was stopped, expired or passed its expiry.
inline constexpr std::string_view kReservationEndedReason = "the reservation ended";
// 1000: no byte either way for the idle timeout.
std::string IdleCloseReason(std::chrono::seconds idle);
// 1008, to the older of two tunnels of one offer.
inline constexpr std::string_view kTunnelReplacedReason = "replaced by a newer tunnel";
// 1000, the agent on its data channel when sshd ends.
std::string SshdExitedReason(int exit_code);

// ---- control messages -----------------------------------------------------------------------
inline constexpr std::string_view kSshCapabilityType = "capability";
inline constexpr std::string_view kSshOpenFailedType = "open_failed";
inline constexpr std::string_view kSshOpenType = "open";
inline constexpr std::string_view kSshKeysType = "keys";

inline constexpr std::string_view kSshPurposeSession = "session";    // a client's channel
inline constexpr std::string_view kSshPurposeHandover = "handover";  // the console's probe

// agent → console: the workspace of `reservation_id` runs sshd with this host key. Sent when
// the workspace is Running and its host key exists, then every kCapabilityReportInterval.
struct SshCapability {
  std::string reservation_id;
  std::string host_key;  // "ssh-ed25519 AAAA…" (a comment after it is allowed)
  std::string sshd;      // "OpenSSH_9.2p1"; "" when unknown
};

// agent → console: the channel could not be opened; the console closes the client's channel
// with `message`.
struct SshOpenFailed {
  std::string channel;
  std::string message;
};

// console → agent: write `authorized_keys`, start `sshd -i`, then open the data channel with
// `credential`. For purpose kSshPurposeHandover `grant_id` is "" (the probe reads sshd's
// identification line only and authenticates as nobody).
struct SshOpen {
  std::string channel;
  std::string reservation_id;
  std::string grant_id;
  std::string credential;  // chn_…; single use, valid for kChannelCredentialLifetime
  std::vector<std::string> authorized_keys;  // "TYPE BASE64 ssg_…", the grants valid now
  std::string purpose = std::string(kSshPurposeSession);
};

// console → agent: the grants valid now changed; rewrite authorized_keys at once.
struct SshKeys {
  std::string reservation_id;
  std::vector<std::string> authorized_keys;
};

// A well-formed message of a type this end does not know: logged and skipped.
struct SshUnknownMessage {
  std::string type;  // as sent (a type over 64 bytes is refused instead)
};

using SshAgentMessage = std::variant<SshCapability, SshOpenFailed, SshUnknownMessage>;
using SshConsoleMessage = std::variant<SshOpen, SshKeys, SshUnknownMessage>;

// Each encoder returns the message's text, as sent.
std::string EncodeSshCapability(const SshCapability& message);
std::string EncodeSshOpenFailed(const SshOpenFailed& message);
std::string EncodeSshOpen(const SshOpen& message);
std::string EncodeSshKeys(const SshKeys& message);

// What the console reads from the tunnel, and what the controller reads from it.
// InvalidArgument (naming the field) for text that is not a JSON object within the limits, a
// missing or non-string "type", or a known type with a bad field.
Result<SshAgentMessage> DecodeSshAgentMessage(std::string_view text);
Result<SshConsoleMessage> DecodeSshConsoleMessage(std::string_view text);

// The key types a host key or an authorized key may have: Ed25519 and ECDSA on NIST curves.
bool IsAllowedSshKeyType(std::string_view type);
// An authorized_keys line the console sends: an allowed type, one space, base64, and an
// optional comment; printable ASCII only (no options such as command=, no line breaks), at
// most kMaxAuthorizedKeyLineBytes.
bool IsAuthorizedKeyLine(std::string_view line);

}  // namespace uplink::protocol
