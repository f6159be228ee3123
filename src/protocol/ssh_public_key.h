// OpenSSH public keys as users paste them ("ssh-ed25519 AAAA… comment"): the console's SSH
// grants (docs/api.md, "SSH grants"), and `uplink ssh setup`, which matches an identity's .pub
// file to a grant and checks the host key it pins (docs/cli.md). Only Ed25519 and ECDSA on NIST P-256, P-384 and P-521 are
// accepted, each parsed in full: the base64 is canonical, the key type inside the blob is the
// one outside, the lengths are exact, and the point is a valid point of its curve.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace uplink::protocol {

inline constexpr size_t kMaxSshKeyCommentBytes = 256;
// The longest accepted line: an ECDSA P-521 key (about 240 characters) and its comment.
inline constexpr size_t kMaxSshPublicKeyLineBytes = 512;

struct SshPublicKey {
  std::string type;         // "ssh-ed25519", "ecdsa-sha2-nistp256", …
  std::string blob;         // the decoded key blob, as the SSH wire format has it
  std::string comment;      // "" when none
  std::string fingerprint;  // "SHA256:…", as ssh-keygen -l prints it
  // "TYPE BASE64" without the comment: the canonical form, for authorized_keys.
  std::string Authorized() const;
};

// InvalidArgument saying what is wrong and what to paste instead.
Result<SshPublicKey> ParseSshPublicKey(std::string_view line);

}  // namespace uplink::protocol
