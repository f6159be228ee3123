// SHA-256 in its own file: the agent never hashes, and without this file in its link it does
// not need libsodium.
#include <sodium/crypto_hash_sha256.h>

#include <array>

#include "common/crypto.h"

namespace uplink {
namespace {

using Sha256HexDigits = std::array<char, 2 * crypto_hash_sha256_BYTES>;

Sha256HexDigits Sha256HexArray(std::string_view data) {
  // libsodium rather than OpenSSL 3's SHA256(), whose implicit algorithm fetch costs more
  // than the hash itself on every authenticated request.
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  Sha256HexDigits hex;
  HexEncodeTo(digest, sizeof digest, hex.data());
  return hex;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  Sha256HexDigits hex = Sha256HexArray(data);
  return std::string(hex.data(), hex.size());
}

bool Sha256HexEquals(std::string_view data, std::string_view hex) {
  Sha256HexDigits computed = Sha256HexArray(data);
  return ConstantTimeEquals(std::string_view(computed.data(), computed.size()), hex);
}

}  // namespace uplink
