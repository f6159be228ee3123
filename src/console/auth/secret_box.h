// Sealing a secret that must be recoverable (a TOTP secret) before it is stored.
//
// Every other credential is kept as a hash, but checking a TOTP code needs the secret itself.
// It is sealed with XChaCha20-Poly1305 (libsodium's AEAD, a random 192-bit nonce per seal)
// under a 256-bit key kept in its own file beside the database (docs/security.md,
// "Two-factor sign-in"), so that a copy of the database alone (a dump, a backup, a stolen
// file) yields no usable secret. The sealed text is bound to a context (the user's id): a
// sealed secret copied onto another user's row does not open.
#pragma once

#include <string>
#include <string_view>

#include "common/secret.h"
#include "common/status.h"

namespace uplink::console {

class SecretBox {
 public:
  static constexpr size_t kKeyBytes = 32;

  // `key` is kKeyBytes bytes, or empty for a random key that lives only in this process
  // (tests): secrets sealed under it do not survive a restart. Another size is a bug in the
  // caller (keys come from LoadOrCreateKeyFile): it aborts.
  explicit SecretBox(const Secret& key);

  // "v1." + base64url(nonce || ciphertext || tag).
  std::string Seal(const Secret& plaintext, std::string_view context) const;
  // DataLoss when `sealed` is malformed, was sealed under another key or for another context,
  // or was altered.
  Result<Secret> Open(std::string_view sealed, std::string_view context) const;

 private:
  Secret key_;
};

// The key in `path`: created (kKeyBytes random bytes, mode 0600, O_EXCL) when the file does
// not exist. FailedPrecondition for a file that is not a regular file, that group or others
// may read or write, or that does not hold exactly kKeyBytes bytes, saying what to do.
Result<Secret> LoadOrCreateKeyFile(const std::string& path);
// The key in `path`, which must exist: replicas on one PostgreSQL database share the key made
// by `uplink-console init`, since each opens what the others sealed.
Result<Secret> LoadKeyFile(const std::string& path);

}  // namespace uplink::console
