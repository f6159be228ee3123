// Two-factor sign-in codes: TOTP (RFC 6238 over RFC 4226's HOTP: HMAC-SHA1, 30-second steps
// from the Unix epoch, 6 digits), the otpauth:// URI that authenticator apps scan, and the
// one-time recovery codes that stand in for a lost authenticator (docs/security.md,
// "Two-factor sign-in").
//
// A TOTP secret must be recoverable to check codes, so unlike every other credential it is
// stored sealed (secret_box.h), not hashed. Recovery codes are random and only compared, so
// they are hashed like tokens.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/secret.h"
#include "common/status.h"
#include "common/time.h"

namespace uplink::console {

inline constexpr int kTotpDigits = 6;
inline constexpr std::chrono::seconds kTotpPeriod{30};
// RFC 4226 asks for at least 128 bits and recommends 160: the size of an HMAC-SHA1 key block's
// useful part, and what authenticator apps expect.
inline constexpr size_t kTotpSecretBytes = 20;
inline constexpr int kRecoveryCodeCount = 10;

// RFC 4648 base32, upper-case, without padding (what otpauth URIs and apps use).
std::string Base32Encode(std::string_view bytes);
// Case-insensitive; spaces and padding are ignored. InvalidArgument for anything else.
Result<std::string> Base32Decode(std::string_view text);

// RFC 4226: the `digits`-digit (6-8) code of `key` at `counter`, zero-padded.
std::string HotpCode(std::string_view key, std::uint64_t counter, int digits = kTotpDigits);

// RFC 6238 with T0 = 0 and a 30-second step: the step `at` falls in.
std::int64_t TotpStep(WallTime at);

// InvalidArgument (saying what a code looks like) unless `code` is exactly six ASCII digits.
Status CheckTotpCodeFormat(std::string_view code);

enum class TotpVerdict {
  kAccepted,  // matches a step in the window that was not used before
  kReused,    // matches, but its step is at or before the last one used: a replay
  kWrong,     // matches no step in the window
};

struct TotpCheck {
  TotpVerdict verdict = TotpVerdict::kWrong;
  std::int64_t step = 0;  // the matching step (kAccepted, kReused)
};

// Checks a well-formed `code` against the steps before, at and after `now`'s (a clock up to
// 30 s off on either side still works). Every step's code is computed and compared in
// constant time, whatever matches. A step at or before `last_used_step` is a replay: each code
// works once, and once a later code was used, earlier ones never work again.
TotpCheck CheckTotpCode(const Secret& key, std::string_view code, WallTime now,
                        std::int64_t last_used_step);

// otpauth://totp/ISSUER:ACCOUNT?secret=...&issuer=ISSUER&algorithm=SHA1&digits=6&period=30, the
// Key Uri Format that authenticator apps read from a QR code; label parts percent-encoded.
std::string OtpauthUri(std::string_view issuer, std::string_view account, const Secret& key);

// A fresh recovery code: 80 random bits as 16 base32 characters, shown as
// "abcd-efgh-ijkl-mnop" (the form people type back), and the hash that is stored.
struct MintedRecoveryCode {
  Secret code;
  std::string code_hash;  // lower-case hex SHA-256 of the canonical form
};
std::vector<MintedRecoveryCode> MintRecoveryCodes(int count = kRecoveryCodeCount);

// A typed recovery code in its canonical form (16 lower-case base32 characters: case, spaces
// and hyphens do not matter), or InvalidArgument saying what one looks like.
Result<Secret> CanonicalRecoveryCode(std::string_view typed);

// Constant-time comparison of a canonical recovery code with a stored hash.
bool RecoveryCodeMatches(const Secret& canonical, std::string_view code_hash);

}  // namespace uplink::console
