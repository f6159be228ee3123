// The bearer credentials the console mints, by the prefix that names their kind: what the
// console checks a presented credential against, what the CLI and the agent recognise (and
// redact) in what they handle. A credential is its prefix plus 256 random bits in base64url
// (console/auth/credentials.h mints and checks them).
#pragma once

#include <string_view>

namespace uplink::protocol {

inline constexpr std::string_view kAgentTokenPrefix = "agt_";    // a connection's agent token
inline constexpr std::string_view kApiKeyPrefix = "uk_";         // a user's API key
inline constexpr std::string_view kSessionPrefix = "skt_";       // a sign-in session token
inline constexpr std::string_view kHandoverCodePrefix = "hoc_";  // a one-time handover code
// An offer's execution credential (protocol/workspace.h): the workspace controller's, separate
// from the connection's agt_ token, so that revoking one leaves the other working.
inline constexpr std::string_view kExecutionCredentialPrefix = "exe_";
// One SSH data channel's credential (protocol/ssh.h): minted by the console for one channel,
// single use, valid 30 s, held in memory only as its SHA-256. Never the exe_ credential.
inline constexpr std::string_view kChannelCredentialPrefix = "chn_";

}  // namespace uplink::protocol
