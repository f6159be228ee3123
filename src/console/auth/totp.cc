#include "console/auth/totp.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <cctype>

#include "common/crypto.h"
#include "common/text.h"
#include "net/http.h"

namespace uplink::console {
namespace {

constexpr char kBase32Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
constexpr size_t kRecoveryCodeBytes = 10;  // 80 bits: 16 base32 characters
constexpr size_t kRecoveryCodeChars = 16;
constexpr size_t kRecoveryGroupChars = 4;

int Base32Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= '2' && c <= '7') return c - '2' + 26;
  return -1;
}

}  // namespace

std::string Base32Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 8 + 4) / 5);
  std::uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char byte : bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += kBase32Alphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kBase32Alphabet[(buffer << (5 - bits)) & 31];
  return out;
}

Result<std::string> Base32Decode(std::string_view text) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    if (c == ' ' || c == '=') continue;
    int value = Base32Value(c);
    if (value < 0) {
      return InvalidArgumentError("base32 text may hold only A-Z and 2-7");
    }
    buffer = (buffer << 5) | static_cast<std::uint32_t>(value);
    bits += 5;
    if (bits >= 8) {
      out += static_cast<char>((buffer >> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return out;
}

std::string HotpCode(std::string_view key, std::uint64_t counter, int digits) {
  std::array<unsigned char, 8> message;
  for (int i = 7; i >= 0; --i) {
    message[i] = static_cast<unsigned char>(counter & 0xff);
    counter >>= 8;
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac;
  unsigned int mac_size = 0;
  ::HMAC(EVP_sha1(), key.data(), static_cast<int>(key.size()), message.data(), message.size(),
         mac.data(), &mac_size);
  // RFC 4226 section 5.3, dynamic truncation: 31 bits from the offset the last nibble names.
  unsigned offset = mac[mac_size - 1] & 0x0f;
  std::uint32_t binary = (static_cast<std::uint32_t>(mac[offset] & 0x7f) << 24) |
                         (static_cast<std::uint32_t>(mac[offset + 1]) << 16) |
                         (static_cast<std::uint32_t>(mac[offset + 2]) << 8) |
                         static_cast<std::uint32_t>(mac[offset + 3]);
  std::uint32_t modulus = 1;
  for (int i = 0; i < digits; ++i) modulus *= 10;
  std::string code = std::to_string(binary % modulus);
  return std::string(static_cast<size_t>(digits) - code.size(), '0') + code;
}

std::int64_t TotpStep(WallTime at) {
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count();
  // Floor division: a time before the epoch is in a negative step, not in step 0.
  std::int64_t period = kTotpPeriod.count();
  return seconds >= 0 ? seconds / period : -((-seconds + period - 1) / period);
}

Status CheckTotpCodeFormat(std::string_view code) {
  bool digits_only = true;
  for (char c : code) digits_only = digits_only && c >= '0' && c <= '9';
  if (code.size() != static_cast<size_t>(kTotpDigits) || !digits_only) {
    return InvalidArgumentError(
        "code must be the 6 digits your authenticator app shows now (no spaces), or use "
        "recovery_code for a recovery code");
  }
  return Status::Ok();
}

TotpCheck CheckTotpCode(const Secret& key, std::string_view code, WallTime now,
                        std::int64_t last_used_step) {
  std::int64_t current = TotpStep(now);
  TotpCheck check;
  // The latest matching step wins, so that a code never counts as a replay of an older step
  // whose code happens to be the same digits.
  for (std::int64_t step = current - 1; step <= current + 1; ++step) {
    if (step < 0) continue;
    std::string expected = HotpCode(key.Reveal(), static_cast<std::uint64_t>(step));
    if (ConstantTimeEquals(expected, code)) {
      check.step = step;
      check.verdict = step > last_used_step ? TotpVerdict::kAccepted : TotpVerdict::kReused;
    }
  }
  return check;
}

std::string OtpauthUri(std::string_view issuer, std::string_view account, const Secret& key) {
  std::string issuer_encoded = net::PercentEncode(issuer);
  return "otpauth://totp/" + issuer_encoded + ":" + net::PercentEncode(account) +
         "?secret=" + Base32Encode(key.Reveal()) + "&issuer=" + issuer_encoded +
         "&algorithm=SHA1&digits=" + std::to_string(kTotpDigits) +
         "&period=" + std::to_string(kTotpPeriod.count());
}

std::vector<MintedRecoveryCode> MintRecoveryCodes(int count) {
  std::vector<MintedRecoveryCode> codes;
  for (int i = 0; i < count; ++i) {
    std::string random = Base32Encode(RandomBytes(kRecoveryCodeBytes));
    for (char& c : random) c = AsciiLower(c);
    Secret canonical(std::move(random));
    std::string shown;
    for (size_t at = 0; at < kRecoveryCodeChars; at += kRecoveryGroupChars) {
      if (!shown.empty()) shown += '-';
      shown += canonical.Reveal().substr(at, kRecoveryGroupChars);
    }
    codes.push_back({Secret(std::move(shown)), Sha256Hex(canonical.Reveal())});
  }
  return codes;
}

Result<Secret> CanonicalRecoveryCode(std::string_view typed) {
  std::string canonical;
  bool valid = typed.size() <= 64;
  for (char c : typed.substr(0, 64)) {
    if (c == '-' || c == ' ') continue;
    if (Base32Value(c) < 0) valid = false;
    canonical += AsciiLower(c);
  }
  Secret result(std::move(canonical));
  if (!valid || result.Reveal().size() != kRecoveryCodeChars) {
    return InvalidArgumentError(
        "recovery_code must be one of the recovery codes shown when two-factor sign-in was set "
        "up: 16 letters and digits, as xxxx-xxxx-xxxx-xxxx");
  }
  return result;
}

bool RecoveryCodeMatches(const Secret& canonical, std::string_view code_hash) {
  return Sha256HexEquals(canonical.Reveal(), code_hash);
}

}  // namespace uplink::console
