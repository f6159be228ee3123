#include "console/auth/credentials.h"

#include "common/crypto.h"
#include "common/text.h"

namespace uplink::console {
namespace {

constexpr size_t kRandomBytes = 32;          // 256 bits
constexpr size_t kRandomChars = 43;          // base64url of 32 bytes, unpadded
constexpr size_t kLookupRandomChars = 8;     // 48 bits: finds the row, reveals nothing useful

bool IsBase64Url(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

}  // namespace

MintedCredential MintCredential(std::string_view kind) {
  Secret token = NewToken(kind, kRandomBytes);
  std::string prefix = token.Reveal().substr(0, kind.size() + kLookupRandomChars);
  std::string hash = Sha256Hex(token.Reveal());
  return MintedCredential{std::move(token), std::move(prefix), std::move(hash)};
}

std::optional<std::string> LookupPrefix(const Secret& presented, std::string_view kind) {
  std::string_view token = presented.Reveal();
  if (token.size() != kind.size() + kRandomChars || !token.starts_with(kind)) return std::nullopt;
  for (char c : token.substr(kind.size())) {
    if (!IsBase64Url(c)) return std::nullopt;
  }
  return std::string(token.substr(0, kind.size() + kLookupRandomChars));
}

bool MatchesHash(const Secret& presented, std::string_view stored_hash) {
  return Sha256HexEquals(presented.Reveal(), stored_hash);
}

std::optional<Secret> BearerToken(const net::Request& request) {
  auto header = request.headers.Get("Authorization");
  if (!header) return std::nullopt;
  constexpr std::string_view kScheme = "Bearer ";
  if (header->size() <= kScheme.size() || !StartsWithIgnoringAsciiCase(*header, kScheme)) {
    return std::nullopt;
  }
  std::string_view token = header->substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty()) return std::nullopt;
  return Secret(std::string(token));
}

}  // namespace uplink::console
