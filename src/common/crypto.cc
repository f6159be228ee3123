#include "common/crypto.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace uplink {
namespace {

constexpr char kStdAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kUrlAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Encode(std::string_view bytes, const char* alphabet, bool pad) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto b = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  for (; i + 3 <= bytes.size(); i += 3) {
    unsigned v = (b(i) << 16) | (b(i + 1) << 8) | b(i + 2);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest == 1) {
    unsigned v = b(i) << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    if (pad) out += "==";
  } else if (rest == 2) {
    unsigned v = (b(i) << 16) | (b(i + 1) << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    if (pad) out += '=';
  }
  return out;
}

Result<std::string> Decode(std::string_view text, const char* alphabet) {
  std::array<int, 256> lookup;
  lookup.fill(-1);
  for (int k = 0; k < 64; ++k) lookup[static_cast<unsigned char>(alphabet[k])] = k;
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return InvalidArgumentError("base64 text has an impossible length");
  std::string out;
  out.reserve(text.size() * 3 / 4);
  unsigned acc = 0;
  int bits = 0;
  for (unsigned char c : text) {
    int v = lookup[c];
    if (v < 0) return InvalidArgumentError("base64 text contains a character outside its alphabet");
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace

// The kernel's generator, which OpenSSL seeds from too: RAND_bytes would start OpenSSL's
// DRBG and providers, about 2 MiB of resident memory in an agent that never speaks TLS.
std::string RandomBytes(size_t count) {
  std::string out(count, '\0');
  size_t filled = 0;
  while (filled < count) {
    const ssize_t got = ::getrandom(out.data() + filled, count - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      std::fputs("fatal: the system random number generator failed\n", stderr);
      std::abort();
    }
    filled += static_cast<size_t>(got);
  }
  return out;
}

Secret NewToken(std::string_view prefix, size_t random_bytes) {
  std::string token(prefix);
  token += Base64UrlEncode(RandomBytes(random_bytes));
  return Secret(std::move(token));
}

void HexEncodeTo(const unsigned char* bytes, size_t size, char* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
}

std::string HexEncode(std::string_view bytes) {
  std::string out(bytes.size() * 2, '\0');
  HexEncodeTo(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), out.data());
  return out;
}

std::string Base64Encode(std::string_view bytes) { return Encode(bytes, kStdAlphabet, true); }
std::string Base64UrlEncode(std::string_view bytes) { return Encode(bytes, kUrlAlphabet, false); }
Result<std::string> Base64Decode(std::string_view text) { return Decode(text, kStdAlphabet); }
Result<std::string> Base64UrlDecode(std::string_view text) { return Decode(text, kUrlAlphabet); }

}  // namespace uplink
