// Bearer credentials: user API keys ("uk_…"), session tokens ("skt_…"), agent connection
// tokens ("agt_…") and handover codes ("hoc_…"), named by the prefixes of
// protocol/credentials.h.
//
// A credential is a kind prefix plus 256 random bits in base64url. It is shown once, when
// minted; the store keeps only its SHA-256 hash and a short lookup prefix (the kind prefix
// plus the first random characters), which is not secret and finds the candidate rows.
// Verification compares hashes in constant time. A presented credential is held as a
// Secret and never reaches a log line or an error message.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/secret.h"
#include "net/http.h"
#include "protocol/credentials.h"

namespace uplink::console {

struct MintedCredential {
  Secret token;               // shown to the user once
  std::string lookup_prefix;  // stored, shown ("agt_Xy12Ab3c")
  std::string token_hash;     // stored
};

MintedCredential MintCredential(std::string_view kind);

// The lookup prefix of a presented credential of `kind`, or nullopt when it cannot be one
// (wrong kind, wrong length, characters outside base64url).
std::optional<std::string> LookupPrefix(const Secret& presented, std::string_view kind);

// Constant-time comparison of the presented credential's hash with a stored hash.
bool MatchesHash(const Secret& presented, std::string_view stored_hash);

// The token from "Authorization: Bearer <token>"; nullopt when the header is absent or
// not a bearer credential.
std::optional<Secret> BearerToken(const net::Request& request);

}  // namespace uplink::console
