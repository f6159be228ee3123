// Small cryptographic helpers: random tokens, digests, encodings.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/secret.h"
#include "common/status.h"

namespace uplink {

// Cryptographically secure random bytes; aborts if the system RNG fails (nothing safe can
// be done without it).
std::string RandomBytes(size_t count);

// prefix + base64url(no padding) of `random_bytes` random bytes, e.g. "agt_" + 43 chars for
// 32 bytes (256 bits).
Secret NewToken(std::string_view prefix, size_t random_bytes = 32);

// Lower-case hex SHA-256 of the input.
std::string Sha256Hex(std::string_view data);
// Sha256Hex(data) == hex, compared in constant time and without allocating: every
// authenticated request checks its token this way.
bool Sha256HexEquals(std::string_view data, std::string_view hex);

std::string HexEncode(std::string_view bytes);
// Writes 2 * size lower-case hex digits to out.
void HexEncodeTo(const unsigned char* bytes, size_t size, char* out);
std::string Base64Encode(std::string_view bytes);
std::string Base64UrlEncode(std::string_view bytes);  // no padding
Result<std::string> Base64Decode(std::string_view text);     // standard alphabet, padding optional
Result<std::string> Base64UrlDecode(std::string_view text);  // url alphabet, padding optional

}  // namespace uplink
